/* drv: the GPU driver and run-time compiler, loaded with dlopen into one table of function
 * pointers. Nothing else in brasa touches the driver; no CUDA header is needed at build time:
 * the few types and enums used are declared here (their values are part of the driver's
 * stable ABI). The same table shape can later be filled from amdhip64 + hiprtc. */
#ifndef BRASA_GPU_DRV_H
#define BRASA_GPU_DRV_H
#include <stddef.h>
#include <stdint.h>
#include "core/status.h"

typedef int CUresult;          /* 0 = CUDA_SUCCESS */
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef int nvrtcResult;       /* 0 = NVRTC_SUCCESS */
typedef struct _nvrtcProgram *nvrtcProgram;

enum {
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
};
enum {
    CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0,
    CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1,
    CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES = 3,
    CU_FUNC_ATTRIBUTE_NUM_REGS = 4,
    CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8,
};
enum { CU_STREAM_NON_BLOCKING = 1 };
/* cuLaunchKernelEx: one launch attribute is used, programmatic stream serialization (the next
 * kernel may start while this one drains; it waits in griddepcontrol.wait, see port.cuh) */
enum { CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6 };
typedef struct {
    int id;
    int pad_;
    union {
        char bytes[64];
        int programmaticStreamSerializationAllowed;
    } value;
} CUlaunchAttribute;
typedef struct {
    unsigned gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned numAttrs;
} CUlaunchConfig;
enum { CU_EVENT_DEFAULT = 0, CU_EVENT_DISABLE_TIMING = 2 };
enum { CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1 };
enum { CUDA_ERROR_NOT_READY = 600 };

/* The table. Every entry is required unless marked optional. */
struct drv {
    void *lib_cuda, *lib_nvrtc;
    char nvrtc_path[256];
    /* driver */
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDriverGetVersion)(int *);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*cuDeviceTotalMem)(size_t *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuGetErrorString)(CUresult, const char **);
    CUresult (*cuMemGetInfo)(size_t *, size_t *);
    CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
    CUresult (*cuMemFree)(CUdeviceptr);
    CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void *, size_t);
    CUresult (*cuMemcpyDtoH)(void *, CUdeviceptr, size_t);
    CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemAllocHost)(void **, size_t);
    CUresult (*cuMemFreeHost)(void *);
    CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*cuModuleLoadData)(CUmodule *, const void *);
    CUresult (*cuModuleUnload)(CUmodule);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuFuncGetAttribute)(int *, int, CUfunction);
    CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
    CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                               unsigned, unsigned, CUstream, void **, void **);
    /* optional (NULL where the driver lacks it, and on HIP) */
    CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
    CUresult (*cuStreamCreate)(CUstream *, unsigned);
    CUresult (*cuStreamDestroy)(CUstream);
    CUresult (*cuStreamQuery)(CUstream);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuEventCreate)(CUevent *, unsigned);
    CUresult (*cuEventDestroy)(CUevent);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventQuery)(CUevent);
    CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*cuStreamBeginCapture)(CUstream, int);
    CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
    CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
    CUresult (*cuGraphExecDestroy)(CUgraphExec);
    CUresult (*cuGraphDestroy)(CUgraph);
    /* run-time compiler */
    nvrtcResult (*nvrtcVersion)(int *, int *);
    nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram *, const char *, const char *, int,
                                      const char *const *, const char *const *);
    nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram, int, const char *const *);
    nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram, size_t *);
    nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram, char *);
    nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram, size_t *);
    nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram, char *);
    nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram *);
    const char *(*nvrtcGetErrorString)(nvrtcResult);
};

/* Looks up n1, then n2 (may be NULL), in lib and stores the address in slot (a function
 * pointer of a table); else BRASA_EDEVICE "LIBNAME lacks NAME: WHY". Shared by the CUDA, HIP
 * and NCCL loaders. */
brasa_status drv_sym(void *lib, void *slot, const char *libname, const char *n1, const char *n2,
                     const char *why, struct brasa_err *err);

/* Loads only the run-time compiler (for compile checks on machines without a GPU). */
brasa_status drv_load_nvrtc(struct drv *d, struct brasa_err *err);
/* The common end of drv_load and drv_load_hip: with the driver library h opened and its
 * symbols in d, loads the run-time compiler (load_rtc), initialises the driver and checks that
 * it sees a GPU (none: the error no_gpu). On failure nothing stays loaded. */
brasa_status drv_finish(struct drv *d, void *h,
                        brasa_status (*load_rtc)(struct drv *, struct brasa_err *),
                        const char *no_gpu, struct brasa_err *err);
/* Loads the driver and the compiler; BRASA_EDEVICE with a plain message if either is absent. */
brasa_status drv_load(struct drv *d, struct brasa_err *err);
void drv_unload(struct drv *d);

/* Turns a failed driver call into an error naming it: returns BRASA_OK when r == 0. */
brasa_status drv_check(const struct drv *d, CUresult r, const char *call, struct brasa_err *err);
#define DRV_CALL(d, err, call, ...) drv_check((d), (d)->call(__VA_ARGS__), #call, (err))

#endif
