/* GPU kernel benchmark: the device-to-device copy bandwidth (the roofline), what a dependent
 * launch costs (chains of launches that do next to nothing), then per weight
 * format the bandwidth of a chain of matrix-vector products (one decode-like step over
 * several hundred MB of weights, so nothing stays in L2), with the graph executor (one CUDA
 * graph per step) and the eager one (a launch per kernel), and for a batch of 8 and 64
 * columns. Prints a table; needs a GPU (exits 0 with a message without one).
 *
 *   build/bench/bench_gpu [--quick | --launch]   (--launch: only the dependent-launch chains) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu/gpu.h"
#include "quant/quant.h"

static unsigned long long rs = 0x9e3779b97f4a7c15ull;
static float rndf(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (float)((rs >> 11) * (1.0 / 9007199254740992.0)) * 2 - 1;
}

struct chain {
    struct graph g;
    double bytes;
};

/* Random blocks with sane scales (fp16 scale fields set to small values): a product's speed
 * does not depend on the values, only NaN/Inf must be avoided. */
static void *rand_weights(uint32_t t, int rows, int k)
{
    size_t rb = qtype_row_bytes(t, k), n = rb * (size_t)rows;
    uint8_t *w = malloc(n);
    for (size_t i = 0; i < n; i += 4) {
        float f = rndf();
        uint32_t u;
        memcpy(&u, &f, 4);
        u ^= (uint32_t)(rs >> 13);
        memcpy(w + i, &u, n - i < 4 ? n - i : 4);
    }
    const struct qtype_info *qi = qtype_get(t);
    size_t bb = qi->block_bytes, nb = n / bb;
    uint16_t h = f32_to_fp16(0.001f);
    for (size_t b = 0; b < nb; b++) {
        uint8_t *blk = w + b * bb;
        if (t == GGML_TYPE_F16 || t == GGML_TYPE_BF16) {
            uint16_t v = t == GGML_TYPE_F16 ? f32_to_fp16(rndf() * 0.02f) : f32_to_bf16(rndf() * 0.02f);
            memcpy(blk, &v, 2);
        } else if (t == GGML_TYPE_Q6_K) {
            memcpy(blk + 208, &h, 2);
        } else {
            memcpy(blk, &h, 2);
            if (t == GGML_TYPE_Q4_K || t == GGML_TYPE_Q5_K)
                memcpy(blk + 2, &h, 2);
        }
    }
    return w;
}

/* A chain's start: x = emb[tok] (dim floats a token, emb of 16 rows); returns x's node, -1 on
 * failure */
static int chain_start(struct chain *c, int dim, int n_tok, float *emb)
{
    memset(c, 0, sizeof *c);
    struct brasa_err err;
    if (graph_init(&c->g, n_tok, &err) != BRASA_OK)
        return -1;
    int in = graph_add(&c->g, GOP_INPUT, "tokens", -1, -1, -1, -1, n_tok, 1);
    c->g.nodes[in].p.i[0] = GIN_TOKENS;
    int e = graph_add(&c->g, GOP_WEIGHT, "emb", -1, -1, -1, -1, dim, 16);
    c->g.nodes[e].data = emb;
    c->g.nodes[e].type = 0;
    return graph_add(&c->g, GOP_GET_ROWS, "x0", e, in, -1, -1, dim, n_tok);
}

/* A chain's end: x is the output; plans the graph (1 if it is sound) */
static int chain_end(struct chain *c, int x, int n_tok)
{
    struct brasa_err err;
    c->g.out = x;
    c->g.n_out = n_tok;
    return graph_ok(&c->g) && graph_plan(&c->g, &err) == BRASA_OK;
}

/* x = emb[tok]; then nl products of type t over the weights w[0..nl): product l has dims
 * dims[l % 2] x dims[(l + 1) % 2] (k x rows), so a square chain has dims[0] == dims[1]. */
static int build(struct chain *c, uint32_t t, const int dims[2], int nl, int n_tok, void **w,
                 float *emb)
{
    int x = chain_start(c, dims[0], n_tok, emb);
    if (x < 0)
        return 0;
    for (int l = 0; l < nl; l++) {
        int k = dims[l % 2], rows = dims[(l + 1) % 2];
        c->bytes += (double)qtype_row_bytes(t, k) * rows;
        int wn = graph_addf(&c->g, GOP_WEIGHT, -1, -1, -1, -1, k, rows, "w%d", l);
        c->g.nodes[wn].data = w[l];
        c->g.nodes[wn].type = t;
        x = graph_addf(&c->g, GOP_MATMUL, x, wn, -1, -1, rows, n_tok, "mm%d", l);
    }
    return chain_end(c, x, n_tok);
}

/* x = emb[tok]; then nl dependent scalings x = x * 1 of dim floats: a chain of launches that
 * each do almost nothing (what a dependent launch itself costs). */
