/* The commands people run, end to end: brasa run/logits/perplexity/bench/chat/synth on the
 * golden fixtures, the trained stories260K model and synthetic models. */
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "json_mini.h"
#include "test.h"

/* Runs a shell command; returns its stdout (malloc'd, NUL-terminated) and exit status. */
static char *run_cmd(const char *cmd, int *status)
{
    FILE *p = popen(cmd, "r");
    *status = -1;
    if (!p)
        return NULL;
    size_t cap = 1 << 16, n = 0, k;
    char *buf = malloc(cap + 1);
    while (buf && (k = fread(buf + n, 1, cap - n, p)) > 0) {
        n += k;
        if (n == cap) {
            char *t = realloc(buf, (cap *= 2) + 1);
            if (!t) {
                free(buf);
                buf = NULL;
            }
            buf = t;
        }
    }
    int st = pclose(p);
    if (buf)
        buf[n] = 0;
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return buf;
}

/* Appends s to dst as one single-quoted shell word. */
static void shell_quote(char *dst, size_t cap, const char *s)
{
    size_t n = strlen(dst);
    if (n + 1 < cap)
        dst[n++] = '\'';
    for (; *s && n + 5 < cap; s++) {
        if (*s == '\'') {
            memcpy(dst + n, "'\\''", 4);
            n += 4;
        } else {
            dst[n++] = *s;
        }
    }
    if (n + 1 < cap)
        dst[n++] = '\'';
    dst[n] = 0;
}

static char tmpdir[64];

static void cleanup(void)
{
    if (tmpdir[0] && strcmp(tmpdir, "/tmp"))
        rmdir(tmpdir);
}

static const char *tmp_path(const char *name)
{
    static char buf[4][256];
    static int k;
    if (!tmpdir[0]) {
        snprintf(tmpdir, sizeof tmpdir, "/tmp/brasa-test-cli-XXXXXX");
        if (!mkdtemp(tmpdir))
            snprintf(tmpdir, sizeof tmpdir, "/tmp");
        atexit(cleanup); /* also when only some tests run */
    }
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static bool have_bin(void) { return access(test_brasa_bin(), X_OK) == 0; }

static struct jm *load_json(const char *path)
{
    size_t n;
    char *text = test_read_file(path, &n);
    if (!text)
        return NULL;
    struct jm *j = jm_parse(text, n);
    free(text);
    return j;
}

/* Tolerance of a fixture's type (relative to the largest |logit|), from the fixtures README. */
static double type_tol(const char *file)
{
    if (strstr(file, ".F32."))
        return 1e-4;
    if (strstr(file, ".F16."))
        return 2e-3;
    if (strstr(file, ".BF16."))
        return 1e-2;
    return 5e-2;
}

/* Parses "1 2 3\n" into ids; returns the count. */
static int parse_ids(const char *s, int32_t *ids, int cap)
{
    int n = 0;
    char *end;
    while (n < cap) {
        long v = strtol(s, &end, 10);
        if (end == s)
            break;
        ids[n++] = (int32_t)v;
        s = end;
    }
    return n;
}

/* brasa run --temp 0 --print-ids reproduces the golden greedy ids of every fixture (up to the
 * first step whose top-2 margin is within the type's tolerance). */
TEST(run_greedy_matches_fixtures)
{
    char dirpath[4096];
    snprintf(dirpath, sizeof dirpath, "%s", test_shared_path("fixtures"));
    DIR *d = opendir(dirpath);
    if (!d)
        SKIP("fixtures absent");
    if (!have_bin()) {
        closedir(d);
        SKIP("brasa binary not built");
    }
    struct dirent *e;
    int files = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 13 || strcmp(e->d_name + l - 13, ".prompts.json"))
            continue;
        char jpath[4600], gguf[4600];
        snprintf(jpath, sizeof jpath, "%s/%s", dirpath, e->d_name);
        struct jm *j = load_json(jpath);
        REQUIRE(j);
        snprintf(gguf, sizeof gguf, "%s/%s", dirpath, jm_get(j, "model_file")->str);
        double tol = type_tol(gguf);
        const struct jm *p = jm_at(jm_get(j, "prompts"), 0);
        const struct jm *gids = jm_get(p, "greedy_ids"), *margins = jm_get(p, "greedy_margins");
        char cmd[16384];
        snprintf(cmd, sizeof cmd, "%s run -m '%s' --temp 0 -n %zu --ignore-eos --print-ids --kv-type f32 -t 2 -p ",
                 test_brasa_bin(), gguf, gids->n);
        shell_quote(cmd, sizeof cmd, jm_get(p, "text")->str);
        strcat(cmd, " 2>/dev/null");
        int rc;
        char *out = run_cmd(cmd, &rc);
        int32_t ids[64];
        int n = out ? parse_ids(out, ids, 64) : 0;
        CHECKF(rc == 0 && n == (int)gids->n, "%s: rc %d, %d ids", e->d_name, rc, n);
        /* A margin below ~tol x (logit range ~ 10) may legitimately flip. */
        for (int k = 0; k < n && k < (int)gids->n; k++) {
            if (jm_num(jm_at(margins, (size_t)k), 0) < tol * 10)
                break;
            CHECKF(ids[k] == jm_int(jm_at(gids, (size_t)k), -1), "%s step %d: %d, golden %ld", e->d_name, k,
                   ids[k], jm_int(jm_at(gids, (size_t)k), -1));
            if (ids[k] != jm_int(jm_at(gids, (size_t)k), -1))
                break;
        }
        free(out);
        jm_free(j);
        files++;
    }
    closedir(d);
    CHECK(files > 0);
}

