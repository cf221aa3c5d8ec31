/* jit: render, compile (NVRTC), cache and load kernel templates. */
#include "gpu/jit.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/embed.h"
#include "core/platform.h"
#include "gpu/drv_hip.h"
#include "gpu/kcache.h"

brasa_status jit_render(const char *tmpl, const struct jit_def *defs, int n, char **out,
                        struct brasa_err *err)
{
    *out = NULL;
    const struct embedded_file *f = embedded_find(tmpl);
    if (!f)
        return brasa_fail(err, BRASA_ENOTFOUND, "kernel template %s is not in this build", tmpl);
    size_t cap = f->size + 64 * (size_t)n + 64;
    char *s = malloc(cap);
    if (!s)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    size_t len = 0;
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(s + len, cap - len, "#define %.40s %lld\n", defs[i].name,
                                defs[i].value);
    len += (size_t)snprintf(s + len, cap - len, "#line 1 \"%s\"\n", tmpl);
    memcpy(s + len, f->data, f->size + 1);
    *out = s;
    return BRASA_OK;
}

/* The .cuh files of the build, offered to NVRTC as headers. */
static int collect_headers(const char **names, const char **srcs, int cap)
{
    int n = 0;
    for (const struct embedded_file *f = embedded_files; f->path && n < cap; f++) {
        size_t l = strlen(f->path);
        if (l > 4 && strcmp(f->path + l - 4, ".cuh") == 0) {
            const char *slash = strrchr(f->path, '/');
            names[n] = slash ? slash + 1 : f->path;
            srcs[n] = f->data;
            n++;
        }
    }
    return n;
}

brasa_status jit_compile(const struct drv *d, const char *src, const char *tmpl, int arch,
                         unsigned flags, void **image, size_t *size, struct brasa_err *err)
{
    *image = NULL;
    const char *hn[16], *hs[16];
    int nh = collect_headers(hn, hs, 16);
    nvrtcProgram prog;
    nvrtcResult r = d->nvrtcCreateProgram(&prog, src, tmpl, nh, hs, hn);
    if (r != 0)
        return brasa_fail(err, BRASA_EDEVICE, "nvrtcCreateProgram(%s): %s", tmpl,
                          d->nvrtcGetErrorString(r));
    char archopt[32];
    const char *opts[8];
    int nopt = drv_rtc_options(d, arch, flags, opts, archopt, sizeof archopt);
    r = d->nvrtcCompileProgram(prog, nopt, opts);
    brasa_status st = BRASA_OK;
    if (r != 0) {
        size_t ls = 0;
        d->nvrtcGetProgramLogSize(prog, &ls);
        char *log = malloc(ls + 1);
        if (log) {
            log[0] = 0;
            d->nvrtcGetProgramLog(prog, log);
            log[ls] = 0;
        }
        st = brasa_fail(err, BRASA_EDEVICE, "compiling %s for sm_%d failed: %.380s", tmpl, arch,
                        log ? log : d->nvrtcGetErrorString(r));
        free(log);
    } else {
        size_t n = 0;
        void *buf = NULL;
        if ((r = d->nvrtcGetCUBINSize(prog, &n)) != 0 || n == 0 || !(buf = malloc(n)) ||
            (r = d->nvrtcGetCUBIN(prog, buf)) != 0) {
            free(buf);
            st = brasa_fail(err, BRASA_EDEVICE, "nvrtcGetCUBIN(%s) failed", tmpl);
        } else {
            *image = buf;
            *size = n;
        }
    }
    d->nvrtcDestroyProgram(&prog);
    return st;
}

brasa_status jit_module(struct jit *j, const char *tmpl, const struct jit_def *defs, int n,
                        CUmodule *mod, struct brasa_err *err)
{
    char *src;
    struct jit_def all[32];
    if (j->tl) { /* the timeline's buffer, one definition more */
        if (n >= 32)
            return brasa_fail(err, BRASA_EINVAL, "%s: %d definitions and the timeline's are "
                              "more than 32", tmpl, n);
        memcpy(all, defs, (size_t)n * sizeof *defs);
        all[n++] = (struct jit_def){"BRASA_TL", j->tl};
        defs = all;
    }
    brasa_status st = jit_render(tmpl, defs, n, &src, err);
    if (st != BRASA_OK)
        return st;
    int maj = 0, min = 0;
    j->d->nvrtcVersion(&maj, &min);
    char tag[256];
    snprintf(tag, sizeof tag, "sm_%d|%s|drv %d|nvrtc %d.%d|lineinfo %d|v2", j->arch, j->dev_name,
             j->driver_ver, maj, min, (int)j->lineinfo);
    uint64_t key = kcache_hash(kcache_hash(0, src, strlen(src)), tag, strlen(tag));
    size_t size = 0;
    void *img = NULL;
    double t0 = plat_now();
    if (j->cache_dir[0])
        img = kcache_get(j->cache_dir, key, &size);
    if (img) {
        j->n_cached++;
    } else {
        st = jit_compile(j->d, src, tmpl, j->arch, j->lineinfo ? JIT_LINEINFO : 0, &img, &size,
                         err);
        j->compile_s += plat_now() - t0;
        j->n_compiled++;
        if (st == BRASA_OK && j->cache_dir[0])
            kcache_put(j->cache_dir, key, img, size);
    }
    if (st == BRASA_OK && j->keep_dir[0])
        kcache_keep(j->keep_dir, tmpl, key, src, img, size);
    free(src);
    if (st != BRASA_OK)
        return st;
    double t1 = plat_now();
    st = DRV_CALL(j->d, err, cuModuleLoadData, mod, img);
    j->load_s += plat_now() - t1;
    free(img);
    if (st != BRASA_OK)
        return brasa_wrap(err, st, "loading %s", tmpl);
    return BRASA_OK;
}

brasa_status jit_function(struct jit *j, CUmodule mod, const char *name, CUfunction *fn, int *regs,
                          int *local_out, struct brasa_err *err)
{
    brasa_status st = DRV_CALL(j->d, err, cuModuleGetFunction, fn, mod, name);
    if (st != BRASA_OK)
        return brasa_wrap(err, st, "kernel %s", name);
    int local = 0, nreg = 0;
    j->d->cuFuncGetAttribute(&local, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, *fn);
    j->d->cuFuncGetAttribute(&nreg, CU_FUNC_ATTRIBUTE_NUM_REGS, *fn);
    if (regs)
        *regs = nreg;
    if (local_out) {
        *local_out = local;
        return BRASA_OK;
    }
    if (local > 0)
        return brasa_fail(err, BRASA_EUNSUPPORTED, "kernel %s spills (%d local bytes, %d registers)",
                          name, local, nreg);
    return BRASA_OK;
}
