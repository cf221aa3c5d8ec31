/* brasa run, chat, logits, perplexity, bench: the commands that drive a session. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "brasa.h"
#include "cli.h"
#include "core/platform.h"
#include "gguf/gguf.h"
#include "opts.h"
#include "quant/quant.h"
#include "tok/tok.h"

/* Prompt tokens per forward pass when the commands feed long inputs (a progress step). */
#define FEED_CHUNK 512

/* ---- shared by the generating commands ---- */

struct gen_args {
    const char *model, *prompt, *ids, *kv, *out, *file, *kld_base, *kld, *system, *tmpl;
    int n, ctx;
    struct cli_model cm; /* threads, GPUs */
    struct brasa_sampler_params sp;
    uint64_t seed;
    bool print_ids, ignore_eos, special, no_think, verbose;
};

#define SEED_RANDOM UINT64_MAX

static void gen_args_init(struct gen_args *a)
{
    memset(a, 0, sizeof *a);
    a->n = -1;
    a->kv = "f16";
    brasa_sampler_defaults(&a->sp);
    a->seed = SEED_RANDOM;
}

/* the GPUs a model is split over (README: several GPUs) */
#define TP_OPTS(c)                                                                               \
    {NULL, "--gpus", OPT_STR, &(c)->gpus, "N|2,3", "split over GPUs 0..N-1 or these (NCCL)"},      \
    {NULL, "--tp-world", OPT_INT, &(c)->world, "W", "with --gpus: ranks in all processes (N)"},    \
    {NULL, "--tp-rank", OPT_INT, &(c)->rank, "R", "with --gpus: this process's first rank (0)"},   \
    {NULL, "--tp-id", OPT_STR, &(c)->id, "FILE", "with --tp-world: NCCL's id, rank 0 writes it"}

#define MMAP_OPT(c)                                                                              \
    {NULL, "--mmap", OPT_FLAG, &(c)->keep_mapped, NULL,                                            \
     "CPU: read the weights from the file's mapping (default: moved into memory, huge pages)"}

#define MODEL_OPTS(a)                                                                            \
    {"-m", "--model", OPT_STR, &(a)->model, "FILE", "GGUF model file"},                            \
    {"-t", "--threads", OPT_INT, &(a)->cm.threads, "N", "threads (default: all cores)"},           \
    MMAP_OPT(&(a)->cm),                                                                            \
    TP_OPTS(&(a)->cm),                                                                             \
    {"-c", "--ctx", OPT_INT, &(a)->ctx, "N", "context length (default: from the file, capped)"},   \
    {NULL, "--kv-type", OPT_STR, &(a)->kv, "f16|f32", "KV cache type (default f16; logits: f32)"}

#define SAMPLER_OPTS(a)                                                                           \
    {NULL, "--temp", OPT_FLOAT, &(a)->sp.temperature, "T", "temperature, 0 = greedy (0.8)"},         \
    {NULL, "--top-k", OPT_INT, &(a)->sp.top_k, "K", "keep the K most likely tokens, 0 = off (40)"}, \
    {NULL, "--top-p", OPT_FLOAT, &(a)->sp.top_p, "P", "nucleus mass, 1 = off (0.95)"},               \
    {NULL, "--min-p", OPT_FLOAT, &(a)->sp.min_p, "P", "drop p < P * max p, 0 = off (0.05)"},          \
    {NULL, "--repeat-penalty", OPT_FLOAT, &(a)->sp.repeat_penalty, "R", "1 = off (1)"},             \
    {NULL, "--presence-penalty", OPT_FLOAT, &(a)->sp.presence_penalty, "P", "0 = off (0)"},         \
    {NULL, "--frequency-penalty", OPT_FLOAT, &(a)->sp.frequency_penalty, "F", "0 = off (0)"},       \
    {NULL, "--repeat-last-n", OPT_INT, &(a)->sp.penalty_last_n, "N", "penalty window (64)"},        \
    {NULL, "--seed", OPT_U64, &(a)->seed, "S", "random seed (default: from the clock, printed)"}

static struct brasa_session *new_session(const char *cmd, struct brasa_model *m, const struct gen_args *a,
                                         int min_ctx)
{
    enum brasa_kv_type kt;
    if (!cli_kv_type(a->kv, &kt)) {
        fprintf(stderr, "brasa %s: --kv-type must be f16 or f32 (got '%s')\n", cmd, a->kv);
        return NULL;
    }
    if (a->ctx < 0) {
        fprintf(stderr, "brasa %s: -c must be >= 0\n", cmd);
        return NULL;
    }
    struct brasa_session_opts so = {.n_ctx = a->ctx, .kv_type = kt};
    if (so.n_ctx == 0 && min_ctx > 0) {
        /* The default context may be smaller than what this command needs. */
        struct brasa_model_info info;
        brasa_model_get_info(m, &info);
        if (info.n_ctx_train > 0 && min_ctx > info.n_ctx_train)
            min_ctx = info.n_ctx_train;
        so.n_ctx = min_ctx;
    }
    struct brasa_session *s = NULL;
    struct brasa_err err = {{0}};
    if (brasa_session_new(m, &so, &s, &err) != BRASA_OK) {
        fprintf(stderr, "brasa %s: %s\n", cmd, err.msg);
        return NULL;
    }
    return s;
}

/* Feeds n tokens in chunks, with a progress bar for long inputs. logits_all ([n][n_vocab]) may
 * be NULL. */
static brasa_status feed(struct brasa_session *s, const int32_t *ids, int n, float *logits_all,
                         int n_vocab, struct brasa_err *err)
{
    if (brasa_session_pos(s) + n > brasa_session_n_ctx(s))
        return brasa_fail(err, BRASA_EINVAL, "%d tokens at position %d do not fit the context of %d (raise -c)",
                          n, brasa_session_pos(s), brasa_session_n_ctx(s));
    struct progress pr;
    progress_begin(&pr, "prompt ");
    /* On a terminal a long prompt goes in steps of 128 tokens so that the bar moves. */
    int step = pr.on && n >= 256 ? 128 : FEED_CHUNK;
    if (n < 256)
        pr.on = false;
    brasa_status st = BRASA_OK;
    for (int done = 0; done < n && st == BRASA_OK;) {
        int k = n - done < step ? n - done : step;
        st = brasa_session_eval(s, ids + done, k, logits_all ? logits_all + (size_t)done * n_vocab : NULL, err);
        done += k;
        progress_update(&pr, (float)done / (float)n);
    }
    progress_end(&pr);
    return st;
}

