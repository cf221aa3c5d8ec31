/* session: the engine API of include/brasa.h (except sampling): model loading, sessions with
 * their KV cache and recurrent state, batched prompt processing and token-by-token decode,
 * and the generation loop. */
#include "brasa.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/platform.h"
#include "core/pool.h"
#include "cpu/cpu.h"
#include "gguf/gguf.h"
#include "gpu/gpu.h"
#include "gpu/split.h"
#include "model/model.h"
#include "quant/quant.h"
#include "sample/sample.h"
#include "session/tp.h"
#include "tok/tok.h"

#define DEFAULT_CTX_CAP 4096
#define DEFAULT_BATCH 512

struct brasa_model {
    struct gguf_file *f;
    struct mdl m;
    struct tokenizer *tok;
    struct pool *pool;
    pthread_mutex_t run_mu; /* one graph at a time per model: its sessions take turns */
    char *name;
    struct gpu *gpu;          /* the GPU backend (src/gpu), NULL: CPU */
    struct tp_model *tp;      /* split over several GPUs (session/tp.h), else NULL */
};

struct brasa_session {
    struct brasa_model *model;
    int n_ctx, n_batch, pos;
    struct mdl_cache cache;
    void *kv_mem;             /* every attention layer's K and V: (n_ctx, n_kv*hd) each */
    float *rec_mem;           /* conv and DeltaNet states of the recurrent layers */
    size_t kv_bytes, rec_bytes;
    struct cpu *cpu;
    struct gpu_sess *gpu;     /* set when the model runs on the GPU */
    struct tp_sess *tp;       /* set when the model is split over GPUs (then no cpu, no gpu) */
    struct graph g_dec;       /* one token (decode) */
    struct graph g_pp;        /* the last prompt batch shape built */
    bool pp_all;
    float *logits;            /* [n_vocab] of the last position */
    bool logits_ok;           /* logits holds the last evaluation's row (GPU: fetched lazily) */
    struct brasa_sampler *smp; /* brasa_session_set_sampler: what the GPU selects candidates for */
    /* Greedy generation on one GPU queues each decode step before the host has read the token
     * of the one before it (the device feeds its own pick in), so the GPU does not wait for the
     * host between tokens. */
    bool queue;               /* on (brasa_session_set_sampler) */
    bool ahead;               /* a step in flight at position pos takes the device's pick of
                               * the step before it: the next eval of that token keeps it */
    bool picked;              /* pick: the first candidate of the last finished step */
    int32_t pick;
    bool lost;                /* a dropped step overwrote the output row of the last kept one */
    int32_t last_tok;         /* the token of the last one-token step (to run it again) */
    long n_ahead;             /* steps queued ahead and kept, since the session began */
};

/* ---------------------------------------------------------------- model */

static void model_free(struct brasa_model *m)
{
    if (!m)
        return;
    tp_model_free(m->tp);
    gpu_close(m->gpu);
    tok_free(m->tok);
    mdl_free(&m->m);
    if (m->f)
        gguf_close(m->f);
    pool_free(m->pool);
    pthread_mutex_destroy(&m->run_mu);
    free(m->name);
    free(m);
}

_Static_assert(BRASA_MAX_GPUS == SPLIT_MAX_GPUS, "the API's GPU limit is the split's");
#define GPU_ORDINAL_MAX 63 /* the largest device ordinal a list may name */

