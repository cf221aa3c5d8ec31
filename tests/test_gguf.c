/* GGUF reader and writer: every shared file parses, the writer round-trips every fixture, a
 * corpus of malformed files (made here from a valid fixture) each gives its specific error,
 * the typed getters, and `brasa inspect` end to end. */
#include "test.h"

#include <dirent.h>
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "quant/quant.h"

/* The fixture the malformed files are made from (27 keys, 21 tensors, Q4_0/Q6_K/F32). */
#define BASE_FIXTURE "fixtures/llama.Q4_0.gguf"

static char *temp_path(const char *suffix)
{
    static int n;
    const char *dir = getenv("TMPDIR");
    char *p = malloc(512);
    snprintf(p, 512, "%s/brasa-test-gguf-%d-%d%s", dir && *dir ? dir : "/tmp", (int)getpid(), n++,
             suffix);
    return p;
}

/* Calls fn(path) for every .gguf file in a shared subdirectory; returns how many. */
static int each_gguf(const char *sub, void (*fn)(const char *path))
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", test_shared_path(sub));
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 5, ".gguf"))
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        fn(path);
        n++;
    }
    closedir(d);
    return n;
}

/* ---- every shared file parses; every key and tensor can be looked up ---- */

static void check_parses(const char *path)
{
    struct gguf_file *f;
    struct brasa_err err;
    brasa_status st = gguf_open(&f, path, &err);
    CHECKF(st == BRASA_OK, "%s: %s", path, err.msg);
    if (st)
        return;
    for (uint64_t i = 0; i < f->n_kv; i++)
        CHECKF(gguf_find_kv(f, f->kv[i].key) == &f->kv[i], "%s: key %s", path, f->kv[i].key);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const struct gguf_tensor *t = &f->tensors[i];
        CHECKF(gguf_find_tensor(f, t->name) == t, "%s: tensor %s", path, t->name);
        CHECK((const uint8_t *)t->data >= f->base + f->data_offset &&
              (const uint8_t *)t->data + t->nbytes <= f->base + f->size);
    }
    CHECK(gguf_find_kv(f, "no.such.key") == NULL);
    CHECK(gguf_find_tensor(f, "no.such.tensor") == NULL);
    gguf_close(f);
}

TEST(shared_files_parse)
{
    int n = each_gguf("fixtures", check_parses) + each_gguf("vocab", check_parses) +
            each_gguf("models", check_parses);
    if (!n)
        SKIP("no shared .gguf files");
    CHECKF(n >= 40, "only %d files", n);
}

/* ---- writer round trip ---- */

static int same_kv(const struct gguf_kv *a, const struct gguf_kv *b)
{
    if (strcmp(a->key, b->key) || a->type != b->type)
        return 0;
    if (a->type == GGUF_T_STRING)
        return a->v.str.len == b->v.str.len && !memcmp(a->v.str.ptr, b->v.str.ptr, a->v.str.len);
    if (a->type == GGUF_T_BOOL)
        return a->v.b == b->v.b;
    if (a->type != GGUF_T_ARRAY)
        return a->v.u64 == b->v.u64; /* same bits for u64, i64 and f64 */
    if (a->arr_type != b->arr_type || a->arr_len != b->arr_len)
        return 0;
    if (a->arr_type != GGUF_T_STRING)
        return !memcmp(a->arr_data, b->arr_data, a->arr_len * gguf_vtype_size(a->arr_type));
    for (uint64_t i = 0; i < a->arr_len; i++)
        if (a->arr_strs[i].len != b->arr_strs[i].len ||
            memcmp(a->arr_strs[i].ptr, b->arr_strs[i].ptr, a->arr_strs[i].len))
            return 0;
    return 1;
}

static void check_roundtrip(const char *path)
{
    struct gguf_file *a = NULL, *b = NULL;
    struct gguf_writer *w = NULL;
    struct brasa_err err;
    char *tmp = temp_path(".gguf");
    brasa_status st = gguf_open(&a, path, &err);
    if (!st)
        st = gguf_writer_new(&w, &err);
    for (uint64_t i = 0; !st && i < a->n_kv; i++)
        st = gguf_writer_copy_kv(w, &a->kv[i], &err);
    for (uint64_t i = 0; !st && i < a->n_tensors; i++) {
        const struct gguf_tensor *t = &a->tensors[i];
        st = gguf_writer_add_tensor(w, t->name, t->type, t->n_dims, t->ne, t->data, t->nbytes,
                                    &err);
    }
    if (!st)
        st = gguf_writer_write(w, tmp, &err);
    if (!st)
        st = gguf_open(&b, tmp, &err);
    CHECKF(st == BRASA_OK, "%s: %s", path, err.msg);
    if (!st) {
        CHECK(b->version == 3 && b->alignment == a->alignment);
        CHECKF(a->n_kv == b->n_kv && a->n_tensors == b->n_tensors, "%s", path);
        for (uint64_t i = 0; i < a->n_kv && i < b->n_kv; i++)
            CHECKF(same_kv(&a->kv[i], &b->kv[i]), "%s: key %s", path, a->kv[i].key);
        for (uint64_t i = 0; i < a->n_tensors && i < b->n_tensors; i++) {
            const struct gguf_tensor *x = &a->tensors[i], *y = &b->tensors[i];
            CHECKF(!strcmp(x->name, y->name) && x->type == y->type && x->n_dims == y->n_dims &&
                       !memcmp(x->ne, y->ne, sizeof x->ne) && x->nbytes == y->nbytes &&
                       x->offset == y->offset,
                   "%s: tensor %s", path, x->name);
            CHECKF(!memcmp(x->data, y->data, x->nbytes), "%s: bytes of %s", path, x->name);
        }
    }
    gguf_close(a);
    gguf_close(b);
    gguf_writer_free(w);
    remove(tmp);
    free(tmp);
}

TEST(writer_roundtrip_fixtures)
{
    int n = each_gguf("fixtures", check_roundtrip) + each_gguf("models", check_roundtrip) +
            each_gguf("vocab", check_roundtrip);
    if (!n)
        SKIP("no shared .gguf files");
}

