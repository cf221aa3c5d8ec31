/* drv_hip: fills struct drv from the HIP runtime and hiprtc (see drv_hip.h). */
#include "gpu/drv_hip.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <unistd.h>
#endif

#include "core/platform.h"
#include "gpu/jit.h"

/* HIP functions whose shape differs from the CUDA slot they fill: the wrappers below call
 * them. One HIP runtime per process, so a file-scope copy is enough. */
static struct {
    int (*getattr)(int *, int, int);
    const char *(*errstr)(int);
    int (*devsync)(void);
    int (*hostmalloc)(void **, size_t, unsigned);
} hip;

/* CUDA device attribute -> hipDeviceAttribute_t (HIP's enum, stable since ROCm 5.0). */
static int hip_attr_id(int cu)
{
    switch (cu) {
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 74;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 63;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 19;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 23;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 61;
    /* no opt-in on AMD: a block may use all of its LDS */
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 74;
    }
    return -1;
}
#define HIP_ATTR_WARP_SIZE 87
#define HIP_ERROR_INVALID_VALUE 1

static CUresult w_getattr(int *v, int attr, CUdevice dev)
{
    int id = hip_attr_id(attr);
    if (id < 0)
        return HIP_ERROR_INVALID_VALUE;
    return hip.getattr(v, id, dev);
}

static CUresult w_errstr(CUresult r, const char **s)
{
    *s = hip.errstr ? hip.errstr(r) : NULL;
    return 0;
}

static CUresult w_ctxsync(void) { return hip.devsync(); }

/* Pinned host memory (hipHostMalloc's default flags: as cuMemAllocHost's) */
static CUresult w_hostalloc(void **p, size_t n) { return hip.hostmalloc(p, n, 0); }

/* Dynamic shared memory needs no opt-in on AMD (up to the LDS size): accept and ignore. */
static CUresult w_funcsetattr(CUfunction f, int attr, int value)
{
    (void)f;
    (void)attr;
    (void)value;
    return 0;
}

static brasa_status sym(void *lib, void *slot, const char *libname, const char *n1,
                        const char *n2, struct brasa_err *err)
{
    return drv_sym(lib, slot, libname, n1, n2, "the HIP runtime is too old", err);
}
#define H(field, name) sym(h, &d->field, ln, name, NULL, err)

static void *open_first(const char *const *names, char *path, size_t cap)
{
    for (int i = 0; names[i]; i++) {
        void *h = plat_dlopen(names[i]);
        if (h) {
            snprintf(path, cap, "%s", names[i]);
            return h;
        }
    }
    /* ROCm's default prefix (Linux), or $HIP_PATH (the Windows HIP SDK sets it) */
    const char *dirs[] = {getenv("HIP_PATH"), getenv("ROCM_PATH"), "/opt/rocm"};
    for (int di = 0; di < 3; di++) {
        if (!dirs[di] || !*dirs[di])
            continue;
        for (int i = 0; names[i]; i++) {
#ifdef _WIN32
            snprintf(path, cap, "%s\\bin\\%s", dirs[di], names[i]);
#else
            snprintf(path, cap, "%s/lib/%s", dirs[di], names[i]);
#endif
            void *h = plat_dlopen(path);
            if (h)
                return h;
        }
    }
    path[0] = 0;
    return NULL;
}

#ifdef _WIN32
static const char *const hip_names[] = {"amdhip64_6.dll", "amdhip64.dll", "amdhip64_5.dll", NULL};
static const char *const rtc_names[] = {"hiprtc0602.dll", "hiprtc0601.dll", "hiprtc0600.dll",
                                        "hiprtc0507.dll", "hiprtc0505.dll", "hiprtc.dll",
                                        NULL};
#else
static const char *const hip_names[] = {"libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5",
                                        NULL};
/* ROCm 6 ships hiprtc apart; in ROCm 5 it is part of libamdhip64 */
static const char *const rtc_names[] = {"libhiprtc.so", "libhiprtc.so.6", "libhiprtc.so.5",
                                        "libamdhip64.so", "libamdhip64.so.6", "libamdhip64.so.5",
                                        NULL};
#endif

bool drv_is_hip(const struct drv *d) { return strncmp(d->nvrtc_path, "hip:", 4) == 0; }