brasa_status brasa_gpus_parse(const char *s, int *n, int *ids, struct brasa_err *err)
{
    *n = 0;
    ids[0] = -1;
    if (!s || !*s)
        return brasa_fail(err, BRASA_EINVAL, "--gpus: a GPU count or a list of GPUs (2,3)");
    bool list = strchr(s, ',') != NULL;
    for (const char *p = s; *p;) {
        char *e;
        long v = strtol(p, &e, 10);
        if (e == p || v < 0 || v > GPU_ORDINAL_MAX || (*e && *e != ','))
            return list ? brasa_fail(err, BRASA_EINVAL, "--gpus '%s': device ordinals 0..%d "
                                     "separated by commas", s, GPU_ORDINAL_MAX)
                        : brasa_fail(err, BRASA_EINVAL, "--gpus '%s': a GPU count or a list of "
                                     "GPUs (2,3)", s);
        if (!list) {
            if (v > BRASA_MAX_GPUS)
                return brasa_fail(err, BRASA_EINVAL, "--gpus %ld: 0 to %d GPUs", v,
                                  BRASA_MAX_GPUS);
            *n = (int)v;
            return BRASA_OK;
        }
        for (int i = 0; i < *n; i++)
            if (ids[i] == v)
                return brasa_fail(err, BRASA_EINVAL, "--gpus '%s': GPU %ld twice", s, v);
        if (*n == BRASA_MAX_GPUS)
            return brasa_fail(err, BRASA_EINVAL, "--gpus '%s': more than %d GPUs", s,
                              BRASA_MAX_GPUS);
        ids[(*n)++] = (int)v;
        p = *e ? e + 1 : e;
    }
    return BRASA_OK;
}

brasa_status brasa_model_load(const char *path, const struct brasa_model_opts *opts,
                              struct brasa_model **out, struct brasa_err *err)
{
    struct brasa_model_opts def = {0};
    if (!opts)
        opts = &def;
    /* BRASA_VERBOSE (set, not 0) as well as opts->verbose, as the GPU backend reads it */
    const char *ve = getenv("BRASA_VERBOSE");
    const bool verbose = opts->verbose || (ve && *ve && strcmp(ve, "0") != 0);
    *out = NULL;
    if (opts->n_threads < 0 || opts->n_threads > 1024)
        return brasa_fail(err, BRASA_EINVAL, "thread count %d is outside 0..1024", opts->n_threads);
    for (int i = 0; opts->gpu_ids && i < opts->n_gpus; i++)
        for (int j = 0; j <= i; j++)
            if (opts->gpu_ids[i] < 0 || opts->gpu_ids[i] > GPU_ORDINAL_MAX ||
                (j < i && opts->gpu_ids[j] == opts->gpu_ids[i]))
                return brasa_fail(err, BRASA_EINVAL, "GPU ordinal %d: 0..%d, each once",
                                  opts->gpu_ids[i], GPU_ORDINAL_MAX);
    if (opts->progress)
        opts->progress(opts->progress_ud, 0.0f);
    const double t_load = plat_now();
    struct brasa_model *m = calloc(1, sizeof *m);
    if (!m)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    pthread_mutex_init(&m->run_mu, NULL);
    brasa_status st = gguf_open(&m->f, path, err);
    if (st != BRASA_OK) {
        model_free(m);
        return st;
    }
    if ((st = mdl_load(&m->m, m->f, err)) != BRASA_OK ||
        (st = tok_load(&m->tok, m->f, TOK_LOAD_FALLBACK_PRE, err)) != BRASA_OK) {
        model_free(m);
        return brasa_wrap(err, st, "%s", path);
    }
    if (tok_n_vocab(m->tok) > m->m.hp.n_vocab) {
        st = brasa_fail(err, BRASA_EFORMAT, "%s: the vocabulary has %d tokens but the embedding "
                        "table only %d rows", path, tok_n_vocab(m->tok), m->m.hp.n_vocab);
        model_free(m);
        return st;
    }
    if (gguf_get_str(m->f, "general.name", &m->name, NULL) != BRASA_OK) {
        const char *slash = strrchr(path, '/');
        m->name = strdup(slash ? slash + 1 : path);
    }
    int nth = opts->n_threads > 0 ? opts->n_threads : plat_ncpu();
    if (!m->name || (st = pool_new(&m->pool, nth, err)) != BRASA_OK) {
        if (!m->name)
            st = brasa_fail(err, BRASA_ENOMEM, "out of memory");
        model_free(m);
        return st;
    }
    if (opts->n_gpus < 0 || opts->n_gpus > 64) {
        st = brasa_fail(err, BRASA_EINVAL, "%d GPUs", opts->n_gpus);
        model_free(m);
        return st;
    }
    if (opts->n_gpus > 0) { /* tensor parallelism: no fallback, the user asked for GPUs */
        struct gpu_opts go = {.verbose = opts->verbose};
        struct tp_world w = {.world = opts->tp_world, .rank0 = opts->tp_rank,
                             .devices = opts->gpu_ids, .id_file = opts->tp_id};
        if ((st = tp_model_open(&m->tp, &m->m, opts->n_gpus, &w, &go, err)) != BRASA_OK) {
            model_free(m);
            return brasa_wrap(err, st, "%s", path);
        }
    } else if (opts->backend != BRASA_BACKEND_CPU) { /* the GPU when a driver is present */
        struct gpu_opts go = {.verbose = opts->verbose};
        struct brasa_err gerr = {{0}};
        if (gpu_open(&m->gpu, &go, &gerr) != BRASA_OK &&
            (opts->backend == BRASA_BACKEND_CUDA || verbose))
            fprintf(stderr, "brasa: %s; running on the CPU\n", gerr.msg);
    }
    if (!m->gpu && !m->tp && !opts->keep_mapped) { /* the CPU streams the weights every token */
        struct brasa_err merr = {{0}};
        double t0 = plat_now();
        if (gguf_to_memory(m->f, &merr) != BRASA_OK) {
            if (verbose)
                fprintf(stderr, "brasa: weights stay in the file's mapping: %s\n", merr.msg);
        } else if (verbose) {
            fprintf(stderr, "brasa: weights moved into memory (huge pages) in %.2f s\n", plat_now() - t0);
        }
    }
    if (verbose)
        fprintf(stderr, "brasa: %s: %s, %d layers, %d threads; opened in %.3f s%s\n", path,
                m->m.arch->name, m->m.hp.n_layer, nth, plat_now() - t_load,
                m->gpu ? " (the weights go to the GPU with its first plan)" : "");
    if (opts->progress)
        opts->progress(opts->progress_ud, 1.0f);
    *out = m;
    return BRASA_OK;
}

