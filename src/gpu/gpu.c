/* gpu: the CUDA backend (device, weights, launch plans, eager and graph executors). */
#include "gpu/gpu.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/platform.h"
#include "gpu/drv.h"
#include "gpu/drv_hip.h"
#include "gpu/jit.h"
#include "gpu/kcache.h"
#include "gpu/layout.h"
#include "gpu/mem.h"
#include "gpu/nccl.h"
#include "gpu/variants.h"

/* ggml type ids used here (values of quant/quant.h's enum) */
enum { T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q8_0 = 8, T_Q4_K = 12, T_Q5_K = 13, T_Q6_K = 14,
       T_BF16 = 30 };

/* bytes per block and elements per block; 0 for types without GPU kernels */
static void type_block(uint32_t t, size_t *bytes, int *elems)
{
    *bytes = 0;
    *elems = 1;
    switch (t) {
    case T_F32: *bytes = 4; break;
    case T_F16: case T_BF16: *bytes = 2; break;
    case T_Q4_0: *bytes = 18; *elems = 32; break;
    case T_Q8_0: *bytes = 34; *elems = 32; break;
    case T_Q4_K: *bytes = 144; *elems = 256; break;
    case T_Q5_K: *bytes = 176; *elems = 256; break;
    case T_Q6_K: *bytes = 210; *elems = 256; break;
    default: break;
    }
}

static size_t row_bytes(uint32_t t, int64_t n)
{
    size_t b;
    int e;
    type_block(t, &b, &e);
    if (b == 0 || n % e)
        return 0;
    return (size_t)(n / e) * b;
}

/* activation conversion mode of quant_act for a weight type (see quantize.cu) */
static int quant_mode(uint32_t t)
{
    switch (t) {
    case T_Q4_0: case T_Q8_0: return 0;
    case T_Q4_K: case T_Q5_K: case T_Q6_K: return 1;
    case T_F16: return 2;
    case T_BF16: return 3;
    default: return 4;
    }
}

/* Rows of mmt.cu's tiles for a weight of quant_mode mode (F16 / BF16: 128; the integer
 * tiles: 64); every weight of a launch but the last must fill whole ones */
static int mmt_tile_rows(int mode) { return mode >= 2 ? 128 : 64; }

struct wmap {
    const void *host;
    CUdeviceptr dev;
    size_t bytes;
};

struct mv_kernel {
    uint32_t wtype;
    int dec;         /* 1: the decode kernel (mvd.cu), 2: the tensor-core batch kernel (mmt.cu),
                      * 0: matvec.cu */
    int nc;          /* requested columns per pass (mvd: warps per lane group; mmt: 128 asks
                      * for the dequantizing variants first, 256 for the exact K-format
                      * warpgroup ones (KX) first, 64 for the others) */
    int glu, nr;     /* gate+up; mvd's weight rows per lane group (1 for the others) */
    int nw, ncv;     /* chosen variant's warps per block and columns per pass */
    unsigned shm;    /* dynamic shared memory bytes a block (mmt.cu F16 / BF16: NS stages) */
    int tr, nt;      /* mmt.cu: weight rows (of each weight) a block, threads (ncv: tokens) */
    int dq;          /* mmt.cu: quantized weights dequantized into F16 tiles (quant_act's
                      * int8 activation times its scales, as F16: mode + 8) */
    int kx;          /* mmt.cu: in those tiles the exact K-format products (KX: quant_act's
                      * int8 values as F16, mode 1) */
    int bps;         /* mmt.cu: blocks an SM holds at once */
    int wg;          /* mmt.cu: the F16 tiles on Hopper's warpgroup products (WG) */
    int xc;          /* mvd.cu: blocks that convert their own activation (XC) */
    int rp;          /* mvd.cu: RoPE and KV-cache writes in the epilogue (RP) */
    uint32_t wtype2; /* mvd.cu: the third weight's type where it differs (QT2), else 0 */
    int regs, sshm;  /* registers a thread, static shared memory bytes a block */
    CUmodule mod;
    CUfunction fn;
};

enum { K_GET_ROWS, K_NORM, K_ELT, K_VIEW, K_ROPE, K_KV, K_CONV, K_GATES, K_DELTA, K_DELTA_S,
       K_DELTA_C, K_TOPK, K_TOPKP, K_QUANT, K_COUNT };
static const char *const k_names[K_COUNT] = {"get_rows", "norm_rows", "eltwise", "view", "rope",
                                             "kv_store", "conv1d", "gates", "deltanet",
                                             "deltanet_staged", "deltanet_chunked", "topk",
                                             "topk_part", "quant_act"};

struct gpu {
    struct drv d;
    CUdevice dev;
    CUcontext ctx;
    struct jit jit;
    struct gmem mem;
    CUmodule m_ops, m_quant; /* m_quant: quant_act for any mode, loaded when first used */
    CUfunction k[K_COUNT];
    CUdeviceptr tl;          /* BRASA_GPU_TIMELINE=1: the kernels' stamps (port.cuh tl_stamp) */
    int tl_level;            /* BRASA_GPU_TIMELINE: 0 off, 1 per kernel name, 2 also one step */
    CUmodule m_fa[3];        /* fa.cu for heads of 64, 128 and 256, loaded when first used */
    CUfunction k_fa[3];
    /* attn.cu rendered for a head size and cache type (index 0: for any, from the kernels'
     * arguments), and quantize.cu for each mode of quant_act, loaded when first used: the code
     * a launch runs is fetched anew each layer, so kernels carry only their own paths
     * (BRASA_GPU_SPEC=0: the ones for any) */
    struct { int hd, f16, gate; CUmodule m; CUfunction fn[2]; } ak[5]; /* attn, attn_merge */
    CUmodule m_qm[5];
    CUfunction k_qm[5];
    struct { int key; CUmodule m; CUfunction fn; } mf[32]; /* mvf.cu variants, when first used */
    int n_mf;
    bool spec;
    bool attn256; /* attention's AO256 path for heads of 256 (get_attn; BRASA_GPU_ATTN_256=0: off) */
    /* prompt tiles on Hopper's warpgroup products (mmt.cu WG; sm_90 only; gpu_open) */
    int mmt_wg;
    struct mv_kernel mv[96];
    int n_mv;
    struct wmap *w;
    int nw, capw;
    uint64_t weight_bytes;
    /* weight uploads: two pinned staging buffers of UP_CHUNK bytes, each free again once its
     * event has passed (allocated for a session's plan while it uploads, freed after it);
     * time spent uploading and, of it, packing (--verbose) */
    void *h_up[2];
    CUevent ev_up[2];
    int up_next;
    bool up_queued;
    bool up_pageable; /* BRASA_GPU_UPLOAD=0: no staging (a measurement) */
    double up_s, pack_s;
    int n_sm, smem_optin;
    int sm_smem, sm_regs, sm_threads; /* per SM (0: not reported; see blocks_per_sm) */
    char name[128];
    struct gpu_opts o;
    pthread_mutex_t mu;
};

#define MAX_ARGS GPU_MAX_ARGS
union argv {
    CUdeviceptr p;
    int i;
    float f;
    long long l;
};

struct launch {
    CUfunction fn;
    const char *kname;
    int node;
    unsigned gx, gy, gz, bx, shmem;
    int nargs;
    union argv v[MAX_ARGS];
};

#define GPU_SLOTS 2 /* runs in flight at most */

struct plan {
    const struct graph *g;
    int n_tok, n_nodes, n_ctx;
    struct launch *l;
    int nl, capl;
    unsigned gen;
    CUgraphExec exec[GPU_SLOTS]; /* captured for each run slot (the candidates' host copy) */
    size_t out_bytes;
    int out_node;
    bool top;                /* ends with the top-k kernel (the output is one row) */
    int tk_l;                /* l[tk_l]: the top-k launch, which writes the candidates into
                              * the run slot's pinned memory itself (-1: they are copied) */
    /* decode products that rotate q and k (mvd.cu RP), and rope launches, read cos and sin for
     * the position from the session's table of every position (d_cst), rope_half pairs a
     * position (0: none; rope_table) */
    int rope_half;
    float rope_ts;           /* the angles' ratio from one pair to the next */
};

#define TK_MAX 256 /* most candidates the top-k kernel selects (ops.cu) */
#define TK_PARTS 64 /* most blocks of topk_part (ops.cu), each TK_MAX keys of 8 bytes */
#define TL_N 65536 /* stamps the timeline holds (port.cuh BRASA_TL_N) */
struct ktime { /* time per kernel name (BRASA_GPU_PROFILE, BRASA_GPU_TIMELINE) */
    const char *name;
    double ms;
    long n;
};

/* Adds ms to kernel name's row of a per-name table (at most 32 names). */
static void kt_add(struct ktime *t, int *n, const char *name, double ms)
{
    int j = 0;
    while (j < *n && strcmp(t[j].name, name))
        j++;
    if (j == *n && *n < 32)
        t[(*n)++].name = name;
    if (j < *n) {
        t[j].ms += ms;
        t[j].n++;
    }
}

static void kt_print(const char *title, const struct ktime *t, int n, long runs)
{
    double tot = 0;
    for (int i = 0; i < n; i++)
        tot += t[i].ms;
    fprintf(stderr, "brasa: GPU %s: %.3f ms in all", title, tot);
    fprintf(stderr, runs > 0 ? ", %ld runs\n" : "\n", runs);
    for (int i = 0; i < n; i++)
        fprintf(stderr, "  %-14s %10.3f ms %5.1f%% %8ld launches %8.2f us each\n", t[i].name,
                t[i].ms, 100 * t[i].ms / tot, t[i].n, 1e3 * t[i].ms / (double)t[i].n);
}
static bool env_is(const char *name, const char *v);
static int env_int(const char *name, int def);
static void up_free(struct gpu *g);

#define MAX_PLANS 4
#define ROPE_CS_MAX 256 /* floats of a position's RoPE table: [pair][cos, sin], heads up to 256 */
#define CST_CHUNK 256   /* positions of the RoPE table the host fills at once (cst_fill) */
/* mmt.cu split along k: at most this many partial tiles (blocks) a launch, each of at most
 * MMT_TILE_FLOATS floats (128 x 128 F16 tiles: 64 values for each of 256 threads) */
#define MMT_SPLIT_TILES 256
#define ATTN_CNT 256 /* d_cnt's counts after mmt's: decode attention's, a block row of heads */
#define MMT_TILE_FLOATS (256 * 64)
#define MMT_STAGE_BYTES (2 * 128 * 40 * 2) /* mmt.cu F16 / BF16: one stage of tiles */
#define MMT_KF_BYTES (2 * (64 + 128) * 72 * 2) /* mmt.cu Q4_K / Q5_K on F16: two stages */
#define MMT_DQ_STAGE_BYTES (128 * 72 * 2) /* mmt.cu dequantizing: one stage of either tile */
/* mmt.cu WG: a tile of 128 rows of 64 halves. A stage holds two tiles' worth: WG 1's weight
 * and token tiles of 32 halves a row (one), WG 2's of 64 (two); with DQ, the NS token stages
 * and 3 weight stages are one each. WG 2 asks for 1 KiB more to align its tiles. */
#define MMT_WG_TILE_BYTES (128 * 64 * 2)
struct gpu_sess {
    struct gpu *g;
    const struct nccl *nc;  /* the shards' communicator (gpu_sess_set_comm), for ALLREDUCE */
    ncclComm_t comm;
    CUdeviceptr d_gat;      /* gpu_sess_gather: its send block, then every rank's */
    void *h_gat;            /* pinned: every rank's block */
    size_t gat_cap;
    CUstream st;
    /* runs in flight (gpu_sess_launch): each slot has its own host staging and events, so that
     * a decode step can be launched before the host has read the one before it */
    struct gslot {
        CUevent ev0, ev1, ev2; /* before the kernels, after them, after the copy to the host */
        int32_t *h_io;         /* pinned staging of d_io (1 + tok_cap words) */
        int32_t *h_top;        /* pinned copy of d_top */
        int top;               /* the candidates the run sends (0: the whole output) */
        bool graph;            /* it replayed the decode graph */
        const struct plan *p;  /* its plan (profile and timeline) */
    } sl[GPU_SLOTS];
    int sl_next;             /* the slot the next launch takes */
    int nfly;                /* runs launched and not yet finished, the oldest first */
    int sl_done;             /* the slot of the last finished run */
    CUevent evg;             /* gpu_sess_gather's end */
    struct wmap *states;
    int ns, caps;
    CUdeviceptr ws;         /* workspace: arena + quantized activations + attention partials */
    size_t ws_cap;
    unsigned ws_gen;
    CUdeviceptr d_io;        /* [1 + tok_cap] 4-byte words: the position, the batch's tokens */
    CUdeviceptr d_pos, d_tok; /* into d_io */
    /* the decode RoPE's table (plan.rope_half): [cst_np positions][cst_half pairs][cos, sin],
     * filled a chunk of CST_CHUNK positions at a time as steps reach them (cst_ok), from the
     * pinned staging h_cst (its last copy ends at ev_cst; before the first, the event, never
     * recorded, reads as done) */
    CUdeviceptr d_cst;
    int cst_np, cst_half;
    float cst_ts;
    unsigned char *cst_ok;
    float *h_cst;
    CUevent ev_cst;
    CUdeviceptr d_cnt;       /* [MMT_SPLIT_TILES + ATTN_CNT] int32, zero between launches: mmt's
                              * counts, then decode attention's */
    int tok_cap;
    int32_t *h_io;           /* pinned staging of d_io, a block each slot (gslot.h_io) */
    struct plan plans[MAX_PLANS];
    float *out;              /* pinned: the output node's rows */
    size_t out_cap;
    bool out_valid;          /* out holds the last run's output (else it is still on the device) */
    CUdeviceptr out_dev;     /* the last run's output node */
    size_t out_len;
    CUdeviceptr d_top;       /* [1 + 2 TK_MAX] int32: K, then the top-k kernel's ids and values */
    CUdeviceptr d_tkp;       /* [TK_PARTS TK_MAX] keys: topk_part's blocks' candidates */
    bool tk_one;             /* the top-k in one block (BRASA_GPU_TOPK_PARTS=1: measurement) */
    int32_t *h_top;          /* pinned copies of d_top, GPU_SLOTS blocks of 1 + 2 TK_MAX */
    int top_n;               /* candidates of the last finished run (0: none) */
    const char *dump;
    bool use_graph, fuse;
    bool mvd;                /* decode products with mvd.cu (BRASA_GPU_MVD=0: matvec.cu) */
    int attn_q;              /* decode attention converts the o product's input */
    int mvd_mix;             /* a q/k/v launch may take a v of another type (mm_mix;
                              * BRASA_GPU_MVD_MIX=0: v in a launch of its own) */
    int attn_inmerge;        /* decode attention merges its splits (no attn_merge launch) */
    int rope_fuse;           /* decode RoPE in the q/k/v products: 2 always (the default), 1
                              * where they are small (rope_into_products), 0 never
                              * (BRASA_GPU_ROPE_FUSE) */
    bool rope_table;         /* rope launches read the session's table of angles (rope_table;
                              * the default; BRASA_GPU_ROPE_TABLE=0: they make their own, in
                              * double) */
    bool pdl;                /* programmatic dependent launch (sm_90+; BRASA_GPU_PDL=0: off) */
    bool mmt;                /* tensor-core prompt batches (sm_80+, CUDA; BRASA_GPU_MMT=0: off) */
    int force_nr, force_ks;  /* BRASA_GPU_MVD_NR / _KS: fixed decode row groups (measurement) */
    int head_nr;             /* BRASA_GPU_MVD_HEAD_NR: rows a group in the LM head (mvd_rows;
                              * measurement) */
    int wmin;                /* decode products split along k below this many warps per SM
                              * (BRASA_GPU_MVD_WMIN; 0: by type, plan_matmul) */
    int mf, mf_ks, mf_rg, mf_la; /* Q4_K decode products reading the F32 activation on the
                              * tensor cores (mvf.cu; plan_matmul says where: BRASA_GPU_MF, 1 by
                              * default), and their warps a block, row groups a warp and loads
                              * ahead where set (BRASA_GPU_MF_KS, _RG, _LA: measurements) */
    int mvd_xc;              /* decode products that convert their own activation (mvd.cu
                              * XC): 1 those gpu_mvd_xc names, 0 none, 2 every one, 3
                              * those and every other of rows up to 8192
                              * (BRASA_GPU_MVD_XC) */
    int top_dev;             /* the top-k count d_top holds (-1: not known) */
    bool tk_host;            /* the top-k kernel writes the candidates into the run slot's
                              * pinned memory (BRASA_GPU_TOPK_HOST=0: a copy after it, as
                              * before; a measurement) */
    bool fa;                 /* prompt attention on the tensor cores (BRASA_GPU_FA=0: off) */
    bool fa256;              /* ... for heads of 256 too (BRASA_GPU_FA256=0: the per-token
                              * kernel) */
    bool conv_fuse;          /* the DeltaNet's convolution in the decode product before it
                              * (conv_into_products; BRASA_GPU_CONV_FUSE=0: its own launch) */
    bool attn_gate;          /* qwen35's gate after decode attention in attention's output
                              * (fuse; BRASA_GPU_ATTN_GATE=0: the eltwise launch) */
    bool rope_view;          /* a ROPE reads the VIEW of q before it in place (fuse;
                              * BRASA_GPU_ROPE_VIEW=0: the view's own launch) */
    bool dn_fuse;            /* the DeltaNet's GATES in its kernel and its gated RMSNorm in the
                              * output product's conversion (fuse; BRASA_GPU_DN_FUSE=0: their
                              * own launches) */
    bool dn_stage;           /* prompts' DeltaNet with its inputs staged in shared memory
                              * (BRASA_GPU_DN_STAGE=0: the kernel of decode) */
    bool dn_chunk;           /* prompts' DeltaNet a chunk of tokens at a time (qwen35 4B on an
                              * H100: 274 against 389 us a launch, pp512 +10%;
                              * BRASA_GPU_DN_CHUNK=0: deltanet_staged) */
    int mmt_min;             /* fewest tokens for the tensor cores (BRASA_GPU_MMT_MIN, 256) */
    bool mmt_kx;             /* exact K-format prompt products on warpgroups (plan_product) */
    bool no_split;           /* BRASA_GPU_MMT_SPLIT=0: mmt never splits k */
    int mmt_dq;              /* quantized prompt weights dequantized into F16 tiles: 0 never,
                              * 1 where it pays (plan_matmul), 2 always (BRASA_GPU_MMT_DQ) */
    /* BRASA_GPU_PROFILE=1: eager launches with an event after each; time per kernel name,
     * printed when the session ends; =2 also each launch of every prompt batch, with its
     * node, as it ends */
    int prof;
    CUevent *pev;
    int npev;
    struct ktime pk[32];
    int npk;
    /* BRASA_GPU_TIMELINE=1: in every run, the time from each launch's stamp (its wait
     * returned) to the next one's, per kernel name (the last launch left out), printed when
     * the session ends */
    struct ktime tk[32];
    int ntk;
    long tl_runs, tl_bad;
    uint64_t *h_tl;
    float last_ms;
};

/* ---------------------------------------------------------------- device */

#define CK(call, ...)                                                    \
    do {                                                                 \
        brasa_status st_ = DRV_CALL(&g->d, err, call, __VA_ARGS__);      \
        if (st_ != BRASA_OK)                                             \
            return st_;                                                  \
    } while (0)

static brasa_status load_fixed(struct gpu *g, struct brasa_err *err)
{
    brasa_status st;
    if ((st = jit_module(&g->jit, "ops.cu", NULL, 0, &g->m_ops, err)))
        return st;
    for (int i = 0; i < K_COUNT; i++) {
        int local = 0;
        if (i == K_QUANT) /* (quantize.cu: when get_quant first needs it) */
            continue;
        /* rope's only local memory is sinf/cosf's range reduction for large angles */
        if ((st = jit_function(&g->jit, g->m_ops, k_names[i], &g->k[i], NULL,
                               i == K_ROPE ? &local : NULL, err)) != BRASA_OK)
            return st;
    }
    return BRASA_OK;
}