/* --ids gives the same continuation as the text it tokenizes to. */
TEST(run_ids_equals_text)
{
    const char *jpath = test_shared_path("fixtures/qwen2.Q8_0.prompts.json");
    struct jm *j = load_json(jpath);
    if (!j)
        SKIP("fixtures absent");
    if (!have_bin()) {
        jm_free(j);
        SKIP("brasa binary not built");
    }
    const struct jm *p = jm_at(jm_get(j, "prompts"), 1), *tids = jm_get(p, "token_ids");
    char ids[4096] = "", cmd[8192];
    for (size_t i = 0; i < tids->n; i++)
        snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%ld", i ? "," : "", jm_int(jm_at(tids, i), 0));
    const char *model = test_shared_path("fixtures/qwen2.Q8_0.gguf");
    snprintf(cmd, sizeof cmd, "%s run -m '%s' --temp 0 -n 8 --ignore-eos --print-ids --ids %s 2>/dev/null",
             test_brasa_bin(), model, ids);
    int rc1, rc2;
    char *a = run_cmd(cmd, &rc1);
    snprintf(cmd, sizeof cmd, "%s run -m '%s' --temp 0 -n 8 --ignore-eos --print-ids -p ", test_brasa_bin(), model);
    shell_quote(cmd, sizeof cmd, jm_get(p, "text")->str);
    strcat(cmd, " 2>/dev/null");
    char *b = run_cmd(cmd, &rc2);
    CHECK(rc1 == 0 && rc2 == 0);
    CHECKF(a && b && !strcmp(a, b), "--ids gave '%s', -p gave '%s'", a ? a : "", b ? b : "");
    int32_t v[16];
    CHECK(a && parse_ids(a, v, 16) == 8);
    free(a);
    free(b);
    jm_free(j);
}

