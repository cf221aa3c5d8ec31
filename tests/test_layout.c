/* The planar device layout of quantized weights (src/gpu/layout.c): the field table covers
 * each block exactly, the large regions start 16-byte aligned, and packing a matrix in uneven
 * chunks (as the uploader does) then unpacking it gives the file's bytes back. */
#include <stdlib.h>
#include <string.h>

#include "gpu/layout.h"
#include "quant/quant.h"
#include "test.h"

static const uint32_t packed[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K,
                                  GGML_TYPE_Q6_K};

TEST(fields_cover_each_block_once)
{
    for (size_t i = 0; i < sizeof packed / sizeof packed[0]; i++) {
        struct layout_field f[LAYOUT_MAX_FIELDS];
        size_t bb = 0;
        int nf = layout_fields(packed[i], f, &bb);
        CHECKF(nf >= 2 && bb == qtype_get(packed[i])->block_bytes, "type %u", packed[i]);
        unsigned char seen[256] = {0};
        size_t region = 0;
        for (int j = 0; j < nf; j++) {
            for (int b = f[j].src; b < f[j].src + f[j].size && b < 256; b++)
                seen[b]++;
            /* regions of 16-byte multiples start aligned for any block count */
            if (j + 1 < nf)
                CHECKF(region % 16 == 0, "type %u field %d", packed[i], j);
            region += f[j].size;
        }
        CHECKF(region == bb, "type %u: fields sum to %zu of %zu bytes", packed[i], region, bb);
        for (size_t b = 0; b < bb; b++)
            CHECKF(seen[b] == 1, "type %u byte %zu covered %d times", packed[i], b, seen[b]);
        CHECKF(f[0].size % 16 == 0, "type %u: the quantized values are 16-byte pieces", packed[i]);
    }
    struct layout_field f[LAYOUT_MAX_FIELDS];
    CHECK(layout_fields(GGML_TYPE_F16, f, NULL) == 0);
    CHECK(layout_fields(GGML_TYPE_F32, f, NULL) == 0);
    CHECK(layout_fields(GGML_TYPE_BF16, f, NULL) == 0);
}

TEST(chunked_pack_then_unpack_is_identity)
{
    unsigned s = 12345;
    for (size_t i = 0; i < sizeof packed / sizeof packed[0]; i++) {
        size_t bb = qtype_get(packed[i])->block_bytes, n = 1237;
        unsigned char *src = malloc(n * bb), *pl = malloc(n * bb), *back = malloc(n * bb);
        REQUIRE(src && pl && back);
        for (size_t b = 0; b < n * bb; b++)
            src[b] = (unsigned char)((s = s * 1103515245u + 12345u) >> 16);
        memset(pl, 0xAA, n * bb);
        size_t cuts[] = {0, 1, 500, 501, 1000, n};
        for (int c = 0; c + 1 < 6; c++)
            layout_pack(packed[i], src + cuts[c] * bb, cuts[c], cuts[c + 1], n, pl);
        CHECKF(memcmp(src, pl, n * bb) != 0, "type %u: packing moved nothing", packed[i]);
        layout_unpack(packed[i], pl, 0, n, n, back);
        CHECKF(memcmp(src, back, n * bb) == 0, "type %u: unpack(pack(x)) != x", packed[i]);
        /* block 777's quantized values are at 777 x (first field size) */
        struct layout_field f[LAYOUT_MAX_FIELDS];
        layout_fields(packed[i], f, NULL);
        CHECK(memcmp(pl + 777 * f[0].size, src + 777 * bb + f[0].src, f[0].size) == 0);
        free(src);
        free(pl);
        free(back);
    }
}

/* The threaded pack (used on upload) writes the same image as the plain one. */
TEST(threaded_pack_equals_plain)
{
    unsigned s = 777;
    for (size_t i = 0; i < sizeof packed / sizeof packed[0]; i++) {
        size_t bb = qtype_get(packed[i])->block_bytes, n = 20011;
        unsigned char *src = malloc(n * bb), *a = malloc(n * bb), *b = malloc(n * bb);
        REQUIRE(src && a && b);
        for (size_t k = 0; k < n * bb; k++)
            src[k] = (unsigned char)((s = s * 1103515245u + 12345u) >> 16);
        layout_pack(packed[i], src, 0, n, n, a);
        for (int nth = 1; nth <= 7; nth += 3) {
            memset(b, 0, n * bb);
            layout_pack_threads(packed[i], src, n, b, nth);
            CHECKF(memcmp(a, b, n * bb) == 0, "type %u, %d threads", packed[i], nth);
        }
        free(src);
        free(a);
        free(b);
    }
}

TEST_MAIN(T(fields_cover_each_block_once), T(chunked_pack_then_unpack_is_identity),
          T(threaded_pack_equals_plain))
