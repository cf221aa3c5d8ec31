/* quant/mix: the type rules of the file-type mixes give, tensor by tensor, the types that
 * llama-quantize chose in every quantized fixture; and the names round-trip. */
#include <dirent.h>

#include "gguf/gguf.h"
#include "quant/mix.h"
#include "quant/quant.h"
#include "test.h"

TEST(mix_matches_llama_quantize)
{
    char dirpath[4096];
    snprintf(dirpath, sizeof dirpath, "%s", test_shared_path("fixtures"));
    DIR *d = opendir(dirpath);
    if (!d)
        SKIP("fixtures absent");
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || strcmp(e->d_name + l - 5, ".gguf"))
            continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dirpath, e->d_name);
        struct gguf_file *f = NULL;
        struct brasa_err err;
        REQUIRE(gguf_open(&f, path, &err) == BRASA_OK);
        uint32_t ftype = 0;
        if (gguf_get_u32(f, "general.file_type", &ftype, &err) != BRASA_OK || !quant_ftype_name((int)ftype)) {
            gguf_close(f);
            continue;
        }
        const char **names = malloc(f->n_tensors * sizeof *names);
        REQUIRE(names);
        for (uint64_t i = 0; i < f->n_tensors; i++)
            names[i] = f->tensors[i].name;
        struct quant_mix mix;
        quant_mix_begin(&mix, (int)ftype, names, f->n_tensors);
        for (uint64_t i = 0; i < f->n_tensors; i++) {
            const struct gguf_tensor *t = &f->tensors[i];
            uint32_t want = quant_mix_type(&mix, t->name, t->n_dims, t->ne);
            CHECKF(want == t->type, "%s %s: mix says %s, llama-quantize wrote %s", e->d_name, t->name,
                   qtype_get(want) ? qtype_get(want)->name : "?", qtype_get(t->type) ? qtype_get(t->type)->name : "?");
        }
        free(names);
        gguf_close(f);
        files++;
    }
    closedir(d);
    CHECK(files > 0);
}

TEST(mix_names)
{
    CHECK(quant_ftype_by_name("q4_k_m") == FTYPE_Q4_K_M);
    CHECK(quant_ftype_by_name("Q8_0") == FTYPE_Q8_0);
    CHECK(quant_ftype_by_name("q3_k_xl") == -1);
    CHECK(!strcmp(quant_ftype_name(FTYPE_Q5_K_M), "Q5_K_M"));
    CHECK(quant_ftype_name(999) == NULL);
    /* Rows that are not 256-blocks fall back like llama.cpp (Qwen2.5-0.5B's 896). */
    const char *names[] = {"token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_down.weight"};
    struct quant_mix mix;
    quant_mix_begin(&mix, FTYPE_Q4_K_M, names, 3);
    int64_t ne_e[2] = {896, 151936}, ne_q[2] = {896, 896}, ne_d[2] = {4864, 896};
    CHECK(quant_mix_type(&mix, names[0], 2, ne_e) == GGML_TYPE_Q8_0); /* tied output */
    CHECK(quant_mix_type(&mix, names[1], 2, ne_q) == GGML_TYPE_Q5_0);
    CHECK(quant_mix_type(&mix, names[2], 2, ne_d) == GGML_TYPE_Q6_K); /* first ffn_down */
    int64_t ne_n[1] = {896};
    CHECK(quant_mix_type(&mix, "output_norm.weight", 1, ne_n) == GGML_TYPE_F32);
}

TEST_MAIN(T(mix_matches_llama_quantize), T(mix_names))