/* The writer's own API: every setter, replacement, alignment, tensors, and its errors. */
TEST(writer_api)
{
    struct gguf_writer *w;
    struct brasa_err err;
    char *tmp = temp_path(".gguf");
    REQUIRE(gguf_writer_new(&w, &err) == BRASA_OK);
    CHECK(gguf_writer_set_u32(w, "a.u32", 7, &err) == BRASA_OK);
    CHECK(gguf_writer_set_u32(w, "a.u32", 9, &err) == BRASA_OK); /* replaces */
    CHECK(gguf_writer_set_i32(w, "a.neg", -5, &err) == BRASA_OK);
    CHECK(gguf_writer_set_f32(w, "a.f32", 0.25f, &err) == BRASA_OK);
    CHECK(gguf_writer_set_bool(w, "a.bool", true, &err) == BRASA_OK);
    CHECK(gguf_writer_set_str(w, "a.str", "héllo", &err) == BRASA_OK);
    const int32_t ints[3] = {1, -2, 3};
    CHECK(gguf_writer_set_arr(w, "a.ints", GGUF_T_INT32, ints, 3, &err) == BRASA_OK);
    const char *const strs[2] = {"x", ""};
    CHECK(gguf_writer_set_arr_str(w, "a.strs", strs, 2, &err) == BRASA_OK);
    struct gguf_kv big = {.key = "a.big", .type = GGUF_T_UINT64, .v.u64 = 1ull << 40};
    CHECK(gguf_writer_copy_kv(w, &big, &err) == BRASA_OK);
    CHECK(gguf_writer_set_alignment(w, 64, &err) == BRASA_OK);
    /* errors */
    CHECK(gguf_writer_set_alignment(w, 48, &err) == BRASA_EINVAL && strstr(err.msg, "power of two"));
    CHECK(gguf_writer_set_f32(w, "general.alignment", 1, &err) == BRASA_EINVAL);
    CHECK(gguf_writer_set_u32(w, "bad\xff", 1, &err) == BRASA_EINVAL && strstr(err.msg, "UTF-8"));
    CHECK(gguf_writer_set_u32(w, "", 1, &err) == BRASA_EINVAL);
    CHECK(gguf_writer_set_arr(w, "a.s", GGUF_T_STRING, strs, 2, &err) == BRASA_EINVAL);
    float f32[2 * 3];
    for (int i = 0; i < 6; i++)
        f32[i] = (float)i - 2.5f;
    uint8_t q8[2 * 34] = {0};
    const int64_t ne_f[2] = {3, 2}, ne_q[2] = {32, 2}, ne_bad[1] = {33};
    CHECK(gguf_writer_add_tensor(w, "t.f32", GGML_TYPE_F32, 2, ne_f, f32, sizeof f32, &err) == 0);
    CHECK(gguf_writer_add_tensor(w, "t.q8", GGML_TYPE_Q8_0, 2, ne_q, q8, sizeof q8, &err) == 0);
    CHECK(gguf_writer_add_tensor(w, "t.x", GGML_TYPE_F32, 2, ne_f, f32, 8, &err) == BRASA_EINVAL &&
          strstr(err.msg, "need 24"));
    CHECK(gguf_writer_add_tensor(w, "t.x", GGML_TYPE_Q8_0, 1, ne_bad, q8, 34, &err) ==
              BRASA_EINVAL &&
          strstr(err.msg, "whole number"));
    CHECK(gguf_writer_add_tensor(w, "t.x", 99, 1, ne_bad, q8, 34, &err) == BRASA_EINVAL);
    CHECK(gguf_writer_add_tensor(w, "t.x", GGML_TYPE_F32, 5, ne_f, f32, 24, &err) == BRASA_EINVAL);
    CHECK(gguf_writer_write(w, tmp, &err) == BRASA_OK);
    CHECK(gguf_writer_add_tensor(w, "t.f32", GGML_TYPE_F32, 2, ne_f, f32, sizeof f32, &err) == 0);
    CHECK(gguf_writer_write(w, "/nonexistent-dir/x.gguf", &err) == BRASA_EINVAL &&
          strstr(err.msg, "duplicate tensor name 't.f32'"));
    gguf_writer_free(w);

    struct gguf_file *f;
    REQUIRE(gguf_open(&f, tmp, &err) == BRASA_OK);
    uint32_t u;
    int64_t i64;
    float x;
    bool b;
    char *s;
    const void *arr;
    uint64_t n;
    CHECK(f->alignment == 64 && f->data_offset % 64 == 0 && f->n_kv == 9 && f->n_tensors == 2);
    CHECK(gguf_get_u32(f, "a.u32", &u, &err) == 0 && u == 9);
    CHECK(gguf_get_i64(f, "a.neg", &i64, &err) == 0 && i64 == -5);
    CHECK(gguf_get_u32(f, "a.neg", &u, &err) == BRASA_EFORMAT && strstr(err.msg, "out of range"));
    CHECK(gguf_get_i64(f, "a.big", &i64, &err) == 0 && i64 == 1ll << 40);
    CHECK(gguf_get_u32(f, "a.big", &u, &err) == BRASA_EFORMAT && strstr(err.msg, "out of range"));
    CHECK(gguf_get_f32(f, "a.f32", &x, &err) == 0 && x == 0.25f);
    CHECK(gguf_get_bool(f, "a.bool", &b, &err) == 0 && b);
    CHECK(gguf_get_str(f, "a.str", &s, &err) == 0 && !strcmp(s, "héllo"));
    free(s);
    CHECK(gguf_get_arr(f, "a.ints", GGUF_T_INT32, &arr, &n, &err) == 0 && n == 3 &&
          !memcmp(arr, ints, sizeof ints));
    CHECK(gguf_get_arr(f, "a.strs", GGUF_T_STRING, &arr, &n, &err) == 0 && n == 2 &&
          ((const struct gguf_str *)arr)[0].len == 1 && ((const struct gguf_str *)arr)[1].len == 0);
    const struct gguf_tensor *t = gguf_find_tensor(f, "t.q8");
    CHECK(t && t->type == GGML_TYPE_Q8_0 && t->ne[0] == 32 && t->ne[1] == 2 && t->nbytes == 68 &&
          t->offset % 64 == 0);
    t = gguf_find_tensor(f, "t.f32");
    CHECK(t && t->n_dims == 2 && t->ne[2] == 1 && !memcmp(t->data, f32, sizeof f32));
    gguf_close(f);
    remove(tmp);
    free(tmp);
}

/* Thousands of tensors and keys: lookups and duplicate checks go through the hash index and
 * the overlap check sorts, so this stays fast (quadratic checks would take seconds here). */
