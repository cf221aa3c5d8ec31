/* tp: one model over N GPUs of this process (see tp.h). */
#include "session/tp.h"

#include <stdlib.h>
#include <string.h>

#include "core/pool.h"
#include "gpu/nccl.h"
#include "gpu/split.h"
#include "quant/quant.h"

struct tp_shard {
    struct mdl m;
    void *mem;       /* its weights, host copies: the GPU knows its weights by these addresses */
    struct gpu *gpu; /* GPU r */
    ncclComm_t comm;
};

struct tp_model {
    int n;
    struct nccl nc;
    struct pool *pool; /* thread r drives GPU r (the caller is thread 0) */
    struct tp_shard sh[SPLIT_MAX_GPUS];
};

/* A shard's part of a session. The graphs' states live on the GPU; their host addresses (what
 * the graphs name them by) are distinct bytes of keys, never read. */
struct tp_part {
    struct mdl_cache c;
    char *keys;
    struct gpu_sess *gs;
    struct graph g_dec, g_pp;
    bool pp_all;
    struct graph *g; /* the graph of the step under way */
    brasa_status st;
    struct brasa_err err;
};

struct tp_sess {
    struct tp_model *t;
    int n_ctx;
    struct tp_part p[SPLIT_MAX_GPUS];
    struct graph_run run; /* the step under way, for every shard */
    int32_t *top_ids;     /* the merged candidates */
    float *top_lg;
    int top_n;
};

int tp_model_gpus(const struct tp_model *t) { return t->n; }
const char *tp_model_device(const struct tp_model *t) { return gpu_device_name(t->sh[0].gpu); }

void tp_model_free(struct tp_model *t)
{
    if (!t)
        return;
    for (int r = 0; r < t->n; r++) {
        struct tp_shard *s = &t->sh[r];
        if (s->comm && s->gpu && gpu_make_current(s->gpu, NULL) == BRASA_OK)
            t->nc.CommDestroy(s->comm);
        gpu_close(s->gpu);
        mdl_free(&s->m);
        free(s->mem);
    }
    pool_free(t->pool);
    nccl_unload(&t->nc);
    free(t);
}

brasa_status tp_model_open(struct tp_model **out, const struct mdl *m, int n,
                           const struct gpu_opts *go, struct brasa_err *err)
{
    *out = NULL;
    if (n < 1 || n > SPLIT_MAX_GPUS)
        return brasa_fail(err, BRASA_EINVAL, "%d GPUs (1 to %d)", n, SPLIT_MAX_GPUS);
    struct tp_model *t = calloc(1, sizeof *t);
    if (!t)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    t->n = n;
    brasa_status st = nccl_load(&t->nc, err);
    if (st != BRASA_OK) {
        free(t);
        return brasa_wrap(err, st, "a model over %d GPU%s", n, n > 1 ? "s" : "");
    }
    for (int r = 0; r < n && st == BRASA_OK; r++) {
        struct gpu_opts o = go ? *go : (struct gpu_opts){0};
        o.device = r;
        if ((st = mdl_shard(m, r, n, &t->sh[r].m, &t->sh[r].mem, err)) == BRASA_OK &&
            (st = gpu_open(&t->sh[r].gpu, &o, err)) != BRASA_OK)
            st = brasa_wrap(err, st, "GPU %d of %d", r, n);
    }
    if (st == BRASA_OK)
        st = pool_new(&t->pool, n, err);
    if (st == BRASA_OK) { /* the communicator: every rank's init in one group, from here */
        ncclUniqueId id;
        ncclResult_t rc = t->nc.GetUniqueId(&id);
        if (rc == ncclSuccess && (rc = t->nc.GroupStart()) == ncclSuccess) {
            for (int r = 0; r < n && rc == ncclSuccess; r++) {
                if ((st = gpu_make_current(t->sh[r].gpu, err)) != BRASA_OK)
                    break;
                rc = t->nc.CommInitRank(&t->sh[r].comm, n, id, r);
            }
            ncclResult_t re = t->nc.GroupEnd();
            rc = rc != ncclSuccess ? rc : re;
        }
        if (st == BRASA_OK && rc != ncclSuccess)
            st = brasa_fail(err, BRASA_EDEVICE, "NCCL: a communicator over %d GPU%s: %s", n,
                            n > 1 ? "s" : "", t->nc.GetErrorString(rc));
    }
    if (st != BRASA_OK) {
        tp_model_free(t);
        return st;
    }
    *out = t;
    return BRASA_OK;
}

