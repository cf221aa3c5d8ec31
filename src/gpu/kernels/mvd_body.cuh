// mvd_body.cuh: the decode product's code for one weight type, QTX (mvd.cu includes it once
// for its type QT, and once more, in a namespace of its own, for QT2: a launch whose third
// weight has another type). The launch's other parameters are mvd.cu's; what follows from the
// type is defined here anew each time.
#undef K64
#undef Q664
#undef P2
#undef ALX
#undef PE
#undef BE
#undef PPB
#undef QUANT
#undef NOUT
#undef GL
#undef BSTEP
#if defined(AL) && AL && QTX != T_Q5_K // (Q5_K: it would spill)
#define ALX 1
#else
#define ALX 0
#endif
// KP 64 (the host's choice for rows of 2): Q4_K pieces of 32 bytes, a pair of sub-blocks with
// one pair of scales, as Q8_0's whole-block pieces
#define K64 (QTX == T_Q4_K && KP == 64)
// KP 64 for Q6_K: pieces of 32 bytes of ql, the two quarters that share qh bytes, with their 32
// qh bytes, four scales and one d
#define Q664 (QTX == T_Q6_K && KP == 64)
#define P2 (QTX == T_Q8_0 || K64 || Q664) // pieces of 32 bytes: two 16-byte loads
#if K64 || Q664
#define PE 64
#define BE 256
#elif QTX == T_Q4_K || QTX == T_Q5_K || QTX == T_Q6_K
#define PE 32 // elements per piece
#define BE 256 // elements per block
#elif QTX == T_Q4_0 || QTX == T_Q8_0
#define PE 32
#define BE 32
#elif QTX == T_F16 || QTX == T_BF16
#define PE 8
#define BE 1
#else
#define PE 4
#define BE 1
#endif
#define PPB (BE >= PE ? BE / PE : 1) // pieces per block
#define QUANT (BE > 1)

#if GLU
#define NOUT (NR / 2) // output rows per lane group
#else
#define NOUT NR
#endif
#define GL (32 * KS) // lanes per group

struct piece {
    uint4 q;  // 16 bytes of quantized (or raw) values
#if P2
    uint4 q2; // the piece's other 16
#endif
#if QTX == T_Q4_K || QTX == T_Q5_K || QTX == T_Q6_K
    uint4 a;  // Q4_K/Q5_K: d, dmin, scales; Q6_K: the matching qh bytes
#endif
#if QTX == T_Q5_K
    uint4 b;  // the matching qh bytes
#endif
#if Q664
    uint4 a2; // the qh bytes of the piece's second 16
    u32 s0, s1; // scales of the low quarter (bytes 0, 1: its two 16s) and the high one
#elif QTX == T_Q6_K
    int s0, s1;
#endif
#if QTX == T_Q4_0 || QTX == T_Q8_0 || QTX == T_Q6_K
    u16 d;
#endif
};

// Lane sl of a group reads pieces t = sl + GL i (i = 0, 1, ...) of each row. GL is a multiple
// of 32 and a block has at most 8 pieces, so the piece's place in its block (t % PPB) is the
// same for all of a lane's pieces: the addresses of its piece i are those of its first piece
// plus i times a constant, and the scale fields it needs sit at the same place in every block.

// A lane's pointers into one weight row: its first piece's values (q) and scale fields
struct rowp {
    const u8 *q;
#if QTX == T_Q4_K || QTX == T_Q5_K || QTX == T_Q6_K
    const u8 *h;  // Q4_K/Q5_K: d, dmin, scales; Q6_K: the piece's qh bytes
#endif
#if QTX == T_Q5_K
    const u8 *b;  // the piece's qh bytes
#endif
#if QTX == T_Q6_K
    const i8 *s;  // its first scale (the second is 4 bytes on)
#endif
#if QTX == T_Q4_0 || QTX == T_Q8_0 || QTX == T_Q6_K
    const u8 *d;
#endif
};
#define BSTEP (GL / PPB) // blocks between a lane's consecutive pieces (quantized types)

__device__ __forceinline__ rowp row_of(const u8 *W, i64 N, int r, int k, int sl)
{
    rowp p;
#if !QUANT
    p.q = W + 16 * ((i64)r * (k / PE) + sl);
    (void)N;
#else
    const int m = sl % PPB;
    qblk b = qblock(QTX, W, N, (i64)r * (k / BE) + sl / PPB);
    p.q = b.q + (P2 ? 32 : 16) * m;
#if QTX == T_Q4_K
    p.h = b.h;
#elif QTX == T_Q5_K
    p.h = b.h;
    p.b = b.h + 16 + 16 * (m & 1);
#elif Q664
    p.h = b.h + 32 * (m >> 1);
    p.s = (const i8 *)b.s + 8 * (m >> 1) + 2 * (m & 1);
#elif QTX == T_Q6_K
    p.h = b.h + 32 * (m >> 2) + 16 * (m & 1);
    p.s = (const i8 *)b.s + 8 * (m >> 2) + (m & 3);
#endif
#if QTX == T_Q4_0 || QTX == T_Q8_0 || QTX == T_Q6_K
    p.d = b.d;
#endif
#endif
    return p;
}

