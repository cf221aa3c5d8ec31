/* Each graph op on the CPU backend against a plain float64 reference, on fresh random inputs
 * every run (the seed is printed; BRASA_TEST_SEED replays it). */
#include "test.h"

#include <math.h>
#include <stdint.h>

#include "core/pool.h"
#include "cpu/cpu.h"
#include "cpu/ops.h"
#include "graph/graph.h"
#include "quant/quant.h"

static unsigned long long rng;

static float *rnd(long n, float scale)
{
    float *x = malloc((size_t)n * sizeof *x);
    for (long i = 0; i < n; i++)
        x[i] = test_rand_normal(&rng) * scale;
    return x;
}

/* max|a-b| / max|b|; infinite where a has a NaN (fmax would pass over it) */
static double rel(const float *a, const double *b, long n)
{
    double md = 0, mb = 0;
    for (long i = 0; i < n; i++) {
        if (isnan(a[i]))
            return INFINITY;
        md = fmax(md, fabs(a[i] - b[i]));
        mb = fmax(mb, fabs(b[i]));
    }
    return mb > 0 ? md / mb : md;
}

/* A leaf holding data (WEIGHT for host arrays, STATE for buffers an op updates). */
static int leaf(struct graph *g, enum graph_op op, void *data, uint32_t type, long ne0, long ne1)
{
    int n = graph_add(g, op, op == GOP_STATE ? "state" : "in", -1, -1, -1, -1, ne0, ne1);
    g->nodes[n].data = data;
    g->nodes[n].type = type;
    return n;
}

static struct pool *pool2;

/* Plans and runs g (output node = last) at pos0; returns the output. */
static const float *run(struct graph *g, int pos0, struct cpu **cpu)
{
    struct brasa_err err;
    g->out = g->n - 1;
    if (graph_plan(g, &err) != BRASA_OK)
        return NULL;
    if (!*cpu && cpu_new(cpu, pool2, &err) != BRASA_OK)
        return NULL;
    if (cpu_prepare(*cpu, g, 256, &err) != BRASA_OK)
        return NULL;
    struct graph_run r = {.pos0 = pos0};
    if (cpu_run(*cpu, g, &r, &err) != BRASA_OK) {
        fprintf(stderr, "  run: %s\n", err.msg);
        return NULL;
    }
    return cpu_node_data(*cpu, g, g->out);
}

static void setup(void)
{
    if (!rng)
        rng = test_seed();
    if (!pool2) {
        struct brasa_err err;
        pool_new(&pool2, 2, &err);
    }
}

static double silu_d(double x) { return x / (1 + exp(-x)); }

TEST(norms)
{
    setup();
    const long T = 5, G = 64, NG = 3, n = T * NG * G;
    float *x = rnd(n, 2), *w = rnd(G, 1), *z = rnd(n, 1);
    double *ref = malloc((size_t)n * sizeof *ref);
    for (int kind = 0; kind < 3; kind++) {
        struct graph g;
        struct cpu *cpu = NULL;
        graph_init(&g, (int)T, NULL);
        int a = leaf(&g, GOP_WEIGHT, x, 0, NG * G, T), b = leaf(&g, GOP_WEIGHT, w, 0, G, 1),
            c = leaf(&g, GOP_WEIGHT, z, 0, NG * G, T);
        enum graph_op op = kind == 0 ? GOP_RMS_NORM : kind == 1 ? GOP_L2_NORM : GOP_RMS_NORM_GATE;
        int o = graph_add(&g, op, "out", a, kind == 1 ? -1 : b, kind == 2 ? c : -1, -1, NG * G, T);
        g.nodes[o].p.i[0] = (int)G;
        g.nodes[o].p.f[0] = 1e-5f;
        for (long r = 0; r < T * NG; r++) {
            double ss = 0;
            for (long i = 0; i < G; i++)
                ss += (double)x[r * G + i] * x[r * G + i];
            double sc = kind == 1 ? 1 / fmax(sqrt(ss), 1e-5) : 1 / sqrt(ss / G + 1e-5);
            for (long i = 0; i < G; i++) {
                double v = x[r * G + i] * sc;
                if (kind != 1)
                    v *= w[i];
                if (kind == 2)
                    v *= silu_d(z[r * G + i]);
                ref[r * G + i] = v;
            }
        }
        const float *out = run(&g, 0, &cpu);
        CHECK(out != NULL);
        if (out)
            CHECKF(rel(out, ref, n) < 1e-5, "%s: %.3g", graph_op_name(op), rel(out, ref, n));
        cpu_free(cpu);
        graph_free(&g);
    }
    free(x), free(w), free(z), free(ref);
}

