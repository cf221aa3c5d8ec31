/* layout: how quantized weights lie in device memory.
 *
 * The file's block layouts interleave small scale fields with the quantized values, so a
 * block is 18, 34 or 210 bytes and a warp cannot read it in aligned 16-byte pieces. On upload
 * every quantized matrix is rearranged, losslessly and with the same byte count, into
 * "planar" form: each block is cut into fields (the table in layout.c), and field f of all N
 * blocks of the matrix (N = rows x blocks per row, in row order) lies in one region, the
 * regions one after the other:
 *
 *   region f starts at N x (sum of the sizes of fields 0..f-1); block i's field f is at
 *   region_f + i x size_f.
 *
 *   Q4_0 (18)  : qs[16]            | d(2)
 *   Q8_0 (34)  : qs[32]            | d(2)
 *   Q4_K (144) : qs[128]           | d, dmin, scales[12] (16)
 *   Q5_K (176) : qs[128]           | d, dmin, scales[12], qh[32] (48)
 *   Q6_K (210) : ql[128] | qh[64]  | scales[16] | d(2)
 *
 * The large field comes first, so every region but the last scale one starts 16-byte
 * aligned, and consecutive lanes read consecutive 16-byte pieces of the quantized values.
 * F32, F16 and BF16 keep the file's layout. The kernels' accessors are in common.cuh. */
#ifndef BRASA_GPU_LAYOUT_H
#define BRASA_GPU_LAYOUT_H
#include <stddef.h>
#include <stdint.h>

#define LAYOUT_MAX_FIELDS 4

struct layout_field {
    uint16_t src; /* byte offset in the file's block */
    uint16_t size;
};

/* The fields of a block of type t: returns their count (0: the type keeps the file layout)
 * and, where block_bytes is not NULL, the block size. */
int layout_fields(uint32_t t, struct layout_field f[LAYOUT_MAX_FIELDS], size_t *block_bytes);

/* Blocks [b0, b1) of a matrix of n_blocks blocks of type t, from the file's layout at src
 * (block b0 first), into their places in the planar image dst (the whole matrix's image, of
 * n_blocks x block bytes). */
void layout_pack(uint32_t t, const void *src, size_t b0, size_t b1, size_t n_blocks, void *dst);

/* layout_pack of a whole image (blocks [0, n_blocks)) split over up to nth threads. */
void layout_pack_threads(uint32_t t, const void *src, size_t n_blocks, void *dst, int nth);

/* The inverse, for the same range (tests). */
void layout_unpack(uint32_t t, const void *planar, size_t b0, size_t b1, size_t n_blocks,
                   void *dst);

#endif