// The lane's pointers moved on by i of its pieces (IP: the loop steps its pointers once a round
// instead of addressing each round's pieces from the first piece's pointers)
__device__ __forceinline__ void rowp_step(rowp &w, int i)
{
    w.q += (P2 ? 32 : 16) * GL * i;
#if QTX == T_Q4_K
    w.h += 16 * BSTEP * i;
#elif QTX == T_Q5_K
    w.h += 48 * BSTEP * i;
    w.b += 48 * BSTEP * i;
#elif QTX == T_Q6_K
    w.h += 64 * BSTEP * i;
    w.s += 16 * BSTEP * i;
#endif
#if QTX == T_Q4_0 || QTX == T_Q8_0 || QTX == T_Q6_K
    w.d += 2 * BSTEP * i;
#endif
}

// 16 bytes of weights (EF: with that cache hint)
__device__ __forceinline__ uint4 ldw(const u8 *p) { return ld16_hint<EF>(p); }

// The lane's piece i of a row
__device__ __forceinline__ void ld_piece(const rowp &w, int i, piece &p)
{
#if P2
    p.q = ldw(w.q + 32 * GL * i);
    p.q2 = ldw(w.q + 32 * GL * i + 16);
#else
    p.q = ldw(w.q + 16 * GL * i);
#endif
#if QTX == T_Q4_K
    p.a = ldw(w.h + 16 * BSTEP * i);
#elif QTX == T_Q5_K
    p.a = ldw(w.h + 48 * BSTEP * i);
    p.b = ldw(w.b + 48 * BSTEP * i);
#elif Q664
    p.a = ldw(w.h + 64 * BSTEP * i);
    p.a2 = ldw(w.h + 64 * BSTEP * i + 16);
    p.s0 = ld16((const u8 *)w.s + 16 * BSTEP * i);
    p.s1 = ld16((const u8 *)w.s + 16 * BSTEP * i + 4);
#elif QTX == T_Q6_K
    p.a = ldw(w.h + 64 * BSTEP * i);
    p.s0 = w.s[16 * BSTEP * i];
    p.s1 = w.s[16 * BSTEP * i + 4];
#endif
#if QTX == T_Q4_0 || QTX == T_Q8_0 || QTX == T_Q6_K
    p.d = ld16(w.d + 2 * BSTEP * i);
#endif
}

// c + the dot of 16 weight bytes (signed; dot16u: unsigned) with 16 activation bytes
__device__ __forceinline__ int dot16(u32 w0, u32 w1, u32 w2, u32 w3, int4 a, int c = 0)
{
    int s = dot4_i8((int)w0, a.x, c);
    s = dot4_i8((int)w1, a.y, s);
    s = dot4_i8((int)w2, a.z, s);
    return dot4_i8((int)w3, a.w, s);
}
__device__ __forceinline__ int dot16u(u32 w0, u32 w1, u32 w2, u32 w3, int4 a, int c = 0)
{
    int s = dot4_u8i8(w0, a.x, c);
    s = dot4_u8i8(w1, a.y, s);
    s = dot4_u8i8(w2, a.z, s);
    return dot4_u8i8(w3, a.w, s);
}
// The dot of the high nibbles of 16 weight bytes with 16 activation bytes. NVIDIA: the bytes
// masked in place (16 times each nibble) through the unsigned dot, then / 16 (exact), one
// instruction a word fewer than shifting each word. AMD: shifted (its unsigned dot is two).
__device__ __forceinline__ int dot16hi(uint4 q, int4 a)
{
#if BRASA_HIP
    const u32 mk = 0x0F0F0F0Fu;
    return dot16((q.x >> 4) & mk, (q.y >> 4) & mk, (q.z >> 4) & mk, (q.w >> 4) & mk, a);
#else
    const u32 hk = 0xF0F0F0F0u;
    return dot16u(q.x & hk, q.y & hk, q.z & hk, q.w & hk, a) >> 4;
#endif
}
#if K64
// dot16hi of two pieces, q with a and q2 with b, in one chain
__device__ __forceinline__ int dot32hi(uint4 q, uint4 q2, int4 a, int4 b)
{
#if BRASA_HIP
    return dot16hi(q, a) + dot16hi(q2, b);
#else
    const u32 hk = 0xF0F0F0F0u;
    int s = dot16u(q.x & hk, q.y & hk, q.z & hk, q.w & hk, a);
    return dot16u(q2.x & hk, q2.y & hk, q2.z & hk, q2.w & hk, b, s) >> 4;
#endif
}
#endif
// The sum of 16 activation bytes times c (for the weights' offsets: Q4_0's 8, Q6_K's 32)
__device__ __forceinline__ int sum16(int4 a, int c)
{
    return c * dot16(0x01010101u, 0x01010101u, 0x01010101u, 0x01010101u, a);
}