/* Every op below at each vector level the CPU has (0 portable, 1 AVX2, 2 AVX-512), the
 * elementwise ones on values that reach the exponentials' overflow and underflow too, and an
 * odd count so the vector loops have a partial last step. */
TEST(eltwise_and_view)
{
    setup();
    const long n = 4001;
    float *x = rnd(n, 3), *y = rnd(n, 3);
    const float big[] = {-200, -104, -100, -89, -87.5f, -30, 30, 87.5f, 89, 100, 104, 200};
    for (long i = 0; i < 12; i++)
        x[i * 7] = big[i], y[i * 11 + 3] = big[11 - i];
    double *ref = malloc((size_t)n * sizeof *ref);
    enum graph_op ops[] = {GOP_ADD, GOP_MUL, GOP_SCALE, GOP_SWIGLU, GOP_SILU, GOP_SIGMOID_MUL};
    for (int lv = 0, top = cpu_ops_simd(2); lv <= top; lv++)
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        cpu_ops_simd(lv);
        struct graph g;
        struct cpu *cpu = NULL;
        graph_init(&g, 1, NULL);
        int a = leaf(&g, GOP_WEIGHT, x, 0, n, 1), b = leaf(&g, GOP_WEIGHT, y, 0, n, 1);
        int o = graph_add(&g, ops[k], "out", a, b, -1, -1, n, 1);
        g.nodes[o].p.f[0] = 1.7f;
        for (long i = 0; i < n; i++) {
            double X = x[i], Y = y[i];
            switch (ops[k]) {
            case GOP_ADD: ref[i] = X + Y * 1.7; break;
            case GOP_MUL: ref[i] = X * Y; break;
            case GOP_SCALE: ref[i] = X * 1.7; break;
            case GOP_SWIGLU: ref[i] = silu_d(X) * Y; break;
            case GOP_SILU: ref[i] = silu_d(X); break;
            default: ref[i] = X / (1 + exp(-Y)); break;
            }
        }
        const float *out = run(&g, 0, &cpu);
        CHECK(out != NULL);
        if (out)
            CHECKF(rel(out, ref, n) < 1e-6, "%s, level %d: %.3g", graph_op_name(ops[k]), lv,
                   rel(out, ref, n));
        cpu_free(cpu);
        graph_free(&g);
    }
    cpu_ops_simd(2);
    /* VIEW: the gate half of query|gate interleaved per head (hd 8, 3 heads, 4 tokens) */
    {
        struct graph g;
        struct cpu *cpu = NULL;
        graph_init(&g, 4, NULL);
        int a = leaf(&g, GOP_WEIGHT, x, 0, 48, 4);
        int o = graph_add(&g, GOP_VIEW, "out", a, -1, -1, -1, 24, 4);
        int32_t p[5] = {8, 8, 3, 16, 48};
        memcpy(g.nodes[o].p.i, p, sizeof p);
        for (long t = 0; t < 4; t++)
            for (long h = 0; h < 3; h++)
                for (long d = 0; d < 8; d++)
                    ref[t * 24 + h * 8 + d] = x[t * 48 + h * 16 + 8 + d];
        const float *out = run(&g, 0, &cpu);
        CHECK(out && rel(out, ref, 96) == 0);
        cpu_free(cpu);
        graph_free(&g);
    }
    free(x), free(y), free(ref);
}