/* brasa logits writes [n_tokens][n_vocab] float32 rows matching the golden prompt rows. */
static void check_logits(const char *base, bool use_ids)
{
    char rel[256];
    snprintf(rel, sizeof rel, "fixtures/%s.prompts.json", base);
    struct jm *j = load_json(test_shared_path(rel));
    if (!j) {
        SKIP("fixtures absent");
    }
    snprintf(rel, sizeof rel, "fixtures/%s.logits.f32", base);
    size_t gsize = 0;
    float *golden = (float *)test_read_file(test_shared_path(rel), &gsize);
    snprintf(rel, sizeof rel, "fixtures/%s.gguf", base);
    char model[4096];
    snprintf(model, sizeof model, "%s", test_shared_path(rel));
    long nv = jm_int(jm_get(j, "n_vocab"), 0);
    const struct jm *p = jm_at(jm_get(j, "prompts"), 1);
    const struct jm *tids = jm_get(p, "token_ids"), *pl = jm_get(p, "prompt_logits");
    long row0 = jm_int(jm_get(pl, "row_offset"), 0), nrows = jm_int(jm_get(pl, "n_rows"), 0);
    const char *out = tmp_path("logits.f32");
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s logits -m '%s' --kv-type f32 -t 2 -o '%s' ", test_brasa_bin(), model, out);
    if (use_ids) {
        strcat(cmd, "--ids ");
        for (size_t i = 0; i < tids->n; i++)
            snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), "%s%ld", i ? "," : "", jm_int(jm_at(tids, i), 0));
    } else {
        strcat(cmd, "-p ");
        shell_quote(cmd, sizeof cmd, jm_get(p, "text")->str);
    }
    strcat(cmd, " 2>/dev/null");
    int rc;
    free(run_cmd(cmd, &rc));
    size_t size = 0;
    float *got = (float *)test_read_file(out, &size);
    CHECKF(rc == 0 && got, "%s: rc %d", base, rc);
    CHECKF(size == (size_t)nrows * (size_t)nv * 4, "%s: %zu bytes for %ld rows of %ld", base, size, nrows, nv);
    if (got && golden && size == (size_t)nrows * (size_t)nv * 4 && gsize >= (size_t)(row0 + nrows) * nv * 4) {
        const float *g = golden + row0 * nv;
        double mx = 0, err = 0;
        for (long i = 0; i < nrows * nv; i++) {
            mx = fmax(mx, fabs(g[i]));
            err = fmax(err, fabs((double)got[i] - g[i]));
        }
        CHECKF(err <= type_tol(model) * mx, "%s: max error %g, max |logit| %g", base, err, mx);
    }
    free(got);
    free(golden);
    jm_free(j);
    unlink(out);
}

TEST(logits_match_golden)
{
    if (!have_bin())
        SKIP("brasa binary not built");
    static const char *const files[] = {"llama.F32", "llama.Q8_0", "qwen2.Q8_0", "granite.Q8_0", "qwen3.Q8_0",
                                        "qwen35.Q8_0"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        check_logits(files[i], false);
    check_logits("qwen2.Q4_K_M", true);
}

/* The trained model produces the golden greedy text of its README. */
TEST(stories_greedy_text)
{
    char model[4096];
    snprintf(model, sizeof model, "%s", test_shared_path("models/stories260K.gguf"));
    if (!test_file_exists(model))
        SKIP("stories260K absent");
    if (!have_bin())
        SKIP("brasa binary not built");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s run -m '%s' -p 'Once upon a time' -n 40 --temp 0 -t 2 2>/dev/null", test_brasa_bin(),
             model);
    int rc;
    char *out = run_cmd(cmd, &rc);
    const char *want = ", there was a little girl named Lily. She loved to play outside in the park. "
                       "One day, she saw a big, red ball.";
    CHECK(rc == 0);
    CHECKF(out && !strncmp(out, want, strlen(want)), "got '%s'", out ? out : "");
    free(out);
    /* the same with the weights read from the file's mapping (not moved into memory) */
    snprintf(cmd, sizeof cmd, "%s run -m '%s' -p 'Once upon a time' -n 40 --temp 0 -t 2 --mmap 2>/dev/null",
             test_brasa_bin(), model);
    out = run_cmd(cmd, &rc);
    CHECKF(rc == 0 && out && !strncmp(out, want, strlen(want)), "--mmap: got '%s'", out ? out : "");
    free(out);
    /* A continuation keeps the space that starts its first piece. */
    snprintf(cmd, sizeof cmd,
             "%s run -m '%s' -p 'Once upon a time, there was a' -n 5 --temp 0 -t 2 --gpu-duty 0.6 "
             "--gpu-timeout 30 2>/dev/null", test_brasa_bin(), model);
    out = run_cmd(cmd, &rc);
    CHECKF(rc == 0 && out && !strncmp(out, " little girl", 12), "got '%s'", out ? out : "");
    free(out);
}

static const char STORY[] =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the sun. "
    "One day, she saw a big red ball in the park. She ran to it and kicked it high in the sky. "
    "Her friend Tom came to play with her. They laughed and played all day until the sun went down. ";