void brasa_model_free(struct brasa_model *m) { model_free(m); }

void brasa_model_get_info(const struct brasa_model *m, struct brasa_model_info *info)
{
    const struct mdl_hparams *hp = &m->m.hp;
    *info = (struct brasa_model_info){
        .arch = m->m.arch->name,
        .name = m->name,
        .backend = m->gpu || m->tp ? "cuda" : "cpu",
        .n_vocab = hp->n_vocab,
        .n_ctx_train = hp->n_ctx_train,
        .n_layer = hp->n_layer,
        .n_embd = hp->n_embd,
        .n_head = hp->n_head,
        .n_head_kv = hp->n_head_kv,
        .n_params = m->m.n_params,
        .file_bytes = m->f->size,
        .weight_bytes_per_token = m->m.weight_bytes_per_token,
    };
}

const struct tokenizer *brasa_model_tokenizer(const struct brasa_model *m) { return m->tok; }

/* ---------------------------------------------------------------- session */

/* Carves the KV cache and recurrent states out of two allocations. */
static brasa_status alloc_state(struct brasa_session *s, struct brasa_err *err)
{
    const struct mdl *m = &s->model->m;
    const struct mdl_hparams *hp = &m->hp;
    int L = hp->n_layer;
    size_t esz = s->cache.kv_type == GGML_TYPE_F16 ? 2 : 4;
    size_t kv_row = (size_t)hp->n_head_kv * (size_t)hp->head_dim * esz;
    size_t kv_layer = kv_row * (size_t)s->n_ctx;
    size_t conv_n = 0, ssm_n = 0;
    if (hp->ssm_n_vh) {
        conv_n = (size_t)(hp->conv_k - 1) *
                 (size_t)(2 * hp->ssm_n_kh * hp->ssm_dk + hp->ssm_n_vh * hp->ssm_dv);
        ssm_n = (size_t)hp->ssm_n_vh * hp->ssm_dv * hp->ssm_dk;
    }
    int n_attn = 0, n_rec = 0;
    for (int il = 0; il < L; il++)
        m->layers[il].recurrent ? n_rec++ : n_attn++;
    if (kv_layer / (size_t)s->n_ctx != kv_row || kv_layer > ((size_t)1 << 40) / 2 / (size_t)L)
        return brasa_fail(err, BRASA_ENOMEM, "a KV cache of %d positions is too large", s->n_ctx);
    s->kv_bytes = 2 * kv_layer * (size_t)n_attn;
    s->rec_bytes = (conv_n + ssm_n) * sizeof(float) * (size_t)n_rec;
    s->cache.k = calloc((size_t)L, sizeof(void *));
    s->cache.v = calloc((size_t)L, sizeof(void *));
    s->cache.conv = calloc((size_t)L, sizeof(float *));
    s->cache.ssm = calloc((size_t)L, sizeof(float *));
    s->kv_mem = s->kv_bytes ? malloc(s->kv_bytes) : NULL;
    s->rec_mem = s->rec_bytes ? calloc(1, s->rec_bytes) : NULL;
    if (!s->cache.k || !s->cache.v || !s->cache.conv || !s->cache.ssm ||
        (s->kv_bytes && !s->kv_mem) || (s->rec_bytes && !s->rec_mem))
        return brasa_fail(err, BRASA_ENOMEM, "out of memory for a %zu MiB KV cache",
                          s->kv_bytes >> 20);
    uint8_t *kv = s->kv_mem;
    float *rec = s->rec_mem;
    for (int il = 0; il < L; il++) {
        if (m->layers[il].recurrent) {
            s->cache.conv[il] = rec;
            s->cache.ssm[il] = rec + conv_n;
            rec += conv_n + ssm_n;
        } else {
            s->cache.k[il] = kv;
            s->cache.v[il] = kv + kv_layer;
            kv += 2 * kv_layer;
        }
    }
    return BRASA_OK;
}