brasa_status gpu_open(struct gpu **out, const struct gpu_opts *o, struct brasa_err *err)
{
    *out = NULL;
    struct gpu *g = calloc(1, sizeof *g);
    if (!g)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    if (o)
        g->o = *o;
    const char *e = getenv("BRASA_GPU_TIMEOUT");
    if (g->o.timeout_s <= 0)
        g->o.timeout_s = e && atof(e) > 0 ? atof(e) : 60.0;
    if (g->o.duty <= 0 && (e = getenv("BRASA_GPU_DUTY")) && atof(e) > 0 && atof(e) < 1)
        g->o.duty = atof(e);
    if ((e = getenv("BRASA_VERBOSE")) && *e && strcmp(e, "0") != 0)
        g->o.verbose = true;
    g->up_pageable = env_is("BRASA_GPU_UPLOAD", "0");
    pthread_mutex_init(&g->mu, NULL);
    const double t_open = plat_now();
    brasa_status st = drv_open(&g->d, NULL, err); /* $BRASA_GPU: cuda, hip, auto or none */
    if (st != BRASA_OK) {
        free(g);
        return st;
    }
    int maj = 0, min = 0;
    if ((st = DRV_CALL(&g->d, err, cuDeviceGet, &g->dev, g->o.device)) ||
        (st = DRV_CALL(&g->d, err, cuDevicePrimaryCtxRetain, &g->ctx, g->dev)) ||
        (st = DRV_CALL(&g->d, err, cuCtxSetCurrent, g->ctx)) ||
        (st = DRV_CALL(&g->d, err, cuDeviceGetName, g->name, (int)sizeof g->name, g->dev)) ||
        (st = DRV_CALL(&g->d, err, cuDeviceGetAttribute, &maj,
                       CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, g->dev)) ||
        (st = DRV_CALL(&g->d, err, cuDeviceGetAttribute, &min,
                       CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, g->dev)) ||
        (st = DRV_CALL(&g->d, err, cuDeviceGetAttribute, &g->n_sm,
                       CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, g->dev)) ||
        (st = DRV_CALL(&g->d, err, cuDeviceGetAttribute, &g->smem_optin,
                       CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, g->dev))) {
        gpu_close(g);
        return st;
    }
    /* what bounds the blocks an SM holds (optional: HIP may not report them) */
    if (g->d.cuDeviceGetAttribute(&g->sm_smem,
                                  CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
                                  g->dev) != 0 ||
        g->d.cuDeviceGetAttribute(&g->sm_regs,
                                  CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR,
                                  g->dev) != 0 ||
        g->d.cuDeviceGetAttribute(&g->sm_threads,
                                  CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, g->dev) != 0)
        g->sm_smem = g->sm_regs = g->sm_threads = 0;
    if (maj < 7 || (maj == 7 && min < 5)) {
        gpu_close(g);
        return brasa_fail(err, BRASA_EUNSUPPORTED, "%s (sm_%d%d) is older than brasa supports "
                          "(sm_75 and newer)", g->name, maj, min);
    }
    g->jit.d = &g->d;
    g->jit.arch = maj * 10 + min;
    g->d.cuDriverGetVersion(&g->jit.driver_ver);
    snprintf(g->jit.dev_name, sizeof g->jit.dev_name, "%s", g->name);
    g->jit.verbose = g->o.verbose;
    g->jit.lineinfo = getenv("BRASA_GPU_LINEINFO") != NULL;
    if (!kcache_dir(g->jit.cache_dir, sizeof g->jit.cache_dir))
        g->jit.cache_dir[0] = 0;
    if ((e = getenv("BRASA_GPU_KEEP")) && *e)
        snprintf(g->jit.keep_dir, sizeof g->jit.keep_dir, "%s", e);
    size_t budget = 0;
    if ((e = getenv("BRASA_GPU_MEM_MB")) && atol(e) > 0)
        budget = (size_t)atol(e) << 20;
    gmem_init(&g->mem, &g->d, budget);
    g->tl_level = drv_is_hip(&g->d) ? 0 : env_int("BRASA_GPU_TIMELINE", 0);
    g->spec = !env_is("BRASA_GPU_SPEC", "0");
    g->attn256 = !env_is("BRASA_GPU_ATTN_256", "0");
    /* Hopper's warpgroup products for the prompt tiles by default (mmt.cu WG; BRASA_GPU_MMT_WG:
     * 0 never, 1 unswizzled F16 / BF16 tiles, 2 swizzled, 3 swizzled and the dequantized
     * weights' too): pp512 1.5B F16 1.29x, Q4_K_M 1.14x, 7B Q4_K_M 1.26x (BENCHMARKS.md) */
    g->mmt_wg = g->jit.arch == 90 && !drv_is_hip(&g->d) ? env_int("BRASA_GPU_MMT_WG", 3) : 0;
    if (g->tl_level > 0) {
        size_t nb = (1 + 2 * (size_t)TL_N) * 8;
        if ((st = gmem_alloc(&g->mem, &g->tl, nb, "timeline", "gpu", err)) ||
            (st = DRV_CALL(&g->d, err, cuMemsetD8Async, g->tl, 0, nb, NULL)) ||
            (st = DRV_CALL(&g->d, err, cuCtxSynchronize))) {
            gpu_close(g);
            return st;
        }
        g->jit.tl = (long long)g->tl;
    }
    if ((st = load_fixed(g, err)) != BRASA_OK) {
        gpu_close(g);
        return st;
    }
    if (g->o.verbose)
        fprintf(stderr, "brasa: GPU %s (sm_%d, %d SMs, driver %d), kernel cache %s; opened "
                "in %.3f s\n", g->name, g->jit.arch, g->n_sm, g->jit.driver_ver,
                g->jit.cache_dir[0] ? g->jit.cache_dir : "off", plat_now() - t_open);
    *out = g;
    return BRASA_OK;
}

void gpu_close(struct gpu *g)
{
    if (!g)
        return;
    if (g->d.lib_cuda) {
        g->d.cuCtxSetCurrent(g->ctx);
        if (g->o.verbose) {
            fprintf(stderr, "brasa: kernels: %d compiled in %.3f s, %d from the cache, modules "
                    "loaded in %.3f s; weights %.1f MiB uploaded in %.3f s (%.3f s of it "
                    "packing on the CPUs)\n", g->jit.n_compiled, g->jit.compile_s,
                    g->jit.n_cached, g->jit.load_s, (double)g->weight_bytes / 1048576.0, g->up_s,
                    g->pack_s);
            gmem_report(&g->mem, stderr);
        }
        for (int i = 0; i < g->nw; i++)
            gmem_free(&g->mem, g->w[i].dev);
        gmem_free(&g->mem, g->tl);
        up_free(g);
        for (int i = 0; i < 2; i++)
            if (g->ev_up[i])
                g->d.cuEventDestroy(g->ev_up[i]);
        for (int i = 0; i < g->n_mv; i++)
            g->d.cuModuleUnload(g->mv[i].mod);
        if (g->m_ops)
            g->d.cuModuleUnload(g->m_ops);
        if (g->m_quant)
            g->d.cuModuleUnload(g->m_quant);
        for (int i = 0; i < 5; i++) {
            if (g->ak[i].m)
                g->d.cuModuleUnload(g->ak[i].m);
            if (g->m_qm[i])
                g->d.cuModuleUnload(g->m_qm[i]);
        }
        for (int i = 0; i < 3; i++)
            if (g->m_fa[i])
                g->d.cuModuleUnload(g->m_fa[i]);
        int leaks = gmem_shutdown(&g->mem, stderr);
        if (leaks)
            fprintf(stderr, "brasa: %d GPU allocations leaked\n", leaks);
        if (g->ctx)
            g->d.cuDevicePrimaryCtxRelease(g->dev);
    }
    drv_unload(&g->d);
    free(g->w);
    pthread_mutex_destroy(&g->mu);
    free(g);
}

const char *gpu_device_name(const struct gpu *g) { return g->name; }
int gpu_arch(const struct gpu *g) { return drv_is_hip(&g->d) ? 0 : g->jit.arch; }
uint64_t gpu_weight_bytes(const struct gpu *g) { return g->weight_bytes; }
void gpu_mem_report(const struct gpu *g, FILE *f) { gmem_report(&g->mem, f); }

void gpu_jit_stats(const struct gpu *g, double *compile_s, double *load_s, int *compiled,
                   int *cached)
{
    *compile_s = g->jit.compile_s;
    *load_s = g->jit.load_s;
    *compiled = g->jit.n_compiled;
    *cached = g->jit.n_cached;
}


/* Blocks of nt threads with regs registers each and shm bytes of shared memory in all that
 * one SM holds at once (registers are given out 8 per thread at a time, and each block takes
 * 1 KiB of shared memory for the system); 2 where the device does not say. */
static int blocks_per_sm(const struct gpu *g, int nt, int regs, unsigned shm)
{
    if (!g->sm_smem || !g->sm_regs || !g->sm_threads || nt <= 0)
        return 2;
    int b = g->sm_threads / nt, r = g->sm_regs / (((regs + 7) / 8 * 8) * nt);
    int m = g->sm_smem / (int)(shm + 1024);
    b = r < b ? r : b;
    b = m < b ? m : b;
    return b < 1 ? 1 : b;
}

/* Lets fn take shm bytes of dynamic shared memory a block (past 48 KiB it must opt in, up to
 * the device's limit); false where it cannot. */
static bool allow_smem(struct gpu *g, CUfunction fn, size_t shm)
{
    int st = 0; /* (its static shared memory counts against the 48 KiB too) */
    g->d.cuFuncGetAttribute(&st, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn);
    return shm + (size_t)st <= 48 * 1024 ||
           (shm + (size_t)st <= (size_t)g->smem_optin &&
            g->d.cuFuncSetAttribute(fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                    (int)shm) == 0);
}

/* The elements of a lane's piece in the decode product (mvd.cu KP): Q4_K and Q6_K in groups of
 * 2 rows take pieces of 32 bytes (a pair of sub-blocks with one pair of scales; Q6_K: the two
 * quarters that share their qh bytes), half as many in flight as pieces of 16 (tg128 +0.6-3%
 * on 1.5B Q4_K_M, BENCHMARKS.md); BRASA_GPU_MVD_K64=0 / BRASA_GPU_MVD_Q6P=0 give pieces of 16
 * (measurement). The other types: 32. */
static int mvd_kp(uint32_t type, int nr)
{
    if (nr == 2 && type == T_Q4_K)
        return env_int("BRASA_GPU_MVD_K64", 1) ? 64 : 32;
    if (nr == 2 && type == T_Q6_K)
        return env_int("BRASA_GPU_MVD_Q6P", 1) ? 64 : 32;
    return 32;
}

/* The elements of the pieces on which the decode product's k split is decided (plan_matmul):
 * a lane's piece, but 16 for Q8_0, whose pieces are whole blocks of 32: deciding on those left
 * the 1.5B launches of k = 1,536 unsplit with half the lanes a piece short (tg128 -0.6-1%,
 * BENCHMARKS.md). */
static int mvd_split_pe(uint32_t type, int nr)
{
    return type == T_F16 || type == T_BF16 ? 8 : type == T_F32 ? 4 : type == T_Q8_0 ? 16
                                                                      : mvd_kp(type, nr);
}

/* The matrix kernel for a weight type (dec: see mv_kernel): the first variant that compiles
 * and does not spill. */
static brasa_status get_mv(struct gpu *g, int dec, uint32_t wtype, int nc, int glu, int nr,
                           int xc, int rp, uint32_t wtype2, struct mv_kernel **out,
                           struct brasa_err *err)
{
    for (int i = 0; i < g->n_mv; i++)
        if (g->mv[i].dec == dec && g->mv[i].wtype == wtype && g->mv[i].nc == nc &&
            g->mv[i].glu == glu && g->mv[i].nr == nr && g->mv[i].xc == xc &&
            g->mv[i].rp == rp && g->mv[i].wtype2 == wtype2) {
            *out = &g->mv[i];
            return BRASA_OK;
        }
    if (g->n_mv == (int)(sizeof g->mv / sizeof g->mv[0]))
        return brasa_fail(err, BRASA_EUNSUPPORTED, "too many matvec kernels");
    struct gpu_variant v[8];
    int nv = dec == 2 ? gpu_mmt_variants(wtype, glu, nc == 128 ? 1 : nc == 256 ? 2 : 0,
                                         g->mmt_wg, v, 8)
             : dec && wtype2 ? gpu_mvd_mix_variants(wtype, wtype2, nc, rp, v, 6)
             : dec    ? gpu_mvd_variants(wtype, glu, nr, nc, xc, rp, mvd_kp(wtype, nr), v, 6)
                      : gpu_matvec_variants(wtype, nc, glu, v, 6);
    const char *fname = dec == 2 ? "mmt" : dec ? "mvd" : "matvec";
    if (nv == 0)
        return brasa_fail(err, BRASA_EUNSUPPORTED,
                          "weight type %u has no GPU matrix kernel (supported: F32, F16, BF16, "
                          "Q4_0, Q8_0, Q4_K, Q5_K, Q6_K)", wtype);
    brasa_status st = BRASA_OK;
    for (int k = 0; k < nv; k++) {
        /* mmt.cu: its Q4_K / Q5_K, dequantizing and warpgroup paths; stages */
        int kf = 0, dq = 0, wg = 0, ns = 0, kx = 0;
        for (int d = 0; d < v[k].n_defs; d++) {
            kf |= !strcmp(v[k].defs[d].name, "KF") && v[k].defs[d].value;
            kx |= !strcmp(v[k].defs[d].name, "KX") && v[k].defs[d].value;
            dq |= !strcmp(v[k].defs[d].name, "DQ") && v[k].defs[d].value;
            if (!strcmp(v[k].defs[d].name, "WG"))
                wg = (int)v[k].defs[d].value;
            if (!strcmp(v[k].defs[d].name, "NS"))
                ns = (int)v[k].defs[d].value;
        }
        if (kf && env_is("BRASA_GPU_MMT_KF", "0"))
            continue;
        struct mv_kernel m = {.wtype = wtype, .dec = dec, .nc = nc, .glu = glu, .nr = nr,
                              .xc = xc, .rp = rp, .wtype2 = wtype2,
                              .nw = (int)v[k].defs[1].value,
                              .ncv = dec ? 1 : (int)v[k].defs[2].value};
        if (dec == 2 && env_is("BRASA_GPU_MMT_PF", "0") && v[k].n_defs < GV_MAX_DEFS)
            v[k].defs[v[k].n_defs++] = (struct jit_def){"PF", 0}; /* (measurement) */
        for (int d = 0; dec == 1 && d < v[k].n_defs; d++) /* (measurement) */
            if (!strcmp(v[k].defs[d].name, "AL") && env_is("BRASA_GPU_MVD_AL", "0"))
                v[k].defs[d].value = 0;
        int rl = env_int("BRASA_GPU_MVD_RL", -1); /* (measurement) */
        if (dec == 1 && rp && rl >= 0 && v[k].n_defs < GV_MAX_DEFS)
            v[k].defs[v[k].n_defs++] = (struct jit_def){"RL", rl};
        int ef = env_int("BRASA_GPU_MVD_EF", -1); /* (measurement: the weights' loads) */
        if (dec == 1 && ef >= 0 && v[k].n_defs < GV_MAX_DEFS)
            v[k].defs[v[k].n_defs++] = (struct jit_def){"EF", ef};
        int ip = env_int("BRASA_GPU_MVD_IP", -1); /* (measurement: pointers stepped a round) */
        if (dec == 1 && ip >= 0 && v[k].n_defs < GV_MAX_DEFS)
            v[k].defs[v[k].n_defs++] = (struct jit_def){"IP", ip};
        if ((st = jit_module(&g->jit, v[k].tmpl, v[k].defs, v[k].n_defs, &m.mod, err)) != BRASA_OK)
            continue;
        int regs = 0, local = 0;
        /* the last candidate is taken even if it spills (slower, but it runs) */
        if ((st = jit_function(&g->jit, m.mod, fname, &m.fn, &regs, k == nv - 1 ? &local : NULL,
                               err)) != BRASA_OK) {
            if (g->o.verbose)
                fprintf(stderr, "brasa: rejected %s type %u variant %d: %s\n", fname, wtype, k,
                        err->msg);
            g->d.cuModuleUnload(m.mod);
            continue;
        }
        m.regs = regs;
        g->d.cuFuncGetAttribute(&m.sshm, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, m.fn);
        if (dec == 2) { /* the tile shapes of mmt.cu's four paths */
            int fl = wtype == T_F16 || wtype == T_BF16;
            m.dq = dq;
            m.kx = kx;
            m.wg = wg;
            m.tr = fl || dq ? (glu ? 64 : 128) : kf && glu ? 32 : 64;
            m.ncv = fl || kf || dq ? 128 : 64;
            m.nt = fl || kf || dq ? 256 : 128;
            m.shm = kf   ? MMT_KF_BYTES
                  : wg ? (unsigned)(dq ? ns + 3 : wg * ns) * MMT_WG_TILE_BYTES +
                             (wg == 2 ? 1024u : 0u)
                  : dq ? (unsigned)(ns + 2) * MMT_DQ_STAGE_BYTES
                       : (unsigned)ns * MMT_STAGE_BYTES;
            m.bps = blocks_per_sm(g, m.nt, regs, m.shm + (unsigned)m.sshm);
        }
        if (!allow_smem(g, m.fn, m.shm)) {
            st = brasa_fail(err, BRASA_EUNSUPPORTED, "%u bytes of shared memory", m.shm);
            g->d.cuModuleUnload(m.mod);
            continue;
        }
        if (g->o.verbose)
            fprintf(stderr, "brasa: %s type %u%s%s%s: variant %d, NW=%d %s=%d (%d registers, %d "
                    "local bytes)\n", fname, wtype, glu ? " gate+up" : "", xc ? " XC" : "",
                    rp ? " RP" : "", k,
                    m.nw, dec == 1 ? "NR" : "NC", dec == 1 ? nr : m.ncv, regs, local);
        g->mv[g->n_mv] = m;
        *out = &g->mv[g->n_mv++];
        return BRASA_OK;
    }
    return brasa_wrap(err, st, "no usable %s variant for type %u", fname, wtype);
}

/* Template tmpl rendered with defs[0..n) into *mod, its functions names[0..nf) into fn (a
 * kernel loaded when first used); nothing is kept when one of them fails */
static brasa_status load_module(struct gpu *g, const char *tmpl, const struct jit_def *defs,
                                int n, const char *const *names, int nf, CUmodule *mod,
                                CUfunction *fn, struct brasa_err *err)
{
    brasa_status st = jit_module(&g->jit, tmpl, defs, n, mod, err);
    for (int i = 0; i < nf && st == BRASA_OK; i++)
        st = jit_function(&g->jit, *mod, names[i], &fn[i], NULL, NULL, err);
    if (st != BRASA_OK && *mod) {
        g->d.cuModuleUnload(*mod);
        *mod = NULL;
        for (int i = 0; i < nf; i++)
            fn[i] = NULL;
    }
    return st;
}

/* The attention kernels (attn.cu: attn, attn_merge) for heads of hd values and an F16 (f16)
 * or F32 cache, with the gate after them (attn.cu AG) or without. Slot 0 holds the kernels
 * for any shape, gate or none (BRASA_GPU_SPEC=0, or a fifth kind in one process), slots 1-4
 * the rendered ones, filled in order. */
static brasa_status get_attn(struct gpu *g, int hd, int f16, int gate, CUfunction *fn,
                             CUfunction *merge, struct brasa_err *err)
{
    static const char *const names[2] = {"attn", "attn_merge"};
    int i = 0;
    if (g->spec)
        for (i = 1; i < 5 && g->ak[i].fn[0] &&
                    (g->ak[i].hd != hd || g->ak[i].f16 != f16 || g->ak[i].gate != gate);
             i++)
            ;
    if (i == 5)
        i = 0;
    if (!g->ak[i].fn[0]) {
        /* (AO256: heads of 256 through the F16 output pass of the heads of 128 and their
         * key rows in one round; BRASA_GPU_ATTN_256=0: a thread per element) */
        struct jit_def defs[4] = {{"AHD", hd}, {"AF16", f16}, {"AG", gate != 0}, {"AO256", 1}};
        brasa_status st = load_module(g, "attn.cu", defs,
                                      !i ? 0 : hd == 256 && f16 && g->attn256 ? 4 : 3, names, 2,
                                      &g->ak[i].m, g->ak[i].fn, err);
        if (st != BRASA_OK)
            return st;
        g->ak[i].hd = hd;
        g->ak[i].f16 = f16;
        g->ak[i].gate = gate != 0;
    }
    *fn = g->ak[i].fn[0];
    *merge = g->ak[i].fn[1];
    return BRASA_OK;
}

/* quant_act (quantize.cu) for one conversion mode (0-4; BRASA_GPU_SPEC=0: for any) */
static brasa_status get_quant(struct gpu *g, int mode, CUfunction *fn, struct brasa_err *err)
{
    static const char *const name = "quant_act";
    brasa_status st;
    if (!g->spec || mode < 0 || mode > 4) { /* the kernel for any mode, loaded once */
        if (!g->k[K_QUANT] && (st = load_module(g, "quantize.cu", NULL, 0, &name, 1, &g->m_quant,
                                                &g->k[K_QUANT], err)) != BRASA_OK)
            return st;
        *fn = g->k[K_QUANT];
        return BRASA_OK;
    }
    struct jit_def def = {"QMODE", mode};
    if (!g->k_qm[mode] && (st = load_module(g, "quantize.cu", &def, 1, &name, 1, &g->m_qm[mode],
                                            &g->k_qm[mode], err)) != BRASA_OK)
        return st;
    *fn = g->k_qm[mode];
    return BRASA_OK;
}

/* mvf.cu (the Q4_K decode product on the tensor cores) for rg row groups a warp, ks warps a
 * block, gate+up and the RMSNorm folded in or not */
static brasa_status get_mf(struct gpu *g, uint32_t wt, int rg, int ks, int glu, int norm, int la,
                           CUfunction *fn, struct brasa_err *err)
{
    static const char *const name = "mvf";
    const int key = rg | ks << 2 | glu << 8 | norm << 9 | (int)wt << 10 | la << 16;
    for (int i = 0; i < g->n_mf; i++)
        if (g->mf[i].key == key) {
            *fn = g->mf[i].fn;
            return BRASA_OK;
        }
    if (g->n_mf == (int)(sizeof g->mf / sizeof g->mf[0]))
        return brasa_fail(err, BRASA_EUNSUPPORTED, "mvf: too many variants");
    struct jit_def defs[6] = {{"QT", (long)wt}, {"RG", rg}, {"KS", ks}, {"GLU", glu},
                              {"NORM", norm}, {"LA", la}};
    brasa_status st = load_module(g, "mvf.cu", defs, 6, &name, 1, &g->mf[g->n_mf].m,
                                  &g->mf[g->n_mf].fn, err);
    if (st != BRASA_OK)
        return st;
    g->mf[g->n_mf].key = key;
    *fn = g->mf[g->n_mf++].fn;
    return BRASA_OK;
}

/* The prompt attention kernel (fa.cu) for heads of hd (64, 128 or 256) values. */
static brasa_status get_fa(struct gpu *g, int hd, CUfunction *fn, struct brasa_err *err)
{
    static const char *const name = "fa";
    int i = hd == 64 ? 0 : hd == 128 ? 1 : 2;
    struct jit_def def = {"HD", hd};
    brasa_status st;
    if (!g->k_fa[i] &&
        (st = load_module(g, "fa.cu", &def, 1, &name, 1, &g->m_fa[i], &g->k_fa[i], err)) !=
            BRASA_OK)
        return st;
    *fn = g->k_fa[i];
    return BRASA_OK;
}

#define UP_CHUNK ((size_t)32 << 20)

