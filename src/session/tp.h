/* tp: one model split over GPUs (tensor parallelism, the rules of gpu/split.h). This process
 * drives N of them, ranks rank0 .. rank0 + N - 1 of a world of W (W = N: all of them, one
 * process; else the other ranks are other processes, on this host or others, running the same
 * commands). A shard per GPU (model/shard.c) with its own device, NCCL rank and thread: a step
 * runs every local shard's graph at once, and the graphs' ALLREDUCE nodes are NCCL's
 * all-reduces over the world (eager in prompts, captured into the decode graph). The shards'
 * logits are slices of the vocabulary, gathered in order (across processes by NCCL's
 * all-gather), and their sampler candidates merged, so that every process draws the same
 * token. N = W = 1 is a shard of one: the same path on one GPU. */
#ifndef BRASA_SESSION_TP_H
#define BRASA_SESSION_TP_H
#include <stdbool.h>
#include <stdint.h>
#include "core/status.h"
#include "gpu/gpu.h"
#include "model/model.h"

struct tp_model;
struct tp_sess;

/* The world of a model split across processes: world ranks in all (0: this process's GPUs
 * alone), this process's first (rank0); the communicator's unique id passes through the file
 * id_file (rank 0's process writes it, the others wait up to timeout_s for it). */
struct tp_world {
    int world, rank0;
    const int *devices; /* the n GPUs' ordinals (NULL: 0..n-1) */
    const char *id_file;
    double timeout_s; /* 0: 300 */
};

/* Cuts m into the world's shards rank0 .. rank0 + n - 1, opens GPUs 0..n-1 (or w->devices) for
 * them and an NCCL communicator over the world (NCCL loaded as gpu/nccl.h says); w NULL: world = n.
 * BRASA_ENOTFOUND without NCCL, BRASA_EUNSUPPORTED where the model does not split over the
 * world, BRASA_EDEVICE where a GPU or the communicator does not open, BRASA_ETIMEOUT when the
 * id does not come. */
brasa_status tp_model_open(struct tp_model **out, const struct mdl *m, int n,
                           const struct tp_world *w, const struct gpu_opts *go,
                           struct brasa_err *err);
/* The communicator's unique id through a file: root makes it (nc->GetUniqueId) and writes it
 * (atomically: a temporary file renamed; BRASA_EINVAL if the file is already there, since the
 * others could take that one); the others wait for the file, up to timeout_s. */
brasa_status tp_id_exchange(const struct nccl *nc, const char *path, bool root, double timeout_s,
                            ncclUniqueId *id, struct brasa_err *err);
void tp_model_free(struct tp_model *t);

/* A session over every shard: its KV caches and states on their GPUs, its graphs for one
 * token (prepared here) and for prompt batches (on first use). */
brasa_status tp_sess_new(struct tp_model *t, int n_ctx, uint32_t kv_type, struct tp_sess **out,
                         struct brasa_err *err);
void tp_sess_free(struct tp_sess *s);
brasa_status tp_sess_reset(struct tp_sess *s, struct brasa_err *err);
/* Runs n tokens at position pos0 on every shard (one batch); all: every row's logits (else
 * the last row's; across processes only the last row); top > 0: only the shards' top
 * candidates come to the host (tp_sess_top). */
brasa_status tp_sess_run(struct tp_sess *s, const int32_t *ids, int n, int pos0, bool all,
                         int top, struct brasa_err *err);
/* The last run's logits, the shards' slices gathered: rows x n_vocab floats into out (rows:
 * the run's output rows); BRASA_EDEVICE when a GPU fails. Across processes a collective:
 * every process asks at the same point. */
brasa_status tp_sess_output(struct tp_sess *s, float *out, int *rows, struct brasa_err *err);
/* The last run's candidates, the best of every shard's merged (best first, ties to the lower
 * id): their count, 0 when the run sent whole rows. */
int tp_sess_top(struct tp_sess *s, const int32_t **ids, const float **logits);

/* Merges ns lists of candidates (list j: nj[j] ids local to a slice starting at off[j], with
 * their logits, each best first) into the k best (k <= the sum; ties to the lower global id):
 * fills oid and olg, returns their count. */
int tp_merge_top(int ns, const int32_t *const *ids, const float *const *lg, const int *nj,
                 const int *off, int k, int32_t *oid, float *olg);

#endif
