// port.cuh: the one place where kernel code differs between NVIDIA (NVRTC) and AMD (hiprtc, and
// hipcc in the compile check). Templates call these helpers instead of vendor intrinsics:
// lane shuffles and reductions over a warp / wavefront, and half <-> float conversion.
// No library headers: NVRTC needs no include path, and hiprtc includes its runtime itself.
#pragma once

#if defined(__HIPCC__) || defined(__HIPCC_RTC__) || defined(__HIP_PLATFORM_AMD__)
#define BRASA_HIP 1
#else
#define BRASA_HIP 0
#endif

// WAVE: lanes that run in lockstep and exchange registers through shuffles. 32 on NVIDIA and
// on AMD RDNA (gfx10/gfx11 compile for wave32 by default), 64 on AMD CDNA (gfx9). The host
// renders it as a "#define WAVE n" line like every template parameter; 32 when it does not.
#ifndef WAVE
#define WAVE 32
#endif
static_assert(WAVE == 32 || WAVE == 64, "WAVE must be 32 or 64");

// Lane i gets v from lane i ^ mask (mask < WAVE): the butterfly step of every reduction.
template <typename T> __device__ __forceinline__ T shfl_xor(T v, int mask)
{
#if BRASA_HIP
    return __shfl_xor(v, mask, WAVE);
#else
    return __shfl_xor_sync(0xffffffffu, v, mask);
#endif
}

// Lane i gets v from lane src (of its own wave).
template <typename T> __device__ __forceinline__ T shfl(T v, int src)
{
#if BRASA_HIP
    return __shfl(v, src, WAVE);
#else
    return __shfl_sync(0xffffffffu, v, src);
#endif
}

// Sum / max over the W lanes of a wave (W a power of two, at most WAVE); every lane gets it.
template <int W = WAVE, typename T> __device__ __forceinline__ T wave_sum(T v)
{
#pragma unroll
    for (int o = W / 2; o > 0; o >>= 1)
        v += shfl_xor(v, o);
    return v;
}
template <int W = WAVE> __device__ __forceinline__ float wave_max(float v)
{
#pragma unroll
    for (int o = W / 2; o > 0; o >>= 1)
        v = fmaxf(v, shfl_xor(v, o));
    return v;
}

__device__ __forceinline__ int lane_id() { return (int)(threadIdx.x % WAVE); }
__device__ __forceinline__ int wave_id() { return (int)(threadIdx.x / WAVE); }

// IEEE half <-> float, round to nearest even. NVIDIA: one cvt instruction each. AMD: clang's
// _Float16, which compiles to v_cvt_f32_f16 / v_cvt_f16_f32.
__device__ __forceinline__ float port_h2f(unsigned short h)
{
#if BRASA_HIP
    return (float)__builtin_bit_cast(_Float16, h);
#else
    float f;
    asm("{.reg .f16 t; mov.b16 t, %1; cvt.f32.f16 %0, t;}" : "=f"(f) : "h"(h));
    return f;
#endif
}
__device__ __forceinline__ unsigned short port_f2h(float f)
{
#if BRASA_HIP
    return __builtin_bit_cast(unsigned short, (_Float16)f);
#else
    unsigned short h;
    asm("{.reg .f16 t; cvt.rn.f16.f32 t, %1; mov.b16 %0, t;}" : "=h"(h) : "f"(f));
    return h;
#endif
}

// c + the dot product of the four signed bytes of a and of b. NVIDIA: dp4a. AMD: the device
// library's sdot4, which picks the target's dot instruction (or plain multiplies).
#if BRASA_HIP
typedef char port_char4 __attribute__((ext_vector_type(4)));
extern "C" __device__ int __ockl_sdot4(port_char4, port_char4, int, bool);
#endif
__device__ __forceinline__ int dot4_i8(int a, int b, int c)
{
#if BRASA_HIP
    return __ockl_sdot4(__builtin_bit_cast(port_char4, a), __builtin_bit_cast(port_char4, b), c,
                        false);
#else
    return __dp4a(a, b, c);
#endif
}