static brasa_status wait_event(struct gpu_sess *s, CUevent ev, const char *what,
                               struct brasa_err *err);

/* The upload staging (gpu.h_up), allocated when first needed; false where it cannot be (the
 * weights are then copied from pageable memory, one chunk at a time). */
static bool up_staging(struct gpu *g)
{
    if (!g->d.cuMemAllocHost || !g->d.cuEventCreate)
        return false;
    for (int i = 0; i < 2; i++) {
        if (!g->h_up[i] && g->d.cuMemAllocHost(&g->h_up[i], UP_CHUNK) != 0)
            g->h_up[i] = NULL;
        if (g->h_up[i] && !g->ev_up[i] &&
            g->d.cuEventCreate(&g->ev_up[i], CU_EVENT_DISABLE_TIMING) != 0)
            g->ev_up[i] = NULL;
        if (!g->h_up[i] || !g->ev_up[i])
            return false;
    }
    return true;
}

/* Frees the upload staging's buffers (its events stay for the next uploads). */
static void up_free(struct gpu *g)
{
    for (int i = 0; i < 2; i++) {
        if (g->h_up[i])
            g->d.cuMemFreeHost(g->h_up[i]);
        g->h_up[i] = NULL;
    }
}

/* Waits for the uploads queued on the session's stream and frees the staging (the end of a
 * plan; its weights are then on the device). */
static brasa_status up_finish(struct gpu_sess *s, struct brasa_err *err)
{
    struct gpu *g = s->g;
    brasa_status st = BRASA_OK;
    if (g->up_queued) {
        double t0 = plat_now();
        st = DRV_CALL(&g->d, err, cuStreamSynchronize, s->st);
        g->up_s += plat_now() - t0;
        g->up_queued = false;
    }
    up_free(g);
    return st;
}

/* Copies a weight to the device, quantized types in the planar layout (gpu/layout.h), a
 * chunk of blocks at a time: packed on every CPU into one of two pinned buffers while the
 * other's chunk is copied (queued on the session's stream, ahead of any launch that reads
 * the weight; up_finish waits for them), or without the staging through pageable memory, one
 * chunk at a time (BRASA_GPU_UPLOAD=0: a measurement). */
static brasa_status upload_weight(struct gpu_sess *s, uint32_t type, CUdeviceptr p,
                                  const void *host, size_t bytes, struct brasa_err *err)
{
    struct gpu *g = s->g;
    struct layout_field f[LAYOUT_MAX_FIELDS];
    size_t bb = 0;
    int nf = layout_fields(type, f, &bb);
    if (nf == 0)
        return DRV_CALL(&g->d, err, cuMemcpyHtoD, p, host, bytes);
    size_t nblk = bytes / bb, chunk = UP_CHUNK / bb;
    if (chunk > nblk)
        chunk = nblk;
    const bool staged = !g->up_pageable && up_staging(g);
    uint8_t *tmp = staged ? NULL : malloc(chunk * bb);
    if (!staged && !tmp)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    brasa_status st = BRASA_OK;
    for (size_t b0 = 0; b0 < nblk && st == BRASA_OK; b0 += chunk) {
        size_t cb = nblk - b0 < chunk ? nblk - b0 : chunk, roff = 0;
        uint8_t *buf = tmp;
        const int k = g->up_next;
        if (staged) { /* (the copy before from this buffer read it) */
            if ((st = wait_event(s, g->ev_up[k], "a weight upload", err)) != BRASA_OK)
                break;
            buf = g->h_up[k];
            g->up_next ^= 1;
        }
        double t0 = plat_now();
        layout_pack_threads(type, (const uint8_t *)host + b0 * bb, cb, buf, plat_ncpu());
        g->pack_s += plat_now() - t0;
        for (int j = 0; j < nf && st == BRASA_OK; j++) {
            const CUdeviceptr d = p + roff * nblk + b0 * f[j].size;
            st = staged ? DRV_CALL(&g->d, err, cuMemcpyHtoDAsync, d, buf + roff * cb,
                                   cb * f[j].size, s->st)
                        : DRV_CALL(&g->d, err, cuMemcpyHtoD, d, buf + roff * cb, cb * f[j].size);
            roff += f[j].size;
        }
        if (staged && st == BRASA_OK) {
            st = DRV_CALL(&g->d, err, cuEventRecord, g->ev_up[k], s->st);
            g->up_queued = true;
        }
    }
    free(tmp);
    return st;
}

/* Device copy of a weight (uploaded on first use; tied tensors share one copy). */
static brasa_status weight_dev(struct gpu_sess *s, const struct graph_node *n, CUdeviceptr *out,
                               struct brasa_err *err)
{
    struct gpu *g = s->g;
    for (int i = 0; i < g->nw; i++)
        if (g->w[i].host == n->data) {
            *out = g->w[i].dev;
            return BRASA_OK;
        }
    size_t rb = row_bytes(n->type, n->ne[0]);
    if (rb == 0)
        return brasa_fail(err, BRASA_EUNSUPPORTED, "weight %s has type %u, which the GPU backend "
                          "does not read", n->name, n->type);
    size_t bytes = rb * (size_t)(n->ne[1] * n->ne[2] * n->ne[3]);
    if (g->nw == g->capw) {
        int nc = g->capw ? 2 * g->capw : 256;
        struct wmap *nwm = realloc(g->w, (size_t)nc * sizeof *nwm);
        if (!nwm)
            return brasa_fail(err, BRASA_ENOMEM, "out of memory");
        g->w = nwm;
        g->capw = nc;
    }
    CUdeviceptr p;
    brasa_status st = gmem_alloc(&g->mem, &p, bytes, n->name, "weights", err);
    if (st != BRASA_OK)
        return st;
    double t0 = plat_now();
    if ((st = upload_weight(s, n->type, p, n->data, bytes, err)) != BRASA_OK) {
        g->d.cuStreamSynchronize(s->st); /* (copies into p may be in flight) */
        gmem_free(&g->mem, p);
        return brasa_wrap(err, st, "uploading %s", n->name);
    }
    g->up_s += plat_now() - t0;
    g->w[g->nw++] = (struct wmap){n->data, p, bytes};
    g->weight_bytes += bytes;
    *out = p;
    return BRASA_OK;
}

/* ---------------------------------------------------------------- sessions */

/* $name equals v; $name as an integer (def when unset) */
static bool env_is(const char *name, const char *v)
{
    const char *e = getenv(name);
    return e && strcmp(e, v) == 0;
}
static int env_int(const char *name, int def)
{
    const char *e = getenv(name);
    return e ? atoi(e) : def;
}

brasa_status gpu_sess_new(struct gpu *g, struct gpu_sess **out, struct brasa_err *err)
{
    *out = NULL;
    struct gpu_sess *s = calloc(1, sizeof *s);
    if (!s)
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    s->g = g;
    s->use_graph = !env_is("BRASA_GPU_GRAPH", "0");
    s->fuse = !env_is("BRASA_GPU_FUSE", "0");
    s->dump = getenv("BRASA_DUMP");
    s->mvd = !env_is("BRASA_GPU_MVD", "0");
    s->rope_fuse = env_int("BRASA_GPU_ROPE_FUSE", 2);
    s->rope_table = env_int("BRASA_GPU_ROPE_TABLE", 1) == 1;
    s->attn_q = !env_is("BRASA_GPU_ATTN_Q", "0");
    s->attn_inmerge = !env_is("BRASA_GPU_ATTN_MERGE", "1");
    s->force_nr = env_int("BRASA_GPU_MVD_NR", 0);
    s->head_nr = env_int("BRASA_GPU_MVD_HEAD_NR", 0);
    s->tk_one = env_is("BRASA_GPU_TOPK_PARTS", "1");
    s->wmin = env_int("BRASA_GPU_MVD_WMIN", 0);
    if (s->wmin < 0 || s->wmin > 256)
        s->wmin = 0;
    /* decode products convert their own activation (BRASA_GPU_MVD_XC=0: quant_act first) */
    s->mvd_xc = env_int("BRASA_GPU_MVD_XC", 1);
    s->mf = g->jit.arch >= 80 && !drv_is_hip(&g->d) ? env_int("BRASA_GPU_MF", 1) : 0;
    s->mf_ks = env_int("BRASA_GPU_MF_KS", 0);
    s->mf_rg = env_int("BRASA_GPU_MF_RG", 0);
    s->mf_la = !env_is("BRASA_GPU_MF_LA", "0");
    s->top_dev = -1;
    /* (pinned memory is the device's to write at the host's address: unified addressing) */
    s->tk_host = !drv_is_hip(&g->d) && !env_is("BRASA_GPU_TOPK_HOST", "0");
    s->force_ks = env_int("BRASA_GPU_MVD_KS", 0);
    s->mvd_mix = !env_is("BRASA_GPU_MVD_MIX", "0");
    s->fa = g->jit.arch >= 80 && !drv_is_hip(&g->d) && !env_is("BRASA_GPU_FA", "0");
    s->fa256 = !env_is("BRASA_GPU_FA256", "0");
    s->dn_fuse = !env_is("BRASA_GPU_DN_FUSE", "0");
    s->dn_stage = !env_is("BRASA_GPU_DN_STAGE", "0");
    s->dn_chunk = !env_is("BRASA_GPU_DN_CHUNK", "0");
    s->rope_view = !env_is("BRASA_GPU_ROPE_VIEW", "0");
    s->conv_fuse = !env_is("BRASA_GPU_CONV_FUSE", "0");
    s->attn_gate = !env_is("BRASA_GPU_ATTN_GATE", "0");
    s->mmt_min = env_int("BRASA_GPU_MMT_MIN", 256);
    s->mmt_kx = !env_is("BRASA_GPU_MMT_KX", "0");
    s->no_split = env_is("BRASA_GPU_MMT_SPLIT", "0");
    s->mmt_dq = env_is("BRASA_GPU_MMT_DQ", "0") ? 0 : env_is("BRASA_GPU_MMT_DQ", "2") ? 2 : 1;
    if (s->mmt_min < 2)
        s->mmt_min = 256;
    s->mmt = g->jit.arch >= 80 && !drv_is_hip(&g->d) && !env_is("BRASA_GPU_MMT", "0");
    s->prof = env_is("BRASA_GPU_PROFILE", "1") ? 1 : env_is("BRASA_GPU_PROFILE", "2") ? 2 : 0;
    s->pdl = g->d.cuLaunchKernelEx && g->jit.arch >= 90 && !drv_is_hip(&g->d) &&
             !env_is("BRASA_GPU_PDL", "0") && !s->prof;
    brasa_status st;
    if ((st = DRV_CALL(&g->d, err, cuCtxSetCurrent, g->ctx)) ||
        (st = DRV_CALL(&g->d, err, cuStreamCreate, &s->st, CU_STREAM_NON_BLOCKING)) ||
        (st = DRV_CALL(&g->d, err, cuEventCreate, &s->evg, CU_EVENT_DISABLE_TIMING)) ||
        (st = gmem_alloc(&g->mem, &s->d_top, (1 + 2 * TK_MAX) * 4, "sampler candidates",
                         "session", err)) ||
        (st = gmem_alloc(&g->mem, &s->d_tkp, (size_t)TK_PARTS * TK_MAX * 8,
                         "sampler candidates by part", "session", err)) ||
        (st = DRV_CALL(&g->d, err, cuMemAllocHost, (void **)&s->h_top,
                       GPU_SLOTS * (1 + 2 * TK_MAX) * 4))) {
        gpu_sess_free(s);
        return st;
    }
    for (int i = 0; i < GPU_SLOTS; i++) {
        struct gslot *q = &s->sl[i];
        q->h_top = s->h_top + i * (1 + 2 * TK_MAX);
        if ((st = DRV_CALL(&g->d, err, cuEventCreate, &q->ev0, CU_EVENT_DEFAULT)) ||
            (st = DRV_CALL(&g->d, err, cuEventCreate, &q->ev1, CU_EVENT_DEFAULT)) ||
            (st = DRV_CALL(&g->d, err, cuEventCreate, &q->ev2, CU_EVENT_DISABLE_TIMING))) {
            gpu_sess_free(s);
            return st;
        }
    }
    *out = s;
    return BRASA_OK;
}

static void plan_clear(struct gpu_sess *s, struct plan *p)
{
    for (int i = 0; i < GPU_SLOTS; i++)
        if (p->exec[i])
            s->g->d.cuGraphExecDestroy(p->exec[i]);
    free(p->l);
    memset(p, 0, sizeof *p);
}

void gpu_sess_free(struct gpu_sess *s)
{
    if (!s)
        return;
    struct gpu *g = s->g;
    g->d.cuCtxSetCurrent(g->ctx);
    if (s->st)
        g->d.cuStreamSynchronize(s->st);
    if (s->npk)
        kt_print("profile (eager, one event per kernel)", s->pk, s->npk, 0);
    if (s->ntk || s->tl_bad) {
        kt_print("timeline (from each launch's wait to the next one's)", s->tk, s->ntk,
                 s->tl_runs);
        if (s->tl_bad)
            fprintf(stderr, "  (%ld runs left out: stamps and launches did not match)\n",
                    s->tl_bad);
    }
    free(s->h_tl);
    for (int i = 0; i < s->npev; i++)
        g->d.cuEventDestroy(s->pev[i]);
    free(s->pev);
    for (int i = 0; i < MAX_PLANS; i++)
        plan_clear(s, &s->plans[i]);
    for (int i = 0; i < s->ns; i++)
        gmem_free(&g->mem, s->states[i].dev);
    gmem_free(&g->mem, s->ws);
    gmem_free(&g->mem, s->d_io);
    gmem_free(&g->mem, s->d_cst);
    free(s->cst_ok);
    if (s->h_cst)
        g->d.cuMemFreeHost(s->h_cst);
    if (s->ev_cst)
        g->d.cuEventDestroy(s->ev_cst);
    gmem_free(&g->mem, s->d_cnt);
    gmem_free(&g->mem, s->d_top);
    gmem_free(&g->mem, s->d_tkp);
    gmem_free(&g->mem, s->d_gat);
    if (s->h_gat)
        g->d.cuMemFreeHost(s->h_gat);
    for (int i = 0; i < GPU_SLOTS; i++) {
        CUevent *e[3] = {&s->sl[i].ev0, &s->sl[i].ev1, &s->sl[i].ev2};
        for (int j = 0; j < 3; j++)
            if (*e[j])
                g->d.cuEventDestroy(*e[j]);
    }
    if (s->evg)
        g->d.cuEventDestroy(s->evg);
    if (s->st)
        g->d.cuStreamDestroy(s->st);
    free(s->states);
    if (s->out)
        g->d.cuMemFreeHost(s->out);
    if (s->h_io)
        g->d.cuMemFreeHost(s->h_io);
    if (s->h_top)
        g->d.cuMemFreeHost(s->h_top);
    free(s);
}

static size_t node_elems(const struct graph_node *n)
{
    return (size_t)(n->ne[0] * n->ne[1] * n->ne[2] * n->ne[3]);
}

static brasa_status state_dev(struct gpu_sess *s, const struct graph_node *n, CUdeviceptr *out,
                              struct brasa_err *err)
{
    for (int i = 0; i < s->ns; i++)
        if (s->states[i].host == n->data) {
            *out = s->states[i].dev;
            return BRASA_OK;
        }
    size_t bytes = node_elems(n) * (n->type == T_F16 ? 2 : 4);
    if (s->ns == s->caps) {
        int nc = s->caps ? 2 * s->caps : 64;
        struct wmap *nm = realloc(s->states, (size_t)nc * sizeof *nm);
        if (!nm)
            return brasa_fail(err, BRASA_ENOMEM, "out of memory");
        s->states = nm;
        s->caps = nc;
    }
    CUdeviceptr p;
    struct gpu *g = s->g;
    brasa_status st = gmem_alloc(&g->mem, &p, bytes, n->name, "state", err);
    if (st == BRASA_OK && (st = DRV_CALL(&g->d, err, cuMemsetD8Async, p, 0, bytes, s->st)) != BRASA_OK)
        gmem_free(&g->mem, p);
    if (st != BRASA_OK)
        return st;
    s->states[s->ns++] = (struct wmap){n->data, p, bytes};
    *out = p;
    return BRASA_OK;
}

brasa_status gpu_sess_reset(struct gpu_sess *s, struct brasa_err *err)
{
    struct gpu *g = s->g;
    CK(cuCtxSetCurrent, g->ctx);
    for (int i = 0; i < s->ns; i++)
        CK(cuMemsetD8Async, s->states[i].dev, 0, s->states[i].bytes, s->st);
    CK(cuStreamSynchronize, s->st);
    return BRASA_OK;
}

uint64_t gpu_sess_bytes(const struct gpu_sess *s)
{
    uint64_t b = s->ws_cap + (uint64_t)s->cst_np * 2 * (uint64_t)s->cst_half * 4;
    for (int i = 0; i < s->ns; i++)
        b += s->states[i].bytes;
    return b;
}

const float *gpu_sess_output(struct gpu_sess *s, struct brasa_err *err)
{
    if (!s->out_valid) { /* the run sent only the candidates: fetch the row now */
        if (DRV_CALL(&s->g->d, err, cuCtxSetCurrent, s->g->ctx) ||
            DRV_CALL(&s->g->d, err, cuMemcpyDtoH, s->out, s->out_dev, s->out_len))
            return NULL;
        s->out_valid = true;
    }
    return s->out;
}

int gpu_sess_top(const struct gpu_sess *s, const int32_t **ids, const float **logits)
{
    const int32_t *t = s->sl[s->sl_done].h_top;
    *ids = t + 1;
    *logits = (const float *)(t + 1 + TK_MAX);
    return s->top_n;
}
double gpu_sess_last_ms(const struct gpu_sess *s) { return s->last_ms; }

/* ---------------------------------------------------------------- plans */

/* Plan building context. */
struct pb {
    struct gpu_sess *s;
    const struct graph *g;
    struct plan *p;
    CUdeviceptr ws, xq, xd, xs, xf, xh, part, mpart;
    int *nuse;       /* consumers per node */
    int *normsrc;    /* MATMUL: the RMS_NORM (or RMS_NORM_GATE) folded into its activation
                      * conversion; ROPE: the VIEW of q it reads in place; or -1 */
    int *resadd;     /* MATMUL: the ADD folded into its epilogue, or -1 */
    int *ropekv;     /* ROPE: the KV_STORE folded into it, or -1 */
    int *ropeqk;     /* ROPE (q): the ROPE (k) done in its launch, or -1 */
    int *ropev;      /* ROPE (q): the V KV_STORE done in its launch, or -1 */
    int *mnext;      /* MATMUL: the next MATMUL of its launch (same input: q, k, v), or -1 */
    int *glu;        /* MATMUL (gate): the SWIGLU its launch writes (with the up MATMUL), or -1 */
    int *rfuse;      /* MATMUL (q, or a v in a launch of its own): the ROPE (q) whose rotations
                      * and cache writes its decode launch does (mvd.cu RP), or -1 */
    int *cfuse;      /* MATMUL (the first of its launch): the CONV1D its decode launch does over
                      * its rows (mvd.cu CV), or -1 */
    int *gfuse;      /* ATTN (decode): the SIGMOID_MUL after it that its launch applies and whose
                      * output it writes (attn.cu G), or -1 */
    bool *skip;
    int q_src, q_mode; /* what the activation scratch holds now */
    bool recurrent;    /* the graph carries a recurrent state (DeltaNet layers) */
    bool cv_done;      /* plan_product did the convolution of cfuse */
    int n_ctx;         /* positions (0: not known) */
    struct brasa_err *err;
};

static struct launch *L(struct pb *b, int kid_or_neg, CUfunction fn, const char *kname, int node,
                        unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned shmem)
{
    struct plan *p = b->p;
    if (p->nl == p->capl) {
        int nc = p->capl ? 2 * p->capl : 256;
        struct launch *nl = realloc(p->l, (size_t)nc * sizeof *nl);
        if (!nl)
            return NULL;
        p->l = nl;
        p->capl = nc;
    }
    struct launch *l = &p->l[p->nl++];
    memset(l, 0, sizeof *l);
    l->fn = kid_or_neg >= 0 ? b->s->g->k[kid_or_neg] : fn;
    l->kname = kid_or_neg >= 0 ? k_names[kid_or_neg] : kname;
    l->node = node;
    l->gx = gx ? gx : 1;
    l->gy = gy ? gy : 1;
    l->gz = gz ? gz : 1;
    l->bx = bx;
    l->shmem = shmem;
    return l;
}
/* (past MAX_ARGS only counted: launch() refuses such a launch) */
static union argv *arg_slot(struct launch *l)
{
    static union argv spill;
    return l->nargs++ < MAX_ARGS ? &l->v[l->nargs - 1] : &spill;
}
static void ap(struct launch *l, CUdeviceptr v) { arg_slot(l)->p = v; }
static void ai(struct launch *l, long v) { arg_slot(l)->i = (int)v; }
static void af(struct launch *l, float v) { arg_slot(l)->f = v; }
static void al(struct launch *l, long long v) { arg_slot(l)->l = v; }

static brasa_status dev_of(struct pb *b, int i, CUdeviceptr *out)
{
    const struct graph_node *n = &b->g->nodes[i];
    switch (n->op) {
    case GOP_WEIGHT: return weight_dev(b->s, n, out, b->err);
    case GOP_STATE: return state_dev(b->s, n, out, b->err);
    case GOP_INPUT: *out = b->s->d_tok; return BRASA_OK;
    default:
        /* the output of an ADD folded into a matmul epilogue is where the matmul writes */
        *out = b->ws + n->offset;
        return BRASA_OK;
    }
}

/* Whether ROPE node n's launch can take its cos and sin from the session's table (d_cst) rather
 * than make them: not turned off (BRASA_GPU_ROPE_TABLE=0), a known context, NORM or NEOX pairs
 * of at most ROPE_CS_MAX / 2 a position; and, with have set, the plan's table is of its pairs and
 * ratio (rope_table makes one where no fused rope has). */