/* MATMUL with bias on F32 weights, then every quantized type brasa encodes against the
 * float64 product of the dequantized weights (the activation conversion limits the match). */
TEST(matmul)
{
    setup();
    const long K = 512, R = 37, T = 6;
    float *w = rnd(K * R, 0.1f), *x = rnd(K * T, 1), *bias = rnd(R, 1), *wd = malloc(K * R * 4);
    double *ref = malloc((size_t)(R * T) * sizeof *ref);
    uint32_t types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_Q8_0,
                        GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
    for (size_t k = 0; k < sizeof types / sizeof types[0]; k++) {
        const struct qtype_info *qi = qtype_get(types[k]);
        if (!qi || !qi->can_quant)
            continue;
        size_t rb = qtype_row_bytes(types[k], K);
        uint8_t *wq = malloc(rb * R);
        struct brasa_err err;
        for (long i = 0; i < R; i++) {
            quant_row(types[k], w + i * K, wq + i * rb, K, &err);
            dequant_row(types[k], wq + i * rb, wd + i * K, K, &err);
        }
        for (long t = 0; t < T; t++)
            for (long i = 0; i < R; i++) {
                double s = bias[i];
                for (long j = 0; j < K; j++)
                    s += (double)wd[i * K + j] * x[t * K + j];
                ref[t * R + i] = s;
            }
        for (int nt = 1; nt <= T; nt += T - 1) { /* decode (1 token) and a batch */
            struct graph g;
            struct cpu *cpu = NULL;
            graph_init(&g, nt, NULL);
            int a = leaf(&g, GOP_WEIGHT, x, 0, K, nt), b = leaf(&g, GOP_WEIGHT, wq, types[k], K, R),
                c = leaf(&g, GOP_WEIGHT, bias, 0, R, 1);
            graph_add(&g, GOP_MATMUL, "out", a, b, c, -1, R, nt);
            const float *out = run(&g, 0, &cpu);
            double tol = types[k] == GGML_TYPE_F32 ? 1e-6 : types[k] == GGML_TYPE_F16 ? 2e-3 : 2e-2;
            CHECK(out != NULL);
            if (out)
                CHECKF(rel(out, ref, R * nt) < tol, "%s n=%d: %.3g", qi->name, nt,
                       rel(out, ref, R * nt));
            cpu_free(cpu);
            graph_free(&g);
        }
        free(wq);
    }
    free(w), free(x), free(bias), free(wd), free(ref);
}

TEST(get_rows)
{
    setup();
    const long E = 64, V = 10, T = 4;
    float *w = rnd(E * V, 1);
    int32_t ids[4] = {3, 0, 9, 3};
    struct graph g;
    struct cpu *cpu = NULL;
    graph_init(&g, (int)T, NULL);
    int a = leaf(&g, GOP_WEIGHT, w, 0, E, V);
    int tk = graph_add(&g, GOP_INPUT, "tokens", -1, -1, -1, -1, T, 1);
    int o = graph_add(&g, GOP_GET_ROWS, "out", a, tk, -1, -1, E, T);
    g.nodes[o].p.f[0] = 0.5f;
    double ref[4 * 64];
    for (long t = 0; t < T; t++)
        for (long i = 0; i < E; i++)
            ref[t * E + i] = 0.5 * w[ids[t] * E + i];
    struct brasa_err err;
    g.out = o;
    REQUIRE(graph_plan(&g, &err) == BRASA_OK && cpu_new(&cpu, NULL, &err) == BRASA_OK);
    REQUIRE(cpu_prepare(cpu, &g, 16, &err) == BRASA_OK);
    struct graph_run r = {.pos0 = 0, .tokens = ids};
    CHECK(cpu_run(cpu, &g, &r, &err) == BRASA_OK);
    CHECK(rel(cpu_node_data(cpu, &g, o), ref, T * E) == 0);
    cpu_free(cpu);
    graph_free(&g);
    free(w);
}

