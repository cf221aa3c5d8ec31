/* The engine side of the server: model lifecycle, the job queue, the worker that runs jobs one
 * at a time in arrival order, and the telemetry it records. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "server.h"

const char *model_state_name(enum model_state s)
{
    switch (s) {
    case MS_LOADING: return "loading";
    case MS_READY: return "ready";
    case MS_UNLOADING: return "unloading";
    case MS_ERROR: return "error";
    default: return "unloaded";
    }
}

double srv_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

double srv_mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

bool srv_loopback_host(const char *host)
{
    unsigned char a[16];
    if (inet_pton(AF_INET, host, a) == 1)
        return a[0] == 127;
    if (inet_pton(AF_INET6, host, a) == 1) {
        static const unsigned char one[16] = {[15] = 1};
        return !memcmp(a, one, 16);
    }
    return !strcmp(host, "localhost");
}

/* ---- model list ---- */

static void id_from_path(const char *path, char *id, size_t cap)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    snprintf(id, cap, "%s", b);
    size_t n = strlen(id);
    if (n > 5 && !strcmp(id + n - 5, ".gguf"))
        id[n - 5] = 0;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const struct srv_model_entry *)a)->id, ((const struct srv_model_entry *)b)->id);
}

static bool add_model(struct srv *s, const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    char id[128];
    id_from_path(path, id, sizeof id);
    if (srv_find_model(s, id))
        return true;
    struct srv_model_entry *t = realloc(s->models, (size_t)(s->n_models + 1) * sizeof *t);
    if (!t)
        return false;
    s->models = t;
    struct srv_model_entry *e = &t[s->n_models++];
    snprintf(e->id, sizeof e->id, "%s", id);
    snprintf(e->path, sizeof e->path, "%s", path);
    e->bytes = (uint64_t)st.st_size;
    e->mtime = (long long)st.st_mtime;
    return true;
}

static int scan_models(struct srv *s, char *err, size_t cap)
{
    if (s->cfg.model && !add_model(s, s->cfg.model)) {
        snprintf(err, cap, "%s: not a readable file (%s)", s->cfg.model, strerror(errno));
        return -1;
    }
    if (!s->cfg.models_dir)
        return 0;
    DIR *d = opendir(s->cfg.models_dir);
    if (!d) {
        snprintf(err, cap, "--models-dir %s: %s", s->cfg.models_dir, strerror(errno));
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n <= 5 || strcmp(de->d_name + n - 5, ".gguf") || de->d_name[0] == '.')
            continue;
        char path[1024];
        if (snprintf(path, sizeof path, "%s/%s", s->cfg.models_dir, de->d_name) >= (int)sizeof path)
            continue;
        add_model(s, path);
    }
    closedir(d);
    qsort(s->models, (size_t)s->n_models, sizeof *s->models, entry_cmp);
    return 0;
}

const struct srv_model_entry *srv_find_model(const struct srv *s, const char *id)
{
    char want[128];
    id_from_path(id, want, sizeof want);
    for (int i = 0; i < s->n_models; i++)
        if (!strcmp(s->models[i].id, want))
            return &s->models[i];
    return NULL;
}

/* ---- lifecycle (worker thread) ---- */

/* Caller holds mu. */
static void set_state(struct srv *s, enum model_state st, const char *id, const char *msg)
{
    s->state = st;
    s->state_since = srv_now();
    snprintf(s->model_id, sizeof s->model_id, "%s", id);
    struct srv_event *e = &s->timeline[s->n_timeline % SRV_TIMELINE];
    e->t = s->state_since;
    e->state = st;
    snprintf(e->model, sizeof e->model, "%s", id);
    snprintf(e->msg, sizeof e->msg, "%s", msg ? msg : "");
    s->n_timeline++;
    pthread_cond_broadcast(&s->cv);
}