brasa_status drv_load_hiprtc(struct drv *d, struct brasa_err *err)
{
    if (d->lib_nvrtc)
        return drv_is_hip(d) ? BRASA_OK
                             : brasa_fail(err, BRASA_EINVAL, "a CUDA compiler is already loaded");
    char path[240];
    void *h = open_first(rtc_names, path, sizeof path);
    if (!h)
        return brasa_fail(err, BRASA_EDEVICE,
                          "the HIP run-time compiler (hiprtc) was not found: install ROCm (Linux) "
                          "or the HIP SDK (Windows), or set HIP_PATH");
    const char *ln = path;
    brasa_status st;
    if ((st = H(nvrtcVersion, "hiprtcVersion")) ||
        (st = H(nvrtcCreateProgram, "hiprtcCreateProgram")) ||
        (st = H(nvrtcCompileProgram, "hiprtcCompileProgram")) ||
        (st = H(nvrtcGetProgramLogSize, "hiprtcGetProgramLogSize")) ||
        (st = H(nvrtcGetProgramLog, "hiprtcGetProgramLog")) ||
        (st = H(nvrtcGetCUBINSize, "hiprtcGetCodeSize")) ||
        (st = H(nvrtcGetCUBIN, "hiprtcGetCode")) ||
        (st = H(nvrtcDestroyProgram, "hiprtcDestroyProgram")) ||
        (st = H(nvrtcGetErrorString, "hiprtcGetErrorString"))) {
        plat_dlclose(h);
        return st;
    }
    d->lib_nvrtc = h;
    snprintf(d->nvrtc_path, sizeof d->nvrtc_path, "hip:%s", path);
    return BRASA_OK;
}

static brasa_status load_hip_syms(struct drv *d, void *h, const char *ln, struct brasa_err *err)
{
    brasa_status st;
    void *p;
    if ((st = H(cuInit, "hipInit")) || (st = H(cuDriverGetVersion, "hipDriverGetVersion")) ||
        (st = H(cuDeviceGetCount, "hipGetDeviceCount")) || (st = H(cuDeviceGet, "hipDeviceGet")) ||
        (st = H(cuDeviceGetName, "hipDeviceGetName")) ||
        (st = H(cuDeviceTotalMem, "hipDeviceTotalMem")) ||
        (st = H(cuDevicePrimaryCtxRetain, "hipDevicePrimaryCtxRetain")) ||
        (st = H(cuDevicePrimaryCtxRelease, "hipDevicePrimaryCtxRelease")) ||
        (st = H(cuCtxSetCurrent, "hipCtxSetCurrent")) || (st = H(cuMemGetInfo, "hipMemGetInfo")) ||
        (st = H(cuMemAlloc, "hipMalloc")) || (st = H(cuMemFree, "hipFree")) ||
        (st = H(cuMemcpyHtoD, "hipMemcpyHtoD")) || (st = H(cuMemcpyDtoH, "hipMemcpyDtoH")) ||
        (st = H(cuMemcpyHtoDAsync, "hipMemcpyHtoDAsync")) ||
        (st = H(cuMemFreeHost, "hipHostFree")) ||
        (st = H(cuMemcpyDtoHAsync, "hipMemcpyDtoHAsync")) ||
        (st = H(cuMemcpyDtoDAsync, "hipMemcpyDtoDAsync")) ||
        (st = H(cuMemsetD8Async, "hipMemsetD8Async")) ||
        (st = H(cuModuleLoadData, "hipModuleLoadData")) ||
        (st = H(cuModuleUnload, "hipModuleUnload")) ||
        (st = H(cuModuleGetFunction, "hipModuleGetFunction")) ||
        (st = H(cuFuncGetAttribute, "hipFuncGetAttribute")) ||
        (st = H(cuLaunchKernel, "hipModuleLaunchKernel")) ||
        (st = H(cuStreamCreate, "hipStreamCreateWithFlags")) ||
        (st = H(cuStreamDestroy, "hipStreamDestroy")) || (st = H(cuStreamQuery, "hipStreamQuery")) ||
        (st = H(cuStreamSynchronize, "hipStreamSynchronize")) ||
        (st = H(cuEventCreate, "hipEventCreateWithFlags")) ||
        (st = H(cuEventDestroy, "hipEventDestroy")) || (st = H(cuEventRecord, "hipEventRecord")) ||
        (st = H(cuEventQuery, "hipEventQuery")) ||
        (st = H(cuEventElapsedTime, "hipEventElapsedTime")) ||
        (st = H(cuStreamBeginCapture, "hipStreamBeginCapture")) ||
        (st = H(cuStreamEndCapture, "hipStreamEndCapture")) ||
        (st = H(cuGraphInstantiateWithFlags, "hipGraphInstantiateWithFlags")) ||
        (st = H(cuGraphLaunch, "hipGraphLaunch")) ||
        (st = H(cuGraphExecDestroy, "hipGraphExecDestroy")) ||
        (st = H(cuGraphDestroy, "hipGraphDestroy")))
        return st;
    if ((st = sym(h, &p, ln, "hipDeviceGetAttribute", NULL, err)) != BRASA_OK)
        return st;
    memcpy(&hip.getattr, &p, sizeof p);
    if ((st = sym(h, &p, ln, "hipDeviceSynchronize", NULL, err)) != BRASA_OK)
        return st;
    memcpy(&hip.devsync, &p, sizeof p);
    if ((st = sym(h, &p, ln, "hipGetErrorString", NULL, err)) != BRASA_OK)
        return st;
    memcpy(&hip.errstr, &p, sizeof p);
    if ((st = sym(h, &p, ln, "hipHostMalloc", NULL, err)) != BRASA_OK)
        return st;
    memcpy(&hip.hostmalloc, &p, sizeof p);
    d->cuMemAllocHost = w_hostalloc;
    d->cuDeviceGetAttribute = w_getattr;
    d->cuGetErrorString = w_errstr;
    d->cuCtxSynchronize = w_ctxsync;
    d->cuFuncSetAttribute = w_funcsetattr;
    return BRASA_OK;
}