TEST(rope)
{
    setup();
    const long hd = 16, nh = 3, T = 5, n = hd * nh * T;
    float *x = rnd(n, 1);
    double *ref = malloc((size_t)n * sizeof *ref);
    for (int mode = 0; mode <= 2; mode += 2)
        for (int n_rot = 8; n_rot <= 16; n_rot += 8) {
            int pos0 = 7;
            for (long t = 0; t < T; t++)
                for (long h = 0; h < nh; h++) {
                    const float *xr = x + (t * nh + h) * hd;
                    double *yr = ref + (t * nh + h) * hd;
                    for (long i = 0; i < hd; i++)
                        yr[i] = xr[i];
                    for (long i = 0; i < n_rot / 2; i++) {
                        double th = (pos0 + t) * pow(10000.0, -2.0 * i / n_rot);
                        long i0 = mode ? i : 2 * i, i1 = mode ? i + n_rot / 2 : 2 * i + 1;
                        yr[i0] = xr[i0] * cos(th) - xr[i1] * sin(th);
                        yr[i1] = xr[i0] * sin(th) + xr[i1] * cos(th);
                    }
                }
            struct graph g;
            struct cpu *cpu = NULL;
            graph_init(&g, (int)T, NULL);
            int a = leaf(&g, GOP_WEIGHT, x, 0, hd * nh, T);
            int o = graph_add(&g, GOP_ROPE, "out", a, -1, -1, -1, hd * nh, T);
            g.nodes[o].p.i[0] = (int)hd;
            g.nodes[o].p.i[1] = n_rot;
            g.nodes[o].p.i[2] = mode;
            g.nodes[o].p.f[0] = 10000.0f;
            const float *out = run(&g, pos0, &cpu);
            CHECK(out != NULL);
            if (out)
                CHECKF(rel(out, ref, n) < 1e-5, "mode %d n_rot %d: %.3g", mode, n_rot, rel(out, ref, n));
            cpu_free(cpu);
            graph_free(&g);
        }
    free(x), free(ref);
}