TEST(many_tensors_and_keys)
{
    enum { NT = 20000, NK = 3000 };
    struct gguf_writer *w;
    struct brasa_err err;
    char *tmp = temp_path(".gguf");
    REQUIRE(gguf_writer_new(&w, &err) == BRASA_OK);
    static float vals[NT];
    char name[64];
    const int64_t ne[1] = {1};
    for (int i = 0; i < NK; i++) {
        snprintf(name, sizeof name, "k.%d", i);
        CHECK(gguf_writer_set_u32(w, name, (uint32_t)i, &err) == BRASA_OK);
    }
    for (int i = 0; i < NT; i++) {
        vals[i] = (float)i;
        snprintf(name, sizeof name, "blk.%d.weight", i);
        CHECK(gguf_writer_add_tensor(w, name, GGML_TYPE_F32, 1, ne, &vals[i], 4, &err) == 0);
    }
    CHECK(gguf_writer_write(w, tmp, &err) == BRASA_OK);
    gguf_writer_free(w);
    struct gguf_file *f;
    REQUIRE(gguf_open(&f, tmp, &err) == BRASA_OK);
    CHECK(f->n_tensors == NT && f->n_kv == NK);
    for (int i = 0; i < NT; i += 97) {
        snprintf(name, sizeof name, "blk.%d.weight", i);
        const struct gguf_tensor *t = gguf_find_tensor(f, name);
        CHECKF(t && *(const float *)t->data == (float)i, "%s", name);
    }
    uint32_t u;
    CHECK(gguf_get_u32(f, "k.2999", &u, &err) == 0 && u == 2999);
    gguf_close(f);
    remove(tmp);
    free(tmp);
}

/* ---- typed getters on a real fixture ---- */

TEST(typed_getters)
{
    const char *path = test_shared_path(BASE_FIXTURE);
    if (!test_file_exists(path))
        SKIP("fixture absent");
    struct gguf_file *f;
    struct brasa_err err;
    REQUIRE(gguf_open(&f, path, &err) == BRASA_OK);
    uint32_t u;
    float x;
    bool b;
    char *s;
    const void *arr;
    uint64_t n;
    CHECK(gguf_get_u32(f, "llama.block_count", &u, &err) == 0 && u == 2);
    CHECK(gguf_get_f32(f, "llama.rope.freq_base", &x, &err) == 0 && x == 10000.0f);
    CHECK(gguf_get_bool(f, "tokenizer.ggml.add_bos_token", &b, &err) == 0 && b);
    CHECK(gguf_get_str(f, "general.architecture", &s, &err) == 0 && !strcmp(s, "llama"));
    free(s);
    CHECK(gguf_get_arr(f, "tokenizer.ggml.tokens", GGUF_T_STRING, &arr, &n, &err) == 0 &&
          n == 1024);
    const struct gguf_str *tok = arr;
    CHECK(tok[1].len == 3 && !memcmp(tok[1].ptr, "<s>", 3));
    CHECK(gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_T_FLOAT32, &arr, &n, &err) == 0 && n == 1024);
    /* missing */
    CHECK(gguf_get_u32(f, "llama.nothing", &u, &err) == BRASA_ENOTFOUND &&
          strstr(err.msg, "'llama.nothing' not found"));
    CHECK(gguf_get_str(f, "nothing", &s, &err) == BRASA_ENOTFOUND && s == NULL);
    /* wrong type */
    CHECK(gguf_get_u32(f, "general.architecture", &u, &err) == BRASA_EFORMAT &&
          strstr(err.msg, "is STRING, expected an integer"));
    CHECK(gguf_get_f32(f, "llama.block_count", &x, &err) == BRASA_EFORMAT &&
          strstr(err.msg, "is UINT32"));
    CHECK(gguf_get_bool(f, "llama.block_count", &b, &err) == BRASA_EFORMAT);
    CHECK(gguf_get_str(f, "tokenizer.ggml.tokens", &s, &err) == BRASA_EFORMAT &&
          strstr(err.msg, "ARRAY of STRING"));
    CHECK(gguf_get_arr(f, "tokenizer.ggml.scores", GGUF_T_INT32, &arr, &n, &err) == BRASA_EFORMAT &&
          strstr(err.msg, "expected an ARRAY of INT32"));
    CHECK(gguf_get_arr(f, "llama.block_count", GGUF_T_INT32, &arr, &n, &err) == BRASA_EFORMAT);
    /* defaults */
    CHECK(gguf_get_u32_or(f, "x.missing", 42, &u, &err) == 0 && u == 42);
    CHECK(gguf_get_u32_or(f, "llama.block_count", 42, &u, &err) == 0 && u == 2);
    CHECK(gguf_get_f32_or(f, "x.missing", 1.5f, &x, &err) == 0 && x == 1.5f);
    CHECK(gguf_get_f32_or(f, "general.name", 1.5f, &x, &err) == BRASA_EFORMAT);
    CHECK(gguf_get_bool_or(f, "x.missing", true, &b, &err) == 0 && b);
    CHECK(gguf_get_bool_or(f, "tokenizer.ggml.add_eos_token", true, &b, &err) == 0 && !b);
    const struct gguf_tensor *t = gguf_find_tensor(f, "token_embd.weight");
    CHECK(t && t->type == GGML_TYPE_Q4_0 && t->n_dims == 2 && t->ne[0] == 256 && t->ne[1] == 1024 &&
          t->nbytes == 1024 * 8 * 18);
    gguf_close(f);
}

/* ---- malformed files ---- */

/* Where the sections and fields of the base fixture are. */
struct layout {
    uint8_t *src;
    size_t size;
    struct gguf_file *f;
    size_t kv_off[64];  /* kv i starts here; kv_off[n_kv] = start of the tensor infos */
    size_t ti_off[64];  /* tensor info i starts here; ti_off[n_tensors] = end of the infos */
};

static size_t kv_val(const struct layout *L, int i) /* offset of kv i's value */
{
    return L->kv_off[i] + 8 + strlen(L->f->kv[i].key) + 4;
}

static size_t ti_dims(const struct layout *L, int i) /* offset of tensor i's n_dims */
{
    return L->ti_off[i] + 8 + strlen(L->f->tensors[i].name);
}

static size_t ti_type(const struct layout *L, int i)
{
    return ti_dims(L, i) + 4 + 8 * (size_t)L->f->tensors[i].n_dims;
}

static int kv_index(const struct layout *L, const char *key)
{
    const struct gguf_kv *kv = gguf_find_kv(L->f, key);
    return kv ? (int)(kv - L->f->kv) : 0;
}

static int t_index(const struct layout *L, const char *name)
{
    const struct gguf_tensor *t = gguf_find_tensor(L->f, name);
    return t ? (int)(t - L->f->tensors) : 0;
}