static int build_scales(struct chain *c, int dim, int nl, float *emb)
{
    int x = chain_start(c, dim, 1, emb);
    if (x < 0)
        return 0;
    for (int l = 0; l < nl; l++) {
        x = graph_addf(&c->g, GOP_SCALE, x, -1, -1, -1, dim, 1, "s%d", l);
        c->g.nodes[x].p.f[0] = 1.0f;
    }
    return chain_end(c, x, 1);
}

static double time_runs(struct gpu_sess *s, struct chain *c, bool eager, int reps)
{
    struct brasa_err err;
    int32_t tok[64] = {0};
    struct graph_run r = {.pos0 = 0, .tokens = tok};
    double best = 1e30;
    for (int i = 0; i < reps + 2; i++) {
        brasa_status st = eager ? gpu_sess_run_eager(s, &c->g, &r, &err)
                                : gpu_sess_run(s, &c->g, &r, &err);
        if (st != BRASA_OK) {
            fprintf(stderr, "bench_gpu: %s\n", err.msg);
            return -1;
        }
        double ms = gpu_sess_last_ms(s);
        if (i >= 2 && ms < best)
            best = ms;
    }
    return best;
}

/* A session created with the switches "NAME=VALUE ..." set (the backend reads them when a
 * session starts); NULL with a message on failure. */
static struct gpu_sess *sess_with(struct gpu *g, const char *switches)
{
    char buf[256], *names[8];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", switches);
    for (char *t = strtok(buf, " "); t && n < 8; t = strtok(NULL, " ")) {
        char *eq = strchr(t, '=');
        if (!eq)
            continue;
        *eq = 0;
        setenv(t, eq + 1, 1);
        names[n++] = t;
    }
    struct gpu_sess *s = NULL;
    struct brasa_err err;
    if (gpu_sess_new(g, &s, &err) != BRASA_OK) {
        printf("bench_gpu: %s\n", err.msg);
        s = NULL;
    }
    for (int i = 0; i < n; i++)
        unsetenv(names[i]);
    return s;
}

/* Plans chain c in session s (a context of 16); 0 with a message on failure. */
static int prepare(struct gpu_sess *s, struct chain *c)
{
    struct brasa_err err;
    if (gpu_sess_prepare(s, &c->g, 16, &err) != BRASA_OK) {
        printf("bench_gpu: %s\n", err.msg);
        return 0;
    }
    return 1;
}

/* One run of chain c in sessions a and b: largest |a - b| / largest |b| over its n outputs
 * (-1 if a run fails). */
static double agreement(struct gpu_sess *a, struct gpu_sess *b, struct chain *c, size_t n)
{
    double worst = -1;
    if (time_runs(a, c, false, 0) < 0)
        return worst;
    float *x = malloc(n * sizeof *x);
    memcpy(x, gpu_sess_output(a, NULL), n * sizeof *x);
    if (time_runs(b, c, false, 0) >= 0) {
        const float *y = gpu_sess_output(b, NULL);
        double mx = 0, md = 0;
        for (size_t i = 0; i < n; i++) {
            mx = fabs(y[i]) > mx ? fabs(y[i]) : mx;
            md = fabs(x[i] - y[i]) > md ? fabs(x[i] - y[i]) : md;
        }
        worst = mx > 0 ? md / mx : md;
    }
    free(x);
    return worst;
}

/* What a dependent launch costs: chains of 256 launches that do next to nothing (a scaling of
 * 1536 floats), and of 256 products of 256 x 256 Q8_0 weights; a failure is reported and the
 * rest of the benchmark goes on. */
static void launch_chains(struct gpu *g)
{
    enum { NL = 256, D = 1536 };
    float *emb = malloc((size_t)D * 16 * 4);
    for (int i = 0; i < D * 16; i++)
        emb[i] = rndf();
    void *w[NL];
    for (int l = 0; l < NL; l++)
        w[l] = rand_weights(GGML_TYPE_Q8_0, 256, 256);
    struct chain ce = {0}, cp = {0};
    const int d256[2] = {256, 256};
    struct gpu_sess *s = NULL, *s1 = NULL;
    if (!build_scales(&ce, D, NL, emb) || !build(&cp, GGML_TYPE_Q8_0, d256, NL, 1, w, emb)) {
        printf("bench_gpu: launch chains: graph build failed\n\n");
    } else if ((s = sess_with(g, "")) && (s1 = sess_with(g, "BRASA_GPU_PDL=0")) &&
               prepare(s, &ce) && prepare(s, &cp) && prepare(s1, &ce) && prepare(s1, &cp)) {
        printf("Dependent launches (chains of %d; us a launch): graph with PDL, graph without, "
               "eager\n\n| chain | graph | no PDL | eager |\n|---|---:|---:|---:|\n", NL);
        struct chain *cs[2] = {&ce, &cp};
        static const char *const cn[2] = {"scale 1536 floats", "product 256 x 256 Q8_0"};
        for (int i = 0; i < 2; i++)
            printf("| %s | %.2f | %.2f | %.2f |\n", cn[i],
                   time_runs(s, cs[i], false, 20) * 1e3 / NL,
                   time_runs(s1, cs[i], false, 20) * 1e3 / NL,
                   time_runs(s, cs[i], true, 5) * 1e3 / NL);
        printf("\n");
    } else {
        printf("bench_gpu: launch chains: no session, or a chain was not planned\n\n");
    }
    fflush(stdout);
    gpu_sess_free(s1);
    gpu_sess_free(s);
    graph_free(&ce.g);
    graph_free(&cp.g);
    free(emb); /* (the weights stay allocated: the backend keys its device copies by address) */
}

