/* graph: node list building, lookup, printing and the arena plan. */
#include "graph/graph.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const op_names[GOP_COUNT] = {
    [GOP_INPUT] = "INPUT",       [GOP_WEIGHT] = "WEIGHT",     [GOP_STATE] = "STATE",
    [GOP_GET_ROWS] = "GET_ROWS", [GOP_RMS_NORM] = "RMS_NORM", [GOP_L2_NORM] = "L2_NORM",
    [GOP_MATMUL] = "MATMUL",     [GOP_ADD] = "ADD",           [GOP_MUL] = "MUL",
    [GOP_SCALE] = "SCALE",       [GOP_SWIGLU] = "SWIGLU",     [GOP_SILU] = "SILU",
    [GOP_SIGMOID_MUL] = "SIGMOID_MUL", [GOP_VIEW] = "VIEW",   [GOP_ROPE] = "ROPE",
    [GOP_KV_STORE] = "KV_STORE", [GOP_ATTN] = "ATTN",         [GOP_CONV1D] = "CONV1D",
    [GOP_DELTANET] = "DELTANET", [GOP_GATES] = "GATES",       [GOP_RMS_NORM_GATE] = "RMS_NORM_GATE",
    [GOP_ALLREDUCE] = "ALLREDUCE",
};

const char *graph_op_name(enum graph_op op)
{
    return (unsigned)op < GOP_COUNT && op_names[op] ? op_names[op] : "?";
}

brasa_status graph_init(struct graph *g, int n_tok, struct brasa_err *err)
{
    memset(g, 0, sizeof *g);
    g->n_tok = n_tok;
    g->out = -1;
    g->cap = 256;
    g->nodes = calloc((size_t)g->cap, sizeof *g->nodes);
    if (!g->nodes)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory for the compute graph");
    return BRASA_OK;
}

void graph_free(struct graph *g)
{
    free(g->nodes);
    memset(g, 0, sizeof *g);
}

bool graph_ok(const struct graph *g) { return g->nodes != NULL && g->cap >= 0; }

int graph_add(struct graph *g, enum graph_op op, const char *name, int a, int b, int c, int d,
              int64_t ne0, int64_t ne1)
{
    if (!g->nodes || g->cap < 0)
        return -1;
    if (g->n == g->cap) {
        struct graph_node *nn = realloc(g->nodes, (size_t)g->cap * 2 * sizeof *nn);
        if (!nn) {
            g->cap = -1; /* sticky failure, reported by graph_ok() */
            return -1;
        }
        g->nodes = nn;
        g->cap *= 2;
    }
    struct graph_node *n = &g->nodes[g->n];
    memset(n, 0, sizeof *n);
    n->op = op;
    snprintf(n->name, sizeof n->name, "%s", name ? name : "");
    n->in[0] = a, n->in[1] = b, n->in[2] = c, n->in[3] = d;
    n->ne[0] = ne0, n->ne[1] = ne1, n->ne[2] = 1, n->ne[3] = 1;
    n->state = -1;
    n->type = 0;
    n->p.f[0] = 1.0f;
    return g->n++;
}