/* Prompt token ids from --ids or from text (specials added as the file says and parsed). */
static bool prompt_ids(const char *cmd, const struct tokenizer *tok, const struct gen_args *a, int32_t **ids,
                       int *n)
{
    if (a->ids && a->prompt) {
        fprintf(stderr, "brasa %s: give -p TEXT or --ids LIST, not both\n", cmd);
        return false;
    }
    if (a->ids) {
        if (!opts_parse_ids(a->ids, ids, n)) {
            fprintf(stderr, "brasa %s: --ids wants comma-separated token ids like 1,2,3\n", cmd);
            return false;
        }
        int32_t nv = tok ? tok_n_vocab(tok) : 0;
        for (int i = 0; i < *n; i++) {
            if (nv > 0 && (*ids)[i] >= nv) {
                fprintf(stderr, "brasa %s: token id %d is outside the vocabulary (%d tokens)\n", cmd,
                        (*ids)[i], nv);
                free(*ids);
                return false;
            }
        }
        return true;
    }
    if (!a->prompt) {
        fprintf(stderr, "brasa %s: no prompt (-p TEXT or --ids 1,2,3)\n", cmd);
        return false;
    }
    if (!tok) {
        fprintf(stderr, "brasa %s: the model has no tokenizer; pass --ids\n", cmd);
        return false;
    }
    size_t nn = 0;
    struct brasa_err err = {{0}};
    if (tok_encode(tok, a->prompt, strlen(a->prompt), TOK_ADD_SPECIAL | TOK_PARSE_SPECIAL, ids, &nn, &err) !=
        BRASA_OK) {
        fprintf(stderr, "brasa %s: %s\n", cmd, err.msg);
        return false;
    }
    *n = (int)nn;
    return true;
}

static struct brasa_sampler *new_sampler(const char *cmd, struct gen_args *a, int n_vocab)
{
    if (a->seed == SEED_RANDOM) {
        a->seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
        if (a->sp.temperature > 0)
            fprintf(stderr, "seed %llu\n", (unsigned long long)a->seed);
    }
    a->sp.seed = a->seed;
    struct brasa_sampler *smp = NULL;
    struct brasa_err err = {{0}};
    if (brasa_sampler_new(&a->sp, n_vocab, &smp, &err) != BRASA_OK) {
        fprintf(stderr, "brasa %s: %s\n", cmd, err.msg);
        return NULL;
    }
    return smp;
}

/* Turns generated ids into text on stdout as they come. */
struct emitter {
    const struct tokenizer *tok;
    struct tok_stream ts;
    bool special, print_ids;
    int n;
    char *text;        /* everything emitted (for chat history) */
    size_t len, cap;
};

static void emit_append(struct emitter *e, const char *s, size_t n)
{
    fwrite(s, 1, n, stdout);
    if (e->len + n + 1 > e->cap) {
        size_t cap = (e->cap ? e->cap * 2 : 256) + n;
        char *t = realloc(e->text, cap);
        if (!t)
            return;
        e->text = t;
        e->cap = cap;
    }
    memcpy(e->text + e->len, s, n);
    e->len += n;
    e->text[e->len] = 0;
}

static void emit(struct emitter *e, int32_t id)
{
    static char buf[1 << 16];
    if (e->print_ids) {
        printf(e->n ? " %d" : "%d", id);
    } else if (e->tok) {
        if (e->special && tok_is_control(e->tok, id)) {
            size_t k = tok_stream_flush(&e->ts, buf, sizeof buf);
            emit_append(e, buf, k);
            const char *t = tok_text(e->tok, id);
            if (t)
                emit_append(e, t, strlen(t));
        } else {
            size_t k = tok_stream_push(e->tok, &e->ts, id, buf, sizeof buf);
            emit_append(e, buf, k);
        }
    }
    e->n++;
    fflush(stdout);
}

static void emit_end(struct emitter *e)
{
    char buf[64];
    if (!e->print_ids && e->tok) {
        size_t k = tok_stream_flush(&e->ts, buf, sizeof buf);
        emit_append(e, buf, k);
    }
}

struct gen_result {
    int n_gen, n_eval;
    double eval_s;
    bool hit_eos, ctx_full;
};

/* Samples up to max_tokens (< 0: until the context is full) from the session's current logits,
 * feeding each accepted token back. */
static brasa_status generate(struct brasa_session *s, struct brasa_sampler *smp, const struct tokenizer *tok,
                             int max_tokens, bool ignore_eos, bool feed_last, struct emitter *e,
                             struct gen_result *r, struct brasa_err *err)
{
    memset(r, 0, sizeof *r);
    brasa_status st = BRASA_OK;
    double t0 = 0;
    brasa_session_set_sampler(s, smp); /* on a GPU only the sampler's candidates cross */
    for (int i = 0; max_tokens < 0 || i < max_tokens; i++) {
        int32_t id = brasa_session_sample(s, smp);
        if (id < 0) {
            st = brasa_fail(err, BRASA_EDEVICE, "no logits to sample from");
            break;
        }
        if (!ignore_eos && tok && tok_is_eog(tok, id)) {
            r->hit_eos = true;
            break;
        }
        brasa_sampler_accept(smp, id);
        emit(e, id);
        r->n_gen++;
        if (!feed_last && max_tokens >= 0 && i + 1 == max_tokens)
            break;
        if (brasa_session_pos(s) >= brasa_session_n_ctx(s)) {
            r->ctx_full = true;
            break;
        }
        if (r->n_eval == 0)
            t0 = plat_now();
        st = brasa_session_eval(s, &id, 1, NULL, err);
        r->n_eval++;
        if (st != BRASA_OK)
            break;
    }
    /* the evaluated tokens' time, sampling and output included: from the first eval until its
     * last step is done (on a GPU, greedy steps are queued: eval returns before they run) */
    if (st == BRASA_OK)
        st = brasa_session_wait(s, err);
    if (r->n_eval > 0)
        r->eval_s = plat_now() - t0;
    brasa_session_set_sampler(s, NULL);
    if (st != BRASA_OK)
        return st;
    emit_end(e);
    return BRASA_OK;
}

