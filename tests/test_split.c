/* The tensor-parallel split plan (src/gpu/split.c) on the golden fixtures: one GPU holds every
 * byte; on two the split tensors' bytes add up exactly, each GPU holds less than one would and
 * half the KV cache; head counts, the FFN width and quant blocks that do not divide are named;
 * brasa inspect --plan prints it. And the collective library's loader (src/gpu/nccl.c). */
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifndef _WIN32
#include <sys/wait.h>
#endif

#include <math.h>
#include <unistd.h>

#include "core/pool.h"
#include "cpu/cpu.h"
#include "model/model.h"
#include "gguf/gguf.h"
#include "gpu/nccl.h"
#include "quant/quant.h"
#include "gpu/split.h"
#include "session/tp.h"
#include "brasa.h"
#include "test.h"

/* Fixtures that split over two GPUs: 4 heads, 2 KV heads, FFN width 768, Q8_0 blocks of 32. */
static const char *const fits2[] = {"fixtures/llama.Q8_0.gguf", "fixtures/qwen2.Q8_0.gguf",
                                    "fixtures/qwen35.Q8_0.gguf"};
/* The same shapes in K-quants: blocks of 256 do not split a 256- or 768-wide row in two. */
static const char *const kquant[] = {"fixtures/llama.Q4_K_M.gguf", "fixtures/qwen2.Q4_K_M.gguf",
                                     "fixtures/qwen35.Q4_K_M.gguf"};

static struct gguf_file *open_fixture(const char *rel)
{
    const char *path = test_shared_path(rel);
    if (!test_file_exists(path))
        return NULL;
    struct gguf_file *f = NULL;
    struct brasa_err err;
    if (gguf_open(&f, path, &err) != BRASA_OK) {
        CHECKF(0, "%s: %s", rel, err.msg);
        return NULL;
    }
    return f;
}

static uint64_t file_bytes(const struct gguf_file *f)
{
    uint64_t s = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        s += f->tensors[i].nbytes;
    return s;
}

/* One GPU: every byte, every rule holds. */
static void check_one_gpu(const char *rel, const struct gguf_file *f, struct split_plan *p1)
{
    struct brasa_err err;
    REQUIRE(split_plan_make(f, 1, 4096, p1, &err) == BRASA_OK);
    CHECKF(p1->ok, "%s: %s", rel, p1->why);
    CHECKF(p1->weights[0] == file_bytes(f), "%s: %" PRIu64 " of %" PRIu64 " bytes", rel,
           p1->weights[0], file_bytes(f));
    CHECK(p1->total == file_bytes(f));
    CHECK(p1->n_row + p1->n_col + p1->n_rep == (int)f->n_tensors);
    CHECKF(p1->n_row > 0 && p1->n_col > 0 && p1->n_rep > 0, "%s: %d %d %d", rel, p1->n_row,
           p1->n_col, p1->n_rep);
    CHECKF(p1->kv[0] > 0 && p1->n_attn_layers > 0, "%s", rel);
}

TEST(two_gpus_share_the_weights)
{
    int seen = 0;
    for (size_t i = 0; i < sizeof fits2 / sizeof fits2[0]; i++) {
        struct gguf_file *f = open_fixture(fits2[i]);
        if (!f)
            continue;
        seen++;
        struct split_plan p1, p2;
        struct brasa_err err;
        check_one_gpu(fits2[i], f, &p1);
        CHECK(split_plan_make(f, 2, 4096, &p2, &err) == BRASA_OK);
        CHECKF(p2.ok, "%s: %s", fits2[i], p2.why);
        CHECK(p2.replicated == p1.replicated && p2.n_row == p1.n_row && p2.n_col == p1.n_col);
        uint64_t sum = p2.weights[0] + p2.weights[1];
        CHECKF(sum == p1.weights[0] + p1.replicated, "%s: %" PRIu64 " vs %" PRIu64 " + %" PRIu64,
               fits2[i], sum, p1.weights[0], p1.replicated);
        for (int g = 0; g < 2; g++) {
            CHECKF(p2.weights[g] < p1.weights[0], "%s: gpu %d", fits2[i], g);
            CHECKF(p2.kv[g] * 2 == p1.kv[0], "%s: kv %" PRIu64 " vs %" PRIu64, fits2[i], p2.kv[g],
                   p1.kv[0]);
        }
        /* 2 KV heads over 4 GPUs: named */
        struct split_plan p4;
        CHECK(split_plan_make(f, 4, 4096, &p4, &err) == BRASA_OK);
        CHECKF(!p4.ok && strstr(p4.why, "KV heads") && strstr(p4.why, "head_count_kv = 2"),
               "%s: %s", fits2[i], p4.why);
        /* 4 heads over 3 GPUs */
        CHECK(split_plan_make(f, 3, 4096, &p4, &err) == BRASA_OK);
        CHECKF(!p4.ok && strstr(p4.why, "attention heads"), "%s: %s", fits2[i], p4.why);
        /* bad counts are errors */
        CHECK(split_plan_make(f, 0, 4096, &p4, &err) == BRASA_EINVAL && strstr(err.msg, "1..8"));
        CHECK(split_plan_make(f, 9, 4096, &p4, &err) == BRASA_EINVAL);
        CHECK(split_plan_make(f, 2, 0, &p4, &err) == BRASA_EINVAL);
        gguf_close(f);
    }
    if (!seen)
        SKIP("fixtures absent");
}