static bool layout_init(struct layout *L)
{
    struct brasa_err err;
    memset(L, 0, sizeof *L);
    L->src = (uint8_t *)test_read_file(test_shared_path(BASE_FIXTURE), &L->size);
    if (!L->src || gguf_open_mem(&L->f, L->src, L->size, &err) != BRASA_OK)
        return false;
    struct gguf_file *f = L->f;
    if (f->n_kv >= 63 || f->n_tensors >= 63 || f->n_tensors < 4)
        return false;
    for (uint64_t i = 0; i < f->n_kv; i++)
        L->kv_off[i] = f->kv[i].file_offset;
    /* the tensor infos start after the last key/value: find the first tensor's name there */
    const char *name = f->tensors[0].name;
    uint64_t len = strlen(name);
    size_t at = L->kv_off[f->n_kv - 1];
    while (at + 8 + len <= L->size && !(memcmp(L->src + at, &len, 8) == 0 &&
                                        memcmp(L->src + at + 8, name, len) == 0))
        at++;
    L->kv_off[f->n_kv] = L->ti_off[0] = at;
    for (uint64_t i = 0; i < f->n_tensors; i++)
        L->ti_off[i + 1] = ti_type(L, (int)i) + 4 + 8;
    return true;
}

struct bytes {
    uint8_t *p;
    size_t n;
};

static struct bytes prefix(const struct layout *L, size_t n)
{
    struct bytes b = {malloc(n ? n : 1), n};
    memcpy(b.p, L->src, n);
    return b;
}

static struct bytes whole(const struct layout *L)
{
    return prefix(L, L->size);
}

static void set32(struct bytes *b, size_t at, uint32_t v)
{
    memcpy(b->p + at, &v, 4);
}

static void set64(struct bytes *b, size_t at, uint64_t v)
{
    memcpy(b->p + at, &v, 8);
}

/* Inserts n bytes at `at`. */
static void splice(struct bytes *b, size_t at, const void *ins, size_t n)
{
    uint8_t *p = malloc(b->n + n);
    memcpy(p, b->p, at);
    memcpy(p + at, ins, n);
    memcpy(p + at + n, b->p + at, b->n - at);
    free(b->p);
    b->p = p;
    b->n += n;
}

/* A key/value "general.alignment" of the given type and 4-byte value, appended after the last
 * key (n_kv bumped). */
static struct bytes with_alignment(const struct layout *L, uint32_t type, uint32_t v)
{
    struct bytes b = whole(L);
    uint8_t kv[8 + 17 + 4 + 8 + 4];
    uint64_t klen = 17;
    size_t k = 0;
    memcpy(kv, &klen, 8), k += 8;
    memcpy(kv + k, "general.alignment", 17), k += 17;
    memcpy(kv + k, &type, 4), k += 4;
    if (type == GGUF_T_STRING) {
        uint64_t slen = 2;
        memcpy(kv + k, &slen, 8), k += 8;
        memcpy(kv + k, "32", 2), k += 2;
    } else {
        memcpy(kv + k, &v, 4), k += 4;
    }
    splice(&b, L->kv_off[L->f->n_kv], kv, k);
    set64(&b, 16, L->f->n_kv + 1);
    return b;
}

struct mcase {
    const char *name;
    const char *expect; /* substring of the error message */
};

