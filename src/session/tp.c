/* tp: one model over N GPUs of this process (see tp.h). */
#include "session/tp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/platform.h"
#include "core/pool.h"
#include "gpu/nccl.h"
#include "gpu/split.h"

struct tp_shard {
    struct mdl m;
    void *mem;       /* its column slices' host copies (mdl_shard; its row slices lie in the
                      * model's mapping): the GPU knows its weights by their addresses */
    struct gpu *gpu; /* GPU dev */
    int dev;         /* its device ordinal */
    ncclComm_t comm;
};

#define TP_TOP 256 /* candidates a rank's block holds (gpu_sess_gather) */

struct tp_model {
    int n;            /* GPUs of this process */
    int world, rank0; /* ranks in all; this process's first */
    int n_vocab, pad; /* the whole model's; the largest slice (a gathered row's floats) */
    struct nccl nc;
    struct pool *pool; /* thread r drives shard r (the caller is thread 0) */
    struct tp_shard sh[SPLIT_MAX_GPUS];
};

/* A shard's part of a session. The graphs' states live on the GPU; their host addresses (what
 * the graphs name them by) are distinct slots of keys, never read. */
struct tp_part {
    struct mdl_cache c;
    float *keys; /* 4 slots of 4 floats a layer: its K, V, convolution and recurrence states */
    struct gpu_sess *gs;
    struct graph g_dec, g_pp;
    bool pp_all;
    struct graph *g; /* the graph of the step under way */
    brasa_status st;
    struct brasa_err err;
    const void *gat; /* the world's gathered results (gpu_sess_gather) */
};

struct tp_sess {
    struct tp_model *t;
    int n_ctx;
    struct tp_part p[SPLIT_MAX_GPUS];
    struct graph_run run; /* the step under way, for every shard */
    int phase;            /* the workers' task: 0 run (and gather across processes), 1 gather
                           * the last row */
    int32_t *top_ids;     /* the merged candidates */
    float *top_lg;
    int top_n;
    float *row;           /* across processes: the last row, gathered */
    bool row_ok;
};

/* rank j's slice of the vocabulary, [*v0, *v1) (mdl_shard's) */
static void tp_slice(const struct tp_model *t, int j, int *v0, int *v1)
{
    *v0 = (int)((int64_t)t->n_vocab * j / t->world);
    *v1 = (int)((int64_t)t->n_vocab * (j + 1) / t->world);
}

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

/* A new communicator id */
static brasa_status tp_new_id(const struct nccl *nc, ncclUniqueId *id, struct brasa_err *err)
{
    ncclResult_t r = nc->GetUniqueId(id);
    return r == ncclSuccess ? BRASA_OK
                            : brasa_fail(err, BRASA_EDEVICE, "ncclGetUniqueId: %s",
                                         nc->GetErrorString(r));
}

