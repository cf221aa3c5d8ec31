// quantize.cu: converts activations to a weight format's dot type, optionally after an
// RMSNorm (fused: the normalised row never goes to memory); the conversions are quant.cuh's.
// Output: xq int8 [ncols][k] + xd float [ncols][k/32] (modes 0, 1), or xf float [ncols][k];
// mode 1 also writes xs int [ncols][k/16].
// Grid (columns, ceil(k / 2048)): blocks of 256 threads, each a 2048-element chunk of a row.
// Parameters: none.
#include "quant.cuh"

#define CHUNK 2048 // elements per block: blockIdx.y picks the chunk of the row

extern "C" __global__ void __launch_bounds__(256)
quant_act(const float *x, const float *normw, float eps, int k, int mode, i8 *xq, float *xd,
          float *xf, int *xs)
{
    pdl_wait();
    pdl_launch();
    __shared__ double sh[32];
    const int c = blockIdx.x, e0 = blockIdx.y * CHUNK, e1 = min(k, e0 + CHUNK);
    const float *xr = x + (i64)c * k;
    // every block of the row sums the whole row (cheap, from L2)
    float scale = normw ? rms_scale(xr, k, eps, sh) : 1.0f;
    quant_span(xr, normw, scale, e0, e1, mode, xq + (i64)c * k, xd + (i64)c * (k / 32),
               xf + (i64)c * k, xs + (i64)c * (k / 16));
}
