/* blocks: what the model families share: reading keys and tensors, and the graph blocks
 * (norm, attention, SwiGLU FFN, gated DeltaNet, residual, embedding and output head). */
#include "model/model.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf.h"
#include "quant/quant.h"

/* ---------------------------------------------------------------- loading */

brasa_status mdl_tensor(const struct gguf_file *f, struct mdl_w *w, bool optional, int64_t ne0,
                        int64_t ne1, struct brasa_err *err, const char *fmt, ...)
{
    memset(w, 0, sizeof *w);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->name, sizeof w->name, fmt, ap);
    va_end(ap);
    const struct gguf_tensor *t = gguf_find_tensor(f, w->name);
    if (!t) {
        if (optional)
            return BRASA_OK;
        return brasa_fail(err, BRASA_ENOTFOUND, "tensor %s is missing from the file", w->name);
    }
    int64_t want1 = ne1 > 0 ? ne1 : 1;
    if (t->ne[0] != ne0 || t->ne[1] != want1 || t->ne[2] != 1 || t->ne[3] != 1)
        return brasa_fail(err, BRASA_EFORMAT,
                          "tensor %s has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                          w->name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                          (long long)t->ne[3], (long long)ne0, (long long)want1);
    const struct qtype_info *qi = qtype_get(t->type);
    if (!qi || !qi->can_dequant)
        return brasa_fail(err, BRASA_EUNSUPPORTED, "tensor %s has type %s, which brasa cannot run",
                          w->name, qi ? qi->name : "unknown");
    w->data = t->data;
    w->type = t->type;
    w->ne[0] = t->ne[0];
    w->ne[1] = want1;
    w->nbytes = t->nbytes;
    /* a vector (norm weights, biases, gates) the graph reads as floats itself */
    return ne1 > 0 ? BRASA_OK : mdl_need_f32(w, err);
}

brasa_status mdl_need_f32(const struct mdl_w *w, struct brasa_err *err)
{
    if (w->data && w->type != GGML_TYPE_F32)
        return brasa_fail(err, BRASA_EUNSUPPORTED, "tensor %s must be F32 (it is %s)", w->name,
                          qtype_get(w->type)->name);
    return BRASA_OK;
}

static brasa_status key_int(const struct gguf_file *f, const char *arch, const char *key, int *out,
                            int def, bool required, struct brasa_err *err)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    int64_t v;
    brasa_status st = gguf_get_i64(f, k, &v, err);
    if (st == BRASA_ENOTFOUND && !required) {
        *out = def;
        return BRASA_OK;
    }
    if (st != BRASA_OK)
        return st == BRASA_ENOTFOUND ? brasa_fail(err, st, "key %s is missing from the file", k)
                                     : st;
    if (v < 1 || v > (1 << 24))
        return brasa_fail(err, BRASA_EFORMAT, "key %s = %lld is out of range", k, (long long)v);
    *out = (int)v;
    return BRASA_OK;
}

static brasa_status key_f32(const struct gguf_file *f, const char *arch, const char *key, float *out,
                            float def, struct brasa_err *err)
{
    char k[128];
    snprintf(k, sizeof k, "%s.%s", arch, key);
    return gguf_get_f32_or(f, k, def, out, err);
}

