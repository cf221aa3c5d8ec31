/* jit: kernel templates (the .cu files under src/gpu/kernels, embedded in the binary) rendered
 * for concrete parameters, compiled with NVRTC for the device's exact architecture, cached on disk
 * (kcache.h) and loaded; a function that spills (local memory > 0) is rejected so the caller
 * can try its next variant. */
#ifndef BRASA_GPU_JIT_H
#define BRASA_GPU_JIT_H
#include <stdbool.h>
#include "gpu/drv.h"

struct jit_def {
    const char *name;
    long long value; /* (64 bits everywhere: BRASA_TL is a device address) */
};

struct jit {
    const struct drv *d;
    int arch;              /* 90 for sm_90 */
    int driver_ver;
    char dev_name[128];
    char cache_dir[1024];  /* "" = no disk cache */
    char keep_dir[1024];   /* BRASA_GPU_KEEP: each module's source and CUBIN kept here ("": no) */
    bool lineinfo;         /* -lineinfo (for compute-sanitizer reports) */
    bool verbose;
    long long tl;          /* BRASA_GPU_TIMELINE's buffer (device address; 0: none), defined
                            * as BRASA_TL in every module (port.cuh tl_stamp) */
    /* telemetry */
    double compile_s, load_s;
    int n_compiled, n_cached;
};

/* Rendered source: "#define NAME value" per parameter, then the template's text. */
brasa_status jit_render(const char *tmpl, const struct jit_def *defs, int n, char **out,
                        struct brasa_err *err);
/* jit_compile's flags: line information (for compute-sanitizer reports); a compile check,
 * not code to run (the machine code made without optimization: the same checks of every
 * instruction for the architecture, in a fraction of the time) */
#define JIT_LINEINFO 1u
#define JIT_CHECK 2u
/* Compiles a rendered source to a CUBIN for sm_<arch> (needs only NVRTC, not a GPU). */
brasa_status jit_compile(const struct drv *d, const char *src, const char *tmpl, int arch,
                         unsigned flags, void **image, size_t *size, struct brasa_err *err);
/* Render + disk cache + compile + load. */
brasa_status jit_module(struct jit *j, const char *tmpl, const struct jit_def *defs, int n,
                        CUmodule *mod, struct brasa_err *err);
/* Looks a function up and rejects it if it spills: BRASA_EUNSUPPORTED names the function and
 * its local bytes. regs and local may be NULL; with local non-NULL nothing is rejected and
 * the local bytes are returned (kernels whose only local memory is the slow path of sinf/cosf
 * range reduction, which no variant avoids). */
brasa_status jit_function(struct jit *j, CUmodule mod, const char *name, CUfunction *fn, int *regs,
                          int *local, struct brasa_err *err);

#endif