TEST(kv_cache_counts_attention_layers)
{
    /* qwen35: of 3 layers only the last has attention; 2 KV heads of 64 (K) + 64 (V), F16 */
    struct gguf_file *f = open_fixture("fixtures/qwen35.Q8_0.gguf");
    if (!f)
        SKIP("fixtures absent");
    struct split_plan p;
    struct brasa_err err;
    CHECK(split_plan_make(f, 1, 512, &p, &err) == BRASA_OK);
    CHECKF(p.n_attn_layers == 1, "%d", p.n_attn_layers);
    CHECKF(p.kv[0] == 1ull * 512 * 2 * (64 + 64) * 2, "%" PRIu64, p.kv[0]);
    gguf_close(f);
    f = open_fixture("fixtures/llama.Q8_0.gguf");
    if (!f)
        return;
    CHECK(split_plan_make(f, 2, 512, &p, &err) == BRASA_OK);
    CHECKF(p.n_attn_layers == 2 && p.kv[1] == 2ull * 512 * 1 * (64 + 64) * 2, "%d %" PRIu64,
           p.n_attn_layers, p.kv[1]);
    gguf_close(f);
}

TEST(kquant_blocks_must_not_be_cut)
{
    int seen = 0;
    for (size_t i = 0; i < sizeof kquant / sizeof kquant[0]; i++) {
        struct gguf_file *f = open_fixture(kquant[i]);
        if (!f)
            continue;
        seen++;
        struct split_plan p1, p2;
        struct brasa_err err;
        check_one_gpu(kquant[i], f, &p1);
        /* the column split of a 256-wide Q4_K row over two GPUs would cut its blocks in half */
        CHECK(split_plan_make(f, 2, 4096, &p2, &err) == BRASA_OK);
        CHECKF(!p2.ok && strstr(p2.why, "whole number") && strstr(p2.why, "blocks of 256"),
               "%s: %s", kquant[i], p2.why);
        gguf_close(f);
    }
    if (!seen)
        SKIP("fixtures absent");
}

TEST(inspect_plan_prints_each_gpu)
{
#ifdef _WIN32
    SKIP("runs brasa through a POSIX shell");
#else
    const char *bin = test_brasa_bin();
    char path[512];
    snprintf(path, sizeof path, "%s", test_shared_path("fixtures/qwen2.Q8_0.gguf"));
    if (!test_file_exists(path))
        SKIP("fixtures absent");
    if (!test_file_exists(bin))
        SKIP("brasa binary not built");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' inspect '%s' --plan --gpus 2 -c 1024 2>&1", bin, path);
    FILE *p = popen(cmd, "r");
    REQUIRE(p != NULL);
    char out[8192];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    CHECKF(st == 0, "status %d: %s", st, out);
    CHECKF(strstr(out, "gpu 0: weights") && strstr(out, "gpu 1: weights") && !strstr(out, "gpu 2"),
           "%s", out);
    CHECKF(strstr(out, "row-split") && strstr(out, "column-split") && strstr(out, "replicated"),
           "%s", out);
    /* a GPU count outside 1..8 is a usage error */
    snprintf(cmd, sizeof cmd, "'%s' inspect '%s' --plan --gpus 9 >/dev/null 2>&1", bin, path);
    st = system(cmd);
    CHECKF(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2, "status %d", st);
#endif
}