/* Builds malformed case i; returns false past the last one. */
static bool make_case(const struct layout *L, int i, struct bytes *b, struct mcase *c)
{
    const struct gguf_file *f = L->f;
    int scores = kv_index(L, "tokenizer.ggml.scores"), tokens = kv_index(L, "tokenizer.ggml.tokens");
    int bos = kv_index(L, "tokenizer.ggml.bos_token_id"), eos = kv_index(L, "tokenizer.ggml.eos_token_id");
    int addbos = kv_index(L, "tokenizer.ggml.add_bos_token"), name = kv_index(L, "general.name");
    int ctx = kv_index(L, "llama.context_length");
    int t_out = t_index(L, "output.weight"), t_norm = t_index(L, "output_norm.weight");
    int t_emb = t_index(L, "token_embd.weight"), t_k0 = t_index(L, "blk.0.attn_k.weight");
    int t_k1 = t_index(L, "blk.1.attn_k.weight"), t_last = (int)f->n_tensors - 1;
    size_t sk = L->kv_off[scores] + 8 + strlen(f->kv[scores].key); /* scores' value type */
    size_t nt = L->ti_off[0] + 8 + strlen(f->tensors[0].name);     /* tensor 0's n_dims */
    size_t tlen = strlen(f->tensors[t_emb].name);
    uint64_t big = 1ull << 62;
    switch (i) {
    /* truncated at section boundaries and mid-field */
    case 0: *c = (struct mcase){"empty file", "too short for the 4-byte magic"}; *b = prefix(L, 0); break;
    case 1: *c = (struct mcase){"cut in magic", "too short for the 4-byte magic"}; *b = prefix(L, 3); break;
    case 2: *c = (struct mcase){"cut after magic", "version needs 4 bytes"}; *b = prefix(L, 4); break;
    case 3: *c = (struct mcase){"cut in version", "version needs 4 bytes"}; *b = prefix(L, 6); break;
    case 4: *c = (struct mcase){"cut in tensor count", "tensor count needs 8 bytes"}; *b = prefix(L, 13); break;
    case 5: *c = (struct mcase){"cut in kv count", "key/value count needs 8 bytes"}; *b = prefix(L, 20); break;
    case 6: *c = (struct mcase){"cut after header", "key/value count 27 cannot fit in the 0 bytes"}; *b = prefix(L, 24); break;
    case 7: *c = (struct mcase){"cut in first key", "key/value count 27 cannot fit"}; *b = prefix(L, 30); break;
    case 8: *c = (struct mcase){"cut at a kv boundary", "key/value 17: key name needs 8 bytes"}; *b = prefix(L, L->kv_off[scores]); break;
    case 9: *c = (struct mcase){"cut in key length", "key/value 17: key name needs 8 bytes"}; *b = prefix(L, L->kv_off[scores] + 5); break;
    case 10: *c = (struct mcase){"cut in key name", "key/value 17: key name has length 21 but only 4 bytes remain"}; *b = prefix(L, L->kv_off[scores] + 12); break;
    case 11: *c = (struct mcase){"cut before value type", "key 'tokenizer.ggml.scores': value type needs 4 bytes"}; *b = prefix(L, sk); break;
    case 12: *c = (struct mcase){"cut in value type", "key 'tokenizer.ggml.scores': value type needs 4 bytes"}; *b = prefix(L, sk + 2); break;
    case 13: *c = (struct mcase){"cut before element type", "array element type needs 4 bytes"}; *b = prefix(L, sk + 4); break;
    case 14: *c = (struct mcase){"cut in array length", "array length needs 8 bytes"}; *b = prefix(L, sk + 8 + 3); break;
    case 15: *c = (struct mcase){"cut in array data", "array of 1024 FLOAT32 elements does not fit in the 100 bytes"}; *b = prefix(L, sk + 16 + 100); break;
    case 16: *c = (struct mcase){"cut in last string of an array", "string 1023 of the array has length"}; *b = prefix(L, L->kv_off[tokens + 1] - 2); break;
    case 17: *c = (struct mcase){"cut in a u32 value", "key 'tokenizer.ggml.bos_token_id': value needs 4 bytes"}; *b = prefix(L, kv_val(L, bos) + 2); break;
    case 18: *c = (struct mcase){"cut before a bool value", "key 'tokenizer.ggml.add_bos_token': value needs 1 bytes"}; *b = prefix(L, kv_val(L, addbos)); break;
    case 19: *c = (struct mcase){"cut at the tensor infos", "tensor info 0: tensor name needs 8 bytes"}; *b = prefix(L, L->ti_off[0]); break;
    case 20: *c = (struct mcase){"cut in a tensor name", "tensor info 0: tensor name has length 13 but only 3"}; *b = prefix(L, L->ti_off[0] + 11); break;
    case 21: *c = (struct mcase){"cut before n_dims", "tensor 'output.weight': n_dims needs 4 bytes"}; *b = prefix(L, nt); break;
    case 22: *c = (struct mcase){"cut in a dimension", "tensor 'output.weight': dimension needs 8 bytes"}; *b = prefix(L, nt + 4 + 8 + 5); break;
    case 23: *c = (struct mcase){"cut in tensor type", "tensor 'output.weight': type needs 4 bytes"}; *b = prefix(L, nt + 4 + 16 + 1); break;
    case 24: *c = (struct mcase){"cut in tensor offset", "tensor 'output.weight': data offset needs 8 bytes"}; *b = prefix(L, nt + 4 + 16 + 4 + 7); break;
    case 25: *c = (struct mcase){"cut at a tensor info boundary", "tensor info 5: tensor name needs 8 bytes"}; *b = prefix(L, L->ti_off[5]); break;
    case 26: *c = (struct mcase){"cut after the tensor infos", "ends inside the padding before the data section"}; *b = prefix(L, L->ti_off[f->n_tensors]); break;
    case 27: *c = (struct mcase){"cut at the data section", "tensor 'output.weight': data [0, +215040 bytes) runs past the end of the data section (0 bytes"}; *b = prefix(L, f->data_offset); break;
    case 28: *c = (struct mcase){"cut in the first tensor's data", "tensor 'output.weight': data [0, +215040 bytes) runs past"}; *b = prefix(L, f->data_offset + 1000); break;
    case 29: *c = (struct mcase){"last byte missing", "tensor 'blk.1.ffn_up.weight': data"}; *b = prefix(L, L->size - 1); break;
    /* header */
    case 30: *c = (struct mcase){"bad magic", "byte 0: bad magic 47 47 4d 4c"}; *b = whole(L); memcpy(b->p, "GGML", 4); break;
    case 31: *c = (struct mcase){"zero magic", "bad magic 00 00 00 00"}; *b = whole(L); memset(b->p, 0, 4); break;
    case 32: *c = (struct mcase){"version 1", "GGUF version 1 is not supported"}; *b = whole(L); set32(b, 4, 1); break;
    case 33: *c = (struct mcase){"version 4", "GGUF version 4 is not supported"}; *b = whole(L); set32(b, 4, 4); break;
    case 34: *c = (struct mcase){"version 0", "GGUF version 0 is not supported"}; *b = whole(L); set32(b, 4, 0); break;
    case 35: *c = (struct mcase){"big-endian version", "GGUF version 50331648 is not supported"}; *b = whole(L); set32(b, 4, 0x03000000); break;
    case 36: *c = (struct mcase){"absurd tensor count", "tensor count 4611686018427387904 cannot fit"}; *b = whole(L); set64(b, 8, big); break;
    case 37: *c = (struct mcase){"max tensor count", "tensor count 18446744073709551615 cannot fit"}; *b = whole(L); set64(b, 8, UINT64_MAX); break;
    case 38: *c = (struct mcase){"absurd kv count", "key/value count 1099511627776 cannot fit"}; *b = whole(L); set64(b, 16, 1ull << 40); break;
    case 39: *c = (struct mcase){"one tensor too many", "tensor info 21: tensor name is empty"}; *b = whole(L); set64(b, 8, f->n_tensors + 1); break;
    /* key/values */
    case 40: *c = (struct mcase){"absurd key length", "key/value 3: key name has length 4611686018427387904 but only"}; *b = whole(L); set64(b, L->kv_off[3], big); break;
    case 41: *c = (struct mcase){"empty key", "key/value 3: key name is empty"}; *b = whole(L); set64(b, L->kv_off[3], 0); break;
    case 42: *c = (struct mcase){"non-UTF-8 key (0xff)", "key/value 3: key name 'llama...' is not valid UTF-8 (byte 5 of the name: 0xff)"}; *b = whole(L); b->p[L->kv_off[3] + 8 + 5] = 0xff; break;
    case 43: *c = (struct mcase){"non-UTF-8 key (overlong)", "is not valid UTF-8 (byte 2 of the name: 0xc0)"}; *b = whole(L); b->p[L->kv_off[3] + 10] = 0xc0; b->p[L->kv_off[3] + 11] = 0xae; break;
    case 44: *c = (struct mcase){"non-UTF-8 key (lone continuation)", "not valid UTF-8 (byte 0 of the name: 0x80)"}; *b = whole(L); b->p[L->kv_off[3] + 8] = 0x80; break;
    case 45: *c = (struct mcase){"non-UTF-8 key (surrogate)", "not valid UTF-8 (byte 1 of the name: 0xed)"}; *b = whole(L); memcpy(b->p + L->kv_off[3] + 9, "\xed\xa0\x80", 3); break;
    case 46: *c = (struct mcase){"NUL in key", "(byte 4 of the name: 0x00)"}; *b = whole(L); b->p[L->kv_off[3] + 12] = 0; break;
    case 47: *c = (struct mcase){"duplicate key (renamed)", "duplicate key 'tokenizer.ggml.bos_token_id' (first at byte"}; *b = whole(L); memcpy(b->p + L->kv_off[eos] + 8, f->kv[bos].key, strlen(f->kv[bos].key)); break;
    case 48: *c = (struct mcase){"duplicate key (inserted)", "duplicate key 'llama.context_length'"}; *b = whole(L); splice(b, L->kv_off[ctx + 1], L->src + L->kv_off[ctx], L->kv_off[ctx + 1] - L->kv_off[ctx]); set64(b, 16, f->n_kv + 1); break;
    case 49: *c = (struct mcase){"unknown value type", "key 'llama.context_length': value type 13 is unknown"}; *b = whole(L); set32(b, kv_val(L, ctx) - 4, 13); break;
    case 50: *c = (struct mcase){"huge value type", "value type 4294967295 is unknown"}; *b = whole(L); set32(b, kv_val(L, ctx) - 4, UINT32_MAX); break;
    case 51: *c = (struct mcase){"absurd string length", "key 'general.name': string value has length 4611686018427387904"}; *b = whole(L); set64(b, kv_val(L, name), big); break;
    case 52: *c = (struct mcase){"unknown array element type", "key 'tokenizer.ggml.tokens': array element type 13 is unknown"}; *b = whole(L); set32(b, kv_val(L, tokens), 13); break;
    case 53: *c = (struct mcase){"nested array", "array of arrays (nested arrays are not supported)"}; *b = whole(L); set32(b, kv_val(L, tokens), GGUF_T_ARRAY); break;
    case 54: *c = (struct mcase){"absurd string array length", "array of 4611686018427387904 STRING elements does not fit"}; *b = whole(L); set64(b, kv_val(L, tokens) + 4, big); break;
    case 55: *c = (struct mcase){"absurd float array length", "array of 4611686018427387904 FLOAT32 elements does not fit"}; *b = whole(L); set64(b, kv_val(L, scores) + 4, big); break;
    case 56: *c = (struct mcase){"absurd length of one array string", "string 0 of the array has length 4611686018427387904"}; *b = whole(L); set64(b, kv_val(L, tokens) + 12, big); break;
    case 57: *c = (struct mcase){"bool value 2", "key 'tokenizer.ggml.add_bos_token': bool value is 2"}; *b = whole(L); b->p[kv_val(L, addbos)] = 2; break;
    case 58: *c = (struct mcase){"alignment 0", "key 'general.alignment' is 0; it must be a non-zero power of two"}; *b = with_alignment(L, GGUF_T_UINT32, 0); break;
    case 59: *c = (struct mcase){"alignment 48", "key 'general.alignment' is 48; it must be a non-zero power of two"}; *b = with_alignment(L, GGUF_T_UINT32, 48); break;
    case 60: *c = (struct mcase){"alignment of type STRING", "key 'general.alignment' is STRING; it must be UINT32"}; *b = with_alignment(L, GGUF_T_STRING, 0); break;
    case 61: *c = (struct mcase){"alignment of type FLOAT32", "key 'general.alignment' is FLOAT32"}; *b = with_alignment(L, GGUF_T_FLOAT32, 0x42000000); break;
    /* tensor infos */
    case 62: *c = (struct mcase){"5 dims", "tensor 'output.weight': has 5 dims (must be 1 to 4)"}; *b = whole(L); set32(b, ti_dims(L, t_out), 5); break;
    case 63: *c = (struct mcase){"0 dims", "tensor 'output.weight': has 0 dims"}; *b = whole(L); set32(b, ti_dims(L, t_out), 0); break;
    case 64: *c = (struct mcase){"absurd dims", "has 4294967295 dims"}; *b = whole(L); set32(b, ti_dims(L, t_out), UINT32_MAX); break;
    case 65: *c = (struct mcase){"zero dimension", "tensor 'output.weight': dimension 1 is 0"}; *b = whole(L); set64(b, ti_dims(L, t_out) + 12, 0); break;
    case 66: *c = (struct mcase){"zero row length", "tensor 'token_embd.weight': dimension 0 is 0"}; *b = whole(L); set64(b, ti_dims(L, t_emb) + 4, 0); break;
    case 67: *c = (struct mcase){"overflowing dims", "tensor 'output.weight': element count overflows at dimension 1"}; *b = whole(L); set64(b, ti_dims(L, t_out) + 12, big); break;
    case 68: *c = (struct mcase){"dimension 2^63", "element count overflows at dimension 0"}; *b = whole(L); set64(b, ti_dims(L, t_out) + 4, 1ull << 63); break;
    case 69: *c = (struct mcase){"huge but countable dims", "tensor 'output.weight': data [0, +"}; *b = whole(L); set64(b, ti_dims(L, t_out) + 12, 1ull << 40); break;
    case 70: *c = (struct mcase){"unknown tensor type", "tensor 'token_embd.weight': type 99 is unknown"}; *b = whole(L); set32(b, ti_type(L, t_emb), 99); break;
    case 71: *c = (struct mcase){"removed tensor type Q4_2", "type 4 is unknown"}; *b = whole(L); set32(b, ti_type(L, t_emb), 4); break;
    case 72: *c = (struct mcase){"row not whole Q4_0 blocks", "tensor 'token_embd.weight': row length 100 is not a whole number of Q4_0 blocks of 32"}; *b = whole(L); set64(b, ti_dims(L, t_emb) + 4, 100); break;
    case 73: *c = (struct mcase){"row not whole Q6_K blocks", "row length 128 is not a whole number of Q6_K blocks of 256"}; *b = whole(L); set64(b, ti_dims(L, t_out) + 4, 128); break;
    case 74: *c = (struct mcase){"misaligned offset", "tensor 'output_norm.weight': data offset 215041 is not a multiple of the alignment 32"}; *b = whole(L); set64(b, ti_type(L, t_norm) + 4, 215041); break;
    case 75: *c = (struct mcase){"offset out of bounds", "tensor 'blk.0.attn_k.weight': data [1099511627776, +18432 bytes) runs past the end"}; *b = whole(L); set64(b, ti_type(L, t_k0) + 4, 1ull << 40); break;
    case 76: *c = (struct mcase){"offset near 2^64", "runs past the end of the data section"}; *b = whole(L); set64(b, ti_type(L, t_k0) + 4, UINT64_MAX - 31); break;
    case 77: *c = (struct mcase){"last tensor partly out", "tensor 'blk.1.ffn_up.weight': data"}; *b = whole(L); set64(b, ti_type(L, t_last) + 4, f->tensors[t_last].offset + 64); break;
    case 78: *c = (struct mcase){"overlap (same offset)", "overlaps tensor"}; *b = whole(L); set64(b, ti_type(L, t_norm) + 4, 0); break;
    case 79: *c = (struct mcase){"overlap (inside)", "tensor 'output.weight' (data [0, 215040)) overlaps tensor 'output_norm.weight' (data from 1024)"}; *b = whole(L); set64(b, ti_type(L, t_norm) + 4, 1024); break;
    case 80: *c = (struct mcase){"duplicate tensor name", "duplicate tensor name 'blk.0.attn_k.weight'"}; *b = whole(L); b->p[L->ti_off[t_k1] + 8 + 4] = '0'; break;
    case 81: *c = (struct mcase){"duplicate tensor (inserted)", "duplicate tensor name 'token_embd.weight'"}; *b = whole(L); splice(b, L->ti_off[t_emb + 1], L->src + L->ti_off[t_emb], L->ti_off[t_emb + 1] - L->ti_off[t_emb]); set64(b, 8, f->n_tensors + 1); break;
    case 82: *c = (struct mcase){"non-UTF-8 tensor name", "tensor info 2: tensor name 'token...' is not valid UTF-8"}; *b = whole(L); b->p[L->ti_off[t_emb] + 8 + 5] = 0xfe; break;
    case 83: *c = (struct mcase){"empty tensor name", "tensor info 2: tensor name is empty"}; *b = whole(L); set64(b, L->ti_off[t_emb], 0); break;
    case 84: *c = (struct mcase){"absurd tensor name length", "tensor info 2: tensor name has length 4611686018427387904"}; *b = whole(L); set64(b, L->ti_off[t_emb], big); break;
    case 85: *c = (struct mcase){"tensor name length off by one", "has 0 dims"}; *b = whole(L); set64(b, L->ti_off[t_emb], tlen + 1); break;
    default: return false;
    }
    return true;
}

