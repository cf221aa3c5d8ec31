/* Device memory for the telemetry when the model runs on the GPU: NVML (the driver's management
 * library), opened at run time with dlopen, so the server runs the same on machines without it. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "gpumem.h"

struct nvml_memory {
    unsigned long long total, free, used;
};
typedef void *nvml_device;

static struct {
    int (*init)(void);
    int (*handle)(unsigned, nvml_device *);
    int (*meminfo)(nvml_device, struct nvml_memory *);
    int (*name)(nvml_device, char *, unsigned);
    nvml_device dev;
    char dev_name[96];
    int ok;
} nv;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void nvml_open(void)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    *(void **)&nv.init = dlsym(h, "nvmlInit_v2");
    *(void **)&nv.handle = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&nv.meminfo = dlsym(h, "nvmlDeviceGetMemoryInfo");
    *(void **)&nv.name = dlsym(h, "nvmlDeviceGetName");
    if (!nv.init || !nv.handle || !nv.meminfo || nv.init() != 0 || nv.handle(0, &nv.dev) != 0)
        return;
    if (!nv.name || nv.name(nv.dev, nv.dev_name, sizeof nv.dev_name) != 0)
        snprintf(nv.dev_name, sizeof nv.dev_name, "GPU 0");
    nv.ok = 1;
}

bool gpumem_query(uint64_t *used, uint64_t *total, const char **name)
{
    pthread_once(&once, nvml_open);
    struct nvml_memory m;
    if (!nv.ok || nv.meminfo(nv.dev, &m) != 0)
        return false;
    *used = m.used;
    *total = m.total;
    *name = nv.dev_name;
    return true;
}
