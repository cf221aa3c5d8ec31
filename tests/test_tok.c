/* Tokenizers and chat templates: every vocabulary test vector in ../shared/vocab, the
 * fixtures' prompt token ids, round trips and streaming detokenization on random UTF-8,
 * the built-in chat templates, and `brasa tokenize` / `brasa detokenize` end to end. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gguf/gguf.h"
#include "json_mini.h"
#include "test.h"
#include "tok/tok.h"
#include "tok/tok_impl.h"

/* ---- helpers ---- */

struct strs {
    char **s;
    size_t *len;
    size_t n;
};

static void strs_free(struct strs *a)
{
    for (size_t i = 0; i < a->n; i++)
        free(a->s[i]);
    free(a->s);
    free(a->len);
    memset(a, 0, sizeof *a);
}

static void strs_add(struct strs *a, const char *p, size_t n)
{
    a->s = realloc(a->s, (a->n + 1) * sizeof *a->s);
    a->len = realloc(a->len, (a->n + 1) * sizeof *a->len);
    a->s[a->n] = malloc(n + 1);
    memcpy(a->s[a->n], p, n);
    a->s[a->n][n] = 0;
    a->len[a->n++] = n;
}

/* .inp: strings each followed by "\n__ggml_vocab_test__\n" */
static int read_inp(const char *path, struct strs *out)
{
    size_t size;
    char *d = test_read_file(path, &size);
    if (!d)
        return -1;
    static const char sep[] = "\n__ggml_vocab_test__\n";
    size_t sl = sizeof sep - 1, at = 0;
    while (at < size) {
        char *m = memmem(d + at, size - at, sep, sl);
        if (!m)
            break;
        strs_add(out, d + at, (size_t)(m - (d + at)));
        at = (size_t)(m - d) + sl;
    }
    free(d);
    return 0;
}

/* .out: one line of space-separated ids per string */
static int read_out(const char *path, struct strs *out)
{
    size_t size;
    char *d = test_read_file(path, &size);
    if (!d)
        return -1;
    size_t at = 0;
    while (at < size) {
        char *nl = memchr(d + at, '\n', size - at);
        size_t e = nl ? (size_t)(nl - d) : size;
        strs_add(out, d + at, e - at);
        at = e + 1;
    }
    free(d);
    return 0;
}

static size_t parse_ids(const char *s, int32_t *ids, size_t cap)
{
    size_t n = 0;
    char *end;
    for (;;) {
        long v = strtol(s, &end, 10);
        if (end == s)
            break;
        if (n < cap)
            ids[n] = (int32_t)v;
        n++;
        s = end;
    }
    return n;
}

static int32_t ids_buf[1 << 16];

static void print_ids(const char *what, const int32_t *ids, size_t n)
{
    fprintf(stderr, "    %s:", what);
    for (size_t i = 0; i < n && i < 64; i++)
        fprintf(stderr, " %d", ids[i]);
    fputc('\n', stderr);
}

/* Streams ids through tok_stream_push and returns the malloc'd text. */
static char *stream_text(const struct tokenizer *t, const int32_t *ids, size_t n, size_t *len)
{
    size_t cap = 1024, k = 0;
    char *out = malloc(cap);
    struct tok_stream st;
    tok_stream_init(&st);
    for (size_t i = 0; i <= n; i++) {
        const char *piece = i < n ? tok_text(t, ids[i]) : "";
        size_t need = strlen(piece) * 4 + 64;
        if (k + need > cap) {
            cap = (k + need) * 2;
            out = realloc(out, cap);
        }
        k += i < n ? tok_stream_push(t, &st, ids[i], out + k, cap - k) : tok_stream_flush(&st, out + k, cap - k);
    }
    out[k < cap ? k : cap - 1] = 0;
    *len = k;
    return out;
}

static int is_valid_utf8(const char *s, size_t n)
{
    return gguf_utf8_invalid_at(s, n) < 0 || memchr(s, 0, n) != NULL;
}

/* ---- vocabulary vectors ---- */

struct vocab_result {
    int pass, total, rt_pass, rt_total;
};

static void run_set(const struct tokenizer *t, const char *name, const char *suffix, int flags,
                    struct vocab_result *r)
{
    char inp[8192], outp[8300];
    snprintf(inp, sizeof inp, "%s", test_shared_path("vocab"));
    snprintf(inp + strlen(inp), sizeof inp - strlen(inp), "/ggml-vocab-%s.%s.inp", name, suffix);
    snprintf(outp, sizeof outp, "%.*s.out", (int)(strlen(inp) - 4), inp);
    struct strs in = {0}, ex = {0};
    if (read_inp(inp, &in) || read_out(outp, &ex)) {
        strs_free(&in);
        strs_free(&ex);
        return;
    }
    CHECKF(in.n == ex.n, "%s: %zu strings but %zu id lines", inp, in.n, ex.n);
    for (size_t i = 0; i < in.n && i < ex.n; i++) {
        int32_t *ids;
        size_t n;
        struct brasa_err err;
        size_t ne = parse_ids(ex.s[i], ids_buf, sizeof ids_buf / sizeof ids_buf[0]);
        r->total++;
        if (tok_encode(t, in.s[i], in.len[i], flags, &ids, &n, &err)) {
            CHECKF(0, "%s/%s #%zu: %s", name, suffix, i, err.msg);
            continue;
        }
        bool ok = n == ne && memcmp(ids, ids_buf, n * sizeof *ids) == 0;
        if (ok)
            r->pass++;
        else {
            CHECKF(ok, "%s/%s #%zu: ids differ for \"%.60s\"", name, suffix, i, in.s[i]);
            print_ids("expected", ids_buf, ne);
            print_ids("got     ", ids, n);
        }
        /* byte-level BPE and SentencePiece are lossless: streaming the ids gives the text back */
        if (strcmp(tok_pre_name(t), "wpm") != 0 && is_valid_utf8(in.s[i], in.len[i]) && !(flags & TOK_PARSE_SPECIAL)) {
            size_t dl;
            char *d = stream_text(t, ids, n, &dl);
            r->rt_total++;
            if (dl == in.len[i] && memcmp(d, in.s[i], dl) == 0)
                r->rt_pass++;
            else
                CHECKF(0, "%s/%s #%zu: round trip gives \"%.60s\" for \"%.60s\"", name, suffix, i, d, in.s[i]);
            free(d);
        }
        free(ids);
    }
    strs_free(&in);
    strs_free(&ex);
}