TEST(nccl_loads_or_says_what_is_missing)
{
    struct nccl n;
    struct brasa_err err;
    brasa_status st = nccl_load(&n, &err);
    if (st != BRASA_OK) {
        CHECKF(st == BRASA_ENOTFOUND || st == BRASA_EDEVICE, "%d", st);
        CHECKF(strstr(err.msg, "NCCL") != NULL, "%s", err.msg);
        CHECK(n.lib == NULL);
    } else {
        /* installed here: the version call answered, e.g. 22105 for 2.21.5 */
        CHECKF(n.version >= 20000, "version %d", n.version);
        int v = 0;
        CHECK(n.GetVersion(&v) == ncclSuccess && v == n.version);
        CHECK(n.GetErrorString(ncclSuccess) != NULL);
    }
    nccl_unload(&n);
    CHECK(n.lib == NULL);
    nccl_unload(&n); /* twice is harmless */
    const char *e = getenv("NCCL_NVLS_ENABLE");
    CHECKF(e != NULL, "NVLink multicast setting not made");
    /* a BRASA_NCCL path that is not a library: an error that names it, nothing loaded */
    setenv("BRASA_NCCL", "/nonexistent/libnccl.so.2", 1);
    st = nccl_load(&n, &err);
    unsetenv("BRASA_NCCL");
    CHECK(st == BRASA_ENOTFOUND);
    CHECKF(strstr(err.msg, "BRASA_NCCL=/nonexistent/libnccl.so.2") != NULL, "%s", err.msg);
    CHECK(n.lib == NULL);
}

/* The shards' sampler candidates (each a slice of the vocabulary, best first) merged: the k
 * best over all, ties to the lower global id, fewer when the lists run out. And a model split
 * over GPUs says why it cannot be where it cannot (no NCCL, no GPU, heads that do not divide,
 * a count out of range), with no model made. */
TEST(shards_candidates_merge)
{
    const int32_t a[] = {5, 2, 9}, b[] = {1, 0};
    const float la[] = {3.0f, 1.0f, 0.5f}, lb[] = {3.0f, 2.0f};
    const int32_t *ids[] = {a, b};
    const float *lg[] = {la, lb};
    const int nj[] = {3, 2}, off[] = {0, 10};
    int32_t oid[5];
    float olg[5];
    CHECK(tp_merge_top(2, ids, lg, nj, off, 4, oid, olg) == 4);
    CHECKF(oid[0] == 5 && oid[1] == 11 && oid[2] == 10 && oid[3] == 2, "%d %d %d %d", oid[0],
           oid[1], oid[2], oid[3]);
    CHECK(olg[0] == 3.0f && olg[1] == 3.0f && olg[2] == 2.0f && olg[3] == 1.0f);
    CHECK(tp_merge_top(2, ids, lg, nj, off, 5, oid, olg) == 5 && oid[4] == 9);
    const int none[] = {0, 0};
    CHECK(tp_merge_top(2, ids, lg, none, off, 3, oid, olg) == 0);

    const char *path = test_shared_path("fixtures/llama.Q8_0.gguf");
    if (!test_file_exists(path))
        SKIP("fixtures absent");
    struct brasa_model *m = NULL;
    struct brasa_err err = {{0}};
    struct brasa_model_opts mo = {.n_threads = 1, .n_gpus = 3};
    CHECK(brasa_model_load(path, &mo, &m, &err) != BRASA_OK && m == NULL);
    CHECKF(strstr(err.msg, "NCCL") || strstr(err.msg, "GPU") || strstr(err.msg, "split"), "%s",
           err.msg);
    mo.n_gpus = -1;
    CHECK(brasa_model_load(path, &mo, &m, &err) == BRASA_EINVAL && m == NULL);
}

/* The processes of a model split across hosts share NCCL's id through a file: rank 0's writes
 * it whole (renamed into place), the others wait for it; a missing file, a path that cannot be
 * written and a world that does not hold the ranks are errors that say so. */
static int fake_ids;
static ncclResult_t fake_unique_id(ncclUniqueId *id)
{
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++)
        id->internal[i] = (char)(i * 7 + fake_ids);
    fake_ids++;
    return ncclSuccess;
}
static const char *fake_error(ncclResult_t r) { return r ? "failed" : "no error"; }

