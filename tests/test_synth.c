/* synth: synthetic files have the layout llama.cpp writes for each family (the fixtures are
 * llama.cpp's), tokenizers that load and round-trip text, the real models' parameter counts, and
 * the same bytes for the same seed. */
#include <math.h>
#include <stdint.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quant/mix.h"
#include "synth/synth.h"
#include "test.h"
#include "tok/tok.h"

static char tmp_file[64];

static const char *write_tiny(const char *arch, int ftype, uint64_t seed, int threads)
{
    snprintf(tmp_file, sizeof tmp_file, "/tmp/brasa-test-synth-%d.gguf", (int)getpid());
    struct synth_opts o = {.arch = arch, .shape = "tiny", .ftype = ftype, .seed = seed, .n_threads = threads};
    struct brasa_err err;
    if (synth_write(tmp_file, &o, NULL, &err) != BRASA_OK) {
        fprintf(stderr, "  %s\n", err.msg);
        return NULL;
    }
    return tmp_file;
}

/* "blk.12.attn_q.weight" -> "attn_q.weight"; other names unchanged. */
static const char *suffix(const char *name)
{
    if (strncmp(name, "blk.", 4))
        return name;
    const char *p = strchr(name + 4, '.');
    return p ? p + 1 : name;
}

static bool has_suffix(const struct gguf_file *f, const char *sfx)
{
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if (!strcmp(suffix(f->tensors[i].name), sfx))
            return true;
    return false;
}

TEST(layout_matches_fixtures)
{
    static const char *const archs[] = {"llama", "qwen2", "granite", "qwen3", "qwen35"};
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
        char rel[128];
        snprintf(rel, sizeof rel, "fixtures/%s.Q8_0.gguf", archs[a]);
        struct gguf_file *fx = NULL, *sy = NULL;
        struct brasa_err err;
        if (gguf_open(&fx, test_shared_path(rel), &err) != BRASA_OK)
            SKIP("fixtures absent");
        const char *path = write_tiny(archs[a], FTYPE_Q8_0, 1, 2);
        CHECK(path && gguf_open(&sy, path, &err) == BRASA_OK);
        if (!sy) {
            gguf_close(fx);
            continue;
        }
        /* The same tensor kinds, both ways (a separate output matrix is each shape's choice). */
        for (uint64_t i = 0; i < fx->n_tensors; i++)
            CHECKF(has_suffix(sy, suffix(fx->tensors[i].name)) || !strcmp(fx->tensors[i].name, "output.weight"),
                   "%s: synth lacks %s", archs[a], fx->tensors[i].name);
        for (uint64_t i = 0; i < sy->n_tensors; i++)
            CHECKF(has_suffix(fx, suffix(sy->tensors[i].name)) || !strcmp(sy->tensors[i].name, "output.weight"),
                   "%s: synth has extra %s", archs[a], sy->tensors[i].name);
        /* Every hyper-parameter key of the fixture (ARCH.*) is there with the same type. */
        for (uint64_t i = 0; i < fx->n_kv; i++) {
            const struct gguf_kv *k = &fx->kv[i];
            if (strncmp(k->key, archs[a], strlen(archs[a])) || k->key[strlen(archs[a])] != '.')
                continue;
            const struct gguf_kv *s = gguf_find_kv(sy, k->key);
            CHECKF(s && s->type == k->type, "%s: key %s missing or of another type", archs[a], k->key);
        }
        static const char *const tok_keys[] = {"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
                                               "tokenizer.ggml.token_type", "tokenizer.ggml.bos_token_id",
                                               "tokenizer.ggml.eos_token_id", "general.file_type"};
        for (size_t k = 0; k < sizeof tok_keys / sizeof tok_keys[0]; k++) {
            const struct gguf_kv *x = gguf_find_kv(fx, tok_keys[k]), *s = gguf_find_kv(sy, tok_keys[k]);
            CHECKF(x && s && x->type == s->type, "%s: %s", archs[a], tok_keys[k]);
        }
        gguf_close(sy);
        gguf_close(fx);
        unlink(path);
    }
}

