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

/* dst = rows [r0, r1) and columns [c0, c1) of src (a vector is one row), copied into the
 * shard's memory; an absent tensor stays absent. */
static brasa_status cut(struct cutter *c, struct mdl_w *dst, const struct mdl_w *src, int64_t r0,
                        int64_t r1, int64_t c0, int64_t c1)
{
    *dst = *src;
    if (!src->data)
        return BRASA_OK;
    size_t bytes = qtype_row_bytes(src->type, c1 - c0) * (size_t)(r1 - r0);
    if (c->mem) {
        brasa_status st = split_slice(src->type, src->data, src->ne[0], r0, r1, c0, c1,
                                      c->mem + c->off, c->err);
        if (st != BRASA_OK)
            return brasa_wrap(c->err, st, "splitting %s", src->name);
        dst->data = c->mem + c->off;
    }
    dst->ne[0] = c1 - c0;
    if (src->ne[1] > 1) /* a matrix */
        dst->ne[1] = r1 - r0;
    dst->nbytes = bytes;
    c->off += (bytes + 63) & ~(size_t)63;
    return BRASA_OK;
}

/* Rows [r0, r1) of a matrix, or elements [r0, r1) of a vector. */
static brasa_status rows(struct cutter *c, struct mdl_w *dst, const struct mdl_w *src, int64_t r0,
                         int64_t r1)
{
    if (src->data && src->ne[1] <= 1)
        return cut(c, dst, src, 0, 1, r0, r1);
    return cut(c, dst, src, r0, r1, 0, src->ne[0]);
}

static brasa_status cols(struct cutter *c, struct mdl_w *dst, const struct mdl_w *src, int64_t c0,
                         int64_t c1)
{
    return cut(c, dst, src, 0, src->ne[1], c0, c1);
}

static brasa_status cut_all(struct cutter *c, const struct mdl *m, int r, int n, struct mdl *o)
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
        if ((st = rows(c, &D->wq, &L->wq, q0, q1)) || (st = rows(c, &D->bq, &L->bq, q0, q1)) ||
            (st = rows(c, &D->wk, &L->wk, k0, k1)) || (st = rows(c, &D->bk, &L->bk, k0, k1)) ||
            (st = rows(c, &D->wv, &L->wv, k0, k1)) || (st = rows(c, &D->bv, &L->bv, k0, k1)) ||
            (st = cols(c, &D->wo, &L->wo, q0, q1)) ||
            (st = rows(c, &D->ffn_gate, &L->ffn_gate, f0, f1)) ||
            (st = rows(c, &D->ffn_up, &L->ffn_up, f0, f1)) ||
            (st = cols(c, &D->ffn_down, &L->ffn_down, f0, f1)))
            return st;
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
    for (int il = 0; il < hp->n_layer; il++)
        if (m->layers[il].recurrent)
            return brasa_fail(err, BRASA_EUNSUPPORTED, "%s: the split of DeltaNet layers over "
                              "shards is not implemented", m->arch->name);
    if (hp->n_head % n || hp->n_head_kv % n || hp->n_ff % n || hp->n_vocab < n)
        return brasa_fail(err, BRASA_EUNSUPPORTED, "%d heads, %d KV heads, an FFN width of %d "
                          "and %d tokens do not split over %d shards", hp->n_head, hp->n_head_kv,
                          hp->n_ff, hp->n_vocab, n);
    *out = *m;
    out->layers = calloc((size_t)hp->n_layer, sizeof *out->layers);
    if (!out->layers)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory for %d layers", hp->n_layer);
    struct cutter c = {.err = err};
    brasa_status st = cut_all(&c, m, rank, n, out); /* counts */
    if (st == BRASA_OK && !(c.mem = malloc(c.off ? c.off : 1)))
        st = brasa_fail(err, BRASA_ENOMEM, "out of memory for a shard of %zu MiB", c.off >> 20);
    if (st == BRASA_OK) {
        c.off = 0;
        st = cut_all(&c, m, rank, n, out);
    }
    if (st != BRASA_OK) {
        free(c.mem);
        mdl_free(out);
        return st;
    }
    *mem = c.mem;
    out->hp.n_head /= n;
    out->hp.n_head_kv /= n;
    out->hp.n_ff /= n;
    out->hp.n_vocab = (int)(out->output.ne[1]);
    out->tp_n = n;
    out->tp_rank = rank;
    return BRASA_OK;
}
