/* The GPU backend against the goldens and against the CPU backend, on every fixture model;
 * the graph executor against the eager one (bit-identical); long-context attention (split
 * along the sequence) and the F16 KV cache; a tensor-parallel shard's all-reduces through
 * NCCL. Runs only where a GPU is present; SKIPs otherwise. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "brasa.h"
#include "gguf/gguf.h"
#include "gpu/gpu.h"
#include "gpu/nccl.h"
#include "json_mini.h"
#include "model/model.h"
#include "quant/mix.h"
#include "quant/quant.h"
#include "synth/synth.h"
#include "test.h"

static int have_gpu = -1;

static int gpu_present(void)
{
    if (have_gpu < 0) {
        struct gpu *g = NULL;
        struct brasa_err err = {{0}};
        have_gpu = gpu_open(&g, NULL, &err) == BRASA_OK;
        if (!have_gpu)
            fprintf(stderr, "  no GPU: %s\n", err.msg);
        gpu_close(g);
    }
    return have_gpu;
}

static const char *archs[] = {"llama", "qwen2", "granite", "qwen3", "qwen35"};
static const char *types[] = {"F32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_K_M", "Q4_K_M", "Q4_0"};

static double tol_of(const char *type)
{
    if (!strcmp(type, "F32"))
        return 1e-4;
    if (!strcmp(type, "F16"))
        return 2e-3;
    if (!strcmp(type, "BF16"))
        return 1e-2;
    return 5e-2;
}

/* max |a - b| / max |ref| over n values */
static double rel_err(const float *a, const float *b, const float *ref, size_t n)
{
    double md = 0, mr = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]);
        if (d > md || isnan(d))
            md = isnan(d) ? INFINITY : d;
        if (fabs(ref[i]) > mr)
            mr = fabs(ref[i]);
    }
    return mr > 0 ? md / mr : md;
}

struct fixture {
    struct jm *js;
    float *gold;
    size_t gold_n;
};

static int load_fixture(const char *arch, const char *type, struct fixture *fx, char *gguf,
                        size_t cap)
{
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/%s.%s.gguf", arch, type);
    snprintf(gguf, cap, "%s", test_shared_path(rel));
    if (!test_file_exists(gguf))
        return 0;
    snprintf(rel, sizeof rel, "fixtures/%s.%s.prompts.json", arch, type);
    size_t n = 0;
    char *txt = test_read_file(test_shared_path(rel), &n);
    snprintf(rel, sizeof rel, "fixtures/%s.%s.logits.f32", arch, type);
    size_t gb = 0;
    fx->gold = (float *)test_read_file(test_shared_path(rel), &gb);
    fx->gold_n = gb / 4;
    fx->js = txt ? jm_parse(txt, n) : NULL;
    free(txt);
    return fx->js && fx->gold;
}

static brasa_status open_model(const char *path, enum brasa_backend be, struct brasa_model **m,
                               struct brasa_session **s, int n_ctx, enum brasa_kv_type kv)
{
    struct brasa_err err = {{0}};
    struct brasa_model_opts mo = {.backend = be, .n_threads = 2};
    struct brasa_session_opts so = {.n_ctx = n_ctx, .kv_type = kv};
    brasa_status st = brasa_model_load(path, &mo, m, &err);
    if (st == BRASA_OK && (st = brasa_session_new(*m, &so, s, &err)) != BRASA_OK) {
        brasa_model_free(*m);
        *m = NULL;
    }
    if (st != BRASA_OK)
        fprintf(stderr, "  %s: %s\n", path, err.msg);
    return st;
}

/* Prompt (one batch) and 32 decode steps of every prompt: GPU vs goldens and vs CPU. */
static void check_file(const char *arch, const char *type, double *worst_gold, double *worst_cpu)
{
    struct fixture fx = {0};
    char path[1024];
    if (!load_fixture(arch, type, &fx, path, sizeof path)) {
        jm_free(fx.js);
        free(fx.gold);
        return;
    }
    struct brasa_model *mg = NULL, *mc = NULL;
    struct brasa_session *sg = NULL, *sc = NULL;
    double tol = tol_of(type), eg = 0, ec = 0;
    if (open_model(path, BRASA_BACKEND_CUDA, &mg, &sg, 512, BRASA_KV_F32) != BRASA_OK ||
        open_model(path, BRASA_BACKEND_CPU, &mc, &sc, 512, BRASA_KV_F32) != BRASA_OK) {
        CHECKF(0, "%s.%s did not load", arch, type);
        goto out;
    }
    struct brasa_model_info info;
    brasa_model_get_info(mg, &info);
    CHECKF(!strcmp(info.backend, "cuda"), "%s.%s runs on %s", arch, type, info.backend);
    int nv = info.n_vocab;
    const struct jm *prompts = jm_get(fx.js, "prompts");
    for (size_t p = 0; prompts && p < prompts->n; p++) {
        const struct jm *pr = jm_at(prompts, p);
        const struct jm *ids = jm_get(pr, "token_ids"), *gids = jm_get(pr, "greedy_ids");
        const struct jm *marg = jm_get(pr, "greedy_margins");
        int n = (int)ids->n;
        long off_p = jm_int(jm_get(jm_get(pr, "prompt_logits"), "row_offset"), 0);
        long off_d = jm_int(jm_get(jm_get(pr, "decode_logits"), "row_offset"), 0);
        int32_t *tok = malloc((size_t)n * 4);
        float *lg = malloc((size_t)n * nv * 4), *lc = malloc((size_t)n * nv * 4);
        for (int i = 0; i < n; i++)
            tok[i] = (int32_t)jm_int(jm_at(ids, (size_t)i), 0);
        brasa_session_reset(sg);
        brasa_session_reset(sc);
        struct brasa_err err = {{0}};
        brasa_status st = brasa_session_eval(sg, tok, n, lg, &err);
        CHECKF(st == BRASA_OK, "%s.%s prompt on GPU: %s", arch, type, err.msg);
        st = brasa_session_eval(sc, tok, n, lc, &err);
        CHECKF(st == BRASA_OK, "%s.%s prompt on CPU: %s", arch, type, err.msg);
        const float *gold = fx.gold + (size_t)off_p * nv;
        double e1 = rel_err(lg, gold, gold, (size_t)n * nv), e2 = rel_err(lg, lc, lc, (size_t)n * nv);
        eg = fmax(eg, e1);
        ec = fmax(ec, e2);
        bool greedy_ok = true;
        for (int k = 0; k < 32 && k < (int)gids->n; k++) {
            int32_t id = (int32_t)jm_int(jm_at(gids, (size_t)k), 0);
            if (brasa_session_eval(sg, &id, 1, NULL, &err) != BRASA_OK ||
                brasa_session_eval(sc, &id, 1, NULL, &err) != BRASA_OK) {
                CHECKF(0, "%s.%s decode %d: %s", arch, type, k, err.msg);
                break;
            }
            const float *a = brasa_session_logits(sg), *c = brasa_session_logits(sc);
            const float *gr = fx.gold + (size_t)(off_d + k) * nv;
            eg = fmax(eg, rel_err(a, gr, gr, (size_t)nv));
            ec = fmax(ec, rel_err(a, c, c, (size_t)nv));
            if (k + 1 < (int)gids->n && greedy_ok) {
                /* a near-tie relative to the error bound (tol is relative to max |logit|):
                 * stop comparing the continuation there */
                double mx = 0;
                for (int v = 0; v < nv; v++)
                    mx = fmax(mx, fabs(gr[v]));
                if (jm_num(jm_at(marg, (size_t)k + 1), 1) < 2 * tol * mx)
                    greedy_ok = false;
                else
                    CHECKF(test_argmax(a, nv) == jm_int(jm_at(gids, (size_t)k + 1), -1),
                           "%s.%s prompt %zu: greedy token %d differs", arch, type, p, k + 1);
            }
        }
        free(tok);
        free(lg);
        free(lc);
    }
    CHECKF(eg <= tol, "%s.%s: GPU vs golden %.3g > %.3g", arch, type, eg, tol);
    CHECKF(ec <= tol, "%s.%s: GPU vs CPU %.3g > %.3g", arch, type, ec, tol);
    printf("  %-8s %-7s GPU vs golden %.2e, vs CPU %.2e (bound %.0e)\n", arch, type, eg, ec, tol);
    *worst_gold = fmax(*worst_gold, eg / tol);
    *worst_cpu = fmax(*worst_cpu, ec / tol);
out:
    brasa_session_free(sg);
    brasa_session_free(sc);
    brasa_model_free(mg);
    brasa_model_free(mc);
    jm_free(fx.js);
    free(fx.gold);
}

TEST(fixtures_vs_golden_and_cpu)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    char probe[1024];
    snprintf(probe, sizeof probe, "%s", test_shared_path("fixtures/llama.F32.gguf"));
    if (!test_file_exists(probe))
        SKIP("fixtures not found (set BRASA_SHARED)");
    /* three times: the prompts (a few tokens each) through the integer batch kernel, then
     * through the tensor-core one (which otherwise takes batches of 256 tokens and more), with
     * quantized weights dequantized into F16 tiles (every type; qwen35 as by default, on the
     * integer tiles: its recurrent state compounds the F16 rounding beyond the bound), then
     * on their integer (and Q4_K / Q5_K F16) tiles with decode products after quant_act */
    static const char *pass_name[3] = {"integer prompts", "tensor-core prompts",
                                       "tensor-core prompts, integer tiles, quant_act"};
    for (int pass = 0; pass < 3; pass++) {
        double wg = 0, wc = 0;
        if (pass) {
            setenv("BRASA_GPU_MMT_MIN", "2", 1);
            setenv("BRASA_GPU_MMT_DQ", pass == 1 ? "2" : "0", 1);
        }
        if (pass == 2) /* and decode products after quant_act */
            setenv("BRASA_GPU_MVD_XC", "0", 1);
        for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
            if (pass == 1 && !strcmp(archs[a], "qwen35"))
                unsetenv("BRASA_GPU_MMT_DQ");
            for (size_t t = 0; t < sizeof types / sizeof *types; t++)
                check_file(archs[a], types[t], &wg, &wc);
        }
        unsetenv("BRASA_GPU_MMT_MIN");
        unsetenv("BRASA_GPU_MMT_DQ");
        unsetenv("BRASA_GPU_MVD_XC");
        printf("  worst error / bound (%s): vs golden %.2f, vs CPU %.2f\n", pass_name[pass], wg,
               wc);
    }
}

