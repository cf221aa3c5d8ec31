/* drv_hip: the same driver table (drv.h) filled from AMD's HIP runtime and its run-time
 * compiler: libamdhip64.so and libhiprtc.so on Linux (in ROCm 5 hiprtc lives inside
 * libamdhip64), amdhip64*.dll and hiprtc*.dll on Windows. Loaded at run time through
 * core/platform.h like CUDA's, so nothing AMD is needed to build brasa.
 *
 * The table keeps CUDA's names and types: HIP's module API has the same shapes and, for
 * the enums brasa uses, the same values (error 600 "not ready", stream and event flags,
 * function attributes); device attributes are numbered differently and are translated here.
 * The run-time compiler slots hold hiprtc's functions (hiprtcGetCode for nvrtcGetCUBIN):
 * a kernel compiled through them is a code object for the device's gfx target.
 *
 * Which vendor: drv_open() takes "cuda", "hip" or "auto" (the --gpu option; NULL reads
 * $BRASA_GPU, default auto = CUDA first, then HIP). */
#ifndef BRASA_GPU_DRV_HIP_H
#define BRASA_GPU_DRV_HIP_H
#include <stdbool.h>
#include "gpu/drv.h"

/* Loads hiprtc only (for compile checks on machines without a GPU). */
brasa_status drv_load_hiprtc(struct drv *d, struct brasa_err *err);
/* Loads the HIP runtime and hiprtc; BRASA_EDEVICE with a plain message if either is absent
 * or no AMD GPU is visible. */
brasa_status drv_load_hip(struct drv *d, struct brasa_err *err);
/* "cuda", "hip", "auto" or NULL ($BRASA_GPU, else auto). BRASA_EINVAL names a bad choice;
 * with auto, the error says why neither vendor loaded. */
brasa_status drv_open(struct drv *d, const char *which, struct brasa_err *err);
/* True when d was filled from HIP (then d->nvrtc_path starts with "hip:"). */
bool drv_is_hip(const struct drv *d);
/* Lanes per wavefront of device dev (32 on RDNA, 64 on CDNA); 32 for CUDA or when unknown. */
int drv_wave_size(const struct drv *d, CUdevice dev);
/* The run-time compiler's options for the device: NVRTC's for sm_<arch> on CUDA; on HIP,
 * hiprtc's (it compiles for the current device's gfx target when none is given); flags
 * (jit.h): JIT_LINEINFO, JIT_CHECK. Returns the count written to opts (at most 7). */
int drv_rtc_options(const struct drv *d, int arch, unsigned flags, const char **opts,
                    char *archbuf, size_t archcap);

#endif
