/* brasa tokenize / brasa detokenize: text to token ids and back with the file's tokenizer.
 *
 *   brasa tokenize -m FILE [--special] [--no-bos] [--ids-only] [--fallback-pre] [--bench] TEXT|-
 *   brasa detokenize -m FILE [--special] ID...          (ids as separate words or "1,2,3") */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "gguf/gguf.h"
#include "tok/tok.h"

static const char tok_usage[] =
    "usage: brasa tokenize -m FILE [--special] [--no-bos] [--ids-only] [--fallback-pre] [--bench] TEXT\n"
    "  TEXT            the text; '-' reads it from standard input\n"
    "  --special       recognise control and user-defined token texts (e.g. <|im_start|>)\n"
    "  --no-bos        add no BOS/EOS (by default they are added as the file says)\n"
    "  --ids-only      print only the ids, separated by single spaces, on one line\n"
    "  --fallback-pre  an unknown tokenizer.ggml.pre falls back to 'default' with a warning\n"
    "  --bench         time the tokenization of TEXT repeated to at least 1 MiB (one thread)\n";

static const char detok_usage[] =
    "usage: brasa detokenize -m FILE [--special] ID...\n"
    "  ID...           token ids, as separate arguments or comma-separated\n"
    "  --special       show control tokens' text too\n";

static char *read_all(FILE *f, size_t *len)
{
    size_t cap = 1 << 16, n = 0, k;
    char *buf = malloc(cap + 1);
    while (buf && (k = fread(buf + n, 1, cap - n, f)) > 0) {
        n += k;
        if (n == cap) {
            char *nb = realloc(buf, cap * 2 + 1);
            if (!nb) {
                free(buf);
                return NULL;
            }
            buf = nb;
            cap *= 2;
        }
    }
    if (buf)
        buf[n] = 0;
    *len = n;
    return buf;
}

static int open_tok(const char *cmd, const char *path, int flags, struct gguf_file **f, struct tokenizer **t)
{
    struct brasa_err err = {{0}};
    if (gguf_open(f, path, &err)) {
        fprintf(stderr, "brasa %s: %s\n", cmd, err.msg);
        return 1;
    }
    if (tok_load(t, *f, flags, &err)) {
        fprintf(stderr, "brasa %s: %s: %s\n", cmd, path, err.msg);
        gguf_close(*f);
        return 1;
    }
    if (tok_load_warning())
        fprintf(stderr, "brasa %s: warning: %s\n", cmd, tok_load_warning());
    return 0;
}

/* the piece with control characters escaped, for the id/piece listing */
static void print_piece(const struct tokenizer *t, int32_t id)
{
    char buf[512];
    size_t n = tok_piece(t, id, true, buf, sizeof buf);
    if (n > sizeof buf)
        n = sizeof buf;
    putchar('\'');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '\r')
            fputs("\\r", stdout);
        else if (c == '\\' || c == '\'')
            printf("\\%c", c);
        else if (c < 0x20 || c == 0x7F)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
    putchar('\'');
}