TEST(processes_share_the_nccl_id)
{
    struct nccl nc;
    memset(&nc, 0, sizeof nc);
    nc.GetUniqueId = fake_unique_id;
    nc.GetErrorString = fake_error;
    char path[512];
    const char *dir = getenv("TMPDIR");
    snprintf(path, sizeof path, "%s/brasa-test-ncclid-%d", dir && *dir ? dir : "/tmp",
             (int)getpid());
    remove(path);
    struct brasa_err err = {{0}};
    ncclUniqueId a, b;
    memset(&b, 0, sizeof b);
    /* a process that is not rank 0's, before rank 0's has written it: waits, then says so */
    CHECK(tp_id_exchange(&nc, path, false, 0.2, &b, &err) == BRASA_ETIMEOUT);
    CHECKF(strstr(err.msg, path) && strstr(err.msg, "rank 0"), "%s", err.msg);
    CHECK(tp_id_exchange(&nc, path, true, 1, &a, &err) == BRASA_OK);
    CHECK(tp_id_exchange(&nc, path, false, 1, &b, &err) == BRASA_OK);
    CHECK(memcmp(&a, &b, sizeof a) == 0);
    /* rank 0's next run finds the old file: it stops rather than let the others read it */
    CHECK(tp_id_exchange(&nc, path, true, 1, &a, &err) == BRASA_EINVAL);
    CHECKF(strstr(err.msg, "exists") != NULL, "%s", err.msg);
    remove(path);
    CHECK(tp_id_exchange(&nc, "/nonexistent-dir/id", true, 1, &a, &err) == BRASA_EIO);
    CHECK(tp_id_exchange(&nc, NULL, false, 1, &a, &err) == BRASA_EINVAL);
    CHECKF(strstr(err.msg, "--tp-id") != NULL, "%s", err.msg);
    struct mdl m;
    memset(&m, 0, sizeof m);
    struct tp_model *t = NULL;
    struct tp_world w = {.world = 2, .rank0 = 2};
    CHECK(tp_model_open(&t, &m, 1, &w, NULL, &err) == BRASA_EINVAL && t == NULL);
    w = (struct tp_world){.world = 1};
    CHECK(tp_model_open(&t, &m, 2, &w, NULL, &err) == BRASA_EINVAL && t == NULL);
}

/* y = W x for a fixture weight, on the CPU kernels */
static void mm(struct pool *pl, uint32_t t, const void *w, int64_t rows, int64_t k,
               const float *x, float *y)
{
    void *scratch = malloc(quant_matmul_scratch_bytes(t, k, 1) + 64);
    quant_matmul(pl, t, w, rows, k, x, 1, y, scratch);
    free(scratch);
}

/* The split math, N shards in one process on the CPU: an FFN (gate and up split by rows, down
 * by columns, the shards' outputs summed as the all-reduce would) and the attention output
 * projection (split by columns) reproduce the one-device results. */