TEST(vocab_vectors)
{
    DIR *dir = opendir(test_shared_path("vocab"));
    if (!dir)
        SKIP("no ../shared/vocab");
    char names[64][64];
    int nn = 0;
    struct dirent *de;
    while ((de = readdir(dir)) && nn < 64) {
        size_t l = strlen(de->d_name);
        if (strncmp(de->d_name, "ggml-vocab-", 11) == 0 && l > 16 && strcmp(de->d_name + l - 5, ".gguf") == 0)
            snprintf(names[nn++], sizeof names[0], "%.*s", (int)(l - 16), de->d_name + 11);
    }
    closedir(dir);
    qsort(names, (size_t)nn, sizeof names[0], (int (*)(const void *, const void *))strcmp);
    int all = 0, all_pass = 0;
    for (int v = 0; v < nn; v++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", test_shared_path("vocab"), names[v]);
        struct gguf_file *f;
        struct tokenizer *t;
        struct brasa_err err;
        if (gguf_open(&f, path, &err)) {
            CHECKF(0, "%s: %s", path, err.msg);
            continue;
        }
        if (tok_load(&t, f, 0, &err)) {
            CHECKF(0, "%s: %s", names[v], err.msg);
            gguf_close(f);
            continue;
        }
        struct vocab_result r[3] = {{0}};
        run_set(t, names[v], "gguf", 0, &r[0]);
        run_set(t, names[v], "extra", 0, &r[1]);
        run_set(t, names[v], "extra-special", TOK_PARSE_SPECIAL, &r[2]);
        int p = r[0].pass + r[1].pass + r[2].pass, tot = r[0].total + r[1].total + r[2].total;
        printf("  vocab %-15s %-15s upstream %2d/%2d  extra %2d/%2d  extra-special %2d/%2d  round trip %d/%d\n",
               names[v], tok_pre_name(t), r[0].pass, r[0].total, r[1].pass, r[1].total, r[2].pass, r[2].total,
               r[0].rt_pass + r[1].rt_pass, r[0].rt_total + r[1].rt_total);
        all += tot;
        all_pass += p;
        tok_free(t);
        gguf_close(f);
    }
    printf("  vocab vectors: %d/%d strings give the expected ids\n", all_pass, all);
}


/* ---- fixtures: prompt token ids ---- */

static struct tokenizer *load_tok(const char *path, struct gguf_file **f)
{
    struct brasa_err err;
    struct tokenizer *t = NULL;
    if (gguf_open(f, path, &err)) {
        CHECKF(0, "%s: %s", path, err.msg);
        return NULL;
    }
    if (tok_load(&t, *f, 0, &err)) {
        CHECKF(0, "%s: %s", path, err.msg);
        gguf_close(*f);
        return NULL;
    }
    return t;
}

TEST(fixture_prompt_ids)
{
    const char *dirpath = test_shared_path("fixtures");
    char dirbuf[4096];
    snprintf(dirbuf, sizeof dirbuf, "%s", dirpath);
    DIR *d = opendir(dirbuf);
    if (!d)
        SKIP("no ../shared/fixtures");
    struct dirent *e;
    int files = 0, prompts = 0, pass = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 13 || strcmp(e->d_name + l - 13, ".prompts.json"))
            continue;
        char path[8192];
        snprintf(path, sizeof path, "%s/%s", dirbuf, e->d_name);
        size_t size;
        char *txt = test_read_file(path, &size);
        struct jm *j = txt ? jm_parse(txt, size) : NULL;
        free(txt);
        REQUIRE(j);
        const struct jm *mf = jm_get(j, "model_file");
        REQUIRE(mf && mf->type == JM_STR);
        snprintf(path, sizeof path, "%s/%s", dirbuf, mf->str);
        struct gguf_file *f;
        struct tokenizer *t = load_tok(path, &f);
        if (!t) {
            jm_free(j);
            continue;
        }
        files++;
        const struct jm *ps = jm_get(j, "prompts");
        for (size_t i = 0; ps && i < ps->n; i++) {
            const struct jm *p = jm_at(ps, i), *text = jm_get(p, "text"), *gold = jm_get(p, "token_ids");
            int32_t *ids;
            size_t n;
            struct brasa_err err;
            prompts++;
            if (tok_encode(t, text->str, text->len, TOK_ADD_SPECIAL | TOK_PARSE_SPECIAL, &ids, &n, &err)) {
                CHECKF(0, "%s: %s", e->d_name, err.msg);
                continue;
            }
            bool ok = n == gold->n;
            for (size_t k = 0; ok && k < n; k++)
                ok = ids[k] == jm_int(jm_at(gold, k), -1);
            pass += ok;
            CHECKF(ok, "%s prompt '%s': %zu ids, golden %zu", e->d_name, jm_get(p, "label")->str, n, gold->n);
            if (!ok)
                print_ids("got", ids, n);
            free(ids);
        }
        tok_free(t);
        gguf_close(f);
        jm_free(j);
    }
    closedir(d);
    CHECK(files > 0);
    printf("  fixture prompts: %d/%d give the golden ids (%d files)\n", pass, prompts, files);
}

