/* graph: the forward pass as plain data.
 *
 * A model family builds one graph per batch size (src/model/); a backend executes it node by
 * node in order (src/cpu/ now, src/gpu/ later, which may also fuse node sequences into new op
 * kinds). A graph is an array of nodes in execution (topological) order. Nothing here owns
 * weights or state: leaves point into the mapped file or into session-owned buffers.
 *
 * Conventions
 *   - Shapes: ne[0] is the fastest (contiguous) dimension, as in GGUF. Activations are 2-D
 *     [ne1 = tokens][ne0 = features] F32, row-major, contiguous; ne[2], ne[3] are 1 unless said.
 *   - Names: every node has a name such as "blk.3.attn_norm" or "result_output"; any node can
 *     be dumped by name (BRASA_DUMP=name1,name2 in the environment; see cpu/cpu.h).
 *   - Runtime values: the batch's first position (pos0) and the token ids are not in the graph;
 *     they come with each run (struct graph_run), so one graph serves every decode step.
 *   - Memory: leaves (INPUT, WEIGHT, STATE) carry their own data pointer; every other node's
 *     output lives in one activation arena at node->offset, planned once by graph_plan()
 *     (liveness: a buffer is reused after its last reader). In-place ops (KV_STORE, CONV1D's
 *     state, DELTANET's state) write to STATE leaves and also produce a normal output.
 *
 * Ops (out = the node's output; a, b, c, d = inputs[0..3]; p.i[] / p.f[] = params)
 *   INPUT      leaf. Host data supplied per run. p.i[0] = GIN_TOKENS (int32 [n_tok]).
 *   WEIGHT     leaf. A tensor of the model file: data, wtype (ggml type), ne as in GGUF
 *              (a matrix is ne[0] = k (input features) × ne[1] = rows (output features)).
 *   STATE      leaf. A session buffer that persists across runs (KV cache of one layer, conv
 *              state, DeltaNet state); wtype is its element type (F32 or F16).
 *   GET_ROWS   out[t][:] = dequant(a[ids[t] - p.i[0]][:]) * p.f[0]; a = WEIGHT [n_vocab][n_embd],
 *              b = INPUT tokens. (p.f[0]: Granite's embedding scale, 1 otherwise; p.i[0]: the
 *              table's first token, 0 but in a shard's slice of the vocabulary, where a token
 *              outside the slice gives a row of zeros and an ALLREDUCE adds the shards' rows.)
 *   RMS_NORM   per group of p.i[0] consecutive elements (a row, or one head when applied per
 *              head): out = x / sqrt(mean(x²) + p.f[0]) * b[j % group]; b = WEIGHT F32 [group].
 *   L2_NORM    per group of p.i[0] elements: out = x / max(‖x‖₂, p.f[0]).
 *   MATMUL     out[t][i] = Σ_k W[i][k]·x[t][k] (+ c[i] if c is set): a = x [n_tok][k],
 *              b = W (WEIGHT, any ggml type; the activation is converted to the type's
 *              vec_dot_type first, as ggml does), c = optional bias F32 [rows].
 *   ADD        out = a + b * p.f[0]  (residual add; p.f[0] = Granite's residual scale or 1).
 *   MUL        out = a ⊙ b (same shape).
 *   SCALE      out = a * p.f[0].
 *   SWIGLU     out = silu(a) ⊙ b, silu(x) = x / (1 + e^-x).
 *   SILU       out = silu(a).
 *   SIGMOID_MUL out = a ⊙ sigmoid(b) (same shape; qwen35's attention output gate).
 *   VIEW       strided gather into a contiguous out (shape ne as given, only the element count
 *              matters): out[i0 + n0·(i1 + n1·i2)] = a[off + i0 + i1·s1 + i2·s2] with
 *              p.i = {off, n0, n1, s1, s2} (elements). Splits fused projections (q|k|v,
 *              query|gate per head) and picks the last row before the output head.
 *   ROPE       rotary embedding per head, in place semantics on a copy: a = [n_tok][n_head·hd],
 *              p.i[0] = head dim hd, p.i[1] = n_rot (dims rotated, first n_rot of each head,
 *              the rest copied), p.i[2] = mode (ROPE_NORM: pairs (2i, 2i+1); ROPE_NEOX:
 *              pairs (i, i + n_rot/2)), p.f[0] = freq base. Token t has position pos0 + t;
 *              pair i turns by angle pos · base^(-2i/n_rot). b (optional, WEIGHT F32 [hd]):
 *              each head is RMS-normalized first, x / sqrt(mean(x²) + p.f[1]) * b[j], as
 *              RMS_NORM per head (qwen3's and qwen35's q and k norms).
 *   KV_STORE   copies a [n_tok][n_kv·hd] into rows pos0 .. pos0+n_tok-1 of the cache b (STATE
 *              [n_ctx][n_kv·hd], F32 or F16). A side effect only: out is empty (ne = 0).
 *   ATTN       causal multi-head attention over the cache. a = q [n_tok][n_head·hd] (already
 *              roped), b = the K KV_STORE node, c = the V KV_STORE node (the caches are their
 *              in[1]). p.i[0] = n_head, p.i[1] = n_head_kv, p.i[2] = hd, p.f[0] = KQ scale.
 *              Query t (position pos0+t) attends to cache rows 0..pos0+t; query head h reads KV
 *              head h / (n_head / n_head_kv). softmax(scale·q·k) over the rows, then Σ p·v.
 *              With an F16 cache, q and the probabilities are rounded to F16 before their
 *              products (as ggml's F16 matmul does). out = [n_tok][n_head·hd].
 *   CONV1D     causal depthwise conv over time with a rolling state: a = x [n_tok][C],
 *              b = WEIGHT F32 [C][K] (ne[0] = K, index 0 = oldest tap), c = STATE F32
 *              [K-1][C] (the last K-1 inputs, oldest first; zero for a fresh session).
 *              out[t][ch] = Σ_j w[ch][j]·x̃[t+j][ch] where x̃ = state rows then x. The state is
 *              updated to the last K-1 rows of x̃. p.i[0] = K.
 *   DELTANET   gated delta rule over the batch, per V head: a = q, b = k (L2-normed,
 *              [n_tok][n_kh·dk]), c = v [n_tok][n_vh·dv], d = gates [n_tok][2·n_vh] (per
 *              token: g of every V head, then β of every V head; see GATES); the state is
 *              node->state (a STATE leaf, F32 [n_vh][dv][dk], M[i][j] = row i of M).
 *              V head h uses K head h % n_kh. Per token: M ← M·e^g; δ = β(v − M k);
 *              M ← M + δ kᵀ; o = M q / sqrt(dk). p.i[0] = n_kh, p.i[1] = n_vh, p.i[2] = dk,
 *              p.i[3] = dv. out = [n_tok][n_vh·dv].
 *   GATES      qwen35's per-head gates: a = alpha [n_tok][n_vh], b = beta_raw [n_tok][n_vh],
 *              c = dt_bias WEIGHT F32 [n_vh], d = A WEIGHT F32 [n_vh] (negative).
 *              out[t] = (g[0..n_vh), β[0..n_vh)) with g = softplus(alpha + dt_bias)·A
 *              (softplus(x) = x for x > 20), β = sigmoid(beta_raw).
 *   RMS_NORM_GATE  per group of p.i[0]: out = rmsnorm(a)·b ⊙ silu(c) (eps p.f[0]); qwen35's
 *              DeltaNet output norm with z = c.
 *   ALLREDUCE  out = the sum over the shards of a tensor-parallel model (model/shard.c) of a,
 *              the same node in every shard's graph: the partial sums of the attention, DeltaNet
 *              output and FFN down products, and the shards' rows of the embedding. Whoever runs
 *              the shards adds them; a backend running one graph alone copies a.
 */