// With RP, a rotated weight's group takes the rows of pairs: slots s, s + 1 (s even) of a head
// are the rows a pair rotates together, so the two lanes holding them exchange their sums.
// NORM rotation (hh 0): rows s, s + 1; NEOX (hh half a head): rows s / 2 and s / 2 + hh.
__device__ __forceinline__ int rope_row(int s, int hh)
{
    if (!hh)
        return s;
    const int o = s % (2 * hh);
    return s - o + (o >> 1) + (o & 1) * hh;
}

// The activation a piece needs (read once for the NR rows)
struct act {
#if !QUANT
    float4 x0, x1;
#else
    int4 a0, a1;
#if K64 || Q664
    int4 a2, a3; // a0, a1: sub-block 2 pr (the low nibbles); a2, a3: 2 pr + 1 (the high ones)
                 // (Q6_K: the low quarter's two 16s, then the high quarter's)
    int o2, o3;
#endif
    float d;
    int s0, s1, ss; // the sums of the piece's two runs of 16; ss: both, as 16-bit halves
    int o0, o1;     // Q4_0, Q6_K: minus the weights' offset times the runs' sums (o1: Q6_K)
#endif
};

// The lane's activation pointers (its first piece's): values (int8, or floats) and scale
struct actp {
    const u8 *x;
    const float *d;
};
__device__ __forceinline__ actp act_of(const void *xa, const float *xd, int sl)
{
    actp p;
#if !QUANT
    p.x = (const u8 *)xa + 4 * PE * sl;
    p.d = xd;
#else
    const int m = sl % PPB;
#if K64
    int e0 = BE * (sl / PPB) + 64 * m;
#elif QTX == T_Q4_K || QTX == T_Q5_K
    int e0 = BE * (sl / PPB) + 64 * (m >> 1) + 16 * (m & 1);
#elif Q664
    int e0 = BE * (sl / PPB) + 32 * m + 64 * (m >> 1); // 128 (m >> 1) + 32 (m & 1)
#elif QTX == T_Q6_K
    int e0 = BE * (sl / PPB) + 128 * (m >> 2) + 16 * (m & 3);
#else
    int e0 = PE * sl;
#endif
    p.x = (const u8 *)xa + e0;
    p.d = xd + (e0 >> 5);
#endif
    return p;
}

// The activation pointers moved on by i of the lane's pieces (IP)
__device__ __forceinline__ void actp_step(actp &x, int i)
{
#if !QUANT
    x.x += 4 * PE * GL * i;
#else
    x.x += PE * GL * i;
    x.d += PE * GL / 32 * i;
#endif
}

// The activation of the lane's piece i (PE GL i elements on from its first)
__device__ __forceinline__ void ld_act(const actp &x, int i, act &a)
{
#if !QUANT
    const float4 *xf = (const float4 *)(x.x + 4 * PE * GL * i);
    a.x0 = xf[0];
#if QTX != T_F32
    a.x1 = xf[1];
#endif
#else
    const u8 *q = x.x + PE * GL * i;
    a.a0 = *(const int4 *)q;
#if QTX == T_Q4_0 || P2
    a.a1 = *(const int4 *)(q + 16);
#endif
#if QTX == T_Q4_0
    a.o0 = sum16(a.a0, -8) + sum16(a.a1, -8);
#elif K64
    a.a2 = *(const int4 *)(q + 32);
    a.a3 = *(const int4 *)(q + 48);
    a.s0 = sum16(a.a0, 1) + sum16(a.a1, 1);
    a.s1 = sum16(a.a2, 1) + sum16(a.a3, 1);
    a.ss = pack16(a.s0, a.s1);
#elif QTX == T_Q4_K || QTX == T_Q5_K
    a.a1 = *(const int4 *)(q + 32);
    // the runs' sums from the bytes in hand, not quant_act's xs: two dot chains for two loads
    // fewer a piece (tg128 +1-2%, BENCHMARKS.md)
    a.s0 = sum16(a.a0, 1);
    a.s1 = sum16(a.a1, 1);
    a.ss = pack16(a.s0, a.s1);
#elif Q664
    a.a2 = *(const int4 *)(q + 64);
    a.a3 = *(const int4 *)(q + 80);
    a.o0 = sum16(a.a0, -32);
    a.o1 = sum16(a.a1, -32);
    a.o2 = sum16(a.a2, -32);
    a.o3 = sum16(a.a3, -32);
#elif QTX == T_Q6_K
    a.a1 = *(const int4 *)(q + 64);
    a.o0 = sum16(a.a0, -32);
    a.o1 = sum16(a.a1, -32);
#endif
    a.d = x.d[PE * GL / 32 * i];
#endif
}