static bool rope_from_table(const struct pb *b, const struct graph_node *n, bool have)
{
    int n_rot = n->p.i[1];
    bool fits = b->s->rope_table && b->n_ctx > 0 && n_rot > 0 && n_rot % 2 == 0 &&
                n_rot / 2 <= ROPE_CS_MAX / 2 &&
                (n->p.i[2] == ROPE_NORM || n->p.i[2] == ROPE_NEOX);
    return fits && (!have || (b->p->rope_half == n_rot / 2 &&
                              b->p->rope_ts == graph_rope_ratio(n)));
}

static unsigned grid1(size_t n, unsigned bs)
{
    size_t gsz = (n + bs - 1) / bs;
    return (unsigned)(gsz > 65535 * 4 ? 65535 * 4 : gsz ? gsz : 1);
}

/* Checks that [p, p + bytes) lies in one live allocation (graph-build time). */
static brasa_status rng(struct pb *b, CUdeviceptr p, size_t bytes, const char *what, int node)
{
    brasa_status st = gmem_check_range(&b->s->g->mem, p, bytes, what, b->err);
    if (st != BRASA_OK)
        return brasa_wrap(b->err, st, "node %s", b->g->nodes[node].name);
    return BRASA_OK;
}

/* The product kernels' common arguments after the weights and the activation: outputs,
 * biases, residual and its scale, rows of each weight. */
static void ap_outputs(struct launch *l, const CUdeviceptr *y, const CUdeviceptr *bias,
                       CUdeviceptr res, float rscale, const int *r)
{
    for (int j = 0; j < 3; j++)
        ap(l, y[j]);
    for (int j = 0; j < 3; j++)
        ap(l, bias[j]);
    ap(l, res);
    af(l, rscale);
    for (int j = 0; j < 3; j++)
        ai(l, r[j]);
}

/* The decode product's weight rows per lane group, which share each activation load: 2
 * (gate+up: one of each; 4 measured no faster, BENCHMARKS.md) where every weight of the launch
 * but the last (of r[0..nm)) has a multiple of the output rows per group; else 1. And 1 for
 * the LM head in Q8_0 (a lone weight of at least 4 k rows): its short rows (1,536 values: 3
 * pieces a lane) then load in one round, not two, and it has rows to spare for the warps
 * (tg128 1.5B Q8_0 +0.8%, 7B +0.7% over 6-8 rounds; not Q6_K: much slower; BENCHMARKS.md). */
static int mvd_rows(const struct pb *b, int glu, int nm, const int *r, long k, uint32_t wtype)
{
    int nr = 2, fnr = b->s->force_nr;
    if (!glu && nm == 1 && r[0] >= 4 * k && (b->s->head_nr || (wtype == T_Q8_0 && !fnr)))
        fnr = b->s->head_nr ? b->s->head_nr : 1;
    if (fnr == 4 || fnr == 2 || (fnr == 1 && !glu))
        nr = fnr;
    for (;; nr /= 2) {
        int nout = glu ? nr / 2 : nr, fits = 1;
        for (int j = 0; j + 1 < nm; j++)
            fits &= r[j] % nout == 0;
        if (fits || nr == (glu ? 2 : 1))
            return nr;
    }
}

/* Whether [a, a + an) and [c, c + cn) share a byte */
static bool spans_meet(CUdeviceptr a, size_t an, CUdeviceptr c, size_t cn)
{
    return a < c + cn && c < a + an;
}

/* Whether the last launch planned may write [p, p + bytes): its output node's buffer
 * overlaps it, or it was given p itself. A kernel may read memory before its wait only if no
 * such launch wrote it (the launches before that one have finished when its wait starts). */
static bool last_writes(const struct pb *b, CUdeviceptr p, size_t bytes)
{
    if (!b->p->nl)
        return false;
    const struct launch *l = &b->p->l[b->p->nl - 1];
    const struct graph_node *n = &b->g->nodes[l->node];
    CUdeviceptr o = b->ws + n->offset;
    if (n->nbytes && spans_meet(o, n->nbytes, p, bytes))
        return true;
    for (int a = 0; a < l->nargs && a < MAX_ARGS; a++)
        if (l->v[a].p == p)
            return true;
    return false;
}

/* Whether node i is read by a node other than `except`, or is the graph's output. */
static bool read_elsewhere(const struct graph *g, int i, int except)
{
    if (g->out == i)
        return true;
    for (int u = 0; u < g->n; u++)
        for (int j = 0; j < GRAPH_MAX_IN; j++)
            if (u != except && g->nodes[u].in[j] == i)
                return true;
    return false;
}

/* A Q4_K decode product of one weight, or gate+up, on the tensor cores reading the F32 input
 * (mvf.cu), with the RMSNorm before it folded in (nw): no quant_act before it. Sets *done where
 * it planned the launch; leaves it 0 where the shapes do not fit (rows a multiple of the
 * block's, the input and norm weights 16-byte aligned, no output over the input, which every
 * block reads whole). Warps a block: the fewest (of 1-16) that give the launch 8 warps an SM,
 * each with at least two super-blocks; row groups (Q4_K): 2 where that gives a block an SM. */
static brasa_status plan_mf(struct pb *b, int i, uint32_t wt, int glu, long k, int rows, CUdeviceptr x,
                            CUdeviceptr nw, float eps, const CUdeviceptr *W, const CUdeviceptr *y,
                            const CUdeviceptr *bias, CUdeviceptr res, float rscale, int *done)
{
    struct gpu *g = b->s->g;
    int nsb = (int)(k / 256);
    int rg = rows / 32 >= g->n_sm ? 2 : 1;
    if (b->s->mf_rg == 1 || b->s->mf_rg == 2)
        rg = b->s->mf_rg;
    if (glu)
        rg = 2;
    else if (wt == T_Q6_K)
        rg = 1;
    int rpb = glu ? 16 : 16 * rg;
    if (k % 256 || rows % rpb || ((x | nw) & 15) ||
        spans_meet(y[0], (size_t)rows * 4, x, (size_t)k * 4))
        return BRASA_OK;
    long blocks = rows / rpb;
    int ks = 1;
    while (ks < 16 && blocks * ks < 8L * g->n_sm && nsb >= 2 * ks)
        ks *= 2;
    if (b->s->mf_ks == 1 || b->s->mf_ks == 2 || b->s->mf_ks == 4 || b->s->mf_ks == 8 ||
        b->s->mf_ks == 16)
        ks = b->s->mf_ks;
    CUfunction fn = NULL;
    brasa_status st = get_mf(g, wt, rg, ks, glu, nw != 0, wt == T_Q6_K || b->s->mf_la, &fn,
                             b->err);
    if (st != BRASA_OK) { /* (a variant that spills or does not build: the usual path) */
        if (g->o.verbose)
            fprintf(stderr, "brasa: matmul %s: %s; quant_act and mvd instead\n",
                    b->g->nodes[i].name, b->err->msg);
        return BRASA_OK;
    }
    int dst = glu ? b->glu[i] : b->resadd[i] >= 0 ? b->resadd[i] : i;
    struct launch *l = L(b, -1, fn, glu ? "mvf_glu" : "mvf", dst, (unsigned)blocks, 1, 1,
                         (unsigned)(32 * ks), 0);
    if (!l)
        return brasa_fail(b->err, BRASA_ENOMEM, "out of memory");
    ap(l, W[0]);
    ap(l, glu ? W[1] : 0);
    ap(l, x);
    ap(l, nw);
    af(l, eps);
    ap(l, y[0]);
    ap(l, bias[0]);
    ap(l, glu ? bias[1] : 0);
    ap(l, glu ? 0 : res);
    af(l, rscale);
    ai(l, rows);
    ai(l, (int)k);
    *done = 1;
    return BRASA_OK;
}

/* The causal convolution's own launch (ops.cu conv1d): node i, or a CONV1D that a decode
 * product would have done (cfuse) where that product's launch cannot. */
static brasa_status plan_conv(struct pb *b, int i)
{
    const struct graph_node *n = &b->g->nodes[i];
    long C = (long)n->ne[0], T = (long)n->ne[1];
    CUdeviceptr in[3], out;
    brasa_status st;
    for (int j = 0; j < 3; j++)
        if ((st = dev_of(b, n->in[j], &in[j])))
            return st;
    if ((st = dev_of(b, i, &out)) || (st = rng(b, out, (size_t)C * (size_t)T * 4, "output", i)))
        return st;
    if (n->p.i[0] - 1 > 32) /* (ops.cu conv1d: chunks of 32 tokens reach back that far) */
        return brasa_fail(b->err, BRASA_EUNSUPPORTED, "%s: a convolution of %d taps (the GPU "
                          "kernel takes at most 33)", n->name, n->p.i[0]);
    struct launch *l = L(b, K_CONV, NULL, NULL, i, (unsigned)((C + 127) / 128),
                         (unsigned)((T + 31) / 32), 1, 128, 0);
    if (!l)
        return brasa_fail(b->err, BRASA_ENOMEM, "out of memory");
    ap(l, in[0]);
    ap(l, in[1]);
    ap(l, in[2]);
    ap(l, out);
    ai(l, C);
    ai(l, T);
    ai(l, n->p.i[0]);
    ai(l, n->p.i[1]);
    return BRASA_OK;
}

static brasa_status plan_product(struct pb *b, int i)
{
    const struct graph_node *n = &b->g->nodes[i], *w = &b->g->nodes[n->in[1]];
    struct gpu *g = b->s->g;
    long k = (long)w->ne[0], rows = (long)w->ne[1], T = (long)n->ne[1];
    int mode = quant_mode(w->type);
    int src = n->in[0], norm = b->normsrc[i];
    brasa_status st;
    int glu = b->glu[i] >= 0;
    /* prompt batches: tensor-core tiles (mmt.cu) of 128 rows x 128 tokens (F16 / BF16 and
     * dequantized weights; with GLU 64 rows of each weight) or 64 x 64 (the integer tiles of
     * quantized weights) where the shapes fit: k a multiple of 64 (the K formats' 256 is
     * checked below), every weight of a q/k/v launch but the last a multiple of the tile's
     * rows; not F32 weights (their products stay in F32, mode 4); batches of at least mmt_min
     * tokens (a 64-row tile per block leaves the SMs idle on short batches: 64 tokens took
     * 3.6x the integer kernel's time, 512 tokens 0.65x, BENCHMARKS.md) */
    bool use_mmt = T >= b->s->mmt_min && b->s->mmt && k % 64 == 0 && mode != 4;
    /* quantized weights: first the variants that dequantize into F16 tiles of 128 rows (with
     * GLU 64 of each), which take quant_act's int8 activation times its scales as F16, where
     * the chained weights fit those tiles. Each weight and activation value is then rounded
     * to F16 once, so the products are no longer the exact integer sums ggml's are: by
     * default only for the K formats (Q4_K_M 7B prompts 1.48x faster than their integer
     * tiles) and not in graphs with a recurrent state, which carries the rounding from token
     * to token (the qwen35 fixtures sat up to 1.8x beyond their bound); Q8_0 and Q4_0 keep
     * their integer tiles (faster on the 1.5B shapes, 6% slower on the 7B ones,
     * BENCHMARKS.md) but where the dequantized tiles run on Hopper's warpgroup products
     * (mmt_wg 3: pp512 Q8_0 1.5B and 7B 1.45x and 1.5x their integer tiles').
     * BRASA_GPU_MMT_DQ=0: never, =2: wherever the tiles fit. The others' tiles have 64 rows. */
    int dq = use_mmt && mode <= 1 &&
             (b->s->mmt_dq == 2 || (b->s->mmt_dq == 1 && !b->recurrent &&
                                    (mode == 1 || b->s->g->mmt_wg == 3)));
    /* where the weights are not dequantized (graphs with a recurrent state), Q4_K and Q5_K
     * on the same warpgroup tiles with exact products (mmt.cu KX: the integer sums of the
     * integer tiles: qwen35 4B Q4_K_M pp512 +17% on an H100, BENCHMARKS.md; on qwen2's the
     * dequantizing tiles stay 1.5x faster; BRASA_GPU_MMT_KX=0: the F16 mma.sync tiles) */
    int kx = use_mmt && !dq && g->mmt_wg == 3 && b->s->mmt_kx &&
             (w->type == T_Q4_K || w->type == T_Q5_K);
    if (use_mmt && !glu)
        for (int j = i; b->mnext[j] >= 0; j = b->mnext[j]) {
            long nr = (long)b->g->nodes[b->g->nodes[j].in[1]].ne[1];
            use_mmt &= nr % mmt_tile_rows(mode) == 0;
            dq &= nr % 128 == 0;
            kx &= nr % 128 == 0;
        }
    if ((mode == 0 && k % 32) || (mode == 1 && k % 256) || k % 8)
        return brasa_fail(b->err, BRASA_EUNSUPPORTED, "matmul %s: k = %ld does not fit the GPU "
                          "kernels", n->name, k);
    struct mv_kernel *mt = NULL;
    int qm = mode; /* quant_act's mode (+ 8: xh holds the int8 values times their scales) */
    if (use_mmt) {
        if ((st = get_mv(g, 2, w->type, dq ? 128 : kx ? 256 : 64, glu, 1, 0, 0, 0, &mt,
                         b->err)) != BRASA_OK)
            return brasa_wrap(b->err, st, "matmul %s", n->name);
        qm += mt->dq && !mt->kx ? 8 : 0;
    }
    int key = norm >= 0 ? norm : src;
    CUdeviceptr x, nw = 0, zg = 0; /* the input (of the fused RMSNorm where there is one; zg:
                                     * a gated one's gate, fuse) */
    float eps = 0;
    int gsz = 0;
    if (norm >= 0) {
        const struct graph_node *r = &b->g->nodes[norm];
        if ((st = dev_of(b, r->in[0], &x)) || (st = dev_of(b, r->in[1], &nw)))
            return st;
        eps = r->p.f[0];
        if (r->op == GOP_RMS_NORM_GATE) {
            gsz = r->p.i[0];
            if ((st = dev_of(b, r->in[2], &zg)) ||
                (st = rng(b, zg, (size_t)T * k * 4, "gate of the norm", i)) ||
                (st = rng(b, nw, (size_t)gsz * 4, "norm weights", i)))
                return st;
        }
    } else if ((st = dev_of(b, src, &x))) {
        return st;
    }
    if ((st = rng(b, x, (size_t)T * k * 4, "matmul input", i)))
        return st;
    /* the launch's weights: this matmul and those chained to it (q, k, v; or gate, up) */
    int mm[3] = {i, -1, -1}, nm = 1;
    if (glu)
        mm[nm++] = b->mnext[i];
    else
        while (nm < 3 && b->mnext[mm[nm - 1]] >= 0)
            mm[nm] = b->mnext[mm[nm - 1]], nm++;
    CUdeviceptr W[3] = {0}, y[3] = {0}, bias[3] = {0}, res = 0;
    int r[3] = {0};
    float rscale = 1.0f;
    uint32_t wt2 = 0; /* the third weight's type where it differs (mm_mix: a v of Q6_K) */
    for (int j = 0; j < nm; j++) {
        const struct graph_node *mj = &b->g->nodes[mm[j]];
        uint32_t wtj = b->g->nodes[mj->in[1]].type;
        int dst = glu ? b->glu[i] : b->resadd[mm[j]] >= 0 ? b->resadd[mm[j]] : mm[j];
        r[j] = (int)b->g->nodes[mj->in[1]].ne[1];
        if (wtj != w->type)
            wt2 = wtj;
        if ((st = dev_of(b, mj->in[1], &W[j])) ||
            (mj->in[2] >= 0 && (st = dev_of(b, mj->in[2], &bias[j]))) ||
            (st = dev_of(b, dst, &y[j])) ||
            (st = rng(b, y[j], (size_t)T * (size_t)r[j] * 4, "matmul output", mm[j])) ||
            (st = rng(b, W[j], row_bytes(wtj, k) * (size_t)r[j], "weight", mm[j])))
            return st;
    }
    if (wt2 && (nm != 3 || b->g->nodes[b->g->nodes[mm[2]].in[1]].type != wt2 || T != 1 ||
                !b->s->mvd || glu || quant_mode(wt2) != mode ||
                mvd_rows(b, glu, nm, r, k, w->type) != 2))
        return brasa_fail(b->err, BRASA_EUNSUPPORTED, "matmul %s: a launch of weights of types "
                          "%u and %u", n->name, w->type, wt2);
    /* the launch that rotates q and k and writes the caches (rope_into_products): q's
     * rotated rows go to the ROPE's output, k's and v's to their caches only */
    const int rq = b->rfuse[i];
    CUdeviceptr cache[3] = {0};
    int nrope = 0, rmode = 0, hd = 0, kvf16 = 0;
    if (rq >= 0) {
        const struct graph_node *rn = &b->g->nodes[rq];
        int kc = b->g->nodes[b->ropekv[b->ropeqk[rq]]].in[1];
        int vc = b->g->nodes[b->ropev[rq]].in[1];
        const struct graph_node *kcn = &b->g->nodes[kc];
        hd = rn->p.i[0];
        rmode = rn->p.i[2];
        kvf16 = kcn->type == T_F16;
        size_t cb = (size_t)kcn->ne[0] * (size_t)kcn->ne[1] * (kvf16 ? 2 : 4);
        y[1] = y[2] = 0;
        if (rn->in[0] == i) { /* q, k (, v) */
            nrope = 2;
            if ((st = dev_of(b, rq, &y[0])) || (st = dev_of(b, kc, &cache[1])) ||
                (st = rng(b, y[0], (size_t)r[0] * 4, "rotated q", i)) ||
                (st = rng(b, cache[1], cb, "K cache", i)) ||
                (nm == 3 && ((st = dev_of(b, vc, &cache[2])) ||
                              (st = rng(b, cache[2], cb, "V cache", i)))))
                return st;
        } else { /* v alone */
            y[0] = 0;
            if ((st = dev_of(b, vc, &cache[0])) || (st = rng(b, cache[0], cb, "V cache", i)))
                return st;
        }
    }
    /* the launch that does the DeltaNet's convolution over the first weight's rows (mvd.cu CV):
     * those rows go to the CONV1D's output, its state and taps read and the state moved on in
     * the epilogue */
    int cv = b->cfuse[i];
    CUdeviceptr cvst = 0, cvw = 0;
    if (cv >= 0 && (T != 1 || !b->s->mvd || mvd_rows(b, glu, nm, r, k, w->type) != 2))
        cv = -1; /* (the CV variants are rendered for rows of 2; conv1d's launch after this one) */
    if (cv >= 0) {
        const struct graph_node *cn = &b->g->nodes[cv];
        size_t cb = (size_t)r[0] * 4;
        if ((st = dev_of(b, cv, &y[0])) || (st = rng(b, y[0], cb, "convolution output", cv)) ||
            (st = dev_of(b, cn->in[1], &cvw)) ||
            (st = rng(b, cvw, cb * (size_t)cn->p.i[0], "convolution taps", cv)) ||
            (st = dev_of(b, cn->in[2], &cvst)) ||
            (st = rng(b, cvst, cb * (size_t)(cn->p.i[0] - 1), "convolution state", cv)))
            return st;
        cache[0] = cvst;
    }
    if (b->resadd[i] >= 0) {
        const struct graph_node *a = &b->g->nodes[b->resadd[i]];
        rscale = a->p.f[0];
        if ((st = dev_of(b, a->in[0], &res)))
            return st;
    }
    /* decode products of Q4_K on the tensor cores reading the F32 input (mvf.cu), no quant_act
     * before them: with BRASA_GPU_MF=1 down (a product of one weight reading a gate+up
     * output) and gate+up of at most 2^24 weights each, the RMSNorm folded in (tg128 on an
     * H100: 1.5B Q4_K_M +1.2%, both needed; 7B +0.6%, down alone: its gate+up was 6% slower,
     * and the Q6_K products slower too, BENCHMARKS.md), the default; =2 every Q4_K product of
     * one weight or gate+up, =3 Q6_K ones too; 0 none (the two RoPE paths differed by an ulp
     * until b12ec44, which this setting's other rounding turned into a 0.5-1.1% difference of
     * the qwen2 Q4_K_M fixture's logits; they are the same bits now, BENCHMARKS.md).
     * Never in graphs with a recurrent state: the activation in F16 where quant_act made int8
     * is other rounding, which the state carries from token to token (the qwen35 fixtures 3x
     * beyond their bound) */
    int mf = b->s->mf && T == 1 && !b->recurrent && !wt2 && rq < 0 && !zg && nm == (glu ? 2 : 1) &&
             !(b->q_src == key && b->q_mode == qm) &&
             (w->type == T_Q4_K || (b->s->mf == 3 && w->type == T_Q6_K && !glu));
    if (mf && b->s->mf == 1) /* (down: its input a SWIGLU that a gate+up launch writes) */
        mf = glu ? (long)rows * k <= (1L << 24)
                 : !nw && b->g->nodes[src].op == GOP_SWIGLU && b->skip[src];
    if (mf) {
        int done = 0;
        if ((st = plan_mf(b, i, w->type, glu, k, r[0], x, nw, eps, W, y, bias, res, rscale,
                          &done)))
            return st;
        if (done)
            return BRASA_OK;
    }
    /* decode products of Q8_0 / Q4_0 weights convert their own activation (mvd.cu XC; tg128
     * 1.5B Q8_0 940 -> 1027 tok/s, 7B Q8_0 380 -> 402; not the K formats: 7B Q4_K_M 465 ->
     * 474 but 1.5B 991 -> 961; nor F16: 750 -> 747), where no output overlaps the input they
     * read (blocks write outputs while others still read it), the input and norm weights are
     * 16-byte aligned and a lane group has 2 rows (the variants CI compiles); else quant_act
     * converts it first */
    int xc = T == 1 && b->s->mvd && !wt2 &&
             (b->s->mvd_xc == 2 || (b->s->mvd_xc >= 1 && gpu_mvd_xc(w->type)) ||
              (b->s->mvd_xc == 3 && k <= 8192)); /* (3: a measurement; not the down product) */
    if (xc && (((x | nw) & 15) || zg || mvd_rows(b, glu, nm, r, k, w->type) != 2))
        xc = 0;
    for (int j = 0; j < nm && xc; j++)
        if (spans_meet(y[j], (size_t)r[j] * 4, x, (size_t)k * 4)) {
            xc = 0;
            if (g->o.verbose)
                fprintf(stderr, "brasa: matmul %s writes over its input: quant_act converts "
                        "it\n", n->name);
        }
    if (!xc && (b->q_src != key || b->q_mode != qm)) {
        CUfunction fq;
        if ((st = get_quant(g, qm & 7, &fq, b->err)) != BRASA_OK)
            return brasa_wrap(b->err, st, "matmul %s", n->name);
        if (zg && (qm & 7) != 1)
            return brasa_fail(b->err, BRASA_EUNSUPPORTED, "matmul %s: a gated norm in a "
                              "conversion of mode %d", n->name, qm & 7);
        /* (asked before this launch is added: last_writes looks at the last one) */
        int zearly = zg && !last_writes(b, zg, (size_t)T * k * 4);
        struct launch *l = L(b, -1, fq, "quant_act", i, (unsigned)T,
                             (unsigned)((k + 2047) / 2048), 1, 256, 0);
        if (!l)
            return brasa_fail(b->err, BRASA_ENOMEM, "out of memory");
        ap(l, x);
        ap(l, nw);
        af(l, eps);
        ai(l, k);
        ai(l, qm);
        ap(l, b->xq);
        ap(l, b->xd);
        ap(l, b->xf);
        ap(l, b->xs);
        /* mmt's F16 / BF16 input */
        ap(l, T > 1 && ((mode >= 1 && mode <= 3) || qm & 8) ? b->xh : 0);
        ap(l, zg);
        ai(l, gsz);
        ai(l, zearly);
        b->q_src = key;
        b->q_mode = qm;
    }
    int dst = glu ? b->glu[i] : b->resadd[i] >= 0 ? b->resadd[i] : i;
    long tot = glu ? rows : (long)r[0] + r[1] + r[2];
    const char *kname = glu ? "matvec_glu" : nm > 1 ? "matvec_multi" : "matvec";
    struct mv_kernel *mv = NULL;
    struct launch *l;
    if (T == 1 && b->s->mvd) {
        /* decode (mvd.cu): rows of 16-byte pieces (Q8_0: 32), a group of weight rows per 32 x
         * ks lanes */
        int nr = mvd_rows(b, glu, nm, r, k, w->type), nout = glu ? nr / 2 : nr;
        int pe = mvd_split_pe(w->type, nr);
        long pieces = k / pe;
        long groups = (tot + nout - 1) / nout;
        /* ks warps share a group (split along k) while the launch has fewer than wm warps
         * per SM and every lane still gets a piece. Fewer, longer warps pay where there are
         * enough of them: the 7B products of 3,584 rows (down, o, q/k/v) with a warp a group
         * are 3% faster in tg128 than split into 1.7 waves (wm 64, as before); the 1.5B down
         * product (768 groups) is split in 2 for the K formats (wm 6: +1.3%) and in 4 for
         * the others (wm 12: 4% faster than 2). BRASA_GPU_MVD_WMIN sets wm for every type
         * (BENCHMARKS.md). */
        const int wm = b->s->wmin ? b->s->wmin : mode == 1 ? 6 : 12;
        int ks = 1;
        while (ks < 4 && groups * ks < (long)wm * g->n_sm && pieces >= 64L * ks)
            ks *= 2;
        if (b->s->force_ks == 1 || b->s->force_ks == 2 || b->s->force_ks == 4)
            ks = b->s->force_ks;
        /* the residual read before the wait (mvd.cu early) where the previous launch did not
         * write it (asked before this launch is added: last_writes looks at the last one) */
        int early = res && !last_writes(b, res, (size_t)r[0] * 4);
        if (nr != 2) /* the row-group overrides are compiled for one warp per group */
            ks = 1;
        if (rq >= 0 && nr != 2) /* (rope_into_products leaves the row groups as they are) */
            return brasa_fail(b->err, BRASA_EUNSUPPORTED, "matmul %s: a rotating launch with %d "
                              "rows a group", n->name, nr);
        if ((st = get_mv(g, 1, w->type, ks, glu, nr, xc, rq >= 0 ? 1 : cv >= 0 ? 2 : 0, wt2, &mv,
                         b->err)) != BRASA_OK)
            return brasa_wrap(b->err, st, "matmul %s", n->name);
        long gpb = mv->nw / ks, nblk = (groups + gpb - 1) / gpb, grid = nblk;
        unsigned shm = 0;
        if (xc) { /* as many blocks as the SMs hold, each with the converted activation */
            shm = (unsigned)(mode <= 1 ? k + k / 8 : 4 * k);
            if (shm > mv->shm) {
                if (!allow_smem(g, mv->fn, shm))
                    return brasa_fail(b->err, BRASA_EUNSUPPORTED, "matmul %s: %u bytes of shared "
                                      "memory for its activation", n->name, shm);
                mv->shm = shm;
            }
            long cap = (long)blocks_per_sm(g, mv->nw * 32, mv->regs, shm + (unsigned)mv->sshm) *
                       g->n_sm;
            grid = nblk < cap ? nblk : cap;
        }
        if (!(l = L(b, -1, mv->fn, kname, rq >= 0 && nrope ? rq : dst, (unsigned)grid, 1, 1,
                    (unsigned)mv->nw * 32, shm)))
            return brasa_fail(b->err, BRASA_ENOMEM, "out of memory");
        for (int j = 0; j < 3; j++)
            ap(l, W[j]);
        ap(l, mode >= 2 ? b->xf : b->xq);
        ap(l, b->xd);
        ap_outputs(l, y, bias, res, rscale, r);
        ai(l, k);
        ap(l, xc ? x : 0);
        ap(l, xc ? nw : 0);
        af(l, eps);
        ai(l, nblk);
        ai(l, early);
        for (int j = 0; j < 3; j++)
            ap(l, cache[j]);
        ap(l, rq >= 0 ? b->s->d_cst : cvw);
        b->cv_done = cv >= 0;
        ai(l, nrope);
        ai(l, rmode);
        ai(l, hd);
        ap(l, b->s->d_pos);
        ai(l, kvf16);
        return BRASA_OK;
    }
    if (use_mmt) {
        mv = mt;
        unsigned tiles = 0, tt = (unsigned)((T + mv->ncv - 1) / mv->ncv);
        for (int j = 0; j < (glu ? 1 : nm); j++)
            tiles += (unsigned)((r[j] + mv->tr - 1) / mv->tr);
        /* fewer tiles than SMs: k split over up to 8 blocks a tile, as many as the SMs hold
         * in one wave (a second, partial wave would cost more than the split gains), each
         * slice at least 4 steps, at most MMT_SPLIT_TILES partial tiles in all */
        long nt = (long)tiles * tt, nks = k / (w->type == T_F16 || w->type == T_BF16 ? 32 : 64);
        int ksp = 1;
        if (nt < g->n_sm && !b->s->no_split)
            ksp = (int)((long)mv->bps * g->n_sm / nt);
        while (ksp > 1 && (ksp > 8 || nt * ksp > MMT_SPLIT_TILES || nks / ksp < 4))
            ksp--;
        static const char *const mmt_names[2][3] = {{"mmt", "mmt_multi", "mmt_glu"},
                                                    {"mmt_wg", "mmt_wg_multi", "mmt_wg_glu"}};
        if (!(l = L(b, -1, mv->fn, mmt_names[mv->wg != 0][glu ? 2 : nm > 1], dst, tt, tiles,
                    (unsigned)ksp, (unsigned)mv->nt, mv->shm)))
            return brasa_fail(b->err, BRASA_ENOMEM, "out of memory");
        for (int j = 0; j < 3; j++)
            ap(l, W[j]);
        ap(l, b->xh); /* F16 / BF16 values, or Q4_K / Q5_K's int8 ones as F16 (quant_act) */
        ap(l, b->xq);
        ap(l, b->xd);
        ap(l, b->xs);
        ap(l, b->mpart);
        ap(l, b->s->d_cnt);
        ap_outputs(l, y, bias, res, rscale, r);
        ai(l, k);
        ai(l, T);
        return BRASA_OK;
    }
    if ((st = get_mv(g, 0, w->type, T > 1 ? 8 : 1, glu, 1, 0, 0, 0, &mv, b->err)) != BRASA_OK)
        return brasa_wrap(b->err, st, "matmul %s", n->name);
    int rpb = mv->nw; /* rows per block */
    unsigned nrb = (unsigned)((tot + rpb - 1) / rpb), nct = (unsigned)((T + mv->ncv - 1) / mv->ncv);
    int tf = nct > 1 && nrb <= 65535;
    if (!(l = L(b, -1, mv->fn, kname, dst, tf ? nct : nrb, tf ? nrb : nct, 1,
                (unsigned)mv->nw * 32, 0)))
        return brasa_fail(b->err, BRASA_ENOMEM, "out of memory");
    for (int j = 0; j < 3; j++)
        ap(l, W[j]);
    ap(l, mode >= 2 ? b->xf : b->xq); /* never the input itself: y may share its buffer */
    ap(l, b->xd);
    ap_outputs(l, y, bias, res, rscale, r);
    ai(l, k);
    ai(l, T);
    al(l, (long long)row_bytes(w->type, k));
    ai(l, tf);
    return BRASA_OK;
}