int graph_addf(struct graph *g, enum graph_op op, int a, int b, int c, int d, int64_t ne0,
               int64_t ne1, const char *fmt, ...)
{
    char name[GRAPH_NAME_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    return graph_add(g, op, name, a, b, c, d, ne0, ne1);
}

int graph_find(const struct graph *g, const char *name)
{
    for (int i = 0; i < g->n; i++)
        if (strcmp(g->nodes[i].name, name) == 0)
            return i;
    return -1;
}

static bool is_leaf(enum graph_op op)
{
    return op == GOP_INPUT || op == GOP_WEIGHT || op == GOP_STATE;
}

/* A free list of arena ranges; first fit, coalescing on release. */
struct span {
    size_t off, size;
};

static brasa_status plan_release(struct span **fl, int *n, int *cap, size_t off, size_t size,
                                 struct brasa_err *err)
{
    if (*n == *cap) {
        int nc = *cap ? *cap * 2 : 64;
        struct span *ns = realloc(*fl, (size_t)nc * sizeof *ns);
        if (!ns)
            return brasa_fail(err, BRASA_ENOMEM, "out of memory planning the arena");
        *fl = ns, *cap = nc;
    }
    int i = 0;
    while (i < *n && (*fl)[i].off < off)
        i++;
    memmove(&(*fl)[i + 1], &(*fl)[i], (size_t)(*n - i) * sizeof **fl);
    (*fl)[i] = (struct span){off, size};
    (*n)++;
    /* coalesce with neighbours */
    if (i + 1 < *n && (*fl)[i].off + (*fl)[i].size == (*fl)[i + 1].off) {
        (*fl)[i].size += (*fl)[i + 1].size;
        memmove(&(*fl)[i + 1], &(*fl)[i + 2], (size_t)(*n - i - 2) * sizeof **fl);
        (*n)--;
    }
    if (i > 0 && (*fl)[i - 1].off + (*fl)[i - 1].size == (*fl)[i].off) {
        (*fl)[i - 1].size += (*fl)[i].size;
        memmove(&(*fl)[i], &(*fl)[i + 1], (size_t)(*n - i - 1) * sizeof **fl);
        (*n)--;
    }
    return BRASA_OK;
}

brasa_status graph_plan(struct graph *g, struct brasa_err *err)
{
    if (!graph_ok(g))
        return brasa_fail(err, BRASA_ENOMEM, "out of memory building the compute graph");
    int *last = malloc((size_t)g->n * sizeof *last);
    if (!last)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory planning the arena");
    for (int i = 0; i < g->n; i++)
        last[i] = i;
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < GRAPH_MAX_IN; j++) {
            int s = g->nodes[i].in[j];
            if (s >= 0 && s < g->n)
                last[s] = i;
        }
    if (g->out >= 0)
        last[g->out] = g->n; /* the logits outlive the graph */
    struct span *fl = NULL;
    int nfl = 0, cfl = 0, pend[GRAPH_MAX_IN], npend = 0;
    size_t top = 0;
    brasa_status st = BRASA_OK;
    for (int i = 0; i < g->n && st == BRASA_OK; i++) {
        struct graph_node *n = &g->nodes[i];
        if (is_leaf(n->op))
            continue;
        n->nbytes = 4 * (size_t)(n->ne[0] * n->ne[1] * n->ne[2] * n->ne[3]);
        size_t need = (n->nbytes + 63) & ~(size_t)63;
        int in0 = n->in[0];
        bool in_place = n->op == GOP_ALLREDUCE && in0 >= 0 && !is_leaf(g->nodes[in0].op) &&
                        last[in0] == i && g->nodes[in0].nbytes == n->nbytes;
        int k = 0;
        while (!in_place && k < nfl && fl[k].size < need)
            k++;
        if (in_place) { /* the collective sums in place: the output takes its input's range */
            n->offset = g->nodes[in0].offset;
        } else if (k < nfl) {
            n->offset = fl[k].off;
            fl[k].off += need, fl[k].size -= need;
            if (fl[k].size == 0) {
                memmove(&fl[k], &fl[k + 1], (size_t)(nfl - k - 1) * sizeof *fl);
                nfl--;
            }
        } else {
            n->offset = top;
            top += need;
        }
        /* release the inputs whose last reader was the previous node, then those of this
         * one are pending: an output never overlaps its own inputs nor those of the node
         * before it (a GPU launch that fuses a product with the add after it writes the add's
         * output while other blocks still read the product's input) */
        for (int p = 0; p < npend && st == BRASA_OK; p++)
            st = plan_release(&fl, &nfl, &cfl, g->nodes[pend[p]].offset,
                              (g->nodes[pend[p]].nbytes + 63) & ~(size_t)63, err);
        npend = 0;
        for (int j = 0; j < GRAPH_MAX_IN; j++) {
            int s = n->in[j];
            if (s < 0 || is_leaf(g->nodes[s].op) || last[s] != i || (in_place && s == in0))
                continue;
            bool dup = false;
            for (int q = 0; q < j; q++)
                dup |= n->in[q] == s;
            if (!dup)
                pend[npend++] = s;
        }
        if (st == BRASA_OK && last[i] == i) /* unread output (dead node): free at once */
            st = plan_release(&fl, &nfl, &cfl, n->offset, need, err);
    }
    free(fl);
    free(last);
    g->arena_bytes = top;
    return st;
}

void graph_print(const struct graph *g, void *fv)
{
    FILE *f = fv;
    for (int i = 0; i < g->n; i++) {
        const struct graph_node *n = &g->nodes[i];
        fprintf(f, "%4d %-13s %-28s [%lld,%lld,%lld] in=(%d,%d,%d,%d) off=%zu\n", i,
                graph_op_name(n->op), n->name, (long long)n->ne[0], (long long)n->ne[1],
                (long long)n->ne[2], n->in[0], n->in[1], n->in[2], n->in[3], n->offset);
    }
}

int graph_dump_wanted(const char *list, const char *name)
{
    if (!list)
        return 0;
    if (strcmp(list, "all") == 0)
        return 1;
    size_t len = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == len && memcmp(p, name, l) == 0)
            return 1;
        p += l + (e ? 1 : 0);
    }
    return 0;
}

void graph_dump_values(const struct graph_node *n, int pos0, const float *x, void *f)
{
    size_t cnt = n->nbytes / 4;
    double sum = 0;
    for (size_t k = 0; k < cnt; k++)
        sum += x[k];
    fprintf(f, "dump pos0=%d %s %s [%lld,%lld] sum=%.6g:", pos0, graph_op_name(n->op), n->name,
            (long long)n->ne[0], (long long)n->ne[1], sum);
    for (size_t k = 0; k < cnt && k < 8; k++)
        fprintf(f, " %.6g", x[k]);
    fputc('\n', f);
}

float graph_rope_ratio(const struct graph_node *n)
{
    return powf(n->p.f[0], -2.0f / (float)n->p.i[1]);
}

void graph_rope_table(long pos, int half, float ts, float *cs)
{
    float theta = (float)pos;
    for (int i = 0; i < half; i++) {
        cs[2 * i] = (float)cos((double)theta);
        cs[2 * i + 1] = (float)sin((double)theta);
        theta *= ts;
    }
}