// c + the dot product of the four unsigned bytes of a and the four signed bytes of b.
// NVIDIA: dp4a.u32.s32. AMD: two sdot4, the bytes' low 7 bits and their top bits.
__device__ __forceinline__ int dot4_u8i8(unsigned a, int b, int c)
{
#if BRASA_HIP
    return dot4_i8((int)(a & 0x7f7f7f7fu), b, c) + 128 * dot4_i8((int)((a >> 7) & 0x01010101u), b, 0);
#else
    int d;
    asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
    return d;
#endif
}

// c + the dot product of the two signed 16-bit halves of a and the two low signed bytes of b.
// NVIDIA: dp2a. AMD: plain multiplies.
__device__ __forceinline__ int dot2_i16_i8(int a, int b, int c)
{
#if BRASA_HIP
    return c + (int)(short)(a & 0xffff) * (int)(signed char)(b & 0xff) +
           (a >> 16) * (int)(signed char)((b >> 8) & 0xff);
#else
    return __dp2a_lo(a, b, c);
#endif
}
// The low 16 bits of a and of b as the low and high halves of one word.
__device__ __forceinline__ int pack16(int a, int b)
{
#if BRASA_HIP
    return (int)(((unsigned)a & 0xffffu) | ((unsigned)b << 16));
#else
    return (int)__byte_perm((unsigned)a, (unsigned)b, 0x5410);
#endif
}

// Tensor cores (sm_80 and newer): D += A B over a 16 x 8 x 16 tile, F16 (BF = 0) or BF16
// (BF = 1) inputs, F32 accumulate; a: 4 registers of the A fragment, b0, b1 the B fragment.
// AMD: nothing (the kernels that use it are not chosen there).
template <int BF> __device__ __forceinline__ void mma_16816(float *c, const unsigned *a,
                                                            unsigned b0, unsigned b1)
{
#if !BRASA_HIP
    if (BF)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
    else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, "
                     "{%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    (void)c, (void)a, (void)b0, (void)b1;
#endif
}

// The shared-memory address of a generic pointer into shared memory
__device__ __forceinline__ unsigned smem_addr(const void *p)
{
#if !BRASA_HIP
    unsigned a;
    asm("{.reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t;}" : "=r"(a) : "l"(p));
    return a;
#else
    (void)p;
    return 0;
#endif
}

// Four 8x8 matrices of halves from shared memory (lane l gives the address of row l % 8 of
// matrix l / 8); r[i] is this lane's fragment of matrix i: row l / 4, columns 2 (l % 4) and
// + 1 (TR = 1: transposed). AMD: zeros (the kernels that use it are not chosen there).
template <int TR> __device__ __forceinline__ void ldsm_x4(unsigned *r, const void *p)
{
#if !BRASA_HIP
    if (TR)
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(smem_addr(p)));
    else
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                     : "r"(smem_addr(p)));
#else
    (void)p;
    r[0] = r[1] = r[2] = r[3] = 0;
#endif
}

// 16 bytes of global memory (16-byte aligned) read once: H 1 streaming (ld.global.cs,
// evicted first from L1 and L2), 2 an L2 evict-first cache policy and no L1 allocation, 3 the
// read-only path (ld.global.nc), 0 a plain load. AMD: a plain load.
template <int H> __device__ __forceinline__ uint4 ld16_hint(const void *p)
{
#if !BRASA_HIP
    uint4 v;
    if (H == 1) {
        asm("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];"
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
        return v;
    }
    if (H == 3) {
        asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];"
                     : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
        return v;
    }
    if (H == 2) {
        unsigned long long pol;
        asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
        asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
            : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(pol));
        return v;
    }
#endif
    return *(const uint4 *)p;
}

// 16 bytes from global to shared memory without passing through registers (sm_80 and newer:
// cp.async, completed by cp_async_wait); AMD: an ordinary copy.
__device__ __forceinline__ void cp_async16(void *dst, const void *src)
{
#if !BRASA_HIP
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src)
                 : "memory");
#else
    *(uint4 *)dst = *(const uint4 *)src;
