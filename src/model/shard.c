/* shard: one tensor-parallel shard of a loaded model (the split rules of gpu/split.h). */
#include "model/model.h"

#include <stdlib.h>
#include <string.h>

#include "gpu/split.h"
#include "quant/quant.h"

struct cutter {
    uint8_t *mem; /* NULL: the first pass, which only counts the bytes */
    size_t off;
    struct brasa_err *err;
};

/* dst = the ranges [rg[2i], rg[2i+1]) (i < nr) of src's rows (cols = 0) or columns (cols = 1;
 * a vector's elements are columns), one after the other, copied into the shard's memory; one
 * range of a matrix's rows is read where it lies (the model's mapping of the file), not
 * copied; an absent tensor stays absent. */
static brasa_status cut(struct cutter *c, struct mdl_w *dst, const struct mdl_w *src, int cols,
                        const int64_t *rg, int nr)
{
    *dst = *src;
    if (!src->data)
        return BRASA_OK;
    int64_t n = 0;
    for (int i = 0; i < nr; i++)
        n += rg[2 * i + 1] - rg[2 * i];
    int64_t nrow = cols ? src->ne[1] : n;
    size_t rb = qtype_row_bytes(src->type, src->ne[0]);
    size_t ob = cols ? qtype_row_bytes(src->type, n) : rb, bytes = ob * (size_t)nrow;
    if (!cols && nr == 1 && src->ne[1] > 1) { /* whole consecutive rows, in place */
        if (rg[0] < 0 || rg[1] > src->ne[1] || rg[1] < rg[0])
            return brasa_fail(c->err, BRASA_EINVAL, "splitting %s: rows [%lld, %lld) of %lld",
                              src->name, (long long)rg[0], (long long)rg[1],
                              (long long)src->ne[1]);
        dst->data = (const uint8_t *)src->data + (size_t)rg[0] * rb;
        dst->ne[1] = n;
        dst->nbytes = bytes;
        return BRASA_OK;
    }
    if (c->mem) { /* (the counting pass sizes; this one checks the ranges as it copies) */
        uint8_t *o = c->mem + c->off;
        for (int i = 0; i < nr; i++) {
            int64_t a = rg[2 * i], e = rg[2 * i + 1];
            brasa_status st;
            if (cols) /* this range's part of every row, beside the previous ranges' */
                st = split_slice_pitch(src->type, src->data, src->ne[0], 0, nrow, a, e, o, ob,
                                       c->err);
            else if (a < 0 || e > src->ne[1] || e < a)
                st = brasa_fail(c->err, BRASA_EINVAL, "rows [%lld, %lld) of %lld", (long long)a,
                                (long long)e, (long long)src->ne[1]);
            else /* whole rows, consecutive in src and in dst */
                st = split_slice(src->type, src->data, src->ne[0], a, e, 0, src->ne[0], o, c->err);
            if (st != BRASA_OK)
                return brasa_wrap(c->err, st, "splitting %s", src->name);
            o += cols ? qtype_row_bytes(src->type, e - a) : (size_t)(e - a) * rb;
        }
        dst->data = c->mem + c->off;
    }
    if (cols)
        dst->ne[0] = n;
    else if (src->ne[1] > 1)
        dst->ne[1] = n;
    dst->nbytes = bytes;
    c->off += (bytes + 63) & ~(size_t)63;
    return BRASA_OK;
}

/* Rows [r0, r1) of a matrix, or elements [r0, r1) of a vector. */
static brasa_status rows(struct cutter *c, struct mdl_w *dst, const struct mdl_w *src, int64_t r0,
                         int64_t r1)
{
    const int64_t rg[2] = {r0, r1};
    return cut(c, dst, src, src->data && src->ne[1] <= 1, rg, 1);
}

static brasa_status cols(struct cutter *c, struct mdl_w *dst, const struct mdl_w *src, int64_t c0,
                         int64_t c1)
{
    const int64_t rg[2] = {c0, c1};
    return cut(c, dst, src, 1, rg, 1);
}

