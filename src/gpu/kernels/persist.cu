// persist.cu: a run of a decode step's launches as one persistent kernel. A block stays on
// each SM for the whole run and works through a program of steps, each what one launch of the
// plan would have done: the decode products (mvd.cu, converting their own activation, XC) and
// the small ops of ops.cu up to attn_merge (RoPE with the cache writes, attention, norms,
// elementwise ops). Between two steps the blocks meet at a barrier in global memory instead of
// a kernel boundary: a block announces that it has finished a step (one atomic add), and waits
// for the others only where the next step reads what they wrote (pdl_wait() in the kernels,
// here persist_wait()), so a product's first weights are on their way while the barrier
// completes, as they are across a launch with programmatic dependent launch.
// A step of ops.cu runs its launch's blocks in turn over the persistent blocks (block b takes
// the launch's blocks b, b + gridDim.x, ...), each with this kernel's PNW x 32 threads; a
// product step runs mvd.cu's XC form, which already spreads its lane groups over a grid of
// one block per SM.
// Every block must be resident at once (they wait for each other): the grid is one block per
// SM, and the launch bounds ask for one block of PNW warps per SM.
// Every step's code is inlined into the one kernel, so the kernel needs the registers of its
// most demanding step plus its own loop state: with 16 warps a block (128 registers) the
// products spill (4 GB of local traffic a 1.5B step); with 8 (255 registers) they do not, and
// the step is still about twice as long as the separate launches' (BENCHMARKS.md), which is
// why BRASA_GPU_PERSIST is off. (Steps as functions that are not inlined spill as much: the
// calls save and restore their registers.)
// Parameters: PNW (warps per block), PNV (product variants, at most 8), PV0 .. PV7 (variant s:
// QT | NR << 8 | KS << 12 | GLU << 16 | AL << 17, as mvd.cu's parameters), PMAXA (arguments a
// step), PSLEEP (optional: ns a waiting warp sleeps between polls). Program: pins[n] (kind,
// grid, arguments as the launch's); bar: one word, zero at the start (the last block to
// finish leaves it zero again).
#ifndef PSLEEP
#define PSLEEP 0 // nanoseconds a waiting warp sleeps between two polls
#endif
#define PERSIST 1
#define PERSIST_WAIT persist_wait
#include "common.cuh"

__shared__ unsigned *ps_bar; // arrivals: gridDim.x a step
__shared__ int ps_need;      // steps this block's current step waits for (0: the last kernel)

__device__ __forceinline__ unsigned ld_acquire(const unsigned *p)
{
    unsigned v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
    return v;
}

// Waits until every block has finished the steps before this one (one lane of each warp
// polls), or in the first step for the previous kernel of the stream.
__device__ __forceinline__ void persist_wait()
{
    if (ps_need == 0) {
#if __CUDA_ARCH__ >= 900
        asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
        return;
    }
    const unsigned m = __activemask();
    if ((int)(threadIdx.x & 31) == __ffs(m) - 1)
        while (ld_acquire(ps_bar) < gridDim.x * (unsigned)ps_need) {
#if PSLEEP > 0
            __nanosleep(PSLEEP);
#endif
        }
    __syncwarp(m); // (orders the warp's other lanes after the poller's acquire)
}

// fence.acq_rel at GPU scope: with a relaxed atomic after it, a release; before, an acquire
__device__ __forceinline__ void fence_acq_rel() { asm volatile("fence.acq_rel.gpu;" ::: "memory"); }

#include "ops.cu"

// a launch argument as the host stores it (gpu.c's union argv)
union pargv {
    unsigned long long p;
    int i;
    float f;
    long long l;
};

// the decode product variants, mvd.cu in namespaces mv0 .. mv7
#define PCAT_(a, b) a##b
#define PCAT(a, b) PCAT_(a, b)
#define SLOT 0
#include "mvd_slot.cuh"
#undef SLOT
#define SLOT 1
#include "mvd_slot.cuh"
#undef SLOT
#define SLOT 2
#include "mvd_slot.cuh"
#undef SLOT
#define SLOT 3
#include "mvd_slot.cuh"
#undef SLOT
#define SLOT 4
#include "mvd_slot.cuh"
#undef SLOT
#define SLOT 5
#include "mvd_slot.cuh"
#undef SLOT
#define SLOT 6
#include "mvd_slot.cuh"
#undef SLOT
#define SLOT 7
#include "mvd_slot.cuh"
#undef SLOT

// step kinds (gpu.c's PK_*): ops.cu's kernels, then 16 + s for product variant s
#define PK_GET_ROWS 1
#define PK_NORM 2
#define PK_ELT 3
#define PK_VIEW 4
#define PK_ROPE 5
#define PK_KV 6
#define PK_ATTN 7
#define PK_MERGE 8
#define PK_MV 16