int main(int argc, char **argv)
{
    int quick = argc > 1 && !strcmp(argv[1], "--quick");
    struct gpu *g;
    struct brasa_err err;
    struct gpu_opts o = {.verbose = true};
    if (gpu_open(&g, &o, &err) != BRASA_OK) {
        printf("bench_gpu: no GPU (%s)\n", err.msg);
        return 0;
    }
    double bw = 0;
    if (gpu_copy_bandwidth(g, (size_t)1 << 30, &bw, &err) != BRASA_OK) {
        printf("bench_gpu: %s\n", err.msg);
        return 1;
    }
    printf("\n%s: device-to-device copy %.0f GB/s (read + write, 1 GiB)\n\n", gpu_device_name(g), bw);
    static const uint32_t types[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q8_0, GGML_TYPE_Q6_K,
                                     GGML_TYPE_Q5_K, GGML_TYPE_Q4_0, GGML_TYPE_F16,
                                     GGML_TYPE_BF16};
    launch_chains(g);
    if (argc > 1 && !strcmp(argv[1], "--launch"))
        return 0;
    int nl = quick ? 8 : 24;
    printf("Decode products: mvd = the decode kernel (mvd.cu), mv = matvec.cu with one column\n"
           "(BRASA_GPU_MVD=0); no PDL = mvd without programmatic dependent launch\n"
           "(BRASA_GPU_PDL=0); 8 and 64 cols: batches on the default path (the integer kernel below\n"
           "256 tokens), 64 cols mmt: the tensor cores (BRASA_GPU_MMT_MIN=2); check = largest\n"
           "|mvd - mv| / max |mv| over one 4096x4096 product; check 64: the same for 64 columns,\n"
           "tensor cores against matvec.cu.\n\n");
    printf("| type | weights MB | mvd graph us | mvd GB/s | %% of copy | no PDL us | mv graph us | "
           "mv GB/s | mvd eager us | 8 cols us | 64 cols us | 64 cols mmt us | check | check 64 |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t ti = 0; ti < sizeof types / sizeof *types; ti++) {
        struct chain c1, c8, c64, cx, cx64;
        void *w[64];
        int sq[2] = {4096, 4096};
        float *emb = malloc((size_t)4096 * 16 * 4);
        for (int i = 0; i < 4096 * 16; i++)
            emb[i] = rndf();
        for (int l = 0; l < nl; l++)
            w[l] = rand_weights(types[ti], 4096, 4096);
        if (!build(&c1, types[ti], sq, nl, 1, w, emb) || !build(&c8, types[ti], sq, nl, 8, w, emb) ||
            !build(&c64, types[ti], sq, nl, 64, w, emb) || !build(&cx, types[ti], sq, 1, 1, w, emb) ||
            !build(&cx64, types[ti], sq, 1, 64, w, emb)) {
            printf("bench_gpu: graph build failed\n");
            return 1;
        }
        struct gpu_sess *s = sess_with(g, ""), *s0 = sess_with(g, "BRASA_GPU_MVD=0 BRASA_GPU_MMT=0"),
                        *s1 = sess_with(g, "BRASA_GPU_PDL=0"), *sm = sess_with(g, "BRASA_GPU_MMT_MIN=2");
        if (!s || !s0 || !s1 || !sm || !prepare(s, &c1) || !prepare(s, &c8) ||
            !prepare(s, &c64) || !prepare(s, &cx) || !prepare(s0, &c1) || !prepare(s0, &cx) ||
            !prepare(s0, &cx64) || !prepare(s1, &c1) || !prepare(sm, &c64) || !prepare(sm, &cx64))
            return 1;
        double tg = time_runs(s, &c1, false, 20), te = time_runs(s, &c1, true, 20);
        double t0 = time_runs(s0, &c1, false, 20), tn = time_runs(s1, &c1, false, 20);
        double t8 = time_runs(s, &c8, false, 10), t64 = time_runs(s, &c64, false, 5);
        double t64m = time_runs(sm, &c64, false, 5);
        /* one product with each kernel: the outputs must agree to rounding */
        double worst = agreement(s, s0, &cx, 4096), worst64 = agreement(sm, s0, &cx64, 64 * 4096);
        double gbs = c1.bytes / (tg * 1e-3) / 1e9, gbs0 = c1.bytes / (t0 * 1e-3) / 1e9;
        printf("| %s | %.0f | %.0f | %.0f | %.0f%% | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | "
               "%.1e | %.1e |\n",
               qtype_get(types[ti])->name, c1.bytes / 1e6, tg * 1e3, gbs, 100 * gbs / bw, tn * 1e3,
               t0 * 1e3, gbs0, te * 1e3, t8 * 1e3, t64 * 1e3, t64m * 1e3, worst, worst64);
        fflush(stdout);
        gpu_sess_free(sm);
        gpu_sess_free(s1);
        gpu_sess_free(s);
        gpu_sess_free(s0);
        graph_free(&c1.g);
        graph_free(&c8.g);
        graph_free(&c64.g);
        graph_free(&cx.g);
        graph_free(&cx64.g);
        /* the weights stay allocated: the backend keys its device copies by host address,
         * and a freed block's address would come back for the next chain's weights */
        free(emb);
    }
    /* FFN-shaped chains (up then down, alternating) of Qwen2.5-7B and -1.5B */
    static const struct {
        const char *name;
        uint32_t t;
        int dims[2], nl;
    } ffn[] = {{"7B FFN Q4_K", GGML_TYPE_Q4_K, {3584, 18944}, 8},
               {"7B FFN Q6_K", GGML_TYPE_Q6_K, {3584, 18944}, 6},
               {"7B FFN Q8_0", GGML_TYPE_Q8_0, {3584, 18944}, 6},
               {"1.5B FFN Q4_K", GGML_TYPE_Q4_K, {1536, 8960}, 16},
               {"1.5B FFN Q8_0", GGML_TYPE_Q8_0, {1536, 8960}, 12},
               {"7B attn Q4_K", GGML_TYPE_Q4_K, {3584, 3584}, 24},
               {"1.5B attn Q4_K", GGML_TYPE_Q4_K, {1536, 1536}, 48}};
    printf("\n| chain | weights MB | mvd graph us | mvd GB/s | %% of copy | NR=4 us | NR=1 us | no PDL us | "
           "mv graph us | mv GB/s |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t fi = 0; fi < sizeof ffn / sizeof *ffn && !quick; fi++) {
        void *w[64];
        struct chain c;
        float *emb = malloc((size_t)ffn[fi].dims[0] * 16 * 4);
        for (int i = 0; i < ffn[fi].dims[0] * 16; i++)
            emb[i] = rndf();
        for (int l = 0; l < ffn[fi].nl; l++)
            w[l] = rand_weights(ffn[fi].t, ffn[fi].dims[(l + 1) % 2], ffn[fi].dims[l % 2]);
        if (!build(&c, ffn[fi].t, ffn[fi].dims, ffn[fi].nl, 1, w, emb)) {
            printf("bench_gpu: graph build failed\n");
            return 1;
        }
        /* default, matvec.cu, no PDL, and the decode kernel with fixed row groups (weight rows
         * sharing an activation load) */
        static const char *const sw[5] = {"", "BRASA_GPU_MVD=0", "BRASA_GPU_PDL=0",
                                          "BRASA_GPU_MVD_NR=4", "BRASA_GPU_MVD_NR=1"};
        double t[5];
        for (int v = 0; v < 5; v++) {
            struct gpu_sess *sv = sess_with(g, sw[v]);
            if (!sv || !prepare(sv, &c))
                return 1;
            t[v] = time_runs(sv, &c, false, 20);
            gpu_sess_free(sv);
        }
        double tg = t[0], t0 = t[1], tn = t[2], tnr[2] = {t[3], t[4]};
        double gbs = c.bytes / (tg * 1e-3) / 1e9, gbs0 = c.bytes / (t0 * 1e-3) / 1e9;
        printf("| %s | %.0f | %.0f | %.0f | %.0f%% | %.0f | %.0f | %.0f | %.0f | %.0f |\n",
               ffn[fi].name, c.bytes / 1e6, tg * 1e3, gbs, 100 * gbs / bw, tnr[0] * 1e3,
               tnr[1] * 1e3, tn * 1e3, t0 * 1e3, gbs0);
        fflush(stdout);
        graph_free(&c.g);
        /* (weights kept: see above) */
        free(emb);
    }
    gpu_mem_report(g, stdout);
    gpu_close(g);
    return 0;
}
