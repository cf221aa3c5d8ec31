/* gpu: the CUDA backend. Runs the same graph the CPU runs (graph/graph.h), after a fusion pass,
 * on one device: weights are uploaded once per model, KV cache and recurrent states live on the
 * device, activations in one arena per session planned up front.
 *
 * Two executors share one launch plan per graph:
 *   - eager: launches node by node; BRASA_DUMP=name,... (or "all") prints the named nodes'
 *     outputs as the CPU backend does (fused-away nodes are not materialised: set
 *     BRASA_GPU_FUSE=0 to see every node);
 *   - graph: the whole decode step (every layer and the LM head) captured once into a CUDA graph
 *     and replayed per token; the position and the token ids live in device memory, so nothing
 *     is re-captured. Default for one-token graphs; BRASA_GPU_GRAPH=0 turns it off.
 *
 * Environment: BRASA_GPU_TIMEOUT (seconds a synchronisation may wait, default 60),
 * BRASA_GPU_DUTY (0 < f < 1: keep the GPU busy at most that fraction of the time),
 * BRASA_GPU_MEM_MB (device memory budget), BRASA_CACHE (kernel cache directory),
 * BRASA_GPU_KSPLIT=1 (4 warps share each row of the FFN down projection in decode; compiled
 * and compile-tested, not yet measured on a device, hence off by default). */
#ifndef BRASA_GPU_H
#define BRASA_GPU_H

/* The arguments a kernel launch holds (mvd.cu takes the most); test_gpu_compile checks that every
 * kernel of every template takes at most this many, and a launch with more fails. */
#define GPU_MAX_ARGS 48
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include "core/status.h"
#include "graph/graph.h"
#include "gpu/nccl.h"

struct gpu;
struct gpu_sess;

struct gpu_opts {
    bool verbose;
    int device;         /* the device's ordinal (a shard's GPU); 0: the first */
    double duty;        /* 0: off */
    double timeout_s;   /* 0: default */
};

/* Loads the driver and compiler, opens device o->device (0 without o), compiles (or loads
 * from the cache) the fixed kernels. BRASA_EDEVICE with a plain message when no driver/GPU is
 * present. */
brasa_status gpu_open(struct gpu **out, const struct gpu_opts *o, struct brasa_err *err);
/* Frees everything; reports leaked device allocations on stderr. */
void gpu_close(struct gpu *g);
const char *gpu_device_name(const struct gpu *g);
/* The device's architecture as major x 10 + minor (90 for sm_90); AMD devices: 0 */
int gpu_arch(const struct gpu *g);
/* Makes g's context the calling thread's current one (what the collective library, which
 * goes through the CUDA runtime, takes as its device). */
brasa_status gpu_make_current(struct gpu *g, struct brasa_err *err);
/* Kernel telemetry: compile and load seconds, modules compiled and taken from the cache. */
void gpu_jit_stats(const struct gpu *g, double *compile_s, double *load_s, int *compiled,
                   int *cached);
uint64_t gpu_weight_bytes(const struct gpu *g);
void gpu_mem_report(const struct gpu *g, FILE *f);

brasa_status gpu_sess_new(struct gpu *g, struct gpu_sess **out, struct brasa_err *err);
void gpu_sess_free(struct gpu_sess *s);
/* Builds (or rebuilds) the launch plan of g: uploads the weights it reads, allocates its
 * states and grows the arena. Pointers are range-checked here, not per launch. */
brasa_status gpu_sess_prepare(struct gpu_sess *s, const struct graph *g, int n_ctx,
                              struct brasa_err *err);
/* The communicator of a tensor-parallel shard (model/shard.c) whose graph holds ALLREDUCE
 * nodes: each becomes the collective library's sum over the shards (nc->AllReduce on the
 * session's stream, captured into the decode graph like a kernel). Set before preparing such
 * a graph; the communicator outlives the session. */
brasa_status gpu_sess_set_comm(struct gpu_sess *s, const struct nccl *nc, ncclComm_t comm,
                               struct brasa_err *err);
/* Tensor parallelism across processes: after a run, every rank's part of its result is
 * gathered into every rank (the collective library's all-gather on the session's stream; every
 * rank must call it) and copied to the host. top (the run sent candidates): *out holds, for
 * each of the world's ranks in order, 2 x 256 int32: its candidates' ids (local to its slice),
 * then their values' bits; else each rank's last output row (row floats) padded with zeros to
 * pad floats. *out is valid until the next gather. */
brasa_status gpu_sess_gather(struct gpu_sess *s, bool top, int world, int row, int pad,
                             const void **out, struct brasa_err *err);
/* Runs a prepared graph; the output node's rows are then at gpu_sess_output(). */
brasa_status gpu_sess_run(struct gpu_sess *s, const struct graph *g, const struct graph_run *r,
                          struct brasa_err *err);
/* Queues a one-token decode step (graph_run.top_k > 0) and returns without waiting for it, so
 * that the host's work on one token overlaps the device's on the next. tokens NULL: its token
 * is the first candidate of the run before it, chosen on the device (greedy decoding). At most
 * two runs are in flight; a launch past them, gpu_sess_run and gpu_sess_finish wait for the
 * oldest. The runs' candidates come out with gpu_sess_finish, one run at a time. */
brasa_status gpu_sess_launch(struct gpu_sess *s, const struct graph *g, const struct graph_run *r,
                             struct brasa_err *err);
/* Waits for the oldest run in flight (none: returns at once); gpu_sess_top then gives its
 * candidates. */
brasa_status gpu_sess_finish(struct gpu_sess *s, struct brasa_err *err);
int gpu_sess_in_flight(const struct gpu_sess *s);
/* Waits for every run in flight and drops the newest one's results: gpu_sess_top keeps giving
 * the candidates of the run before it (whose output row on the device is then gone). */
brasa_status gpu_sess_drop(struct gpu_sess *s, struct brasa_err *err);
/* Whether decode steps can be queued ahead (gpu_sess_launch): the graph executor, with no
 * dump, profile, timeline or duty-cycle limit, which need each step alone. */
bool gpu_sess_can_queue(const struct gpu_sess *s);
/* Same, forcing the eager executor (tests compare it with the graph executor). */
brasa_status gpu_sess_run_eager(struct gpu_sess *s, const struct graph *g,
                                const struct graph_run *r, struct brasa_err *err);
/* The output node's rows of the last run (copied from the device now if the run sent only the
 * sampler's candidates); NULL on a device error. */
const float *gpu_sess_output(struct gpu_sess *s, struct brasa_err *err);
/* The last run's top-k candidates (graph_run.top_k of them, best first, ties to the lower id),
 * their count, or 0 when the run sent the whole output. */
int gpu_sess_top(const struct gpu_sess *s, const int32_t **ids, const float **logits);
/* Zeroes the recurrent states and the KV cache. */
brasa_status gpu_sess_reset(struct gpu_sess *s, struct brasa_err *err);
uint64_t gpu_sess_bytes(const struct gpu_sess *s);
/* Device-to-device copy bandwidth (bytes read + written per second / 1e9): the roofline. */
brasa_status gpu_copy_bandwidth(struct gpu *g, size_t bytes, double *gbps, struct brasa_err *err);
/* Milliseconds of device time of the last finished run (events around its kernels). */
double gpu_sess_last_ms(const struct gpu_sess *s);
/* The launches of the plan prepared for g (gpu_sess_prepare) named kname ("rope", "attn",
 * "quant_act", ...; NULL: all of them), or -1 when g has no plan. */
int gpu_sess_launches(struct gpu_sess *s, const struct graph *g, const char *kname);

#endif