/* ---- random UTF-8: round trips and streaming ---- */

static size_t put_cp(char *o, uint32_t cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* random valid UTF-8 mixing ASCII words, spaces, Latin, CJK and 4-byte emoji */
static size_t rand_utf8(unsigned long long *rs, char *o, size_t max_cps)
{
    size_t n = 0, k = 1 + test_rand_u64(rs) % max_cps;
    for (size_t i = 0; i < k; i++) {
        uint64_t r = test_rand_u64(rs) % 100;
        uint32_t cp;
        if (r < 45)
            cp = (uint32_t)(0x20 + test_rand_u64(rs) % 95);
        else if (r < 55)
            cp = " \n\t"[test_rand_u64(rs) % 3];
        else if (r < 70)
            cp = (uint32_t)(0xA0 + test_rand_u64(rs) % 0x700);
        else if (r < 85)
            cp = (uint32_t)(0x3000 + test_rand_u64(rs) % 0x7000);
        else
            cp = (uint32_t)(0x1F300 + test_rand_u64(rs) % 0x300);
        n += put_cp(o + n, cp);
    }
    return n;
}

TEST(random_utf8_round_trip)
{
    static const char *const vocabs[] = {"gpt-2", "llama-spm", "starcoder", "deepseek-llm", "falcon"};
    unsigned long long rs = test_seed();
    int tried = 0;
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", test_shared_path("vocab"), vocabs[v]);
        if (!test_file_exists(path))
            continue;
        struct gguf_file *f;
        struct tokenizer *t = load_tok(path, &f);
        if (!t)
            continue;
        tried++;
        for (int it = 0; it < 60; it++) {
            char s[4096];
            size_t n = rand_utf8(&rs, s, 400);
            int32_t *ids;
            size_t ni;
            struct brasa_err err;
            REQUIRE(tok_encode(t, s, n, 0, &ids, &ni, &err) == BRASA_OK);
            size_t dl;
            char *d = stream_text(t, ids, ni, &dl);
            CHECKF(dl == n && memcmp(d, s, n) == 0, "%s: round trip differs (%zu vs %zu bytes)", vocabs[v], dl, n);
            free(d);
            free(ids);
        }
        tok_free(t);
        gguf_close(f);
    }
    if (!tried)
        SKIP("no vocabularies");
}

/* Reference sanitiser: valid sequences kept, each maximal invalid subpart -> U+FFFD. */
static size_t sanitize(const unsigned char *s, size_t n, char *o)
{
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        int need = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3
                                                      : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
        if (need == 1) {
            o[k++] = (char)c;
            i++;
            continue;
        }
        int got = need ? 1 : 0;
        while (need && got < need && i + (size_t)got < n) {
            unsigned char b = s[i + (size_t)got];
            unsigned char lo = 0x80, hi = 0xBF;
            if (got == 1) {
                if (c == 0xE0) lo = 0xA0;
                if (c == 0xED) hi = 0x9F;
                if (c == 0xF0) lo = 0x90;
                if (c == 0xF4) hi = 0x8F;
            }
            if (b < lo || b > hi)
                break;
            got++;
        }
        if (need && got == need) {
            memcpy(o + k, s + i, (size_t)need);
            k += (size_t)need;
            i += (size_t)need;
        } else {
            memcpy(o + k, "\xef\xbf\xbd", 3);
            k += 3;
            i += got ? (size_t)got : 1;
        }
    }
    return k;
}

TEST(stream_holds_and_replaces)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/ggml-vocab-llama-spm.gguf", test_shared_path("vocab"));
    if (!test_file_exists(path))
        SKIP("no llama-spm vocabulary");
    struct gguf_file *f;
    struct tokenizer *t = load_tok(path, &f);
    REQUIRE(t);
    unsigned long long rs = test_seed() ^ 0x5eed;
    /* SentencePiece byte fallback turns any bytes into tokens whose pieces are those bytes */
    for (int it = 0; it < 300; it++) {
        unsigned char s[600];
        size_t n = 0;
        while (n < 500) {
            uint64_t r = test_rand_u64(&rs) % 10;
            if (r < 6) {
                char tmp[8];
                size_t k = rand_utf8(&rs, tmp, 1);
                memcpy(s + n, tmp, k);
                n += k;
            } else if (r < 8) {
                s[n++] = (unsigned char)(0x80 + test_rand_u64(&rs) % 0x80); /* stray byte */
            } else { /* a truncated multi-byte sequence */
                char tmp[8];
                size_t k = put_cp(tmp, (uint32_t)(0x800 + test_rand_u64(&rs) % 0x10000));
                size_t cut = 1 + test_rand_u64(&rs) % (k - 1);
                memcpy(s + n, tmp, cut);
                n += cut;
            }
        }
        /* no spaces: a stray lead byte would swallow a following escaped space into a byte run,
         * which then prints as U+2581 (as the reference does) */
        for (size_t i = 0; i < n; i++)
            if (s[i] == ' ')
                s[i] = '_';
        /* nor U+2581 itself (random characters, or a cut sequence and stray bytes, can make
         * it): SentencePiece prints it as a space, as the reference does */
        for (size_t i = 0; i + 2 < n; i++)
            if (s[i] == 0xe2 && s[i + 1] == 0x96 && s[i + 2] == 0x81)
                s[i] = s[i + 1] = s[i + 2] = '_';
        int32_t *ids;
        size_t ni;
        struct brasa_err err;
        REQUIRE(tok_encode(t, (const char *)s, n, 0, &ids, &ni, &err) == BRASA_OK);
        char *want = malloc(n * 3 + 4);
        size_t wl = sanitize(s, n, want);
        char *got = malloc(n * 3 + 64 * ni + 64);
        size_t gl = 0;
        struct tok_stream st;
        tok_stream_init(&st);
        for (size_t i = 0; i <= ni; i++) {
            size_t k = i < ni ? tok_stream_push(t, &st, ids[i], got + gl, 64) : tok_stream_flush(&st, got + gl, 64);
            /* never half a sequence: each chunk is valid UTF-8 on its own */
            CHECKF(gguf_utf8_invalid_at(got + gl, k) < 0 || memchr(got + gl, 0, k), "chunk %zu is not valid UTF-8",
                   i);
            gl += k;
        }
        size_t at = 0;
        while (at < gl && at < wl && got[at] == want[at])
            at++;
        CHECKF(gl == wl && at == wl, "stream output differs from the sanitised input at byte %zu of %zu/%zu: got %02x %02x %02x, want %02x %02x %02x",
               at, gl, wl, (unsigned char)got[at], (unsigned char)got[at + 1], (unsigned char)got[at + 2],
               (unsigned char)want[at], (unsigned char)want[at + 1], (unsigned char)want[at + 2]);
        free(want);
        free(got);
        free(ids);
    }
    /* a 4-byte character split over byte tokens is held until complete */
    static const char emoji[] = "\xf0\x9f\x98\x80";
    struct tok_stream st;
    tok_stream_init(&st);
    char out[64];
    size_t total = 0;
    for (int i = 0; i < 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", (unsigned char)emoji[i]);
        int32_t id = -1;
        for (int32_t k = 0; k < tok_n_vocab(t); k++)
            if (!strcmp(tok_text(t, k), name))
                id = k;
        REQUIRE(id >= 0);
        size_t k = tok_stream_push(t, &st, id, out + total, sizeof out - total);
        CHECKF(i < 3 ? k == 0 : k == 4, "byte %d gave %zu bytes", i, k);
        total += k;
    }
    CHECK(total == 4 && memcmp(out, emoji, 4) == 0);
    CHECK(tok_stream_flush(&st, out, sizeof out) == 0);
    tok_free(t);
    gguf_close(f);
}