/* MATMUL i's launch (with those chained to it), and the convolution folded into it where that
 * launch could not do it (plan_product: prompts, or a decode kernel without CV). */
static brasa_status plan_matmul(struct pb *b, int i)
{
    b->cv_done = false;
    brasa_status st = plan_product(b, i);
    if (st == BRASA_OK && b->cfuse[i] >= 0 && !b->cv_done)
        st = plan_conv(b, b->cfuse[i]);
    return st;
}

/* Attention's grid splits along the cache (attn.cu): decode a split a 512 positions of the
 * context, up to 16; a token takes only those its positions fill (eff_splits, one a 512 rows:
 * ASPLIT) */
static int attn_splits(int n_tok, int n_ctx)
{
    if (n_tok == 1) {
        int s = n_ctx / 512;
        return s < 1 ? 1 : s > 16 ? 16 : s;
    }
    return (n_ctx + 4095) / 4096;
}

/* Whether decode attention node i (nh heads of hd, kernel fa) hands its output converted to
 * the product after it (attn.cu's xq): one token, whole heads in each 256-block (with grouped,
 * a block of 256 / hd heads, at most 4 and within fa's thread limit), and a product of a K
 * format (quant_act's mode 1) reading it with no norm between (BRASA_GPU_ATTN_Q=0: never,
 * quant_act converts it as before; a measurement). */
static bool attn_converts(const struct pb *b, int i, int nh, int hd, bool grouped, CUfunction fa)
{
    const struct graph *g = b->g;
    if (!b->s->attn_q || g->nodes[i].ne[1] != 1 || !b->s->mvd || hd <= 0 || 256 % hd ||
        (nh * hd) % 256)
        return false;
    if (grouped) {
        int mt = 0;
        if (hd < 64 || b->s->g->d.cuFuncGetAttribute(&mt, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                                      fa) || mt < 128 * (256 / hd))
            return false;
    }
    for (int j = i + 1; j < g->n; j++)
        if (g->nodes[j].op == GOP_MATMUL && g->nodes[j].in[0] == i && b->normsrc[j] < 0)
            return quant_mode(g->nodes[g->nodes[j].in[1]].type) == 1;
    return false;
}

static brasa_status plan_node(struct pb *b, int i)
{
    const struct graph_node *n = &b->g->nodes[i];
    const struct graph *gr = b->g;
    struct gpu *g = b->s->g;
    CUdeviceptr in[GRAPH_MAX_IN] = {0}, out = b->ws + n->offset;
    brasa_status st;
    for (int j = 0; j < GRAPH_MAX_IN; j++)
        if (n->in[j] >= 0 && gr->nodes[n->in[j]].op != GOP_KV_STORE &&
            (st = dev_of(b, n->in[j], &in[j])) != BRASA_OK)
            return brasa_wrap(b->err, st, "node %s", n->name);
    if (n->nbytes && (st = rng(b, out, n->nbytes, "output", i)))
        return st;
    struct launch *l = NULL;
    size_t ne = node_elems(n);
    long T = (long)n->ne[1];
    switch (n->op) {
    case GOP_GET_ROWS: {
        const struct graph_node *w = &gr->nodes[n->in[0]];
        if (w->type != T_F32 && w->type != T_F16 && w->type != T_BF16 && !row_bytes(w->type, 256))
            return brasa_fail(b->err, BRASA_EUNSUPPORTED, "embedding type %u", w->type);
        if ((l = L(b, K_GET_ROWS, NULL, NULL, i, (unsigned)T, 1, 1, 256, 0))) {
            size_t bb;
            int be;
            type_block(w->type, &bb, &be);
            ap(l, in[0]);
            ai(l, w->type);
            al(l, (long long)(node_elems(w) / (size_t)be)); /* blocks in all (planar layout) */
            ai(l, w->ne[0]);
            ap(l, in[1]);
            af(l, n->p.f[0]);
            ap(l, out);
            ai(l, n->p.i[0]); /* a shard's first row of the table, and its rows */
            ai(l, w->ne[1]);
            /* a token of -1 in the batch's tokens: the first candidate of the run before
             * (gpu_sess_launch with no tokens) */
            ap(l, in[1] == b->s->d_tok && T == 1 ? b->s->d_top + 4 : 0);
        }
        break;
    }
    case GOP_ALLREDUCE: /* the shards' sum, by the collective library, in the stream's order */
        if (!b->s->comm)
            return brasa_fail(b->err, BRASA_EUNSUPPORTED, "node %s: a shard's all-reduce needs "
                              "the GPUs' communicator (gpu_sess_set_comm)", n->name);
        if ((l = L(b, -1, NULL, "allreduce", i, 1, 1, 1, 0, 0))) {
            ap(l, in[0]);
            ap(l, out);
            al(l, (long long)node_elems(n));
        }
        break;
    case GOP_RMS_NORM:
    case GOP_L2_NORM:
    case GOP_RMS_NORM_GATE: {
        long gsz = n->p.i[0];
        int mode = n->op == GOP_RMS_NORM ? 0 : n->op == GOP_L2_NORM ? 1 : 2;
        if ((l = L(b, K_NORM, NULL, NULL, i, (unsigned)(ne / (size_t)gsz), 1, 1,
                   gsz >= 1024 ? 1024 : gsz >= 256 ? 256 : 64, 0))) {
            ap(l, in[0]);
            ap(l, in[1]);
            ap(l, in[2]);
            ap(l, out);
            ai(l, gsz);
            af(l, n->p.f[0]);
            ai(l, mode);
        }
        break;
    }
    case GOP_MATMUL:
        return plan_matmul(b, i);
    case GOP_ADD: case GOP_MUL: case GOP_SCALE: case GOP_SWIGLU: case GOP_SILU:
    case GOP_SIGMOID_MUL: {
        int op = n->op == GOP_ADD ? 0 : n->op == GOP_MUL ? 1 : n->op == GOP_SCALE ? 2
               : n->op == GOP_SWIGLU ? 3 : n->op == GOP_SILU ? 4 : 5;
        if ((l = L(b, K_ELT, NULL, NULL, i, grid1(ne, 256), 1, 1, 256, 0))) {
            ap(l, in[0]);
            ap(l, in[1]);
            ap(l, out);
            al(l, (long long)ne);
            af(l, n->p.f[0]);
            ai(l, op);
        }
        break;
    }
    case GOP_VIEW:
        if ((l = L(b, K_VIEW, NULL, NULL, i, grid1(ne, 256), 1, 1, 256, 0))) {
            ap(l, in[0]);
            ap(l, out);
            al(l, (long long)ne);
            for (int j = 0; j < 5; j++)
                ai(l, n->p.i[j]);
        }
        break;
    case GOP_ROPE: {
        /* this rope (+ its cache write), and with ropeqk: the next rope (k) and its cache
         * write, and the V cache write */
        int n_rot = n->p.i[1];
        float theta_scale = graph_rope_ratio(n);
        CUdeviceptr qc = 0, xk = 0, yk = 0, kc = 0, xv = 0, vc = 0;
        int f16 = 0, nek = 0, nev = 0;
        if (b->ropekv[i] >= 0) {
            int cn = gr->nodes[b->ropekv[i]].in[1];
            f16 = gr->nodes[cn].type == T_F16;
            if ((st = dev_of(b, cn, &qc)))
                return st;
        }
        if (b->ropeqk[i] >= 0) {
            int kr = b->ropeqk[i], kst = b->ropekv[kr], vst = b->ropev[i];
            const struct graph_node *kn = &gr->nodes[kr], *vn = &gr->nodes[vst];
            nek = (int)kn->ne[0];
            nev = (int)gr->nodes[vn->in[0]].ne[0];
            f16 = gr->nodes[gr->nodes[kst].in[1]].type == T_F16;
            if ((st = dev_of(b, kn->in[0], &xk)) || (st = dev_of(b, kr, &yk)) ||
                (st = dev_of(b, gr->nodes[kst].in[1], &kc)) || (st = dev_of(b, vn->in[0], &xv)) ||
                (st = dev_of(b, vn->in[1], &vc)))
                return st;
            /* the roped k goes to the cache; its tensor is written only if something other
             * than the cache store reads it */
            if (!read_elsewhere(gr, kr, kst))
                yk = 0;
        }
        /* a token's elements spread over blocks of 256, unless k's output overlaps q's input
         * (the arena reuses q's buffer after this node): then one block per token, q first */
        long nel = n->ne[0] + (xk ? nek : 0) + (xv ? nev : 0); /* elements per token */
        size_t qb = (size_t)T * (size_t)n->ne[0] * 4, kb = (size_t)T * (size_t)nek * 4;
        int qhs = 0, qts = 0; /* q's head and token strides where its VIEW is folded in */
        CUdeviceptr xq = in[0];
        if (b->normsrc[i] >= 0) {
            const struct graph_node *vw = &gr->nodes[b->normsrc[i]];
            if ((st = dev_of(b, vw->in[0], &xq)))
                return st;
            qb = node_elems(&gr->nodes[vw->in[0]]) * 4;
            if ((st = rng(b, xq, qb, "rope input", i)))
                return st;
            xq += (CUdeviceptr)vw->p.i[0] * 4;
            qb -= (size_t)vw->p.i[0] * 4;
            qhs = vw->p.i[3];
            qts = vw->p.i[4];
            if ((size_t)((T - 1) * (long)qts + (long)(vw->p.i[2] - 1) * qhs + vw->p.i[1]) * 4 > qb)
                return brasa_fail(b->err, BRASA_EINVAL, "%s: the view of its input reaches "
                                  "past it", n->name);
        }
        bool ovl = yk && spans_meet(yk, kb, xq, qb);
        unsigned nby = ovl ? 1u : (unsigned)((nel + 255) / 256);
        /* the heads' norms (the ROPEs' weights): their 1 / RMS in shared memory, a float a
         * head of q and k */
        CUdeviceptr knw = 0;
        int hd = n->p.i[0];
        if (b->ropeqk[i] >= 0 && gr->nodes[b->ropeqk[i]].in[1] >= 0 &&
            (st = dev_of(b, gr->nodes[b->ropeqk[i]].in[1], &knw)))
            return st;
        unsigned hsh = in[1] || knw ? (unsigned)((n->ne[0] + nek) / hd) * 4u : 0u;
        if ((in[1] && (st = rng(b, in[1], (size_t)hd * 4, "q norm weights", i))) ||
            (knw && (st = rng(b, knw, (size_t)hd * 4, "k norm weights", i))))
            return st;
        if ((l = L(b, K_ROPE, NULL, NULL, i, (unsigned)T, nby, 1, 256,
                   (unsigned)(n_rot / 2 * 3 * sizeof(float)) + hsh))) {
            ap(l, xq);
            ap(l, out);
            ai(l, n->ne[0]);
            ap(l, qc);
            ap(l, xk);
            ap(l, yk);
            ai(l, nek);
            ap(l, kc);
            ap(l, xv);
            ap(l, vc);
            ai(l, nev);
            ap(l, b->s->d_pos);
            ai(l, n->p.i[0]);
            ai(l, n_rot);
            ai(l, n->p.i[2]);
            af(l, theta_scale);
            ai(l, f16);
            ap(l, rope_from_table(b, n, true) ? b->s->d_cst : 0);
            ap(l, in[1]);
            ap(l, knw);
            af(l, n->p.f[1]);
            ai(l, qhs);
            ai(l, qts);
        }
        break;
    }
    case GOP_KV_STORE: {
        const struct graph_node *c = &gr->nodes[n->in[1]], *x = &gr->nodes[n->in[0]];
        size_t cnt = node_elems(x);
        if ((l = L(b, K_KV, NULL, NULL, i, grid1(cnt, 256), 1, 1, 256, 0))) {
            ap(l, in[0]);
            ap(l, in[1]);
            ap(l, b->s->d_pos);
            ai(l, x->ne[0]);
            al(l, (long long)cnt);
            ai(l, c->type == T_F16);
        }
        break;
    }
    case GOP_ATTN: {
        const struct graph_node *kc = &gr->nodes[gr->nodes[n->in[1]].in[1]];
        const struct graph_node *vc = &gr->nodes[gr->nodes[n->in[2]].in[1]];
        CUdeviceptr K, V;
        if ((st = dev_of(b, gr->nodes[n->in[1]].in[1], &K)) ||
            (st = dev_of(b, gr->nodes[n->in[2]].in[1], &V)))
            return st;
        int nh = n->p.i[0], hd = n->p.i[2], n_ctx = (int)kc->ne[1];
        if (T > 1 && b->s->fa && kc->type == T_F16 && vc->type == T_F16 &&
            (hd == 64 || hd == 128 || (hd == 256 && b->s->fa256)) && n->p.i[1] > 0 &&
            nh % n->p.i[1] == 0) {
            /* prompts: tensor-core tiles of 64 tokens x 64 cache rows (fa.cu; heads of 256:
             * x 32 rows, two warps for each 16 tokens) */
            CUfunction fn;
            if ((st = get_fa(g, hd, &fn, b->err)) != BRASA_OK)
                return brasa_wrap(b->err, st, "attention %s", n->name);
            if ((l = L(b, -1, fn, "fa", i, (unsigned)((T + 63) / 64), (unsigned)nh, 1,
                       hd > 128 ? 256 : 128, 0))) {
                ap(l, in[0]);
                ap(l, K);
                ap(l, V);
                ap(l, out);
                ap(l, b->s->d_pos);
                ai(l, (int)T);
                ai(l, nh);
                ai(l, n->p.i[1]);
                af(l, n->p.f[0]);
            }
            break;
        }
        int splits = attn_splits((int)T, n_ctx);
        int f16 = kc->type == T_F16 && vc->type == T_F16;
        CUfunction fa, fm;
        if ((st = get_attn(g, hd, f16, b->gfuse[i] >= 0, &fa, &fm, b->err)) != BRASA_OK)
            return brasa_wrap(b->err, st, "attention %s", n->name);
        /* decode: split along the context, attention's last block of each merges the splits
         * (no attn_merge launch; BRASA_GPU_ATTN_MERGE=1: the launch, a measurement). And
         * attention (in blocks of 256 / hd heads), or where the merge is a launch that,
         * converts the rows for a K-format o product (no quant_act launch between them). */
        int inm = T == 1 && splits > 1 && b->s->attn_inmerge && nh <= ATTN_CNT;
        /* with the gate after it folded in (fuse): its output, and the gate */
        const int gs = b->gfuse[i], on = gs >= 0 ? gs : i;
        CUdeviceptr G = 0;
        if (gs >= 0 && ((st = dev_of(b, gs, &out)) || (st = rng(b, out, n->nbytes, "output", gs)) ||
                        (st = dev_of(b, gr->nodes[gs].in[1], &G)) ||
                        (st = rng(b, G, n->nbytes, "gate", gs))))
            return st;
        int grp = splits == 1 || inm, aq = attn_converts(b, on, nh, hd, grp, fa);
        int ga = aq && grp ? 256 / hd : 1;
        /* a group's scores of a slice (rounded to 4) and q; 2048 floats for the F16 output
         * pass; a group a head of the block */
        size_t shm = (((size_t)(n_ctx + splits - 1) / splits + 3) / 4 * 4 + (size_t)hd + 2048) *
                     sizeof(float) * (size_t)ga;
        if (!allow_smem(g, fa, shm))
            return brasa_fail(b->err, BRASA_EUNSUPPORTED, "attention %s: %zu bytes of shared "
                              "memory", n->name, shm);
        if ((l = L(b, -1, fa, "attn", i, (unsigned)T, (unsigned)(nh / ga), (unsigned)splits,
                   128u * (unsigned)ga, (unsigned)shm))) {
            ap(l, in[0]);
            ap(l, K);
            ap(l, V);
            ap(l, out);
            ap(l, b->s->d_pos);
            ai(l, nh);
            ai(l, n->p.i[1]);
            ai(l, hd);
            af(l, n->p.f[0]);
            ai(l, f16);
            ai(l, splits);
            ap(l, b->part);
            ap(l, aq && grp ? b->xq : 0);
            ap(l, aq && grp ? b->xd : 0);
            ap(l, aq && grp ? b->xs : 0);
            ap(l, inm ? b->s->d_cnt + MMT_SPLIT_TILES * 4 : 0);
            ap(l, G);
        }
        if (l && splits > 1 && !inm &&
            (l = L(b, -1, fm, "attn_merge", i, (unsigned)T, (unsigned)(aq ? nh * hd / 256 : nh), 1,
                   aq ? 256u : (unsigned)((hd + 31) / 32 * 32), 0))) {
            ap(l, b->part);
            ap(l, out);
            ai(l, nh);
            ai(l, hd);
            ai(l, splits);
            ap(l, b->s->d_pos);
            ap(l, aq ? b->xq : 0);
            ap(l, aq ? b->xd : 0);
            ap(l, aq ? b->xs : 0);
            ap(l, G);
        }
        if (l && aq) {
            b->q_src = on;
            b->q_mode = 1;
        }
        break;
    }
    case GOP_CONV1D:
        return plan_conv(b, i);
    case GOP_GATES: {
        long H = (long)gr->nodes[n->in[0]].ne[0];
        if ((l = L(b, K_GATES, NULL, NULL, i, grid1((size_t)(H * T), 128), 1, 1, 128, 0))) {
            ap(l, in[0]);
            ap(l, in[1]);
            ap(l, in[2]);
            ap(l, in[3]);
            ap(l, out);
            ai(l, H);
            ai(l, T);
        }
        break;
    }
    case GOP_DELTANET: {
        const int32_t *p = n->p.i;
        CUdeviceptr M;
        if ((st = dev_of(b, n->state, &M)))
            return st;
        /* ops.cu deltanet: each wave 4 rows of a head's state in registers over the batch,
         * blocks of 4 waves of 32 lanes: 16 rows (on waves of 64 each takes two groups); it
         * reads q, k and v from the convolution's rows and normalizes q and k itself */
        if (p[2] > 256)
            return brasa_fail(b->err, BRASA_EUNSUPPORTED, "%s: DeltaNet keys of %d values (the "
                              "GPU kernel takes at most 256)", n->name, p[2]);
        /* the gates from their raw products where fuse folded GATES in (ops.cu gate_pair) */
        const struct graph_node *gn = &gr->nodes[n->in[1]];
        bool gf = gn->op == GOP_GATES && b->skip[n->in[1]];
        CUdeviceptr gin[4] = {0};
        for (int j = 0; gf && j < 4; j++)
            if ((st = dev_of(b, gn->in[j], &gin[j])) ||
                (st = rng(b, gin[j], (size_t)(j < 2 ? T : 1) * (size_t)p[1] * 4, "gate input",
                          i)))
                return st;
        /* prompts: deltanet_staged, each chunk of C tokens' rows copied into shared memory
         * while the chunk before is used (qwen35 4B: 391 against 458 us a launch, pp512 +4%;
         * BRASA_GPU_DN_STAGE=0: deltanet) */
        /* deltanet_chunked: 32 tokens at a time, as a few small matrix products and one
         * triangular solve; blocks of 256 threads, 32 rows of the state; keys a multiple of 4;
         * shared memory as laid out in ops.cu (q, k and the rows, A and P, five arrays of 32
         * x 32, the gates, the next chunk's staged rows) */
        const size_t csh = (size_t)(96 * (p[2] + 4) + 2 * 32 * 32 + 5 * 32 * 32 + 4 * 32 +
                                    32 * (2 * p[2] + 34)) * 4;
        const bool chk = T > 1 && b->s->dn_chunk && p[2] % 4 == 0 &&
                         allow_smem(b->s->g, b->s->g->k[K_DELTA_C], csh);
        const bool stg = T > 1 && !chk && b->s->dn_stage;
        const int C = p[2] <= 128 ? 16 : 8;
        const bool v4 = p[2] % 4 == 0 && p[3] % 4 == 0 && in[0] % 16 == 0;
        const int rb = chk ? 32 : 16; /* state rows a block */
        if ((l = L(b, chk ? K_DELTA_C : stg ? K_DELTA_S : K_DELTA, NULL, NULL, i,
                   (unsigned)p[1], (unsigned)((p[3] + rb - 1) / rb), 1, chk ? 256 : 128,
                   chk ? (unsigned)csh : stg ? (unsigned)(2 * C * (2 * p[2] + 18) * 4) : 0))) {
            ap(l, in[0]);
            ap(l, gf ? 0 : in[1]);
            for (int j = 0; j < 4; j++)
                ap(l, gin[j]);
            ap(l, M);
            ap(l, out);
            for (int j = 0; j < 4; j++)
                ai(l, p[j]);
            ai(l, T);
            af(l, n->p.f[0]);
            if (stg)
                ai(l, C);
            if (stg || chk)
                ai(l, v4);
        }
        break;
    }
    default:
        return brasa_fail(b->err, BRASA_EUNSUPPORTED, "op %s has no GPU kernel",
                          graph_op_name(n->op));
    }
    if (!l)
        return brasa_fail(b->err, BRASA_ENOMEM, "out of memory");
    return BRASA_OK;
}