brasa_status brasa_session_new(struct brasa_model *m, const struct brasa_session_opts *opts,
                               struct brasa_session **out, struct brasa_err *err)
{
    struct brasa_session_opts def = {0};
    if (!opts)
        opts = &def;
    *out = NULL;
    int n_ctx = opts->n_ctx;
    if (n_ctx == 0)
        n_ctx = m->m.hp.n_ctx_train < DEFAULT_CTX_CAP ? m->m.hp.n_ctx_train : DEFAULT_CTX_CAP;
    if (n_ctx < 1 || n_ctx > (1 << 20))
        return brasa_fail(err, BRASA_EINVAL, "context length %d is outside 1..1048576", n_ctx);
    if (opts->n_batch < 0 || opts->kv_type > BRASA_KV_F32)
        return brasa_fail(err, BRASA_EINVAL, "bad batch size %d or KV type", opts->n_batch);
    struct brasa_session *s = calloc(1, sizeof *s);
    if (!s)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    s->model = m;
    s->n_ctx = n_ctx;
    s->n_batch = opts->n_batch ? opts->n_batch : DEFAULT_BATCH;
    s->cache.n_ctx = n_ctx;
    s->cache.kv_type = opts->kv_type == BRASA_KV_F32 ? GGML_TYPE_F32 : GGML_TYPE_F16;
    brasa_status st;
    s->logits = calloc((size_t)m->m.hp.n_vocab, sizeof(float));
    if (!s->logits)
        st = brasa_fail(err, BRASA_ENOMEM, "out of memory");
    else if (m->tp) /* every shard's states live on its GPU */
        st = tp_sess_new(m->tp, n_ctx, s->cache.kv_type, &s->tp, err);
    else if ((st = alloc_state(s, err)) == BRASA_OK &&
             (st = cpu_new(&s->cpu, m->pool, err)) == BRASA_OK &&
             (st = mdl_build(&m->m, &s->cache, 1, true, &s->g_dec, err)) == BRASA_OK)
        st = cpu_prepare(s->cpu, &s->g_dec, n_ctx, err);
    if (st == BRASA_OK && m->gpu && (st = gpu_sess_new(m->gpu, &s->gpu, err)) == BRASA_OK)
        st = gpu_sess_prepare(s->gpu, &s->g_dec, n_ctx, err);
    if (st != BRASA_OK) {
        brasa_session_free(s);
        return st;
    }
    if (getenv("BRASA_PRINT_GRAPH")) /* the decode graph, one line per node */
        graph_print(&s->g_dec, stderr);
    *out = s;
    return BRASA_OK;
}