TEST(malformed_files)
{
    struct layout L;
    if (!test_file_exists(test_shared_path(BASE_FIXTURE)))
        SKIP("fixture absent");
    REQUIRE(layout_init(&L));
    int n = 0;
    struct bytes b;
    struct mcase c;
    for (int i = 0; make_case(&L, i, &b, &c); i++, n++) {
        struct gguf_file *f = NULL;
        struct brasa_err err = {{0}};
        brasa_status st = gguf_open_mem(&f, b.p, b.n, &err);
        CHECKF(st == BRASA_EFORMAT && strstr(err.msg, c.expect), "case %d (%s): got %s '%s', want '%s'",
               i, c.name, brasa_status_name(st), err.msg, c.expect);
        if (getenv("BRASA_TEST_VERBOSE"))
            fprintf(stderr, "  %2d %-36s %s\n", i, c.name, err.msg);
        gguf_close(f);
        free(b.p);
    }
    CHECKF(n >= 80, "%d cases", n);
    gguf_close(L.f);
    free(L.src);
}

/* Version 2 has the same layout as version 3 (64-bit counts and lengths): it reads. */
TEST(version2_reads)
{
    struct layout L;
    if (!test_file_exists(test_shared_path(BASE_FIXTURE)))
        SKIP("fixture absent");
    REQUIRE(layout_init(&L));
    struct bytes b = whole(&L);
    set32(&b, 4, 2);
    struct gguf_file *f;
    struct brasa_err err;
    CHECKF(gguf_open_mem(&f, b.p, b.n, &err) == BRASA_OK, "%s", err.msg);
    CHECK(f->version == 2 && f->n_tensors == L.f->n_tensors && f->n_kv == L.f->n_kv);
    gguf_close(f);
    free(b.p);
    gguf_close(L.f);
    free(L.src);
}