#ifndef BRASA_GRAPH_H
#define BRASA_GRAPH_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/status.h"

enum graph_op {
    GOP_INPUT = 0,
    GOP_WEIGHT,
    GOP_STATE,
    GOP_GET_ROWS,
    GOP_RMS_NORM,
    GOP_L2_NORM,
    GOP_MATMUL,
    GOP_ADD,
    GOP_MUL,
    GOP_SCALE,
    GOP_SWIGLU,
    GOP_SILU,
    GOP_SIGMOID_MUL,
    GOP_VIEW,
    GOP_ROPE,
    GOP_KV_STORE,
    GOP_ATTN,
    GOP_CONV1D,
    GOP_DELTANET,
    GOP_GATES,
    GOP_RMS_NORM_GATE,
    GOP_ALLREDUCE,
    GOP_COUNT
};

enum graph_input_kind { GIN_TOKENS = 0 };
enum rope_mode { ROPE_NORM = 0, ROPE_NEOX = 2 };

#define GRAPH_MAX_IN 4
#define GRAPH_NAME_MAX 48

struct graph_node {
    enum graph_op op;
    char name[GRAPH_NAME_MAX];   /* "blk.3.attn_norm" */
    int in[GRAPH_MAX_IN];        /* node indices of the inputs, -1 if unused */
    int64_t ne[4];               /* output shape, ne[0] fastest */
    uint32_t type;               /* element type of the output/leaf (ggml type id: 0 = F32) */
    struct {
        int32_t i[6];
        float f[4];
    } p;                         /* op parameters (see the table above) */
    int state;                   /* DELTANET: node index of its STATE leaf, else -1 */
    /* leaves: where the data is (mapped weight or session buffer); NULL for INPUT */
    void *data;
    /* planned: byte offset of the output in the activation arena (non-leaves) */
    size_t offset;
    size_t nbytes;               /* output bytes (F32 activations: 4 · Π ne) */
};