void brasa_session_free(struct brasa_session *s)
{
    if (!s)
        return;
    tp_sess_free(s->tp);
    gpu_sess_free(s->gpu);
    cpu_free(s->cpu);
    graph_free(&s->g_dec);
    graph_free(&s->g_pp);
    free(s->cache.k);
    free(s->cache.v);
    free(s->cache.conv);
    free(s->cache.ssm);
    free(s->kv_mem);
    free(s->rec_mem);
    free(s->logits);
    free(s);
}

/* Steps queued on the device (greedy generation, s->queue): q_launch queues one at the
 * position pos (tok NULL: the device's pick of the step before), q_finish waits for the
 * oldest, settle waits for them all and drops a step queued ahead that no eval kept. */
static brasa_status q_launch(struct brasa_session *s, const int32_t *tok, struct brasa_err *err)
{
    struct graph_run r = {.pos0 = s->pos, .tokens = tok, .top_k = sampler_candidates(s->smp)};
    pthread_mutex_lock(&s->model->run_mu);
    brasa_status st = gpu_sess_launch(s->gpu, &s->g_dec, &r, err);
    pthread_mutex_unlock(&s->model->run_mu);
    return st;
}

static brasa_status q_finish(struct brasa_session *s, struct brasa_err *err)
{
    pthread_mutex_lock(&s->model->run_mu);
    brasa_status st = gpu_sess_finish(s->gpu, err);
    pthread_mutex_unlock(&s->model->run_mu);
    return st;
}

brasa_status brasa_session_wait(struct brasa_session *s, struct brasa_err *err)
{
    brasa_status st = BRASA_OK;
    while (st == BRASA_OK && s->gpu && gpu_sess_in_flight(s->gpu) > (s->ahead ? 1 : 0))
        st = q_finish(s, err);
    return st;
}

static brasa_status settle(struct brasa_session *s, struct brasa_err *err)
{
    /* the kept steps first: their candidates are the session's */
    brasa_status st = brasa_session_wait(s, err);
    if (st == BRASA_OK && s->ahead) { /* (its KV row at pos is written again by the next
                                       * step there) */
        pthread_mutex_lock(&s->model->run_mu);
        st = gpu_sess_drop(s->gpu, err);
        pthread_mutex_unlock(&s->model->run_mu);
        s->lost = true;
    }
    s->ahead = false;
    return st;
}

void brasa_session_reset(struct brasa_session *s)
{
    settle(s, NULL);
    s->lost = false;
    s->pos = 0;
    s->logits_ok = false;
    if (s->rec_mem) /* the KV cache needs no clearing: rows past pos are never read */
        memset(s->rec_mem, 0, s->rec_bytes);
    if (s->gpu)
        gpu_sess_reset(s->gpu, NULL);
    if (s->tp)
        tp_sess_reset(s->tp, NULL);
}