TEST(shards_reproduce_one_device)
{
    const char *path = test_shared_path("fixtures/qwen2.Q8_0.gguf");
    if (!test_file_exists(path))
        SKIP("fixtures absent");
    struct gguf_file *f;
    struct brasa_err err = {{0}};
    REQUIRE(gguf_open(&f, path, &err) == BRASA_OK);
    struct pool *pl = NULL;
    REQUIRE(pool_new(&pl, 2, &err) == BRASA_OK);
    const struct gguf_tensor *gt = gguf_find_tensor(f, "blk.0.ffn_gate.weight"),
                             *ut = gguf_find_tensor(f, "blk.0.ffn_up.weight"),
                             *dt = gguf_find_tensor(f, "blk.0.ffn_down.weight"),
                             *ot = gguf_find_tensor(f, "blk.0.attn_output.weight");
    REQUIRE(gt && ut && dt && ot);
    int64_t d = gt->ne[0], ff = gt->ne[1];
    REQUIRE(dt->ne[0] == ff && dt->ne[1] == d && ot->ne[0] == d);
    float *x = malloc((size_t)(d + ff) * sizeof *x), *g = malloc((size_t)ff * sizeof *g),
          *u = malloc((size_t)ff * sizeof *u), *y1 = malloc((size_t)d * sizeof *y1),
          *yn = malloc((size_t)d * sizeof *yn), *ys = malloc((size_t)d * sizeof *ys);
    void *sh = malloc((size_t)(gt->nbytes + dt->nbytes + ot->nbytes));
    REQUIRE(x && g && u && y1 && yn && ys && sh);
    unsigned r = 99;
    for (int64_t i = 0; i < d + ff; i++)
        x[i] = (float)((r = r * 1103515245u + 12345u) >> 8) / 16777216.0f - 0.5f;
    /* one device */
    mm(pl, gt->type, gt->data, ff, d, x, g);
    mm(pl, ut->type, ut->data, ff, d, x, u);
    for (int64_t i = 0; i < ff; i++)
        g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
    mm(pl, dt->type, dt->data, d, ff, g, y1);
    for (int n = 2; n <= 4; n += 2) {
        int64_t fs = ff / n;
        memset(yn, 0, (size_t)d * sizeof *yn);
        for (int s = 0; s < n; s++) {
            int64_t f0 = s * fs;
            REQUIRE(split_slice(gt->type, gt->data, d, f0, f0 + fs, 0, d, sh, &err) == BRASA_OK);
            mm(pl, gt->type, sh, fs, d, x, g + f0);
            REQUIRE(split_slice(ut->type, ut->data, d, f0, f0 + fs, 0, d, sh, &err) == BRASA_OK);
            mm(pl, ut->type, sh, fs, d, x, u + f0);
            for (int64_t i = f0; i < f0 + fs; i++)
                g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
            REQUIRE(split_slice(dt->type, dt->data, ff, 0, d, f0, f0 + fs, sh, &err) == BRASA_OK);
            mm(pl, dt->type, sh, d, fs, g + f0, ys);
            for (int64_t i = 0; i < d; i++)
                yn[i] += ys[i];
        }
        double md = 0, mx = 0;
        for (int64_t i = 0; i < d; i++) {
            md = fmax(md, fabs((double)yn[i] - y1[i]));
            mx = fmax(mx, fabs((double)y1[i]));
        }
        CHECKF(md <= 1e-3 * mx, "FFN over %d shards: %.3g relative", n, md / mx);
        printf("  FFN over %d shards: largest difference %.2e of the largest output\n", n, md / mx);
    }
    /* attention output, column split over 2 */
    int64_t ko = ot->ne[0], ro = ot->ne[1];
    mm(pl, ot->type, ot->data, ro, ko, x, y1);
    memset(yn, 0, (size_t)ro * sizeof *yn);
    for (int s = 0; s < 2; s++) {
        REQUIRE(split_slice(ot->type, ot->data, ko, 0, ro, s * ko / 2, (s + 1) * ko / 2, sh, &err) ==
                BRASA_OK);
        mm(pl, ot->type, sh, ro, ko / 2, x + s * ko / 2, ys);
        for (int64_t i = 0; i < ro; i++)
            yn[i] += ys[i];
    }
    double md = 0, mx = 0;
    for (int64_t i = 0; i < ro; i++) {
        md = fmax(md, fabs((double)yn[i] - y1[i]));
        mx = fmax(mx, fabs((double)y1[i]));
    }
    CHECKF(md <= 1e-3 * mx, "attention output over 2 shards: %.3g relative", md / mx);
    /* a column range that cuts a block is refused with a message */
    CHECK(split_slice(ot->type, ot->data, ko, 0, 1, 0, 17, sh, &err) == BRASA_EINVAL);
    CHECK(strstr(err.msg, "whole blocks") != NULL);
    free(x), free(g), free(u), free(y1), free(yn), free(ys), free(sh);
    pool_free(pl);
    gguf_close(f);
}

/* A model (or its shards) with F32 KV caches (and DeltaNet states) on the CPU, and its prompt
 * and decode graphs. */
struct tp_run {
    struct mdl m;
    void *mem;                 /* a shard's weights */
    struct mdl_cache c;
    float *kv;
    struct graph g[2];         /* prompt, decode */
    struct cpu *cpu;
};

static brasa_status tp_open(struct tp_run *t, struct pool *pl, int n_prompt, int n_ctx,
                            struct brasa_err *err)
{
    if (test_cache_new(&t->m, n_ctx, &t->c, &t->kv))
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    brasa_status st;
    if ((st = mdl_build(&t->m, &t->c, n_prompt, false, &t->g[0], err)) ||
        (st = mdl_build(&t->m, &t->c, 1, false, &t->g[1], err)) ||
        (st = cpu_new(&t->cpu, pl, err)) || (st = cpu_prepare(t->cpu, &t->g[0], n_ctx, err)) ||
        (st = cpu_prepare(t->cpu, &t->g[1], n_ctx, err)))
        return st;
    return BRASA_OK;
}

static void tp_close(struct tp_run *t)
{
    cpu_free(t->cpu);
    graph_free(&t->g[0]);
    graph_free(&t->g[1]);
    test_cache_free(&t->c, t->kv);
    mdl_free(&t->m);
    free(t->mem);
}

/* Runs graph gi of n shards side by side, each up to its next ALLREDUCE (the shards' graphs
 * differ around them: the first shard adds the residual), where the shards' parts are added up
 * (in shard order) and every shard goes on with the sum; then gathers their slices of the
 * logits into logits. */