brasa_status mdl_read_common(struct mdl *m, const struct gguf_file *f, struct brasa_err *err)
{
    struct mdl_hparams *hp = &m->hp;
    const char *a = m->arch->name;
    brasa_status st;
    if ((st = key_int(f, a, "embedding_length", &hp->n_embd, 0, true, err)) ||
        (st = key_int(f, a, "block_count", &hp->n_layer, 0, true, err)) ||
        (st = key_int(f, a, "attention.head_count", &hp->n_head, 0, true, err)) ||
        (st = key_int(f, a, "attention.head_count_kv", &hp->n_head_kv, hp->n_head, false, err)) ||
        (st = key_int(f, a, "feed_forward_length", &hp->n_ff, 0, true, err)) ||
        (st = key_int(f, a, "context_length", &hp->n_ctx_train, 4096, false, err)))
        return st;
    if ((st = key_int(f, a, "attention.key_length", &hp->head_dim, hp->n_embd / hp->n_head, false,
                      err)) ||
        (st = key_int(f, a, "rope.dimension_count", &hp->n_rot, hp->head_dim, false, err)) ||
        (st = key_f32(f, a, "rope.freq_base", &hp->rope_base, 10000.0f, err)) ||
        (st = key_f32(f, a, "attention.layer_norm_rms_epsilon", &hp->eps, 1e-5f, err)))
        return st;
    if (hp->n_head % hp->n_head_kv != 0)
        return brasa_fail(err, BRASA_EFORMAT, "%d attention heads are not a multiple of %d KV heads",
                          hp->n_head, hp->n_head_kv);
    if (hp->n_rot > hp->head_dim || hp->n_rot % 2 != 0)
        return brasa_fail(err, BRASA_EFORMAT, "rope.dimension_count %d does not fit head size %d",
                          hp->n_rot, hp->head_dim);
    hp->kq_scale = 1.0f / sqrtf((float)hp->head_dim);
    hp->emb_scale = hp->res_scale = hp->logit_scale = 1.0f;
    hp->rope_mode = ROPE_NORM;
    return BRASA_OK;
}

brasa_status mdl_load_dense(struct mdl *m, const struct gguf_file *f, bool biases, bool qk_norm,
                            struct brasa_err *err)
{
    const struct mdl_hparams *hp = &m->hp;
    int64_t E = hp->n_embd, hd = hp->head_dim, nq = (int64_t)hp->n_head * hd,
            nkv = (int64_t)hp->n_head_kv * hd, F = hp->n_ff;
    brasa_status st;
    for (int il = 0; il < hp->n_layer; il++) {
        struct mdl_layer *L = &m->layers[il];
#define T_(w, opt, a, b, s)                                                            \
    if ((st = mdl_tensor(f, &L->w, opt, a, b, err, "blk.%d." s ".weight", il)) != BRASA_OK) \
        return st;
#define V_(w, opt, n, s)                                                        \
    if ((st = mdl_tensor(f, &L->w, opt, n, 0, err, "blk.%d." s, il)) != BRASA_OK) \
        return st;
        V_(attn_norm, false, E, "attn_norm.weight");
        T_(wq, false, E, nq, "attn_q");
        T_(wk, false, E, nkv, "attn_k");
        T_(wv, false, E, nkv, "attn_v");
        T_(wo, false, nq, E, "attn_output");
        if (biases) {
            V_(bq, false, nq, "attn_q.bias");
            V_(bk, false, nkv, "attn_k.bias");
            V_(bv, false, nkv, "attn_v.bias");
        }
        if (qk_norm) {
            V_(q_norm, false, hd, "attn_q_norm.weight");
            V_(k_norm, false, hd, "attn_k_norm.weight");
        }
        V_(ffn_norm, false, E, "ffn_norm.weight");
        T_(ffn_gate, false, E, F, "ffn_gate");
        T_(ffn_up, false, E, F, "ffn_up");
        T_(ffn_down, false, F, E, "ffn_down");
#undef T_
#undef V_
    }
    return BRASA_OK;
}

/* token_embd, output_norm and output (tied to token_embd when absent). */
static brasa_status load_io(struct mdl *m, const struct gguf_file *f, struct brasa_err *err)
{
    const struct gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    if (!t)
        return brasa_fail(err, BRASA_ENOTFOUND, "tensor token_embd.weight is missing from the file");
    if (t->ne[1] < 1 || t->ne[1] > (1 << 24))
        return brasa_fail(err, BRASA_EFORMAT, "token_embd.weight has %lld rows",
                          (long long)t->ne[1]);
    m->hp.n_vocab = (int)t->ne[1];
    brasa_status st;
    if ((st = mdl_tensor(f, &m->token_embd, false, m->hp.n_embd, m->hp.n_vocab, err,
                         "token_embd.weight")) ||
        (st = mdl_tensor(f, &m->output_norm, false, m->hp.n_embd, 0, err, "output_norm.weight")) ||
        (st = mdl_tensor(f, &m->output, true, m->hp.n_embd, m->hp.n_vocab, err, "output.weight")))
        return st;
    if (!m->output.data)
        m->output = m->token_embd;
    return BRASA_OK;
}

