/* cpu: graph execution on the CPU (op dispatch, buffers, dumps). Op kernels: ops.c. */
#include "cpu/cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/platform.h"
#include "core/pool.h"
#include "cpu/ops.h"
#include "quant/quant.h"

struct cpu {
    struct pool *pool;
    int nth;
    uint8_t *arena;        /* activations, planned by graph_plan */
    size_t arena_cap;
    void *mm_scratch;      /* activations converted to a weight's vec_dot_type */
    size_t mm_cap;
    float *thr_scratch;    /* per thread: attention scores and F16 staging */
    size_t thr_stride, thr_cap;
    const char *dump;      /* BRASA_DUMP */
    const char *dump_dir;  /* BRASA_DUMP_DIR */
};

brasa_status cpu_new(struct cpu **out, struct pool *pool, struct brasa_err *err)
{
    struct cpu *c = calloc(1, sizeof *c);
    if (!c)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory for the CPU backend");
    c->pool = pool;
    c->nth = pool ? pool_size(pool) : 1;
    c->dump = getenv("BRASA_DUMP");
    c->dump_dir = getenv("BRASA_DUMP_DIR");
    *out = c;
    return BRASA_OK;
}

void cpu_free(struct cpu *c)
{
    if (!c)
        return;
    plat_aligned_free(c->arena);
    plat_aligned_free(c->mm_scratch);
    plat_aligned_free(c->thr_scratch);
    free(c);
}

static brasa_status grow(void **buf, size_t *cap, size_t need, struct brasa_err *err)
{
    if (need <= *cap)
        return BRASA_OK;
    void *nb = NULL;
    if (!(nb = plat_aligned_alloc(64, need ? need : 64)))
        return brasa_fail(err, BRASA_ENOMEM, "out of memory for %zu bytes of activations", need);
    plat_aligned_free(*buf);
    *buf = nb;
    *cap = need;
    return BRASA_OK;
}

brasa_status cpu_prepare(struct cpu *c, const struct graph *g, int n_ctx, struct brasa_err *err)
{
    size_t mm = 0;
    int max_hd = 0;
    for (int i = 0; i < g->n; i++) {
        const struct graph_node *n = &g->nodes[i];
        if (n->op == GOP_MATMUL) {
            const struct graph_node *w = &g->nodes[n->in[1]];
            size_t s = quant_matmul_scratch_bytes(w->type, w->ne[0], n->ne[1]);
            if (s > mm)
                mm = s;
        } else if (n->op == GOP_ATTN && n->p.i[2] > max_hd) {
            max_hd = n->p.i[2];
        }
    }
    size_t rows = (size_t)ATTN_G * ((size_t)n_ctx + (size_t)max_hd) + 2 * (size_t)max_hd + 16;
    const size_t kv_rows = ATTN_TK > ATTN_VC ? ATTN_TK : ATTN_VC;
    size_t tiles = !cpu_ops_attn_tiles() ? 0
                 : (size_t)ATTN_TR * (size_t)n_ctx + (size_t)(ATTN_TR + kv_rows) * (size_t)max_hd + 16;
    size_t stride = ((rows > tiles ? rows : tiles) + 15) & ~(size_t)15;
    brasa_status st;
    if ((st = grow((void **)&c->arena, &c->arena_cap, g->arena_bytes, err)) ||
        (st = grow(&c->mm_scratch, &c->mm_cap, mm, err)) ||
        (st = grow((void **)&c->thr_scratch, &c->thr_cap, stride * sizeof(float) * (size_t)c->nth,
                   err)))
        return st;
    if (stride > c->thr_stride)
        c->thr_stride = stride;
    if (c->thr_stride * sizeof(float) * (size_t)c->nth > c->thr_cap)
        return brasa_fail(err, BRASA_ENOMEM, "internal: scratch plan mismatch");
    return BRASA_OK;
}

uint64_t cpu_bytes(const struct cpu *c)
{
    return c->arena_cap + c->mm_cap + c->thr_cap;
}

static void *node_ptr(const struct cpu *c, const struct graph *g, int i)
{
    const struct graph_node *n = &g->nodes[i];
    if (n->op == GOP_WEIGHT || n->op == GOP_STATE)
        return n->data;
    return c->arena + n->offset;
}

const float *cpu_node_data(const struct cpu *c, const struct graph *g, int i)
{
    return node_ptr(c, g, i);
}

static void dump_node(const struct cpu *c, const struct graph *g, int i, const struct graph_run *r)
{
    const struct graph_node *n = &g->nodes[i];
    if (n->nbytes == 0 || !graph_dump_wanted(c->dump, n->name))
        return;
    const float *x = node_ptr(c, g, i);
    graph_dump_values(n, r->pos0, x, stderr);
    if (c->dump_dir) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s.pos%d.f32", c->dump_dir, n->name, r->pos0);
        FILE *f = fopen(path, "wb");
        if (f) {
            fwrite(x, 4, n->nbytes / 4, f);
            fclose(f);
        }
    }
}

brasa_status cpu_run(struct cpu *c, const struct graph *g, const struct graph_run *r,
                     struct brasa_err *err)
{
    return cpu_run_range(c, g, r, 0, g->n, err);
}

brasa_status cpu_run_range(struct cpu *c, const struct graph *g, const struct graph_run *r,
                           int i0, int i1, struct brasa_err *err)
{
    if (i0 < 0 || i1 > g->n || i0 > i1)
        return brasa_fail(err, BRASA_EINVAL, "internal: nodes %d..%d of a graph of %d", i0, i1,
                          g->n);
    if (g->arena_bytes > c->arena_cap)
        return brasa_fail(err, BRASA_EINVAL, "internal: graph run before cpu_prepare");
    struct op_ctx oc = {
        .pool = c->pool, .nth = c->nth, .pos0 = r->pos0, .tokens = r->tokens,
        .mm_scratch = c->mm_scratch, .thr_scratch = c->thr_scratch, .thr_stride = c->thr_stride,
    };
    for (int i = i0; i < i1; i++) {
        const struct graph_node *n = &g->nodes[i];
        if (n->op == GOP_INPUT || n->op == GOP_WEIGHT || n->op == GOP_STATE)
            continue;
        struct op_args a = {.ctx = &oc, .node = n, .out = c->arena + n->offset};
        for (int j = 0; j < GRAPH_MAX_IN; j++) {
            int s = n->in[j];
            if (s < 0)
                continue;
            a.src[j] = &g->nodes[s];
            a.in[j] = node_ptr(c, g, s);
        }
        if (n->state >= 0)
            a.state = g->nodes[n->state].data;
        if (n->op == GOP_ATTN) { /* the caches sit behind the two KV_STORE nodes */
            a.kcache = g->nodes[a.src[1]->in[1]].data;
            a.vcache = g->nodes[a.src[2]->in[1]].data;
            a.kv_type = g->nodes[a.src[1]->in[1]].type;
        }
        brasa_status st = cpu_op(&a, err);
        if (st != BRASA_OK)
            return brasa_wrap(err, st, "node %s", n->name);
        if (c->dump)
            dump_node(c, g, i, r);
    }
    return BRASA_OK;
}