static brasa_status tp_step(struct tp_run *sh, int n, int gi, const struct graph_run *r,
                            float *logits, struct brasa_err *err)
{
    int i0[SPLIT_MAX_GPUS] = {0};
    brasa_status st;
    for (bool more = true; more;) {
        int at[SPLIT_MAX_GPUS];
        for (int s = 0; s < n; s++) {
            const struct graph *g = &sh[s].g[gi];
            int i1 = i0[s];
            while (i1 < g->n && g->nodes[i1].op != GOP_ALLREDUCE)
                i1++;
            int e = i1 < g->n ? i1 + 1 : i1;
            if ((st = cpu_run_range(sh[s].cpu, g, r, i0[s], e, err)) != BRASA_OK)
                return st;
            at[s] = i1 < g->n ? i1 : -1;
            i0[s] = e;
            if ((at[s] < 0) != (at[0] < 0))
                return brasa_fail(err, BRASA_EINVAL, "shards with different all-reduces");
        }
        more = at[0] >= 0;
        if (more) { /* (the arena is the CPU backend's; the sum is written in place) */
            const struct graph *g0 = &sh[0].g[gi];
            size_t ne = (size_t)(g0->nodes[at[0]].ne[0] * g0->nodes[at[0]].ne[1]);
            float *sum = (float *)cpu_node_data(sh[0].cpu, g0, at[0]);
            for (int s = 1; s < n; s++) {
                const float *p = cpu_node_data(sh[s].cpu, &sh[s].g[gi], at[s]);
                for (size_t j = 0; j < ne; j++)
                    sum[j] += p[j];
            }
            for (int s = 1; s < n; s++)
                memcpy((float *)cpu_node_data(sh[s].cpu, &sh[s].g[gi], at[s]), sum,
                       ne * sizeof *sum);
        }
    }
    for (int s = 0, off = 0; s < n; s++) {
        const struct graph *g = &sh[s].g[gi];
        memcpy(logits + off, cpu_node_data(sh[s].cpu, g, g->out),
               (size_t)sh[s].m.hp.n_vocab * sizeof *logits);
        off += sh[s].m.hp.n_vocab;
    }
    return BRASA_OK;
}

/* Bytes of every weight a model (or shard) reads: the plan's count for one GPU. */
static uint64_t model_bytes(const struct mdl *m)
{
    uint64_t b = m->token_embd.nbytes + m->output_norm.nbytes +
                 (m->output.data != m->token_embd.data ? m->output.nbytes : 0);
    for (int il = 0; il < m->hp.n_layer; il++) {
        const struct mdl_layer *L = &m->layers[il];
        const struct mdl_w *w[] = {&L->attn_norm, &L->wq,      &L->wk,       &L->wv,
                                   &L->wo,        &L->bq,      &L->bk,       &L->bv,
                                   &L->q_norm,    &L->k_norm,  &L->ffn_norm, &L->ffn_gate,
                                   &L->ffn_up,    &L->ffn_down, &L->wqkv,    &L->wz,
                                   &L->conv1d,    &L->dt_bias, &L->ssm_a,    &L->w_beta,
                                   &L->w_alpha,   &L->ssm_norm, &L->ssm_out};
        for (size_t i = 0; i < sizeof w / sizeof *w; i++)
            b += w[i]->data ? w[i]->nbytes : 0;
    }
    return b;
}

/* The whole model and its n shards (each holding its heads, FFN rows and vocabulary slice,
 * summed where the all-reduce would) on a 6-token prompt and 8 greedy steps: the logits within
 * 1e-3 of the largest (the bound for several devices), the same greedy tokens. */