static int bench(const struct tokenizer *t, const char *text, size_t len, int flags)
{
    if (!len) {
        fprintf(stderr, "brasa tokenize: --bench needs a non-empty text\n");
        return 2;
    }
    size_t reps = (len + (1u << 20) - 1) / len, total = reps * len; /* at least 1 MiB */
    char *big = malloc(total + 1);
    if (!big)
        return 1;
    for (size_t i = 0; i < reps; i++)
        memcpy(big + i * len, text, len);
    struct brasa_err err = {{0}};
    int32_t *ids = NULL;
    size_t n = 0;
    double best = 1e30, best_cpu = 1e30;
    for (int r = 0; r < 3; r++) {
        struct timespec a, b, ca, cb;
        clock_gettime(CLOCK_MONOTONIC, &a);
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ca);
        free(ids);
        if (tok_encode(t, big, total, flags, &ids, &n, &err)) {
            fprintf(stderr, "brasa tokenize: %s\n", err.msg);
            free(big);
            return 1;
        }
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cb);
        clock_gettime(CLOCK_MONOTONIC, &b);
        double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
        double c = (double)(cb.tv_sec - ca.tv_sec) + (double)(cb.tv_nsec - ca.tv_nsec) * 1e-9;
        if (s < best)
            best = s;
        if (c < best_cpu)
            best_cpu = c;
    }
    /* thread CPU time too: on a shared machine the wall clock also counts other jobs */
    printf("tokenized %zu bytes into %zu tokens in %.3f s wall, %.3f s CPU (best of 3, one thread): "
           "%.2f MB/s, %.0f tokens/s (by CPU time)\n",
           total, n, best, best_cpu, (double)total / best_cpu / 1e6, (double)n / best_cpu);
    free(ids);
    free(big);
    return 0;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL, *text_arg = NULL;
    bool special = false, no_bos = false, ids_only = false, fallback = false, do_bench = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(tok_usage, stdout);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (++i >= argc) {
                fprintf(stderr, "brasa tokenize: %s needs a file\n", a);
                return 2;
            }
            model = argv[i];
        } else if (!strcmp(a, "--special"))
            special = true;
        else if (!strcmp(a, "--no-bos"))
            no_bos = true;
        else if (!strcmp(a, "--ids-only"))
            ids_only = true;
        else if (!strcmp(a, "--fallback-pre"))
            fallback = true;
        else if (!strcmp(a, "--bench"))
            do_bench = true;
        else if (a[0] == '-' && a[1] && !(a[1] == '-' && !a[2])) {
            fprintf(stderr, "brasa tokenize: unknown option '%s'\n%s", a, tok_usage);
            return 2;
        } else if (!text_arg)
            text_arg = (!strcmp(a, "--") && i + 1 < argc) ? argv[++i] : a;
        else {
            fprintf(stderr, "brasa tokenize: one TEXT only (quote it)\n%s", tok_usage);
            return 2;
        }
    }
    if (!model || !text_arg) {
        fprintf(stderr, "brasa tokenize: %s\n%s", !model ? "-m FILE is required" : "TEXT is required", tok_usage);
        return 2;
    }
    size_t len = 0;
    char *text = !strcmp(text_arg, "-") ? read_all(stdin, &len) : strdup(text_arg);
    if (!text) {
        fprintf(stderr, "brasa tokenize: cannot read the text\n");
        return 1;
    }
    if (strcmp(text_arg, "-"))
        len = strlen(text);
    struct gguf_file *f;
    struct tokenizer *t;
    if (open_tok("tokenize", model, fallback ? TOK_LOAD_FALLBACK_PRE : 0, &f, &t)) {
        free(text);
        return 1;
    }
    int flags = (no_bos ? 0 : TOK_ADD_SPECIAL) | (special ? TOK_PARSE_SPECIAL : 0);
    int rc = 0;
    if (do_bench) {
        rc = bench(t, text, len, flags);
    } else {
        struct brasa_err err = {{0}};
        int32_t *ids;
        size_t n;
        if (tok_encode(t, text, len, flags, &ids, &n, &err)) {
            fprintf(stderr, "brasa tokenize: %s\n", err.msg);
            rc = 1;
        } else {
            for (size_t i = 0; i < n; i++) {
                if (ids_only) {
                    printf(i ? " %d" : "%d", ids[i]);
                } else {
                    printf("%6d ", ids[i]);
                    print_piece(t, ids[i]);
                    putchar('\n');
                }
            }
            if (ids_only)
                putchar('\n');
            free(ids);
        }
    }
    tok_free(t);
    gguf_close(f);
    free(text);
    return rc;
}

int cmd_detokenize(int argc, char **argv)
{
    const char *model = NULL;
    bool special = false;
    int32_t *ids = malloc(sizeof *ids * (size_t)(argc + 1));
    size_t n = 0;
    if (!ids)
        return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(detok_usage, stdout);
            free(ids);
            return 0;
        } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
            if (++i >= argc) {
                fprintf(stderr, "brasa detokenize: %s needs a file\n", a);
                free(ids);
                return 2;
            }
            model = argv[i];
        } else if (!strcmp(a, "--special")) {
            special = true;
        } else {
            /* "1 2", "1,2" and "1, 2" all work */
            const char *p = a;
            while (*p) {
                char *end;
                long v = strtol(p, &end, 10);
                if (end == p || v < 0 || v > INT32_MAX) {
                    fprintf(stderr, "brasa detokenize: '%s' is not a token id\n%s", a, detok_usage);
                    free(ids);
                    return 2;
                }
                int32_t *ni = realloc(ids, sizeof *ids * (n + 2 + (size_t)argc));
                if (!ni) {
                    free(ids);
                    return 1;
                }
                ids = ni;
                ids[n++] = (int32_t)v;
                p = end;
                while (*p == ',' || *p == ' ')
                    p++;
            }
        }
    }
    if (!model) {
        fprintf(stderr, "brasa detokenize: -m FILE is required\n%s", detok_usage);
        free(ids);
        return 2;
    }
    struct gguf_file *f;
    struct tokenizer *t;
    if (open_tok("detokenize", model, TOK_LOAD_FALLBACK_PRE, &f, &t)) {
        free(ids);
        return 1;
    }
    int rc = 0;
    struct brasa_err err = {{0}};
    char *text = NULL;
    if (special) { /* control tokens shown: pieces concatenated as they are */
        size_t cap = 256, len = 0;
        text = malloc(cap);
        for (size_t i = 0; text && i < n; i++) {
            size_t k = tok_piece(t, ids[i], true, text + len, cap - len - 1);
            if (len + k + 1 > cap) {
                cap = (len + k + 1) * 2;
                text = realloc(text, cap);
                if (text)
                    tok_piece(t, ids[i], true, text + len, cap - len - 1);
            }
            len += k;
        }
        if (text)
            text[len] = 0;
        for (size_t i = 0; i < n; i++)
            if (ids[i] >= tok_n_vocab(t)) {
                snprintf(err.msg, sizeof err.msg, "token id %d is out of range (vocabulary of %d)", ids[i],
                         tok_n_vocab(t));
                rc = 1;
            }
    } else if (tok_decode(t, ids, n, &text, &err)) {
        rc = 1;
    }
    if (rc)
        fprintf(stderr, "brasa detokenize: %s\n", err.msg);
    else if (text)
        printf("%s\n", text);
    free(text);
    tok_free(t);
    gguf_close(f);
    free(ids);
    return rc;
}