int brasa_session_pos(const struct brasa_session *s) { return s->pos; }
int brasa_session_n_ctx(const struct brasa_session *s) { return s->n_ctx; }
double brasa_session_device_ms(const struct brasa_session *s)
{
    return s->gpu && s->pos > 0 ? gpu_sess_last_ms(s->gpu) : -1.0;
}
const float *brasa_session_logits(struct brasa_session *s)
{
    if (!s->logits_ok && s->tp && s->pos > 0) { /* the last run sent only candidates */
        if (tp_sess_output(s->tp, s->logits, NULL, NULL) != BRASA_OK)
            return NULL;
        s->logits_ok = true;
    }
    if (!s->logits_ok && s->gpu && s->pos > 0) {
        if (settle(s, NULL) != BRASA_OK)
            return NULL;
        if (s->lost) { /* the last step again, at its position: the same row, the same KV */
            struct graph_run r = {.pos0 = s->pos - 1, .tokens = &s->last_tok};
            pthread_mutex_lock(&s->model->run_mu);
            brasa_status st = gpu_sess_run(s->gpu, &s->g_dec, &r, NULL);
            pthread_mutex_unlock(&s->model->run_mu);
            if (st != BRASA_OK)
                return NULL;
            s->lost = false;
        }
        const float *out = gpu_sess_output(s->gpu, NULL);
        if (!out)
            return NULL;
        memcpy(s->logits, out, (size_t)s->model->m.hp.n_vocab * sizeof(float));
        s->logits_ok = true;
    }
    return s->logits;
}

void brasa_session_set_sampler(struct brasa_session *s, struct brasa_sampler *smp)
{
    const char *e = getenv("BRASA_GPU_TOPK"); /* 0: the whole row every time (comparison) */
    settle(s, NULL); /* (an error here comes back from the next eval or sample) */
    s->smp = e && !strcmp(e, "0") ? NULL : smp;
    /* queued steps: greedy on one GPU, not with a recurrent state (a dropped step would have
     * moved it on; BRASA_GPU_QUEUE=0: off) */
    e = getenv("BRASA_GPU_QUEUE");
    s->queue = s->smp && s->gpu && !s->rec_bytes && sampler_is_greedy(s->smp) &&
               sampler_candidates(s->smp) == 1 && gpu_sess_can_queue(s->gpu) &&
               !(e && !strcmp(e, "0"));
}

int32_t brasa_session_sample(struct brasa_session *s, struct brasa_sampler *smp)
{
    const int32_t *ids;
    const float *lg;
    if (brasa_session_wait(s, NULL) != BRASA_OK) /* the last kept step */
        return -1;
    int n = s->logits_ok ? 0 : s->gpu ? gpu_sess_top(s->gpu, &ids, &lg)
                                      : s->tp ? tp_sess_top(s->tp, &ids, &lg) : 0;
    s->picked = s->queue && n > 0;
    if (s->picked)
        s->pick = ids[0];
    int k = sampler_candidates(smp);
    if (k > 0 && k <= n) /* the device's best n hold the k the sampler needs */
        return sampler_sample_top(smp, ids, lg, k);
    const float *row = brasa_session_logits(s);
    return row ? brasa_sampler_sample(smp, row) : -1;
}

uint64_t brasa_session_bytes(const struct brasa_session *s)
{
    return s->kv_bytes + s->rec_bytes + (s->cpu ? cpu_bytes(s->cpu) : 0) +
           (uint64_t)s->model->m.hp.n_vocab * sizeof(float);
}

/* The graph for a batch of n tokens (the decode graph for one). */
static brasa_status batch_graph(struct brasa_session *s, int n, bool all, struct graph **g,
                                struct brasa_err *err)
{
    if (n == 1) {
        *g = &s->g_dec;
        return BRASA_OK;
    }
    if (s->g_pp.nodes == NULL || s->g_pp.n_tok != n || s->pp_all != all) {
        graph_free(&s->g_pp);
        brasa_status st = mdl_build(&s->model->m, &s->cache, n, all, &s->g_pp, err);
        if (st == BRASA_OK)
            st = cpu_prepare(s->cpu, &s->g_pp, s->n_ctx, err);
        if (st == BRASA_OK && s->gpu)
            st = gpu_sess_prepare(s->gpu, &s->g_pp, s->n_ctx, err);
        if (st != BRASA_OK) {
            graph_free(&s->g_pp);
            return st;
        }
        s->pp_all = all;
    }
    *g = &s->g_pp;
    return BRASA_OK;
}