/* A model's graphs (prompt of NP tokens, decode) and a session for them on GPU g. */
struct gpu_run {
    struct mdl m;
    void *mem; /* a shard's weights */
    struct mdl_cache c;
    float *kv;
    struct graph gr[2];
    struct gpu_sess *s;
};

static brasa_status gpu_run_open(struct gpu_run *t, struct gpu *g, const struct nccl *nc,
                                 ncclComm_t comm, int np, int n_ctx, struct brasa_err *err)
{
    if (test_cache_new(&t->m, n_ctx, &t->c, &t->kv))
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    brasa_status st;
    if ((st = mdl_build(&t->m, &t->c, np, false, &t->gr[0], err)) ||
        (st = mdl_build(&t->m, &t->c, 1, false, &t->gr[1], err)) ||
        (st = gpu_sess_new(g, &t->s, err)) ||
        (nc && (st = gpu_sess_set_comm(t->s, nc, comm, err))) ||
        (st = gpu_sess_prepare(t->s, &t->gr[0], n_ctx, err)))
        return st;
    return gpu_sess_prepare(t->s, &t->gr[1], n_ctx, err);
}

static void gpu_run_close(struct gpu_run *t)
{
    gpu_sess_free(t->s);
    graph_free(&t->gr[0]);
    graph_free(&t->gr[1]);
    test_cache_free(&t->c, t->kv);
    mdl_free(&t->m);
    free(t->mem);
}

/* The environment pairs env (name, value, ..., NULL; at most 8) set, their former values
 * kept in old for env_pop, which puts them back (unset where they were unset) */
static void env_push(const char *const *env, char **old)
{
    for (int e = 0, i = 0; env[e] && i < 8; e += 2, i++) {
        const char *v = getenv(env[e]);
        old[i] = v ? strdup(v) : NULL;
        setenv(env[e], env[e + 1], 1);
    }
}
static void env_pop(const char *const *env, char **old)
{
    for (int e = 0, i = 0; env[e] && i < 8; e += 2, i++) {
        if (old[i])
            setenv(env[e], old[i], 1);
        else
            unsetenv(env[e]);
        free(old[i]);
    }
}

/* The plans of the fixture at path (a 6-token prompt and a decode step in n_ctx positions),
 * made with the environment pairs env (name, value, ..., NULL) set: c[j] the decode launches of
 * kernel names[j] (NULL: every launch) for j < nn, c[nn] the prompt's of names[0]; *nl the
 * model's layers, *mixed its layers of Q4_K q and k with a Q6_K v. False where it could not
 * be planned (a failed check). */
static bool plan_counts(const char *path, const char *const *env, int n_ctx,
                        const char *const *names, int nn, int *c, int *nl, int *mixed)
{
    struct brasa_err err = {{0}};
    struct gpu *g = NULL;
    struct gguf_file *f = NULL;
    struct gpu_run w;
    memset(&w, 0, sizeof w);
    char *old[8];
    env_push(env, old); /* (before the device opens: some are read there) */
    brasa_status st = gpu_open(&g, NULL, &err);
    if (st == BRASA_OK)
        st = gpu_make_current(g, &err);
    if (st == BRASA_OK)
        st = gguf_open(&f, path, &err);
    if (st == BRASA_OK && (st = mdl_load(&w.m, f, &err)) == BRASA_OK)
        st = gpu_run_open(&w, g, NULL, NULL, 6, n_ctx, &err);
    env_pop(env, old);
    CHECKF(st == BRASA_OK, "%s: %s", path, err.msg);
    if (st == BRASA_OK) {
        for (int j = 0; j < nn; j++)
            c[j] = gpu_sess_launches(w.s, &w.gr[1], names[j]);
        c[nn] = gpu_sess_launches(w.s, &w.gr[0], names[0]);
        *nl = w.m.hp.n_layer;
        *mixed = 0;
        for (int l = 0; l < *nl; l++)
            *mixed += w.m.layers[l].wv.type == GGML_TYPE_Q6_K &&
                      w.m.layers[l].wq.type == GGML_TYPE_Q4_K &&
                      w.m.layers[l].wk.type == GGML_TYPE_Q4_K;
    }
    gpu_run_close(&w);
    if (f)
        gguf_close(f);
    gpu_close(g);
    return st == BRASA_OK;
}

/* A synthesized model (brasa synth: arch, shape, ftype, seed) written to buf; NULL where it
 * could not be written (a failed check). */
static const char *synth_tmp(char *buf, size_t n, const char *arch, const char *shape, int ftype,
                             int seed)
{
    snprintf(buf, n, "/tmp/brasa-test-gpu-%s-%d-%d.gguf", shape, ftype, (int)getpid());
    struct synth_opts o = {.arch = arch, .shape = shape, .ftype = ftype, .seed = (uint64_t)seed,
                           .n_threads = 2};
    struct brasa_err err = {{0}};
    if (synth_write(buf, &o, NULL, &err) != BRASA_OK) {
        CHECKF(0, "synth: %s", err.msg);
        return NULL;
    }
    return buf;
}

/* A tiny qwen2 with heads of 128 (Q4_K_M by default): the attention the real models run on a
 * GPU, rendered for heads of 128 (the fixtures' are of 64) */
static const char *tiny128_of(char *buf, size_t n, int ftype)
{
    return synth_tmp(buf, n, "qwen2", "tiny128", ftype, 3);
}
static const char *tiny128(char *buf, size_t n) { return tiny128_of(buf, n, FTYPE_Q4_K_M); }

/* decode_pair_path compares the prompt's last logits too (a path only the prompt takes) */
static bool pair_prompt;

/* Decode logits of the model at path (named label) through two sessions of n_ctx positions after
 * a prompt of np tokens (5 or more), the second opened with the environment pairs env (name,
 * value, ..., NULL) set: at most tol apart (relative to the largest logit; 0: bit for bit). */
static void decode_pair_path(const char *path, const char *label, const char *const *env,
                             double tol, const char *what, int n_ctx, int np)
{
    char p[1024];
    snprintf(p, sizeof p, "%s", path);
    struct brasa_model *m1 = NULL, *m2 = NULL;
    struct brasa_session *s1 = NULL, *s2 = NULL;
    brasa_status st = open_model(p, BRASA_BACKEND_CUDA, &m1, &s1, n_ctx, BRASA_KV_F16);
    char *old[8];
    env_push(env, old);
    if (st == BRASA_OK)
        st = open_model(p, BRASA_BACKEND_CUDA, &m2, &s2, n_ctx, BRASA_KV_F16);
    env_pop(env, old);
    REQUIRE(st == BRASA_OK);
    struct brasa_model_info info;
    brasa_model_get_info(m1, &info);
    int32_t *prompt = malloc((size_t)np * sizeof *prompt);
    REQUIRE(prompt);
    const int32_t head[5] = {1, 20, 300, 40, 5};
    for (int i = 0; i < np; i++)
        prompt[i] = i < 5 ? head[i] : (int32_t)((i * 7919 + 13) % info.n_vocab);
    struct brasa_err err = {{0}};
    CHECKF(brasa_session_eval(s1, prompt, np, NULL, &err) == BRASA_OK, "%s", err.msg);
    CHECKF(brasa_session_eval(s2, prompt, np, NULL, &err) == BRASA_OK, "%s", err.msg);
    free(prompt);
    double worst = 0;
    for (int k = pair_prompt ? -1 : 0; k < 16; k++) {
        int32_t id = (int32_t)((k * 37 + 11) % info.n_vocab);
        if (k >= 0) {
            CHECKF(brasa_session_eval(s1, &id, 1, NULL, &err) == BRASA_OK, "%s", err.msg);
            CHECKF(brasa_session_eval(s2, &id, 1, NULL, &err) == BRASA_OK, "%s", err.msg);
        }
        const float *l1 = brasa_session_logits(s1), *l2 = brasa_session_logits(s2);
        double mx = 0, d = 0;
        for (int v = 0; v < info.n_vocab; v++) {
            mx = fmax(mx, fabs(l1[v]));
            d = fmax(d, fabs((double)l1[v] - l2[v]));
            if (tol == 0 && memcmp(&l1[v], &l2[v], 4))
                d = fmax(d, 1e-30);
        }
        worst = fmax(worst, mx > 0 ? d / mx : d);
    }
    const char *which = pair_prompt ? "prompt and decode" : "decode";
    printf("  %s, %s: %s logits %.3g apart\n", label, what, which, worst);
    CHECKF(worst <= tol, "%s: %s %s logits differ by %.3g (bound %.3g)", label, what, which, worst,
           tol);
    brasa_session_free(s1);
    brasa_session_free(s2);
    brasa_model_free(m1);
    brasa_model_free(m2);
}

/* decode_pair_path for each fixture of one type (e.g. "Q4_K_M") */
static void decode_pair_ctx(const char *type, const char *const *env, double tol, const char *what,
                            int n_ctx, int np)
{
    for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
        char rel[128], label[64];
        snprintf(rel, sizeof rel, "fixtures/%s.%s.gguf", archs[a], type);
        const char *path = test_shared_path(rel);
        if (!test_file_exists(path))
            continue;
        snprintf(label, sizeof label, "%s %s", archs[a], type);
        decode_pair_path(path, label, env, tol, what, n_ctx, np);
    }
}