// The dot of a piece (m: its place in its block) with its activation
__device__ __forceinline__ float dot_piece(const piece &p, int m, const act &a)
{
#if !QUANT
#if QTX == T_F32
    return __uint_as_float(p.q.x) * a.x0.x + __uint_as_float(p.q.y) * a.x0.y +
           __uint_as_float(p.q.z) * a.x0.z + __uint_as_float(p.q.w) * a.x0.w;
#else
    float f[8];
    half8(QTX, p.q, f);
    return f[0] * a.x0.x + f[1] * a.x0.y + f[2] * a.x0.z + f[3] * a.x0.w + f[4] * a.x1.x +
           f[5] * a.x1.y + f[6] * a.x1.z + f[7] * a.x1.w;
#endif
    (void)m;
#else
#if QTX == T_Q8_0
    int s = dot16(p.q.x, p.q.y, p.q.z, p.q.w, a.a0);
    s = dot16(p.q2.x, p.q2.y, p.q2.z, p.q2.w, a.a1, s);
    return a.d * h2f(p.d) * (float)s;
#elif QTX == T_Q4_0
    // sum (q - 8) a = sum q a - 8 sum a, the second term the activation's (a.o0), so the
    // nibbles go to the dot as they are
    const u32 mk = 0x0F0F0F0Fu;
    int s = dot16(p.q.x & mk, p.q.y & mk, p.q.z & mk, p.q.w & mk, a.a0, a.o0);
    s += dot16hi(p.q, a.a1);
    return a.d * h2f(p.d) * (float)s;
#elif QTX == T_Q4_K || QTX == T_Q5_K
    int pr = K64 ? m : m >> 1;
    const u32 mk = 0x0F0F0F0Fu;
    u32 l0 = p.q.x & mk, l1 = p.q.y & mk, l2 = p.q.z & mk, l3 = p.q.w & mk;
#if K64
    // the pair's 32 bytes: low nibbles sub-block 2 pr (a0, a1), high ones 2 pr + 1 (a2, a3)
    int d0 = dot16(p.q2.x & mk, p.q2.y & mk, p.q2.z & mk, p.q2.w & mk, a.a1,
                   dot16(l0, l1, l2, l3, a.a0));
    int d1 = dot32hi(p.q, p.q2, a.a2, a.a3);
#elif QTX == T_Q4_K
    int d0 = dot16(l0, l1, l2, l3, a.a0), d1 = dot16hi(p.q, a.a1);
#else
    u32 h0 = (p.q.x >> 4) & mk, h1 = (p.q.y >> 4) & mk, h2 = (p.q.z >> 4) & mk,
        h3 = (p.q.w >> 4) & mk;
    const u32 b1 = 0x01010101u;
    int j0 = 2 * pr, j1 = j0 + 1;
    l0 |= ((p.b.x >> j0) & b1) << 4;
    l1 |= ((p.b.y >> j0) & b1) << 4;
    l2 |= ((p.b.z >> j0) & b1) << 4;
    l3 |= ((p.b.w >> j0) & b1) << 4;
    h0 |= ((p.b.x >> j1) & b1) << 4;
    h1 |= ((p.b.y >> j1) & b1) << 4;
    h2 |= ((p.b.z >> j1) & b1) << 4;
    h3 |= ((p.b.w >> j1) & b1) << 4;
    int d0 = dot16(l0, l1, l2, l3, a.a0), d1 = dot16(h0, h1, h2, h3, a.a1);
#endif
    // the scales and mins of sub-blocks 2 pr and 2 pr + 1, as byte pairs (ggml's
    // get_scale_min_k4 for two neighbours at once, with the lane's shifts and masks)
    const bool hi = pr >= 2;
    const int sh = 16 * (pr & 1);
    const u32 ma = hi ? 0x0F0Fu : 0x3F3Fu, mb = hi ? 0x3030u : 0u;
    const u32 y = p.a.y, z = p.a.z, w = p.a.w;
    u32 scp = (((hi ? w : y) >> sh) & ma) | ((y >> (sh + 2)) & mb);
    u32 mnp = (((hi ? w : z) >> (sh + (hi ? 4 : 0))) & ma) | ((z >> (sh + 2)) & mb);
#if K64
    // |d0|, |d1| <= 32 x 15 x 128 need 17 bits; the sums of 32 fit 16
    int isc = (int)(scp & 0xff) * d0 + (int)(scp >> 8) * d1;
    int imn = dot2_i16_i8(a.ss, (int)mnp, 0);
#elif QTX == T_Q4_K
    // |d0|, |d1| <= 16 x 15 x 128: both fit 16 bits, so one dot2 each
    int isc = dot2_i16_i8(pack16(d0, d1), (int)scp, 0);
    int imn = dot2_i16_i8(a.ss, (int)mnp, 0);
#else
    int isc = (int)(scp & 0xff) * d0 + (int)(scp >> 8) * d1;
    int imn = (int)(mnp & 0xff) * a.s0 + (int)(mnp >> 8) * a.s1;
#endif
    return a.d * (h2f((u16)(p.a.x & 0xffff)) * (float)isc -
                  h2f((u16)(p.a.x >> 16)) * (float)imn);
#elif Q664
    // as below, for the two quarters (m & 1, + 2) of half m >> 1, each in two 16s
    const u32 mk = 0x0F0F0F0Fu, m2 = 0x03030303u;
    const int sh = 2 * (m & 1);
#define Q6LO(q, h) (((q) & mk) | ((((h) >> sh) & m2) << 4))
#define Q6HI(q, h) ((((q) >> 4) & mk) | ((((h) >> (sh + 4)) & m2) << 4))
    int dA = dot16(Q6LO(p.q.x, p.a.x), Q6LO(p.q.y, p.a.y), Q6LO(p.q.z, p.a.z), Q6LO(p.q.w, p.a.w),
                   a.a0, a.o0);
    int dB = dot16(Q6LO(p.q2.x, p.a2.x), Q6LO(p.q2.y, p.a2.y), Q6LO(p.q2.z, p.a2.z),
                   Q6LO(p.q2.w, p.a2.w), a.a1, a.o1);
    int dC = dot16(Q6HI(p.q.x, p.a.x), Q6HI(p.q.y, p.a.y), Q6HI(p.q.z, p.a.z), Q6HI(p.q.w, p.a.w),
                   a.a2, a.o2);
    int dD = dot16(Q6HI(p.q2.x, p.a2.x), Q6HI(p.q2.y, p.a2.y), Q6HI(p.q2.z, p.a2.z),
                   Q6HI(p.q2.w, p.a2.w), a.a3, a.o3);
#undef Q6LO
#undef Q6HI
    // the scales are signed bytes: s0 = the low quarter's two, s1 = the high quarter's
    int s = (int)(i8)(p.s0 & 0xff) * dA + (int)(i8)(p.s0 >> 8) * dB +
            (int)(i8)(p.s1 & 0xff) * dC + (int)(i8)(p.s1 >> 8) * dD;
    return a.d * h2f(p.d) * (float)s;
#else // Q6_K
    // sum (q - 32) a = sum q a - 32 sum a, the second term the activation's (a.o0, a.o1,
    // once for the group's rows), so the 6-bit values go to the dot as they are
    int mm = m & 3;
    const u32 mk = 0x0F0F0F0Fu, m2 = 0x03030303u;
    int sh = 2 * (mm >> 1);
    u32 l0 = (p.q.x & mk) | (((p.a.x >> sh) & m2) << 4);
    u32 l1 = (p.q.y & mk) | (((p.a.y >> sh) & m2) << 4);
    u32 l2 = (p.q.z & mk) | (((p.a.z >> sh) & m2) << 4);
    u32 l3 = (p.q.w & mk) | (((p.a.w >> sh) & m2) << 4);
    u32 h0 = ((p.q.x >> 4) & mk) | (((p.a.x >> (sh + 4)) & m2) << 4);
    u32 h1 = ((p.q.y >> 4) & mk) | (((p.a.y >> (sh + 4)) & m2) << 4);
    u32 h2 = ((p.q.z >> 4) & mk) | (((p.a.z >> (sh + 4)) & m2) << 4);
    u32 h3 = ((p.q.w >> 4) & mk) | (((p.a.w >> (sh + 4)) & m2) << 4);
    int s = p.s0 * dot16(l0, l1, l2, l3, a.a0, a.o0) + p.s1 * dot16(h0, h1, h2, h3, a.a1, a.o1);
    return a.d * h2f(p.d) * (float)s;
#endif
#endif
}

