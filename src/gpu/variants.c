/* variants: the table of kernel modules. */
#include "gpu/variants.h"

#include <string.h>

#include "quant/quant.h"

const unsigned gpu_matvec_types[] = {GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16,
                                     GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K,
                                     GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
const int gpu_n_matvec_types = (int)(sizeof gpu_matvec_types / sizeof gpu_matvec_types[0]);

/* Packs each candidate's defines (an entry without a name is one left out) and sets n_defs
 * to their count (so a list can never leave one out), returns n. */
static int counted(struct gpu_variant *v, int n)
{
    for (int i = 0; i < n; i++) {
        int d = 0;
        for (int j = 0; j < GV_MAX_DEFS; j++)
            if (v[i].defs[j].name)
                v[i].defs[d++] = v[i].defs[j];
        v[i].n_defs = d;
    }
    return n;
}

int gpu_matvec_variants(unsigned wtype, int nc, int glu, struct gpu_variant *out, int cap)
{
    int known = 0;
    for (int i = 0; i < gpu_n_matvec_types; i++)
        known |= gpu_matvec_types[i] == wtype;
    if (!known || cap < 2)
        return 0;
    /* decode: 4 warps (rows) per block first, then 2; batches: 8 columns per weight load,
     * then 4 if 8 spills */
    int nw[2] = {4, 2}, ncs[2] = {nc, nc};
    if (nc > 1) {
        nw[1] = 4;
        ncs[1] = nc / 2;
    }
    for (int v = 0; v < 2; v++)
        out[v] = (struct gpu_variant){
            .tmpl = "matvec.cu",
            .defs = {{"QT", (long)wtype}, {"NW", nw[v]}, {"NC", ncs[v]}, {"GLU", glu}}};
    return counted(out, 2);
}

int gpu_mvd_xc(unsigned wtype) { return wtype == GGML_TYPE_Q8_0 || wtype == GGML_TYPE_Q4_0; }

int gpu_mvd_variants(unsigned wtype, int glu, int nr, int ks, int xc, int rp, int kp,
                     struct gpu_variant *out, int cap)
{
    int known = 0;
    for (int i = 0; i < gpu_n_matvec_types; i++)
        known |= gpu_matvec_types[i] == wtype;
    if (!known || cap < 2 || (nr != 1 && nr != 2 && nr != 4) || (glu && nr < 2) ||
        (ks != 1 && ks != 2 && ks != 4) || (rp && glu) || rp < 0 || rp > 2 ||
        (kp != 32 && (kp != 64 || (wtype != GGML_TYPE_Q4_K && wtype != GGML_TYPE_Q6_K))))
        return 0;
    /* 4 pieces in flight per lane (U x NR) at 64 registers (32 warps per SM); if that
     * spills, at 80 registers (24 warps; Q5_K, with its extra high bits: 102, 20 warps),
     * then (Q6_K's AL rounds, Q8_0's 32-byte pieces, Q4_K's of 32 bytes) at 102
     * registers, 20 warps: Q8_0's converting products spill 16 bytes at 80, and take 20 warps
     * without (7B +1.5%).
     * Blocks of 4 warps; xc: one block per SM, which converts the activation itself; AL:
     * a round's activation loads go out together (7B Q4_K_M +2-5%; Q8_0 / Q4_0 lost 1-1.5%,
     * Q5_K would spill, the float types are not measured; BENCHMARKS.md); kp 64: half the
     * pieces in flight, each twice the bytes (the same as many with pieces of 32 bytes lost
     * 7% on 1.5B Q4_K_M, BENCHMARKS.md) */
    int q5 = wtype == GGML_TYPE_Q5_K;
    int nv = 2 + ((wtype == GGML_TYPE_Q6_K || wtype == GGML_TYPE_Q8_0 || wtype == GGML_TYPE_Q4_K) &&
                  cap > 2);
    int al = wtype == GGML_TYPE_Q4_K || wtype == GGML_TYPE_Q6_K;
    for (int v = 0; v < nv; v++)
        out[v] = (struct gpu_variant){.tmpl = "mvd.cu",
                                      .defs = {{"QT", (long)wtype},
                                               {"NW", !xc ? 4 : !v ? 32 : q5 || v == 2 ? 20 : 24},
                                               {"NR", nr},
                                               {"U", kp == 64 && nr < 4 ? 2 / nr : 4 / nr},
                                               {"KS", ks},
                                               {"GLU", glu},
                                               {"MB", xc ? 1 : !v ? 8 : q5 || v == 2 ? 5 : 6},
                                               {"XC", xc != 0},
                                               {"AL", al},
                                               {rp == 1   ? "RP"
                                                : rp == 2 ? "CV"
                                                          : NULL,
                                                rp == 2 ? MVD_CV_TAPS : 1},
                                               {kp == 64 ? "KP" : NULL, 64}}};
    return counted(out, nv);
}

int gpu_mvd_mix_variants(unsigned wtype, unsigned qt2, int ks, int rp, struct gpu_variant *out,
                         int cap)
{
    if (wtype != GGML_TYPE_Q4_K || qt2 != GGML_TYPE_Q6_K)
        return 0;
    /* qt2's candidates (its register budgets: Q6_K needs more), rendered for both types */
    int n = gpu_mvd_variants(qt2, 0, 2, ks, 0, rp, 64, out, cap);
    for (int v = 0; v < n; v++) {
        out[v].defs[0].value = (long)wtype;
        if (out[v].n_defs >= GV_MAX_DEFS)
            return 0;
        out[v].defs[out[v].n_defs++] = (struct jit_def){"QT2", (long)qt2};
    }
    return n;
}

int gpu_mmt_variants(unsigned wtype, int glu, int dq, int wg, struct gpu_variant *out, int cap)
{
    int known = 0;
    for (int i = 0; i < gpu_n_matvec_types; i++)
        known |= gpu_matvec_types[i] == wtype;
    if (!known || wtype == GGML_TYPE_F32 || cap < 8) /* F32 products stay in F32 */
        return 0;
    /* quantized: blocks of 4 warps, 4 or 3 per SM where the registers allow it without
     * spilling, else as many registers as the compiler likes (gate+up of the K formats: about
     * 250, 2 blocks per SM); F16 / BF16: blocks of 8 warps, 2 per SM with 4 stages of tiles
     * in flight (80 KiB of shared memory: where the device allows it), else 2 stages */
    if (wtype != GGML_TYPE_F16 && wtype != GGML_TYPE_BF16) {
        int n = 0;
        /* dq: first dequantized into F16 tiles as the F16 path's (4 stages of activations and
         * 2 of weights, 108 KiB of shared memory, where the device allows it; else 2 + 2);
         * the others are what the caller gets where these do not compile or spill */
        const int kq = wtype == GGML_TYPE_Q4_K || wtype == GGML_TYPE_Q5_K;
        if (dq && wg == 3 && (dq == 1 || kq)) /* (on Hopper's warpgroup products, the F16
                                                * path's WG 2 tiles; KX: exact) */
            out[n++] = (struct gpu_variant){.tmpl = "mmt.cu",
                                            .defs = {{"QT", (long)wtype}, {"GLU", glu},
                                                     {"MB", 1}, {"DQ", 1}, {"NS", 4},
                                                     {"WG", 2}, {dq == 2 ? "KX" : NULL, 1}}};
        for (int v = 0; dq == 1 && v < 2; v++)
            out[n++] = (struct gpu_variant){.tmpl = "mmt.cu",
                                            .defs = {{"QT", (long)wtype}, {"GLU", glu},
                                                     {"MB", 2}, {"DQ", 1}, {"NS", v ? 2 : 4}}};
        /* Q4_K / Q5_K first on the F16 tensor cores (scale per sub-block folded into the
         * weights: exact; BRASA_GPU_MMT_KF=0 skips it) */
        if (wtype == GGML_TYPE_Q4_K || wtype == GGML_TYPE_Q5_K)
            out[n++] = (struct gpu_variant){.tmpl = "mmt.cu",
                                            .defs = {{"QT", (long)wtype}, {"GLU", glu},
                                                     {"MB", 2}, {"KF", 1}}};
        for (int v = 0; v < 2; v++)
            out[n++] = (struct gpu_variant){.tmpl = "mmt.cu",
                                            .defs = {{"QT", (long)wtype}, {"GLU", glu},
                                                     {"QMB", 4 - v}}};
        out[n++] = (struct gpu_variant){.tmpl = "mmt.cu",
                                        .defs = {{"QT", (long)wtype}, {"GLU", glu}}};
        return counted(out, n);
    }
    /* wg: first on Hopper's warpgroup products (WG, sm_90): 1, unswizzled tiles, 6 stages of
     * 16 KiB; 2, tiles in the 128-byte swizzle, 4 stages of 32 KiB */
    int n = 0;
    if (wg >= 1 && wg <= 3)
        out[n++] = (struct gpu_variant){.tmpl = "mmt.cu",
                                        .defs = {{"QT", (long)wtype}, {"GLU", glu},
                                                 {"MB", wg == 1 ? 2 : 1}, {"NS", wg == 1 ? 6 : 4},
                                                 {"WG", wg == 1 ? 1 : 2}}};
    static const int ns[3] = {4, 2, 2}, mb[3] = {2, 2, 1}; /* stages (20 KiB each) */
    for (int v = 0; v < 3; v++)
        out[n++] = (struct gpu_variant){.tmpl = "mmt.cu",
                                        .defs = {{"QT", (long)wtype}, {"GLU", glu},
                                                 {"MB", mb[v]}, {"NS", ns[v]}}};
    return counted(out, n);
}

int gpu_all_variants(struct gpu_variant *out, int cap)
{
    int n = 0;
    if (cap < 2)
        return 0;
    out[n++] = (struct gpu_variant){.tmpl = "ops.cu"};
    out[n++] = (struct gpu_variant){.tmpl = "quantize.cu"};
    for (int m = 0; m <= 4 && n < cap; m++) /* quant_act for one mode */
        out[n++] = (struct gpu_variant){.tmpl = "quantize.cu", .defs = {{"QMODE", m}}};
    if (n < cap)
        out[n++] = (struct gpu_variant){.tmpl = "attn.cu"};
    for (int hd = 64; hd <= 256; hd *= 2) /* attention for a head size and cache type, with */
        for (int f16 = 0; f16 < 2; f16++)  /* the gate after it or without */
            for (int ag = 0; ag < 2 && n < cap; ag++)
                out[n++] = (struct gpu_variant){.tmpl = "attn.cu",
                                                .defs = {{"AHD", hd}, {"AF16", f16}, {"AG", ag}}};
    for (int ag = 0; ag < 2 && n < cap; ag++) /* (heads of 256 in the F16 output pass, the
                                               * default) */
        out[n++] = (struct gpu_variant){.tmpl = "attn.cu",
                                        .defs = {{"AHD", 256}, {"AF16", 1}, {"AG", ag},
                                                 {"AO256", 1}}};
    for (int i = 0; i < gpu_n_matvec_types; i++)
        for (int nc = 1; nc <= 8; nc += 7)
            for (int glu = 0; glu < 2; glu++)
                n += gpu_matvec_variants(gpu_matvec_types[i], nc, glu, out + n, cap - n);
    /* the decode kernel: 2 rows per group with 1, 2 or 4 warps per group (what brasa picks),
     * converting the activation itself (XC, where brasa uses it) or not, with the RoPE and
     * cache writes (RP: 2 rows, not gate+up), the convolution (CV, likewise) or neither, and 1
     * or 4 rows with 1 warp
     * (BRASA_GPU_MVD_NR) */
    for (int i = 0; i < gpu_n_matvec_types; i++) {
        /* Q4_K and Q6_K also in pieces of 32 bytes (KP 64, their default for rows of 2) */
        const unsigned t = gpu_matvec_types[i];
        const int kmax = t == GGML_TYPE_Q4_K || t == GGML_TYPE_Q6_K ? 64 : 32;
        for (int glu = 0; glu < 2; glu++)
            for (int nr = 1; nr <= 4; nr *= 2)
                for (int ks = 1; ks <= (nr == 2 ? 4 : 1); ks *= 2)
                    for (int xc = 0; xc <= (nr == 2 && gpu_mvd_xc(t)); xc++)
                        for (int rp = 0; rp <= (nr == 2 && !glu ? 2 : 0); rp++)
                            for (int kp = 32; kp <= (nr == 2 ? kmax : 32); kp += 32)
                                n += gpu_mvd_variants(t, glu, nr, ks, xc, rp, kp, out + n,
                                                      cap - n);
    }
    for (int ks = 1; ks <= 4; ks *= 2) /* q/k and a v of another type (Q4_K_M files) */
        for (int rp = 0; rp < 3; rp++)
            n += gpu_mvd_mix_variants(GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, ks, rp, out + n, cap - n);
    for (int i = 0; i < gpu_n_matvec_types; i++)
        for (int glu = 0; glu < 2; glu++) {
            n += gpu_mmt_variants(gpu_matvec_types[i], glu, 1, 1, out + n, cap - n);
            struct gpu_variant w2[8]; /* and the swizzled WG variant (quantized: with DQ), the
                                       * first of wg 3's list */
            if (n < cap && gpu_mmt_variants(gpu_matvec_types[i], glu, 1, 3, w2, 8) > 0)
                out[n++] = w2[0];
            if (n < cap && (gpu_matvec_types[i] == GGML_TYPE_Q4_K ||
                            gpu_matvec_types[i] == GGML_TYPE_Q5_K) &&
                gpu_mmt_variants(gpu_matvec_types[i], glu, 2, 3, w2, 8) > 0)
                out[n++] = w2[0]; /* (the exact one, KX) */
        }
    /* the Q4_K and Q6_K decode products on the tensor cores: 1 or 2 row groups a warp (Q4_K;
     * 2 with gate+up), 1-16 warps a block, the RMSNorm folded in or not, the next weights
     * asked for ahead or not (Q4_K) */
    static const int mf_types[2] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K};
    for (int ti = 0; ti < 2; ti++)
        for (int rg = 1, qt = mf_types[ti]; rg <= (qt == GGML_TYPE_Q4_K ? 2 : 1); rg++)
            for (int ks = 1; ks <= 16; ks *= 2)
                for (int glu = 0; glu <= (rg == 2); glu++)
                    for (int norm = 0; norm < 2; norm++)
                        for (int la = qt == GGML_TYPE_Q6_K; la < 2 && n < cap; la++)
                            out[n++] = (struct gpu_variant){
                                .tmpl = "mvf.cu",
                                .defs = {{"QT", qt}, {"RG", rg}, {"KS", ks}, {"GLU", glu},
                                         {"NORM", norm}, {"LA", la}}};
    for (int hd = 64; hd <= 256 && n < cap; hd *= 2) /* prompt attention */
        out[n++] = (struct gpu_variant){.tmpl = "fa.cu", .defs = {{"HD", hd}}};
    return counted(out, n);
}

int gpu_variant_cuda_only(const struct gpu_variant *v) { return !strcmp(v->tmpl, "mvf.cu"); }