/* KV_STORE + ATTN: two batches (prefill at 0, then 3 more tokens) with GQA, F32 and F16 caches. */
TEST(attention)
{
    setup();
    const long hd = 16, nh = 4, nkv = 2, ctx = 32, T1 = 6, T2 = 3;
    for (int f16 = 0; f16 <= 1; f16++) {
        void *kc = calloc((size_t)(ctx * nkv * hd), 4), *vc = calloc((size_t)(ctx * nkv * hd), 4);
        float *q[2], *k[2], *v[2];
        double *kall = malloc(sizeof(double) * ctx * nkv * hd), *vall = malloc(sizeof(double) * ctx * nkv * hd);
        struct cpu *cpu = NULL;
        long T[2] = {T1, T2}, pos0[2] = {0, T1};
        for (int s = 0; s < 2; s++) {
            q[s] = rnd(T[s] * nh * hd, 1), k[s] = rnd(T[s] * nkv * hd, 1), v[s] = rnd(T[s] * nkv * hd, 1);
            for (long i = 0; i < T[s] * nkv * hd; i++) {
                kall[pos0[s] * nkv * hd + i] = k[s][i];
                vall[pos0[s] * nkv * hd + i] = v[s][i];
            }
            struct graph g;
            graph_init(&g, (int)T[s], NULL);
            uint32_t ty = f16 ? GGML_TYPE_F16 : 0;
            int qa = leaf(&g, GOP_WEIGHT, q[s], 0, nh * hd, T[s]);
            int ka = leaf(&g, GOP_WEIGHT, k[s], 0, nkv * hd, T[s]);
            int va = leaf(&g, GOP_WEIGHT, v[s], 0, nkv * hd, T[s]);
            int kcs = leaf(&g, GOP_STATE, kc, ty, nkv * hd, ctx), vcs = leaf(&g, GOP_STATE, vc, ty, nkv * hd, ctx);
            int ks = graph_add(&g, GOP_KV_STORE, "ks", ka, kcs, -1, -1, 0, 0);
            int vs = graph_add(&g, GOP_KV_STORE, "vs", va, vcs, -1, -1, 0, 0);
            int o = graph_add(&g, GOP_ATTN, "out", qa, ks, vs, -1, nh * hd, T[s]);
            g.nodes[o].p.i[0] = (int)nh, g.nodes[o].p.i[1] = (int)nkv, g.nodes[o].p.i[2] = (int)hd;
            g.nodes[o].p.f[0] = 0.25f;
            double *ref = calloc((size_t)(T[s] * nh * hd), sizeof *ref);
            for (long t = 0; t < T[s]; t++)
                for (long h = 0; h < nh; h++) {
                    long kvh = h / (nh / nkv), np = pos0[s] + t + 1;
                    double sc[64], mx = -1e300, sum = 0;
                    for (long j = 0; j < np; j++) {
                        double d = 0;
                        for (long i = 0; i < hd; i++)
                            d += (double)q[s][(t * nh + h) * hd + i] * kall[(j * nkv + kvh) * hd + i];
                        sc[j] = d * 0.25;
                        mx = fmax(mx, sc[j]);
                    }
                    for (long j = 0; j < np; j++)
                        sum += (sc[j] = exp(sc[j] - mx));
                    for (long j = 0; j < np; j++)
                        for (long i = 0; i < hd; i++)
                            ref[(t * nh + h) * hd + i] += sc[j] / sum * vall[(j * nkv + kvh) * hd + i];
                }
            const float *out = run(&g, (int)pos0[s], &cpu);
            CHECK(out != NULL);
            double tol = f16 ? 3e-3 : 1e-5;
            if (out)
                CHECKF(rel(out, ref, T[s] * nh * hd) < tol, "f16=%d batch %d: %.3g", f16, s,
                       rel(out, ref, T[s] * nh * hd));
            free(ref);
            graph_free(&g);
        }
        for (int s = 0; s < 2; s++)
            free(q[s]), free(k[s]), free(v[s]);
        free(kall), free(vall), free(kc), free(vc);
        cpu_free(cpu);
    }
}

/* ATTN on an F16 cache at each vector level (AVX-512 prompts take the tiles), over head sizes,
 * groups of query heads a KV head, prompt lengths and start positions; the cache holds earlier
 * positions already, and NaN after the batch's last one, which no row may read. */