static void decode_pair(const char *type, const char *const *env, double tol, const char *what)
{
    decode_pair_ctx(type, env, tol, what, 512, 5);
}

/* Decode logits of the graph executor and of the eager one (without programmatic dependent
 * launch: a kernel that touched its inputs before pdl_wait() would race and differ), bit for
 * bit: the fixtures, and a tiny model with heads of 128 split along a context of 2,048. */
TEST(graph_equals_eager)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    static const char *const env[] = {"BRASA_GPU_GRAPH", "0", "BRASA_GPU_PDL", "0", NULL};
    decode_pair("Q4_K_M", env, 0, "graph and eager");
    decode_pair("Q8_0", env, 0, "graph and eager");
    char buf[96]; /* (heads of 128: the kernels rendered for the real models' heads) */
    const char *p = tiny128(buf, sizeof buf);
    if (p) {
        decode_pair_path(p, "qwen2 tiny128 Q4_K_M", env, 0, "graph and eager", 2048, 1100);
        unlink(p);
    }
}

/* Decode products that convert their own activation (mvd.cu XC, Q8_0 weights) against
 * quant_act and the separate products: the same values converted the same way, so the same
 * logits up to the order of the RMS sums. */
TEST(decode_conversion_in_product)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    static const char *const env[] = {"BRASA_GPU_MVD_XC", "0", NULL};
    decode_pair("Q8_0", env, 1e-5, "in-product and quant_act conversion");
}

/* Weights uploaded through the pinned staging (two buffers, copies queued on the session's
 * stream) and through pageable memory one chunk at a time (BRASA_GPU_UPLOAD=0): the same bytes
 * on the device, so the same logits bit for bit (Q4_K_M: Q4_K and Q6_K fields; Q8_0). */
TEST(upload_staged_equals_pageable)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    static const char *const env[] = {"BRASA_GPU_UPLOAD", "0", NULL};
    decode_pair("Q4_K_M", env, 0, "staged and pageable upload");
    decode_pair("Q8_0", env, 0, "staged and pageable upload");
}

/* Decode attention converting its rows for the K formats' o product (attn.cu's xq): in a
 * context of 512 positions (one pass, blocks of 256 / hd heads) and of 2048 (split along the
 * context: after a prompt of 5 tokens one split writes the row, after 1,100 three splits, the
 * last block of each merging them), against quant_act converting them: the same floats through
 * the same steps, so the same logits bit for bit. The splits merged in attention against the
 * attn_merge launch, bit for bit; graph == eager at 2048; and in the decode plans a quant_act
 * launch a layer fewer, and no attn_merge launch. */
TEST(decode_conversion_in_attention)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    static const char *const env[] = {"BRASA_GPU_ATTN_Q", "0", NULL};
    static const char *const eager[] = {"BRASA_GPU_GRAPH", "0", "BRASA_GPU_PDL", "0", NULL};
    const int ctx[3] = {512, 2048, 2048}, np[3] = {5, 5, 1100};
    for (int c = 0; c < 3; c++) {
        char what[96];
        snprintf(what, sizeof what, "attention and quant_act conversion, %d of %d positions",
                 np[c], ctx[c]);
        decode_pair_ctx("Q4_K_M", env, 0, what, ctx[c], np[c]);
        decode_pair_ctx("Q6_K", env, 0, what, ctx[c], np[c]);
    }
    static const char *const merge[] = {"BRASA_GPU_ATTN_MERGE", "1", NULL};
    decode_pair_ctx("Q4_K_M", merge, 0, "merged in attention and by attn_merge", 2048, 1100);
    decode_pair_ctx("Q8_0", merge, 0, "merged in attention and by attn_merge", 2048, 1100);
    decode_pair_ctx("Q4_K_M", eager, 0, "graph and eager, 1100 of 2048 positions", 2048, 1100);
    decode_pair_ctx("Q8_0", eager, 0, "graph and eager, 1100 of 2048 positions", 2048, 1100);
    const char *path = test_shared_path("fixtures/llama.Q4_K_M.gguf");
    if (!test_file_exists(path))
        return;
    static const char *const none[] = {NULL}, *const names[] = {"quant_act", "attn_merge"};
    static const char *const off[] = {"BRASA_GPU_ATTN_Q", "0", "BRASA_GPU_ATTN_MERGE", "1", NULL};
    for (int c = 0; c < 2; c++) {
        int n[3], m[3], nl, mixed;
        if (!plan_counts(path, none, ctx[c], names, 2, n, &nl, &mixed) ||
            !plan_counts(path, off, ctx[c], names, 2, m, &nl, &mixed))
            continue;
        printf("  llama.Q4_K_M, %d positions, %d layers: decode launches of quant_act %d, "
               "attn_merge %d (BRASA_GPU_ATTN_Q=0 BRASA_GPU_ATTN_MERGE=1: %d, %d)\n", ctx[c], nl,
               n[0], n[1], m[0], m[1]);
        CHECKF(m[0] - n[0] == nl, "%d positions: %d quant_act launches, %d with "
               "BRASA_GPU_ATTN_Q=0 (%d layers)", ctx[c], n[0], m[0], nl);
        CHECKF(n[1] == 0 && m[1] == (ctx[c] > 512 ? nl : 0), "%d positions: %d attn_merge "
               "launches, %d with BRASA_GPU_ATTN_MERGE=1 (%d layers)", ctx[c], n[1], m[1], nl);
    }
}

/* The final RMSNorm runs in the LM head's conversion (no norm_rows launch in the llama
 * fixtures' plans, whose other norms all go into conversions too; nor in qwen3's and qwen35's
 * Q4_K_M ones, whose head norms are the rope launch's and whose DeltaNet's gated norm is in its
 * output product's conversion); the logits are checked against the CPU and the goldens by
 * fixtures_vs_golden_and_cpu. */
TEST(final_norm_in_lm_head)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    static const char *const none[] = {NULL}, *const names[] = {"norm_rows"};
    static const char *const files[] = {"fixtures/llama.Q4_K_M.gguf", "fixtures/llama.Q8_0.gguf",
                                        "fixtures/llama.F16.gguf", "fixtures/qwen3.Q4_K_M.gguf",
                                        "fixtures/qwen35.Q4_K_M.gguf"};
    for (size_t f = 0; f < sizeof files / sizeof *files; f++) {
        const char *path = test_shared_path(files[f]);
        int c[2], nl, mixed;
        if (!test_file_exists(path) || !plan_counts(path, none, 512, names, 1, c, &nl, &mixed))
            continue;
        printf("  %s: norm_rows launches, decode %d, prompt %d\n", files[f], c[0], c[1]);
        CHECKF(c[0] == 0 && c[1] == 0, "%s: %d norm_rows launches in decode, %d in the prompt",
               files[f], c[0], c[1]);
    }
}

/* The qwen35 fixture of quant type (e.g. "Q8_0") and its label ("qwen35 Q8_0") in label;
 * NULL where the fixtures lack it. */
static const char *qwen35_fixture(const char *type, char *label, size_t n)
{
    char rel[64];
    snprintf(rel, sizeof rel, "fixtures/qwen35.%s.gguf", type);
    snprintf(label, n, "qwen35 %s", type);
    const char *path = test_shared_path(rel);
    return test_file_exists(path) ? path : NULL;
}

/* the qwen35 fixtures the pair tests take, where present */
static const char *const q35_types[3] = {"Q8_0", "Q4_K_M", "F16"};

/* qwen35's launches folded into others: the DeltaNet's gates computed in its kernel (decode)
 * and its gated RMSNorm in the output product's conversion (quant_act z) against their own
 * launches (BRASA_GPU_DN_FUSE=0), prompt and decode: the gates the same bits (Q8_0, whose norm
 * keeps its launch: bit for bit), the norm's sums in float instead of double (Q4_K_M); and in
 * the qwen35 Q4_K_M decode plans no gates launch and a norm_rows launch fewer for each DeltaNet
 * layer. The rope reading the VIEW of q in the query | gate rows in place (the default) against
 * the view's launch (BRASA_GPU_ROPE_VIEW=0): the same bits, and a view launch fewer a layer of
 * attention. */
TEST(qwen35_launches_folded)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    static const char *const env[] = {"BRASA_GPU_DN_FUSE", "0", NULL};
    static const char *const rv[] = {"BRASA_GPU_ROPE_VIEW", "0", NULL};
    static const char *const none[] = {NULL}, *const names[] = {"gates", "norm_rows", "view"};
    static const char *const types[2] = {"Q8_0", "Q4_K_M"};
    for (int t = 0; t < 2; t++) {
        char label[64];
        const char *path = qwen35_fixture(types[t], label, sizeof label);
        if (!path)
            continue;
        decode_pair_path(path, label, env, t == 0 ? 0 : 1e-4, "folded and own launches", 512, 7);
        decode_pair_path(path, label, rv, 0, "rope reading the view and the view's launch", 512,
                         7);
        int n[4], m[4], v[4], nl, mixed;
        if (t == 0 || !plan_counts(path, env, 64, names, 3, n, &nl, &mixed) ||
            !plan_counts(path, none, 64, names, 3, m, &nl, &mixed) ||
            !plan_counts(path, rv, 64, names, 3, v, &nl, &mixed))
            continue;
        printf("  %s: decode gates %d, norm_rows %d (own launches: %d, %d), view %d (its own "
               "launch: %d); prompt gates %d (%d)\n", label, m[0], m[1], n[0], n[1], m[2], v[2], m[3],
               n[3]);
        CHECKF(n[0] > 0 && m[0] == 0 && n[1] - m[1] == n[0] && n[3] == n[0] && m[3] == n[0] &&
               v[2] == 2 * m[2] && m[2] == nl - n[0],
               "%s: decode gates %d, norm_rows %d, view %d; with BRASA_GPU_DN_FUSE=0 %d, %d; "
               "BRASA_GPU_ROPE_VIEW=0 view %d", label, m[0], m[1], m[2], n[0], n[1], v[2]);
    }
}