TEST(tokenizer_round_trip)
{
    static const char *const archs[] = {"llama", "qwen2", "granite", "qwen3", "qwen35"};
    static const char text[] = "The quick brown fox jumps over the lazy dog, 42 times!\nNew line\ttab.";
    for (size_t a = 0; a < sizeof archs / sizeof archs[0]; a++) {
        const char *path = write_tiny(archs[a], FTYPE_Q8_0, 1, 2);
        struct gguf_file *f = NULL;
        struct tokenizer *t = NULL;
        struct brasa_err err;
        REQUIRE(path && gguf_open(&f, path, &err) == BRASA_OK);
        CHECKF(tok_load(&t, f, 0, &err) == BRASA_OK, "%s: %s", archs[a], err.msg);
        if (t) {
            int32_t *ids = NULL;
            size_t n = 0;
            char *back = NULL;
            CHECK(tok_encode(t, text, strlen(text), 0, &ids, &n, &err) == BRASA_OK);
            /* Merges make multi-letter tokens: fewer tokens than bytes. */
            CHECKF(n > 0 && n < strlen(text) * 3 / 4, "%s: %zu tokens for %zu bytes", archs[a], n, strlen(text));
            CHECK(tok_decode(t, ids, n, &back, &err) == BRASA_OK);
            const char *b = back ? back : "";
            if (*b == ' ' && archs[a][0] == 'l') /* SentencePiece's leading space */
                b++;
            CHECKF(!strcmp(b, text), "%s: decoded '%s'", archs[a], b);
            CHECK(tok_eos(t) >= 0 && tok_is_eog(t, tok_eos(t)));
            free(back);
            free(ids);
            tok_free(t);
        }
        gguf_close(f);
        unlink(path);
    }
}

TEST(real_shapes_parameter_counts)
{
    /* Published sizes (embedding counted once when tied), within 1%. */
    static const struct {
        const char *arch, *shape;
        double params;
    } want[] = {
        {"qwen2", "0.5b", 494.0e6}, {"qwen2", "1.5b", 1543.7e6}, {"qwen2", "7b", 7615.6e6},
        {"qwen3", "0.6b", 596.0e6}, {"qwen3", "8b", 8190.7e6},   {"llama", "8b", 8030.3e6},
        {"llama", "1b", 1100.0e6},  {"granite", "2b", 2533.5e6}, {"granite", "8b", 8170.9e6},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct synth_shape *s = synth_find(want[i].arch, want[i].shape);
        REQUIRE(s);
        double E = s->n_embd, L = s->n_layer, D = s->head_dim, H = s->n_head, KV = s->n_head_kv, F = s->n_ff;
        double per_layer = E * H * D + 2 * E * KV * D + H * D * E + 3 * E * F + 2 * E;
        if (s->qkv_bias)
            per_layer += H * D + 2 * KV * D;
        if (s->qk_norm)
            per_layer += 2 * D;
        double n = L * per_layer + E * s->n_vocab * (s->tied ? 1 : 2) + E;
        CHECKF(fabs(n / want[i].params - 1) < 0.01, "%s %s: %.1f M parameters, published %.1f M", want[i].arch,
               want[i].shape, n / 1e6, want[i].params / 1e6);
    }
}

TEST(same_seed_same_bytes)
{
    const char *p = write_tiny("qwen35", FTYPE_Q4_K_M, 9, 1);
    REQUIRE(p);
    size_t n1 = 0, n2 = 0;
    char *a = test_read_file(p, &n1);
    p = write_tiny("qwen35", FTYPE_Q4_K_M, 9, 2);
    char *b = p ? test_read_file(p, &n2) : NULL;
    CHECK(a && b && n1 == n2 && !memcmp(a, b, n1));
    free(b);
    p = write_tiny("qwen35", FTYPE_Q4_K_M, 10, 2);
    b = p ? test_read_file(p, &n2) : NULL;
    CHECK(a && b && n1 == n2 && memcmp(a, b, n1)); /* another seed, other weights */
    free(a);
    free(b);
    if (p)
        unlink(p);
}

TEST(bad_options)
{
    struct synth_opts o = {.arch = "qwen2", .shape = "13b", .ftype = FTYPE_Q8_0};
    struct brasa_err err;
    CHECK(synth_write("/tmp/never-written.gguf", &o, NULL, &err) == BRASA_EINVAL && strstr(err.msg, "0.5b"));
    o.shape = "tiny";
    o.ftype = 12345;
    CHECK(synth_write("/tmp/never-written.gguf", &o, NULL, &err) == BRASA_EINVAL);
    o.ftype = FTYPE_Q8_0;
    CHECK(synth_write("/nonexistent-dir/x.gguf", &o, NULL, &err) != BRASA_OK);
}

TEST_MAIN(T(layout_matches_fixtures), T(tokenizer_round_trip), T(real_shapes_parameter_counts), T(same_seed_same_bytes),
          T(bad_options))
