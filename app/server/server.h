/* brasa-server: an OpenAI-compatible HTTP API and a live dashboard over the engine (brasa.h).
 *
 * Threads: libmicrohttpd runs one thread per connection; one engine worker thread owns the
 * model and runs every job (load, unload, generate) in arrival order, so the engine is only ever
 * used by one thread at a time; a sampler thread turns token counters into one telemetry point a
 * second. Connection threads only enqueue jobs and wait on them. */
#ifndef BRASA_SERVER_H
#define BRASA_SERVER_H
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "brasa.h"
#include "tok/tok.h"

struct srv_config {
    const char *host;        /* numeric address to listen on */
    int port;                /* 0: any free port (printed on stdout) */
    const char *api_key;     /* NULL: no key needed */
    const char *models_dir;  /* GGUF files offered by /v1/models; may be NULL */
    const char *model;       /* file loaded at start; may be NULL */
    bool allow_remote;       /* a non-loopback host needs this */
    bool keep_mapped;        /* --mmap: CPU weights read from the file's mapping */
    int n_threads;
    int n_gpus;              /* > 0: each model split over GPUs 0..n_gpus-1 (--gpus) */
    int gpu_ids[BRASA_MAX_GPUS]; /* or those, where gpu_ids[0] >= 0 (brasa_gpus_parse) */
    int n_ctx;
    size_t max_body;         /* bytes of a request body */
    int max_prompt_tokens;
    int max_tokens;          /* upper bound of a request's max_tokens */
    int max_queue;           /* jobs waiting at once */
    int max_conn;
    int token_delay_ms; /* tests: pause after each token ($BRASA_SERVE_TOKEN_DELAY_MS) */
};

enum model_state { MS_NONE = 0, MS_LOADING, MS_READY, MS_UNLOADING, MS_ERROR };
const char *model_state_name(enum model_state s);

enum job_kind { JOB_GEN, JOB_LOAD, JOB_UNLOAD };

/* One unit of engine work. Shared by a connection thread and the worker: fields below `mu:`
 * are read and written under srv.mu; the job is freed when both have released it. */
struct job {
    enum job_kind kind;
    struct job *next;
    char model[128]; /* model id to use ("" = whatever is loaded) */
    /* generation input (owned by the job) */
    bool chat;
    char *prompt;               /* completions */
    struct chat_msg *msgs;      /* chat: roles are static strings, contents owned */
    size_t n_msgs;
    struct brasa_sampler_params sp;
    int max_tokens;
    bool ignore_eos;
    char *stop[8];
    int n_stop;
    int fd; /* the client's socket, to notice a client that went away */
    /* mu: */
    int refs;
    bool queued, started, done, cancelled;
    char *out;            /* text produced so far (stop strings already cut) */
    size_t out_len, out_cap;
    int n_prompt, n_gen;
    const char *finish;   /* "stop", "length", "cancelled" */
    int http_status;      /* non-zero: the job failed with this status and err */
    char err[BRASA_ERR_MAX];
    const char *err_type;
    const char *err_param;
    double ttft_ms, prompt_tps, gen_tps;
    char model_used[128];
};

#define SRV_TIMELINE 64
#define SRV_SERIES 180
#define SRV_RECENT 20

struct srv_event {
    double t; /* unix time, seconds */
    enum model_state state;
    char model[128];
    char msg[256];
};

struct srv_gen_record {
    double t;
    char model[128];
    int n_prompt, n_gen;
    double tok_s, ms_per_token, prompt_tok_s, ttft_ms;
    const char *finish;
};

struct srv_point {
    double t, tok_s, ms_per_token; /* ms_per_token < 0: no token in that second */
};

struct srv_model_entry {
    char id[128];
    char path[1024];
    uint64_t bytes;
    long long mtime; /* the file's modification time ("created" in /v1/models) */
};

struct srv {
    struct srv_config cfg;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* any job or state change */
    _Atomic int stopping; /* read without mu by waiting connection threads */
    struct job *q_head, *q_tail;
    int q_len;
    struct job *active;
    pthread_t worker, sampler;

    /* model (written by the worker; readers take rw for reading, the worker for writing) */
    pthread_rwlock_t rw;
    struct brasa_model *model;
    struct brasa_session *session;
    const struct tokenizer *tok;
    enum chat_template_id tmpl;
    struct brasa_model_info info;
    /* mu: */
    enum model_state state;
    double state_since;
    char model_id[128];
    char model_err[BRASA_ERR_MAX];
    struct srv_event timeline[SRV_TIMELINE];
    int n_timeline; /* total events ever; ring index = n % SRV_TIMELINE */

    struct srv_model_entry *models;
    int n_models;

    /* telemetry (mu) */
    bool gen_active;
    double cur_t0, cur_t_first, cur_t_last;
    int cur_n_prompt, cur_n_gen;
    char cur_model[128];
    unsigned long long tok_total;
    double interval_sum; unsigned long interval_n; /* since the last sample */
    unsigned long long tok_at_sample;
    struct srv_point series[SRV_SERIES];
    int n_series;
    struct srv_gen_record recent[SRV_RECENT];
    int n_recent;
    unsigned long long n_requests, n_errors, n_cancelled;
    uint64_t session_bytes;
    unsigned long long next_id;
};

/* engine.c */
int srv_init(struct srv *s, const struct srv_config *cfg, char *err, size_t cap);
void srv_shutdown(struct srv *s);
void srv_free(struct srv *s);
double srv_now(void); /* unix time, seconds */
double srv_mono(void);
/* Finds a model by id (with or without ".gguf"); NULL if unknown. */
const struct srv_model_entry *srv_find_model(const struct srv *s, const char *id);
struct job *job_new(enum job_kind kind);
/* Queues the job (takes one reference for the worker). Returns false when the queue is full. */
bool srv_submit(struct srv *s, struct job *j);
/* Marks a job cancelled; a queued job leaves the queue at once. */
void srv_cancel(struct srv *s, struct job *j);
void job_release(struct srv *s, struct job *j);
bool srv_loopback_host(const char *host);

#endif
