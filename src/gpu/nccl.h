/* The collective-communication library (NCCL, or AMD's RCCL with the same interface), loaded
 * at run time like the GPU drivers: brasa needs it only to run one model over several GPUs, so
 * it is never a build or link dependency. Only the few types and calls tensor parallelism uses
 * are declared here, with NCCL's own layouts. */
#ifndef BRASA_GPU_NCCL_H
#define BRASA_GPU_NCCL_H
#include <stddef.h>
#include "core/status.h"

typedef struct nccl_comm_opaque *ncclComm_t;
#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
    char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;
typedef int ncclResult_t; /* 0: success */
typedef int ncclDataType_t;
typedef int ncclRedOp_t;
enum { ncclSuccess = 0 };
enum { ncclFloat16 = 6, ncclFloat32 = 7, ncclBfloat16 = 9 };
enum { ncclSum = 0 };

struct nccl {
    void *lib;
    char name[256]; /* the library that was loaded */
    int version;    /* ncclGetVersion: e.g. 22105 for 2.21.5 */
    ncclResult_t (*GetVersion)(int *version);
    ncclResult_t (*GetUniqueId)(ncclUniqueId *id);
    ncclResult_t (*CommInitRank)(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank);
    ncclResult_t (*CommDestroy)(ncclComm_t comm);
    /* stream: the driver's stream handle (CUstream / hipStream_t) */
    ncclResult_t (*AllReduce)(const void *sendbuf, void *recvbuf, size_t count,
                              ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm, void *stream);
    /* every rank's sendcount values, in rank order, into every rank's recvbuf */
    ncclResult_t (*AllGather)(const void *sendbuf, void *recvbuf, size_t sendcount,
                              ncclDataType_t type, ncclComm_t comm, void *stream);
    const char *(*GetErrorString)(ncclResult_t r);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
};

/* Loads libnccl.so.2, libnccl.so or librccl.so.1 (the first found; only $BRASA_NCCL, a path,
 * where that is set) and resolves the table;
 * BRASA_ENOTFOUND, saying what to install, when none is there, BRASA_EDEVICE when one lacks a
 * call or its version call fails. On failure *n is left zeroed. */
brasa_status nccl_load(struct nccl *n, struct brasa_err *err);
/* Closes the library (nothing if none is loaded); *n is zeroed. */
void nccl_unload(struct nccl *n);

#endif