TEST(attention_shapes)
{
    setup();
    const struct {
        long hd, nh, nkv, T, pos0;
    } cs[] = {{16, 4, 2, 5, 0},  {64, 12, 2, 37, 11}, {128, 14, 2, 9, 30}, {80, 7, 1, 6, 3},
              {128, 28, 4, 3, 0}, {32, 40, 1, 2, 5},  {128, 8, 8, 1, 20},  {256, 4, 2, 4, 2}};
    const long ctx = 64;
    for (int lv = 0, top = cpu_ops_simd(2); lv <= top; lv++) {
        cpu_ops_simd(lv);
        for (size_t c = 0; c < sizeof cs / sizeof cs[0]; c++) {
            long hd = cs[c].hd, nh = cs[c].nh, nkv = cs[c].nkv, T = cs[c].T, p0 = cs[c].pos0;
            long kvw = nkv * hd, np1 = p0 + T;
            uint16_t *kc = malloc((size_t)(ctx * kvw) * 2), *vc = malloc((size_t)(ctx * kvw) * 2);
            float *q = rnd(T * nh * hd, 1), *k = rnd(T * kvw, 1), *v = rnd(T * kvw, 1);
            float *kold = rnd(p0 * kvw + 1, 1), *vold = rnd(p0 * kvw + 1, 1);
            for (long i = 0; i < ctx * kvw; i++) /* earlier positions, then NaN */
                kc[i] = vc[i] = 0x7e00;
            for (long i = 0; i < p0 * kvw; i++)
                kc[i] = f32_to_fp16(kold[i]), vc[i] = f32_to_fp16(vold[i]);
            struct graph g;
            struct cpu *cpu = NULL;
            graph_init(&g, (int)T, NULL);
            int qa = leaf(&g, GOP_WEIGHT, q, 0, nh * hd, T);
            int ka = leaf(&g, GOP_WEIGHT, k, 0, kvw, T), va = leaf(&g, GOP_WEIGHT, v, 0, kvw, T);
            int kcs = leaf(&g, GOP_STATE, kc, GGML_TYPE_F16, kvw, ctx);
            int vcs = leaf(&g, GOP_STATE, vc, GGML_TYPE_F16, kvw, ctx);
            int ks = graph_add(&g, GOP_KV_STORE, "ks", ka, kcs, -1, -1, 0, 0);
            int vs = graph_add(&g, GOP_KV_STORE, "vs", va, vcs, -1, -1, 0, 0);
            int o = graph_add(&g, GOP_ATTN, "out", qa, ks, vs, -1, nh * hd, T);
            g.nodes[o].p.i[0] = (int)nh, g.nodes[o].p.i[1] = (int)nkv, g.nodes[o].p.i[2] = (int)hd;
            g.nodes[o].p.f[0] = 1.0f / sqrtf((float)hd);
            double *ref = calloc((size_t)(T * nh * hd), sizeof *ref), *sc = malloc((size_t)np1 * sizeof *sc);
            for (long t = 0; t < T; t++)
                for (long h = 0; h < nh; h++) {
                    long kvh = h / (nh / nkv), np = p0 + t + 1;
                    double mx = -1e300, sum = 0;
                    for (long j = 0; j < np; j++) {
                        const float *kr = j < p0 ? kold + j * kvw : k + (j - p0) * kvw;
                        double d = 0;
                        for (long i = 0; i < hd; i++)
                            d += (double)q[(t * nh + h) * hd + i] * kr[kvh * hd + i];
                        sc[j] = d / sqrt((double)hd);
                        mx = fmax(mx, sc[j]);
                    }
                    for (long j = 0; j < np; j++)
                        sum += (sc[j] = exp(sc[j] - mx));
                    for (long j = 0; j < np; j++) {
                        const float *vr = j < p0 ? vold + j * kvw : v + (j - p0) * kvw;
                        for (long i = 0; i < hd; i++)
                            ref[(t * nh + h) * hd + i] += sc[j] / sum * vr[kvh * hd + i];
                    }
                }
            const float *out = run(&g, (int)p0, &cpu);
            CHECK(out != NULL);
            if (out)
                CHECKF(rel(out, ref, T * nh * hd) < 3e-3, "level %d, hd %ld, %ld heads / %ld, T %ld at %ld: %.3g",
                       lv, hd, nh, nkv, T, p0, rel(out, ref, T * nh * hd));
            free(ref), free(sc), free(q), free(k), free(v), free(kold), free(vold), free(kc), free(vc);
            cpu_free(cpu);
            graph_free(&g);
        }
    }
    cpu_ops_simd(2);
}

/* CONV1D over two batches (the rolling state carries the last K-1 inputs across), without and
 * with the SiLU after it (p.i[1]). */