void tp_sess_free(struct tp_sess *s)
{
    if (!s)
        return;
    for (int r = 0; r < s->t->n; r++) {
        struct tp_part *p = &s->p[r];
        gpu_sess_free(p->gs);
        graph_free(&p->g_dec);
        graph_free(&p->g_pp);
        free(p->c.k), free(p->c.v), free(p->c.conv), free(p->c.ssm), free(p->keys);
    }
    free(s->top_ids);
    free(s->top_lg);
    free(s);
}

brasa_status tp_sess_new(struct tp_model *t, int n_ctx, uint32_t kv_type, struct tp_sess **out,
                         struct brasa_err *err)
{
    *out = NULL;
    struct tp_sess *s = calloc(1, sizeof *s);
    if (!s)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    s->t = t;
    s->n_ctx = n_ctx;
    brasa_status st = BRASA_OK;
    for (int r = 0; r < t->n && st == BRASA_OK; r++) {
        struct tp_part *p = &s->p[r];
        const struct tp_shard *sh = &t->sh[r];
        int L = sh->m.hp.n_layer;
        p->c.n_ctx = n_ctx;
        p->c.kv_type = kv_type;
        p->c.k = calloc((size_t)L, sizeof(void *));
        p->c.v = calloc((size_t)L, sizeof(void *));
        p->c.conv = calloc((size_t)L, sizeof(float *));
        p->c.ssm = calloc((size_t)L, sizeof(float *));
        p->keys = calloc((size_t)L, 4);
        if (!p->c.k || !p->c.v || !p->c.conv || !p->c.ssm || !p->keys) {
            st = brasa_fail(err, BRASA_ENOMEM, "out of memory");
            break;
        }
        for (int il = 0; il < L; il++) {
            p->c.k[il] = p->keys + 4 * il;
            p->c.v[il] = p->keys + 4 * il + 1;
            p->c.conv[il] = (float *)(void *)(p->keys + 4 * il + 2);
            p->c.ssm[il] = (float *)(void *)(p->keys + 4 * il + 3);
        }
        if ((st = mdl_build(&sh->m, &p->c, 1, false, &p->g_dec, err)) == BRASA_OK &&
            (st = gpu_sess_new(sh->gpu, &p->gs, err)) == BRASA_OK &&
            (st = gpu_sess_set_comm(p->gs, &t->nc, sh->comm, err)) == BRASA_OK)
            st = gpu_sess_prepare(p->gs, &p->g_dec, n_ctx, err);
    }
    if (st == BRASA_OK && (!(s->top_ids = malloc(256 * sizeof *s->top_ids)) ||
                           !(s->top_lg = malloc(256 * sizeof *s->top_lg))))
        st = brasa_fail(err, BRASA_ENOMEM, "out of memory");
    if (st != BRASA_OK) {
        tp_sess_free(s);
        return st;
    }
    *out = s;
    return BRASA_OK;
}

brasa_status tp_sess_reset(struct tp_sess *s, struct brasa_err *err)
{
    brasa_status st = BRASA_OK;
    for (int r = 0; r < s->t->n && st == BRASA_OK; r++)
        st = gpu_sess_reset(s->p[r].gs, err);
    s->top_n = 0;
    return st;
}

/* thread r: shard r's step on GPU r */
static void tp_worker(void *arg, int r, int nth)
{
    struct tp_sess *s = arg;
    if (r >= s->t->n || nth < s->t->n)
        return;
    struct tp_part *p = &s->p[r];
    p->st = gpu_sess_run(p->gs, p->g, &s->run, &p->err);
}