/* arbitrary bytes never break the tokenizers, and every id decodes */
TEST(random_bytes)
{
    static const char *const vocabs[] = {"gpt-2", "bert-bge", "deepseek-coder", "deepseek-llm", "phi-3", "mpt"};
    unsigned long long rs = test_seed() ^ 0xb17e5;
    int tried = 0;
    for (size_t v = 0; v < sizeof vocabs / sizeof vocabs[0]; v++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", test_shared_path("vocab"), vocabs[v]);
        if (!test_file_exists(path))
            continue;
        struct gguf_file *f;
        struct tokenizer *t = load_tok(path, &f);
        if (!t)
            continue;
        tried++;
        for (int it = 0; it < 40; it++) {
            char s[512];
            size_t n = test_rand_u64(&rs) % sizeof s;
            for (size_t i = 0; i < n; i++) /* bytes biased towards ASCII, markup and lead bytes */
                s[i] = (char)(test_rand_u64(&rs) % 3 ? " <|>[]sa\n"[test_rand_u64(&rs) % 10]
                                                     : (int)(test_rand_u64(&rs) % 256));
            int32_t *ids;
            size_t ni;
            struct brasa_err err;
            REQUIRE(tok_encode(t, s, n, TOK_ADD_SPECIAL | (it & 1 ? TOK_PARSE_SPECIAL : 0), &ids, &ni, &err) ==
                    BRASA_OK);
            for (size_t i = 0; i < ni; i++)
                CHECKF(ids[i] >= 0 && ids[i] < tok_n_vocab(t), "%s: id %d", vocabs[v], ids[i]);
            char *d;
            CHECK(tok_decode(t, ids, ni, &d, &err) == BRASA_OK);
            free(d);
            size_t dl;
            d = stream_text(t, ids, ni, &dl);
            CHECK(gguf_utf8_invalid_at(d, dl) < 0 || memchr(d, 0, dl));
            free(d);
            free(ids);
        }
        tok_free(t);
        gguf_close(f);
    }
    if (!tried)
        SKIP("no vocabularies");
}

TEST(decode_clean_spaces)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/ggml-vocab-gpt-2.gguf", test_shared_path("vocab"));
    if (!test_file_exists(path))
        SKIP("no gpt-2 vocabulary");
    struct gguf_file *f;
    struct tokenizer *t = load_tok(path, &f);
    REQUIRE(t);
    int32_t *ids;
    size_t n;
    struct brasa_err err;
    const char *s = "Hello , world ! It 's here .";
    REQUIRE(tok_encode(t, s, strlen(s), 0, &ids, &n, &err) == BRASA_OK);
    char *d;
    REQUIRE(tok_decode(t, ids, n, &d, &err) == BRASA_OK);
    CHECKF(!strcmp(d, "Hello, world! It's here."), "decoded '%s'", d);
    free(d);
    free(ids);
    int32_t bad = 1 << 30;
    CHECK(tok_decode(t, &bad, 1, &d, &err) == BRASA_EINVAL);
    CHECK(tok_is_eog(t, 50256) && tok_is_control(t, 50256));
    tok_free(t);
    gguf_close(f);
}

/* ---- pre-tokenizer splits on hand-checked strings (covers llama3, which has no vocabulary here) ---- */

/* Splits text with pre-tokenizer `pre` and compares with the expected pieces ("|"-separated,
 * raw bytes; the words come back byte-encoded, so encode the expectation the same way). */
