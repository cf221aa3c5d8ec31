// mvd.cu: the decode matrix-vector product y = W x (one column), built to run at the memory
// bandwidth. The weight is planar (gpu/layout.h): a row's quantized values (the raw values for
// F32/F16/BF16) are consecutive bytes, cut here into 16-byte pieces (Q8_0: 32-byte pieces, a
// whole block, read by two 16-byte loads). A group of 32 x KS lanes (KS warps) takes NR weight
// rows together: lane sl reads pieces sl, sl + 32 KS, ... of each of the NR rows, so every
// load instruction of a warp reads 512 consecutive bytes of one row (Q8_0: two instructions,
// 1024), the activation a piece needs is read once for NR rows, and U x NR pieces are in
// flight per lane before the first is used. Piece t of a row covers 32 elements (Q4_0, Q4_K,
// Q5_K, Q6_K: two runs of 16; Q8_0: a block, one scale for 32 where pieces of 16 took two,
// tg128 +4-6% on 7B Q8_0), 8 (F16, BF16) or 4 (F32). The activation is converted as for
// matvec.cu (quant_act): int8 with a scale per 32 (the K formats' sums of 16, which the min
// term needs, come from the activation bytes a lane already holds).
// Epilogue: y = res + rscale * (acc + bias) where res is set. Up to three weights that read
// the same activation (q, k, v; each a multiple of NR rows) in one launch, or with GLU the
// gate and up rows (NR / 2 of each) with the SwiGLU output.
// With programmatic dependent launch the first weight loads are issued before the wait for the
// previous kernel (pdl_wait), so the weight stream does not stop between launches.
// With XC the launch converts the activation itself, with no quant_act before it: each block
// reads the F32 input (and with normw runs the RMSNorm over it), converts it as quant_act
// would into its shared memory, and then takes its share of the lane groups (see mv_block; a
// grid of as many blocks as the SMs hold: each converts once). The same values as
// quant_act's, so the same products.
// The code that depends on the weight type is mvd_body.cuh's. With QT2, the launch's third
// weight (v) has that type (a Q6_K v with Q4_K q and k, as half the layers of Q4_K_M files
// have): its blocks, after the first two weights' whole blocks of rows, run QT2's code (the
// body included a second time in a namespace of its own), so the layer's q/k/v are one launch.
// Parameters: QT (weight type), NW (warps per block), NR (weight rows per lane group), U
// (pieces in flight per lane and row), KS (warps per lane group), GLU, MB (blocks per SM the
// register budget allows), XC, AL (rounds without branches: each round's loads, weights and
// then activations, go out together), EF (the weights' 16-byte loads: 1 streaming,
// ld.global.cs, evicted first: read once a token, they then leave the activations, the KV
// cache and the kernels' code in L2 (tg128 +0.4-3%, but -1% on 7B Q8_0, BENCHMARKS.md); 2
// L2 evict-first by a cache policy, no L1 allocation; 0 plain loads; 0 and 2 are
// measurements); RP (the launch's first nrope weights, q and k, are rotated in the epilogue,
// and weights with a cache pointer write their rows to that cache's row for the position: the
// RoPE and KV-cache writes of decode, with no launch of their own; rows as rope_row says); RL
// (with RP, when the next kernel, attention, may launch: 0 once the wait returns, as in the
// other products; 1, the default, once the products' loop is done: attention launched during
// a whole q/k/v launch of the 1.5B Q4_K_M shapes took 7.7 us instead of 3.9, likely because
// its L2 prefetches of the cache rows, asked for while the weights stream, were dropped; 2 at
// the end; 0 and 2 are measurements, BENCHMARKS.md); IP (1, the default: the lane's row and
// activation pointers step one round's pieces at the end of each round, so a load's address is
// a pointer plus a constant; 0, a measurement: each round's addresses from the first piece's
// pointers and the round's index, recomputed every round: the Q4_K gate+up loop 191 -> 180
// instructions (SASS, sm_90), 1.5B Q4_K_M tg128 +5% on an H100, BENCHMARKS.md); CV (the
// taps K of a causal depthwise convolution that takes the first weight's rows, as ops.cu
// conv1d with SiLU after it, one token: each row is one channel, so the lane that writes it
// reads the channel's K - 1 state values (c0, rows of r0 floats) and its taps (cs, K a row),
// writes silu(sum) to y0 and moves the state on by the new value; the DeltaNet's convolution
// with no launch of its own).
#include "common.cuh"