/* The next non-leaf node after i, or -1. */
static int next_op(const struct graph *g, int i)
{
    for (int c = i + 1; c < g->n; c++)
        if (g->nodes[c].op != GOP_WEIGHT && g->nodes[c].op != GOP_STATE)
            return c;
    return -1;
}

/* ROPE q (node i) whose launch also does the k rope, its cache write and the v cache write
 * (ropeqk, ropev): in decode, where q, k and v are products of their own (MATMULs read only
 * there, q and k in one launch, v in that launch or in one of its own) and the rotation
 * covers whole heads, the products' epilogue rotates q and k and writes k and v to their
 * caches (mvd.cu RP): one launch a layer fewer. The launch of q (and v's, if apart) records
 * it in rfuse; every fused rope of a plan shares one table of cos and sin (plan.rope_half).
 * tg128 1.5B Q4_K_M +1%, 1B (llama) Q4_K_M +2%, 1.5B Q8_0 +3% (H200, 2026-12-04); the 7B
 * shapes were even (Q4_K_M) or 2% slower (Q8_0) then, and are +0.8% and +1.6% now (H100,
 * 2026-12-06; BENCHMARKS.md). BRASA_GPU_ROPE_FUSE=1: only where q, k and v weigh at most
 * ROPE_FUSE_BYTES, 0: never (measurements). */
#define ROPE_FUSE_BYTES ((size_t)8 << 20)
static void rope_into_products(struct pb *b, int i)
{
    const struct graph *g = b->g;
    const struct graph_node *n = &g->nodes[i];
    int kr = b->ropeqk[i], kst = b->ropekv[kr], vst = b->ropev[i];
    int q = n->in[0], k = g->nodes[kr].in[0], v = g->nodes[vst].in[0];
    int hd = n->p.i[0], half = hd / 2;
    float ts = graph_rope_ratio(n);
    if (!b->s->rope_fuse || !b->s->mvd || b->s->force_nr || n->ne[1] != 1 || b->n_ctx <= 0 ||
        n->in[1] >= 0 || g->nodes[kr].in[1] >= 0 || /* (head norms: the ROPE's launch) */
        n->p.i[1] != hd || hd % 2 || (n->p.i[2] != ROPE_NORM && n->p.i[2] != ROPE_NEOX) ||
        half > ROPE_CS_MAX / 2 ||
        (b->p->rope_half && (b->p->rope_half != half || b->p->rope_ts != ts)))
        return;
    const int mm[3] = {q, k, v};
    size_t wb = 0; /* the three weights' bytes */
    for (int j = 0; j < 3; j++) {
        const struct graph_node *m = &g->nodes[mm[j]];
        if (m->op != GOP_MATMUL || b->nuse[mm[j]] != 1 || b->glu[mm[j]] >= 0 ||
            b->resadd[mm[j]] >= 0 || graph_dump_wanted(b->s->dump, m->name) || mm[j] == g->out)
            return;
        const struct graph_node *w = &g->nodes[m->in[1]];
        wb += row_bytes(w->type, w->ne[0]) * (size_t)w->ne[1];
    }
    if (b->s->rope_fuse == 1 && wb > ROPE_FUSE_BYTES)
        return;
    /* q heads k in one launch; v after k in it, or a launch of its own */
    bool vapart = b->mnext[k] != v;
    if (b->skip[q] || b->mnext[q] != k ||
        (vapart && (b->skip[v] || b->mnext[v] >= 0 || b->mnext[k] >= 0)) ||
        read_elsewhere(g, kr, kst))
        return;
    b->rfuse[q] = i;
    if (vapart)
        b->rfuse[v] = i;
    b->skip[i] = true;
    b->p->rope_half = half;
    b->p->rope_ts = ts;
}

/* The plan's RoPE table where a rope launch will read it and no fused rope has asked for one:
 * the launches then read the angles the host made (graph_rope_table), the same bits as the
 * products that rotate and the CPU, and make none themselves. */
static void rope_table(struct pb *b)
{
    for (int i = 0; i < b->g->n && !b->p->rope_half; i++) {
        const struct graph_node *n = &b->g->nodes[i];
        if (n->op == GOP_ROPE && !b->skip[i] && rope_from_table(b, n, false)) {
            b->p->rope_half = n->p.i[1] / 2;
            b->p->rope_ts = graph_rope_ratio(n);
        }
    }
}

/* Whether node n is a leaf (INPUT, WEIGHT, STATE): data of its own, no arena buffer or launch. */
static bool is_leaf(const struct graph_node *n)
{
    return n->op == GOP_INPUT || n->op == GOP_WEIGHT || n->op == GOP_STATE;
}

/* Whether the arena buffers of nodes a and c share a byte (leaves, which have none, never). */
static bool arena_meets(const struct graph *g, int a, int c)
{
    const struct graph_node *x = &g->nodes[a], *y = &g->nodes[c];
    return !is_leaf(x) && !is_leaf(y) && x->offset < y->offset + y->nbytes &&
           y->offset < x->offset + x->nbytes;
}

/* Two matmuls that one launch can do: same weight type and k, same batch. */
static bool mm_compatible(const struct graph *g, int a, int c)
{
    const struct graph_node *wa = &g->nodes[g->nodes[a].in[1]], *wc = &g->nodes[g->nodes[c].in[1]];
    return wa->type == wc->type && wa->ne[0] == wc->ne[0] && g->nodes[a].ne[1] == g->nodes[c].ne[1];
}

/* Whether decode matmuls a, c (q, k: Q4_K) and v (Q6_K, as in half the layers of Q4_K_M files)
 * can share one launch (mvd.cu QT2): the same input and k, q and k of whole blocks of rows,
 * pieces of 64 values for both types (1.5B Q4_K_M tg128 +2-4%, 7B +0.7% on an H100,
 * BENCHMARKS.md; BRASA_GPU_MVD_MIX=0: v in a launch of its own). */
static bool mm_mix(const struct pb *b, int a, int c, int v)
{
    const struct graph *g = b->g;
    const struct graph_node *wa = &g->nodes[g->nodes[a].in[1]], *wc = &g->nodes[g->nodes[c].in[1]];
    const struct graph_node *wv = &g->nodes[g->nodes[v].in[1]];
    return b->s->mvd && b->s->mvd_mix && !b->s->force_nr && g->nodes[a].ne[1] == 1 &&
           g->nodes[v].ne[1] == 1 &&
           wa->type == T_Q4_K && wc->type == T_Q4_K && wv->type == T_Q6_K &&
           wa->ne[0] == wv->ne[0] && wc->ne[0] == wv->ne[0] && (wa->ne[1] + wc->ne[1]) % 8 == 0 &&
           mvd_kp(T_Q4_K, 2) == 64 && mvd_kp(T_Q6_K, 2) == 64;
}

/* Whether MATMUL j may have another product after it in its launch: always in decode; in a
 * batch that takes the tensor-core tiles (plan_matmul), only where j's rows fill whole tiles
 * (every weight of a launch but the last must, or the whole launch takes the matvec kernel:
 * a qwen35 layer's z, beta and alpha over a 512-token prompt took 800 us so) */
static bool chain_after(const struct pb *b, int j)
{
    const struct graph_node *n = &b->g->nodes[j], *w = &b->g->nodes[n->in[1]];
    int mode = quant_mode(w->type); /* (F32 weights, mode 4, never take the tiles) */
    return n->ne[1] < b->s->mmt_min || !b->s->mmt || mode == 4 ||
           w->ne[1] % mmt_tile_rows(mode) == 0;
}

/* The DeltaNet's causal convolution of one token (CONV1D of MVD_CV_TAPS taps, SiLU after) in the
 * epilogue of the decode product that makes its input (mvd.cu CV: one launch fewer a layer):
 * that product the first of its launch, read by the convolution alone. The launch then writes
 * the convolution's output before the nodes between them run, so that output's buffer must not
 * be one they, or the launch itself, read or write. */
static void conv_into_products(struct pb *b)
{
    const struct graph *g = b->g;
    for (int i = 0; i < g->n && b->s->conv_fuse; i++) {
        const struct graph_node *n = &g->nodes[i];
        int m = n->in[0];
        if (n->op != GOP_CONV1D || n->ne[1] != 1 || n->p.i[0] != MVD_CV_TAPS || n->p.i[1] != 1 ||
            i == g->out || graph_dump_wanted(b->s->dump, n->name) || m < 0)
            continue;
        const struct graph_node *mn = &g->nodes[m];
        if (mn->op != GOP_MATMUL || b->nuse[m] != 1 || b->skip[m] || b->glu[m] >= 0 ||
            b->rfuse[m] >= 0 || b->resadd[m] >= 0 || m == g->out || mn->ne[0] != n->ne[0] ||
            graph_dump_wanted(b->s->dump, mn->name))
            continue;
        bool clear = true;
        for (int j = m; j < i && clear; j++) {
            clear = j == m || !arena_meets(g, i, j); /* (what they write) */
            for (int q = 0; q < GRAPH_MAX_IN && clear; q++) {
                int u = g->nodes[j].in[q];
                if (u < 0)
                    continue;
                clear = !arena_meets(g, i, u);
                if (clear && b->normsrc[j] == u) /* (a folded norm: its input is read) */
                    clear = !arena_meets(g, i, g->nodes[u].in[0]);
            }
        }
        if (clear) {
            b->cfuse[m] = i;
            b->skip[i] = true;
        }
    }
}

/* The fusion pass: a table of node patterns rewritten into fused launches.
 *   RMS_NORM (whole rows) -> only MATMULs   : the norm is applied in the activation conversion
 *   MATMUL -> ADD (as its scaled term)       : residual add (and bias) in the matvec epilogue
 *   ROPE -> only KV_STORE                     : the rotated rows are written to the cache too
 *   MATMUL, MATMUL(, MATMUL) on one input     : one launch (q, k, v)
 *   MATMUL gate, MATMUL up -> SWIGLU          : one launch, each warp a gate and an up row
 *   ROPE q, ROPE k + KV_STORE, KV_STORE v     : one launch; in decode, in the q/k/v products
 *                                               (rope_into_products)
 *   VIEW of whole heads -> ROPE               : the rope reads the view's input in place
 *   GATES -> DELTANET (decode)                : the gates made by the DeltaNet kernel
 *   RMS_NORM_GATE -> MATMUL                   : the gated norm in the activation conversion
 *   ATTN -> SIGMOID_MUL (decode)              : the gate applied by attention to its rows
 *   MATMUL -> CONV1D (decode)                 : the convolution in the product's epilogue
 *                                               (conv_into_products)
 * Nodes named in BRASA_DUMP and the output node are never fused away. */