/* The last batch's output to the host: every row into all (when given), the last into
 * s->logits. */
static brasa_status batch_rows(struct brasa_session *s, const struct graph *g, float *all,
                               struct brasa_err *err)
{
    size_t row = (size_t)s->model->m.hp.n_vocab;
    int rows = 1;
    if (s->tp) { /* (without all, a batch has one output row) */
        brasa_status st = tp_sess_output(s->tp, all ? all : s->logits, &rows, err);
        if (st == BRASA_OK && all)
            memcpy(s->logits, all + (size_t)(rows - 1) * row, row * sizeof(float));
        return st;
    }
    const float *out = s->gpu ? gpu_sess_output(s->gpu, err) : cpu_node_data(s->cpu, g, g->out);
    if (!out)
        return BRASA_EDEVICE;
    if (all)
        memcpy(all, out, (size_t)g->n_out * row * sizeof(float));
    memcpy(s->logits, out + (size_t)(g->n_out - 1) * row, row * sizeof(float));
    return BRASA_OK;
}

/* One token of greedy generation, queued: kept where the step queued ahead took it (the
 * host's pick is the device's), else queued now; then the next step goes ahead on the
 * device's pick of this one, if the context has room. */
static brasa_status eval_queued(struct brasa_session *s, int32_t id, struct brasa_err *err)
{
    brasa_status st;
    if (s->ahead && s->picked && id == s->pick) {
        s->ahead = false;
        s->n_ahead++;
    } else {
        if ((st = settle(s, err)) != BRASA_OK || (st = q_launch(s, &id, err)) != BRASA_OK)
            return st;
    }
    s->pos++;
    s->last_tok = id;
    s->picked = false;
    s->lost = false;
    s->logits_ok = false;
    if (s->pos < s->n_ctx) {
        if ((st = q_launch(s, NULL, err)) != BRASA_OK)
            return st;
        s->ahead = true;
    }
    return BRASA_OK;
}

brasa_status brasa_session_eval(struct brasa_session *s, const int32_t *ids, int n,
                                float *logits_all, struct brasa_err *err)
{
    int n_vocab = s->model->m.hp.n_vocab;
    if (n < 1)
        return brasa_fail(err, BRASA_EINVAL, "nothing to evaluate (%d tokens)", n);
    if (n > s->n_ctx - s->pos)
        return brasa_fail(err, BRASA_EINVAL,
                          "%d tokens at position %d do not fit the context of %d (use a larger "
                          "-c or reset the session)", n, s->pos, s->n_ctx);
    for (int i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= n_vocab)
            return brasa_fail(err, BRASA_EINVAL, "token id %d is outside the vocabulary (0..%d)",
                              ids[i], n_vocab - 1);
    if (s->queue && n == 1 && !logits_all)
        return eval_queued(s, ids[0], err);
    brasa_status st0 = settle(s, err);
    if (st0 != BRASA_OK)
        return st0;
    s->lost = false;
    if (n == 1)
        s->last_tok = ids[0];
    for (int done = 0; done < n;) {
        int nb = n - done < s->n_batch ? n - done : s->n_batch;
        struct graph *g = NULL; /* (split over GPUs, each shard has its own: session/tp.c) */
        brasa_status st = s->tp ? BRASA_OK : batch_graph(s, nb, logits_all != NULL, &g, err);
        if (st != BRASA_OK)
            return st;
        /* the last batch's row: on a GPU, the sampler's candidates only (when it needs few) */
        int top = (s->gpu || s->tp) && s->smp && !logits_all && done + nb == n
                      ? sampler_candidates(s->smp) : 0;
        struct graph_run r = {.pos0 = s->pos, .tokens = ids + done, .top_k = top};
        pthread_mutex_lock(&s->model->run_mu);
        st = s->tp    ? tp_sess_run(s->tp, ids + done, nb, s->pos, logits_all != NULL, top, err)
             : s->gpu ? gpu_sess_run(s->gpu, g, &r, err)
                      : cpu_run(s->cpu, g, &r, err);
        pthread_mutex_unlock(&s->model->run_mu);
        if (st != BRASA_OK)
            return st;
        s->pos += nb;
        s->logits_ok = false;
        /* one GPU, the last row alone: it stays in the run's pinned host copy until
         * brasa_session_logits asks for it (no second copy of a row nobody reads) */
        if (top == 0 && (logits_all || !s->gpu)) {
            float *all = logits_all ? logits_all + (size_t)done * n_vocab : NULL;
            if ((st = batch_rows(s, g, all, err)) != BRASA_OK)
                return st;
            s->logits_ok = true;
        }
        done += nb;
    }
    return BRASA_OK;
}