#if XC
// The activation, converted as quant_act's mode for QTX into shared memory: int8 values [k] and
// scales [k / 32]; or the floats [k] (F16 / BF16: rounded to that type). The host sizes the
// launch's shared memory to match.
__device__ __forceinline__ void xconv(const float *x, const float *nw, float eps, int k, u8 *sm)
{
    __shared__ double sh[32];
    const int nt = NW * 32, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float scale = 1.0f;
    if (nw) { // the row's RMS (2 loads a thread in flight: 64 registers hold no more here)
        const double s = block_sum_d(sumsq4<2>((const float4 *)x, k / 4, nt), sh);
        scale = 1.0f / sqrtf((float)(s / k) + eps);
    }
#if QUANT
    i8 *xq = (i8 *)sm;
    float *xd = (float *)(sm + k);
    // 256 values a warp at a time, 8 a lane (Q8_0: 4 lanes a block of 32)
    for (int b = warp; b < (k + 255) / 256; b += NW) {
        const int e = b * 256 + lane * 8;
        float v[8];
        int q[8];
        if (e < k) { // (Q8_0 / Q4_0: k is a multiple of 32 only)
            const float4 *p = (const float4 *)(x + e);
            float4 a = p[0], c = p[1];
            v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
            v[4] = c.x, v[5] = c.y, v[6] = c.z, v[7] = c.w;
            if (nw) {
                const float4 *w = (const float4 *)(nw + e);
                float4 wa = w[0], wc = w[1];
                v[0] = (v[0] * scale) * wa.x, v[1] = (v[1] * scale) * wa.y;
                v[2] = (v[2] * scale) * wa.z, v[3] = (v[3] * scale) * wa.w;
                v[4] = (v[4] * scale) * wc.x, v[5] = (v[5] * scale) * wc.y;
                v[6] = (v[6] * scale) * wc.z, v[7] = (v[7] * scale) * wc.w;
            }
        } else {
#pragma unroll
            for (int j = 0; j < 8; j++)
                v[j] = 0.0f;
        }
#if BE == 256
        const float d = q8k_warp(v, lane, q);
        if (lane < 8)
            xd[b * 8 + lane] = d;
#else
        float am = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++)
            am = fmaxf(am, fabsf(v[j]));
        am = fmaxf(am, shfl_xor(am, 1));
        am = fmaxf(am, shfl_xor(am, 2));
        const float d = am / 127.0f, id = am != 0.0f ? 127.0f / am : 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++)
            q[j] = __float2int_rn(v[j] * id);
        if (e < k && (lane & 3) == 0)
            xd[e / 32] = round_h(d);