/* gguf_open names the file in its messages. */
TEST(malformed_file_on_disk)
{
    char *tmp = temp_path(".gguf");
    FILE *fp = fopen(tmp, "wb");
    REQUIRE(fp);
    fwrite("GGUF\x01\0\0\0", 1, 8, fp);
    fclose(fp);
    struct gguf_file *f;
    struct brasa_err err;
    CHECK(gguf_open(&f, tmp, &err) == BRASA_EFORMAT && strstr(err.msg, tmp) &&
          strstr(err.msg, "version 1"));
    CHECK(gguf_open(&f, "/nonexistent/x.gguf", &err) == BRASA_EIO);
    remove(tmp);
    free(tmp);
}

/* Random byte changes and cuts in the metadata of a valid file: an error or a valid file whose
 * tensors all lie inside the buffer (ASan checks the reads), never a crash. */
TEST(random_corruption)
{
    struct layout L;
    if (!test_file_exists(test_shared_path(BASE_FIXTURE)))
        SKIP("fixture absent");
    REQUIRE(layout_init(&L));
    unsigned long long s = test_seed();
    size_t meta = L.f->data_offset;
    int ok = 0, bad = 0;
    /* one buffer, each input placed at its end so that ASan sees any read past the input */
    uint8_t *buf = malloc(L.size);
    for (int it = 0; it < 1500; it++) {
        size_t n = L.size;
        if (test_rand_u64(&s) % 4 == 0)
            n = (size_t)(test_rand_u64(&s) % (L.size + 1));
        uint8_t *p = buf + (L.size - n);
        memcpy(p, L.src, n);
        int flips = 1 + (int)(test_rand_u64(&s) % 8);
        for (int k = 0; k < flips && n; k++) {
            size_t at = (size_t)(test_rand_u64(&s) % (meta < n ? meta : n));
            p[at] = (test_rand_u64(&s) & 1) ? (uint8_t)test_rand_u64(&s) : p[at] ^ 0x80;
        }
        struct gguf_file *f;
        struct brasa_err err;
        brasa_status st = gguf_open_mem(&f, p, n, &err);
        CHECKF(st == BRASA_OK || st == BRASA_EFORMAT, "iteration %d: %s", it, err.msg);
        if (st == BRASA_OK) {
            uint64_t sum = 0;
            for (uint64_t i = 0; i < f->n_tensors; i++) {
                const uint8_t *d = f->tensors[i].data;
                sum += d[0] + d[f->tensors[i].nbytes - 1];
            }
            (void)sum;
            gguf_close(f);
            ok++;
        } else {
            bad++;
        }
    }
    free(buf);
    CHECK(bad > 0 && ok > 0);
    gguf_close(L.f);
    free(L.src);
}

/* ---- brasa inspect, end to end ---- */

/* Runs a shell command; returns its stdout (malloc'd) and exit status. */
static char *run_cmd(const char *cmd, int *status)
{
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    size_t k;
    while ((k = fread(buf + n, 1, cap - n, p)) > 0) {
        n += k;
        if (n == cap)
            buf = realloc(buf, (cap *= 2) + 1);
    }
    buf[n] = 0;
    int st = pclose(p);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}

