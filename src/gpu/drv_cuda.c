/* drv_cuda: fills struct drv from libcuda.so.1 and libnvrtc.so.* with dlopen/dlsym. */
#include "gpu/drv.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

brasa_status drv_sym(void *lib, void *slot, const char *libname, const char *n1, const char *n2,
                     const char *why, struct brasa_err *err)
{
    void *p = dlsym(lib, n1);
    if (!p && n2)
        p = dlsym(lib, n2);
    if (!p)
        return brasa_fail(err, BRASA_EDEVICE, "%s lacks %s: %s", libname, n2 ? n2 : n1, why);
    memcpy(slot, &p, sizeof p);
    return BRASA_OK;
}

/* versioned entry points first (cuMemAlloc_v2, then cuMemAlloc) */
#define S2(lib, field, v2) \
    drv_sym((lib), &d->field, ln, v2, #field, "the driver or compiler is too old", err)
#define S1(lib, field) \
    drv_sym((lib), &d->field, ln, #field, NULL, "the driver or compiler is too old", err)

static void *open_nvrtc(char *path, size_t cap)
{
    static const char *names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                  "libnvrtc.so.11.2", "libnvrtc.so.11.0"};
    const char *dirs[3] = {getenv("CUDA_PATH"), "/usr/local/cuda", NULL};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (h) {
            snprintf(path, cap, "%s", names[i]);
            return h;
        }
    }
    for (int di = 0; di < 2; di++) {
        if (!dirs[di] || !*dirs[di])
            continue;
        for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
            snprintf(path, cap, "%s/lib64/%s", dirs[di], names[i]);
            void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
            if (h)
                return h;
        }
    }
    path[0] = 0;
    return NULL;
}

brasa_status drv_load_nvrtc(struct drv *d, struct brasa_err *err)
{
    if (d->lib_nvrtc)
        return BRASA_OK;
    void *h = open_nvrtc(d->nvrtc_path, sizeof d->nvrtc_path);
    if (!h)
        return brasa_fail(err, BRASA_EDEVICE,
                          "the CUDA run-time compiler (libnvrtc.so) was not found: install the "
                          "CUDA toolkit's nvrtc or set CUDA_PATH");
    const char *ln = "libnvrtc";
    brasa_status st;
    if ((st = S1(h, nvrtcVersion)) || (st = S1(h, nvrtcCreateProgram)) ||
        (st = S1(h, nvrtcCompileProgram)) || (st = S1(h, nvrtcGetProgramLogSize)) ||
        (st = S1(h, nvrtcGetProgramLog)) || (st = S1(h, nvrtcGetCUBINSize)) ||
        (st = S1(h, nvrtcGetCUBIN)) || (st = S1(h, nvrtcDestroyProgram)) ||
        (st = S1(h, nvrtcGetErrorString))) {
        dlclose(h);
        return st;
    }
    d->lib_nvrtc = h;
    return BRASA_OK;
}