#endif
        if (e < k) {
            u32 w0 = 0, w1 = 0;
#pragma unroll
            for (int j = 0; j < 4; j++) {
                w0 |= (u32)(q[j] & 0xff) << (8 * j);
                w1 |= (u32)(q[j + 4] & 0xff) << (8 * j);
            }
            *(uint2 *)(xq + e) = make_uint2(w0, w1);
        }
    }
#else
    float4 *xf = (float4 *)sm;
    for (int i = threadIdx.x; i < k / 4; i += nt) {
        float4 v = ((const float4 *)x)[i];
        if (nw) {
            float4 w = ((const float4 *)nw)[i];
            v.x = (v.x * scale) * w.x, v.y = (v.y * scale) * w.y;
            v.z = (v.z * scale) * w.z, v.w = (v.w * scale) * w.w;
        }
#if QTX == T_F16
        v.x = round_h(v.x), v.y = round_h(v.y), v.z = round_h(v.z), v.w = round_h(v.w);
#elif QTX == T_BF16
        v.x = bf2f(f2bf(v.x)), v.y = bf2f(f2bf(v.y)), v.z = bf2f(f2bf(v.z)),
        v.w = bf2f(f2bf(v.w));
#endif
        xf[i] = v;
    }
    (void)lane, (void)warp;
#endif
}
#endif