static void check_split(struct tokenizer *t, enum pretok_id pre, const char *text, const char *want)
{
    t->pre = pre;
    struct pretok_out o = {0};
    struct brasa_err err;
    REQUIRE(pretok_split(t, text, strlen(text), &o, &err) == BRASA_OK);
    char exp[1024];
    size_t k = 0;
    size_t ends[64], ne = 0;
    for (const char *p = want;; p++) {
        if (*p == '|' || !*p) {
            ends[ne++] = k;
            if (!*p)
                break;
            continue;
        }
        unsigned char b = (unsigned char)*p;
        memcpy(exp + k, t->byte_enc[b], t->byte_enc_len[b]);
        k += t->byte_enc_len[b];
    }
    bool ok = o.n == ne && o.len == k && memcmp(o.buf, exp, k) == 0;
    for (size_t i = 0; ok && i < ne; i++)
        ok = o.ends[i] == ends[i];
    CHECKF(ok, "pre %s: \"%s\" gives %zu pieces, want \"%s\"", pretok_name(pre), text, o.n, want);
    pretok_out_free(&o);
}

TEST(pretokenizer_splits)
{
    char path[8192];
    snprintf(path, sizeof path, "%s/ggml-vocab-gpt-2.gguf", test_shared_path("vocab"));
    if (!test_file_exists(path))
        SKIP("no gpt-2 vocabulary");
    struct gguf_file *f;
    struct tokenizer *t = load_tok(path, &f);
    REQUIRE(t);
    check_split(t, PRE_LLAMA3, "Hello world", "Hello| world");
    check_split(t, PRE_LLAMA3, "1234567", "123|456|7");
    check_split(t, PRE_LLAMA3, "don't DON'T", "don|'t| DON|'T");
    check_split(t, PRE_LLAMA3, "a  b", "a| | b");
    check_split(t, PRE_LLAMA3, "x\n\n  y", "x|\n\n| | y");
    check_split(t, PRE_LLAMA3, "hi!\n...", "hi|!\n|...");
    check_split(t, PRE_LLAMA3, "caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87", "caf\xc3\xa9| \xe4\xb8\xad\xe6\x96\x87");
    check_split(t, PRE_LLAMA3, "a !!", "a| !!");
    check_split(t, PRE_LLAMA3, "\t\tx", "\t|\tx");
    check_split(t, PRE_LLAMA3, "x  ", "x|  ");
    check_split(t, PRE_LLAMA3, "!\r\n.", "!\r\n|.");
    check_split(t, PRE_QWEN2, "!\r\n.", "!\r\n|.");
    check_split(t, PRE_QWEN2, "1234567", "1|2|3|4|5|6|7");
    check_split(t, PRE_QWEN2, "Hello world", "Hello| world");
    check_split(t, PRE_QWEN2, "e\xcc\x81x", "e|\xcc\x81x");
    check_split(t, PRE_QWEN35, "e\xcc\x81x", "e\xcc\x81x");
    check_split(t, PRE_QWEN2, "a \n\n b", "a| \n\n| b");
    check_split(t, PRE_GPT2, "Hello  world", "Hello| | world");
    check_split(t, PRE_GPT2, "I've 123", "I|'ve| 123");
    check_split(t, PRE_DEFAULT, "a,b 1234", "a|,|b| |123|4");
    check_split(t, PRE_STARCODER, "x=12", "x|=|1|2");
    tok_free(t);
    gguf_close(f);
}

/* ---- chat templates ---- */

static const struct chat_msg conv[] = {
    {"system", "You are a helpful assistant."},
    {"user", "Hello!"},
    {"assistant", "Hi! How can I help?"},
    {"user", "What is 2+2?"},
};

static void check_render(enum chat_template_id id, const struct chat_msg *m, size_t n, bool thinking,
                         const char *end_text, const char *want)
{
    struct chat_opts o = {.add_assistant = true, .thinking = thinking, .end_text = end_text};
    char *out = NULL;
    struct brasa_err err;
    brasa_status st = chat_render(id, m, n, &o, &out, &err);
    CHECKF(st == BRASA_OK, "%s: %s", chat_template_name(id), err.msg);
    if (st == BRASA_OK)
        CHECKF(!strcmp(out, want), "%s (thinking %d):\n--- got ---\n%s\n--- want ---\n%s", chat_template_name(id),
               thinking, out, want);
    free(out);
}

#define CHATML_BODY                                                                                    \
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHello!<|im_end|>\n" \
    "<|im_start|>assistant\nHi! How can I help?<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"  \
    "<|im_start|>assistant\n"