/* qwen35's decode folds against their own launches, which compute the same sums in the same
 * order, so the same bits: the DeltaNet's convolution in the epilogue of the q/k/v product
 * before it (mvd.cu CV; BRASA_GPU_CONV_FUSE=0) and the gate after attention in attention's own
 * output (attn.cu G; BRASA_GPU_ATTN_GATE=0). And their launches: no conv1d in decode, one a
 * DeltaNet layer in the prompt and without the fold; an eltwise and (K formats: attention then
 * converts its rows for the o product) a quant_act a layer of attention fewer. */
TEST(qwen35_decode_folds)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    static const char *const cf[] = {"BRASA_GPU_CONV_FUSE", "0", NULL};
    static const char *const ag[] = {"BRASA_GPU_ATTN_GATE", "0", NULL};
    static const char *const none[] = {NULL};
    static const char *const names[] = {"conv1d", "eltwise", "quant_act"};
    for (int t = 0; t < 3; t++) {
        char label[64];
        const char *path = qwen35_fixture(q35_types[t], label, sizeof label);
        if (!path)
            continue;
        decode_pair_path(path, label, cf, 0, "convolution in the product and its own launch",
                         512, 7);
        decode_pair_path(path, label, ag, 0, "gate in attention and its own launch", 512, 7);
        decode_pair_path(path, label, ag, 0, "gate in attention and its own launch, split", 2048,
                         1100);
        int n[4], g[4], m[4], nl, mixed;
        if (!plan_counts(path, cf, 64, names, 3, n, &nl, &mixed) ||
            !plan_counts(path, ag, 64, names, 3, g, &nl, &mixed) ||
            !plan_counts(path, none, 64, names, 3, m, &nl, &mixed))
            continue;
        /* (the fixture's layers of attention: those without a DeltaNet) */
        const int na = nl - n[0];
        const int kq = t == 1; /* (Q4_K_M: attention converts for a K-format o product) */
        printf("  %s: decode conv1d %d (own launches: %d), prompt %d (%d); decode eltwise %d, "
               "quant_act %d (gate's own launch: %d, %d)\n", label, m[0], n[0], m[3], n[3], m[1],
               m[2], g[1], g[2]);
        CHECKF(n[0] > 0 && m[0] == 0 && m[3] == n[0] && n[3] == n[0] && na > 0 &&
                   g[1] - m[1] == na && g[2] - m[2] == (kq ? na : 0),
               "%s: decode conv1d %d, prompt %d (BRASA_GPU_CONV_FUSE=0: %d, %d); eltwise %d, "
               "quant_act %d (BRASA_GPU_ATTN_GATE=0: %d, %d), %d layers of attention", label,
               m[0], m[3], n[0], n[3], m[1], m[2], g[1], g[2], na);
    }
}

/* The prompt's DeltaNet kernel kname in the plans of the model at path: with the environment
 * on, in every DeltaNet layer of the prompt and in none of decode's (those keep deltanet); with
 * off, in none of the prompt's. */
static void dn_prompt_kernel(const char *path, const char *label, const char *const *on,
                             const char *const *off, const char *kname)
{
    const char *const names[] = {kname, "deltanet"};
    int n[3], m[3], nl, mixed;
    if (!plan_counts(path, off, 64, names, 2, n, &nl, &mixed) ||
        !plan_counts(path, on, 64, names, 2, m, &nl, &mixed))
        return;
    printf("  %s: prompt %s %d (%s=%s: %d), decode deltanet %d, %s %d\n", label, kname, m[2],
           off[0], off[1], n[2], m[1], kname, m[0]);
    CHECKF(m[1] > 0 && m[2] == m[1] && m[0] == 0 && n[2] == 0 && n[1] == m[1],
           "%s: prompt %s %d (%s=%s: %d); decode deltanet %d (%d), %s %d", label, kname, m[2],
           off[0], off[1], n[2], m[1], n[1], kname, m[0]);
}

/* qwen35's prompt DeltaNet with each chunk of tokens staged in shared memory (ops.cu
 * deltanet_staged, the prompts' kernel with BRASA_GPU_DN_CHUNK=0) against the kernel of decode
 * (BRASA_GPU_DN_STAGE=0): the same arithmetic token by token, so the same bits, prompt and
 * decode, over one partial chunk and over several (100 tokens); and the launches: every prompt
 * DeltaNet staged, decode's not. */
TEST(qwen35_prompt_deltanet_staged)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    static const char *const nc[] = {"BRASA_GPU_DN_CHUNK", "0", NULL};
    static const char *const env[] = {"BRASA_GPU_DN_STAGE", "0", NULL};
    char *old[8];
    env_push(nc, old); /* (both sessions of each pair) */
    for (int t = 0; t < 3; t++) {
        char label[64];
        const char *path = qwen35_fixture(q35_types[t], label, sizeof label);
        if (!path)
            continue;
        pair_prompt = true;
        decode_pair_path(path, label, env, 0, "staged DeltaNet and decode's", 512, 7);
        decode_pair_path(path, label, env, 0, "staged DeltaNet and decode's", 512, 100);
        pair_prompt = false;
        dn_prompt_kernel(path, label, nc, env, "deltanet_staged");
    }
    env_pop(nc, old);
}

/* qwen35's prompt DeltaNet a chunk of 32 tokens at a time (ops.cu deltanet_chunked) against
 * the staged kernel token by token (BRASA_GPU_DN_CHUNK=0): the same recurrence with its sums in
 * another order, so close but not the same bits (within 0.002 of the largest logit on F16
 * weights, 0.03 where the activations are converted to int8); prompt and decode logits over
 * one partial chunk (7 tokens), several (100) and 300 tokens, on the fixtures and on a
 * synthesized tiny qwen35 with keys of 128 (the 4B's); and the launches: every prompt DeltaNet
 * chunked, decode's the kernel of decode. */
TEST(qwen35_prompt_deltanet_chunked)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    static const char *const on[] = {"BRASA_GPU_DN_CHUNK", "1", NULL};
    static const char *const env[] = {"BRASA_GPU_DN_CHUNK", "0", NULL};
    char *old[8];
    env_push(on, old); /* (the first session of each pair, whatever the default) */
    for (int t = 0; t < 4; t++) {
        char label[64], buf[96];
        const char *path = NULL;
        if (t < 3) {
            path = qwen35_fixture(q35_types[t], label, sizeof label);
        } else if (synth_tmp(buf, sizeof buf, "qwen35", "tiny256", FTYPE_Q8_0, 5)) {
            path = buf;
            snprintf(label, sizeof label, "qwen35 tiny256 Q8_0");
        }
        if (!path)
            continue;
        /* (F16 0.0004-0.0005 apart on an H100; the quantized files 0.009-0.015 after 100
         * tokens: a state a few ulps apart moves a later int8 conversion's rounding) */
        const double tol = t == 2 ? 2e-3 : 3e-2;
        pair_prompt = true;
        decode_pair_path(path, label, env, tol, "chunked DeltaNet and the staged one", 512, 7);
        decode_pair_path(path, label, env, tol, "chunked DeltaNet and the staged one", 512, 100);
        decode_pair_path(path, label, env, tol, "chunked DeltaNet and the staged one", 512, 300);
        pair_prompt = false;
        dn_prompt_kernel(path, label, on, env, "deltanet_chunked");
    }
    env_pop(on, old);
}

/* Decode attention over heads of 256 (qwen35's; a synthesized tiny qwen35 with heads of 256,
 * Q8_0) through the F16 output pass of the heads of 128 (the default) against the
 * thread-per-element pass (BRASA_GPU_ATTN_256=0): the same products, summed in another order;
 * in one pass and split along a context of 2,048 (a 1,100-token prompt). And the prompt's
 * attention over those heads on the tensor cores (fa.cu) against the per-token kernel. */
TEST(attention_heads_of_256)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    static const char *const env[] = {"BRASA_GPU_ATTN_256", "0", NULL};
    char buf[96];
    if (!synth_tmp(buf, sizeof buf, "qwen35", "tiny256", FTYPE_Q8_0, 5))
        return;
    decode_pair_path(buf, "qwen35 tiny256 Q8_0", env, 1e-4,
                     "heads of 256: the F16 output pass and a thread per element", 512, 7);
    decode_pair_path(buf, "qwen35 tiny256 Q8_0", env, 1e-4,
                     "heads of 256: the F16 output pass and a thread per element, split", 2048,
                     1100);
    /* the prompt's attention on the tensor cores (fa.cu with heads of 256, the default)
     * against the per-token kernel (BRASA_GPU_FA256=0): Q and the probabilities rounded to F16
     * in both (as the CPU backend rounds them) but summed in other orders, which this model's
     * random weights magnify: 9.3e-3 apart on an H100, each about 2e-2 from the CPU backend
     * (BENCHMARKS.md, session 39), where a wrong kernel is off by order 1; so a bound of 2e-2 */
    static const char *const fa[] = {"BRASA_GPU_FA256", "0", NULL};
    pair_prompt = true; /* (tiny256's one attention layer is its last: only the prompt's own
                         * logits see the prompt's attention) */
    decode_pair_path(buf, "qwen35 tiny256 Q8_0", fa, 2e-2,
                     "prompt attention over heads of 256 on the tensor cores and per token", 512,
                     100);
    decode_pair_path(buf, "qwen35 tiny256 Q8_0", fa, 2e-2,
                     "prompt attention over heads of 256 on the tensor cores and per token", 2048,
                     1100);
    pair_prompt = false;
    unlink(buf);
}

/* A q/k/v launch whose v weight has another type (Q4_K q and k, Q6_K v: the layers of Q4_K_M
 * files that keep v in Q6_K; mvd.cu QT2, the default) against v in a launch of its own
 * (BRASA_GPU_MVD_MIX=0):
 * the same code for each weight, so the same logits bit for bit; and in the decode plans a
 * launch fewer for each such layer. */