// acc[j] += the dot of weight row j of the group with the activation over this lane's pieces.
// Row j is row min(row + j % NOUT, last) of Wa, or with GLU of Wb for j >= NOUT. m: the lane's
// piece place in its blocks. first: the launch's first group in this block, which waits for
// the previous kernel once its first weights are on their way (with XC: and then converts the
// activation; every thread of the block comes here, active or not: n = 0 for inactive ones).
__device__ __forceinline__ void rows_dot(const u8 *Wa, const u8 *Wb, i64 N, int row, int last,
                                         int k, int sl, const void *xa, const float *xd,
                                         float *acc, bool active, bool first,
                                         const float *xin, const float *nw, float eps, int hh)
{
    const int P = k / PE, n = active ? (P - sl + GL - 1) / GL : 0; // this lane's pieces
    const int m = sl % PPB;
    rowp w[NR];
#pragma unroll
    for (int j = 0; j < NR; j++)
        w[j] = row_of(GLU && j >= NOUT ? Wb : Wa, N,
                      max(0, min(rope_row(row + j % NOUT, hh), last)), k, sl);
    actp x = act_of(xa, xd, sl);
    // IP: piece u of the round is piece u from the pointers, which step U pieces a round;
    // else piece i0 + u from the first piece's pointers
#define PI(u) (IP ? (u) : i0 + (u))
#pragma unroll 1
    for (int i0 = 0; i0 < (XC && first ? max(n, 1) : n); i0 += U) {
        piece p[U][NR];
#if ALX
        // the round's last pieces past the row's end load its last piece again (an L1 hit),
        // so the round has no branch and every step's loads go out together (a round's first
        // piece is always in the row)
        if (n > 0)
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int j = 0; j < NR; j++)
                    ld_piece(w[j], u == 0 ? PI(0) : min(PI(u), PI(n - 1 - i0)), p[u][j]);
#else
#pragma unroll
        for (int u = 0; u < U; u++)
            if (i0 + u < n) {
#pragma unroll
                for (int j = 0; j < NR; j++)
                    ld_piece(w[j], PI(u), p[u][j]);
            }
#endif
        if (i0 == 0 && first) { // the first weights are on their way: now wait for the input
            pdl_wait();
            if (!RP || RL == 0)
                pdl_launch();
#if XC
            xconv(xin, nw, eps, k, (u8 *)xa);
            __syncthreads();
#endif
        }
#if ALX
        if (n > 0) {
            act a[U];
#pragma unroll
            for (int u = 0; u < U; u++)
                ld_act(x, u == 0 ? PI(0) : min(PI(u), PI(n - 1 - i0)), a[u]);
            // (a product, then a sum, where without AL the compiler fuses them into an FMA:
            // other roundings, so every variant of a type, XC or not, takes AL or none)
#pragma unroll
            for (int u = 0; u < U; u++)
#pragma unroll
                for (int j = 0; j < NR; j++) {
                    const float v = dot_piece(p[u][j], m, a[u]);
                    acc[j] += i0 + u < n ? v : 0.0f;
                }
        }
#else
#pragma unroll
        for (int u = 0; u < U; u++)
            if (i0 + u < n) {
                act a;
                ld_act(x, PI(u), a);
#pragma unroll
                for (int j = 0; j < NR; j++)
                    acc[j] += dot_piece(p[u][j], m, a);
            }
#endif
        if (IP) {
#pragma unroll
            for (int j = 0; j < NR; j++)
                rowp_step(w[j], U);
            actp_step(x, U);
        }
    }
#undef PI
#if !XC
    (void)xin, (void)nw, (void)eps;
#endif
}