#endif
}
// 4 or 16 bytes the same way on any GPU: cp.async from sm_80 on (completed by cp_async_wait),
// an ordinary copy before it and on AMD (seen after the block's next barrier either way).
template <int B> __device__ __forceinline__ void cp_async_any(void *dst, const void *src)
{
#if !BRASA_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    if (B == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(smem_addr(dst)), "l"(src)
                     : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(smem_addr(dst)), "l"(src)
                     : "memory");
#else
    if (B == 16)
        *(uint4 *)dst = *(const uint4 *)src;
    else
        *(unsigned *)dst = *(const unsigned *)src;
#endif
}
// Closes the group of copies issued since the last call.
__device__ __forceinline__ void cp_async_commit()
{
#if !BRASA_HIP && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800)
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
// Waits until at most N groups of copies are still in flight (this thread's copies).
template <int N> __device__ __forceinline__ void cp_async_wait()
{
#if !BRASA_HIP && (!defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800)
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

// Hopper's warpgroup products (wgmma, sm_90a: the host compiles for it on sm_90 devices).
// BRASA_WGMMA is 1 where they exist; elsewhere these helpers do nothing and the kernels that
// use them are not chosen.
#if !BRASA_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && \
    defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define BRASA_WGMMA 1
#else
#define BRASA_WGMMA 0
#endif

// A shared-memory matrix descriptor without swizzling: the operand's start (shared address),
// the byte distance between core matrices (8 rows of 16 bytes) adjacent along k (lbo) and along
// the rows (sbo)
__device__ __forceinline__ unsigned long long wg_desc(unsigned start, unsigned lbo, unsigned sbo)
{
    return (unsigned long long)((start & 0x3FFFFu) >> 4) |
           ((unsigned long long)((lbo & 0x3FFFFu) >> 4) << 16) |
           ((unsigned long long)((sbo & 0x3FFFFu) >> 4) << 32);
}

// D (64 x 64, F32) += A (64 x 16) B (16 x 64)^T, both read from shared memory by descriptor,
// F16 (BF = 0) or BF16 (BF = 1) values, k contiguous in each (no transposition). Thread t of
// the warpgroup holds rows 16 (t / 32) + (t % 32) / 4 (+ 8 for d[4j + 2], d[4j + 3]) and
// columns 8 j + 2 (t % 4) (+ 1 for d[4j + 1], d[4j + 3]), j < 8.
#define WGMMA_6464(TY)                                                                          \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"                                      \
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " "                     \
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, "  \
                 "%17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, " \
                 "%32, %33, p, 1, 1, 0, 0;\n}"                                                   \
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),     \
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),   \
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),             \
                   "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),             \
                   "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]),             \
                   "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])              \
                 : "l"(da), "l"(db))