brasa_status mdl_load(struct mdl *m, const struct gguf_file *f, struct brasa_err *err)
{
    char *arch = NULL;
    brasa_status st = gguf_get_str(f, "general.architecture", &arch, err);
    if (st != BRASA_OK)
        return brasa_wrap(err, st, "reading the model family");
    st = mdl_arch_find(arch, &m->arch, err);
    free(arch);
    if (st != BRASA_OK)
        return st;
    if ((st = mdl_read_common(m, f, err)) != BRASA_OK)
        return st;
    /* every layer has tensors of its own: a block count beyond the file's tensors is a bad
     * file, not millions of layer records to allocate before the first missing tensor */
    if ((uint64_t)m->hp.n_layer > f->n_tensors)
        return brasa_fail(err, BRASA_EFORMAT, "%s.block_count is %d but the file holds only "
                          "%llu tensors", m->arch->name, m->hp.n_layer,
                          (unsigned long long)f->n_tensors);
    m->layers = calloc((size_t)m->hp.n_layer, sizeof *m->layers);
    if (!m->layers)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory for %d layers", m->hp.n_layer);
    if ((st = load_io(m, f, err)) != BRASA_OK || (st = m->arch->load(m, f, err)) != BRASA_OK)
        return st;
    /* parameters and the bytes one decode step reads: every tensor except the embedding
     * table, of which one row is read (unless it is also the output head) */
    uint64_t total = 0, params = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        total += t->nbytes;
        params += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    }
    m->n_params = params;
    m->weight_bytes_per_token = total;
    if (m->output.data != m->token_embd.data)
        m->weight_bytes_per_token -= m->token_embd.nbytes - m->token_embd.nbytes / m->hp.n_vocab;
    return BRASA_OK;
}

void mdl_free(struct mdl *m)
{
    free(m->layers);
    m->layers = NULL;
}

/* ---------------------------------------------------------------- graph blocks */

static int weight(struct blk *b, const struct mdl_w *w)
{
    if (!w->data)
        return -1;
    int n = graph_add(b->g, GOP_WEIGHT, w->name, -1, -1, -1, -1, w->ne[0], w->ne[1]);
    if (n >= 0) {
        b->g->nodes[n].data = (void *)w->data;
        b->g->nodes[n].type = w->type;
    }
    return n;
}

static int state(struct blk *b, void *data, uint32_t type, int64_t ne0, int64_t ne1,
                 const char *name, int il)
{
    int n = graph_addf(b->g, GOP_STATE, -1, -1, -1, -1, ne0, ne1, "blk.%d.%s", il, name);
    if (n >= 0) {
        b->g->nodes[n].data = data;
        b->g->nodes[n].type = type;
    }
    return n;
}

static struct graph_node *node(struct blk *b, int n)
{
    static struct graph_node dummy; /* absorbs parameter writes after an allocation failure */
    return n >= 0 ? &b->g->nodes[n] : &dummy;
}

/* y = x W^T (+ bias), named "blk.N.<what>". */
static int matmul(struct blk *b, int il, int x, const struct mdl_w *w, const struct mdl_w *bias,
                  const char *what)
{
    int wn = weight(b, w), bn = bias && bias->data ? weight(b, bias) : -1;
    return graph_addf(b->g, GOP_MATMUL, x, wn, bn, -1, w->ne[1], b->n_tok, "blk.%d.%s", il, what);
}

int blk_norm(struct blk *b, int il, int x, const struct mdl_w *w, const char *what)
{
    int wn = weight(b, w);
    int n = graph_addf(b->g, GOP_RMS_NORM, x, wn, -1, -1, b->m->hp.n_embd, b->n_tok, "blk.%d.%s",
                       il, what);
    node(b, n)->p.i[0] = b->m->hp.n_embd;
    node(b, n)->p.f[0] = b->m->hp.eps;
    return n;
}