struct pins {
    int kind;
    unsigned gx, gy, gz;
    pargv v[PMAXA];
};

#define PP(T, j) ((T)I.v[j].p)
#define PI(j) (I.v[j].i)
#define PF(j) (I.v[j].f)
#define PL(j) (I.v[j].l)
// One of ops.cu's launches: block b of grid g
__device__ __forceinline__ void op_block(const pins &I, const uint3 b, const uint3 g)
{
    switch (I.kind) {
    case PK_GET_ROWS:
        get_rows(b, g, PP(const u8 *, 0), PI(1), PL(2), PI(3), PP(const int *, 4), PF(5),
                 PP(float *, 6));
        break;
    case PK_NORM:
        norm_rows(b, g, PP(const float *, 0), PP(const float *, 1), PP(const float *, 2),
                  PP(float *, 3), PI(4), PF(5), PI(6));
        break;
    case PK_ELT:
        eltwise(b, g, PP(const float *, 0), PP(const float *, 1), PP(float *, 2), PL(3), PF(4),
                PI(5));
        break;
    case PK_VIEW:
        view(b, g, PP(const float *, 0), PP(float *, 1), PL(2), PI(3), PI(4), PI(5), PI(6),
             PI(7));
        break;
    case PK_ROPE:
        rope(b, g, PP(const float *, 0), PP(float *, 1), PI(2), PP(void *, 3),
             PP(const float *, 4), PP(float *, 5), PI(6), PP(void *, 7), PP(const float *, 8),
             PP(void *, 9), PI(10), PP(const int *, 11), PI(12), PI(13), PI(14), PF(15), PI(16));
        break;
    case PK_KV:
        kv_store(b, g, PP(const float *, 0), PP(void *, 1), PP(const int *, 2), PI(3), PL(4),
                 PI(5));
        break;
    case PK_ATTN:
        attn(b, g, PP(const float *, 0), PP(const void *, 1), PP(const void *, 2),
             PP(float *, 3), PP(const int *, 4), PI(5), PI(6), PI(7), PF(8), PI(9), PI(10),
             PP(float *, 11));
        break;
    case PK_MERGE:
        attn_merge(b, g, PP(const float *, 0), PP(float *, 1), PI(2), PI(3), PI(4));
        break;
    }
}

extern "C" __global__ void __launch_bounds__(PNW * 32, 1)
persist(const pins *prog, int n, unsigned *bar)
{
    if (threadIdx.x == 0)
        ps_bar = bar;
    for (int s = 0; s < n; s++) {
        const pins &I = prog[s];
        if (threadIdx.x == 0)
            ps_need = s;
        __syncthreads();
        if (I.kind >= PK_MV) {
            // mvd.cu's XC loop: its passes over the lane groups
            const int np = (I.v[21].i + (int)gridDim.x - 1) / (int)gridDim.x;
            for (int gb = 0; gb < np; gb++)
                switch (I.kind - PK_MV) {
#if PNV > 0
                case 0: mv0::mvd_pass(I.v, gb); break;
#endif
#if PNV > 1
                case 1: mv1::mvd_pass(I.v, gb); break;
#endif
#if PNV > 2
                case 2: mv2::mvd_pass(I.v, gb); break;
#endif
#if PNV > 3
                case 3: mv3::mvd_pass(I.v, gb); break;
#endif
#if PNV > 4
                case 4: mv4::mvd_pass(I.v, gb); break;
#endif
#if PNV > 5
                case 5: mv5::mvd_pass(I.v, gb); break;
#endif
#if PNV > 6
                case 6: mv6::mvd_pass(I.v, gb); break;
#endif
#if PNV > 7
                case 7: mv7::mvd_pass(I.v, gb); break;
#endif
                }
        } else {
            const unsigned gx = I.gx, gy = I.gy, nb = gx * gy * I.gz;
            for (unsigned vb = blockIdx.x; vb < nb; vb += gridDim.x) {
                op_block(I, make_uint3(vb % gx, vb / gx % gy, vb / (gx * gy)),
                         make_uint3(gx, gy, I.gz));
                __syncthreads(); // (the next block of the launch reuses the shared memory)
            }
        }
        // this block has finished step s: one more arrival (the waiters of step s + 1 poll
        // the count; the last block of the last step leaves it zero for the next run). A
        // block arrives only once the steps before have finished everywhere (a block with no
        // share of this step waits here), so the arrivals of one step are counted before any
        // of the next.
        persist_wait();
        __syncthreads();
        if (threadIdx.x == 0) {
            fence_acq_rel();
            if (s + 1 < n)
                asm volatile("red.relaxed.gpu.global.add.u32 [%0], 1;" ::"l"(bar) : "memory");
            else if (atomicAdd(bar, 1u) == gridDim.x * (unsigned)n - 1)
                atomicExch(bar, 0u);
        }
    }
}
