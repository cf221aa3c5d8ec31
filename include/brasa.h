/* brasa: the engine's public API (used by the CLI and the server).
 * Opaque handles; every fallible call returns a brasa_status and fills a brasa_err. */
#ifndef BRASA_H
#define BRASA_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/status.h"

struct brasa_model;
struct brasa_session;
struct brasa_sampler;
struct tokenizer;

enum brasa_backend { BRASA_BACKEND_AUTO = 0, BRASA_BACKEND_CPU, BRASA_BACKEND_CUDA };

struct brasa_model_opts {
    int n_threads;                 /* 0: all cores */
    enum brasa_backend backend;    /* AUTO: GPU when a driver is present, else CPU */
    int n_gpus;                    /* > 0: split over GPUs 0..n_gpus-1 (tensor parallelism over
                                    * NCCL; 1: a shard of one, the same path on one GPU) */
    const int *gpu_ids;            /* with n_gpus: those GPUs' device ordinals instead, distinct
                                    * (brasa_gpus_parse) */
    int tp_world, tp_rank;         /* with n_gpus: ranks in all, across processes (0: n_gpus),
                                    * and this process's first */
    const char *tp_id;             /* the file through which the processes share NCCL's id */
    bool verbose;                  /* load messages on stderr (also with BRASA_VERBOSE=1) */
    /* The CPU backend moves the weights out of the file's mapping into memory in huge pages
     * where the system has it to spare (decode streams them faster); true: keep the mapping. */
    bool keep_mapped;
    /* Called during load with a fraction in [0, 1]; may be NULL. */
    void (*progress)(void *ud, float fraction);
    void *progress_ud;
};

struct brasa_model_info {
    const char *arch;       /* "llama", "qwen2", "granite", "qwen3", "qwen35" */
    const char *name;       /* general.name or the file name */
    const char *backend;    /* "cpu" or "cuda" */
    int n_vocab, n_ctx_train, n_layer, n_embd, n_head, n_head_kv;
    uint64_t n_params;
    uint64_t file_bytes;
    uint64_t weight_bytes_per_token; /* bytes of weights one decode step reads */
};

/* The tools' --gpus: a count N (GPUs 0..N-1; 0: none) or a list of device ordinals, "2,3"
 * (a list of one ends in a comma: "3,"). Sets *n and, for a list, ids[0..*n) (room for
 * BRASA_MAX_GPUS; for a count ids[0] = -1). BRASA_EINVAL, with a message, for anything else. */
#define BRASA_MAX_GPUS 8
brasa_status brasa_gpus_parse(const char *s, int *n, int *ids, struct brasa_err *err);
brasa_status brasa_model_load(const char *path, const struct brasa_model_opts *opts,
                              struct brasa_model **out, struct brasa_err *err);
void brasa_model_free(struct brasa_model *m);
void brasa_model_get_info(const struct brasa_model *m, struct brasa_model_info *info);
const struct tokenizer *brasa_model_tokenizer(const struct brasa_model *m);

enum brasa_kv_type { BRASA_KV_F16 = 0, BRASA_KV_F32 };
struct brasa_session_opts {
    int n_ctx;                /* 0: from the file (capped to a sane default) */
    int n_batch;              /* prompt tokens per forward pass, 0: default */
    enum brasa_kv_type kv_type;
};

brasa_status brasa_session_new(struct brasa_model *m, const struct brasa_session_opts *opts,
                               struct brasa_session **out, struct brasa_err *err);
void brasa_session_free(struct brasa_session *s);
void brasa_session_reset(struct brasa_session *s); /* empty KV cache and recurrent state */
int brasa_session_pos(const struct brasa_session *s);
int brasa_session_n_ctx(const struct brasa_session *s);
/* The device time of the last forward pass in ms, from the GPU's own events (from the start of
 * its first kernel to the end of its last, not counting the copies to and from the host); -1
 * on the CPU backend or split over several GPUs. */
double brasa_session_device_ms(const struct brasa_session *s);
/* Feeds n tokens at the current position. If logits_all is non-NULL it receives the logits of
 * every one of the n positions ([n][n_vocab]); the last position's logits are always available
 * from brasa_session_logits() afterwards. */