/* brasa perplexity prints a finite perplexity; a --kld run against its own base gives ~0. */
TEST(perplexity_and_kld)
{
    char model[4096];
    snprintf(model, sizeof model, "%s", test_shared_path("models/stories260K.gguf"));
    if (!test_file_exists(model))
        SKIP("stories260K absent");
    if (!have_bin())
        SKIP("brasa binary not built");
    char text[4096], base[4096], cmd[16384];
    snprintf(text, sizeof text, "%s", tmp_path("story.txt"));
    snprintf(base, sizeof base, "%s", tmp_path("story.kld"));
    FILE *f = fopen(text, "w");
    REQUIRE(f);
    for (int i = 0; i < 6; i++)
        fputs(STORY, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "%s perplexity -m '%s' -f '%s' -c 64 -t 2 --kld-base '%s' 2>/dev/null", test_brasa_bin(),
             model, text, base);
    int rc;
    char *out = run_cmd(cmd, &rc);
    const char *p = out ? strstr(out, "PPL = ") : NULL;
    double ppl = p ? strtod(p + 6, NULL) : NAN;
    CHECKF(rc == 0 && isfinite(ppl) && ppl >= 1.0 && ppl < 512, "rc %d, output '%s'", rc, out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s perplexity -m '%s' -f '%s' -t 2 --kld '%s' 2>/dev/null", test_brasa_bin(), model, text,
             base);
    out = run_cmd(cmd, &rc);
    const char *k = out ? strstr(out, "Mean KLD = ") : NULL, *t = out ? strstr(out, "Same top-1 = ") : NULL;
    CHECKF(rc == 0 && k && t, "rc %d, output '%s'", rc, out ? out : "");
    if (k && t) {
        CHECKF(strtod(k + 11, NULL) < 1e-3, "KLD against itself: %s", k);
        CHECKF(strtod(t + 13, NULL) > 99.0, "top-1 against itself: %s", t);
    }
    free(out);
    /* Too little text for the context: a clear error, not a crash. */
    snprintf(cmd, sizeof cmd, "%s perplexity -m '%s' -f '%s' -c 4096 2>&1", test_brasa_bin(), model, text);
    out = run_cmd(cmd, &rc);
    CHECKF(rc == 1 && out && strstr(out, "needs at least"), "rc %d, '%s'", rc, out ? out : "");
    free(out);
    unlink(text);
    unlink(base);
}

TEST(bench_prints_table)
{
    char model[4096];
    snprintf(model, sizeof model, "%s", test_shared_path("models/stories260K.gguf"));
    if (!test_file_exists(model))
        SKIP("stories260K absent");
    if (!have_bin())
        SKIP("brasa binary not built");
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "%s bench -m '%s' -p 16 -n 4 -r 2 -t 2 2>/dev/null", test_brasa_bin(), model);
    int rc;
    char *out = run_cmd(cmd, &rc);
    CHECKF(rc == 0 && out && strstr(out, "| model") && strstr(out, "t/s") && strstr(out, "pp16") &&
               strstr(out, "tg4") && strstr(out, "±") && !strstr(out, "gen4"),
           "rc %d, output '%s'", rc, out ? out : "");
    free(out);
    /* --gen: a row of greedy generation too, the context sized for it (1 + 64 positions) */
    snprintf(cmd, sizeof cmd, "%s bench -m '%s' -p 0 -n 64 -r 1 -t 2 --gen 2>/dev/null",
             test_brasa_bin(), model);
    out = run_cmd(cmd, &rc);
    CHECKF(rc == 0 && out && strstr(out, "tg64") && strstr(out, "gen64") &&
               strstr(out, "context: 65 positions"),
           "rc %d, output '%s'", rc, out ? out : "");
    free(out);
}

