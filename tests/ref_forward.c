/* ref_forward: float64 reference forward pass (see ref_forward.h). Written for clarity, not
 * speed: one token at a time, every weight dequantized to double up front. */
#include "ref_forward.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/quant.h"

struct rw {                 /* a weight as double, (ne1 rows, ne0 columns) */
    double *d;
    int64_t ne0, ne1;
};

struct rl {
    bool rec;
    struct rw attn_norm, wq, wk, wv, wo, bq, bk, bv, qn, kn, ffn_norm, gate, up, down;
    struct rw qkv, z, conv, dt, a, beta, alpha, snorm, sout;
    double *kc, *vc;        /* (ctx, n_kv*hd) */
    double *cst;            /* (conv_k-1, channels) */
    double *S;              /* (n_vh, dv, dk) */
};

struct ref_model {
    struct gguf_file *f;
    char arch[16];
    int n_vocab, E, L, nh, nkv, hd, F, n_rot, ctx, pos;
    bool neox, gated;
    double base, eps, kq_scale, emb_scale, res_scale, logit_scale;
    int fai, K, dk, dv, nkh, nvh;
    struct rw emb, onorm, out;
    struct rl *l;
};

int ref_n_vocab(const struct ref_model *m) { return m->n_vocab; }

static brasa_status ld(struct ref_model *m, struct rw *w, bool optional, struct brasa_err *err,
                       const char *fmt, ...)
{
    char name[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    const struct gguf_tensor *t = gguf_find_tensor(m->f, name);
    memset(w, 0, sizeof *w);
    if (!t)
        return optional ? BRASA_OK : brasa_fail(err, BRASA_ENOTFOUND, "ref: no tensor %s", name);
    w->ne0 = t->ne[0];
    w->ne1 = t->ne[1] * t->ne[2] * t->ne[3];
    w->d = malloc((size_t)(w->ne0 * w->ne1) * sizeof(double));
    float *row = malloc((size_t)w->ne0 * sizeof(float));
    if (!w->d || !row) {
        free(row);
        return brasa_fail(err, BRASA_ENOMEM, "ref: out of memory");
    }
    size_t rb = qtype_row_bytes(t->type, w->ne0);
    for (int64_t r = 0; r < w->ne1; r++) {
        brasa_status st = dequant_row_ref(t->type, (const uint8_t *)t->data + r * rb, row, w->ne0, err);
        if (st != BRASA_OK) {
            free(row);
            return st;
        }
        for (int64_t i = 0; i < w->ne0; i++)
            w->d[r * w->ne0 + i] = row[i];
    }
    free(row);
    return BRASA_OK;
}

static int key_i(const struct ref_model *m, const char *k, int def)
{
    char key[96];
    snprintf(key, sizeof key, "%s.%s", m->arch, k);
    int64_t v;
    return gguf_get_i64(m->f, key, &v, NULL) == BRASA_OK ? (int)v : def;
}

static double key_f(const struct ref_model *m, const char *k, double def)
{
    char key[96];
    snprintf(key, sizeof key, "%s.%s", m->arch, k);
    float v;
    return gguf_get_f32(m->f, key, &v, NULL) == BRASA_OK ? v : def;
}

static void free_rw(struct rw *w) { free(w->d); }

void ref_free(struct ref_model *m)
{
    if (!m)
        return;
    for (int i = 0; m->l && i < m->L; i++) {
        struct rl *l = &m->l[i];
        struct rw *ws[] = {&l->attn_norm, &l->wq, &l->wk, &l->wv, &l->wo, &l->bq, &l->bk, &l->bv,
                           &l->qn, &l->kn, &l->ffn_norm, &l->gate, &l->up, &l->down, &l->qkv,
                           &l->z, &l->conv, &l->dt, &l->a, &l->beta, &l->alpha, &l->snorm, &l->sout};
        for (size_t k = 0; k < sizeof ws / sizeof ws[0]; k++)
            free_rw(ws[k]);
        free(l->kc), free(l->vc), free(l->cst), free(l->S);
    }
    free(m->l);
    if (m->out.d != m->emb.d)
        free_rw(&m->out);
    free_rw(&m->emb), free_rw(&m->onorm);
    if (m->f)
        gguf_close(m->f);
    free(m);
}

static brasa_status load_layer(struct ref_model *m, int i, struct brasa_err *err)
{
    struct rl *l = &m->l[i];
    brasa_status st;
    bool q35 = strcmp(m->arch, "qwen35") == 0;
    l->rec = q35 && (i + 1) % m->fai != 0;
    if ((st = ld(m, &l->attn_norm, false, err, "blk.%d.attn_norm.weight", i)) ||
        (st = ld(m, &l->ffn_norm, false, err, q35 ? "blk.%d.post_attention_norm.weight"
                                                  : "blk.%d.ffn_norm.weight", i)) ||
        (st = ld(m, &l->gate, false, err, "blk.%d.ffn_gate.weight", i)) ||
        (st = ld(m, &l->up, false, err, "blk.%d.ffn_up.weight", i)) ||
        (st = ld(m, &l->down, false, err, "blk.%d.ffn_down.weight", i)))
        return st;
    if (l->rec) {
        int C = 2 * m->nkh * m->dk + m->nvh * m->dv;
        l->cst = calloc((size_t)(m->K - 1) * C, sizeof(double));
        l->S = calloc((size_t)m->nvh * m->dv * m->dk, sizeof(double));
        if ((st = ld(m, &l->qkv, false, err, "blk.%d.attn_qkv.weight", i)) ||
            (st = ld(m, &l->z, false, err, "blk.%d.attn_gate.weight", i)) ||
            (st = ld(m, &l->conv, false, err, "blk.%d.ssm_conv1d.weight", i)) ||
            (st = ld(m, &l->dt, false, err, "blk.%d.ssm_dt.bias", i)) ||
            (st = ld(m, &l->a, false, err, "blk.%d.ssm_a", i)) ||
            (st = ld(m, &l->beta, false, err, "blk.%d.ssm_beta.weight", i)) ||
            (st = ld(m, &l->alpha, false, err, "blk.%d.ssm_alpha.weight", i)) ||
            (st = ld(m, &l->snorm, false, err, "blk.%d.ssm_norm.weight", i)) ||
            (st = ld(m, &l->sout, false, err, "blk.%d.ssm_out.weight", i)))
            return st;
        return l->cst && l->S ? BRASA_OK : brasa_fail(err, BRASA_ENOMEM, "ref: out of memory");
    }
    l->kc = calloc((size_t)m->ctx * m->nkv * m->hd, sizeof(double));
    l->vc = calloc((size_t)m->ctx * m->nkv * m->hd, sizeof(double));
    if ((st = ld(m, &l->wq, false, err, "blk.%d.attn_q.weight", i)) ||
        (st = ld(m, &l->wk, false, err, "blk.%d.attn_k.weight", i)) ||
        (st = ld(m, &l->wv, false, err, "blk.%d.attn_v.weight", i)) ||
        (st = ld(m, &l->wo, false, err, "blk.%d.attn_output.weight", i)) ||
        (st = ld(m, &l->bq, true, err, "blk.%d.attn_q.bias", i)) ||
        (st = ld(m, &l->bk, true, err, "blk.%d.attn_k.bias", i)) ||
        (st = ld(m, &l->bv, true, err, "blk.%d.attn_v.bias", i)) ||
        (st = ld(m, &l->qn, true, err, "blk.%d.attn_q_norm.weight", i)) ||
        (st = ld(m, &l->kn, true, err, "blk.%d.attn_k_norm.weight", i)))
        return st;
    return l->kc && l->vc ? BRASA_OK : brasa_fail(err, BRASA_ENOMEM, "ref: out of memory");
}

brasa_status ref_load(struct ref_model **out, const char *path, struct brasa_err *err)
{
    *out = NULL;
    struct ref_model *m = calloc(1, sizeof *m);
    if (!m)
        return brasa_fail(err, BRASA_ENOMEM, "ref: out of memory");
    char *arch = NULL;
    brasa_status st = gguf_open(&m->f, path, err);
    if (st == BRASA_OK)
        st = gguf_get_str(m->f, "general.architecture", &arch, err);
    if (st != BRASA_OK) {
        ref_free(m);
        return st;
    }
    snprintf(m->arch, sizeof m->arch, "%s", arch);
    free(arch);
    m->E = key_i(m, "embedding_length", 0);
    m->L = key_i(m, "block_count", 0);
    m->nh = key_i(m, "attention.head_count", 1);
    m->nkv = key_i(m, "attention.head_count_kv", m->nh);
    m->hd = key_i(m, "attention.key_length", m->E / m->nh);
    m->F = key_i(m, "feed_forward_length", 0);
    m->n_rot = key_i(m, "rope.dimension_count", m->hd);
    m->base = key_f(m, "rope.freq_base", 10000.0);
    m->eps = key_f(m, "attention.layer_norm_rms_epsilon", 1e-5);
    m->neox = strcmp(m->arch, "llama") != 0 && strcmp(m->arch, "granite") != 0;
    m->gated = strcmp(m->arch, "qwen35") == 0;
    m->kq_scale = 1.0 / sqrt((double)m->hd);
    m->emb_scale = m->res_scale = m->logit_scale = 1.0;
    if (strcmp(m->arch, "granite") == 0) {
        m->emb_scale = key_f(m, "embedding_scale", 1);
        m->res_scale = key_f(m, "residual_scale", 1);
        m->kq_scale = key_f(m, "attention.scale", m->kq_scale);
        m->logit_scale = key_f(m, "logit_scale", 1);
    }
    if (m->gated) {
        m->fai = key_i(m, "full_attention_interval", 4);
        m->K = key_i(m, "ssm.conv_kernel", 4);
        m->dk = key_i(m, "ssm.state_size", 0);
        m->nkh = key_i(m, "ssm.group_count", 1);
        m->nvh = key_i(m, "ssm.time_step_rank", 1);
        m->dv = key_i(m, "ssm.inner_size", 0) / m->nvh;
    }
    m->ctx = 512;
    m->l = calloc((size_t)m->L, sizeof *m->l);
    if (!m->l)
        st = brasa_fail(err, BRASA_ENOMEM, "ref: out of memory");
    if (st == BRASA_OK && (st = ld(m, &m->emb, false, err, "token_embd.weight")) == BRASA_OK &&
        (st = ld(m, &m->onorm, false, err, "output_norm.weight")) == BRASA_OK &&
        (st = ld(m, &m->out, true, err, "output.weight")) == BRASA_OK) {
        if (!m->out.d)
            m->out = m->emb;
        m->n_vocab = (int)m->emb.ne1;
        for (int i = 0; i < m->L && st == BRASA_OK; i++)
            st = load_layer(m, i, err);
    }
    if (st != BRASA_OK) {
        ref_free(m);
        return st;
    }
    *out = m;
    return BRASA_OK;
}

void ref_reset(struct ref_model *m)
{
    m->pos = 0;
    for (int i = 0; i < m->L; i++)
        if (m->l[i].rec) {
            memset(m->l[i].cst, 0, sizeof(double) * (size_t)(m->K - 1) *
                                       (2 * m->nkh * m->dk + m->nvh * m->dv));
            memset(m->l[i].S, 0, sizeof(double) * (size_t)m->nvh * m->dv * m->dk);
        }
}

/* ---------------------------------------------------------------- math */

static void matvec(const struct rw *w, const double *x, double *y, const struct rw *bias)
{
    for (int64_t r = 0; r < w->ne1; r++) {
        double s = bias && bias->d ? bias->d[r] : 0;
        for (int64_t i = 0; i < w->ne0; i++)
            s += w->d[r * w->ne0 + i] * x[i];
        y[r] = s;
    }
}

static void rmsnorm(const double *x, const double *w, double *y, int n, double eps)
{
    double ss = 0;
    for (int i = 0; i < n; i++)
        ss += x[i] * x[i];
    double sc = 1.0 / sqrt(ss / n + eps);
    for (int i = 0; i < n; i++)
        y[i] = x[i] * sc * (w ? w[i] : 1.0);
}

static double silu(double x) { return x / (1 + exp(-x)); }
static double sigm(double x) { return 1 / (1 + exp(-x)); }

static void rope(const struct ref_model *m, double *x, int nheads)
{
    for (int h = 0; h < nheads; h++) {
        double *v = x + h * m->hd;
        for (int i = 0; i < m->n_rot / 2; i++) {
            double th = m->pos * pow(m->base, -2.0 * i / m->n_rot);
            int i0 = m->neox ? i : 2 * i, i1 = m->neox ? i + m->n_rot / 2 : 2 * i + 1;
            double a = v[i0], b = v[i1];
            v[i0] = a * cos(th) - b * sin(th);
            v[i1] = a * sin(th) + b * cos(th);
        }
    }
}

static void attention(struct ref_model *m, struct rl *l, const double *h, double *out)
{
    int hd = m->hd, nq = m->nh * hd, nk = m->nkv * hd;
    double *q = calloc((size_t)nq, sizeof *q), *gate = calloc((size_t)nq, sizeof *gate);
    double *qg = calloc((size_t)2 * nq, sizeof *qg), *o = calloc((size_t)nq, sizeof *o);
    double *k = l->kc + (size_t)m->pos * nk, *v = l->vc + (size_t)m->pos * nk;
    double *sc = malloc(sizeof(double) * (size_t)(m->pos + 1));
    if (m->gated) {
        matvec(&l->wq, h, qg, NULL);
        for (int hh = 0; hh < m->nh; hh++)
            for (int d = 0; d < hd; d++) {
                q[hh * hd + d] = qg[hh * 2 * hd + d];
                gate[hh * hd + d] = qg[hh * 2 * hd + hd + d];
            }
    } else {
        matvec(&l->wq, h, q, &l->bq);
    }
    matvec(&l->wk, h, k, &l->bk);
    matvec(&l->wv, h, v, &l->bv);
    if (l->qn.d) {
        for (int hh = 0; hh < m->nh; hh++)
            rmsnorm(q + hh * hd, l->qn.d, q + hh * hd, hd, m->eps);
        for (int hh = 0; hh < m->nkv; hh++)
            rmsnorm(k + hh * hd, l->kn.d, k + hh * hd, hd, m->eps);
    }
    rope(m, q, m->nh);
    rope(m, k, m->nkv);
    for (int hh = 0; hh < m->nh; hh++) {
        int kvh = hh / (m->nh / m->nkv);
        double mx = -1e300, sum = 0;
        for (int j = 0; j <= m->pos; j++) {
            double s = 0;
            for (int d = 0; d < hd; d++)
                s += q[hh * hd + d] * l->kc[(size_t)j * nk + kvh * hd + d];
            sc[j] = s * m->kq_scale;
            mx = fmax(mx, sc[j]);
        }
        for (int j = 0; j <= m->pos; j++)
            sum += (sc[j] = exp(sc[j] - mx));
        for (int j = 0; j <= m->pos; j++)
            for (int d = 0; d < hd; d++)
                o[hh * hd + d] += sc[j] / sum * l->vc[(size_t)j * nk + kvh * hd + d];
    }
    if (m->gated)
        for (int i = 0; i < nq; i++)
            o[i] *= sigm(gate[i]);
    matvec(&l->wo, o, out, NULL);
    free(q), free(gate), free(qg), free(o), free(sc);
}

static void deltanet(struct ref_model *m, struct rl *l, const double *h, double *out)
{
    int nk = m->nkh * m->dk, nv = m->nvh * m->dv, C = 2 * nk + nv, K = m->K;
    double *x = malloc(sizeof(double) * C), *c = malloc(sizeof(double) * C);
    double *z = malloc(sizeof(double) * nv), *o = malloc(sizeof(double) * nv);
    double *b = malloc(sizeof(double) * m->nvh), *a = malloc(sizeof(double) * m->nvh);
    matvec(&l->qkv, h, x, NULL);
    matvec(&l->z, h, z, NULL);
    matvec(&l->beta, h, b, NULL);
    matvec(&l->alpha, h, a, NULL);
    for (int ch = 0; ch < C; ch++) { /* taps: K-1 past inputs (oldest first), then this one */
        double s = 0;
        for (int j = 0; j < K - 1; j++)
            s += l->conv.d[ch * K + j] * l->cst[j * C + ch];
        s += l->conv.d[ch * K + K - 1] * x[ch];
        for (int j = 0; j < K - 2; j++)
            l->cst[j * C + ch] = l->cst[(j + 1) * C + ch];
        l->cst[(K - 2) * C + ch] = x[ch];
        c[ch] = silu(s);
    }
    double *q = c, *k = c + nk, *v = c + 2 * nk;
    for (int hh = 0; hh < m->nkh; hh++) {
        double sq = 0, sk = 0;
        for (int d = 0; d < m->dk; d++) {
            sq += q[hh * m->dk + d] * q[hh * m->dk + d];
            sk += k[hh * m->dk + d] * k[hh * m->dk + d];
        }
        sq = 1 / fmax(sqrt(sq), m->eps), sk = 1 / fmax(sqrt(sk), m->eps);
        for (int d = 0; d < m->dk; d++)
            q[hh * m->dk + d] *= sq, k[hh * m->dk + d] *= sk;
    }
    for (int hh = 0; hh < m->nvh; hh++) {
        int kh = hh % m->nkh;
        double sp = a[hh] + l->dt.d[hh];
        double g = (sp > 20 ? sp : log1p(exp(sp))) * l->a.d[hh], beta = sigm(b[hh]);
        double *S = l->S + (size_t)hh * m->dv * m->dk, *kk = k + kh * m->dk, *qq = q + kh * m->dk;
        for (int i = 0; i < m->dv; i++) {
            double mk = 0, mq = 0;
            for (int j = 0; j < m->dk; j++)
                mk += (S[i * m->dk + j] *= exp(g)) * kk[j];
            double delta = beta * (v[hh * m->dv + i] - mk);
            for (int j = 0; j < m->dk; j++)
                mq += (S[i * m->dk + j] += delta * kk[j]) * qq[j];
            o[hh * m->dv + i] = mq / sqrt((double)m->dk);
        }
        rmsnorm(o + hh * m->dv, l->snorm.d, o + hh * m->dv, m->dv, m->eps);
        for (int i = 0; i < m->dv; i++)
            o[hh * m->dv + i] *= silu(z[hh * m->dv + i]);
    }
    matvec(&l->sout, o, out, NULL);
    free(x), free(c), free(z), free(o), free(b), free(a);
}

brasa_status ref_step(struct ref_model *m, int32_t id, double *logits, struct brasa_err *err)
{
    if (id < 0 || id >= m->n_vocab || m->pos >= m->ctx)
        return brasa_fail(err, BRASA_EINVAL, "ref: bad token %d or context full", id);
    int E = m->E;
    double *x = malloc(sizeof(double) * E), *h = malloc(sizeof(double) * E);
    double *o = malloc(sizeof(double) * E), *g = malloc(sizeof(double) * m->F);
    double *u = malloc(sizeof(double) * m->F);
    for (int i = 0; i < E; i++)
        x[i] = m->emb.d[(size_t)id * E + i] * m->emb_scale;
    for (int li = 0; li < m->L; li++) {
        struct rl *l = &m->l[li];
        rmsnorm(x, l->attn_norm.d, h, E, m->eps);
        if (l->rec)
            deltanet(m, l, h, o);
        else
            attention(m, l, h, o);
        for (int i = 0; i < E; i++)
            x[i] += m->res_scale * o[i];
        rmsnorm(x, l->ffn_norm.d, h, E, m->eps);
        matvec(&l->gate, h, g, NULL);
        matvec(&l->up, h, u, NULL);
        for (int i = 0; i < m->F; i++)
            g[i] = silu(g[i]) * u[i];
        matvec(&l->down, g, o, NULL);
        for (int i = 0; i < E; i++)
            x[i] += m->res_scale * o[i];
    }
    rmsnorm(x, m->onorm.d, h, E, m->eps);
    matvec(&m->out, h, logits, NULL);
    for (int i = 0; i < m->n_vocab; i++)
        logits[i] /= m->logit_scale;
    m->pos++;
    free(x), free(h), free(o), free(g), free(u);
    return BRASA_OK;
}