TEST(conv1d)
{
    setup();
    const long C = 40, K = 4, T1 = 5, T2 = 2, TT = T1 + T2;
    float *x = rnd(TT * C, 1), *w = rnd(C * K, 1), *st = calloc((size_t)((K - 1) * C), 4);
    double *ref = malloc(sizeof(double) * TT * C);
    for (long t = 0; t < TT; t++)
        for (long c = 0; c < C; c++) {
            double s = 0;
            for (long j = 0; j < K; j++) {
                long src = t - (K - 1) + j;
                s += src >= 0 ? (double)w[c * K + j] * x[src * C + c] : 0;
            }
            ref[t * C + c] = s;
        }
    for (int act = 0; act < 2; act++) {
        struct cpu *cpu = NULL;
        long T[2] = {T1, T2}, off[2] = {0, T1};
        memset(st, 0, (size_t)((K - 1) * C) * 4);
        if (act)
            for (long i = 0; i < TT * C; i++)
                ref[i] = ref[i] / (1 + exp(-ref[i]));
        for (int b = 0; b < 2; b++) {
            struct graph g;
            graph_init(&g, (int)T[b], NULL);
            int a = leaf(&g, GOP_WEIGHT, x + off[b] * C, 0, C, T[b]);
            int wn = leaf(&g, GOP_WEIGHT, w, 0, K, C), sn = leaf(&g, GOP_STATE, st, 0, C, K - 1);
            int o = graph_add(&g, GOP_CONV1D, "out", a, wn, sn, -1, C, T[b]);
            g.nodes[o].p.i[0] = (int)K;
            g.nodes[o].p.i[1] = act;
            const float *out = run(&g, (int)off[b], &cpu);
            CHECK(out != NULL);
            if (out)
                CHECKF(rel(out, ref + off[b] * C, T[b] * C) < 1e-5, "SiLU %d, batch %d: %.3g", act,
                       b, rel(out, ref + off[b] * C, T[b] * C));
            graph_free(&g);
        }
        cpu_free(cpu);
    }
    free(x), free(w), free(st), free(ref);
}

/* GATES + DELTANET over two batches against the recurrence in float64: each token's row of
 * its input q | k | v, q and k L2-normalized per head. */
TEST(deltanet)
{
    setup();
    const long nkh = 2, nvh = 4, dk = 8, dv = 6, T1 = 4, T2 = 1, TT = T1 + T2;
    const long C = 2 * nkh * dk + nvh * dv;
    const float eps = 1e-6f;
    float *x = rnd(TT * C, 0.3f);
    float *al = rnd(TT * nvh, 1), *be = rnd(TT * nvh, 1), *dt = rnd(nvh, 1), *A = rnd(nvh, 1);
    for (long h = 0; h < nvh; h++)
        A[h] = -fabsf(A[h]);
    float *st = calloc((size_t)(nvh * dv * dk), 4);
    double *M = calloc((size_t)(nvh * dv * dk), sizeof(double)), *ref = malloc(sizeof(double) * TT * nvh * dv);
    for (long t = 0; t < TT; t++)
        for (long h = 0; h < nvh; h++) {
            long kh = h % nkh;
            double xg = (double)al[t * nvh + h] + dt[h];
            double gg = (xg > 20 ? xg : log1p(exp(xg))) * A[h], beta = 1 / (1 + exp(-(double)be[t * nvh + h]));
            double *m = M + h * dv * dk, kk[8], qq[8], nk = 0, nq = 0;
            const float *kr = x + t * C + nkh * dk + kh * dk, *qr = x + t * C + kh * dk;
            for (long j = 0; j < dk; j++)
                nk += (double)kr[j] * kr[j], nq += (double)qr[j] * qr[j];
            for (long j = 0; j < dk; j++)
                kk[j] = kr[j] / fmax(sqrt(nk), eps), qq[j] = qr[j] / fmax(sqrt(nq), eps);
            for (long i = 0; i < dv; i++) {
                double mk = 0;
                for (long j = 0; j < dk; j++)
                    mk += (m[i * dk + j] *= exp(gg)) * kk[j];
                double delta = beta * (x[t * C + 2 * nkh * dk + h * dv + i] - mk), mq = 0;
                for (long j = 0; j < dk; j++)
                    mq += (m[i * dk + j] += delta * kk[j]) * qq[j];
                ref[(t * nvh + h) * dv + i] = mq / sqrt((double)dk);
            }
        }
    struct cpu *cpu = NULL;
    long T[2] = {T1, T2}, off[2] = {0, T1};
    for (int b = 0; b < 2; b++) {
        struct graph g;
        graph_init(&g, (int)T[b], NULL);
        int xn = leaf(&g, GOP_WEIGHT, x + off[b] * C, 0, C, T[b]);
        int an = leaf(&g, GOP_WEIGHT, al + off[b] * nvh, 0, nvh, T[b]);
        int bn = leaf(&g, GOP_WEIGHT, be + off[b] * nvh, 0, nvh, T[b]);
        int dn = leaf(&g, GOP_WEIGHT, dt, 0, nvh, 1), A_n = leaf(&g, GOP_WEIGHT, A, 0, nvh, 1);
        int sn = leaf(&g, GOP_STATE, st, 0, dk * dv, nvh);
        int gt = graph_add(&g, GOP_GATES, "gates", an, bn, dn, A_n, 2 * nvh, T[b]);
        int o = graph_add(&g, GOP_DELTANET, "out", xn, gt, -1, -1, nvh * dv, T[b]);
        g.nodes[o].state = sn;
        int32_t p[4] = {(int)nkh, (int)nvh, (int)dk, (int)dv};
        memcpy(g.nodes[o].p.i, p, sizeof p);
        g.nodes[o].p.f[0] = eps;
        const float *out = run(&g, (int)off[b], &cpu);
        CHECK(out != NULL);
        if (out)
            CHECKF(rel(out, ref + off[b] * nvh * dv, T[b] * nvh * dv) < 1e-5, "batch %d: %.3g", b,
                   rel(out, ref + off[b] * nvh * dv, T[b] * nvh * dv));
        graph_free(&g);
    }
    cpu_free(cpu);
    free(x), free(al), free(be), free(dt), free(A), free(st), free(M), free(ref);
}