TEST(decode_qkv_of_two_types)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    static const char *const env[] = {"BRASA_GPU_MVD_MIX", "0", NULL};
    decode_pair("Q4_K_M", env, 0, "v of Q6_K with q and k, and in its own launch");
    static const char *const files[] = {"fixtures/llama.Q4_K_M.gguf", "fixtures/qwen2.Q4_K_M.gguf"};
    static const char *const none[] = {NULL}, *const all[] = {NULL};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        const char *path = test_shared_path(files[i]);
        if (!test_file_exists(path))
            continue;
        int n[2], m[2], nl, mixed;
        if (!plan_counts(path, env, 64, all, 1, n, &nl, &mixed) ||
            !plan_counts(path, none, 64, all, 1, m, &nl, &mixed))
            continue;
        printf("  %-28s decode launches %d (BRASA_GPU_MVD_MIX=0: %d), %d layers with a Q6_K v\n",
               files[i], m[0], n[0], mixed);
        CHECKF(mixed > 0 && n[0] - m[0] == mixed, "%s: %d launches, %d with BRASA_GPU_MVD_MIX=0, "
               "%d layers of Q4_K q/k and Q6_K v", files[i], m[0], n[0], mixed);
    }
}

/* Decode products on the tensor cores reading the F32 activation (mvf.cu): every family's
 * Q4_K_M fixture with every Q4_K product of one weight and gate+up there (BRASA_GPU_MF=2), and
 * with the Q6_K ones too (=3, and the Q6_K fixtures), against its goldens and the CPU within the
 * usual bounds (the activation in F16 where quant_act made int8; qwen35, whose recurrent state
 * would carry that other rounding beyond its bound, keeps quant_act); and in the decode plans
 * of the llama and qwen2 fixtures by default (BRASA_GPU_MF=1) a gate+up launch of mvf a
 * layer, and fewer quant_act launches than with BRASA_GPU_MF=0. */
TEST(decode_q4k_on_tensor_cores)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    char probe[1024];
    snprintf(probe, sizeof probe, "%s", test_shared_path("fixtures/llama.Q4_K_M.gguf"));
    if (!test_file_exists(probe))
        SKIP("fixtures not found (set BRASA_SHARED)");
    for (int mf = 2; mf <= 3; mf++) { /* Q4_K; Q4_K and Q6_K */
        double wg = 0, wc = 0;
        setenv("BRASA_GPU_MF", mf == 2 ? "2" : "3", 1);
        for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
            check_file(archs[a], "Q4_K_M", &wg, &wc);
            if (mf == 3)
                check_file(archs[a], "Q6_K", &wg, &wc);
        }
        unsetenv("BRASA_GPU_MF");
        printf("  worst error / bound (%s on the tensor cores): vs golden %.2f, vs CPU %.2f\n",
               mf == 2 ? "Q4_K" : "Q4_K and Q6_K", wg, wc);
    }
    static const char *const files[] = {"fixtures/llama.Q4_K_M.gguf", "fixtures/qwen2.Q4_K_M.gguf"};
    static const char *const on[] = {NULL}, *const off[] = {"BRASA_GPU_MF", "0", NULL};
    static const char *const names[] = {"mvf_glu", "quant_act"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        const char *path = test_shared_path(files[i]);
        int n[3], m[3], nl, mixed;
        if (!plan_counts(path, on, 64, names, 2, n, &nl, &mixed) ||
            !plan_counts(path, off, 64, names, 2, m, &nl, &mixed))
            continue;
        printf("  %-28s decode: %d mvf_glu, %d quant_act (without: %d, %d), %d layers\n",
               files[i], n[0], n[1], m[0], m[1], nl);
        CHECKF(n[0] == nl && m[0] == 0 && n[1] < m[1], "%s: %d mvf_glu launches and %d quant_act "
               "(without: %d and %d) for %d layers", files[i], n[0], n[1], m[0], m[1], nl);
    }
}

/* Logits of the model at path after a prompt of np tokens and after 8 decode steps, on the GPU
 * (opened with the environment pairs env set) against the CPU backend: the worst difference
 * relative to the largest logit. */
static double gpu_vs_cpu(const char *path, const char *const *env, int np)
{
    struct brasa_model *mg = NULL, *mc = NULL;
    struct brasa_session *sg = NULL, *sc = NULL;
    char *old[8];
    env_push(env, old);
    brasa_status st = open_model(path, BRASA_BACKEND_CUDA, &mg, &sg, 512, BRASA_KV_F32);
    env_pop(env, old);
    if (st == BRASA_OK)
        st = open_model(path, BRASA_BACKEND_CPU, &mc, &sc, 512, BRASA_KV_F32);
    double worst = 1;
    CHECKF(st == BRASA_OK, "%s did not load", path);
    struct brasa_model_info info;
    int32_t *prompt = malloc((size_t)np * sizeof *prompt);
    if (st != BRASA_OK || !prompt)
        goto out;
    brasa_model_get_info(mg, &info);
    for (int i = 0; i < np; i++)
        prompt[i] = (int32_t)((i * 7919 + 13) % info.n_vocab);
    struct brasa_err err = {{0}};
    worst = 0;
    for (int k = 0; k <= 8; k++) {
        const int32_t id = (int32_t)((k * 37 + 11) % info.n_vocab);
        const int32_t *in = k ? &id : prompt;
        const int n = k ? 1 : np;
        if (brasa_session_eval(sg, in, n, NULL, &err) != BRASA_OK ||
            brasa_session_eval(sc, in, n, NULL, &err) != BRASA_OK) {
            CHECKF(0, "%s: %s", path, err.msg);
            worst = 1;
            break;
        }
        const float *a = brasa_session_logits(sg), *c = brasa_session_logits(sc);
        worst = fmax(worst, rel_err(a, c, c, (size_t)info.n_vocab));
    }
out:
    free(prompt);
    brasa_session_free(sg);
    brasa_session_free(sc);
    brasa_model_free(mg);
    brasa_model_free(mc);
    return worst;
}

/* The device's architecture (90 for sm_90), 0 where it cannot be opened (a failed check) */
static int gpu_arch_of_device(void)
{
    struct brasa_err err = {{0}};
    struct gpu *g = NULL;
    if (gpu_open(&g, NULL, &err) != BRASA_OK) {
        CHECKF(0, "%s", err.msg);
        return 0;
    }
    int arch = gpu_arch(g);
    gpu_close(g);
    return arch;
}

/* One model (tiny128 of type label) through the warpgroup products (the environment pairs env;
 * off: the mma.sync tiles of the same products): the GPU against the CPU backend with off and
 * with env within tol, with env against off within 2e-3 (BF16: 5e-3: its tiles take the
 * activations rounded to 8 bits, so where the two orders of summing round a product's output
 * apart, the next layer's input moves by up to 2^-8 of it), and every prompt product of a
 * 6-token prompt on them (the caller sets BRASA_GPU_MMT_MIN=2). */
static void warpgroup_case(const char *path, const char *label, const char *const *env,
                           const char *const *off, double tol)
{
    static const char *const names[] = {"mmt_wg_multi", "mmt_wg", "mmt_wg_glu"};
    double e0 = gpu_vs_cpu(path, off, 300), e = gpu_vs_cpu(path, env, 300);
    printf("  %s %s=%s: vs CPU %.3g with mma.sync, %.3g on the warpgroups (bound %.0e)\n", label,
           env[0], env[1], e0, e, tol);
    CHECKF(e0 <= tol && e <= tol, "%s %s=%s: %.3g and %.3g from the CPU", label, env[0], env[1],
           e0, e);
    char *old[8];
    env_push(off, old); /* (the first session's) */
    decode_pair_path(path, label, env, strstr(label, "BF16") ? 5e-3 : 2e-3,
                     "prompt on the warpgroups", 512, 300);
    env_pop(off, old);
    int n[2], nl, mixed;
    for (int j = 0; j < 3; j++)
        if (plan_counts(path, env, 64, names + j, 1, n, &nl, &mixed))
            CHECKF(n[1] >= nl, "%s %s=%s: %d %s launches in the prompt for %d layers", label,
                   env[0], env[1], n[1], names[j], nl);
}

/* warpgroup_case for tiny128 in each of the nt types ft (named fl), each of the ne settings
 * envs against off, with BRASA_GPU_MMT_MIN=2 (the plans' 6-token prompts on the tiles too) */
static void warpgroup_types(const int *ft, const char *const *fl, int nt,
                            const char *const *const *envs, int ne, const char *const *off)
{
    setenv("BRASA_GPU_MMT_MIN", "2", 1);
    for (int t = 0; t < nt; t++) {
        char path[256], label[64];
        if (!tiny128_of(path, sizeof path, ft[t]))
            continue;
        snprintf(label, sizeof label, "tiny128 %s", fl[t]);
        for (int e = 0; e < ne; e++)
            warpgroup_case(path, label, envs[e], off, tol_of(fl[t]));
        remove(path);
    }
    unsetenv("BRASA_GPU_MMT_MIN");
}

/* F16 and BF16 prompt products on Hopper's warpgroup products (mmt.cu WG, sm_90 only;
 * BRASA_GPU_MMT_WG=1 unswizzled tiles, =2 tiles in the 128-byte swizzle) on a tiny qwen2 of
 * heads of 128 (brasa synth: rows of 256-1,024, k of 512 and 1,024, which the fixtures' 64 do
 * not reach: their prompts never take the tensor-core tiles), prompts of 300 tokens (three
 * tiles of 128 tokens, the last part-filled): against the CPU backend within the types'
 * bounds, as the mma.sync tiles are, and against the mma.sync tiles (the same products summed
 * in another order) within 2e-3 of the largest logit (BF16: 5e-3); and the plans: the prompt's
 * products all on the warpgroups. */