/* A DeltaNet layer: shard r of n takes K heads [r a, (r+1) a) (a = n_kh / n) and the V heads
 * that read them (V head h reads K head h % n_kh), local V head j being global V head
 * r a + j % a + n_kh (j / a), so that it still reads local K head j % a. rg: room for
 * 2 (2 + n_vh / n) values. */
static brasa_status cut_deltanet(struct cutter *c, const struct mdl_layer *L,
                                 struct mdl_layer *D, const struct mdl_hparams *hp, int r, int n,
                                 int64_t *rg)
{
    int64_t a = hp->ssm_n_kh / n, nv = hp->ssm_n_vh / n, dk = hp->ssm_dk, dv = hp->ssm_dv,
            nk = (int64_t)hp->ssm_n_kh * dk;
    /* q, k, v channels of the fused projection and the convolution */
    rg[0] = r * a * dk, rg[1] = rg[0] + a * dk, rg[2] = nk + rg[0], rg[3] = nk + rg[1];
    for (int64_t j = 0; j < nv; j++) {
        int64_t h = r * a + j % a + hp->ssm_n_kh * (j / a);
        rg[4 + 2 * j] = 2 * nk + h * dv, rg[5 + 2 * j] = 2 * nk + (h + 1) * dv;
    }
    brasa_status st;
    if ((st = cut(c, &D->wqkv, &L->wqkv, 0, rg, (int)(2 + nv))) ||
        (st = cut(c, &D->conv1d, &L->conv1d, 0, rg, (int)(2 + nv))))
        return st;
    for (int64_t j = 0; j < 2 * nv; j++) /* the V heads' rows / columns of dv */
        rg[4 + j] -= 2 * nk;
    if ((st = cut(c, &D->wz, &L->wz, 0, rg + 4, (int)nv)) ||
        (st = cut(c, &D->ssm_out, &L->ssm_out, 1, rg + 4, (int)nv)))
        return st;
    for (int64_t j = 0; j < nv; j++) /* one row / element per V head */
        rg[4 + 2 * j] /= dv, rg[5 + 2 * j] = rg[4 + 2 * j] + 1;
    if ((st = cut(c, &D->w_beta, &L->w_beta, 0, rg + 4, (int)nv)) ||
        (st = cut(c, &D->w_alpha, &L->w_alpha, 0, rg + 4, (int)nv)) ||
        (st = cut(c, &D->dt_bias, &L->dt_bias, 1, rg + 4, (int)nv)) ||
        (st = cut(c, &D->ssm_a, &L->ssm_a, 1, rg + 4, (int)nv)))
        return st;
    return BRASA_OK;
}

static brasa_status cut_all(struct cutter *c, const struct mdl *m, int r, int n, struct mdl *o,
                            int64_t *rg)
{
    const struct mdl_hparams *hp = &m->hp;
    int64_t hd = hp->head_dim, q0 = r * (hp->n_head / n) * hd, q1 = q0 + hp->n_head / n * hd,
            k0 = r * (hp->n_head_kv / n) * hd, k1 = k0 + hp->n_head_kv / n * hd,
            f0 = (int64_t)r * (hp->n_ff / n), f1 = f0 + hp->n_ff / n,
            v0 = (int64_t)hp->n_vocab * r / n, v1 = (int64_t)hp->n_vocab * (r + 1) / n;
    brasa_status st;
    for (int il = 0; il < hp->n_layer; il++) {
        const struct mdl_layer *L = &m->layers[il];
        struct mdl_layer *D = &o->layers[il];
        *D = *L;
        /* rows of q per head: hd, or 2 hd with qwen35's gate interleaved */
        int64_t qr = L->wq.data ? L->wq.ne[1] / hp->n_head : hd;
        if (L->recurrent ? (st = cut_deltanet(c, L, D, hp, r, n, rg)) != BRASA_OK
                         : (st = rows(c, &D->wq, &L->wq, q0 / hd * qr, q1 / hd * qr)) ||
                               (st = rows(c, &D->bq, &L->bq, q0, q1)) ||
                               (st = rows(c, &D->wk, &L->wk, k0, k1)) ||
                               (st = rows(c, &D->bk, &L->bk, k0, k1)) ||
                               (st = rows(c, &D->wv, &L->wv, k0, k1)) ||
                               (st = rows(c, &D->bv, &L->bv, k0, k1)) ||
                               (st = cols(c, &D->wo, &L->wo, q0, q1)))
            return st;
        if ((st = rows(c, &D->ffn_gate, &L->ffn_gate, f0, f1)) ||
            (st = rows(c, &D->ffn_up, &L->ffn_up, f0, f1)) ||
            (st = cols(c, &D->ffn_down, &L->ffn_down, f0, f1)))
            return st;
    }
    if ((st = rows(c, &o->token_embd, &m->token_embd, v0, v1)) != BRASA_OK)
        return st;
    if (m->output.data == m->token_embd.data) { /* tied: one slice serves both */
        o->output = o->token_embd;
        return BRASA_OK;
    }
    return rows(c, &o->output, &m->output, v0, v1);
}