#ifndef QT
#define QT T_Q4_K
#endif
#ifndef NW
#define NW 4
#endif
#ifndef NR
#define NR 4
#endif
#ifndef U
#define U 1
#endif
#ifndef KS
#define KS 1
#endif
#ifndef GLU
#define GLU 0
#endif
#ifndef XC
#define XC 0
#endif
#ifndef EF
#define EF 1
#endif
#ifndef RP
#define RP 0
#endif
#ifndef RL
#define RL 1
#endif
#ifndef KP
#define KP 32
#endif
#ifndef IP
#define IP 1
#endif
#ifndef CV
#define CV 0
#endif
#if CV && (RP || GLU || CV < 2)
#error "CV: not with RP or GLU, at least 2 taps"
#endif
#if RP && GLU
#error "RP: not with GLU"
#endif
#if defined(QT2) && (XC || GLU)
#error "QT2: not with XC or GLU"
#endif
#ifndef AL
#define AL 0
#endif
#ifndef MB
#define MB (32 / NW) // blocks per SM the register budget must allow (8 x 4 warps: 64 registers)
#endif
// the code for each weight type: QT2's in a namespace of its own first, then QT's, whose
// definitions (QUANT, ...) stay for the kernel below
#ifdef QT2
namespace qt2 {
#define QTX QT2
#include "mvd_body.cuh"
#undef QTX
} // namespace qt2
#endif
#define QTX QT
#include "mvd_body.cuh"
// Grid: nblk = ceil(rows / NOUT / (NW / KS)) blocks; with XC fewer, each taking
// ceil(nblk / gridDim.x) passes over its lane groups (dynamic shared memory: the converted
// activation).
extern "C" __global__ void __launch_bounds__(NW * 32, MB)
mvd(const u8 *W0, const u8 *W1, const u8 *W2, const void *xa, const float *xd,
    float *y0, float *y1, float *y2, const float *b0, const float *b1, const float *b2,
    const float *res, float rscale, int r0, int r1, int r2, int k, const float *xin,
    const float *normw, float eps, int nblk, int early, void *c0, void *c1, void *c2,
    const float *cs, int nrope, int rmode, int hd, const int *pos, int kv_f16)
{
    __shared__ float part[NW][NR];
#if XC
    extern __shared__ __align__(16) u8 xsm[];
    xa = xsm;
    xd = (const float *)(xsm + (QUANT ? k : 0));
    for (int gb = 0; gb < (nblk + (int)gridDim.x - 1) / (int)gridDim.x; gb++) {
        mv_block(gb, gb == 0, W0, W1, W2, xa, xd, y0, y1, y2, b0, b1, b2, res,
                 rscale, r0, r1, r2, k, xin, normw, eps, part, early, c0, c1, c2, cs, nrope,
                 rmode, hd, pos, kv_f16);
        if (KS > 1)
            __syncthreads(); // (part is read before the next group writes it)
    }
#else
    (void)nblk;
#ifdef QT2
    // the blocks past the first two weights' rows (whole blocks: the host aligns them) take the
    // third weight's in QT2's code
    if ((int)blockIdx.x >= (r0 + r1) / (NOUT * (NW / KS))) {
        qt2::mv_block(blockIdx.x, true, W0, W1, W2, xa, xd, y0, y1, y2, b0, b1, b2, res, rscale,
                      r0, r1, r2, k, xin, normw, eps, part, early, c0, c1, c2, cs, nrope, rmode,
                      hd, pos, kv_f16);
        return;
    }
#endif
    mv_block(blockIdx.x, true, W0, W1, W2, xa, xd, y0, y1, y2, b0, b1, b2, res, rscale, r0,
             r1, r2, k, xin, normw, eps, part, early, c0, c1, c2, cs, nrope, rmode, hd, pos,
             kv_f16);
#endif
}