static void print_speed(const char *what, int n, double s)
{
    if (n > 0 && s > 0)
        fprintf(stderr, "%-10s %5d tokens in %8.1f ms: %9.2f tok/s, %8.2f ms/token\n", what, n, s * 1e3,
                n / s, s * 1e3 / n);
    else
        fprintf(stderr, "%-10s %5d tokens\n", what, n);
}

/* ---- brasa run ---- */

int cmd_run(int argc, char **argv)
{
    struct gen_args a;
    gen_args_init(&a);
    a.n = 128;
    const struct opt tbl[] = {
        MODEL_OPTS(&a),
        {"-p", "--prompt", OPT_STR, &a.prompt, "TEXT", "prompt"},
        {"-f", "--file", OPT_STR, &a.file, "FILE", "read the prompt from a file"},
        {NULL, "--ids", OPT_STR, &a.ids, "1,2,3", "prompt as token ids instead of text"},
        {"-n", "--n-predict", OPT_INT, &a.n, "N", "tokens to generate (128; -1 = until the context is full)"},
        SAMPLER_OPTS(&a),
        {NULL, "--print-ids", OPT_FLAG, &a.print_ids, NULL, "print the generated token ids, not text"},
        {NULL, "--ignore-eos", OPT_FLAG, &a.ignore_eos, NULL, "do not stop at end-of-generation tokens"},
        {NULL, "--special", OPT_FLAG, &a.special, NULL, "print control tokens (e.g. <|im_end|>) as text"},
        {0},
    };
    int rc = opts_parse("brasa run -m FILE (-p TEXT | -f FILE | --ids 1,2,3) [options]", tbl, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;
    char *file_text = NULL;
    if (a.file) {
        struct brasa_err ferr = {{0}};
        size_t len;
        if (a.prompt || plat_read_file(a.file, (size_t)1 << 28, &file_text, &len, &ferr) != BRASA_OK) {
            fprintf(stderr, "brasa run: %s\n", a.prompt ? "give -p or -f, not both" : ferr.msg);
            return a.prompt ? 2 : 1;
        }
        a.prompt = file_text;
    }
    struct brasa_model *m = cli_load_model("run", a.model, &a.cm);
    if (!m) {
        free(file_text);
        return 1;
    }
    const struct tokenizer *tok = brasa_model_tokenizer(m);
    struct brasa_model_info info;
    brasa_model_get_info(m, &info);
    int32_t *ids = NULL;
    int n_ids = 0;
    struct brasa_session *s = NULL;
    struct brasa_sampler *smp = NULL;
    struct emitter e = {.tok = tok, .special = a.special, .print_ids = a.print_ids};
    struct brasa_err err = {{0}};
    rc = 1;
    if (!prompt_ids("run", tok, &a, &ids, &n_ids))
        goto out;
    if (n_ids == 0) {
        fprintf(stderr, "brasa run: the prompt is empty\n");
        goto out;
    }
    s = new_session("run", m, &a, a.n >= 0 ? n_ids + a.n : 0); /* -n -1: the default context */
    smp = s ? new_sampler("run", &a, info.n_vocab) : NULL;
    if (!smp)
        goto out;
    for (int i = 0; i < n_ids; i++)
        brasa_sampler_accept(smp, ids[i]);
    tok_stream_init(&e.ts);
    e.ts.first = false; /* a continuation: "Once upon a time" + " there", the space is the text's */
    double t0 = plat_now();
    if (feed(s, ids, n_ids, NULL, info.n_vocab, &err) != BRASA_OK) {
        fprintf(stderr, "brasa run: %s\n", err.msg);
        goto out;
    }
    double prompt_s = plat_now() - t0;
    struct gen_result r;
    t0 = plat_now();
    brasa_status st = generate(s, smp, tok, a.n, a.ignore_eos, false, &e, &r, &err);
    double gen_s = plat_now() - t0;
    if (a.print_ids || e.len == 0 || e.text[e.len - 1] != '\n')
        putchar('\n');
    fflush(stdout);
    if (st != BRASA_OK) {
        fprintf(stderr, "brasa run: %s\n", err.msg);
        goto out;
    }
    if (r.ctx_full)
        fprintf(stderr, "(stopped: the context of %d tokens is full)\n", brasa_session_n_ctx(s));
    print_speed("prompt:", n_ids, prompt_s);
    print_speed("generate:", r.n_eval, r.eval_s);
    fprintf(stderr, "%d tokens generated in %.1f ms (%s)\n", r.n_gen, gen_s * 1e3,
            r.hit_eos ? "end of generation" : r.ctx_full ? "context full" : "limit");
    rc = 0;
out:
    free(file_text);
    free(ids);
    free(e.text);
    brasa_sampler_free(smp);
    brasa_session_free(s);
    brasa_model_free(m);
    return rc;
}

/* ---- brasa chat ---- */

struct chat_hist {
    struct chat_msg *msgs;
    size_t n, cap;
};

static bool hist_add(struct chat_hist *h, const char *role, const char *content)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? h->cap * 2 : 8;
        struct chat_msg *t = realloc(h->msgs, cap * sizeof *t);
        if (!t)
            return false;
        h->msgs = t;
        h->cap = cap;
    }
    char *c = strdup(content);
    if (!c)
        return false;
    h->msgs[h->n++] = (struct chat_msg){role, c};
    return true;
}

static void hist_truncate(struct chat_hist *h, size_t n)
{
    while (h->n > n)
        free((char *)h->msgs[--h->n].content);
}

/* One user turn: render, feed what the cache lacks, generate the reply. *kv_text is the rendered
 * text the cache holds. Returns false on an error that ends the chat. */