/* ---------------------------------------------------------------- generation */

brasa_status brasa_generate(struct brasa_session *s, struct brasa_sampler *smp,
                            const int32_t *prompt, int n_prompt, int max_tokens, int flags,
                            brasa_token_cb cb, void *ud, struct brasa_gen_stats *stats,
                            struct brasa_err *err)
{
    struct brasa_gen_stats st0 = {.n_prompt = n_prompt};
    if (stats)
        *stats = st0;
    const struct tokenizer *tok = s->model->tok;
    double t0 = plat_now();
    brasa_status st = BRASA_OK;
    const long ahead0 = s->n_ahead;
    brasa_session_set_sampler(s, smp);
    if (n_prompt > 0) {
        for (int i = 0; i < n_prompt; i++)
            brasa_sampler_accept(smp, prompt[i]);
        if ((st = brasa_session_eval(s, prompt, n_prompt, NULL, err)) != BRASA_OK)
            goto out;
    } else if (s->pos == 0) {
        st = brasa_fail(err, BRASA_EINVAL, "an empty prompt needs at least one token");
        goto out;
    }
    double t1 = plat_now();
    st0.prompt_s = t1 - t0;
    struct tok_stream ts;
    tok_stream_init(&ts);
    char text[1024];
    for (int k = 0; k < max_tokens; k++) {
        int32_t id = brasa_session_sample(s, smp);
        if (id < 0) {
            st = brasa_fail(err, BRASA_EDEVICE, "could not read the logits from the GPU");
            break;
        }
        brasa_sampler_accept(smp, id);
        if (k == 0)
            st0.ttft_s = plat_now() - t0;
        bool eog = tok && tok_is_eog(tok, id) && !(flags & BRASA_GEN_IGNORE_EOS);
        st0.n_gen++;
        size_t len = eog || !tok ? 0 : tok_stream_push(tok, &ts, id, text, sizeof text);
        if (tok && !eog && k == max_tokens - 1) /* the last token: release held-back bytes too */
            len += tok_stream_flush(&ts, text + len, sizeof text - len);
        if (cb && cb(ud, id, text, len) != 0)
            break;
        if (eog)
            break;
        /* the session keeps every generated token (a chat's next turn continues from it) */
        if ((st = brasa_session_eval(s, &id, 1, NULL, err)) != BRASA_OK)
            break;
    }
    if (st == BRASA_OK) /* (the last token's step, when it was queued) */
        st = brasa_session_wait(s, err);
    st0.gen_s = plat_now() - t1;
    st0.n_ahead = (int)(s->n_ahead - ahead0);
    if (stats)
        *stats = st0;
out:
    brasa_session_set_sampler(s, NULL);
    return st;
}