TEST(chat_piped_stdin)
{
    char model[4096];
    snprintf(model, sizeof model, "%s", test_shared_path("fixtures/qwen2.Q8_0.gguf"));
    if (!test_file_exists(model))
        SKIP("fixtures absent");
    if (!have_bin())
        SKIP("brasa binary not built");
    char cmd[8192];
    snprintf(cmd, sizeof cmd,
             "printf 'Hello there\\nWhat is two plus two?\\n/reset\\nAgain\\n/exit\\nnever read\\n' | "
             "%s chat -m '%s' --chat-template chatml -s 'Be brief.' --temp 0 -n 6 -t 2 2>/dev/null",
             test_brasa_bin(), model);
    int rc;
    char *out = run_cmd(cmd, &rc);
    int lines = 0;
    for (const char *c = out; c && *c; c++)
        lines += *c == '\n';
    CHECKF(rc == 0 && lines == 3, "rc %d, %d reply lines: '%s'", rc, lines, out ? out : "");
    free(out);
    /* The second turn feeds only what the cache lacks. */
    snprintf(cmd, sizeof cmd,
             "printf 'Hello there\\nWhat is two plus two?\\n' | "
             "%s chat -m '%s' --chat-template chatml --temp 0 -n 4 -t 2 -v 2>&1 >/dev/null",
             test_brasa_bin(), model);
    out = run_cmd(cmd, &rc);
    const char *second = out ? strstr(out, "[cache: kept 0 tokens") : NULL;
    second = second ? strstr(second + 1, "[cache: kept ") : NULL;
    CHECKF(rc == 0 && second && atoi(second + 13) > 0, "rc %d, '%s'", rc, out ? out : "");
    free(out);
}

/* brasa synth writes a tiny model of each family that loads and generates, the same bytes for
 * the same seed whatever the thread count, and sampling with a seed is reproducible. */
TEST(synth_tiny_each_arch)
{
    if (!have_bin())
        SKIP("brasa binary not built");
    static const char *const archs[] = {"llama", "qwen2", "granite", "qwen3", "qwen35"};
    char path[4096], cmd[32768];
    for (size_t i = 0; i < sizeof archs / sizeof archs[0]; i++) {
        snprintf(path, sizeof path, "%s", tmp_path("tiny.gguf"));
        const char *type = i % 2 ? "q4_k_m" : "q8_0";
        snprintf(cmd, sizeof cmd, "%s synth --arch %s --shape tiny --type %s -o '%s' -t 2 2>&1", test_brasa_bin(), archs[i],
                 type, path);
        int rc;
        char *out = run_cmd(cmd, &rc);
        struct stat st;
        bool made = stat(path, &st) == 0;
        CHECKF(rc == 0 && made && st.st_size > 100000 && st.st_size < 6000000, "%s: rc %d, %lld bytes: %s", archs[i],
               rc, made ? (long long)st.st_size : -1LL, out ? out : "");
        free(out);
        snprintf(cmd, sizeof cmd, "%s run -m '%s' -p 'Hello world, this is' -n 5 --ignore-eos --print-ids -t 2 "
                 "--temp 0.9 --seed 7 2>/dev/null", test_brasa_bin(), path);
        char *a = run_cmd(cmd, &rc);
        int32_t ids[8];
        CHECKF(rc == 0 && a && parse_ids(a, ids, 8) == 5, "%s: rc %d, '%s'", archs[i], rc, a ? a : "");
        snprintf(cmd, sizeof cmd, "%s run -m '%s' -p 'Hello world, this is' -n 5 --ignore-eos --print-ids -t 1 "
                 "--temp 0.9 --seed 7 2>/dev/null", test_brasa_bin(), path);
        char *b = run_cmd(cmd, &rc);
        CHECKF(a && b && !strcmp(a, b), "%s: seed 7 gave '%s' then '%s'", archs[i], a ? a : "", b ? b : "");
        free(a);
        free(b);
        unlink(path);
    }
    /* Same seed, different thread counts: identical files. */
    char p1[1024], p2[1024];
    snprintf(p1, sizeof p1, "%s", tmp_path("a.gguf"));
    snprintf(p2, sizeof p2, "%s", tmp_path("b.gguf"));
    snprintf(cmd, sizeof cmd, "%s synth --arch qwen3 --shape tiny --type q4_k_m --seed 5 -t 1 -o '%s' 2>/dev/null && "
             "%s synth --arch qwen3 --shape tiny --type q4_k_m --seed 5 -t 2 -o '%s' 2>/dev/null && cmp -s '%s' '%s'",
             test_brasa_bin(), p1, test_brasa_bin(), p2, p1, p2);
    int rc;
    free(run_cmd(cmd, &rc));
    CHECKF(rc == 0, "two writes with seed 5 differ (rc %d)", rc);
    unlink(p1);
    unlink(p2);
}