static void do_unload(struct srv *s)
{
    pthread_mutex_lock(&s->mu);
    bool have = s->model != NULL;
    char id[128];
    snprintf(id, sizeof id, "%s", s->model_id);
    if (have)
        set_state(s, MS_UNLOADING, id, NULL);
    pthread_mutex_unlock(&s->mu);
    if (!have)
        return;
    pthread_rwlock_wrlock(&s->rw);
    brasa_session_free(s->session);
    brasa_model_free(s->model);
    s->session = NULL;
    s->model = NULL;
    s->tok = NULL;
    pthread_rwlock_unlock(&s->rw);
    pthread_mutex_lock(&s->mu);
    s->session_bytes = 0;
    set_state(s, MS_NONE, id, NULL);
    pthread_mutex_unlock(&s->mu);
}

/* Loads e (unloading whatever is loaded first). Returns false and fills err on failure. */
static bool do_load(struct srv *s, const struct srv_model_entry *e, struct brasa_err *err)
{
    do_unload(s);
    pthread_mutex_lock(&s->mu);
    set_state(s, MS_LOADING, e->id, NULL);
    pthread_mutex_unlock(&s->mu);

    const int *ids = s->cfg.n_gpus && s->cfg.gpu_ids[0] >= 0 ? s->cfg.gpu_ids : NULL;
    struct brasa_model_opts mo = {.n_threads = s->cfg.n_threads, .n_gpus = s->cfg.n_gpus,
                                  .gpu_ids = ids, .keep_mapped = s->cfg.keep_mapped};
    struct brasa_model *m = NULL;
    struct brasa_session *ss = NULL;
    enum chat_template_id tmpl = CHAT_TMPL_NONE;
    brasa_status st = brasa_model_load(e->path, &mo, &m, err);
    if (st == BRASA_OK) {
        struct brasa_session_opts so = {.n_ctx = s->cfg.n_ctx};
        st = brasa_session_new(m, &so, &ss, err);
    }
    if (st == BRASA_OK) {
        /* The chat template comes from the file's metadata; a file without one still
         * serves /v1/completions, and chat falls back to plain text. */
        struct gguf_file *gf = NULL;
        struct brasa_err e2 = {{0}};
        const char *note = NULL;
        if (gguf_open(&gf, e->path, &e2) == BRASA_OK) {
            if (chat_template_pick(gf, NULL, &tmpl, &note, &e2) != BRASA_OK)
                tmpl = CHAT_TMPL_NONE;
            gguf_close(gf);
        }
    }
    if (st != BRASA_OK) {
        if (!err->msg[0])
            snprintf(err->msg, sizeof err->msg, "%s", brasa_status_name(st));
        brasa_session_free(ss);
        brasa_model_free(m);
        pthread_mutex_lock(&s->mu);
        snprintf(s->model_err, sizeof s->model_err, "%s", err->msg);
        set_state(s, MS_ERROR, e->id, err->msg);
        pthread_mutex_unlock(&s->mu);
        return false;
    }
    pthread_rwlock_wrlock(&s->rw);
    s->model = m;
    s->session = ss;
    s->tok = brasa_model_tokenizer(m);
    s->tmpl = tmpl;
    brasa_model_get_info(m, &s->info);
    pthread_rwlock_unlock(&s->rw);
    pthread_mutex_lock(&s->mu);
    s->model_err[0] = 0;
    s->session_bytes = brasa_session_bytes(ss);
    set_state(s, MS_READY, e->id, NULL);
    pthread_mutex_unlock(&s->mu);
    return true;
}

/* ---- jobs ---- */

struct job *job_new(enum job_kind kind)
{
    struct job *j = calloc(1, sizeof *j);
    if (!j)
        return NULL;
    j->kind = kind;
    j->refs = 1;
    j->fd = -1;
    brasa_sampler_defaults(&j->sp);
    return j;
}

static void job_free(struct job *j)
{
    free(j->prompt);
    for (size_t i = 0; i < j->n_msgs; i++)
        free((char *)j->msgs[i].content);
    free(j->msgs);
    for (int i = 0; i < j->n_stop; i++)
        free(j->stop[i]);
    free(j->out);
    free(j);
}

/* Caller holds mu. */
static bool release_locked(struct job *j)
{
    return --j->refs == 0;
}

void job_release(struct srv *s, struct job *j)
{
    pthread_mutex_lock(&s->mu);
    bool last = release_locked(j);
    pthread_mutex_unlock(&s->mu);
    if (last)
        job_free(j);
}