struct graph {
    struct graph_node *nodes;    /* [n] in execution order */
    int n, cap;
    int n_tok;                   /* batch size this graph was built for */
    int out;                     /* index of the node holding the logits [n_out][n_vocab] */
    int n_out;                   /* rows of logits it produces (n_tok or 1) */
    size_t arena_bytes;          /* set by graph_plan() */
};

/* Runtime values of one execution. */
struct graph_run {
    int pos0;                    /* position of the batch's first token */
    const int32_t *tokens;       /* [n_tok] */
    int top_k;                   /* GPU, output of one row: select the top_k largest (at most
                                  * 256) on the device and send only those (0: the whole row) */
};

brasa_status graph_init(struct graph *g, int n_tok, struct brasa_err *err);
void graph_free(struct graph *g);

/* Appends a node; returns its index, or -1 when out of memory (graph_ok() then reports it).
 * Builders check once at the end rather than after every node. */
int graph_add(struct graph *g, enum graph_op op, const char *name, int a, int b, int c, int d,
              int64_t ne0, int64_t ne1);
/* printf-style name helper for builders: "blk.%d.attn_norm". */
int graph_addf(struct graph *g, enum graph_op op, int a, int b, int c, int d, int64_t ne0,
               int64_t ne1, const char *fmt, ...) __attribute__((format(printf, 9, 10)));
bool graph_ok(const struct graph *g);
int graph_find(const struct graph *g, const char *name); /* -1 if none */
const char *graph_op_name(enum graph_op op);

/* Assigns arena offsets to every non-leaf node (64-byte aligned, buffers reused after their
 * last reader) and sets g->arena_bytes. */
brasa_status graph_plan(struct graph *g, struct brasa_err *err);

/* One line per node (index, op, name, shape, inputs, offset) to f (a FILE *). */
void graph_print(const struct graph *g, void *f);

/* Whether node `name` is selected by a BRASA_DUMP list: "all", or names separated by commas.
 * A NULL list selects nothing. Both backends' dump options use it. */
int graph_dump_wanted(const char *list, const char *name);
/* The dump line of node n's output x (nbytes / 4 floats) at position pos0, to f (a FILE *): op,
 * name, shape, sum and the first values. Both backends' BRASA_DUMP print it. */
void graph_dump_values(const struct graph_node *n, int pos0, const float *x, void *f);

/* A ROPE node's angles, as every backend makes them: the ratio ts = base^(-2 / n_rot) from one
 * pair to the next (graph_rope_ratio), and for position pos cs[2 i], cs[2 i + 1] = the cos and
 * sin of theta_i (i < half), theta_0 = pos and each next one the last times ts, rounded to
 * float at every step (graph_rope_table). The cos and sin are taken in double and rounded once
 * to float: the same bits from the GPU's libm as from the host's (the float functions differ
 * by an ulp here and there: CUDA's sinf and cosf are within 2, glibc's within 1), so that a
 * backend's RoPE paths, and the backends, agree bit for bit. */
float graph_rope_ratio(const struct graph_node *n);
void graph_rope_table(long pos, int half, float ts, float *cs);

#endif