/* RoPE of each head of x, after its RMSNorm with the weights nw where the family has head norms
 * (qwen3, qwen35: the norm is the ROPE's own, so a backend reads the product's output once) */
static int rope(struct blk *b, int il, int x, const struct mdl_w *nw, int n_heads,
                const char *what)
{
    const struct mdl_hparams *hp = &b->m->hp;
    int n = graph_addf(b->g, GOP_ROPE, x, nw->data ? weight(b, nw) : -1, -1, -1,
                       (int64_t)n_heads * hp->head_dim, b->n_tok, "blk.%d.%s", il, what);
    struct graph_node *nd = node(b, n);
    nd->p.i[0] = hp->head_dim;
    nd->p.i[1] = hp->n_rot;
    nd->p.i[2] = hp->rope_mode;
    nd->p.f[0] = hp->rope_base;
    nd->p.f[1] = nw->data ? hp->eps : 0.0f;
    return n;
}

static int view(struct blk *b, int il, int x, int64_t off, int64_t n0, int64_t n1, int64_t s1,
                int64_t s2, int64_t ne0, int64_t ne1, const char *what)
{
    int n = graph_addf(b->g, GOP_VIEW, x, -1, -1, -1, ne0, ne1, "blk.%d.%s", il, what);
    struct graph_node *nd = node(b, n);
    nd->p.i[0] = (int32_t)off;
    nd->p.i[1] = (int32_t)n0;
    nd->p.i[2] = (int32_t)n1;
    nd->p.i[3] = (int32_t)s1;
    nd->p.i[4] = (int32_t)s2;
    return n;
}

int blk_attention(struct blk *b, int il, int xn, bool gated)
{
    const struct mdl_hparams *hp = &b->m->hp;
    const struct mdl_layer *L = &b->m->layers[il];
    struct graph *g = b->g;
    int64_t hd = hp->head_dim, nq = (int64_t)hp->n_head * hd, nkv = (int64_t)hp->n_head_kv * hd;
    /* gated: rows per head, hd of query then hd of gate (split after the k and v products,
     * so that a backend may run the three products, which read the same input, together) */
    int q = matmul(b, il, xn, &L->wq, gated ? NULL : &L->bq, gated ? "attn_qg" : "q"), gate = -1;
    int k = matmul(b, il, xn, &L->wk, &L->bk, "k");
    int v = matmul(b, il, xn, &L->wv, &L->bv, "v");
    if (gated) {
        gate = view(b, il, q, hd, hd, hp->n_head, 2 * hd, 2 * nq, nq, b->n_tok, "attn_gate");
        q = view(b, il, q, 0, hd, hp->n_head, 2 * hd, 2 * nq, nq, b->n_tok, "q");
    }
    q = rope(b, il, q, &L->q_norm, hp->n_head, "q_rope");
    k = rope(b, il, k, &L->k_norm, hp->n_head_kv, "k_rope");
    int kc = state(b, b->c->k[il], b->c->kv_type, nkv, b->c->n_ctx, "k_cache", il);
    int vc = state(b, b->c->v[il], b->c->kv_type, nkv, b->c->n_ctx, "v_cache", il);
    int ks = graph_addf(g, GOP_KV_STORE, k, kc, -1, -1, 0, 0, "blk.%d.k_store", il);
    int vs = graph_addf(g, GOP_KV_STORE, v, vc, -1, -1, 0, 0, "blk.%d.v_store", il);
    int a = graph_addf(g, GOP_ATTN, q, ks, vs, -1, nq, b->n_tok, "blk.%d.kqv_out", il);
    struct graph_node *an = node(b, a);
    an->p.i[0] = hp->n_head;
    an->p.i[1] = hp->n_head_kv;
    an->p.i[2] = (int32_t)hd;
    an->p.f[0] = hp->kq_scale;
    if (gated)
        a = graph_addf(g, GOP_SIGMOID_MUL, a, gate, -1, -1, nq, b->n_tok, "blk.%d.kqv_gated", il);
    return matmul(b, il, a, &L->wo, NULL, "attn_out");
}

