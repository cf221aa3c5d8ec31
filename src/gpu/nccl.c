/* Run-time loading of NCCL / RCCL (see nccl.h). */
#include "gpu/nccl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/platform.h"
#include "gpu/drv.h"

static const char *const nccl_names[] = {"libnccl.so.2", "libnccl.so", "librccl.so.1", NULL};

static brasa_status sym(void *lib, void *slot, const char *libname, const char *name,
                        struct brasa_err *err)
{
    return drv_sym(lib, slot, libname, name, NULL, "the NCCL library is too old or not NCCL",
                   err);
}

brasa_status nccl_load(struct nccl *n, struct brasa_err *err)
{
    memset(n, 0, sizeof *n);
    /* NVLink multicast (NVLS) stays off: it reserves much device memory per communicator and
     * the all-reduces of tensor parallelism are small; a value the user set is kept. */
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    void *lib = NULL;
    const char *name = NULL;
    /* BRASA_NCCL: the library's path, for an NCCL outside the loader's search path (e.g. the
     * one a Python package carries); only that one is tried */
    const char *path = getenv("BRASA_NCCL");
    if (path && *path) {
        if (!(lib = plat_dlopen(path)))
            return brasa_fail(err, BRASA_ENOTFOUND, "NCCL: BRASA_NCCL=%.200s could not be "
                              "loaded (a path to libnccl.so.2 or librccl.so.1)", path);
        name = path;
    }
    for (int i = 0; nccl_names[i] && !lib; i++) {
        lib = plat_dlopen(nccl_names[i]);
        name = nccl_names[i];
    }
    if (!lib)
        return brasa_fail(err, BRASA_ENOTFOUND,
                          "NCCL (libnccl.so.2) not found: install NCCL to run on several GPUs "
                          "(NVIDIA: the libnccl2 package; AMD: RCCL, librccl.so.1), or run on one "
                          "GPU");
    brasa_status st;
    if ((st = sym(lib, &n->GetVersion, name, "ncclGetVersion", err)) != BRASA_OK ||
        (st = sym(lib, &n->GetUniqueId, name, "ncclGetUniqueId", err)) != BRASA_OK ||
        (st = sym(lib, &n->CommInitRank, name, "ncclCommInitRank", err)) != BRASA_OK ||
        (st = sym(lib, &n->CommDestroy, name, "ncclCommDestroy", err)) != BRASA_OK ||
        (st = sym(lib, &n->AllReduce, name, "ncclAllReduce", err)) != BRASA_OK ||
        (st = sym(lib, &n->AllGather, name, "ncclAllGather", err)) != BRASA_OK ||
        (st = sym(lib, &n->GetErrorString, name, "ncclGetErrorString", err)) != BRASA_OK ||
        (st = sym(lib, &n->GroupStart, name, "ncclGroupStart", err)) != BRASA_OK ||
        (st = sym(lib, &n->GroupEnd, name, "ncclGroupEnd", err)) != BRASA_OK) {
        plat_dlclose(lib);
        memset(n, 0, sizeof *n);
        return st;
    }
    int v = 0;
    ncclResult_t r = n->GetVersion(&v);
    if (r != ncclSuccess) {
        st = brasa_fail(err, BRASA_EDEVICE, "%s: ncclGetVersion failed: %s", name,
                        n->GetErrorString(r));
        plat_dlclose(lib);
        memset(n, 0, sizeof *n);
        return st;
    }
    n->lib = lib;
    n->version = v;
    snprintf(n->name, sizeof n->name, "%s", name);
    return BRASA_OK;
}

void nccl_unload(struct nccl *n)
{
    if (n->lib)
        plat_dlclose(n->lib);
    memset(n, 0, sizeof *n);
}