TEST(cli_errors)
{
    if (!have_bin())
        SKIP("brasa binary not built");
    char cmd[8192];
    int rc;
    snprintf(cmd, sizeof cmd, "%s run -p hi 2>&1", test_brasa_bin());
    char *out = run_cmd(cmd, &rc);
    CHECKF(rc != 0 && out && strstr(out, "-m"), "no model: rc %d '%s'", rc, out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s run -m /nonexistent/model.gguf -p hi 2>&1", test_brasa_bin());
    out = run_cmd(cmd, &rc);
    CHECKF(rc == 1 && out && strstr(out, "/nonexistent/model.gguf"), "missing file: rc %d '%s'", rc, out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s run -m x.gguf --no-such-option 2>&1", test_brasa_bin());
    out = run_cmd(cmd, &rc);
    CHECKF(rc == 2 && out && strstr(out, "--no-such-option"), "unknown option: rc %d '%s'", rc, out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s run -m x.gguf -p hi --temp abc 2>&1", test_brasa_bin());
    out = run_cmd(cmd, &rc);
    CHECKF(rc == 2 && out && strstr(out, "abc"), "bad number: rc %d '%s'", rc, out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s synth --arch qwen2 --shape 99b -o /tmp/never.gguf 2>&1", test_brasa_bin());
    out = run_cmd(cmd, &rc);
    CHECKF(rc == 1 && out && strstr(out, "0.5b"), "unknown shape: rc %d '%s'", rc, out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s run --help", test_brasa_bin());
    out = run_cmd(cmd, &rc);
    CHECKF(rc == 0 && out && strstr(out, "--top-p") && strstr(out, "--print-ids"), "help: rc %d", rc);
    free(out);
    /* the GPU options every command takes are checked before anything runs */
    snprintf(cmd, sizeof cmd, "%s run -m x.gguf --gpu-duty 2 2>&1", test_brasa_bin());
    out = run_cmd(cmd, &rc);
    CHECKF(rc == 2 && out && strstr(out, "--gpu-duty") && strstr(out, "'2'"), "duty: rc %d '%s'", rc,
           out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s run -m x.gguf --gpu-timeout=-1 2>&1", test_brasa_bin());
    out = run_cmd(cmd, &rc);
    CHECKF(rc == 2 && out && strstr(out, "--gpu-timeout"), "timeout: rc %d '%s'", rc, out ? out : "");
    free(out);
    snprintf(cmd, sizeof cmd, "%s --help", test_brasa_bin());
    out = run_cmd(cmd, &rc);
    CHECKF(rc == 0 && out && strstr(out, "--gpu-duty F"), "usage names --gpu-duty: rc %d", rc);
    free(out);
    snprintf(cmd, sizeof cmd, "%s run -m x.gguf --gpu nvidia 2>&1", test_brasa_bin());
    out = run_cmd(cmd, &rc);
    CHECKF(rc == 2 && out && strstr(out, "cuda, hip, auto or none") && strstr(out, "'nvidia'"),
           "--gpu nvidia: rc %d '%s'", rc, out ? out : "");
    free(out);
    /* --gpu none: the CPU backend, saying why where asked to */
    snprintf(cmd, sizeof cmd, "BRASA_VERBOSE=1 %s run -m '%s' --gpu none -p Once -n 4 --temp 0 2>&1",
             test_brasa_bin(), test_shared_path("models/stories260K.gguf"));
    out = run_cmd(cmd, &rc);
    CHECKF(rc == 0 && out && strstr(out, "the GPU is off (--gpu none); running on the CPU"),
           "--gpu none: rc %d '%s'", rc, out ? out : "");
    free(out);
    /* a list of GPUs names each once, before the model is read */
    snprintf(cmd, sizeof cmd, "%s run -m /nonexistent/model.gguf -p hi --gpus 2,2 2>&1",
             test_brasa_bin());
    out = run_cmd(cmd, &rc);
    CHECKF(rc != 0 && out && strstr(out, "GPU 2 twice") && !strstr(out, "nonexistent"),
           "--gpus 2,2: rc %d '%s'", rc, out ? out : "");
    free(out);
}

TEST_MAIN(T(run_greedy_matches_fixtures), T(run_ids_equals_text), T(logits_match_golden), T(stories_greedy_text),
          T(perplexity_and_kld), T(bench_prints_table), T(chat_piped_stdin), T(synth_tiny_each_arch),
          T(cli_errors))