brasa_status tp_sess_run(struct tp_sess *s, const int32_t *ids, int n, int pos0, bool all,
                         int top, struct brasa_err *err)
{
    struct tp_model *t = s->t;
    brasa_status st;
    for (int r = 0; r < t->n; r++) { /* each shard's graph for this batch (host work) */
        struct tp_part *p = &s->p[r];
        p->g = &p->g_dec;
        if (n == 1)
            continue;
        if (!p->g_pp.nodes || p->g_pp.n_tok != n || p->pp_all != all) {
            graph_free(&p->g_pp);
            if ((st = mdl_build(&t->sh[r].m, &p->c, n, all, &p->g_pp, err)) != BRASA_OK ||
                (st = gpu_sess_prepare(p->gs, &p->g_pp, s->n_ctx, err)) != BRASA_OK) {
                graph_free(&p->g_pp);
                return brasa_wrap(err, st, "GPU %d", r);
            }
            p->pp_all = all;
        }
        p->g = &p->g_pp;
    }
    s->run = (struct graph_run){.pos0 = pos0, .tokens = ids, .top_k = top};
    s->top_n = 0;
    pool_run(t->pool, tp_worker, s); /* every shard at once: their all-reduces meet */
    for (int r = 0; r < t->n; r++)
        if (s->p[r].st != BRASA_OK) {
            *err = s->p[r].err;
            return brasa_wrap(err, s->p[r].st, "GPU %d of %d", r, t->n);
        }
    if (top <= 0)
        return BRASA_OK;
    const int32_t *ids_r[SPLIT_MAX_GPUS];
    const float *lg_r[SPLIT_MAX_GPUS];
    int n_r[SPLIT_MAX_GPUS], off[SPLIT_MAX_GPUS], k = top, o = 0;
    for (int r = 0; r < t->n; r++) {
        n_r[r] = gpu_sess_top(s->p[r].gs, &ids_r[r], &lg_r[r]);
        off[r] = o;
        o += t->sh[r].m.hp.n_vocab;
        if (n_r[r] <= 0) /* a shard sent its whole row: so do the others (tp_sess_output) */
            return BRASA_OK;
        if (n_r[r] < k && n_r[r] < t->sh[r].m.hp.n_vocab)
            k = n_r[r];
    }
    if (k > 256)
        k = 256;
    s->top_n = tp_merge_top(t->n, ids_r, lg_r, n_r, off, k, s->top_ids, s->top_lg);
    return BRASA_OK;
}

brasa_status tp_sess_output(struct tp_sess *s, float *out, int *rows, struct brasa_err *err)
{
    struct tp_model *t = s->t;
    int V = 0, nr = s->p[0].g ? s->p[0].g->n_out : 1;
    for (int r = 0; r < t->n; r++)
        V += t->sh[r].m.hp.n_vocab;
    for (int r = 0, off = 0; r < t->n; r++) {
        const float *o = gpu_sess_output(s->p[r].gs, err);
        if (!o)
            return brasa_wrap(err, BRASA_EDEVICE, "GPU %d of %d", r, t->n);
        int vr = t->sh[r].m.hp.n_vocab;
        for (int i = 0; i < nr; i++)
            memcpy(out + (size_t)i * V + off, o + (size_t)i * vr, (size_t)vr * sizeof *out);
        off += vr;
    }
    if (rows)
        *rows = nr;
    return BRASA_OK;
}

int tp_sess_top(struct tp_sess *s, const int32_t **ids, const float **logits)
{
    *ids = s->top_ids;
    *logits = s->top_lg;
    return s->top_n;
}

int tp_merge_top(int ns, const int32_t *const *ids, const float *const *lg, const int *nj,
                 const int *off, int k, int32_t *oid, float *olg)
{
    int at[SPLIT_MAX_GPUS] = {0}, m = 0;
    for (; m < k; m++) {
        int best = -1;
        for (int j = 0; j < ns && j < SPLIT_MAX_GPUS; j++) {
            if (at[j] >= nj[j])
                continue;
            float v = lg[j][at[j]];
            int32_t id = ids[j][at[j]] + off[j];
            if (best < 0 || v > olg[m] || (v == olg[m] && id < oid[m])) {
                best = j;
                olg[m] = v;
                oid[m] = id;
            }
        }
        if (best < 0)
            break;
        at[best]++;
    }
    return m;
}