static void fuse(struct pb *b)
{
    const struct graph *g = b->g;
    for (int i = 0; i < g->n; i++)
        for (int j = 0; j < GRAPH_MAX_IN; j++)
            if (g->nodes[i].in[j] >= 0)
                b->nuse[g->nodes[i].in[j]]++;
    if (!b->s->fuse)
        return;
    for (int i = 0; i < g->n; i++) {
        const struct graph_node *n = &g->nodes[i];
        bool keep = i == g->out || graph_dump_wanted(b->s->dump, n->name);
        if (keep)
            continue;
        if (n->op == GOP_RMS_NORM && n->p.i[0] == n->ne[0] && b->nuse[i] > 0) {
            /* every consumer a MATMUL, and the norm's input still alive after the last one
             * (the arena may reuse a dead buffer, and the consumers re-read the input), or one
             * consumer right after the norm (the final norm before the LM head: nothing runs
             * between them to write over the input, and its conversion reads the input
             * before the product writes anything; a product converting its own input does
             * not where its output overlaps it, plan_matmul) */
            bool all = true;
            int last_mm = i, last_x = i, nmm = 0;
            for (int c = i + 1; c < g->n; c++)
                for (int j = 0; j < GRAPH_MAX_IN; j++) {
                    if (g->nodes[c].in[j] == i) {
                        all &= g->nodes[c].op == GOP_MATMUL && j == 0;
                        last_mm = c;
                        nmm++;
                    }
                    if (g->nodes[c].in[j] == n->in[0])
                        last_x = c;
                }
            if (all && (last_x > last_mm || (nmm == 1 && last_mm == next_op(g, i)))) {
                b->skip[i] = true;
                for (int c = i + 1; c < g->n; c++)
                    if (g->nodes[c].op == GOP_MATMUL && g->nodes[c].in[0] == i)
                        b->normsrc[c] = i;
            }
        }
        bool adjacent = n->op == GOP_ADD && n->in[1] >= 0 && n->in[1] < i;
        for (int c = adjacent ? n->in[1] + 1 : i; c < i; c++) /* only leaves in between */
            adjacent &= g->nodes[c].op == GOP_WEIGHT || g->nodes[c].op == GOP_STATE;
        if (adjacent && b->nuse[n->in[1]] == 1 && g->nodes[n->in[1]].op == GOP_MATMUL &&
            n->in[0] < n->in[1] && n->in[1] != g->out &&
            !graph_dump_wanted(b->s->dump, g->nodes[n->in[1]].name)) {
            b->resadd[n->in[1]] = i;
            b->skip[i] = true;
        }
        /* the DeltaNet's gates computed by its own kernel (ops.cu gate_pair) in decode (a
         * prompt's tokens run one after another in each wave: the gates' arithmetic on that
         * chain made pp512 of the qwen35 4B shape 10% slower, BENCHMARKS.md) */
        int nx = next_op(g, i);
        if (n->op == GOP_GATES && b->s->dn_fuse && b->nuse[i] == 1 && nx >= 0 &&
            g->nodes[nx].op == GOP_DELTANET && g->nodes[nx].in[1] == i && n->ne[1] == 1)
            b->skip[i] = true;
        /* a gated RMSNorm (the DeltaNet output's) in the conversion of the one product that
         * reads it, right after it, where that conversion is quant_act's Q8_K (quantize.cu z:
         * groups of 8 to 256 values, a power of 2) */
        if (n->op == GOP_RMS_NORM_GATE && b->s->dn_fuse && b->nuse[i] == 1 && nx >= 0 &&
            g->nodes[nx].op == GOP_MATMUL && g->nodes[nx].in[0] == i && nx != g->out &&
            quant_mode(g->nodes[g->nodes[nx].in[1]].type) == 1 && n->p.i[0] >= 8 &&
            n->p.i[0] <= 256 && (n->p.i[0] & (n->p.i[0] - 1)) == 0 && n->ne[0] % 256 == 0 &&
            !graph_dump_wanted(b->s->dump, g->nodes[nx].name)) {
            b->skip[i] = true;
            b->normsrc[nx] = i;
        }
        /* a VIEW of whole heads (rows of hd at a stride, a token's at another) read by the
         * ROPE right after it alone: the rope reads the view's input in place (the arena
         * keeps that input apart from the ROPE's output: its last reader is the node before) */
        if (n->op == GOP_VIEW && b->nuse[i] == 1 && nx >= 0 && g->nodes[nx].op == GOP_ROPE &&
            g->nodes[nx].in[0] == i && n->p.i[1] == g->nodes[nx].p.i[0] &&
            (long)n->p.i[1] * n->p.i[2] == (long)n->ne[0] && n->p.i[3] >= n->p.i[1] &&
            n->p.i[0] >= 0 && n->p.i[0] + n->p.i[1] <= n->p.i[3] &&
            !graph_dump_wanted(b->s->dump, g->nodes[nx].name) && b->s->rope_view) {
            b->skip[i] = true;
            b->normsrc[nx] = i;
        }
        /* the gate after decode attention (qwen35's SIGMOID_MUL, right after it) applied by
         * attention as it writes its rows, into the SIGMOID_MUL's output: not where that
         * output's buffer is q's, which attention's other blocks may still read */
        if (n->op == GOP_ATTN && b->s->attn_gate && n->ne[1] == 1 && b->nuse[i] == 1 && nx >= 0 &&
            g->nodes[nx].op == GOP_SIGMOID_MUL && g->nodes[nx].in[0] == i &&
            g->nodes[nx].in[1] >= 0 && g->nodes[nx].nbytes == n->nbytes &&
            g->nodes[g->nodes[nx].in[1]].nbytes == n->nbytes && nx != g->out &&
            !arena_meets(g, nx, n->in[0]) && !graph_dump_wanted(b->s->dump, g->nodes[nx].name)) {
            b->gfuse[i] = nx;
            b->skip[nx] = true;
        }
        if (n->op == GOP_KV_STORE && g->nodes[n->in[0]].op == GOP_ROPE && b->nuse[n->in[0]] == 1) {
            b->ropekv[n->in[0]] = i;
            b->skip[i] = true;
        }
    }
    for (int i = 0; i < g->n; i++) { /* second pass: launches that share an input */
        const struct graph_node *n = &g->nodes[i];
        bool keep = i == g->out || graph_dump_wanted(b->s->dump, n->name);
        /* ROPE q, ROPE k (+ its cache write), KV_STORE v: one launch (no other op between) */
        if (n->op == GOP_ROPE && b->ropekv[i] < 0 && !keep) {
            int kr = next_op(g, i);
            int kst = kr >= 0 ? next_op(g, kr) : -1, vst = kst >= 0 ? next_op(g, kst) : -1;
            if (kr >= 0 && g->nodes[kr].op == GOP_ROPE && b->ropekv[kr] == kst && kst >= 0 &&
                b->normsrc[kr] < 0 && /* (k's input a tensor, not a VIEW folded into its rope) */
                memcmp(&g->nodes[kr].p, &n->p, sizeof n->p) == 0 && vst >= 0 &&
                g->nodes[vst].op == GOP_KV_STORE && g->nodes[vst].in[0] < i &&
                g->nodes[g->nodes[vst].in[1]].type == g->nodes[g->nodes[kst].in[1]].type &&
                !graph_dump_wanted(b->s->dump, g->nodes[kr].name)) {
                b->ropeqk[i] = kr;
                b->ropev[i] = vst;
                b->skip[kr] = b->skip[vst] = true;
                rope_into_products(b, i);
            }
        }
        /* MATMUL, MATMUL (same input, type and k; only leaves between) -> one launch; and
         * gate, up -> SWIGLU -> one launch writing the SWIGLU */
        if (n->op == GOP_MATMUL && !b->skip[i] && b->resadd[i] < 0 && !keep) {
            int nx = next_op(g, i);
            const struct graph_node *m2 = nx >= 0 ? &g->nodes[nx] : NULL;
            if (m2 && m2->op == GOP_MATMUL && m2->in[0] == n->in[0] && mm_compatible(g, i, nx) &&
                nx != g->out && b->resadd[nx] < 0 && !graph_dump_wanted(b->s->dump, m2->name) &&
                chain_after(b, i)) {
                int sw = next_op(g, nx);
                const struct graph_node *s3 = sw >= 0 ? &g->nodes[sw] : NULL;
                if (s3 && s3->op == GOP_SWIGLU && s3->in[0] == i && s3->in[1] == nx &&
                    b->nuse[i] == 1 && b->nuse[nx] == 1 &&
                    g->nodes[n->in[1]].ne[1] == g->nodes[m2->in[1]].ne[1]) {
                    b->glu[i] = sw;
                    b->mnext[i] = nx;
                    b->skip[nx] = b->skip[sw] = true;
                } else {
                    b->mnext[i] = nx;
                    b->skip[nx] = true;
                    int n3 = next_op(g, nx);
                    if (n3 >= 0 && g->nodes[n3].op == GOP_MATMUL && g->nodes[n3].in[0] == n->in[0] &&
                        (mm_compatible(g, i, n3) || mm_mix(b, i, nx, n3)) && n3 != g->out &&
                        chain_after(b, nx) &&
                        b->resadd[n3] < 0 &&
                        !graph_dump_wanted(b->s->dump, g->nodes[n3].name)) {
                        b->mnext[nx] = n3;
                        b->skip[n3] = true;
                    }
                }
            }
        }
    }
    conv_into_products(b);
}

/* Workspace bytes of a graph: arena, activation scratch, attention partials, and the split
 * partial sums of mmt.cu where a batch of mmt_min tokens or more may take it (mmt: it may). */
static size_t ws_layout(const struct graph *g, bool mmt, int mmt_min, size_t *o_xq, size_t *o_xd,
                        size_t *o_xs, size_t *o_xf, size_t *o_xh, size_t *o_part,
                        size_t *o_mpart)
{
    size_t maxk = 0, part = 0, mpart = 0;
    for (int i = 0; i < g->n; i++) {
        const struct graph_node *n = &g->nodes[i];
        if (n->op == GOP_MATMUL) {
            size_t k = (size_t)g->nodes[n->in[1]].ne[0] * (size_t)n->ne[1];
            maxk = k > maxk ? k : maxk;
            if (mmt && n->ne[1] >= mmt_min) /* batches on the tensor cores */
                mpart = (size_t)MMT_SPLIT_TILES * MMT_TILE_FLOATS * 4;
        } else if (n->op == GOP_ATTN) {
            int n_ctx = (int)g->nodes[g->nodes[n->in[1]].in[1]].ne[1];
            size_t sp = (size_t)attn_splits((int)n->ne[1], n_ctx);
            size_t pb = (size_t)n->ne[1] * (size_t)n->p.i[0] * sp * (size_t)(n->p.i[2] + 2) * 4;
            part = pb > part ? pb : part;
        }
    }
#define UP(x) (((x) + 255) & ~(size_t)255)
    size_t off = UP(g->arena_bytes);
    *o_xq = off;
    off += UP(maxk);
    *o_xd = off;
    off += UP(maxk / 32 * 4 + 4);
    *o_xs = off;
    off += UP(maxk / 16 * 4 + 4);
    *o_xf = off;
    off += UP(maxk * 4);
    *o_xh = off;
    off += UP(maxk * 2);
    *o_part = off;
    off += UP(part + 4);
    *o_mpart = off;
    off += UP(mpart);
#undef UP
    return off;
}

static struct plan *find_plan(struct gpu_sess *s, const struct graph *g)
{
    for (int i = 0; i < MAX_PLANS; i++)
        if (s->plans[i].g == g)
            return &s->plans[i];
    return NULL;
}

int gpu_sess_launches(struct gpu_sess *s, const struct graph *g, const char *kname)
{
    const struct plan *p = find_plan(s, g);
    if (!p)
        return -1;
    int n = 0;
    for (int k = 0; k < p->nl; k++)
        n += !kname || (p->l[k].kname && !strcmp(p->l[k].kname, kname));
    return n;
}

/* The decode RoPE's table (gpu_sess.d_cst) for positions below n_ctx, half pairs a position,
 * the angles' ratio ts; the plans made before a new one are made again (they hold its
 * address). */
static brasa_status cst_alloc(struct gpu_sess *s, int half, float ts, int n_ctx,
                              struct brasa_err *err)
{
    struct gpu *g = s->g;
    if (s->d_cst && s->cst_half == half && s->cst_ts == ts && s->cst_np >= n_ctx)
        return BRASA_OK;
    if (n_ctx <= 0 || half <= 0 || half > ROPE_CS_MAX / 2)
        return brasa_fail(err, BRASA_EINVAL, "a RoPE table of %d positions, %d pairs", n_ctx,
                          half);
    CK(cuStreamSynchronize, s->st); /* (runs in flight read the old one) */
    gmem_free(&g->mem, s->d_cst);
    s->d_cst = 0;
    free(s->cst_ok);
    s->cst_ok = NULL;
    s->cst_np = 0;
    if (!s->h_cst)
        CK(cuMemAllocHost, (void **)&s->h_cst, (size_t)CST_CHUNK * ROPE_CS_MAX * 4);
    if (!s->ev_cst)
        CK(cuEventCreate, &s->ev_cst, CU_EVENT_DISABLE_TIMING);
    brasa_status st = gmem_alloc(&g->mem, &s->d_cst, (size_t)n_ctx * 2 * (size_t)half * 4,
                                 "RoPE table", "session", err);
    if (st != BRASA_OK)
        return st;
    if (!(s->cst_ok = calloc((size_t)(n_ctx + CST_CHUNK - 1) / CST_CHUNK, 1)))
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    s->cst_np = n_ctx;
    s->cst_half = half;
    s->cst_ts = ts;
    s->ws_gen++;
    return BRASA_OK;
}

/* The RoPE table's rows for the chunks of positions that hold pos .. pos + np - 1 (a run's
 * batch), those not there yet: the angles as the CPU's rope makes them (graph_rope_table),
 * queued on the session's stream. */
static brasa_status cst_fill(struct gpu_sess *s, long pos, long np, struct brasa_err *err)
{
    struct gpu *g = s->g;
    if (!s->d_cst || pos < 0 || np < 1 || pos + np > s->cst_np)
        return brasa_fail(err, BRASA_EINVAL, "positions %ld to %ld outside the RoPE table (%d "
                          "positions)", pos, pos + np - 1, s->cst_np);
    const long w = 2L * s->cst_half;
    for (long c = pos / CST_CHUNK; c <= (pos + np - 1) / CST_CHUNK; c++) {
        if (s->cst_ok[c])
            continue;
        /* (the copy before read the staging) */
        brasa_status st = wait_event(s, s->ev_cst, "the RoPE table's copy", err);
        if (st != BRASA_OK)
            return st;
        const long n = s->cst_np - c * CST_CHUNK < CST_CHUNK ? s->cst_np - c * CST_CHUNK
                                                             : CST_CHUNK;
        for (long i = 0; i < n; i++)
            graph_rope_table(c * CST_CHUNK + i, s->cst_half, s->cst_ts, s->h_cst + i * w);
        CK(cuMemcpyHtoDAsync, s->d_cst + (CUdeviceptr)(c * CST_CHUNK * w * 4), s->h_cst,
           (size_t)(n * w * 4), s->st);
        CK(cuEventRecord, s->ev_cst, s->st);
        s->cst_ok[c] = 1;
    }
    return BRASA_OK;
}

brasa_status gpu_sess_prepare(struct gpu_sess *s, const struct graph *g, int n_ctx,
                              struct brasa_err *err)
{
    struct gpu *gp = s->g;
    brasa_status st = DRV_CALL(&gp->d, err, cuCtxSetCurrent, gp->ctx);
    if (st != BRASA_OK)
        return st;
    struct plan *p = find_plan(s, g);
    if (!p) {
        for (int i = 0; i < MAX_PLANS && !p; i++)
            if (!s->plans[i].g)
                p = &s->plans[i];
        if (!p) { /* evict the oldest non-decode plan */
            p = &s->plans[MAX_PLANS - 1];
        }
    }
    plan_clear(s, p);
    size_t o_xq, o_xd, o_xs, o_xf, o_xh, o_part, o_mpart;
    size_t need = ws_layout(g, s->mmt, s->mmt_min, &o_xq, &o_xd, &o_xs, &o_xf, &o_xh, &o_part,
                            &o_mpart);
    if (need > s->ws_cap) {
        gp->d.cuStreamSynchronize(s->st);
        gmem_free(&gp->mem, s->ws);
        s->ws = 0;
        s->ws_cap = 0;
        if ((st = gmem_alloc(&gp->mem, &s->ws, need, "workspace", "session", err)) != BRASA_OK)
            return st;
        s->ws_cap = need;
        s->ws_gen++;
    }
    if (g->n_tok > s->tok_cap) {
        gp->d.cuStreamSynchronize(s->st); /* (runs in flight read h_io: gpu_sess_launch) */
        gmem_free(&gp->mem, s->d_io);
        if (s->h_io)
            gp->d.cuMemFreeHost(s->h_io);
        s->d_io = 0;
        s->h_io = NULL;
        s->tok_cap = 0;
        size_t nb = (size_t)(g->n_tok + 1) * 4;
        if ((st = gmem_alloc(&gp->mem, &s->d_io, nb, "position and tokens", "session", err)) ||
            (st = DRV_CALL(&gp->d, err, cuMemAllocHost, (void **)&s->h_io, GPU_SLOTS * nb)))
            return st;
        for (int i = 0; i < GPU_SLOTS; i++)
            s->sl[i].h_io = s->h_io + i * (nb / 4);
        s->d_pos = s->d_io;
        s->d_tok = s->d_io + 4;
        s->tok_cap = g->n_tok;
        s->ws_gen++; /* plans hold the token buffer's address */
    }
    if (!s->d_cnt) {
        size_t nb = (MMT_SPLIT_TILES + ATTN_CNT) * 4;
        if ((st = gmem_alloc(&gp->mem, &s->d_cnt, nb, "split counts", "session", err)) ||
            (st = DRV_CALL(&gp->d, err, cuMemsetD8Async, s->d_cnt, 0, nb, s->st)))
            return st;
    }
    const struct graph_node *on = &g->nodes[g->out];
    size_t ob = on->nbytes;
    if (ob > s->out_cap) {
        if (s->out)
            gp->d.cuMemFreeHost(s->out);
        s->out = NULL;
        s->out_cap = 0;
        if ((st = DRV_CALL(&gp->d, err, cuMemAllocHost, (void **)&s->out, ob)))
            return st;
        s->out_cap = ob;
    }
    struct pb b = {.s = s, .g = g, .p = p, .ws = s->ws, .xq = s->ws + o_xq, .xd = s->ws + o_xd,
                   .xs = s->ws + o_xs, .xf = s->ws + o_xf, .xh = s->ws + o_xh, .part = s->ws + o_part,
                   .mpart = s->ws + o_mpart, .q_src = -1, .q_mode = -1,
                   .n_ctx = n_ctx, .err = err};
    for (int i = 0; i < g->n; i++)
        b.recurrent |= g->nodes[i].op == GOP_DELTANET;
    b.nuse = calloc((size_t)g->n, sizeof(int));
    b.normsrc = malloc((size_t)g->n * sizeof(int));
    b.resadd = malloc((size_t)g->n * sizeof(int));
    b.ropekv = malloc((size_t)g->n * sizeof(int));
    b.mnext = malloc((size_t)g->n * sizeof(int));
    b.ropeqk = malloc((size_t)g->n * sizeof(int));
    b.ropev = malloc((size_t)g->n * sizeof(int));
    b.glu = malloc((size_t)g->n * sizeof(int));
    b.rfuse = malloc((size_t)g->n * sizeof(int));
    b.cfuse = malloc((size_t)g->n * sizeof(int));
    b.gfuse = malloc((size_t)g->n * sizeof(int));
    b.skip = calloc((size_t)g->n, sizeof(bool));
    if (!b.nuse || !b.normsrc || !b.resadd || !b.ropekv || !b.skip || !b.mnext || !b.glu ||
        !b.ropeqk || !b.ropev || !b.rfuse || !b.cfuse || !b.gfuse) {
        st = brasa_fail(err, BRASA_ENOMEM, "out of memory");
    } else {
        for (int i = 0; i < g->n; i++)
            b.normsrc[i] = b.resadd[i] = b.ropekv[i] = b.mnext[i] = b.glu[i] = b.ropeqk[i] =
                b.ropev[i] = b.rfuse[i] = b.cfuse[i] = b.gfuse[i] = -1;
        fuse(&b);
        rope_table(&b);
        if (p->rope_half)
            st = cst_alloc(s, p->rope_half, p->rope_ts, n_ctx, err);
        for (int i = 0; i < g->n && st == BRASA_OK; i++) {
            const struct graph_node *n = &g->nodes[i];
            if (is_leaf(n) || b.skip[i])
                continue;
            st = plan_node(&b, i);
        }
    }
    /* the sampler's candidates, when the output is one row of logits: the top-k kernel reads
     * K from d_top when it runs (0: the whole row goes to the host instead) */
    const struct graph_node *on1 = &g->nodes[g->out];
    p->tk_l = -1;
    p->top = st == BRASA_OK && on1->ne[1] == 1 && on1->ne[2] == 1 && on1->ne[0] > 0 &&
             on1->type == T_F32;
    if (p->top) {
        /* a long row in two launches: topk_part's blocks (slices of at least TK_MAX logits,
         * at most TK_PARTS of them) each select their best K, and topk the best K of those */
        long n = (long)on1->ne[0], chunk = (n + TK_PARTS - 1) / TK_PARTS;
        chunk = chunk > TK_MAX ? chunk : TK_MAX;
        long np = s->tk_one ? 1 : (n + chunk - 1) / chunk;
        CUdeviceptr x;
        struct launch *l;
        if ((st = dev_of(&b, g->out, &x)) == BRASA_OK && np > 1) {
            if (!(l = L(&b, K_TOPKP, 0, NULL, g->out, (unsigned)np, 1, 1, 1024, 0)))
                st = brasa_fail(err, BRASA_ENOMEM, "out of memory");
            else {
                ap(l, x);
                ai(l, n);
                ai(l, chunk);
                ap(l, s->d_top);
                ap(l, s->d_tkp);
            }
        }
        if (st == BRASA_OK) {
            if (!(l = L(&b, K_TOPK, 0, NULL, g->out, 1, 1, 1, 1024, 0)))
                st = brasa_fail(err, BRASA_ENOMEM, "out of memory");
            else {
                ap(l, x);
                ai(l, n);
                ap(l, s->d_top);
                ap(l, s->d_top + 4);
                ap(l, np > 1 ? s->d_tkp : 0);
                ai(l, np > 1 ? np : 0);
                ap(l, 0); /* (the run slot's pinned copy: launch_run) */
                p->tk_l = s->tk_host ? p->nl - 1 : -1;
            }
        }
    }
    /* BRASA_GPU_OMIT=name,...: one-token plans leave out the launches of those kernels (a
     * measurement aid: what the step costs without them; its results are wrong) */
    const char *omit = getenv("BRASA_GPU_OMIT");
    if (st == BRASA_OK && omit && *omit && g->n_tok == 1) {
        int kept = 0;
        for (int k = 0; k < p->nl; k++) {
            size_t nl = strlen(p->l[k].kname);
            bool drop = false;
            for (const char *f = omit; !drop && (f = strstr(f, p->l[k].kname)); f++)
                drop = (f == omit || f[-1] == ',') && (f[nl] == ',' || !f[nl]);
            if (!drop)
                p->l[kept++] = p->l[k];
            if (k == p->tk_l) /* (the top-k launch moves, or goes) */
                p->tk_l = drop ? -1 : kept - 1;
        }
        p->nl = kept;
    }
    free(b.nuse);
    free(b.normsrc);
    free(b.resadd);
    free(b.ropekv);
    free(b.mnext);
    free(b.ropeqk);
    free(b.ropev);
    free(b.rfuse);
    free(b.cfuse);
    free(b.gfuse);
    free(b.glu);
    free(b.skip);
    if (st == BRASA_OK)
        st = up_finish(s, err);
    else
        up_finish(s, &(struct brasa_err){{0}});
    if (st == BRASA_OK)
        st = gp->d.cuStreamSynchronize(s->st) ? brasa_fail(err, BRASA_EDEVICE, "state init failed")
                                              : BRASA_OK;
    if (st != BRASA_OK) {
        plan_clear(s, p);
        return st;
    }
    p->g = g;
    p->n_tok = g->n_tok;
    p->n_nodes = g->n;
    p->n_ctx = n_ctx;
    p->gen = s->ws_gen;
    p->out_node = g->out;
    p->out_bytes = ob;
    if (gp->o.verbose)
        fprintf(stderr, "brasa: GPU plan for %d tokens: %d nodes -> %d launches\n", g->n_tok, g->n,
                p->nl);
    return BRASA_OK;
}

/* ---------------------------------------------------------------- execution */

/* BRASA_GPU_TIMELINE: reads the run's stamps (one a launch: the first of each grid id), adds
 * each launch's time to the next launch's stamp to its kernel's row, and clears the count. A
 * run whose stamps do not match its launches one to one is counted in tl_bad and left out. */