TEST(prompt_f16_on_warpgroups)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    if (gpu_arch_of_device() != 90)
        SKIP("not an sm_90 device");
    static const int ft[2] = {FTYPE_F16, FTYPE_BF16};
    static const char *const fl[2] = {"F16", "BF16"};
    static const char *const wg1[] = {"BRASA_GPU_MMT_WG", "1", NULL};
    static const char *const wg2[] = {"BRASA_GPU_MMT_WG", "2", NULL};
    static const char *const *const envs[2] = {wg1, wg2};
    static const char *const off[] = {"BRASA_GPU_MMT_WG", "0", NULL};
    warpgroup_types(ft, fl, 2, envs, 2, off);
}

/* Quantized prompt weights dequantized into F16 tiles (mmt.cu DQ) on Hopper's warpgroup
 * products (BRASA_GPU_MMT_WG=3, sm_90's default, where Q8_0 and Q4_0 take them too), on the
 * tiny qwen2 of heads of 128 in Q4_K_M, Q8_0 and Q4_0, prompts of 300 tokens: against the CPU
 * backend within the types' bound, against the same dequantized tiles on mma.sync
 * (BRASA_GPU_MMT_WG=0 BRASA_GPU_MMT_DQ=2) within 2e-3 of the largest logit, and the plans. */
TEST(prompt_dq_on_warpgroups)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    if (gpu_arch_of_device() != 90)
        SKIP("not an sm_90 device");
    static const int ft[3] = {FTYPE_Q4_K_M, FTYPE_Q8_0, FTYPE_Q4_0};
    static const char *const fl[3] = {"Q4_K_M", "Q8_0", "Q4_0"};
    static const char *const wg3[] = {"BRASA_GPU_MMT_WG", "3", NULL};
    static const char *const *const envs[1] = {wg3};
    static const char *const off[] = {"BRASA_GPU_MMT_WG", "0", "BRASA_GPU_MMT_DQ", "2", NULL};
    warpgroup_types(ft, fl, 3, envs, 1, off);
}

/* Q4_K / Q5_K prompt products on Hopper's warpgroups with exact sums (mmt.cu KX, sm_90's
 * default where the weights are not dequantized: qwen35, and any model with
 * BRASA_GPU_MMT_DQ=0) against the F16 mma.sync tiles (BRASA_GPU_MMT_KX=0): both add the
 * integer values times their sub-block scales times the int8 activation, exact in F32 below
 * 2^24, and scale each 256-block's sum alike, so the same bits, prompt and decode (the
 * fixtures' short prompts on the tiles: BRASA_GPU_MMT_MIN=2); and the prompt plans' gate+up
 * launches on warpgroups: one a layer, none with BRASA_GPU_MMT_KX=0. */
TEST(prompt_k_exact_on_warpgroups)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    if (gpu_arch_of_device() != 90)
        SKIP("not an sm_90 device");
    static const char *const env[] = {"BRASA_GPU_MMT_KX", "0", NULL};
    static const char *const on[] = {"BRASA_GPU_MMT_MIN", "2", "BRASA_GPU_MMT_DQ", "0", NULL};
    static const char *const off[] = {"BRASA_GPU_MMT_MIN", "2", "BRASA_GPU_MMT_DQ", "0",
                                      "BRASA_GPU_MMT_KX", "0", NULL};
    static const char *const names[] = {"mmt_wg_glu"};
    static const char *const files[2][2] = {{"qwen35", "qwen35 Q4_K_M"}, {"qwen2", "qwen2 Q4_K_M"}};
    for (int f = 0; f < 2; f++) {
        char rel[64];
        snprintf(rel, sizeof rel, "fixtures/%s.Q4_K_M.gguf", files[f][0]);
        const char *path = test_shared_path(rel);
        if (!test_file_exists(path))
            continue;
        char *old[8];
        env_push(on, old);
        pair_prompt = true;
        decode_pair_path(path, files[f][1], env, 0, "exact warpgroup tiles and mma.sync ones",
                         512, 7);
        decode_pair_path(path, files[f][1], env, 0, "exact warpgroup tiles and mma.sync ones",
                         512, 100);
        pair_prompt = false;
        env_pop(on, old);
        int n[2], m[2], nl, mixed;
        if (!plan_counts(path, on, 64, names, 1, m, &nl, &mixed) ||
            !plan_counts(path, off, 64, names, 1, n, &nl, &mixed))
            continue;
        printf("  %s: prompt mmt_wg_glu %d (BRASA_GPU_MMT_KX=0: %d), %d layers\n", files[f][1],
               m[1], n[1], nl);
        CHECKF(m[1] == nl && n[1] == 0, "%s: prompt mmt_wg_glu %d (BRASA_GPU_MMT_KX=0: %d), %d "
               "layers", files[f][1], m[1], n[1], nl);
    }
}

/* Decode RoPE and KV-cache writes in the q/k/v products' epilogue (mvd.cu RP: NORM pairs in
 * llama and granite, NEOX in qwen2; qwen3's head norms and qwen35's partial rotation keep the
 * rope launch) against the rope launch: the same rotation, with the host's cos and sin where
 * the launch takes the device's (an ulp apart at most), on the graph executor. */
TEST(decode_rope_in_products)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    /* the same bits: both take the host's table of angles (graph_rope_table's, the products
     * through the session's table, the launch making the same values in double) and round
     * each product and sum of the rotation on its own (an ulp apart, one activation that
     * lands on the other side of an int8 or F16 rounding edge moves these fixtures' logits by
     * 0.5-1%; with BRASA_GPU_MF=1 the qwen2 Q4_K_M ones did) */
    static const char *const env[] = {"BRASA_GPU_ROPE_FUSE", "0", NULL};
    for (int mf = 0; mf < 2; mf++) {
        /* (1, the default: the FFN's Q4_K products on the tensor cores) */
        setenv("BRASA_GPU_MF", mf ? "1" : "0", 1);
        decode_pair("Q4_K_M", env, 0, "RoPE in the products and its own launch");
        if (!mf)
            decode_pair("Q8_0", env, 0, "RoPE in the products and its own launch");
        /* steps at positions 250 to 265: the products' table of angles, filled a chunk of 256
         * positions at a time, has its second chunk filled while they run */
        decode_pair_ctx("Q4_K_M", env, 0, "RoPE in the products and its own launch, positions "
                        "250-265", 512, 250);
        unsetenv("BRASA_GPU_MF");
    }
    /* and a rope launch that makes its angles (BRASA_GPU_ROPE_TABLE=0: in double, rounded
     * once, as the host does) rather than read the session's table, as by default */
    static const char *const tab[] = {"BRASA_GPU_ROPE_FUSE", "0", "BRASA_GPU_ROPE_TABLE", "0",
                                      NULL};
    decode_pair("Q4_K_M", tab, 0, "RoPE in the products and a launch making its angles");
    /* and the plans: no rope launch in decode where the products rotate (qwen3 keeps one a
     * layer: its head norms come between), one a layer with BRASA_GPU_ROPE_FUSE=0 and in
     * the prompt */
    static const char *const files[] = {"fixtures/llama.Q4_K_M.gguf", "fixtures/qwen2.Q8_0.gguf",
                                        "fixtures/granite.Q4_K_M.gguf",
                                        "fixtures/qwen3.Q4_K_M.gguf"};
    static const char *const none[] = {NULL}, *const name[] = {"rope"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        const char *path = test_shared_path(files[i]);
        if (!test_file_exists(path))
            continue;
        for (int off = 0; off < 2; off++) {
            int c[2], nl, mixed;
            if (!plan_counts(path, off ? env : none, 64, name, 1, c, &nl, &mixed))
                continue;
            int want = off || strstr(files[i], "qwen3") ? nl : 0;
            printf("  %-28s %s: rope launches, decode %d, prompt %d (%d layers)\n", files[i],
                   off ? "BRASA_GPU_ROPE_FUSE=0" : "default", c[0], c[1], nl);
            CHECKF(c[0] == want && c[1] == nl, "%s: %d rope launches in decode (want %d), %d in "
                   "the prompt (want %d)", files[i], c[0], want, c[1], nl);
        }
    }
}

/* A 2048-position context and an F16 cache (decode attention split along the sequence in
 * three after the 1,100-token prompt), against the CPU backend with the same cache type; the
 * fixtures and a tiny model with heads of 128. */
TEST(long_context_f16_cache)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    char t128[96];
    const char *files[] = {"fixtures/llama.Q8_0.gguf", "fixtures/qwen35.Q8_0.gguf",
                           "fixtures/qwen2.Q4_K_M.gguf", tiny128(t128, sizeof t128)};
    for (int f = 0; f < 4; f++) {
        char p[1024];
        if (!files[f])
            continue;
        snprintf(p, sizeof p, "%s", f == 3 ? files[f] : test_shared_path(files[f]));
        if (!test_file_exists(p))
            continue;
        struct brasa_model *mg = NULL, *mc = NULL;
        struct brasa_session *sg = NULL, *sc = NULL;
        REQUIRE(open_model(p, BRASA_BACKEND_CUDA, &mg, &sg, 2048, BRASA_KV_F16) == BRASA_OK);
        REQUIRE(open_model(p, BRASA_BACKEND_CPU, &mc, &sc, 2048, BRASA_KV_F16) == BRASA_OK);
        unsigned long long seed = test_seed();
        int n = 1100;
        int32_t *tok = malloc((size_t)n * 4);
        for (int i = 0; i < n; i++)
            tok[i] = (int32_t)(test_rand_u64(&seed) % 1000);
        struct brasa_err err = {{0}};
        CHECKF(brasa_session_eval(sg, tok, n, NULL, &err) == BRASA_OK, "%s", err.msg);
        CHECKF(brasa_session_eval(sc, tok, n, NULL, &err) == BRASA_OK, "%s", err.msg);
        double e = 0;
        struct brasa_model_info info;
        brasa_model_get_info(mg, &info);
        for (int k = 0; k < 8; k++) {
            int32_t id = tok[k];
            CHECKF(brasa_session_eval(sg, &id, 1, NULL, &err) == BRASA_OK, "%s", err.msg);
            CHECKF(brasa_session_eval(sc, &id, 1, NULL, &err) == BRASA_OK, "%s", err.msg);
            e = fmax(e, rel_err(brasa_session_logits(sg), brasa_session_logits(sc),
                                brasa_session_logits(sc), (size_t)info.n_vocab));
        }
        printf("  %s, 2048 ctx, F16 cache, 1100 + 8 tokens: GPU vs CPU %.2e\n", files[f], e);
        CHECKF(e < 5e-2, "%s: GPU vs CPU %.3g", files[f], e);
        free(tok);
        brasa_session_free(sg);
        brasa_session_free(sc);
        brasa_model_free(mg);
        brasa_model_free(mc);
    }
    if (files[3])
        unlink(files[3]);
}