static brasa_status load_cuda_syms(struct drv *d, void *h, struct brasa_err *err)
{
    const char *ln = "libcuda.so.1";
    brasa_status st;
    if ((st = S1(h, cuInit)) || (st = S1(h, cuDriverGetVersion)) || (st = S1(h, cuDeviceGetCount)) ||
        (st = S1(h, cuDeviceGet)) || (st = S1(h, cuDeviceGetName)) ||
        (st = S1(h, cuDeviceGetAttribute)) || (st = S2(h, cuDeviceTotalMem, "cuDeviceTotalMem_v2")) ||
        (st = S1(h, cuDevicePrimaryCtxRetain)) ||
        (st = S2(h, cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2")) ||
        (st = S1(h, cuCtxSetCurrent)) || (st = S1(h, cuCtxSynchronize)) ||
        (st = S1(h, cuGetErrorString)) || (st = S2(h, cuMemGetInfo, "cuMemGetInfo_v2")) ||
        (st = S2(h, cuMemAlloc, "cuMemAlloc_v2")) || (st = S2(h, cuMemFree, "cuMemFree_v2")) ||
        (st = S2(h, cuMemcpyHtoD, "cuMemcpyHtoD_v2")) || (st = S2(h, cuMemcpyDtoH, "cuMemcpyDtoH_v2")) ||
        (st = S2(h, cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2")) ||
        (st = S2(h, cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2")) ||
        (st = S2(h, cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2")) || (st = S1(h, cuMemsetD8Async)) ||
        (st = S2(h, cuMemAllocHost, "cuMemAllocHost_v2")) || (st = S1(h, cuMemFreeHost)) ||
        (st = S1(h, cuModuleLoadData)) || (st = S1(h, cuModuleUnload)) ||
        (st = S1(h, cuModuleGetFunction)) || (st = S1(h, cuFuncGetAttribute)) ||
        (st = S1(h, cuFuncSetAttribute)) || (st = S1(h, cuLaunchKernel)) ||
        (st = S1(h, cuStreamCreate)) || (st = S2(h, cuStreamDestroy, "cuStreamDestroy_v2")) ||
        (st = S1(h, cuStreamQuery)) || (st = S1(h, cuStreamSynchronize)) ||
        (st = S1(h, cuEventCreate)) || (st = S2(h, cuEventDestroy, "cuEventDestroy_v2")) ||
        (st = S1(h, cuEventRecord)) || (st = S1(h, cuEventQuery)) ||
        (st = S2(h, cuEventElapsedTime, "cuEventElapsedTime_v2")) ||
        (st = S2(h, cuStreamBeginCapture, "cuStreamBeginCapture_v2")) ||
        (st = S1(h, cuStreamEndCapture)) || (st = S1(h, cuGraphInstantiateWithFlags)) ||
        (st = S1(h, cuGraphLaunch)) || (st = S1(h, cuGraphExecDestroy)) ||
        (st = S1(h, cuGraphDestroy)))
        return st;
    void *ex = dlsym(h, "cuLaunchKernelEx"); /* CUDA 11.8 and newer */
    memcpy(&d->cuLaunchKernelEx, &ex, sizeof ex);
    return BRASA_OK;
}

brasa_status drv_load(struct drv *d, struct brasa_err *err)
{
    if (d->lib_cuda)
        return BRASA_OK;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return brasa_fail(err, BRASA_EDEVICE, "no NVIDIA driver found (libcuda.so.1 did not load)");
    brasa_status st = load_cuda_syms(d, h, err);
    if (st != BRASA_OK) {
        dlclose(h);
        return st;
    }
    return drv_finish(d, h, drv_load_nvrtc, "the NVIDIA driver sees no GPU", err);
}

brasa_status drv_finish(struct drv *d, void *h,
                        brasa_status (*load_rtc)(struct drv *, struct brasa_err *),
                        const char *no_gpu, struct brasa_err *err)
{
    d->lib_cuda = h;
    brasa_status st = load_rtc(d, err);
    if (st != BRASA_OK) {
        dlclose(h);
        d->lib_cuda = NULL;
        return st;
    }
    int n = 0;
    if ((st = DRV_CALL(d, err, cuInit, 0)) || (st = DRV_CALL(d, err, cuDeviceGetCount, &n))) {
        drv_unload(d);
        return st;
    }
    if (n < 1) {
        drv_unload(d);
        return brasa_fail(err, BRASA_EDEVICE, "%s", no_gpu);
    }
    return BRASA_OK;
}

void drv_unload(struct drv *d)
{
    if (d->lib_nvrtc)
        dlclose(d->lib_nvrtc);
    if (d->lib_cuda)
        dlclose(d->lib_cuda);
    memset(d, 0, sizeof *d);
}

brasa_status drv_check(const struct drv *d, CUresult r, const char *call, struct brasa_err *err)
{
    if (r == 0)
        return BRASA_OK;
    const char *s = NULL;
    if (d->cuGetErrorString)
        d->cuGetErrorString(r, &s);
    return brasa_fail(err, BRASA_EDEVICE, "%s failed: %s (error %d)", call, s ? s : "unknown", r);
}