static bool chat_turn(struct brasa_session *s, struct brasa_sampler *smp, const struct tokenizer *tok,
                      enum chat_template_id tmpl, struct chat_hist *h, char **kv_text, const struct gen_args *a)
{
    struct chat_opts co = {.add_assistant = true, .thinking = !a->no_think};
    if (tmpl == CHAT_TMPL_GRANITE && tok_eos(tok) >= 0)
        co.end_text = tok_text(tok, tok_eos(tok)); /* the file's own end-of-text token */
    char *text = NULL;
    struct brasa_err err = {{0}};
    if (chat_render(tmpl, h->msgs, h->n, &co, &text, &err) != BRASA_OK) {
        fprintf(stderr, "brasa chat: %s\n", err.msg);
        return false;
    }
    /* Reuse the cache when what it holds is a prefix of the new rendering. */
    size_t kl = *kv_text ? strlen(*kv_text) : 0;
    bool reuse = kl > 0 && !strncmp(text, *kv_text, kl);
    if (!reuse) {
        brasa_session_reset(s);
        kl = 0;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    int flags = TOK_PARSE_SPECIAL | (reuse ? 0 : TOK_ADD_SPECIAL);
    if (tok_encode(tok, text + kl, strlen(text + kl), flags, &ids, &n, &err) != BRASA_OK) {
        fprintf(stderr, "brasa chat: %s\n", err.msg);
        free(text);
        return false;
    }
    bool ok = true;
    if (brasa_session_pos(s) + (int)n + 1 > brasa_session_n_ctx(s)) {
        fprintf(stderr, "brasa chat: the conversation no longer fits the context of %d tokens; /reset or raise -c\n",
                brasa_session_n_ctx(s));
        hist_truncate(h, h->n - 1);
        free(ids);
        free(text);
        /* The cache still holds what *kv_text says unless it was reset above. */
        if (!reuse) {
            free(*kv_text);
            *kv_text = NULL;
        }
        return true;
    }
    if (a->verbose)
        fprintf(stderr, "[cache: kept %d tokens, feeding %zu]\n", brasa_session_pos(s), n);
    for (size_t i = 0; i < n; i++)
        brasa_sampler_accept(smp, ids[i]);
    if (feed(s, ids, (int)n, NULL, tok_n_vocab(tok), &err) != BRASA_OK) {
        fprintf(stderr, "brasa chat: %s\n", err.msg);
        ok = false;
    }
    free(ids);
    struct emitter e = {.tok = tok};
    tok_stream_init(&e.ts);
    struct gen_result r;
    if (ok && generate(s, smp, tok, a->n, false, true, &e, &r, &err) != BRASA_OK) {
        fprintf(stderr, "brasa chat: %s\n", err.msg);
        ok = false;
    }
    printf("\n");
    fflush(stdout);
    if (ok) {
        /* The cache now holds the rendering plus the reply's tokens. */
        const char *reply = e.text ? e.text : "";
        size_t tl = strlen(text), rl = strlen(reply);
        char *kv = malloc(tl + rl + 1);
        if (kv) {
            memcpy(kv, text, tl);
            memcpy(kv + tl, reply, rl + 1);
        }
        free(*kv_text);
        *kv_text = kv;
        ok = hist_add(h, "assistant", reply);
        if (r.ctx_full)
            fprintf(stderr, "(the context is full: /reset to start over)\n");
    }
    free(e.text);
    free(text);
    return ok;
}

int cmd_chat(int argc, char **argv)
{
    struct gen_args a;
    gen_args_init(&a);
    const struct opt tbl[] = {
        MODEL_OPTS(&a),
        {"-s", "--system", OPT_STR, &a.system, "TEXT", "system prompt"},
        {NULL, "--chat-template", OPT_STR, &a.tmpl, "NAME", "chatml, qwen3, granite, llama2, llama3"},
        {"-n", "--n-predict", OPT_INT, &a.n, "N", "most tokens per reply (-1: until end of turn)"},
        {NULL, "--no-think", OPT_FLAG, &a.no_think, NULL, "Qwen3: render an empty <think></think> block"},
        {"-v", "--verbose", OPT_FLAG, &a.verbose, NULL, "say how much of the KV cache each turn reuses"},
        SAMPLER_OPTS(&a),
        {0},
    };
    int rc = opts_parse("brasa chat -m FILE [-s SYSTEM] [--chat-template NAME] [options]", tbl, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;
    struct gguf_file *gf = NULL;
    struct brasa_err err = {{0}};
    enum chat_template_id tmpl = CHAT_TMPL_NONE;
    const char *note = NULL;
    if (!a.model) {
        fprintf(stderr, "brasa chat: no model given (-m FILE.gguf)\n");
        return 2;
    }
    if (gguf_open(&gf, a.model, &err) != BRASA_OK) {
        fprintf(stderr, "brasa chat: %s\n", err.msg);
        return 1;
    }
    brasa_status st = chat_template_pick(gf, a.tmpl, &tmpl, &note, &err);
    gguf_close(gf);
    if (st != BRASA_OK) {
        fprintf(stderr, "brasa chat: %s\n", err.msg);
        return 1;
    }
    if (note)
        fprintf(stderr, "brasa chat: %s\n", note);
    struct brasa_model *m = cli_load_model("chat", a.model, &a.cm);
    if (!m)
        return 1;
    const struct tokenizer *tok = brasa_model_tokenizer(m);
    struct brasa_model_info info;
    brasa_model_get_info(m, &info);
    struct brasa_session *s = NULL;
    struct brasa_sampler *smp = NULL;
    struct chat_hist h = {0};
    char *kv_text = NULL, *line = NULL;
    size_t line_cap = 0;
    rc = 1;
    if (!tok) {
        fprintf(stderr, "brasa chat: the model has no tokenizer\n");
        goto out;
    }
    s = new_session("chat", m, &a, 0);
    smp = s ? new_sampler("chat", &a, info.n_vocab) : NULL;
    if (!smp)
        goto out;
    if (a.system && !hist_add(&h, "system", a.system))
        goto out;
    bool interactive = plat_isatty(0);
    if (interactive)
        fprintf(stderr, "brasa chat: %s, template %s. /exit quits, /reset starts over.\n", info.name,
                chat_template_name(tmpl));
    for (;;) {
        if (interactive) {
            fprintf(stderr, "> ");
            fflush(stderr);
        }
        ssize_t len = getline(&line, &line_cap, stdin);
        if (len < 0)
            break;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = 0;
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit"))
            break;
        if (!strcmp(line, "/reset")) {
            hist_truncate(&h, a.system ? 1 : 0);
            brasa_session_reset(s);
            brasa_sampler_reset(smp);
            free(kv_text);
            kv_text = NULL;
            if (interactive)
                fprintf(stderr, "(conversation cleared)\n");
            continue;
        }
        if (len == 0)
            continue;
        if (!hist_add(&h, "user", line))
            goto out;
        if (!chat_turn(s, smp, tok, tmpl, &h, &kv_text, &a))
            goto out;
    }
    rc = 0;
out:
    free(line);
    free(kv_text);
    hist_truncate(&h, 0);
    free(h.msgs);
    brasa_sampler_free(smp);
    brasa_session_free(s);
    brasa_model_free(m);
    return rc;
}

/* ---- brasa logits ---- */

int cmd_logits(int argc, char **argv)
{
    struct gen_args a;
    gen_args_init(&a);
    a.kv = "f32"; /* a reference interface: the cache loses nothing (the goldens used F32 too) */
    const struct opt tbl[] = {
        MODEL_OPTS(&a),
        {"-p", "--prompt", OPT_STR, &a.prompt, "TEXT", "prompt"},
        {NULL, "--ids", OPT_STR, &a.ids, "1,2,3", "prompt as token ids instead of text"},
        {"-o", "--output", OPT_STR, &a.out, "OUT.f32", "float32 logits, row-major [n_tokens][n_vocab]"},
        {0},
    };
    int rc = opts_parse("brasa logits -m FILE (-p TEXT | --ids 1,2,3) -o OUT.f32 [options]", tbl, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!a.out) {
        fprintf(stderr, "brasa logits: no output file (-o OUT.f32)\n");
        return 2;
    }
    struct brasa_model *m = cli_load_model("logits", a.model, &a.cm);
    if (!m)
        return 1;
    const struct tokenizer *tok = brasa_model_tokenizer(m);
    struct brasa_model_info info;
    brasa_model_get_info(m, &info);
    int32_t *ids = NULL;
    int n = 0;
    struct brasa_session *s = NULL;
    float *rows = NULL;
    FILE *f = NULL;
    struct brasa_err err = {{0}};
    rc = 1;
    if (!prompt_ids("logits", tok, &a, &ids, &n))
        goto out;
    if (n == 0) {
        fprintf(stderr, "brasa logits: the prompt is empty\n");
        goto out;
    }
    s = new_session("logits", m, &a, n);
    if (!s)
        goto out;
    if (n > brasa_session_n_ctx(s)) {
        fprintf(stderr, "brasa logits: %d tokens do not fit the context of %d (raise -c)\n", n,
                brasa_session_n_ctx(s));
        goto out;
    }
    /* The whole prompt in one pass (as the golden logits were made) when its rows take at most
     * 256 MiB, else passes of that size. */
    long max_rows = (256l << 20) / (4l * info.n_vocab);
    int chunk = n <= max_rows ? n : (int)(max_rows > 0 ? max_rows : 1);
    rows = malloc((size_t)chunk * (size_t)info.n_vocab * sizeof *rows);
    f = fopen(a.out, "wb");
    if (!rows || !f) {
        fprintf(stderr, "brasa logits: %s: %s\n", a.out, rows ? "cannot open for writing" : "out of memory");
        goto out;
    }
    for (int done = 0; done < n;) {
        int k = n - done < chunk ? n - done : chunk;
        if (brasa_session_eval(s, ids + done, k, rows, &err) != BRASA_OK) {
            fprintf(stderr, "brasa logits: %s\n", err.msg);
            goto out;
        }
        size_t cnt = (size_t)k * (size_t)info.n_vocab;
        if (fwrite(rows, sizeof *rows, cnt, f) != cnt) {
            fprintf(stderr, "brasa logits: %s: write failed (disk full?)\n", a.out);
            goto out;
        }
        done += k;
    }
    if (fclose(f) != 0) {
        f = NULL;
        fprintf(stderr, "brasa logits: %s: write failed\n", a.out);
        goto out;
    }
    f = NULL;
    fprintf(stderr, "wrote %d x %d float32 logits to %s\n", n, info.n_vocab, a.out);
    rc = 0;
out:
    if (f)
        fclose(f);
    free(rows);
    free(ids);
    brasa_session_free(s);
    brasa_model_free(m);
    return rc;
}

/* ---- brasa perplexity ---- */

/* Base logits for --kld: a header, the tokens, then per scored position the log-probabilities
 * over the vocabulary as float16 (log p <= 0 keeps ~3 significant digits; -inf stays -inf). */
static const char KLD_MAGIC[8] = {'B', 'R', 'A', 'S', 'A', 'K', 'L', 'D'};
struct kld_header {
    char magic[8];
    uint32_t version, n_vocab, n_ctx, n_chunk, n_tokens, reserved;
};

struct ppl_acc {
    double nll, nll2;
    long count;
    double kld, kld2;
    long kld_n, top1_same;
    double kld_max;
};

/* log-softmax of one row in float64; returns the index of the largest logit. */
static int log_softmax(const float *x, int n, double *out)
{
    int best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    double mx = x[best], sum = 0;
    for (int i = 0; i < n; i++)
        sum += exp((double)x[i] - mx);
    double lse = mx + log(sum);
    for (int i = 0; i < n; i++)
        out[i] = (double)x[i] - lse;
    return best;
}

/* Scores one row: its negative log-likelihood of `next`; KL divergence against a base row. */
static bool score_row(const float *row, int nv, int32_t next, double *lp, uint16_t *h16, FILE *save, FILE *base,
                      struct ppl_acc *acc)
{
    int top = log_softmax(row, nv, lp);
    double nll = -lp[next];
    acc->nll += nll;
    acc->nll2 += nll * nll;
    acc->count++;
    if (save) {
        for (int i = 0; i < nv; i++)
            h16[i] = f32_to_fp16((float)lp[i]);
        if (fwrite(h16, 2, (size_t)nv, save) != (size_t)nv)
            return false;
    }
    if (base) {
        if (fread(h16, 2, (size_t)nv, base) != (size_t)nv)
            return false;
        double kl = 0;
        int btop = 0;
        float bmax = -INFINITY;
        for (int i = 0; i < nv; i++) {
            float b = fp16_to_f32(h16[i]);
            if (b > bmax) {
                bmax = b;
                btop = i;
            }
            double pb = exp((double)b);
            if (pb > 0)
                kl += pb * ((double)b - lp[i]);
        }
        kl = kl < 0 ? 0 : kl; /* float16 rounding of the base can push it a hair below 0 */
        acc->kld += kl;
        acc->kld2 += kl * kl;
        acc->kld_max = fmax(acc->kld_max, kl);
        acc->kld_n++;
        acc->top1_same += btop == top;
    }
    return true;
}

static void mean_err(double sum, double sum2, long n, double *mean, double *err)
{
    *mean = sum / (double)n;
    double var = sum2 / (double)n - *mean * *mean;
    *err = n > 1 && var > 0 ? sqrt(var / (double)(n - 1)) : 0;
}

int cmd_perplexity(int argc, char **argv)
{
    struct gen_args a;
    gen_args_init(&a);
    const struct opt tbl[] = {
        MODEL_OPTS(&a),
        {"-f", "--file", OPT_STR, &a.file, "TEXT.txt", "text to score"},
        {NULL, "--kld-base", OPT_STR, &a.kld_base, "OUT", "save this run's log-probabilities for --kld"},
        {NULL, "--kld", OPT_STR, &a.kld, "BASE", "compare against a --kld-base file: KL divergence, top-1"},
        {0},
    };
    int rc = opts_parse("brasa perplexity -m FILE -f TEXT.txt [-c CTX] [--kld-base OUT | --kld BASE]", tbl, argc,
                        argv);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (!a.file) {
        fprintf(stderr, "brasa perplexity: no text file (-f TEXT.txt)\n");
        return 2;
    }
    if (a.kld && a.kld_base) {
        fprintf(stderr, "brasa perplexity: --kld-base and --kld are separate runs\n");
        return 2;
    }
    struct brasa_err err = {{0}};
    char *text = NULL;
    size_t text_len = 0;
    if (plat_read_file(a.file, (size_t)1 << 30, &text, &text_len, &err) != BRASA_OK) {
        fprintf(stderr, "brasa perplexity: %s\n", err.msg);
        return 1;
    }
    FILE *save = NULL, *base = NULL;
    struct kld_header kh;
    memset(&kh, 0, sizeof kh);
    if (a.kld) {
        base = fopen(a.kld, "rb");
        if (!base || fread(&kh, sizeof kh, 1, base) != 1 || memcmp(kh.magic, KLD_MAGIC, 8) || kh.version != 1) {
            fprintf(stderr, "brasa perplexity: %s is not a --kld-base file\n", a.kld);
            if (base)
                fclose(base);
            free(text);
            return 1;
        }
        if (a.ctx && (uint32_t)a.ctx != kh.n_ctx)
            fprintf(stderr, "brasa perplexity: using the base's context of %u (not -c %d)\n", kh.n_ctx, a.ctx);
        a.ctx = (int)kh.n_ctx;
    }
    if (a.ctx == 0)
        a.ctx = 512;
    struct brasa_model *m = cli_load_model("perplexity", a.model, &a.cm);
    if (!m) {
        free(text);
        if (base)
            fclose(base);
        return 1;
    }
    const struct tokenizer *tok = brasa_model_tokenizer(m);
    struct brasa_model_info info;
    brasa_model_get_info(m, &info);
    int nv = info.n_vocab;
    int32_t *toks = NULL, *base_toks = NULL, *probe = NULL;
    size_t n_tok = 0, n_probe = 0;
    struct brasa_session *s = NULL;
    float *rows = NULL;
    double *lp = NULL;
    uint16_t *h16 = NULL;
    rc = 1;
    if (!tok) {
        fprintf(stderr, "brasa perplexity: the model has no tokenizer\n");
        goto out;
    }
    if (tok_encode(tok, text, text_len, TOK_ADD_SPECIAL, &toks, &n_tok, &err) != BRASA_OK ||
        tok_encode(tok, "", 0, TOK_ADD_SPECIAL, &probe, &n_probe, &err) != BRASA_OK) {
        fprintf(stderr, "brasa perplexity: %s\n", err.msg);
        goto out;
    }
    /* Like llama.cpp: windows of n_ctx tokens that do not overlap, each starting with BOS when
     * the model adds one; the first half of a window is context, the second half is scored. */
    bool add_bos = n_probe > 0 && probe[0] == tok_bos(tok) && tok_bos(tok) >= 0;
    int n_ctx = a.ctx;
    if (n_ctx < 4 || (size_t)n_ctx * 2 > n_tok) {
        fprintf(stderr, "brasa perplexity: needs at least %d tokens for a context of %d; %s gives %zu (lower -c)\n",
                2 * n_ctx, n_ctx, a.file, n_tok);
        goto out;
    }
    int n_chunk = (int)(n_tok / (size_t)n_ctx);
    int first = n_ctx / 2, n_scored = n_ctx - first;
    if (base) {
        if ((int)kh.n_vocab != nv || kh.n_chunk != (uint32_t)n_chunk || kh.n_tokens != (uint32_t)n_tok) {
            fprintf(stderr, "brasa perplexity: %s was made from another vocabulary or text (%u tokens of %u, "
                    "here %zu of %d)\n", a.kld, kh.n_tokens, kh.n_vocab, n_tok, nv);
            goto out;
        }
        base_toks = malloc(n_tok * sizeof *base_toks);
        if (!base_toks || fread(base_toks, 4, n_tok, base) != n_tok || memcmp(base_toks, toks, n_tok * 4)) {
            fprintf(stderr, "brasa perplexity: %s was made from another text\n", a.kld);
            goto out;
        }
    }
    if (a.kld_base) {
        save = fopen(a.kld_base, "wb");
        struct kld_header out_h = {.version = 1, .n_vocab = (uint32_t)nv, .n_ctx = (uint32_t)n_ctx,
                                   .n_chunk = (uint32_t)n_chunk, .n_tokens = (uint32_t)n_tok};
        memcpy(out_h.magic, KLD_MAGIC, 8);
        if (!save || fwrite(&out_h, sizeof out_h, 1, save) != 1 || fwrite(toks, 4, n_tok, save) != n_tok) {
            fprintf(stderr, "brasa perplexity: %s: cannot write\n", a.kld_base);
            goto out;
        }
    }
    s = new_session("perplexity", m, &a, n_ctx);
    /* Scored rows in passes of at most 256 MiB. */
    long max_rows = (256l << 20) / (4l * nv);
    int pass = n_scored <= max_rows ? n_scored : (int)(max_rows > 0 ? max_rows : 1);
    rows = malloc((size_t)pass * (size_t)nv * sizeof *rows);
    lp = malloc((size_t)nv * sizeof *lp);
    h16 = malloc((size_t)nv * sizeof *h16);
    if (!s || !rows || !lp || !h16)
        goto out;
    fprintf(stderr, "perplexity: %zu tokens, %d windows of %d, scoring the last %d positions of each\n", n_tok,
            n_chunk, n_ctx, n_scored - 1);
    struct ppl_acc acc = {0};
    double t0 = plat_now();
    for (int c = 0; c < n_chunk; c++) {
        int32_t *w = toks + (size_t)c * (size_t)n_ctx;
        int32_t saved = w[0];
        if (add_bos)
            w[0] = tok_bos(tok);
        brasa_session_reset(s);
        brasa_status st = feed(s, w, first, NULL, nv, &err);
        /* Row j of a pass starting at position p0 predicts the token at p0 + j + 1; the last
         * position of the window predicts nothing scored. */
        for (int p0 = first; p0 < n_ctx && st == BRASA_OK; p0 += pass) {
            int k = n_ctx - p0 < pass ? n_ctx - p0 : pass;
            st = feed(s, w + p0, k, rows, nv, &err);
            for (int j = 0; j < k && p0 + j + 1 < n_ctx && st == BRASA_OK; j++) {
                if (!score_row(rows + (size_t)j * nv, nv, w[p0 + j + 1], lp, h16, save, base, &acc)) {
                    w[0] = saved;
                    fprintf(stderr, "brasa perplexity: %s: %s\n", save ? a.kld_base : a.kld,
                            save ? "write failed" : "ends early");
                    goto out;
                }
            }
        }
        w[0] = saved;
        if (st != BRASA_OK) {
            fprintf(stderr, "brasa perplexity: %s\n", err.msg);
            goto out;
        }
        /* Running perplexity, about 16 times over the run (llama.cpp prints every window). */
        int step = n_chunk / 16 > 1 ? n_chunk / 16 : 1;
        if ((c + 1) % step == 0 || c + 1 == n_chunk)
            fprintf(stderr, "[%d]%.4f%s", c + 1, exp(acc.nll / (double)acc.count), c + 1 < n_chunk ? "," : "\n");
        if (c == 0)
            fprintf(stderr, "(%.2f s per window) ", plat_now() - t0);
    }
    double mean, e;
    mean_err(acc.nll, acc.nll2, acc.count, &mean, &e);
    double ppl = exp(mean);
    printf("PPL = %.4f +/- %.5f (%ld tokens scored, %d windows of %d)\n", ppl, e * ppl, acc.count, n_chunk,
           n_ctx);
    if (base) {
        double km, ke;
        mean_err(acc.kld, acc.kld2, acc.kld_n, &km, &ke);
        double p = (double)acc.top1_same / (double)acc.kld_n;
        printf("Mean KLD = %.6f +/- %.6f (max %.6f)\n", km, ke, acc.kld_max);
        printf("Same top-1 = %.3f%% +/- %.3f%%\n", 100 * p, 100 * sqrt(p * (1 - p) / (double)acc.kld_n));
    }
    if (save) {
        FILE *f = save;
        save = NULL;
        if (fclose(f) != 0) {
            fprintf(stderr, "brasa perplexity: %s: write failed\n", a.kld_base);
            goto out;
        }
        fprintf(stderr, "saved log-probabilities to %s\n", a.kld_base);
    }
    rc = 0;
out:
    if (save)
        fclose(save);
    if (base)
        fclose(base);
    free(h16);
    free(lp);
    free(rows);
    free(base_toks);
    free(probe);
    free(toks);
    free(text);
    brasa_session_free(s);
    brasa_model_free(m);
    return rc;
}

/* ---- brasa bench ---- */

struct bench_stat {
    double sum, sum2;
    int n;
};

static void stat_add(struct bench_stat *b, double x)
{
    b->sum += x;
    b->sum2 += x * x;
    b->n++;
}

/* dev_ms: the GPU's own time of the generated tokens' forward passes summed (ms), or < 0 */
static int bench_one(struct brasa_session *s, const int32_t *ids, int n_p, int n_g, double *rate,
                     double *dev_ms, struct brasa_err *err)
{
    brasa_session_reset(s);
    *dev_ms = 0;
    double t0 = plat_now();
    if (n_p > 0) {
        if (brasa_session_eval(s, ids, n_p, NULL, err) != BRASA_OK)
            return 1;
    } else {
        for (int i = 0; i < n_g; i++) {
            if (brasa_session_eval(s, ids + i, 1, NULL, err) != BRASA_OK)
                return 1;
            double d = brasa_session_device_ms(s);
            *dev_ms = d >= 0 && *dev_ms >= 0 ? *dev_ms + d : -1;
        }
    }
    double t = plat_now() - t0;
    *rate = (double)(n_p > 0 ? n_p : n_g) / (t > 0 ? t : 1e-9);
    return 0;
}

/* Greedy generation of n_g tokens after one, as brasa run --temp 0 does it (on a GPU its
 * steps are queued on the device's own picks): tokens a second of brasa_generate's loop. */
static int bench_gen(struct brasa_session *s, struct brasa_sampler *smp, const int32_t *ids,
                     int n_g, double *rate, struct brasa_err *err)
{
    brasa_session_reset(s);
    struct brasa_gen_stats gs;
    if (brasa_session_eval(s, ids, 1, NULL, err) != BRASA_OK ||
        brasa_generate(s, smp, NULL, 0, n_g, BRASA_GEN_IGNORE_EOS, NULL, NULL, &gs, err) !=
            BRASA_OK)
        return 1;
    *rate = gs.n_gen / (gs.gen_s > 0 ? gs.gen_s : 1e-9);
    return 0;
}

int cmd_bench(int argc, char **argv)
{
    struct gen_args a;
    gen_args_init(&a);
    int n_p = 512, n_g = 128, reps = 5;
    bool gen = false;
    float bw = 0;
    const struct opt tbl[] = {
        {"-m", "--model", OPT_STR, &a.model, "FILE", "GGUF model file"},
        {"-p", "--n-prompt", OPT_INT, &n_p, "N", "prompt tokens per pp test (512; 0 = skip)"},
        {"-n", "--n-gen", OPT_INT, &n_g, "N", "tokens per tg test (128; 0 = skip)"},
        {"-r", "--repetitions", OPT_INT, &reps, "N", "repetitions (5)"},
        {"-t", "--threads", OPT_INT, &a.cm.threads, "N", "threads (default: all cores)"},
        MMAP_OPT(&a.cm),
        TP_OPTS(&a.cm),
        {NULL, "--kv-type", OPT_STR, &a.kv, "f16|f32", "KV cache type (default f16)"},
        {"-c", "--ctx", OPT_INT, &a.ctx, "N",
         "context length (default: the longer test's tokens, as llama-bench)"},
        {NULL, "--bw", OPT_FLOAT, &bw, "GB/s", "measured read bandwidth: also print the decode roofline"},
        {NULL, "--gen", OPT_FLAG, &gen, NULL,
         "also genN: N tokens of greedy generation as brasa run --temp 0 makes them (tg feeds "
         "given tokens one at a time, as llama-bench)"},
        {0},
    };
    int rc = opts_parse("brasa bench -m FILE [-p 512] [-n 128] [-r 5] [-t N] [--bw GB/s]", tbl, argc, argv);
    if (rc)
        return rc < 0 ? 0 : rc;
    if (n_p < 0 || n_g < 0 || reps < 1 || n_p > (1 << 20) || n_g > (1 << 20)) {
        fprintf(stderr, "brasa bench: -p and -n must be >= 0 and -r >= 1\n");
        return 2;
    }
    struct brasa_model *m = cli_load_model("bench", a.model, &a.cm);
    if (!m)
        return 1;
    struct brasa_model_info info;
    brasa_model_get_info(m, &info);
    int need = n_p > n_g + gen ? n_p : n_g + gen; /* (genN: N after one) */
    if (a.ctx < 0 || (a.ctx > 0 && a.ctx < need)) {
        fprintf(stderr, "brasa bench: -c must hold the longer test's %d tokens\n", need);
        brasa_model_free(m);
        return 2;
    }
    if (a.ctx == 0)
        a.ctx = need > 0 ? need : 1;
    struct brasa_session *s = new_session("bench", m, &a, a.ctx);
    int32_t *ids = malloc((size_t)(need > 0 ? need : 1) * sizeof *ids);
    struct brasa_err err = {{0}};
    struct brasa_sampler *smp = NULL; /* --gen */
    rc = 1;
    if (!s || !ids)
        goto out;
    /* Token ids spread over the vocabulary, the same every run. */
    for (int i = 0; i < need; i++)
        ids[i] = (int32_t)(((uint64_t)i * 2654435761u + 7) % (uint64_t)info.n_vocab);
    double r, dms, dev = 0;
    /* warm-up: the full prompt (its batch size picks the kernels, which the first run of a
     * shape compiles) and two generated tokens */
    if (bench_one(s, ids, n_p > 0 ? n_p : 0, n_g > 0 ? 2 : 0, &r, &dms, &err))
        goto fail;
    char ft[32], size[32], model[160];
    snprintf(model, sizeof model, "%s %s", info.arch, cli_file_type_name(a.model, ft, sizeof ft));
    cli_bytes(info.file_bytes, size, sizeof size);
    int threads = a.cm.threads > 0 ? a.cm.threads : plat_ncpu();
    printf("| %-24s | %12s | %10s | %-7s | %7s | %8s | %20s |\n", "model", "size", "params", "backend", "threads",
           "test", "t/s");
    printf("| %.24s | %.12s | %.10s | %.7s | %.7s | %.8s | %.20s |\n", "------------------------------",
           "-------------:", "-------------:", "----------", "-------------:", "-------------:",
           "------------------------------:");
    fflush(stdout);
    /* Each row is printed as soon as its repetitions are done, as llama-bench does. */
    struct bench_stat pp = {0}, tg = {0}, gn = {0};
    if (gen && n_g > 0) {
        struct brasa_sampler_params sp;
        brasa_sampler_defaults(&sp);
        sp.temperature = 0; /* (as brasa run --temp 0: the defaults' penalties are off) */
        if (brasa_sampler_new(&sp, info.n_vocab, &smp, &err) != BRASA_OK)
            goto fail;
    }
    for (int k = 0; k < 3; k++) {
        struct bench_stat *b = k == 2 ? &gn : k ? &tg : &pp;
        int n = k == 2 ? (smp ? n_g : 0) : k ? n_g : n_p;
        for (int i = 0; i < reps && n > 0; i++) {
            if (k == 2 ? bench_gen(s, smp, ids, n_g, &r, &err)
                       : bench_one(s, ids, k ? 0 : n_p, k ? n_g : 0, &r, &dms, &err))
                goto fail;
            stat_add(b, r);
            if (k == 1)
                dev = dms >= 0 && dev >= 0 ? dev + dms : -1;
        }
        if (!b->n)
            continue;
        double mean, sd;
        mean_err(b->sum, b->sum2, b->n, &mean, &sd);
        sd *= sqrt((double)b->n); /* standard deviation, not the error of the mean */
        char test[24], ts[40], params[24];
        snprintf(test, sizeof test, "%s%d", k == 2 ? "gen" : k ? "tg" : "pp", n);
        snprintf(ts, sizeof ts, "%.2f ± %.2f", mean, sd);
        snprintf(params, sizeof params, "%.2f M", (double)info.n_params / 1e6);
        printf("| %-24s | %12s | %10s | %-7s | %7d | %8s | %21s |\n", model, size, params, info.backend, threads,
               test, ts);
        fflush(stdout);
    }
    /* Decode reads every weight once per token: that over the bandwidth bounds tg. */
    double wb = (double)info.weight_bytes_per_token;
    if (!strcmp(info.backend, "cpu"))
        printf("\ncpu kernels: %s", quant_cpu_kernels());
    printf("\ncontext: %d positions", brasa_session_n_ctx(s));
    if (tg.n && dev > 0) { /* what of a token's time the GPU spends in its forward pass */
        double wall = 1e3 * tg.n / tg.sum, gpu = dev / ((double)tg.n * n_g);
        printf("\ndecode step on the GPU: %.3f ms of %.3f ms a token (%.1f%% outside it: "
               "launch, copies, host)", gpu, wall, 100.0 * (1.0 - gpu / wall));
    }
    printf("\nweights read per generated token: %.1f MiB", wb / (1 << 20));
    if (bw > 0 && wb > 0) {
        double limit = bw * 1e9 / wb;
        printf("; at %.1f GB/s the decode limit is %.2f t/s", (double)bw, limit);
        if (tg.n)
            printf(", tg reaches %.0f%% of it", 100.0 * (tg.sum / tg.n) / limit);
    }
    printf("\n");
    rc = 0;
    goto out;
fail:
    fprintf(stderr, "brasa bench: %s\n", err.msg);
out:
    free(ids);
    brasa_sampler_free(smp);
    brasa_session_free(s);
    brasa_model_free(m);
    return rc;
}
