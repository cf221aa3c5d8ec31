/* ops: the CPU kernels of the graph ops (semantics in graph/graph.h). */
#ifndef BRASA_CPU_OPS_H
#define BRASA_CPU_OPS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "core/status.h"
#include "graph/graph.h"

/* Query rows that share a KV head taken together by the CPU attention (its scratch is sized
 * for them: ATTN_G x (context + head size) floats a thread). */
#define ATTN_G 8

/* Prompt attention in tiles (F16 cache, AVX-512, head sizes a multiple of 16 up to 256): up to
 * ATTN_TR query rows that share a KV head (several tokens' heads) against each cache row read
 * once; its scratch: ATTN_TR x context floats of scores, ATTN_TR x head size of queries and
 * ATTN_TK (ATTN_VC) x head size of keys (values) as floats, a thread. */
#define ATTN_TR 32
#define ATTN_TK 12
#define ATTN_VC 64 /* value rows a prompt attention unit converts at a time */

struct pool;

/* Per-run values shared by every op. */
struct op_ctx {
    struct pool *pool;
    int nth;
    int pos0;
    const int32_t *tokens;
    void *mm_scratch;     /* quant_matmul_scratch_bytes of the largest matmul */
    float *thr_scratch;   /* nth × thr_stride floats */
    size_t thr_stride;
};

struct op_args {
    struct op_ctx *ctx;
    const struct graph_node *node;
    void *out;
    const struct graph_node *src[GRAPH_MAX_IN];
    void *in[GRAPH_MAX_IN];
    void *state;                 /* DELTANET */
    void *kcache, *vcache;       /* ATTN */
    uint32_t kv_type;
};

brasa_status cpu_op(const struct op_args *a, struct brasa_err *err);

/* The vector code the ops take (tests): 0 portable C, 1 AVX2 + FMA + F16C, 2 AVX-512; capped
 * by what the CPU has and BRASA_NO_AVX512. Returns the level now in use. */
int cpu_ops_simd(int level);

/* Whether prompt attention may take the tiles on this CPU (AVX-512, BRASA_NO_ATTN_TILES unset):
 * the per-thread scratch is sized for them only then. */
bool cpu_ops_attn_tiles(void);

#endif