static brasa_status tl_collect(struct gpu_sess *s, const struct plan *p, struct brasa_err *err)
{
    struct gpu *gp = s->g;
    brasa_status st;
    uint64_t n = 0;
    if (!s->h_tl && !(s->h_tl = malloc((1 + 2 * (size_t)TL_N) * 8)))
        return brasa_fail(err, BRASA_ENOMEM, "out of memory");
    if ((st = DRV_CALL(&gp->d, err, cuMemcpyDtoHAsync, &n, gp->tl, 8, s->st)) ||
        (st = DRV_CALL(&gp->d, err, cuStreamSynchronize, s->st)))
        return st;
    n = n < TL_N ? n : TL_N;
    if (n && ((st = DRV_CALL(&gp->d, err, cuMemcpyDtoHAsync, s->h_tl + 1, gp->tl + 8, 16 * n,
                             s->st)) ||
              (st = DRV_CALL(&gp->d, err, cuMemsetD8Async, gp->tl, 0, 8, s->st)) ||
              (st = DRV_CALL(&gp->d, err, cuStreamSynchronize, s->st))))
        return st;
    /* the first stamp of each grid, in order (the launches run one after the other) */
    uint64_t *t = s->h_tl + 1;
    int m = 0;
    for (uint64_t i = 0; i < n; i++)
        if (!m || t[2 * i + 1] != t[2 * (m - 1) + 1]) {
            t[2 * m] = t[2 * i];
            t[2 * m + 1] = t[2 * i + 1];
            m++;
        }
    /* stamp k is the k-th kernel's (a collective stamps nothing: its time counts in the
     * kernel before it) */
    int nk = 0;
    for (int k = 0; k < p->nl; k++)
        nk += p->l[k].fn != NULL;
    if (m != nk) {
        s->tl_bad++;
        return BRASA_OK;
    }
    s->tl_runs++;
    for (int k = 0, j = 0; k + 1 < m; k++, j++) {
        while (!p->l[j].fn)
            j++;
        const double us = (double)(t[2 * k + 2] - t[2 * k]) * 1e-3;
        kt_add(s->tk, &s->ntk, p->l[j].kname, us * 1e-3);
        if (s->tl_runs == 100 && gp->tl_level >= 2) /* one run, launch by launch */
            fprintf(stderr, "brasa: timeline %4d %-14s %-24s %8.2f us\n", k, p->l[j].kname,
                    p->g->nodes[p->l[j].node].name, us);
    }
    return BRASA_OK;
}

static brasa_status launch(struct gpu_sess *s, const struct launch *l, struct brasa_err *err)
{
    if (!l->fn) { /* ALLREDUCE: the collective library's sum over the shards, in place or not */
        ncclResult_t r = s->nc->AllReduce((const void *)(uintptr_t)l->v[0].p,
                                          (void *)(uintptr_t)l->v[1].p, (size_t)l->v[2].l,
                                          ncclFloat32, ncclSum, s->comm, (void *)s->st);
        if (r != ncclSuccess)
            return brasa_fail(err, BRASA_EDEVICE, "ncclAllReduce of %lld floats: %s", l->v[2].l,
                              s->nc->GetErrorString(r));
        return BRASA_OK;
    }
    void *args[MAX_ARGS];
    union argv v[MAX_ARGS];
    if (l->nargs > MAX_ARGS)
        return brasa_fail(err, BRASA_EDEVICE, "kernel %s: %d arguments, more than the %d a "
                          "launch holds", l->kname ? l->kname : "?", l->nargs, MAX_ARGS);
    memcpy(v, l->v, sizeof v);
    for (int i = 0; i < l->nargs; i++)
        args[i] = &v[i];
    CUresult r;
    if (s->pdl) { /* the kernel may start while the previous one drains (see port.cuh) */
        CUlaunchAttribute at;
        memset(&at, 0, sizeof at);
        at.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        at.value.programmaticStreamSerializationAllowed = 1;
        CUlaunchConfig c = {l->gx, l->gy, l->gz, l->bx, 1, 1, l->shmem, s->st, &at, 1};
        r = s->g->d.cuLaunchKernelEx(&c, l->fn, args, NULL);
    } else {
        r = s->g->d.cuLaunchKernel(l->fn, l->gx, l->gy, l->gz, l->bx, 1, 1, l->shmem, s->st,
                                   args, NULL);
    }
    if (r != 0) {
        drv_check(&s->g->d, r, s->pdl ? "cuLaunchKernelEx" : "cuLaunchKernel", err);
        return brasa_wrap(err, BRASA_EDEVICE, "kernel %s (grid %u,%u,%u, block %u, %u bytes "
                          "shared)", l->kname, l->gx, l->gy, l->gz, l->bx, l->shmem);
    }
    return BRASA_OK;
}

/* Waits for ev with the watchdog's deadline (a kernel that never finishes becomes an error):
 * spins for the first 5 ms (a decode step ends within them), then sleeps 50 us between
 * queries. */
static brasa_status wait_event(struct gpu_sess *s, CUevent ev, const char *what,
                               struct brasa_err *err)
{
    struct gpu *g = s->g;
    double t0 = plat_now();
    CUresult r;
    for (long spins = 0;; spins++) {
        r = g->d.cuEventQuery(ev);
        if (r != CUDA_ERROR_NOT_READY)
            break;
        double el = plat_now() - t0;
        if (el > g->o.timeout_s)
            return brasa_fail(err, BRASA_ETIMEOUT, "the GPU did not finish %s within %.0f s (set "
                              "BRASA_GPU_TIMEOUT to wait longer)", what, g->o.timeout_s);
        if (el > 0.005) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    if (r != 0) {
        drv_check(&g->d, r, "cuEventQuery", err);
        return brasa_wrap(err, BRASA_EDEVICE, "while running %s", what);
    }
    return BRASA_OK;
}

static void dump_node(struct gpu_sess *s, const struct graph *g, int i, const struct graph_run *r)
{
    const struct graph_node *n = &g->nodes[i];
    if (!n->nbytes)
        return;
    float *x = malloc(n->nbytes);
    if (!x)
        return;
    s->g->d.cuStreamSynchronize(s->st);
    if (s->g->d.cuMemcpyDtoH(x, s->ws + n->offset, n->nbytes) == 0)
        graph_dump_values(n, r->pos0, x, stderr);
    free(x);
}

static brasa_status finish_run(struct gpu_sess *s, struct brasa_err *err);

/* Queues a run on the session's stream without waiting for it: the inputs from the slot's
 * staging, the kernels (the captured graph for one token), the candidates or the output to
 * the slot's host copy. r->tokens NULL: the one token is the first candidate of the run
 * before, chosen on the device (get_rows reads it from d_top; only with candidates). */
static brasa_status launch_run(struct gpu_sess *s, const struct graph *g,
                               const struct graph_run *r, bool eager, struct brasa_err *err)
{
    struct gpu *gp = s->g;
    struct plan *p = find_plan(s, g);
    brasa_status st;
    if ((st = DRV_CALL(&gp->d, err, cuCtxSetCurrent, gp->ctx)))
        return st;
    if (!p || p->n_nodes != g->n || p->n_tok != g->n_tok || p->gen != s->ws_gen) {
        while (s->nfly) /* (planning may move the buffers the runs in flight use) */
            if ((st = finish_run(s, err)))
                return st;
        if ((st = gpu_sess_prepare(s, g, p ? p->n_ctx : 0, err)))
            return st;
        p = find_plan(s, g);
    }
    int top = p->top && r->top_k > 0 ? (r->top_k < TK_MAX ? r->top_k : TK_MAX) : 0;
    if (!r->tokens && (!top || g->n_tok != 1))
        return brasa_fail(err, BRASA_EINVAL, "a token from the device needs one token and "
                          "the sampler's candidates");
    /* a slot free, and the whole output (one host buffer) only with nothing in flight */
    while (s->nfly == GPU_SLOTS || (s->nfly && !top))
        if ((st = finish_run(s, err)))
            return st;
    const int slot = s->sl_next;
    struct gslot *q = &s->sl[slot];
    if (p->rope_half && (st = cst_fill(s, r->pos0, g->n_tok, err)))
        return st;
    /* the inputs: the position, and the tokens (-1: get_rows takes the previous run's first
     * candidate) */
    q->h_io[0] = r->pos0;
    if (r->tokens)
        memcpy(q->h_io + 1, r->tokens, (size_t)g->n_tok * sizeof(int32_t));
    else
        q->h_io[1] = -1;
    if ((st = DRV_CALL(&gp->d, err, cuMemcpyHtoDAsync, s->d_io, q->h_io,
                       (size_t)(g->n_tok + 1) * sizeof(int32_t), s->st)))
        return st;
    if (p->top && top != s->top_dev) { /* (it stays there for the runs after) */
        q->h_top[0] = top;
        if ((st = DRV_CALL(&gp->d, err, cuMemcpyHtoDAsync, s->d_top, q->h_top, 4, s->st)))
            return st;
        s->top_dev = top;
    }
    if ((st = DRV_CALL(&gp->d, err, cuEventRecord, q->ev0, s->st)))
        return st;
    bool graph = !eager && s->use_graph && !s->dump && !s->prof && g->n_tok == 1;
    if (s->prof && p->nl > s->npev) {
        CUevent *ne = realloc(s->pev, (size_t)p->nl * sizeof *ne);
        if (!ne)
            return brasa_fail(err, BRASA_ENOMEM, "out of memory");
        s->pev = ne;
        for (; s->npev < p->nl; s->npev++)
            if ((st = DRV_CALL(&gp->d, err, cuEventCreate, &s->pev[s->npev], CU_EVENT_DEFAULT)))
                return st;
    }
    if (p->tk_l >= 0) { /* the candidates straight into this slot's pinned memory */
        struct launch *tl = &p->l[p->tk_l];
        tl->v[tl->nargs - 1].p = (CUdeviceptr)(uintptr_t)(q->h_top + 1);
    }
    if (graph && !p->exec[slot]) {
        CUgraph cg = NULL;
        if ((st = DRV_CALL(&gp->d, err, cuStreamBeginCapture, s->st,
                           CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)))
            return st;
        for (int k = 0; k < p->nl && st == BRASA_OK; k++)
            st = launch(s, &p->l[k], err);
        CUresult rc = gp->d.cuStreamEndCapture(s->st, &cg);
        if (st == BRASA_OK && rc != 0)
            st = drv_check(&gp->d, rc, "cuStreamEndCapture", err);
        if (st == BRASA_OK)
            st = DRV_CALL(&gp->d, err, cuGraphInstantiateWithFlags, &p->exec[slot], cg, 0);
        if (cg)
            gp->d.cuGraphDestroy(cg);
        if (st != BRASA_OK)
            return brasa_wrap(err, st, "capturing the decode step");
    }
    if (graph) {
        if ((st = DRV_CALL(&gp->d, err, cuGraphLaunch, p->exec[slot], s->st)))
            return st;
    } else {
        for (int k = 0; k < p->nl; k++) {
            if ((st = launch(s, &p->l[k], err)))
                return brasa_wrap(err, st, "node %s", g->nodes[p->l[k].node].name);
            if (s->prof && (st = DRV_CALL(&gp->d, err, cuEventRecord, s->pev[k], s->st)))
                return st;
            if (s->dump && (k + 1 == p->nl || p->l[k + 1].node != p->l[k].node) &&
                graph_dump_wanted(s->dump, g->nodes[p->l[k].node].name))
                dump_node(s, g, p->l[k].node, r);
        }
    }
    /* to the host: the candidates when the top-k kernel chose them, else the whole output */
    const struct graph_node *on = &g->nodes[g->out];
    s->out_dev = s->ws + on->offset;
    s->out_len = on->nbytes;
    s->out_valid = false;
    if ((st = DRV_CALL(&gp->d, err, cuEventRecord, q->ev1, s->st)) ||
        (st = top ? (p->tk_l >= 0 ? BRASA_OK
                             : DRV_CALL(&gp->d, err, cuMemcpyDtoHAsync, q->h_top + 1,
                                        s->d_top + 4, 2 * TK_MAX * sizeof(int32_t), s->st))
                  : DRV_CALL(&gp->d, err, cuMemcpyDtoHAsync, s->out, s->out_dev, s->out_len,
                             s->st)) ||
        (st = DRV_CALL(&gp->d, err, cuEventRecord, q->ev2, s->st)))
        return st;
    q->top = top;
    q->graph = graph;
    q->p = p;
    s->sl_next = (slot + 1) % GPU_SLOTS;
    s->nfly++;
    return BRASA_OK;
}

/* Waits for the oldest run in flight; its candidates (or output) are then the session's. */
static brasa_status finish_run(struct gpu_sess *s, struct brasa_err *err)
{
    struct gpu *gp = s->g;
    if (!s->nfly)
        return BRASA_OK;
    const int i = (s->sl_next - s->nfly + GPU_SLOTS) % GPU_SLOTS;
    struct gslot *q = &s->sl[i];
    brasa_status st = wait_event(s, q->ev2, q->graph ? "the decode graph" : "a prompt batch",
                                 err);
    s->nfly--;
    if (st != BRASA_OK) {
        s->nfly = 0; /* (the stream is broken: nothing after it will finish either) */
        return st;
    }
    s->sl_done = i;
    s->top_n = q->top;
    s->out_valid = !q->top;
    float ms = 0;
    gp->d.cuEventElapsedTime(&ms, q->ev0, q->ev1);
    s->last_ms = ms;
    const struct plan *p = q->p;
    for (int k = 0; s->prof && k < p->nl; k++) {
        float km = 0;
        gp->d.cuEventElapsedTime(&km, k ? s->pev[k - 1] : q->ev0, s->pev[k]);
        kt_add(s->pk, &s->npk, p->l[k].kname, km);
        if (s->prof == 2 && p->n_tok > 1)
            fprintf(stderr, "brasa: prompt of %d, launch %4d: %-14s %-28s %9.1f us\n", p->n_tok,
                    k, p->l[k].kname, p->l[k].node >= 0 ? p->g->nodes[p->l[k].node].name : "",
                    km * 1e3);
    }
    if (gp->tl && (st = tl_collect(s, p, err)))
        return st;
    if (gp->o.duty > 0 && gp->o.duty < 1) { /* duty-cycle limiter: idle in proportion */
        double idle = ms * 1e-3 * (1.0 - gp->o.duty) / gp->o.duty;
        struct timespec ts = {(time_t)idle, (long)((idle - (double)(time_t)idle) * 1e9)};
        nanosleep(&ts, NULL);
    }
    return BRASA_OK;
}

/* A run, waited for (and every run in flight before it) */
static brasa_status run(struct gpu_sess *s, const struct graph *g, const struct graph_run *r,
                        bool eager, struct brasa_err *err)
{
    brasa_status st = launch_run(s, g, r, eager, err);
    while (st == BRASA_OK && s->nfly)
        st = finish_run(s, err);
    return st;
}

brasa_status gpu_make_current(struct gpu *g, struct brasa_err *err)
{
    return DRV_CALL(&g->d, err, cuCtxSetCurrent, g->ctx);
}

brasa_status gpu_sess_set_comm(struct gpu_sess *s, const struct nccl *nc, ncclComm_t comm,
                               struct brasa_err *err)
{
    if (!nc || !nc->lib || !comm)
        return brasa_fail(err, BRASA_EINVAL, "no collective library or communicator");
    s->nc = nc;
    s->comm = comm;
    return BRASA_OK;
}

brasa_status gpu_sess_gather(struct gpu_sess *s, bool top, int world, int row, int pad,
                             const void **out, struct brasa_err *err)
{
    struct gpu *g = s->g;
    if (!s->nc || world < 1 || row < 0 || pad < row || (size_t)row * 4 > s->out_len ||
        (top && s->top_n <= 0))
        return brasa_fail(err, BRASA_EINVAL, "nothing to gather (%d ranks, a row of %d)", world,
                          row);
    size_t per = top ? 2 * TK_MAX : (size_t)pad, need = per * 4 * (size_t)(world + 1);
    brasa_status st;
    CK(cuCtxSetCurrent, g->ctx);
    if (s->gat_cap < need) {
        gmem_free(&g->mem, s->d_gat);
        if (s->h_gat)
            g->d.cuMemFreeHost(s->h_gat);
        s->d_gat = 0;
        s->h_gat = NULL;
        s->gat_cap = 0;
        if ((st = gmem_alloc(&g->mem, &s->d_gat, need, "ranks' results", "session", err)) ||
            (st = DRV_CALL(&g->d, err, cuMemAllocHost, &s->h_gat, need - per * 4)))
            return st;
        s->gat_cap = need;
    }
    CUdeviceptr send = s->d_gat, recv = s->d_gat + per * 4;
    if (top) { /* the candidates' ids and values, as the top-k kernel left them */
        CK(cuMemcpyDtoDAsync, send, s->d_top + 4, per * 4, s->st);
    } else { /* the last row, padded */
        CK(cuMemsetD8Async, send, 0, per * 4, s->st);
        CK(cuMemcpyDtoDAsync, send, s->out_dev + s->out_len - (size_t)row * 4, (size_t)row * 4,
           s->st);
    }
    ncclResult_t r = s->nc->AllGather((const void *)(uintptr_t)send, (void *)(uintptr_t)recv,
                                      per, ncclFloat32, s->comm, (void *)s->st);
    if (r != ncclSuccess)
        return brasa_fail(err, BRASA_EDEVICE, "ncclAllGather over %d ranks: %s", world,
                          s->nc->GetErrorString(r));
    CK(cuMemcpyDtoHAsync, s->h_gat, recv, per * 4 * (size_t)world, s->st);
    CK(cuEventRecord, s->evg, s->st);
    if ((st = wait_event(s, s->evg, "gathering the ranks' results", err)) != BRASA_OK)
        return st;
    *out = s->h_gat;
    return BRASA_OK;
}

brasa_status gpu_sess_run(struct gpu_sess *s, const struct graph *g, const struct graph_run *r,
                          struct brasa_err *err)
{
    return run(s, g, r, false, err);
}

brasa_status gpu_sess_launch(struct gpu_sess *s, const struct graph *g, const struct graph_run *r,
                             struct brasa_err *err)
{
    if (g->n_tok != 1 || r->top_k <= 0 || !gpu_sess_can_queue(s))
        return brasa_fail(err, BRASA_EINVAL, "only decode steps with the sampler's candidates "
                          "on the graph executor are queued ahead");
    return launch_run(s, g, r, false, err);
}

brasa_status gpu_sess_finish(struct gpu_sess *s, struct brasa_err *err)
{
    return finish_run(s, err);
}

int gpu_sess_in_flight(const struct gpu_sess *s) { return s->nfly; }

brasa_status gpu_sess_drop(struct gpu_sess *s, struct brasa_err *err)
{
    brasa_status st = BRASA_OK;
    while (st == BRASA_OK && s->nfly > 1)
        st = finish_run(s, err);
    if (st != BRASA_OK || !s->nfly)
        return st;
    /* (the newest run took the other slot: the last finished one's candidates stay) */
    const int done = s->sl_done, top = s->top_n;
    const float ms = s->last_ms;
    st = finish_run(s, err);
    s->sl_done = done;
    s->top_n = top;
    s->last_ms = ms;
    s->out_valid = false;
    return st;
}

bool gpu_sess_can_queue(const struct gpu_sess *s)
{
    const struct gpu *g = s->g;
    return s->use_graph && !s->dump && !s->prof && !g->tl && !(g->o.duty > 0 && g->o.duty < 1);
}

brasa_status gpu_sess_run_eager(struct gpu_sess *s, const struct graph *g,
                                const struct graph_run *r, struct brasa_err *err)
{
    return run(s, g, r, true, err);
}

/* ---------------------------------------------------------------- measurement */

brasa_status gpu_copy_bandwidth(struct gpu *g, size_t bytes, double *gbps, struct brasa_err *err)
{
    CUdeviceptr a = 0, b = 0;
    CUstream st = NULL;
    CUevent e0 = NULL, e1 = NULL;
    brasa_status s;
    *gbps = 0;
    if ((s = DRV_CALL(&g->d, err, cuCtxSetCurrent, g->ctx)) ||
        (s = gmem_alloc(&g->mem, &a, bytes, "copy test a", "bench", err)) ||
        (s = gmem_alloc(&g->mem, &b, bytes, "copy test b", "bench", err)) ||
        (s = DRV_CALL(&g->d, err, cuStreamCreate, &st, CU_STREAM_NON_BLOCKING)) ||
        (s = DRV_CALL(&g->d, err, cuEventCreate, &e0, 0)) ||
        (s = DRV_CALL(&g->d, err, cuEventCreate, &e1, 0)) ||
        (s = DRV_CALL(&g->d, err, cuMemsetD8Async, a, 1, bytes, st)))
        goto out;
    float best = 1e30f;
    for (int r = 0; r < 12 && s == BRASA_OK; r++) {
        float ms = 0;
        if ((s = DRV_CALL(&g->d, err, cuEventRecord, e0, st)) ||
            (s = DRV_CALL(&g->d, err, cuMemcpyDtoDAsync, r & 1 ? a : b, r & 1 ? b : a, bytes, st)) ||
            (s = DRV_CALL(&g->d, err, cuEventRecord, e1, st)) ||
            (s = DRV_CALL(&g->d, err, cuStreamSynchronize, st)) ||
            (s = DRV_CALL(&g->d, err, cuEventElapsedTime, &ms, e0, e1)))
            break;
        if (r >= 2 && ms < best)
            best = ms;
    }
    if (s == BRASA_OK)
        *gbps = 2.0 * (double)bytes / (best * 1e-3) / 1e9; /* bytes read + bytes written */
out:
    if (e0)
        g->d.cuEventDestroy(e0);
    if (e1)
        g->d.cuEventDestroy(e1);
    if (st)
        g->d.cuStreamDestroy(st);
    gmem_free(&g->mem, a);
    gmem_free(&g->mem, b);
    return s;
}