int blk_ffn(struct blk *b, int il, int xn)
{
    const struct mdl_layer *L = &b->m->layers[il];
    int gt = matmul(b, il, xn, &L->ffn_gate, NULL, "ffn_gate");
    int up = matmul(b, il, xn, &L->ffn_up, NULL, "ffn_up");
    int h = graph_addf(b->g, GOP_SWIGLU, gt, up, -1, -1, b->m->hp.n_ff, b->n_tok, "blk.%d.ffn_swiglu",
                       il);
    return matmul(b, il, h, &L->ffn_down, NULL, "ffn_out");
}

int blk_deltanet(struct blk *b, int il, int xn)
{
    const struct mdl_hparams *hp = &b->m->hp;
    const struct mdl_layer *L = &b->m->layers[il];
    struct graph *g = b->g;
    int64_t nk = (int64_t)hp->ssm_n_kh * hp->ssm_dk, nv = (int64_t)hp->ssm_n_vh * hp->ssm_dv;
    int64_t C = 2 * nk + nv, T = b->n_tok;
    int qkv = matmul(b, il, xn, &L->wqkv, NULL, "ssm_qkv");
    int z = matmul(b, il, xn, &L->wz, NULL, "ssm_z");
    int beta = matmul(b, il, xn, &L->w_beta, NULL, "ssm_beta_raw");
    int alpha = matmul(b, il, xn, &L->w_alpha, NULL, "ssm_alpha_raw");
    int cs = state(b, b->c->conv[il], 0, C, hp->conv_k - 1, "conv_state", il);
    /* the convolution's output, SiLU applied: each token's row q (nk) | k (nk) | v (nv), which
     * DELTANET reads in place, q and k L2-normalized per head as it reads them */
    int cv = graph_addf(g, GOP_CONV1D, qkv, weight(b, &L->conv1d), cs, -1, C, T, "blk.%d.ssm_conv",
                        il);
    node(b, cv)->p.i[0] = hp->conv_k;
    node(b, cv)->p.i[1] = 1;
    int gates = graph_addf(g, GOP_GATES, alpha, beta, weight(b, &L->dt_bias), weight(b, &L->ssm_a),
                           2 * hp->ssm_n_vh, T, "blk.%d.ssm_gates", il);
    int ss = state(b, b->c->ssm[il], 0, (int64_t)hp->ssm_dk * hp->ssm_dv,
                   hp->ssm_n_vh, "ssm_state", il);
    int o = graph_addf(g, GOP_DELTANET, cv, gates, -1, -1, nv, T, "blk.%d.ssm_o", il);
    struct graph_node *on = node(b, o);
    on->state = ss;
    on->p.i[0] = hp->ssm_n_kh;
    on->p.i[1] = hp->ssm_n_vh;
    on->p.i[2] = hp->ssm_dk;
    on->p.i[3] = hp->ssm_dv;
    on->p.f[0] = hp->eps;
    o = graph_addf(g, GOP_RMS_NORM_GATE, o, weight(b, &L->ssm_norm), z, -1, nv, T,
                   "blk.%d.ssm_o_normed", il);
    node(b, o)->p.i[0] = hp->ssm_dv;
    node(b, o)->p.f[0] = hp->eps;
    return matmul(b, il, o, &L->ssm_out, NULL, "ssm_out");
}

/* x + branch * res_scale. In a shard (mdl_shard) the branch is the shard's part of a product
 * whose input is split over the shards (attention output, FFN down, DeltaNet output): the
 * first shard adds x to its part, the others scale theirs, and the all-reduce sums them in
 * place. The first shard's add stays next to its product, so the GPU fuses it into the
 * product's epilogue, as in a whole model. (A shard of one has its all-reduces too: a sum over
 * one device, which checks the path on one GPU.) */