/* The arena plan never lets a live buffer overlap another, nor the output of the node after
 * a buffer's last reader (a GPU launch that fuses a product with the add after it writes the
 * add's output while it still reads the product's input). */
TEST(plan_no_overlap)
{
    setup();
    struct graph g;
    graph_init(&g, 1, NULL);
    int a = graph_add(&g, GOP_WEIGHT, "w", -1, -1, -1, -1, 100, 1);
    int prev = a, keep = -1;
    for (int i = 0; i < 50; i++) {
        int n = graph_addf(&g, GOP_SILU, prev, -1, -1, -1, 100 + (long)(test_rand_u64(&rng) % 300), 1, "n%d", i);
        if (i == 10)
            keep = n;
        prev = i > 10 && i % 7 == 0 ? graph_addf(&g, GOP_ADD, n, keep, -1, -1, 100, 1, "add%d", i) : n;
    }
    g.out = prev;
    struct brasa_err err;
    REQUIRE(graph_plan(&g, &err) == BRASA_OK);
    int *last = calloc((size_t)g.n, sizeof *last);
    for (int i = 0; i < g.n; i++)
        for (int j = 0; j < 4; j++)
            if (g.nodes[i].in[j] >= 0)
                last[g.nodes[i].in[j]] = i;
    for (int i = 1; i < g.n; i++)
        for (int j = i + 1; j < g.n; j++) {
            /* j is written while i is still live (j <= last[i]) or right after (every node
             * here but the weight computes) */
            if (j > last[i] + 1 && i != g.out)
                continue;
            const struct graph_node *x = &g.nodes[i], *y = &g.nodes[j];
            bool overlap = x->offset < y->offset + y->nbytes && y->offset < x->offset + x->nbytes;
            CHECKF(!overlap, "%s and %s overlap", x->name, y->name);
        }
    free(last);
    graph_free(&g);
}

TEST_MAIN(T(norms), T(eltwise_and_view), T(matmul), T(get_rows), T(rope), T(attention),
          T(attention_shapes), T(conv1d),
          T(deltanet), T(plan_no_overlap))