brasa_status mdl_shard(const struct mdl *m, int rank, int n, struct mdl *out, void **mem,
                       struct brasa_err *err)
{
    const struct mdl_hparams *hp = &m->hp;
    memset(out, 0, sizeof *out);
    *mem = NULL;
    if (n < 1 || n > SPLIT_MAX_GPUS || rank < 0 || rank >= n)
        return brasa_fail(err, BRASA_EINVAL, "shard %d of %d (1 to %d shards)", rank, n,
                          SPLIT_MAX_GPUS);
    bool rec = false;
    for (int il = 0; il < hp->n_layer; il++)
        rec |= m->layers[il].recurrent;
    if (hp->n_head % n || hp->n_head_kv % n || hp->n_ff % n || hp->n_vocab < n)
        return brasa_fail(err, BRASA_EUNSUPPORTED, "%d heads, %d KV heads, an FFN width of %d "
                          "and %d tokens do not split over %d shards", hp->n_head, hp->n_head_kv,
                          hp->n_ff, hp->n_vocab, n);
    if (rec && (hp->ssm_n_kh % n || hp->ssm_n_vh % n || hp->ssm_n_vh % hp->ssm_n_kh))
        return brasa_fail(err, BRASA_EUNSUPPORTED, "DeltaNet layers of %d K heads and %d V heads "
                          "do not split over %d shards", hp->ssm_n_kh, hp->ssm_n_vh, n);
    *out = *m;
    out->layers = calloc((size_t)hp->n_layer, sizeof *out->layers);
    int64_t *rg = malloc(2 * (size_t)(2 + (rec ? hp->ssm_n_vh / n : 0)) * sizeof *rg);
    if (!out->layers || !rg) {
        free(rg);
        mdl_free(out);
        return brasa_fail(err, BRASA_ENOMEM, "out of memory for %d layers", hp->n_layer);
    }
    struct cutter c = {.err = err};
    brasa_status st = cut_all(&c, m, rank, n, out, rg); /* counts */
    if (st == BRASA_OK && !(c.mem = malloc(c.off ? c.off : 1)))
        st = brasa_fail(err, BRASA_ENOMEM, "out of memory for a shard of %zu MiB", c.off >> 20);
    if (st == BRASA_OK) {
        c.off = 0;
        st = cut_all(&c, m, rank, n, out, rg);
    }
    free(rg);
    if (st != BRASA_OK) {
        free(c.mem);
        mdl_free(out);
        return st;
    }
    *mem = c.mem;
    out->hp.n_head /= n;
    out->hp.n_head_kv /= n;
    out->hp.n_ff /= n;
    if (rec)
        out->hp.ssm_n_kh /= n, out->hp.ssm_n_vh /= n;
    out->hp.n_vocab = (int)(out->output.ne[1]);
    out->tp_n = n;
    out->tp_rank = rank;
    out->tp_vocab0 = (int)((int64_t)hp->n_vocab * rank / n);
    return BRASA_OK;
}