brasa_status tp_id_exchange(const struct nccl *nc, const char *path, bool root, double timeout_s,
                            ncclUniqueId *id, struct brasa_err *err)
{
    if (!path || !*path)
        return brasa_fail(err, BRASA_EINVAL, "ranks in other processes need the id file "
                          "(--tp-id FILE, on a file system every process reads)");
    if (root) {
        FILE *old = fopen(path, "rb");
        if (old) { /* the other processes could read it before the new one replaces it */
            fclose(old);
            return brasa_fail(err, BRASA_EINVAL, "%s exists (an earlier run's NCCL id?): remove "
                              "it, or give every process a new path", path);
        }
        brasa_status st = tp_new_id(nc, id, err);
        if (st != BRASA_OK)
            return st;
        char tmp[4096];
        if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
            return brasa_fail(err, BRASA_EINVAL, "id file path too long");
        FILE *f = fopen(tmp, "wb");
        bool ok = f && fwrite(id, sizeof *id, 1, f) == 1;
        ok = f && fclose(f) == 0 && ok;
        if (!ok || rename(tmp, path) != 0) {
            remove(tmp);
            return brasa_fail(err, BRASA_EIO, "could not write the NCCL id to %s", path);
        }
        return BRASA_OK;
    }
    double t0 = plat_now(), limit = timeout_s > 0 ? timeout_s : 300;
    for (;;) { /* rank 0's process writes it whole, then renames it into place */
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t got = fread(id, 1, sizeof *id, f);
            fclose(f);
            if (got == sizeof *id)
                return BRASA_OK;
        }
        if (plat_now() - t0 > limit)
            return brasa_fail(err, BRASA_ETIMEOUT, "the NCCL id did not appear in %s within "
                              "%.0f s (is rank 0's process running?)", path, limit);
        struct timespec ts = {0, 50 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

brasa_status tp_model_open(struct tp_model **out, const struct mdl *m, int n,
                           const struct tp_world *w, const struct gpu_opts *go,
                           struct brasa_err *err)
{
    *out = NULL;
    int world = w && w->world ? w->world : n, rank0 = w ? w->rank0 : 0;
    if (n < 1 || n > SPLIT_MAX_GPUS || world < n || world > SPLIT_MAX_GPUS || rank0 < 0 ||
        rank0 + n > world)
        return brasa_fail(err, BRASA_EINVAL, "%d GPUs as ranks %d.. of %d (1 to %d in all)", n,
                          rank0, world, SPLIT_MAX_GPUS);
    struct tp_model *t = calloc(1, sizeof *t);
    if (!t)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    t->n = n;
    t->world = world;
    t->rank0 = rank0;
    t->n_vocab = m->hp.n_vocab;
    t->pad = (m->hp.n_vocab + world - 1) / world;
    brasa_status st = nccl_load(&t->nc, err);
    if (st != BRASA_OK) {
        free(t);
        return brasa_wrap(err, st, "a model over %d GPU%s", n, n > 1 ? "s" : "");
    }
    for (int r = 0; r < n && st == BRASA_OK; r++) {
        struct gpu_opts o = go ? *go : (struct gpu_opts){0};
        o.device = t->sh[r].dev = w && w->devices ? w->devices[r] : r;
        if ((st = mdl_shard(m, rank0 + r, world, &t->sh[r].m, &t->sh[r].mem, err)) == BRASA_OK &&
            (st = gpu_open(&t->sh[r].gpu, &o, err)) != BRASA_OK)
            st = brasa_wrap(err, st, "GPU %d (%d of %d)", o.device, r + 1, n);
    }
    if (st == BRASA_OK)
        st = pool_new(&t->pool, n, err);
    ncclUniqueId id;
    ncclResult_t rc = ncclSuccess;
    if (st == BRASA_OK) /* the communicator's id: made here, or through the file */
        st = world == n ? tp_new_id(&t->nc, &id, err)
                        : tp_id_exchange(&t->nc, w->id_file, rank0 == 0, w->timeout_s, &id, err);
    if (st == BRASA_OK) { /* this process's ranks join in one group */
        if ((rc = t->nc.GroupStart()) == ncclSuccess) {
            for (int r = 0; r < n && rc == ncclSuccess; r++) {
                if ((st = gpu_make_current(t->sh[r].gpu, err)) != BRASA_OK)
                    break;
                rc = t->nc.CommInitRank(&t->sh[r].comm, world, id, rank0 + r);
            }
            ncclResult_t re = t->nc.GroupEnd();
            rc = rc != ncclSuccess ? rc : re;
        }
        if (st == BRASA_OK && rc != ncclSuccess)
            st = brasa_fail(err, BRASA_EDEVICE, "NCCL: a communicator over %d GPU%s: %s", world,
                            world > 1 ? "s" : "", t->nc.GetErrorString(rc));
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
    free(s->row);
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
        p->keys = calloc((size_t)L * 16, sizeof *p->keys);
        if (!p->c.k || !p->c.v || !p->c.conv || !p->c.ssm || !p->keys) {
            st = brasa_fail(err, BRASA_ENOMEM, "out of memory");
            break;
        }
        for (int il = 0; il < L; il++) {
            p->c.k[il] = p->keys + 16 * il;
            p->c.v[il] = p->keys + 16 * il + 4;
            p->c.conv[il] = p->keys + 16 * il + 8;
            p->c.ssm[il] = p->keys + 16 * il + 12;
        }
        if ((st = mdl_build(&sh->m, &p->c, 1, false, &p->g_dec, err)) == BRASA_OK &&
            (st = gpu_sess_new(sh->gpu, &p->gs, err)) == BRASA_OK &&
            (st = gpu_sess_set_comm(p->gs, &t->nc, sh->comm, err)) == BRASA_OK)
            st = gpu_sess_prepare(p->gs, &p->g_dec, n_ctx, err);
    }
    if (st == BRASA_OK && (!(s->top_ids = malloc(TP_TOP * sizeof *s->top_ids)) ||
                           !(s->top_lg = malloc(TP_TOP * sizeof *s->top_lg)) ||
                           !(s->row = malloc((size_t)t->n_vocab * sizeof *s->row))))
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

/* thread r: shard r's step on GPU r, and across processes every rank's result gathered */
static void tp_worker(void *arg, int r, int nth)
{
    struct tp_sess *s = arg;
    struct tp_model *t = s->t;
    if (r >= t->n || nth < t->n)
        return;
    struct tp_part *p = &s->p[r];
    p->st = BRASA_OK;
    if (s->phase == 0)
        p->st = gpu_sess_run(p->gs, p->g, &s->run, &p->err);
    if (p->st == BRASA_OK && t->world > t->n) {
        const int32_t *ids;
        const float *lg;
        bool top = s->phase == 0 && gpu_sess_top(p->gs, &ids, &lg) > 0;
        p->st = gpu_sess_gather(p->gs, top, t->world, t->sh[r].m.hp.n_vocab, t->pad, &p->gat,
                                &p->err);
    }
}

static brasa_status tp_dispatch(struct tp_sess *s, int phase, struct brasa_err *err)
{
    struct tp_model *t = s->t;
    s->phase = phase;
    pool_run(t->pool, tp_worker, s); /* every shard at once: their collectives meet */
    for (int r = 0; r < t->n; r++)
        if (s->p[r].st != BRASA_OK) {
            *err = s->p[r].err;
            return brasa_wrap(err, s->p[r].st, "GPU %d (rank %d of %d)", t->sh[r].dev,
                              t->rank0 + r, t->world);
        }
    return BRASA_OK;
}

/* Across processes: the world's gathered result (local shard 0's copy) into the merged
 * candidates (top) or the whole last row */
static void tp_from_world(struct tp_sess *s, bool top, int k)
{
    struct tp_model *t = s->t;
    const char *g = s->p[0].gat;
    if (top) {
        const int32_t *ids_r[SPLIT_MAX_GPUS];
        const float *lg_r[SPLIT_MAX_GPUS];
        int n_r[SPLIT_MAX_GPUS], off[SPLIT_MAX_GPUS];
        for (int j = 0; j < t->world; j++) {
            const int32_t *b = (const int32_t *)(const void *)(g + (size_t)j * 2 * TP_TOP * 4);
            int v0, v1;
            tp_slice(t, j, &v0, &v1);
            ids_r[j] = b;
            lg_r[j] = (const float *)(const void *)(b + TP_TOP);
            n_r[j] = k < v1 - v0 ? k : v1 - v0;
            off[j] = v0;
        }
        s->top_n = tp_merge_top(t->world, ids_r, lg_r, n_r, off, k, s->top_ids, s->top_lg);
        return;
    }
    for (int j = 0; j < t->world; j++) {
        int v0, v1;
        tp_slice(t, j, &v0, &v1);
        memcpy(s->row + v0, g + (size_t)j * (size_t)t->pad * 4, (size_t)(v1 - v0) * 4);
    }
    s->row_ok = true;
}

brasa_status tp_sess_run(struct tp_sess *s, const int32_t *ids, int n, int pos0, bool all,
                         int top, struct brasa_err *err)
{
    struct tp_model *t = s->t;
    brasa_status st;
    if (all && n > 1 && t->world > t->n)
        return brasa_fail(err, BRASA_EUNSUPPORTED, "every row's logits from ranks in other "
                          "processes (only the last row's)");
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
                return brasa_wrap(err, st, "GPU %d", t->sh[r].dev);
            }
            p->pp_all = all;
        }
        p->g = &p->g_pp;
    }
    s->run = (struct graph_run){.pos0 = pos0, .tokens = ids, .top_k = top};
    s->top_n = 0;
    s->row_ok = false;
    if ((st = tp_dispatch(s, 0, err)) != BRASA_OK)
        return st;
    if (t->world > t->n) { /* the world's results came with the run */
        const int32_t *ti;
        const float *tl;
        bool cand = top > 0 && gpu_sess_top(s->p[0].gs, &ti, &tl) > 0;
        tp_from_world(s, cand, top < TP_TOP ? top : TP_TOP);
        return BRASA_OK;
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
    if (k > TP_TOP)
        k = TP_TOP;
    s->top_n = tp_merge_top(t->n, ids_r, lg_r, n_r, off, k, s->top_ids, s->top_lg);
    return BRASA_OK;
}

brasa_status tp_sess_output(struct tp_sess *s, float *out, int *rows, struct brasa_err *err)
{
    struct tp_model *t = s->t;
    if (t->world > t->n) { /* the last row, gathered from the world (now, if the run sent
                            * candidates: a collective) */
        brasa_status st;
        if (!s->row_ok && (st = tp_dispatch(s, 1, err)) != BRASA_OK)
            return st;
        if (!s->row_ok)
            tp_from_world(s, false, 0);
        memcpy(out, s->row, (size_t)t->n_vocab * sizeof *out);
        if (rows)
            *rows = 1;
        return BRASA_OK;
    }
    int V = t->n_vocab, nr = s->p[0].g ? s->p[0].g->n_out : 1; /* (world == n: every slice) */
    for (int r = 0, off = 0; r < t->n; r++) {
        const float *o = gpu_sess_output(s->p[r].gs, err);
        if (!o)
            return brasa_wrap(err, BRASA_EDEVICE, "GPU %d", t->sh[r].dev);
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