static void shards_vs_whole(const char *rel, int n, struct pool *pl)
{
    const char *path = test_shared_path(rel);
    if (!test_file_exists(path))
        return;
    struct gguf_file *f = NULL;
    struct brasa_err err = {{0}};
    REQUIRE(gguf_open(&f, path, &err) == BRASA_OK);
    struct tp_run whole, sh[2];
    memset(&whole, 0, sizeof whole);
    memset(sh, 0, sizeof sh);
    REQUIRE(n <= 2);
    enum { NP = 6, NS = 8, CTX = 32 };
    brasa_status st = mdl_load(&whole.m, f, &err);
    if (st == BRASA_OK)
        st = tp_open(&whole, pl, NP, CTX, &err);
    for (int s = 0; st == BRASA_OK && s < n; s++)
        if ((st = mdl_shard(&whole.m, s, n, &sh[s].m, &sh[s].mem, &err)) == BRASA_OK)
            st = tp_open(&sh[s], pl, NP, CTX, &err);
    CHECKF(st == BRASA_OK, "%s: %s", rel, err.msg);
    /* what `brasa inspect --plan` says each GPU holds is what each shard holds */
    struct split_plan plan;
    REQUIRE(split_plan_make(f, n, CTX, &plan, &err) == BRASA_OK && plan.ok);
    CHECKF(model_bytes(&whole.m) == plan.total, "%s: the model reads %" PRIu64 " of %" PRIu64
           " bytes", rel, model_bytes(&whole.m), plan.total);
    for (int s = 0; st == BRASA_OK && s < n; s++)
        CHECKF(model_bytes(&sh[s].m) == plan.weights[s], "%s: shard %d holds %" PRIu64
               " bytes, the plan says %" PRIu64, rel, s, model_bytes(&sh[s].m), plan.weights[s]);
    if (n == 2 && st == BRASA_OK) { /* row slices read in place, column slices copied */
        const struct mdl_w *w = &whole.m.layers[0].ffn_gate, *w1 = &sh[1].m.layers[0].ffn_gate;
        CHECKF(w1->data == (const uint8_t *)w->data +
                               qtype_row_bytes(w->type, w->ne[0]) * (size_t)(w->ne[1] / 2),
               "%s: the second half of ffn_gate was copied", rel);
        const uint8_t *d = whole.m.layers[0].ffn_down.data, *d1 = sh[1].m.layers[0].ffn_down.data;
        CHECKF(d1 < d || d1 >= d + whole.m.layers[0].ffn_down.nbytes,
               "%s: ffn_down's columns read in place", rel);
    }
    int V = whole.m.hp.n_vocab;
    float *lt = malloc((size_t)V * sizeof *lt);
    int32_t toks[NP] = {1, 17, 700, 42, 1000, 99}; /* (both halves of the vocabulary) */
    double worst = 0;
    int same = 1;
    for (int k = 0; st == BRASA_OK && k <= NS; k++) {
        struct graph_run r = {.pos0 = k ? NP + k - 1 : 0, .tokens = toks};
        int gi = k ? 1 : 0;
        if ((st = cpu_run(whole.cpu, &whole.g[gi], &r, &err)) != BRASA_OK ||
            (st = tp_step(sh, n, gi, &r, lt, &err)) != BRASA_OK)
            break;
        const float *lw = cpu_node_data(whole.cpu, &whole.g[gi], whole.g[gi].out);
        double md = 0, mx = 0;
        for (int v = 0; v < V; v++) {
            md = fmax(md, fabs((double)lt[v] - lw[v]));
            mx = fmax(mx, fabs((double)lw[v]));
        }
        worst = fmax(worst, md / mx);
        same &= test_argmax(lw, V) == test_argmax(lt, V);
        toks[0] = test_argmax(lw, V); /* the next decode step's token */
    }
    CHECKF(st == BRASA_OK, "%s: %s", rel, err.msg);
    CHECKF(worst <= 1e-3, "%s over %d shards: logits %.3g apart", rel, n, worst);
    CHECKF(same, "%s over %d shards: another greedy token", rel, n);
    printf("  %-28s %d shards: logits within %.2e of the largest, greedy tokens %s\n", rel, n,
           worst, same ? "the same" : "DIFFER");
    free(lt);
    for (int s = 0; s < n; s++)
        tp_close(&sh[s]);
    tp_close(&whole);
    gguf_close(f);
}

/* The forward pass of a model split over shards, run side by side in one process on the CPU
 * (the split math of several GPUs without them): the fixtures of the five families (qwen35's
 * DeltaNet layers split by K head and the V heads that read it), float and block-32 weights
 * (K-quant blocks of 256 do not split these widths). Splits that do not divide are refused. */