bool srv_submit(struct srv *s, struct job *j)
{
    pthread_mutex_lock(&s->mu);
    if (s->q_len >= s->cfg.max_queue || s->stopping) {
        pthread_mutex_unlock(&s->mu);
        return false;
    }
    j->refs++;
    j->queued = true;
    j->next = NULL;
    if (s->q_tail)
        s->q_tail->next = j;
    else
        s->q_head = j;
    s->q_tail = j;
    s->q_len++;
    s->n_requests++;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return true;
}

/* Caller holds mu. */
static void unlink_job(struct srv *s, struct job *j)
{
    struct job **pp = &s->q_head, *prev = NULL;
    while (*pp && *pp != j) {
        prev = *pp;
        pp = &(*pp)->next;
    }
    if (!*pp)
        return;
    *pp = j->next;
    if (s->q_tail == j)
        s->q_tail = prev;
    s->q_len--;
    j->queued = false;
}

void srv_cancel(struct srv *s, struct job *j)
{
    pthread_mutex_lock(&s->mu);
    bool last = false;
    if (!j->done && !j->cancelled) {
        j->cancelled = true;
        s->n_cancelled++;
        if (j->queued) {
            unlink_job(s, j);
            j->done = true;
            j->finish = "cancelled";
            last = release_locked(j); /* the worker's reference */
        }
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    if (last)
        job_free(j);
}

/* Caller holds mu. */
static void job_fail_locked(struct srv *s, struct job *j, int status, const char *type, const char *param,
                            const char *msg)
{
    j->http_status = status;
    j->err_type = type;
    j->err_param = param;
    snprintf(j->err, sizeof j->err, "%s", msg);
    s->n_errors++;
}

static void job_fail(struct srv *s, struct job *j, int status, const char *type, const char *param, const char *msg)
{
    pthread_mutex_lock(&s->mu);
    job_fail_locked(s, j, status, type, param, msg);
    pthread_mutex_unlock(&s->mu);
}

/* Caller holds mu. */
static bool out_append(struct job *j, const char *p, size_t n)
{
    if (j->out_len + n + 1 > j->out_cap) {
        size_t cap = j->out_cap ? j->out_cap * 2 : 256;
        while (cap < j->out_len + n + 1)
            cap *= 2;
        char *t = realloc(j->out, cap);
        if (!t)
            return false;
        j->out = t;
        j->out_cap = cap;
    }
    memcpy(j->out + j->out_len, p, n);
    j->out_len += n;
    j->out[j->out_len] = 0;
    return true;
}

/* ---- generation ---- */

struct gen_ctx {
    struct srv *s;
    struct job *j;
    char *text; /* everything generated (worker-private) */
    size_t len, cap, published;
    int n_gen;
    bool stopped, cancelled;
    double t0, t_first, t_last;
};

static void publish(struct gen_ctx *g, size_t upto)
{
    if (upto <= g->published)
        return;
    pthread_mutex_lock(&g->s->mu);
    out_append(g->j, g->text + g->published, upto - g->published);
    pthread_cond_broadcast(&g->s->cv);
    pthread_mutex_unlock(&g->s->mu);
    g->published = upto;
}

/* Publishes what can no longer turn into a stop string; true when a stop string was found. */
static bool check_stops(struct gen_ctx *g)
{
    struct job *j = g->j;
    size_t hold = 0;
    for (int i = 0; i < j->n_stop; i++) {
        size_t sl = strlen(j->stop[i]);
        size_t from = g->published > sl ? g->published - sl : 0;
        char *hit = strstr(g->text + from, j->stop[i]);
        if (hit) {
            g->len = (size_t)(hit - g->text);
            g->text[g->len] = 0;
            publish(g, g->len);
            return true;
        }
        /* longest suffix of the text that starts this stop string */
        for (size_t k = sl - 1; k > hold; k--)
            if (k <= g->len && !memcmp(g->text + g->len - k, j->stop[i], k)) {
                hold = k;
                break;
            }
    }
    publish(g, g->len - hold);
    return false;
}

static int gen_cb(void *ud, int32_t id, const char *piece, size_t n)
{
    struct gen_ctx *g = ud;
    struct srv *s = g->s;
    double now = srv_mono();
    pthread_mutex_lock(&s->mu);
    bool stop = g->j->cancelled || s->stopping;
    if (!g->t_first) {
        g->t_first = now;
        s->cur_t_first = now;
        g->j->ttft_ms = (now - g->t0) * 1e3;
    } else {
        s->interval_sum += now - g->t_last;
        s->interval_n++;
    }
    g->t_last = now;
    s->cur_t_last = now;
    s->cur_n_gen++;
    s->tok_total++;
    pthread_mutex_unlock(&s->mu);
    if (stop) {
        g->cancelled = true;
        return 1;
    }
    if (s->cfg.token_delay_ms > 0) {
        struct timespec ts = {s->cfg.token_delay_ms / 1000, (s->cfg.token_delay_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    /* An end-of-generation token ends the text; with ignore_eos it is one more generated token
     * (counted, its control text not shown). */
    if (s->tok && tok_is_eog(s->tok, id)) {
        if (g->j->ignore_eos)
            g->n_gen++;
        return 0;
    }
    g->n_gen++;
    if (g->len + n + 1 > g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 1024;
        while (cap < g->len + n + 1)
            cap *= 2;
        char *t = realloc(g->text, cap);
        if (!t)
            return 1;
        g->text = t;
        g->cap = cap;
    }
    memcpy(g->text + g->len, piece, n);
    g->len += n;
    g->text[g->len] = 0;
    if (check_stops(g)) {
        g->stopped = true;
        return 1;
    }
    return 0;
}

/* Plain-text rendering for a model without a chat template. */
static char *render_plain(const struct job *j)
{
    size_t n = 1;
    for (size_t i = 0; i < j->n_msgs; i++)
        n += strlen(j->msgs[i].content) + 1;
    char *t = malloc(n);
    if (!t)
        return NULL;
    t[0] = 0;
    for (size_t i = 0; i < j->n_msgs; i++) {
        strcat(t, j->msgs[i].content);
        if (i + 1 < j->n_msgs)
            strcat(t, "\n");
    }
    return t;
}

static void record_gen(struct srv *s, struct job *j, const struct gen_ctx *g, int n_prompt)
{
    /* caller holds mu */
    struct srv_gen_record *r = &s->recent[s->n_recent % SRV_RECENT];
    memset(r, 0, sizeof *r);
    r->t = srv_now();
    snprintf(r->model, sizeof r->model, "%s", j->model_used);
    r->n_prompt = n_prompt;
    r->n_gen = g->n_gen;
    double pf = g->t_first ? g->t_first - g->t0 : 0;
    double gs = g->t_first ? g->t_last - g->t_first : 0;
    r->ttft_ms = g->t_first ? pf * 1e3 : -1;
    r->prompt_tok_s = pf > 0 ? n_prompt / pf : 0;
    r->tok_s = gs > 0 && g->n_gen > 1 ? (g->n_gen - 1) / gs : 0;
    r->ms_per_token = g->n_gen > 1 && gs > 0 ? gs * 1e3 / (g->n_gen - 1) : -1;
    r->finish = j->finish;
    j->prompt_tps = r->prompt_tok_s;
    j->gen_tps = r->tok_s;
    s->n_recent++;
}

static void run_gen(struct srv *s, struct job *j)
{
    struct brasa_err err = {{0}};
    const struct srv_model_entry *e = j->model[0] ? srv_find_model(s, j->model) : NULL;
    if (j->model[0] && !e) {
        job_fail(s, j, 404, "model_not_found", "model", "unknown model");
        return;
    }
    if (e) {
        pthread_mutex_lock(&s->mu);
        bool same = s->state == MS_READY && !strcmp(s->model_id, e->id);
        pthread_mutex_unlock(&s->mu);
        if (!same && !do_load(s, e, &err)) {
            job_fail(s, j, 500, "model_load_error", "model", err.msg);
            return;
        }
    }
    if (!s->model) {
        job_fail(s, j, 503, "model_not_loaded", "model", "no model is loaded: POST /api/models/load {\"model\": NAME}");
        return;
    }
    pthread_mutex_lock(&s->mu);
    snprintf(j->model_used, sizeof j->model_used, "%s", s->model_id);
    pthread_mutex_unlock(&s->mu);

    char *text = NULL;
    int flags = TOK_ADD_SPECIAL;
    if (j->chat) {
        struct chat_opts co = {.add_assistant = true, .thinking = false};
        if (s->tmpl == CHAT_TMPL_NONE || chat_render(s->tmpl, j->msgs, j->n_msgs, &co, &text, &err) != BRASA_OK)
            text = render_plain(j);
        else
            flags |= TOK_PARSE_SPECIAL;
    } else {
        text = strdup(j->prompt);
    }
    if (!text) {
        job_fail(s, j, 500, "server_error", NULL, "out of memory");
        return;
    }
    int32_t *ids = NULL;
    size_t n_ids = 0;
    brasa_status st = tok_encode(s->tok, text, strlen(text), flags, &ids, &n_ids, &err);
    free(text);
    const char *pfield = j->chat ? "messages" : "prompt";
    if (st != BRASA_OK) {
        job_fail(s, j, 400, "invalid_request_error", pfield, err.msg);
        free(ids);
        return;
    }
    int n_ctx = brasa_session_n_ctx(s->session);
    char msg[256];
    if ((int)n_ids > s->cfg.max_prompt_tokens || (int)n_ids >= n_ctx || n_ids == 0) {
        if (n_ids == 0)
            snprintf(msg, sizeof msg, "the prompt is empty after tokenization");
        else
            snprintf(msg, sizeof msg, "the prompt has %zu tokens; the limit is %d (context %d, --max-prompt %d)",
                     n_ids, n_ctx - 1 < s->cfg.max_prompt_tokens ? n_ctx - 1 : s->cfg.max_prompt_tokens, n_ctx,
                     s->cfg.max_prompt_tokens);
        job_fail(s, j, 400, "context_length_exceeded", pfield, msg);
        free(ids);
        return;
    }
    int max_tokens = j->max_tokens;
    if (max_tokens > n_ctx - (int)n_ids)
        max_tokens = n_ctx - (int)n_ids;
    struct brasa_sampler *smp = NULL;
    if (brasa_sampler_new(&j->sp, s->info.n_vocab > 0 ? s->info.n_vocab : tok_n_vocab(s->tok), &smp, &err) !=
        BRASA_OK) {
        job_fail(s, j, 400, "invalid_request_error", NULL, err.msg);
        free(ids);
        return;
    }
    struct gen_ctx g = {.s = s, .j = j, .t0 = srv_mono()};
    pthread_mutex_lock(&s->mu);
    j->started = true;
    j->n_prompt = (int)n_ids;
    s->gen_active = true;
    s->cur_t0 = g.t0;
    s->cur_t_first = s->cur_t_last = 0;
    s->cur_n_prompt = (int)n_ids;
    s->cur_n_gen = 0;
    snprintf(s->cur_model, sizeof s->cur_model, "%s", j->model_used);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);

    brasa_session_reset(s->session);
    struct brasa_gen_stats stats = {0};
    st = brasa_generate(s->session, smp, ids, (int)n_ids, max_tokens, j->ignore_eos ? BRASA_GEN_IGNORE_EOS : 0, gen_cb, &g, &stats, &err);
    brasa_sampler_free(smp);
    free(ids);
    if (!g.stopped && !g.cancelled)
        publish(&g, g.len);
    free(g.text);

    pthread_mutex_lock(&s->mu);
    s->gen_active = false;
    s->session_bytes = brasa_session_bytes(s->session);
    j->n_gen = g.n_gen;
    if (st != BRASA_OK && st != BRASA_ECANCELLED && !g.cancelled && !g.stopped)
        job_fail_locked(s, j, 500, "server_error", NULL, err.msg[0] ? err.msg : brasa_status_name(st));
    j->finish = g.cancelled ? "cancelled" : g.stopped ? "stop" : g.n_gen >= max_tokens ? "length" : "stop";
    record_gen(s, j, &g, (int)n_ids);
    pthread_mutex_unlock(&s->mu);
}

static void run_job(struct srv *s, struct job *j)
{
    struct brasa_err err = {{0}};
    if (j->kind == JOB_GEN) {
        run_gen(s, j);
    } else if (j->kind == JOB_UNLOAD) {
        do_unload(s);
    } else {
        const struct srv_model_entry *e = srv_find_model(s, j->model);
        if (!e)
            job_fail(s, j, 404, "model_not_found", "model", "unknown model");
        else if (!do_load(s, e, &err))
            job_fail(s, j, 500, "model_load_error", "model", err.msg);
    }
}

static void *worker_main(void *arg)
{
    struct srv *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stopping && !s->q_head)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->stopping) {
            pthread_mutex_unlock(&s->mu);
            break;
        }
        struct job *j = s->q_head;
        s->q_head = j->next;
        if (!s->q_head)
            s->q_tail = NULL;
        s->q_len--;
        j->queued = false;
        s->active = j;
        pthread_mutex_unlock(&s->mu);

        run_job(s, j);

        pthread_mutex_lock(&s->mu);
        s->active = NULL;
        j->done = true;
        pthread_cond_broadcast(&s->cv);
        bool last = release_locked(j);
        pthread_mutex_unlock(&s->mu);
        if (last)
            job_free(j);
    }
    /* fail whatever is still queued */
    pthread_mutex_lock(&s->mu);
    while (s->q_head) {
        struct job *j = s->q_head;
        unlink_job(s, j);
        job_fail_locked(s, j, 503, "server_shutting_down", NULL, "the server is shutting down");
        j->done = true;
        bool last = release_locked(j);
        if (last)
            job_free(j);
    }
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* One telemetry point a second: tokens in that second, mean gap between them. */
static void *sampler_main(void *arg)
{
    struct srv *s = arg;
    double last = srv_mono();
    pthread_mutex_lock(&s->mu);
    while (!s->stopping) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&s->cv, &s->mu, &ts);
        double now = srv_mono();
        if (now - last < 0.999)
            continue;
        struct srv_point *p = &s->series[s->n_series % SRV_SERIES];
        p->t = srv_now();
        p->tok_s = (double)(s->tok_total - s->tok_at_sample) / (now - last);
        p->ms_per_token = s->interval_n ? s->interval_sum * 1e3 / (double)s->interval_n : -1;
        s->n_series++;
        s->tok_at_sample = s->tok_total;
        s->interval_sum = 0;
        s->interval_n = 0;
        last = now;
        pthread_cond_broadcast(&s->cv);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

int srv_init(struct srv *s, const struct srv_config *cfg, char *err, size_t cap)
{
    memset(s, 0, sizeof *s);
    s->cfg = *cfg;
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_rwlock_init(&s->rw, NULL);
    s->state_since = srv_now();
    if (scan_models(s, err, cap) != 0)
        return -1;
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0) {
        snprintf(err, cap, "cannot start the engine thread");
        return -1;
    }
    if (pthread_create(&s->sampler, NULL, sampler_main, s) != 0) {
        snprintf(err, cap, "cannot start the telemetry thread");
        srv_shutdown(s);
        return -1;
    }
    if (cfg->model) {
        struct job *j = job_new(JOB_LOAD);
        if (j) {
            const struct srv_model_entry *e = srv_find_model(s, cfg->model);
            snprintf(j->model, sizeof j->model, "%s", e ? e->id : "");
            srv_submit(s, j);
            job_release(s, j);
        }
    }
    return 0;
}

void srv_shutdown(struct srv *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->worker)
        pthread_join(s->worker, NULL);
    if (s->sampler)
        pthread_join(s->sampler, NULL);
    s->worker = s->sampler = 0;
}

void srv_free(struct srv *s)
{
    brasa_session_free(s->session);
    brasa_model_free(s->model);
    s->session = NULL;
    s->model = NULL;
    free(s->models);
    s->models = NULL;
    pthread_rwlock_destroy(&s->rw);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}