int blk_residual(struct blk *b, int il, int x, int branch, const char *what)
{
    const struct mdl *m = b->m;
    int n;
    if (m->tp_n >= 1 && m->tp_rank > 0) {
        if (m->hp.res_scale == 1.0f)
            return graph_addf(b->g, GOP_ALLREDUCE, branch, -1, -1, -1, m->hp.n_embd, b->n_tok,
                              "blk.%d.%s", il, what);
        n = graph_addf(b->g, GOP_SCALE, branch, -1, -1, -1, m->hp.n_embd, b->n_tok,
                       "blk.%d.%s_part", il, what);
    } else {
        n = graph_addf(b->g, GOP_ADD, x, branch, -1, -1, m->hp.n_embd, b->n_tok, "blk.%d.%s%s",
                       il, what, m->tp_n >= 1 ? "_part" : "");
    }
    node(b, n)->p.f[0] = m->hp.res_scale;
    if (m->tp_n < 1)
        return n;
    return graph_addf(b->g, GOP_ALLREDUCE, n, -1, -1, -1, m->hp.n_embd, b->n_tok, "blk.%d.%s", il,
                      what);
}

int blk_decoder(struct blk *b, int x)
{
    for (int il = 0; il < b->m->hp.n_layer; il++) {
        const struct mdl_layer *L = &b->m->layers[il];
        int h = blk_norm(b, il, x, &L->attn_norm, "attn_norm");
        x = blk_residual(b, il, x, blk_attention(b, il, h, false), "ffn_inp");
        h = blk_norm(b, il, x, &L->ffn_norm, "ffn_norm");
        x = blk_residual(b, il, x, blk_ffn(b, il, h), "l_out");
    }
    return x;
}

brasa_status mdl_build(const struct mdl *m, const struct mdl_cache *c, int n_tok, bool logits_all,
                       struct graph *g, struct brasa_err *err)
{
    brasa_status st = graph_init(g, n_tok, err);
    if (st != BRASA_OK)
        return st;
    struct blk b = {.m = m, .c = c, .g = g, .n_tok = n_tok};
    const struct mdl_hparams *hp = &m->hp;
    int tok = graph_add(g, GOP_INPUT, "tokens", -1, -1, -1, -1, n_tok, 1);
    if (tok >= 0)
        g->nodes[tok].p.i[0] = GIN_TOKENS;
    int x = graph_add(g, GOP_GET_ROWS, "inp_embd", weight(&b, &m->token_embd), tok, -1, -1,
                      hp->n_embd, n_tok);
    node(&b, x)->p.f[0] = hp->emb_scale;
    node(&b, x)->p.i[0] = m->tp_vocab0;
    if (m->tp_n >= 1) /* each shard holds a slice of the table */
        x = graph_add(g, GOP_ALLREDUCE, "inp_embd_sum", x, -1, -1, -1, hp->n_embd, n_tok);
    x = m->arch->build(&b, x);
    int n_out = n_tok;
    if (!logits_all && n_tok > 1) {
        x = graph_add(g, GOP_VIEW, "inp_out_last", x, -1, -1, -1, hp->n_embd, 1);
        struct graph_node *v = node(&b, x);
        v->p.i[0] = (n_tok - 1) * hp->n_embd;
        v->p.i[1] = hp->n_embd;
        v->p.i[2] = 1;
        n_out = 1;
    }
    x = graph_add(g, GOP_RMS_NORM, "result_norm", x, weight(&b, &m->output_norm), -1, -1,
                  hp->n_embd, n_out);
    node(&b, x)->p.i[0] = hp->n_embd;
    node(&b, x)->p.f[0] = hp->eps;
    x = graph_add(g, GOP_MATMUL, "result_output", x, weight(&b, &m->output), -1, -1, hp->n_vocab,
                  n_out);
    if (hp->logit_scale != 1.0f) {
        x = graph_add(g, GOP_SCALE, "result_scaled", x, -1, -1, -1, hp->n_vocab, n_out);
        node(&b, x)->p.f[0] = 1.0f / hp->logit_scale;
    }
    g->out = x;
    g->n_out = n_out;
    if (!graph_ok(g) || x < 0) {
        graph_free(g);
        return brasa_fail(err, BRASA_ENOMEM, "out of memory building the compute graph");
    }
    if ((st = graph_plan(g, err)) != BRASA_OK)
        graph_free(g);
    return st;
}
