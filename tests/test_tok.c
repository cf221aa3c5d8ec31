/* Tokenizers and chat templates: every vocabulary test vector in ../shared/vocab, the
 * fixtures' prompt token ids, round trips and streaming detokenization on random UTF-8,
 * the built-in chat templates, and `brasa tokenize` / `brasa detokenize` end to end. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>

#include "gguf/gguf.h"
#include "json_mini.h"
#include "test.h"
#include "tok/tok.h"

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

TEST_MAIN(T(vocab_vectors))