brasa_status drv_load_hip(struct drv *d, struct brasa_err *err)
{
    if (d->lib_cuda)
        return drv_is_hip(d) ? BRASA_OK
                             : brasa_fail(err, BRASA_EINVAL, "a CUDA driver is already loaded");
    char path[240];
    void *h = open_first(hip_names, path, sizeof path);
    if (!h)
        return brasa_fail(err, BRASA_EDEVICE, "no AMD HIP runtime found (%s did not load)",
                          hip_names[0]);
    brasa_status st = load_hip_syms(d, h, path, err);
    if (st != BRASA_OK) {
        plat_dlclose(h);
        return st;
    }
    return drv_finish(d, h, drv_load_hiprtc, "the HIP runtime sees no AMD GPU", err);
}

brasa_status drv_open(struct drv *d, const char *which, struct brasa_err *err)
{
    if (!which || !*which)
        which = getenv("BRASA_GPU");
    if (!which || !*which)
        which = "auto";
    if (!strcmp(which, "cuda"))
        return drv_load(d, err);
    if (!strcmp(which, "hip"))
        return drv_load_hip(d, err);
    if (!strcmp(which, "none")) /* (no driver loaded: the CPU backend, as if there were none) */
        return brasa_fail(err, BRASA_EUNSUPPORTED, "the GPU is off (--gpu none)");
    if (strcmp(which, "auto") != 0)
        return brasa_fail(err, BRASA_EINVAL, "unknown GPU kind '%s': use cuda, hip, auto or none",
                          which);
    struct brasa_err e1 = {{0}};
    if (drv_load(d, &e1) == BRASA_OK)
        return BRASA_OK;
#ifndef _WIN32
    /* The ROCm runtime needs the kernel driver's /dev/kfd. Without it there is no AMD GPU to
     * find, and loading libamdhip64 only to see hipInit fail costs start-up time and leaves
     * the runtime's allocations behind, so auto does not try (an explicit "hip" still does). */
    if (access("/dev/kfd", F_OK) != 0)
        return brasa_fail(err, BRASA_EDEVICE, "no GPU: %.200s; no AMD GPU (/dev/kfd is absent)",
                          e1.msg);
#endif
    brasa_status st = drv_load_hip(d, err);
    if (st != BRASA_OK) {
        char e2[BRASA_ERR_MAX];
        snprintf(e2, sizeof e2, "%s", err ? err->msg : "");
        return brasa_fail(err, st, "no GPU: %.200s; %.200s", e1.msg, e2);
    }
    return BRASA_OK;
}

int drv_wave_size(const struct drv *d, CUdevice dev)
{
    int w = 0;
    if (!drv_is_hip(d) || !hip.getattr || hip.getattr(&w, HIP_ATTR_WARP_SIZE, dev) != 0)
        return 32;
    return w == 64 ? 64 : 32;
}

int drv_rtc_options(const struct drv *d, int arch, unsigned flags, const char **opts,
                    char *archbuf, size_t archcap)
{
    int n = 0;
    if (drv_is_hip(d)) {
        /* hiprtc targets the current device's gfx architecture by itself */
        opts[n++] = "-O3";
        opts[n++] = "-std=c++17";
        opts[n++] = "-ffp-contract=fast";
        if (flags & JIT_LINEINFO)
            opts[n++] = "-g";
        return n;
    }
    /* sm_90: its arch-specific target (sm_90a), whose code runs on sm_90 devices alone and
     * which has Hopper's warpgroup products (wgmma); the code is compiled for the device's
     * exact architecture anyway */
    snprintf(archbuf, archcap, "--gpu-architecture=sm_%d%s", arch, arch == 90 ? "a" : "");
    opts[n++] = archbuf;
    opts[n++] = "--std=c++17";
    opts[n++] = "-default-device";
    opts[n++] = "--fmad=true";
    if (flags & JIT_LINEINFO)
        opts[n++] = "-lineinfo";
    if (flags & JIT_CHECK) /* (the machine code unoptimized, a third of the time) */
        opts[n++] = "--ptxas-options=-O0";
    return n;
}