TEST(chat_templates_render)
{
    size_t n = sizeof conv / sizeof conv[0];
    check_render(CHAT_TMPL_CHATML, conv, n, true, NULL, CHATML_BODY);
    check_render(CHAT_TMPL_QWEN3, conv, n, true, NULL, CHATML_BODY);
    check_render(CHAT_TMPL_QWEN3, conv, n, false, NULL, CHATML_BODY "<think>\n\n</think>\n\n");
    check_render(CHAT_TMPL_QWEN35, conv, n, true, NULL, CHATML_BODY "<think>\n");
    check_render(CHAT_TMPL_QWEN35, conv, n, false, NULL, CHATML_BODY "<think>\n\n</think>\n\n");
    /* Qwen3: an earlier assistant turn loses its reasoning */
    struct chat_msg think[4];
    memcpy(think, conv, sizeof think);
    think[2].content = "<think>\nThe user greets me.\n</think>\n\nHi! How can I help?";
    check_render(CHAT_TMPL_QWEN3, think, n, true, NULL, CHATML_BODY);
    /* ... and the last assistant turn after the last query shows its (here empty) reasoning */
    static const struct chat_msg tail[] = {{"user", "Hi"}, {"assistant", "Hello"}};
    struct chat_opts no_gen = {.add_assistant = false, .thinking = true};
    char *q3;
    struct brasa_err e3;
    REQUIRE(chat_render(CHAT_TMPL_QWEN3, tail, 2, &no_gen, &q3, &e3) == BRASA_OK);
    CHECKF(!strcmp(q3, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello<|im_end|>\n"),
           "qwen3 tail: %s", q3);
    free(q3);
    static const struct chat_msg tail2[] = {{"user", "Hi"}, {"assistant", "<think>\nhmm\n</think>\n\nHello"}};
    REQUIRE(chat_render(CHAT_TMPL_QWEN3, tail2, 2, &no_gen, &q3, &e3) == BRASA_OK);
    CHECKF(!strcmp(q3, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\nhmm\n</think>\n\nHello<|im_end|>\n"),
           "qwen3 tail with reasoning: %s", q3);
    free(q3);
    check_render(CHAT_TMPL_GRANITE, conv, n, true, NULL,
                 "<|start_of_role|>system<|end_of_role|>You are a helpful assistant.<|end_of_text|>\n"
                 "<|start_of_role|>user<|end_of_role|>Hello!<|end_of_text|>\n"
                 "<|start_of_role|>assistant<|end_of_role|>Hi! How can I help?<|end_of_text|>\n"
                 "<|start_of_role|>user<|end_of_role|>What is 2+2?<|end_of_text|>\n"
                 "<|start_of_role|>assistant<|end_of_role|>");
    check_render(CHAT_TMPL_LLAMA2, conv, n, true, NULL,
                 "[INST] <<SYS>>\nYou are a helpful assistant.\n<</SYS>>\n\nHello! [/INST]Hi! How can I help?</s>"
                 "[INST] What is 2+2? [/INST]");
    check_render(CHAT_TMPL_LLAMA3, conv, n, true, NULL,
                 "<|start_header_id|>system<|end_header_id|>\n\nYou are a helpful assistant.<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\nHi! How can I help?<|eot_id|>"
                 "<|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n");
    /* the fixtures' chat prompts, as the reference rendered them */
    static const struct chat_msg brief[] = {{"system", "Be brief."}, {"user", "What is 2+2?"}};
    check_render(CHAT_TMPL_CHATML, brief, 2, true, NULL,
                 "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n"
                 "<|im_start|>assistant\n");
    check_render(CHAT_TMPL_LLAMA2, brief, 2, true, NULL, "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nWhat is 2+2? [/INST]");
    check_render(CHAT_TMPL_GRANITE, brief + 1, 1, true, "<|endoftext|>",
                 "<|start_of_role|>user<|end_of_role|>What is 2+2?<|endoftext|>\n"
                 "<|start_of_role|>assistant<|end_of_role|>");
    char *out;
    struct brasa_err err;
    CHECK(chat_render(CHAT_TMPL_NONE, conv, n, NULL, &out, &err) == BRASA_EINVAL);
}

/* a GGUF file holding only the given keys, written to a temporary path */
static bool write_meta(const char *path, const char *arch, const char *tmpl)
{
    struct gguf_writer *w;
    struct brasa_err err;
    if (gguf_writer_new(&w, &err))
        return false;
    static const char *const llama3_tokens[] = {"<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>"};
    bool ok = gguf_writer_set_str(w, "general.architecture", arch, &err) == BRASA_OK &&
              (!tmpl || gguf_writer_set_str(w, "tokenizer.chat_template", tmpl, &err) == BRASA_OK) &&
              (strcmp(arch, "llama") || tmpl ||
               gguf_writer_set_arr_str(w, "tokenizer.ggml.tokens", llama3_tokens, 3, &err) == BRASA_OK) &&
              gguf_writer_write(w, path, &err) == BRASA_OK;
    gguf_writer_free(w);
    return ok;
}

static void check_pick(const char *arch, const char *tmpl, const char *override, enum chat_template_id want,
                       const char *note_has)
{
    char path[] = "/tmp/brasa-test-chat-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    REQUIRE(write_meta(path, arch, tmpl));
    struct gguf_file *f;
    struct brasa_err err;
    REQUIRE(gguf_open(&f, path, &err) == BRASA_OK);
    enum chat_template_id id = CHAT_TMPL_NONE;
    const char *note = NULL;
    CHECKF(chat_template_pick(f, override, &id, &note, &err) == BRASA_OK, "%s", err.msg);
    CHECKF(id == want, "arch %s: picked %s, want %s", arch, chat_template_name(id), chat_template_name(want));
    if (note_has)
        CHECKF(note && strstr(note, note_has), "arch %s: note '%s' lacks '%s'", arch, note ? note : "(none)",
               note_has);
    else
        CHECKF(!note, "arch %s: unexpected note '%s'", arch, note);
    gguf_close(f);
    unlink(path);
}

TEST(chat_template_pick)
{
    check_pick("qwen2", "{% for m in messages %}<|im_start|>{{ m.role }}...", NULL, CHAT_TMPL_CHATML, NULL);
    check_pick("qwen3", "<|im_start|>... {%- if enable_thinking is defined %}<think>", NULL, CHAT_TMPL_QWEN3, NULL);
    check_pick("qwen35", "<|im_start|>... <think>\n", NULL, CHAT_TMPL_QWEN35, NULL);
    check_pick("granite", "<|start_of_role|>{{ m.role }}<|end_of_role|>", NULL, CHAT_TMPL_GRANITE, NULL);
    check_pick("llama", "{{ bos_token }}<|start_header_id|>{{ r }}<|end_header_id|>", NULL, CHAT_TMPL_LLAMA3, NULL);
    check_pick("llama", "{{ bos_token + '[INST] ' + content + ' [/INST]' }}", NULL, CHAT_TMPL_LLAMA2, NULL);
    /* no template: from the architecture */
    check_pick("qwen3", NULL, NULL, CHAT_TMPL_QWEN3, NULL);
    check_pick("granite", NULL, NULL, CHAT_TMPL_GRANITE, NULL);
    check_pick("qwen35", NULL, NULL, CHAT_TMPL_QWEN35, NULL);
    check_pick("llama", NULL, NULL, CHAT_TMPL_LLAMA3, NULL); /* Llama 3 header tokens in the vocabulary */
    /* unrecognised: reported, with the fallback named */
    check_pick("llama", "{{ '<|user|>' + m }}", NULL, CHAT_TMPL_LLAMA2, "llama2");
    check_pick("phi3", "{{ '<|user|>' + m }}", NULL, CHAT_TMPL_CHATML, "chatml");
    /* override */
    check_pick("qwen2", "<|im_start|>", "llama3", CHAT_TMPL_LLAMA3, NULL);
    struct gguf_file *f = NULL;
    char path[] = "/tmp/brasa-test-chat-XXXXXX";
    int fd = mkstemp(path);
    REQUIRE(fd >= 0);
    close(fd);
    REQUIRE(write_meta(path, "qwen2", NULL));
    struct brasa_err err;
    REQUIRE(gguf_open(&f, path, &err) == BRASA_OK);
    enum chat_template_id id;
    const char *note;
    CHECK(chat_template_pick(f, "jinja-soup", &id, &note, &err) == BRASA_EINVAL);
    CHECKF(strstr(err.msg, "jinja-soup") != NULL, "%s", err.msg);
    gguf_close(f);
    unlink(path);
}

/* ---- unknown pre-tokenizer ---- */

/* copies a vocabulary file with tokenizer.ggml.pre replaced */
static bool write_with_pre(const char *src, const char *dst, const char *pre)
{
    struct gguf_file *f;
    struct gguf_writer *w;
    struct brasa_err err;
    if (gguf_open(&f, src, &err))
        return false;
    if (gguf_writer_new(&w, &err)) {
        gguf_close(f);
        return false;
    }
    bool ok = true;
    for (uint64_t i = 0; ok && i < f->n_kv; i++)
        if (strcmp(f->kv[i].key, "tokenizer.ggml.pre"))
            ok = gguf_writer_copy_kv(w, &f->kv[i], &err) == BRASA_OK;
    ok = ok && gguf_writer_set_str(w, "tokenizer.ggml.pre", pre, &err) == BRASA_OK &&
         gguf_writer_write(w, dst, &err) == BRASA_OK;
    gguf_writer_free(w);
    gguf_close(f);
    return ok;
}

static char unknown_pre_path[64];

TEST(unknown_pre)
{
    char src[8192];
    snprintf(src, sizeof src, "%s/ggml-vocab-gpt-2.gguf", test_shared_path("vocab"));
    if (!test_file_exists(src))
        SKIP("no gpt-2 vocabulary");
    snprintf(unknown_pre_path, sizeof unknown_pre_path, "/tmp/brasa-test-pre-XXXXXX");
    int fd = mkstemp(unknown_pre_path);
    REQUIRE(fd >= 0);
    close(fd);
    REQUIRE(write_with_pre(src, unknown_pre_path, "martian-v9"));
    struct gguf_file *f;
    struct tokenizer *t = NULL;
    struct brasa_err err;
    REQUIRE(gguf_open(&f, unknown_pre_path, &err) == BRASA_OK);
    CHECK(tok_load(&t, f, 0, &err) == BRASA_EUNSUPPORTED);
    CHECKF(strstr(err.msg, "martian-v9") != NULL, "message does not name the pre-tokenizer: %s", err.msg);
    CHECK(tok_load(&t, f, TOK_LOAD_FALLBACK_PRE, &err) == BRASA_OK);
    CHECKF(tok_load_warning() && strstr(tok_load_warning(), "martian-v9") && strstr(tok_load_warning(), "default"),
           "warning: %s", tok_load_warning() ? tok_load_warning() : "(none)");
    CHECK(t && !strcmp(tok_pre_name(t), "default"));
    tok_free(t);
    gguf_close(f);
}

/* ---- command line ---- */

static char *run(const char *cmd, int *rc)
{
    FILE *p = popen(cmd, "r");
    *rc = -1;
    if (!p)
        return NULL;
    size_t cap = 1 << 16, n = 0, k;
    char *buf = malloc(cap + 1);
    while ((k = fread(buf + n, 1, cap - n, p)) > 0)
        n += k;
    buf[n] = 0;
    int st = pclose(p);
    *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}

static void ids_line(const struct jm *gold, size_t from, char *out, size_t cap)
{
    out[0] = 0;
    for (size_t i = from; i < gold->n; i++)
        snprintf(out + strlen(out), cap - strlen(out), "%s%ld", i > from ? " " : "", jm_int(jm_at(gold, i), 0));
    snprintf(out + strlen(out), cap - strlen(out), "\n");
}

TEST(cli_tokenize_detokenize)
{
    if (access(test_brasa_bin(), X_OK) != 0)
        SKIP("brasa binary not built");
    char qwen[8192], llama[8192], jpath[8192];
    snprintf(qwen, sizeof qwen, "%s", test_shared_path("fixtures/qwen2.Q8_0.gguf"));
    snprintf(llama, sizeof llama, "%s", test_shared_path("fixtures/llama.Q8_0.gguf"));
    snprintf(jpath, sizeof jpath, "%s", test_shared_path("fixtures/qwen2.Q8_0.prompts.json"));
    size_t size;
    char *txt = test_read_file(jpath, &size);
    if (!txt || !test_file_exists(qwen) || !test_file_exists(llama)) {
        free(txt);
        SKIP("fixtures absent");
    }
    struct jm *j = jm_parse(txt, size);
    free(txt);
    REQUIRE(j);
    char cmd[40000], want[8192], tmp[] = "/tmp/brasa-test-text-XXXXXX";
    int rc, fd = mkstemp(tmp);
    REQUIRE(fd >= 0);
    /* the chat prompt, from standard input, with --special */
    const struct jm *chat = jm_at(jm_get(j, "prompts"), 2);
    REQUIRE(write(fd, jm_get(chat, "text")->str, jm_get(chat, "text")->len) == (ssize_t)jm_get(chat, "text")->len);
    close(fd);
    snprintf(cmd, sizeof cmd, "%s tokenize -m '%s' --special --ids-only - < '%s'", test_brasa_bin(), qwen, tmp);
    char *out = run(cmd, &rc);
    ids_line(jm_get(chat, "token_ids"), 0, want, sizeof want);
    CHECKF(rc == 0 && !strcmp(out, want), "tokenize --special: rc %d\n got  %s want %s", rc, out, want);
    free(out);
    /* without --special the markup is plain text: more ids, and no control id */
    snprintf(cmd, sizeof cmd, "%s tokenize -m '%s' --ids-only - < '%s'", test_brasa_bin(), qwen, tmp);
    out = run(cmd, &rc);
    CHECKF(rc == 0 && strlen(out) > strlen(want) && !strstr(out, "1022"), "tokenize without --special: %s", out);
    free(out);
    unlink(tmp);
    /* ids with pieces: one line per id */
    snprintf(cmd, sizeof cmd, "%s tokenize -m '%s' 'Hello world'", test_brasa_bin(), llama);
    out = run(cmd, &rc);
    CHECKF(rc == 0 && strstr(out, "     1 '<s>'\n"), "listing: %s", out);
    int lines = 0;
    for (char *p = out; *p; p++)
        lines += *p == '\n';
    CHECKF(lines >= 2 && strstr(out, "'<s>'"), "listing has %d lines: %s", lines, out);
    free(out);
    /* BOS as the file says, and --no-bos */
    const struct jm *plain = jm_at(jm_get(j, "prompts"), 0);
    snprintf(cmd, sizeof cmd, "%s tokenize -m '%s' --ids-only 'The quick brown fox jumps over the lazy dog.'", test_brasa_bin(), qwen);
    out = run(cmd, &rc);
    ids_line(jm_get(plain, "token_ids"), 0, want, sizeof want);
    CHECKF(rc == 0 && !strcmp(out, want), "qwen2 plain: got %s want %s", out, want);
    free(out);
    snprintf(cmd, sizeof cmd, "%s tokenize -m '%s' --ids-only 'Hello'", test_brasa_bin(), llama);
    out = run(cmd, &rc);
    CHECKF(rc == 0 && !strncmp(out, "1 ", 2), "llama adds BOS: %s", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s tokenize -m '%s' --no-bos --ids-only 'Hello'", test_brasa_bin(), llama);
    out = run(cmd, &rc);
    CHECKF(rc == 0 && strncmp(out, "1 ", 2) && out[0] != '\n', "llama --no-bos: %s", out);
    free(out);
    /* detokenize: ids as words and as a comma list */
    ids_line(jm_get(plain, "token_ids"), 0, want, sizeof want);
    want[strlen(want) - 1] = 0;
    snprintf(cmd, sizeof cmd, "%s detokenize -m '%s' %s", test_brasa_bin(), qwen, want);
    out = run(cmd, &rc);
    CHECKF(rc == 0 && !strcmp(out, "The quick brown fox jumps over the lazy dog.\n"), "detokenize: '%s'", out);
    free(out);
    snprintf(cmd, sizeof cmd, "%s detokenize -m '%s' 1022,882,198 1023", test_brasa_bin(), qwen);
    out = run(cmd, &rc);
    CHECKF(rc == 0, "detokenize with control ids: rc %d", rc);
    free(out);
    snprintf(cmd, sizeof cmd, "%s detokenize -m '%s' 999999 2>&1", test_brasa_bin(), qwen);
    out = run(cmd, &rc);
    CHECKF(rc == 1 && strstr(out, "999999"), "out-of-range id: rc %d, %s", rc, out);
    free(out);
    /* an unknown pre-tokenizer is named; --fallback-pre warns and goes on */
    if (unknown_pre_path[0]) {
        snprintf(cmd, sizeof cmd, "%s tokenize -m '%s' --ids-only 'Hello' 2>&1", test_brasa_bin(), unknown_pre_path);
        out = run(cmd, &rc);
        CHECKF(rc == 1 && strstr(out, "martian-v9"), "unknown pre: rc %d, %s", rc, out);
        free(out);
        snprintf(cmd, sizeof cmd, "%s tokenize -m '%s' --fallback-pre --ids-only 'Hello' 2>&1", test_brasa_bin(),
                 unknown_pre_path);
        out = run(cmd, &rc);
        CHECKF(rc == 0 && strstr(out, "warning") && strstr(out, "15496"), "--fallback-pre: rc %d, %s", rc, out);
        free(out);
        unlink(unknown_pre_path);
    }
    snprintf(cmd, sizeof cmd, "%s tokenize 2>&1", test_brasa_bin());
    out = run(cmd, &rc);
    CHECKF(rc == 2, "usage error: rc %d", rc);
    free(out);
    jm_free(j);
}

TEST_MAIN(T(vocab_vectors), T(fixture_prompt_ids), T(random_utf8_round_trip), T(stream_holds_and_replaces),
          T(random_bytes), T(decode_clean_spaces), T(pretokenizer_splits), T(chat_templates_render), T(chat_template_pick), T(unknown_pre),
          T(cli_tokenize_detokenize))