// The NW / KS lane groups of block gb (its output rows), or with XC those of the block's pass
// gb: groups blockIdx.x + gridDim.x (i + NW / KS gb) for its lane groups i, so that even a
// launch with fewer groups than the grid's warps spreads over every SM; first: as rows_dot's.
__device__ __forceinline__ void mv_block(int gb, bool first, const u8 *W0, const u8 *W1,
                                         const u8 *W2, const void *xa, const float *xd,
                                         float *y0, float *y1, float *y2,
                                         const float *b0, const float *b1, const float *b2,
                                         const float *res, float rscale, int r0, int r1, int r2,
                                         int k, const float *xin, const float *nw, float eps,
                                         float (*part)[NR], int early, void *c0, void *c1,
                                         void *c2, const float *cs, int nrope, int rmode, int hd,
                                         const int *pos, int kv_f16)
{
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
#if XC
    int grp = (int)blockIdx.x + (int)gridDim.x * (warp / KS + NW / KS * gb);
#else
    int grp = gb * (NW / KS) + warp / KS;
#endif
    int sl = (warp % KS) * 32 + lane;
    int row = grp * NOUT; // first output row of the group
    float acc[NR];
#pragma unroll
    for (int j = 0; j < NR; j++)
        acc[j] = 0.0f;
#if GLU
    wpick pk = {W0, y0, b0, r0, row < r0}; // gate rows (the up rows: W1, b1)
    (void)W2, (void)y1, (void)y2, (void)b2, (void)r1, (void)r2;
    const int hh = 0;
    (void)c0, (void)c1, (void)c2, (void)cs, (void)nrope, (void)rmode, (void)hd, (void)pos,
        (void)kv_f16;
#else
#if RP
    // the group's weight (0, 1, 2: q, k, v); for a rotated weight the pair's cos and sin (the
    // host's table of every position, hd floats a position), and the position: read before the
    // wait, as they were written before the step began (only these three stay live through
    // the products' loop)
    const int wi = row < r0 ? 0 : row < r0 + r1 ? 1 : 2;
#endif
#if CV
    const bool cw0 = row < r0; // (the first weight's rows: pick_weight makes row the weight's own)
#endif
    wpick pk = pick_weight(row, W0, W1, W2, y0, y1, y2, b0, b1, b2, r0, r1, r2);
#if RP
    const int hh = wi < nrope && rmode == 2 ? hd / 2 : 0;
    float rc = 1.0f, rs = 0.0f;
    int cpos = 0;
    if (pk.active && lane < NOUT) {
        cpos = pos[0];
        if (wi < nrope) {
            const float *c = cs + (i64)cpos * hd + ((row % hd + lane) & ~1);
            rc = c[0];
            rs = c[1];
        }
    }
#else
    const int hh = 0;
    (void)c1, (void)c2, (void)nrope, (void)rmode, (void)hd, (void)pos, (void)kv_f16;
#if !CV
    (void)c0, (void)cs;
#endif
#endif
    // the lane's bias and residual, asked for before the wait (the bias is a weight; the
    // residual only where early says that a kernel before the previous one wrote it): DRAM
    // and L2 latencies the epilogue no longer waits on
    float bpre = 0.0f, rpre = 0.0f;
    if (pk.active && lane < NOUT && row + lane < pk.rows) {
        if (pk.bias)
            bpre = pk.bias[rope_row(row + lane, hh)];
        if (res && early)
            rpre = res[row + lane];
    }
#endif
    i64 N = (i64)pk.rows * (QUANT ? k / BE : k);
    if (pk.active || (XC && first))
        rows_dot(pk.W, W1, N, row, pk.rows - 1, k, sl, xa, xd, acc, pk.active, first, xin,
                 nw, eps, hh);
    if (first) {
        pdl_wait(); // (for lanes with no piece; returns at once for the others)
        if (!RP || RL == 0)
            pdl_launch();
    }
#if RP && RL == 1
    pdl_launch();
#endif
#if CV
    // the convolution's taps and state of the lane's channel (the first weight's rows),
    // asked for here, not before the loop (registers): their latency runs beside the sums
    float ctap[CV], cst[CV - 1];
    const bool cvr = cw0 && pk.active && lane < NOUT && row + lane < r0;
    if (cvr) {
#pragma unroll
        for (int j = 0; j < CV; j++)
            ctap[j] = cs[(i64)(row + lane) * CV + j];
#pragma unroll
        for (int j = 0; j < CV - 1; j++)
            cst[j] = ((const float *)c0)[(i64)j * r0 + row + lane];
    }
#endif
#pragma unroll
    for (int j = 0; j < NR; j++)
        acc[j] = wave_sum<32>(acc[j]);
    if (KS > 1) {
        if (lane == 0)
#pragma unroll
            for (int j = 0; j < NR; j++)
                part[warp][j] = acc[j];
        __syncthreads();
        if (warp % KS != 0)
            return;
#pragma unroll
        for (int j = 0; j < NR; j++) {
            float v = 0.0f;
            for (int w = 0; w < KS; w++)
                v += part[warp + w][j];
            acc[j] = v;
        }
    }
#if RP
    {
        // lane j < NOUT holds slot row + j; a rotated pair's lanes exchange their sums (the
        // whole warp takes part in the exchange, before any lane leaves)
        float v = 0.0f;
#pragma unroll
        for (int j = 0; j < NOUT; j++)
            if (lane == j)
                v = acc[j];
        if (pk.bias)
            v += bpre;
        const float o = shfl_xor(v, 1);
        const int w = grp * NOUT < r0 ? 0 : grp * NOUT < r0 + r1 ? 1 : 2; // (wi, recomputed)
        if (w < nrope) // as the CPU's rope and ops.cu's (rot_lo, rot_hi)
            v = (lane & 1) ? rot_hi(o, v, rc, rs) : rot_lo(v, o, rc, rs);
        if (!pk.active || lane >= NOUT || row + lane >= pk.rows)
            return;
        const int r = rope_row(row + lane, w < nrope && rmode == 2 ? hd / 2 : 0);
        if (pk.y)
            pk.y[r] = v;
        void *const cache = w == 0 ? c0 : w == 1 ? c1 : c2;
        if (cache)
            cache_put(cache, (long long)cpos * pk.rows + r, v, kv_f16);
        (void)res, (void)rscale, (void)early;
        return;
    }
#endif
    if (!pk.active || lane >= NOUT || row + lane >= pk.rows)
        return;
    // lane j < NOUT writes output row row + j (acc indexed with a constant: no local memory)
    float v = 0.0f, u = 0.0f;
#pragma unroll
    for (int j = 0; j < NOUT; j++)
        if (lane == j) {
            v = acc[j];
#if GLU
            u = acc[NOUT + j];
#endif
        }
    int r = row + lane;
#if GLU
    if (b0)
        v += b0[r];
    if (b1)
        u += b1[r];
    pk.y[r] = silu_f(v) * u;
    (void)res, (void)rscale, (void)early;
#else
    (void)u;
    if (pk.bias)
        v += bpre;
#if CV
    if (cvr) { // (as ops.cu conv1d: the state's rows oldest first, then the new value)
        float o = 0.0f;
#pragma unroll
        for (int j = 0; j < CV - 1; j++)
            o += cst[j] * ctap[j];
        o += v * ctap[CV - 1];
        pk.y[r] = silu_f(o);
        float *st = (float *)c0;
#pragma unroll
        for (int j = 0; j < CV - 2; j++)
            st[(i64)j * r0 + r] = cst[j + 1];
        st[(i64)(CV - 2) * r0 + r] = v;
        return;
    }
#endif
    pk.y[r] = res ? (early ? rpre : res[r]) + v * rscale : v;
#endif
}