/* The sampler's candidates selected on the device (top-k kernel, in the decode graph) draw the
 * same tokens as the whole row sent to the host, greedy and sampled, with penalties; the row
 * itself is still there when asked for afterwards. */
TEST(device_candidates)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    static const struct {
        float temp;
        int top_k;
        float rep;
    } cfg[] = {{0.0f, 40, 1.0f}, {0.0f, 40, 1.3f}, {0.8f, 40, 1.2f}, {1.0f, 200, 1.0f},
               {0.8f, 0, 1.0f}};
    const char *files[] = {"fixtures/llama.Q4_K_M.gguf", "fixtures/qwen35.Q8_0.gguf"};
    for (int f = 0; f < 2; f++) {
        char p[1024];
        snprintf(p, sizeof p, "%s", test_shared_path(files[f]));
        if (!test_file_exists(p))
            continue;
        struct brasa_model *m = NULL;
        struct brasa_session *s1 = NULL, *s2 = NULL;
        REQUIRE(open_model(p, BRASA_BACKEND_CUDA, &m, &s1, 512, BRASA_KV_F16) == BRASA_OK);
        struct brasa_session_opts so = {.n_ctx = 512, .kv_type = BRASA_KV_F16};
        struct brasa_err err = {{0}};
        REQUIRE(brasa_session_new(m, &so, &s2, &err) == BRASA_OK);
        struct brasa_model_info info;
        brasa_model_get_info(m, &info);
        for (size_t c = 0; c < sizeof cfg / sizeof cfg[0]; c++) {
            struct brasa_sampler_params sp;
            brasa_sampler_defaults(&sp);
            sp.temperature = cfg[c].temp;
            sp.top_k = cfg[c].top_k;
            sp.repeat_penalty = cfg[c].rep;
            struct brasa_sampler *a = NULL, *b = NULL;
            REQUIRE(brasa_sampler_new(&sp, info.n_vocab, &a, &err) == BRASA_OK);
            REQUIRE(brasa_sampler_new(&sp, info.n_vocab, &b, &err) == BRASA_OK);
            brasa_session_reset(s1);
            brasa_session_reset(s2);
            brasa_session_set_sampler(s1, a); /* s2: the whole row */
            int32_t prompt[6] = {1, 20, 300, 40, 5, 77};
            CHECKF(brasa_session_eval(s1, prompt, 6, NULL, &err) == BRASA_OK, "%s", err.msg);
            CHECKF(brasa_session_eval(s2, prompt, 6, NULL, &err) == BRASA_OK, "%s", err.msg);
            int same = 1;
            for (int k = 0; k < 24 && same; k++) {
                int32_t x = brasa_session_sample(s1, a);
                int32_t y = brasa_sampler_sample(b, brasa_session_logits(s2));
                same &= x == y;
                brasa_sampler_accept(a, y);
                brasa_sampler_accept(b, y);
                CHECKF(brasa_session_eval(s1, &y, 1, NULL, &err) == BRASA_OK, "%s", err.msg);
                CHECKF(brasa_session_eval(s2, &y, 1, NULL, &err) == BRASA_OK, "%s", err.msg);
            }
            CHECKF(same, "%s, config %zu: device candidates drew another token", files[f], c);
            const float *r1 = brasa_session_logits(s1), *r2 = brasa_session_logits(s2);
            CHECKF(r1 && r2 && !memcmp(r1, r2, (size_t)info.n_vocab * 4),
                   "%s, config %zu: the row fetched after the candidates differs", files[f], c);
            brasa_session_set_sampler(s1, NULL);
            brasa_sampler_free(a);
            brasa_sampler_free(b);
        }
        printf("  %s: device candidates == whole row, %zu sampler configurations\n", files[f],
               sizeof cfg / sizeof cfg[0]);
        brasa_session_free(s1);
        brasa_session_free(s2);
        brasa_model_free(m);
    }
}

/* A shard of one (mdl_shard(m, 0, 1)): the model with tensor parallelism's all-reduces after
 * the embedding, each attention or DeltaNet mixer and each FFN, run by NCCL over a
 * communicator of one GPU (eager in the prompt, captured into the decode graph), against the
 * whole model on the same GPU: a 6-token prompt and 8 greedy steps, logits within 1e-3 of the
 * largest, the same tokens. Needs NCCL (BRASA_NCCL: its path); SKIPs without it. Each fixture
 * opens the device anew (its weights are known by their host addresses, which the next
 * fixture's may reuse), and a communicator with it. */
TEST(shard_allreduce_through_nccl)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    struct brasa_err err = {{0}};
    struct nccl nc;
    if (nccl_load(&nc, &err) != BRASA_OK) {
        fprintf(stderr, "  %s\n", err.msg);
        SKIP("no NCCL");
    }
    printf("  %s (version %d), a communicator of 1 GPU\n", nc.name, nc.version);
    static const char *const files[] = {"fixtures/llama.Q8_0.gguf", "fixtures/qwen2.Q4_K_M.gguf",
                                        "fixtures/granite.Q4_K_M.gguf",
                                        "fixtures/qwen35.Q8_0.gguf"};
    enum { NP = 6, NS = 8, CTX = 64 };
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        const char *path = test_shared_path(files[i]);
        if (!test_file_exists(path))
            continue;
        struct gpu *g = NULL;
        ncclUniqueId id;
        ncclComm_t comm = NULL;
        REQUIRE(gpu_open(&g, NULL, &err) == BRASA_OK && gpu_make_current(g, &err) == BRASA_OK);
        int r0 = nc.GetUniqueId(&id), r1 = r0 ? r0 : nc.CommInitRank(&comm, 1, id, 0);
        CHECKF(!r0 && !r1, "NCCL: %s", nc.GetErrorString(r0 ? r0 : r1));
        struct gguf_file *f = NULL;
        struct gpu_run w, sh;
        memset(&w, 0, sizeof w);
        memset(&sh, 0, sizeof sh);
        brasa_status st = gguf_open(&f, path, &err);
        if (st == BRASA_OK && (st = mdl_load(&w.m, f, &err)) == BRASA_OK &&
            (st = mdl_shard(&w.m, 0, 1, &sh.m, &sh.mem, &err)) == BRASA_OK &&
            (st = gpu_run_open(&w, g, NULL, NULL, NP, CTX, &err)) == BRASA_OK)
            st = gpu_run_open(&sh, g, &nc, comm, NP, CTX, &err);
        CHECKF(st == BRASA_OK, "%s: %s", files[i], err.msg);
        int V = w.m.hp.n_vocab, same = 1;
        int32_t toks[NP] = {1, 17, 70, 42, 100, 99};
        double worst = 0;
        for (int k = 0; st == BRASA_OK && k <= NS; k++) {
            struct graph_run r = {.pos0 = k ? NP + k - 1 : 0, .tokens = toks};
            const float *a = NULL, *b = NULL;
            if ((st = gpu_sess_run(w.s, &w.gr[k ? 1 : 0], &r, &err)) != BRASA_OK ||
                !(a = gpu_sess_output(w.s, &err)) ||
                (st = gpu_sess_run(sh.s, &sh.gr[k ? 1 : 0], &r, &err)) != BRASA_OK ||
                !(b = gpu_sess_output(sh.s, &err))) {
                st = st ? st : BRASA_EDEVICE;
                break;
            }
            double md = 0, mx = 0;
            for (int v = 0; v < V; v++) {
                md = fmax(md, fabs((double)b[v] - a[v]));
                mx = fmax(mx, fabs((double)a[v]));
            }
            worst = fmax(worst, md / mx);
            same &= test_argmax(a, V) == test_argmax(b, V);
            toks[0] = test_argmax(a, V);
        }
        CHECKF(st == BRASA_OK, "%s: %s", files[i], err.msg);
        CHECKF(worst <= 1e-3 && same, "%s: a shard of one through NCCL: logits %.3g apart, "
               "greedy tokens %s", files[i], worst, same ? "the same" : "differ");
        printf("  %-28s shard of 1, all-reduces by NCCL: logits within %.2e of the largest, "
               "greedy tokens %s\n", files[i], worst, same ? "the same" : "DIFFER");
        gpu_run_close(&sh);
        gpu_run_close(&w);
        if (f)
            gguf_close(f);
        if (comm)
            nc.CommDestroy(comm);
        gpu_close(g);
    }
    nccl_unload(&nc);
}

/* A model loaded over GPUs (brasa_model_opts.n_gpus: session/tp.c, a thread and an NCCL rank a
 * GPU; here one GPU, a shard of one) against the same model on one GPU: the prompt's logits
 * and 16 greedy tokens drawn from the device's candidates, then the whole row. */