brasa_status brasa_session_eval(struct brasa_session *s, const int32_t *ids, int n,
                                float *logits_all, struct brasa_err *err);
/* NULL only if the logits could not be read from the GPU. */
const float *brasa_session_logits(struct brasa_session *s);
/* Greedy generation on one GPU queues its decode steps: brasa_session_eval of one token may
 * return before the device has run it (and queue the next step ahead on the device's own
 * pick); brasa_session_sample, _logits and every other call wait for it. This waits for the
 * evaluated tokens' steps alone (timing; a no-op otherwise). */
brasa_status brasa_session_wait(struct brasa_session *s, struct brasa_err *err);
/* Resident bytes of the session (KV cache, recurrent state, activations). */
uint64_t brasa_session_bytes(const struct brasa_session *s);

/* ---- sampling ----
 * Order: penalties (repetition, presence, frequency over the last penalty_last_n tokens)
 * -> greedy if temperature <= 0 -> top-k -> temperature -> softmax -> top-p -> min-p -> draw.
 * Penalties touch each distinct token of the window once: repetition divides a positive logit
 * by repeat_penalty and multiplies a negative one; then logit -= count * frequency_penalty +
 * presence_penalty. Greedy ties go to the lowest id. The draw uses a generator seeded with
 * `seed` alone, so the same logits, parameters and seed give the same tokens.
 * Defaults (brasa_sampler_defaults): temperature 0.8, top-k 40, top-p 0.95, min-p 0.05,
 * penalties off, penalty_last_n 64. Details of each step: src/sample/sample.h. */
struct brasa_sampler_params {
    float temperature;       /* <= 0: greedy */
    int top_k;               /* <= 0: off */
    float top_p;             /* >= 1: off */
    float min_p;             /* <= 0: off */
    float repeat_penalty;    /* 1: off */
    float presence_penalty;  /* 0: off */
    float frequency_penalty; /* 0: off */
    int penalty_last_n;      /* tokens looked back for penalties (<= 0: penalties off) */
    uint64_t seed;
};
void brasa_sampler_defaults(struct brasa_sampler_params *p);
brasa_status brasa_sampler_new(const struct brasa_sampler_params *p, int n_vocab,
                               struct brasa_sampler **out, struct brasa_err *err);
void brasa_sampler_free(struct brasa_sampler *s);
void brasa_sampler_accept(struct brasa_sampler *s, int32_t id); /* adds to the penalty history */
/* Forgets the penalty history and restarts the generator from the seed. */
void brasa_sampler_reset(struct brasa_sampler *s);
int32_t brasa_sampler_sample(struct brasa_sampler *s, const float *logits);

/* Generation on a GPU: with a sampler set, each evaluation selects on the device the few
 * candidates that sampler needs (its top-k, or the best for greedy, plus the tokens its
 * penalties may push down) and only those cross to the host; brasa_session_sample then draws
 * from them the token brasa_sampler_sample would draw from the whole row (which
 * brasa_session_logits still fetches when asked, or when the sampler needs every logit).
 * NULL: the whole row every time. The CPU backend ignores it. */
void brasa_session_set_sampler(struct brasa_session *s, struct brasa_sampler *smp);
/* The next token from the last evaluated position (-1: the GPU could not be read). */
int32_t brasa_session_sample(struct brasa_session *s, struct brasa_sampler *smp);

/* ---- generation ---- */
struct brasa_gen_stats {
    int n_prompt, n_gen;
    double prompt_s, gen_s;   /* wall time of prompt processing and of generation */
    double ttft_s;            /* time to first generated token */
    int n_ahead;              /* tokens whose step the GPU had queued ahead on its own pick
                               * (greedy), before the host read the token: kept as they were */
};
/* Called for every generated token with its printable text (streaming-safe UTF-8).
 * Return non-zero to stop. */
typedef int (*brasa_token_cb)(void *ud, int32_t id, const char *text, size_t len);
enum brasa_gen_flags { BRASA_GEN_IGNORE_EOS = 1 << 0 };
brasa_status brasa_generate(struct brasa_session *s, struct brasa_sampler *smp,
                            const int32_t *prompt, int n_prompt, int max_tokens, int flags,
                            brasa_token_cb cb, void *ud, struct brasa_gen_stats *stats,
                            struct brasa_err *err);

#endif