TEST(sharded_forward_matches_whole_model)
{
    if (!test_file_exists(test_shared_path("fixtures/llama.F32.gguf")))
        SKIP("fixtures absent");
    struct pool *pl = NULL;
    struct brasa_err err = {{0}};
    REQUIRE(pool_new(&pl, 2, &err) == BRASA_OK);
    /* (F16 weights multiply F16 activations, whose partial sums round on a coarser grid:
     * llama 4.4e-4 of the largest logit; qwen2 and qwen35 come nearer the bound of 1e-3) */
    static const char *const files[] = {
        "fixtures/llama.F32.gguf",   "fixtures/llama.F16.gguf",   "fixtures/llama.Q8_0.gguf",
        "fixtures/llama.Q4_0.gguf",  "fixtures/qwen2.Q8_0.gguf",  "fixtures/granite.Q8_0.gguf",
        "fixtures/qwen3.Q8_0.gguf",  "fixtures/qwen35.Q8_0.gguf", "fixtures/qwen35.Q4_0.gguf"};
    for (size_t i = 0; i < sizeof files / sizeof *files; i++)
        shards_vs_whole(files[i], 2, pl);
    /* a shard of one: the whole model with its all-reduces (what test_gpu runs through NCCL),
     * which its graphs hold */
    shards_vs_whole("fixtures/qwen35.Q8_0.gguf", 1, pl);
    struct gguf_file *f = open_fixture("fixtures/qwen35.Q8_0.gguf");
    if (f) {
        struct mdl m = {0}, s = {0};
        void *mem = NULL;
        struct mdl_cache c;
        float *kv = NULL;
        struct graph g = {0};
        REQUIRE(mdl_load(&m, f, &err) == BRASA_OK);
        REQUIRE(mdl_shard(&m, 0, 1, &s, &mem, &err) == BRASA_OK);
        REQUIRE(test_cache_new(&s, 8, &c, &kv) == 0);
        REQUIRE(mdl_build(&s, &c, 1, false, &g, &err) == BRASA_OK);
        int nar = 0;
        for (int i = 0; i < g.n; i++)
            nar += g.nodes[i].op == GOP_ALLREDUCE;
        CHECKF(nar == 1 + 2 * m.hp.n_layer, "%d all-reduces in %d layers", nar, m.hp.n_layer);
        graph_free(&g);
        test_cache_free(&c, kv);
        mdl_free(&s);
        free(mem);
        CHECK(mdl_shard(&m, 0, 4, &s, &mem, &err) == BRASA_EUNSUPPORTED); /* 2 KV heads */
        CHECK(strstr(err.msg, "do not split over 4") != NULL);
        CHECK(mdl_shard(&m, 2, 2, &s, &mem, &err) == BRASA_EINVAL);
        mdl_free(&m);
        gguf_close(f);
    }
    pool_free(pl);
}

/* --gpus as the tools take it (brasa_gpus_parse), and the ordinals brasa_model_load accepts */
TEST(gpus_option_counts_or_lists)
{
    struct brasa_err err = {{0}};
    int n = -1, ids[BRASA_MAX_GPUS];
    CHECK(brasa_gpus_parse("4", &n, ids, &err) == BRASA_OK && n == 4 && ids[0] == -1);
    CHECK(brasa_gpus_parse("0", &n, ids, &err) == BRASA_OK && n == 0);
    CHECK(brasa_gpus_parse("2,3", &n, ids, &err) == BRASA_OK && n == 2 && ids[0] == 2 &&
          ids[1] == 3);
    CHECK(brasa_gpus_parse("5,", &n, ids, &err) == BRASA_OK && n == 1 && ids[0] == 5);
    CHECK(brasa_gpus_parse("7,0,1", &n, ids, &err) == BRASA_OK && n == 3 && ids[0] == 7 &&
          ids[2] == 1);
    static const char *const bad[] = {"", "9", "-1", "2,2", "1,x", "1,,2", "64,", "x",
                                      "0,1,2,3,4,5,6,7,8", "3 "};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        err.msg[0] = 0;
        CHECKF(brasa_gpus_parse(bad[i], &n, ids, &err) == BRASA_EINVAL && err.msg[0],
               "'%s' taken", bad[i]);
    }
    brasa_gpus_parse("2,2", &n, ids, &err);
    CHECK(strstr(err.msg, "GPU 2 twice") != NULL);
    /* the library checks a caller's list too, before it reads the file */
    int twice[2] = {1, 1};
    struct brasa_model_opts mo = {.n_gpus = 2, .gpu_ids = twice};
    struct brasa_model *m = NULL;
    CHECK(brasa_model_load("/nonexistent.gguf", &mo, &m, &err) == BRASA_EINVAL && !m);
    CHECK(strstr(err.msg, "GPU ordinal 1") != NULL);
}

TEST_MAIN(T(shards_reproduce_one_device), T(sharded_forward_matches_whole_model), T(two_gpus_share_the_weights), T(kv_cache_counts_attention_layers),
          T(kquant_blocks_must_not_be_cut), T(inspect_plan_prints_each_gpu),
          T(nccl_loads_or_says_what_is_missing), T(shards_candidates_merge),
          T(processes_share_the_nccl_id), T(gpus_option_counts_or_lists))