/* Structural JSON check: brackets balance outside strings, strings close, escapes are valid. */
static bool json_balanced(const char *s)
{
    char stack[64];
    int depth = 0;
    for (; *s; s++) {
        if (*s == '"') {
            for (s++; *s && *s != '"'; s++) {
                if ((unsigned char)*s < 0x20)
                    return false;
                if (*s == '\\') {
                    s++;
                    if (!*s || !strchr("\"\\/bfnrtu", *s))
                        return false;
                }
            }
            if (!*s)
                return false;
        } else if (*s == '{' || *s == '[') {
            if (depth == 64)
                return false;
            stack[depth++] = *s;
        } else if (*s == '}' || *s == ']') {
            if (!depth || stack[--depth] != (*s == '}' ? '{' : '['))
                return false;
        }
    }
    return depth == 0;
}

TEST(inspect_cli)
{
    const char *path = test_shared_path(BASE_FIXTURE);
    if (!test_file_exists(path))
        SKIP("fixture absent");
    if (access(test_brasa_bin(), X_OK))
        SKIP("brasa binary not built");
    char cmd[8192];
    int rc;
    snprintf(cmd, sizeof cmd, "%s inspect '%s'", test_brasa_bin(), path);
    char *out = run_cmd(cmd, &rc);
    REQUIRE(out);
    CHECKF(rc == 0, "rc %d", rc);
    CHECK(strstr(out, "GGUF v3"));
    CHECK(strstr(out, "tokenizer.ggml.tokens") && strstr(out, "STRING[1024]") &&
          strstr(out, "\"<unk>\", \"<s>\""));
    CHECK(strstr(out, "blk.1.ffn_up.weight") && strstr(out, "[256, 768]"));
    CHECK(strstr(out, "Q4_0") && strstr(out, "15 tensors"));
    CHECK(strstr(out, "hyper-parameters (llama)") && strstr(out, "KV heads"));
    free(out);

    snprintf(cmd, sizeof cmd, "%s inspect '%s' --json", test_brasa_bin(), path);
    out = run_cmd(cmd, &rc);
    REQUIRE(out);
    CHECKF(rc == 0, "rc %d", rc);
    CHECK(json_balanced(out));
    const char *keys[] = {"\"metadata\"", "\"tensors\"", "\"totals\"", "\"hparams\"",
                          "\"kv_heads\": 2", "\"layers\": 2", "\"vocab_size\": 1024",
                          "\"elem_type\": \"STRING\"", "\"length\": 1024",
                          "\"name\": \"token_embd.weight\""};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        CHECKF(strstr(out, keys[i]), "missing %s", keys[i]);
    free(out);

    /* a bad file: the reader's message, exit 1 */
    char *tmp = temp_path(".gguf");
    FILE *fp = fopen(tmp, "wb");
    REQUIRE(fp);
    fwrite("GGUF\x04\0\0\0", 1, 8, fp);
    fclose(fp);
    snprintf(cmd, sizeof cmd, "%s inspect '%s' 2>&1", test_brasa_bin(), tmp);
    out = run_cmd(cmd, &rc);
    CHECKF(rc == 1 && out && strstr(out, "GGUF version 4 is not supported"), "rc %d: %s", rc, out);
    free(out);
    remove(tmp);
    free(tmp);
}

static char all_cmd[65536];
static int all_n;

static void add_path(const char *path)
{
    size_t k = strlen(all_cmd);
    snprintf(all_cmd + k, sizeof all_cmd - k, " '%s'", path);
    all_n++;
}

static int count_str(const char *s, const char *sub)
{
    int n = 0;
    for (; (s = strstr(s, sub)); s++)
        n++;
    return n;
}

/* Every shared file inspects, as text and as JSON (one process each, for speed). */
TEST(inspect_all_shared_files)
{
    if (access(test_brasa_bin(), X_OK))
        SKIP("brasa binary not built");
    for (int json = 0; json < 2; json++) {
        snprintf(all_cmd, sizeof all_cmd, "%s inspect%s", test_brasa_bin(), json ? " --json" : "");
        all_n = 0;
        each_gguf("fixtures", add_path);
        each_gguf("vocab", add_path);
        each_gguf("models", add_path);
        if (!all_n)
            SKIP("no shared .gguf files");
        int rc;
        char *out = run_cmd(all_cmd, &rc);
        REQUIRE(out);
        CHECKF(rc == 0, "rc %d", rc);
        if (json) {
            CHECK(out[0] == '[' && json_balanced(out));
            CHECKF(count_str(out, "\"hparams\": {") == all_n, "%d files", all_n);
        } else {
            CHECKF(count_str(out, "hyper-parameters (") == all_n, "%d files", all_n);
        }
        free(out);
    }
}

/* --dump writes ggml-order float32: F32 tensors come back as their bytes. */
TEST(inspect_dump_f32)
{
    const char *path = test_shared_path(BASE_FIXTURE);
    if (!test_file_exists(path) || access(test_brasa_bin(), X_OK))
        SKIP("fixture or binary absent");
    struct gguf_file *f;
    struct brasa_err err;
    REQUIRE(gguf_open(&f, path, &err) == BRASA_OK);
    const struct gguf_tensor *t = gguf_find_tensor(f, "blk.0.attn_norm.weight");
    REQUIRE(t && t->type == GGML_TYPE_F32);
    char *tmp = temp_path(".f32");
    char cmd[8192];
    int rc;
    snprintf(cmd, sizeof cmd, "%s inspect '%s' --tensor blk.0.attn_norm.weight --dump '%s'",
             test_brasa_bin(), path, tmp);
    free(run_cmd(cmd, &rc));
    CHECK(rc == 0);
    size_t n = 0;
    char *d = test_read_file(tmp, &n);
    CHECK(d && n == t->nbytes && !memcmp(d, t->data, n));
    free(d);
    snprintf(cmd, sizeof cmd, "%s inspect '%s' --tensor no.such --dump '%s' 2>&1", test_brasa_bin(),
             path, tmp);
    char *out = run_cmd(cmd, &rc);
    CHECK(rc == 1 && out && strstr(out, "no tensor 'no.such'"));
    free(out);
    remove(tmp);
    free(tmp);
    gguf_close(f);
}

TEST_MAIN(T(shared_files_parse), T(writer_roundtrip_fixtures), T(writer_api), T(many_tensors_and_keys), T(typed_getters),
          T(malformed_files), T(version2_reads), T(malformed_file_on_disk), T(random_corruption), T(inspect_cli), T(inspect_all_shared_files),
          T(inspect_dump_f32))