template <int BF>
__device__ __forceinline__ void wgmma_6464(float *d, unsigned long long da, unsigned long long db)
{
#if BRASA_WGMMA
    if (BF)
        WGMMA_6464("bf16");
    else
        WGMMA_6464("f16");
#else
    (void)d, (void)da, (void)db;
#endif
}
#undef WGMMA_6464
// Before a warpgroup's first product of a sequence (its accumulators were written by other
// instructions), after its products of a sequence, and waiting until at most N sequences are
// still running; the registers of n accumulators pinned after a wait (the compiler may not move
// their reads before it)
__device__ __forceinline__ void wgmma_fence()
{
#if BRASA_WGMMA
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
__device__ __forceinline__ void wgmma_commit()
{
#if BRASA_WGMMA
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int N> __device__ __forceinline__ void wgmma_wait(float *a, int n)
{
#if BRASA_WGMMA
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#pragma unroll
    for (int i = 0; i < n; i++)
        asm volatile("" : "+f"(a[i])::"memory");
#else
    (void)a, (void)n;
#endif
}
// Ends the kernel with an error (a path the host never chooses on this device)
__device__ __forceinline__ void trap_here()
{
#if BRASA_HIP
    __builtin_trap();
#else
    __trap();
#endif
}
// This thread's writes to shared memory (its completed cp.async copies) made visible to the
// asynchronous proxy through which wgmma reads (then a barrier for the whole block's)
__device__ __forceinline__ void fence_proxy_async()
{
#if BRASA_WGMMA
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// A float written by another block of the running grid (read from L2, not L1)
__device__ __forceinline__ float ld_cg(const float *p)
{
#if !BRASA_HIP
    return __ldcg(p);
#else
    return *(volatile const float *)p;
#endif
}

// Byte-wise a - b (mod 256 in each of the four bytes). NVIDIA: one vsub4. AMD: the SWAR
// identity (borrows kept inside each byte by the top bits).
__device__ __forceinline__ unsigned vsub4(unsigned a, unsigned b)
{
#if BRASA_HIP
    unsigned d = (a | 0x80808080u) - (b & 0x7f7f7f7fu);
    return d ^ ((a ^ ~b) & 0x80808080u);
#else
    return __vsub4(a, b);
#endif
}

// (h - c) a + b on the two F16 halves of each word, each operation rounded to nearest even
// (h - c is exact where h and c are integers of 1024 .. 2047, as the dequantizing tiles make
// them). NVIDIA: sub.f16x2 and fma.rn.f16x2. AMD: clang's _Float16 vectors.
__device__ __forceinline__ unsigned hsub_fma2(unsigned h, unsigned c, unsigned a, unsigned b)
{
#if BRASA_HIP
    typedef _Float16 port_h2 __attribute__((ext_vector_type(2)));
    port_h2 t = __builtin_bit_cast(port_h2, h) - __builtin_bit_cast(port_h2, c);
    port_h2 aa = __builtin_bit_cast(port_h2, a), bb = __builtin_bit_cast(port_h2, b);
    return __builtin_bit_cast(unsigned, t * aa + bb); // (contracted to a fused multiply-add)
#else
    unsigned d;
    asm("{.reg .b32 t; sub.rn.f16x2 t, %1, %2; fma.rn.f16x2 %0, t, %3, %4;}"
        : "=r"(d)
        : "r"(h), "r"(c), "r"(a), "r"(b));
    return d;
#endif
}

// Asks for the 128-byte line at p to be brought into L2 (the point where every SM's writes
// meet, so it never shows a stale value); returns at once. Nothing on AMD.
__device__ __forceinline__ void prefetch_l2(const void *p)
{
#if !BRASA_HIP
    asm volatile("prefetch.global.L2 [%0];" ::"l"(p));
#else
    (void)p;
#endif
}

// Programmatic dependent launch (sm_90): a kernel launched with the attribute may start while
// the previous one drains. pdl_wait() returns once the previous kernel has finished and its
// writes are visible: every kernel calls it before it reads what the previous kernel may
// write or writes anything. Weights, which nothing writes, may be read before it, and so may
// what launches before the previous one wrote (they finished before the previous kernel's own
// wait returned, which is when it let this one start; the host says where that holds, e.g.
// mvd.cu's early). pdl_launch() lets the next kernel start. Both do nothing on older GPUs, on
// AMD, and without the attribute.
#if defined(BRASA_TL) && !BRASA_HIP
// BRASA_GPU_TIMELINE (BRASA_TL: the device address of the host's buffer): thread 0 of block 0
// stamps the global timer (ns) and the launch's grid id each time it returns from pdl_wait();
// b[0] counts the stamps, b[1 + 2 i] and b[2 + 2 i] hold stamp i (at most BRASA_TL_N). The
// atomic costs that one warp an L2 round trip.
#define BRASA_TL_N 65536
__device__ __forceinline__ void tl_stamp()
{
    if (threadIdx.x | threadIdx.y | threadIdx.z | blockIdx.x | blockIdx.y | blockIdx.z)
        return;
    unsigned long long t, id, *b = (unsigned long long *)BRASA_TL;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    asm volatile("mov.u64 %0, %%gridid;" : "=l"(id));
    const unsigned long long i = atomicAdd(b, 1ULL);
    if (i < BRASA_TL_N) {
        b[1 + 2 * i] = t;
        b[2 + 2 * i] = id;
    }
}
#endif
__device__ __forceinline__ void pdl_wait()
{
#if !BRASA_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
#if defined(BRASA_TL) && !BRASA_HIP
    tl_stamp();
#endif
}
__device__ __forceinline__ void pdl_launch()
{
#if !BRASA_HIP && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" :::);
#endif
}