TEST(model_over_gpus)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    struct nccl nc;
    struct brasa_err err = {{0}};
    if (nccl_load(&nc, &err) != BRASA_OK)
        SKIP("no NCCL");
    nccl_unload(&nc);
    const char *files[] = {"fixtures/qwen2.Q4_K_M.gguf", "fixtures/qwen35.Q8_0.gguf"};
    for (int f = 0; f < 2; f++) {
        char p[1024];
        snprintf(p, sizeof p, "%s", test_shared_path(files[f]));
        if (!test_file_exists(p))
            continue;
        struct brasa_model *m1 = NULL, *mt = NULL;
        struct brasa_session *s1 = NULL, *st = NULL;
        REQUIRE(open_model(p, BRASA_BACKEND_CUDA, &m1, &s1, 256, BRASA_KV_F16) == BRASA_OK);
        struct brasa_model_opts mo = {.n_threads = 2, .n_gpus = 1};
        struct brasa_session_opts so = {.n_ctx = 256, .kv_type = BRASA_KV_F16};
        CHECKF(brasa_model_load(p, &mo, &mt, &err) == BRASA_OK &&
                   brasa_session_new(mt, &so, &st, &err) == BRASA_OK,
               "%s over 1 GPU: %s", files[f], err.msg);
        struct brasa_model_info info;
        brasa_model_get_info(m1, &info);
        struct brasa_sampler_params sp;
        brasa_sampler_defaults(&sp);
        sp.temperature = 0.0f;
        struct brasa_sampler *a = NULL, *b = NULL;
        REQUIRE(brasa_sampler_new(&sp, info.n_vocab, &a, &err) == BRASA_OK);
        REQUIRE(brasa_sampler_new(&sp, info.n_vocab, &b, &err) == BRASA_OK);
        int32_t prompt[6] = {1, 20, 300, 40, 5, 77};
        double worst = 0;
        int same = 1;
        if (st) {
            brasa_session_set_sampler(st, b);
            CHECKF(brasa_session_eval(s1, prompt, 6, NULL, &err) == BRASA_OK, "%s", err.msg);
            CHECKF(brasa_session_eval(st, prompt, 6, NULL, &err) == BRASA_OK, "%s", err.msg);
            for (int k = 0; k < 16 && same; k++) {
                int32_t x = brasa_sampler_sample(a, brasa_session_logits(s1));
                int32_t y = brasa_session_sample(st, b); /* the shards' candidates, merged */
                same &= x == y;
                brasa_sampler_accept(a, x);
                brasa_sampler_accept(b, x);
                CHECKF(brasa_session_eval(s1, &x, 1, NULL, &err) == BRASA_OK, "%s", err.msg);
                CHECKF(brasa_session_eval(st, &x, 1, NULL, &err) == BRASA_OK, "%s", err.msg);
            }
            const float *r1 = brasa_session_logits(s1), *rt = brasa_session_logits(st);
            CHECK(r1 && rt);
            for (int v = 0; r1 && rt && v < info.n_vocab; v++)
                worst = fmax(worst, fabs((double)r1[v] - rt[v]));
            brasa_session_set_sampler(st, NULL);
        }
        CHECKF(same && worst <= 1e-3, "%s over 1 GPU: tokens %s, logits %.3g apart", files[f],
               same ? "the same" : "differ", worst);
        printf("  %-28s --gpus 1 (NCCL): 16 greedy tokens %s, last logits %.2e apart\n",
               files[f], same ? "the same" : "DIFFER", worst);
        brasa_sampler_free(a);
        brasa_sampler_free(b);
        brasa_session_free(st);
        brasa_model_free(mt);
        brasa_session_free(s1);
        brasa_model_free(m1);
    }
}

static int collect_ids(void *ud, int32_t id, const char *text, size_t len)
{
    (void)text, (void)len;
    int32_t *v = ud;
    v[1 + v[0]++] = id;
    return 0;
}

static int stop_at_5(void *ud, int32_t id, const char *text, size_t len)
{
    collect_ids(ud, id, text, len);
    return ((int32_t *)ud)[0] == 5;
}

/* Greedy generation with its decode steps queued ahead (each on the device's own pick, before
 * the host has read it) against the same with BRASA_GPU_QUEUE=0: the same tokens, the same
 * position, the last step's row bit for bit (run again where the step queued past the end
 * overwrote it), and the next eval's row too; a stop by the callback mid-way drops the step
 * queued past it. qwen35 (a recurrent state) does not queue. */
TEST(generate_queued)
{
    if (!gpu_present())
        SKIP("no GPU driver or device");
    const char *files[] = {"fixtures/llama.Q4_K_M.gguf", "fixtures/qwen2.Q8_0.gguf",
                           "fixtures/qwen35.Q4_K_M.gguf"};
    for (int f = 0; f < 3; f++) {
        char p[1024];
        snprintf(p, sizeof p, "%s", test_shared_path(files[f]));
        if (!test_file_exists(p))
            continue;
        struct brasa_model *m = NULL;
        struct brasa_session *s[2] = {NULL, NULL};
        REQUIRE(open_model(p, BRASA_BACKEND_CUDA, &m, &s[0], 256, BRASA_KV_F16) == BRASA_OK);
        struct brasa_session_opts so = {.n_ctx = 256, .kv_type = BRASA_KV_F16};
        struct brasa_err err = {{0}};
        REQUIRE(brasa_session_new(m, &so, &s[1], &err) == BRASA_OK);
        struct brasa_model_info info;
        brasa_model_get_info(m, &info);
        struct brasa_sampler_params sp;
        brasa_sampler_defaults(&sp);
        sp.temperature = 0;
        sp.repeat_penalty = 1;
        sp.presence_penalty = sp.frequency_penalty = 0;
        struct brasa_sampler *smp = NULL;
        REQUIRE(brasa_sampler_new(&sp, info.n_vocab, &smp, &err) == BRASA_OK);
        int32_t got[2][1 + 64] = {{0}};
        struct brasa_gen_stats gs[2];
        const int32_t prompt[6] = {1, 20, 300, 40, 5, 77};
        for (int q = 0; q < 2; q++) {
            got[q][0] = 0;
            if (q)
                setenv("BRASA_GPU_QUEUE", "0", 1);
            CHECKF(brasa_generate(s[q], smp, prompt, 6, 40, BRASA_GEN_IGNORE_EOS, collect_ids,
                                  got[q], &gs[q], &err) == BRASA_OK, "%s", err.msg);
            unsetenv("BRASA_GPU_QUEUE");
        }
        const bool rec = strstr(p, "qwen35") != NULL;
        CHECKF(got[0][0] == 40 && got[1][0] == 40 && !memcmp(got[0], got[1], sizeof got[0]),
               "%s: queued steps gave other tokens", files[f]);
        CHECKF(brasa_session_pos(s[0]) == 46 && brasa_session_pos(s[1]) == 46,
               "%s: positions %d and %d after 6 + 40", files[f], brasa_session_pos(s[0]),
               brasa_session_pos(s[1]));
        CHECKF(rec ? gs[0].n_ahead == 0 : gs[0].n_ahead == 39, "%s: %d steps kept ahead",
               files[f], gs[0].n_ahead);
        CHECK(gs[1].n_ahead == 0);
        int same = 1;
        for (int k = 0; k < 2; k++) { /* the last row, then the next token's */
            const float *r0 = brasa_session_logits(s[0]), *r1 = brasa_session_logits(s[1]);
            same &= r0 && r1 && !memcmp(r0, r1, (size_t)info.n_vocab * 4);
            int32_t id = 123;
            CHECKF(brasa_session_eval(s[0], &id, 1, NULL, &err) == BRASA_OK, "%s", err.msg);
            CHECKF(brasa_session_eval(s[1], &id, 1, NULL, &err) == BRASA_OK, "%s", err.msg);
        }
        CHECKF(same, "%s: rows after queued generation differ", files[f]);
        /* a stop mid-way: the step queued past it is dropped, the next turn goes on */
        for (int q = 0; q < 2; q++) {
            got[q][0] = 0;
            if (q)
                setenv("BRASA_GPU_QUEUE", "0", 1);
            CHECKF(brasa_generate(s[q], smp, prompt, 3, 20, BRASA_GEN_IGNORE_EOS, stop_at_5,
                                  got[q], &gs[q], &err) == BRASA_OK, "%s", err.msg);
            CHECKF(brasa_generate(s[q], smp, prompt + 3, 3, 8, BRASA_GEN_IGNORE_EOS,
                                  collect_ids, got[q], &gs[q], &err) == BRASA_OK, "%s", err.msg);
            unsetenv("BRASA_GPU_QUEUE");
        }
        CHECKF(got[0][0] == 13 && !memcmp(got[0], got[1], sizeof got[0]) &&
                   brasa_session_pos(s[0]) == brasa_session_pos(s[1]),
               "%s: a stop and a second turn gave other tokens or positions", files[f]);
        printf("  %s: queued greedy steps == one at a time (40 tokens, %d kept ahead; a stop "
               "and a second turn)\n", files[f], gs[0].n_ahead);
        brasa_sampler_free(smp);
        brasa_session_free(s[0]);
        brasa_session_free(s[1]);
        brasa_model_free(m);
    }
}

TEST_MAIN(T(fixtures_vs_golden_and_cpu), T(graph_equals_eager), T(decode_conversion_in_product),
          T(upload_staged_equals_pageable),
          T(decode_conversion_in_attention), T(final_norm_in_lm_head), T(decode_qkv_of_two_types),
          T(qwen35_launches_folded), T(qwen35_decode_folds),
          T(qwen35_prompt_deltanet_staged), T(qwen35_prompt_deltanet_chunked),
          T(prompt_k_exact_on_warpgroups),
          T(attention_heads_of_256),
          T(decode_rope_in_products), T(decode_q4k_on_tensor_cores), T(prompt_f16_on_warpgroups),
          T(prompt_dq_on_warpgroups),
          T(long_context_f16_cache), T(device_candidates), T(generate_queued),
          T(shard_allreduce_through_nccl),
          T(model_over_gpus))
