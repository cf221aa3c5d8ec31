/* brasa-server over loopback: every endpoint, streamed and not, the errors, a client that leaves
 * mid-stream, 20 clients at once. The test starts and stops the server itself, on a free port
 * (--port 0; the server prints the port it got), and talks HTTP/1.1 over 127.0.0.1 only. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

struct server {
    pid_t pid;
    int port;
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static const char *server_bin(void)
{
    static char path[1024];
    const char *b = getenv("BRASA_BIN");
    if (!b)
        b = "build/brasa";
    snprintf(path, sizeof path, "%s", b);
    char *slash = strrchr(path, '/');
    if (slash)
        snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "brasa-server");
    else
        snprintf(path, sizeof path, "brasa-server");
    return path;
}

/* Starts brasa-server with args (NULL-terminated, after argv[0]) and env delay; waits for the
 * "listening on" line. Returns false if it did not come within 20 s. */
static bool server_start(struct server *sv, const char *delay_ms, const char *const *args)
{
    int p[2];
    if (pipe(p) != 0)
        return false;
    const char *argv[32];
    int n = 0;
    argv[n++] = server_bin();
    argv[n++] = "--port";
    argv[n++] = "0";
    argv[n++] = "-t";
    argv[n++] = "1";
    for (int i = 0; args[i] && n < 30; i++)
        argv[n++] = args[i];
    argv[n] = NULL;
    sv->pid = fork();
    if (sv->pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        if (delay_ms)
            setenv("BRASA_SERVE_TOKEN_DELAY_MS", delay_ms, 1);
        execv(argv[0], (char **)argv);
        _exit(127);
    }
    close(p[1]);
    char line[512];
    size_t len = 0;
    double t0 = now_s();
    sv->port = 0;
    while (now_s() - t0 < 20 && len < sizeof line - 1) {
        struct pollfd pf = {.fd = p[0], .events = POLLIN};
        if (poll(&pf, 1, 500) <= 0)
            continue;
        ssize_t r = read(p[0], line + len, sizeof line - 1 - len);
        if (r <= 0)
            break;
        len += (size_t)r;
        line[len] = 0;
        const char *at = strstr(line, "127.0.0.1:");
        if (at && strchr(at, '/')) {
            sv->port = atoi(at + 10);
            break;
        }
    }
    close(p[0]);
    if (!sv->port) {
        kill(sv->pid, SIGKILL);
        waitpid(sv->pid, NULL, 0);
    }
    return sv->port > 0;
}

/* SIGTERM, then wait (bounded); returns the exit status, or -1 if it had to be killed. */
static int server_stop(struct server *sv)
{
    kill(sv->pid, SIGTERM);
    int st = 0;
    for (int i = 0; i < 200; i++) {
        if (waitpid(sv->pid, &st, WNOHANG) == sv->pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        usleep(50000);
    }
    kill(sv->pid, SIGKILL);
    waitpid(sv->pid, &st, 0);
    return -1;
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct timeval tv = {120, 0}; /* generous: sanitizer builds are slow */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static bool send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static int send_request(int port, const char *method, const char *path, const char *body, size_t blen,
                        const char *headers)
{
    int fd = connect_to(port);
    if (fd < 0)
        return -1;
    char head[1024];
    int hl = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                      method, path, headers ? headers : "", blen);
    if (!send_all(fd, head, (size_t)hl) || (blen && !send_all(fd, body, blen))) {
        /* the server may answer (413) before reading everything: read what it said */
    }
    return fd;
}

/* Decodes a chunked body in place. */
static void dechunk(char *b)
{
    char *r = b, *w = b;
    for (;;) {
        char *end;
        unsigned long n = strtoul(r, &end, 16);
        if (end == r || !(end = strstr(end, "\r\n")))
            break;
        r = end + 2;
        if (!n)
            break;
        if (strlen(r) < n)
            n = strlen(r);
        memmove(w, r, n);
        w += n;
        r += n;
        if (!strncmp(r, "\r\n", 2))
            r += 2;
    }
    *w = 0;
}

struct resp {
    int status;
    char *head, *body; /* body malloc'd with head */
};

static void resp_free(struct resp *r)
{
    free(r->head);
    r->head = r->body = NULL;
}

static bool read_response(int fd, struct resp *out)
{
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 4096 > cap)
            buf = realloc(buf, cap *= 2);
        ssize_t n = recv(fd, buf + len, cap - len - 1, 0);
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    close(fd);
    buf[len] = 0;
    out->head = buf;
    out->status = 0;
    out->body = strstr(buf, "\r\n\r\n");
    if (strncmp(buf, "HTTP/1.", 7) || !out->body) {
        out->body = buf + len;
        return false;
    }
    *out->body = 0;
    out->body += 4;
    out->status = atoi(buf + 9);
    if (strstr(buf, "chunked") || strstr(buf, "Chunked"))
        dechunk(out->body);
    return true;
}

static struct resp http(int port, const char *method, const char *path, const char *body, const char *headers)
{
    struct resp r = {0};
    int fd = send_request(port, method, path, body ? body : "", body ? strlen(body) : 0, headers);
    if (fd >= 0)
        read_response(fd, &r);
    if (!r.head)
        r.head = r.body = calloc(1, 1);
    return r;
}

#define EXPECT(r, code, needle)                                                                  \
    CHECKF((r).status == (code) && strstr((r).body, (needle)), "status %d body %.400s (want %d, %s)", \
           (r).status, (r).body, (code), (needle))

/* A temporary folder of links to fixture models (and one broken file). */
static char models_dir[256];

static bool make_models_dir(bool with_broken)
{
    snprintf(models_dir, sizeof models_dir, "/tmp/brasa-test-models-XXXXXX");
    if (!mkdtemp(models_dir))
        return false;
    const char *names[] = {"qwen2.Q8_0.gguf", "llama.Q8_0.gguf"};
    for (int i = 0; i < 2; i++) {
        char src[1024], dst[512];
        char rel[64];
        snprintf(rel, sizeof rel, "fixtures/%s", names[i]);
        const char *p = test_shared_path(rel);
        if (p[0] != '/') {
            char cwd[512];
            if (!getcwd(cwd, sizeof cwd))
                return false;
            snprintf(src, sizeof src, "%s/%s", cwd, p);
        } else {
            snprintf(src, sizeof src, "%s", p);
        }
        snprintf(dst, sizeof dst, "%s/%s", models_dir, names[i]);
        if (symlink(src, dst) != 0)
            return false;
    }
    if (with_broken) {
        char dst[512];
        snprintf(dst, sizeof dst, "%s/broken.gguf", models_dir);
        FILE *f = fopen(dst, "wb");
        if (!f)
            return false;
        fputs("this is not a GGUF file", f);
        fclose(f);
    }
    return true;
}

static void remove_models_dir(void)
{
    const char *names[] = {"qwen2.Q8_0.gguf", "llama.Q8_0.gguf", "broken.gguf"};
    char p[512];
    for (int i = 0; i < 3; i++) {
        snprintf(p, sizeof p, "%s/%s", models_dir, names[i]);
        unlink(p);
    }
    rmdir(models_dir);
}

static bool have_inputs(void)
{
    struct stat st;
    return stat(server_bin(), &st) == 0 && test_file_exists(test_shared_path("fixtures/qwen2.Q8_0.gguf")) &&
           test_file_exists(test_shared_path("fixtures/llama.Q8_0.gguf"));
}

#define SKIP_WITHOUT_INPUTS()                                                                      \
    do {                                                                                           \
        if (!have_inputs())                                                                        \
            SKIP("brasa-server (make server) or the fixture models are missing");                 \
    } while (0)

TEST(server_refuses_remote_host_without_flag)
{
    SKIP_WITHOUT_INPUTS();
    pid_t pid = fork();
    if (pid == 0) {
        int dn = open("/dev/null", O_WRONLY);
        dup2(dn, 2);
        execl(server_bin(), server_bin(), "--host", "0.0.0.0", "--port", "0", "-m",
              test_shared_path("fixtures/qwen2.Q8_0.gguf"), (char *)NULL);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 2, "status %d", st);
}

/* Routing and validation need no working engine: the server starts with no model loaded. */
TEST(server_routes_and_errors)
{
    SKIP_WITHOUT_INPUTS();
    REQUIRE(make_models_dir(true));
    struct server sv;
    const char *args[] = {"--models-dir", models_dir, "--max-body", "65536", NULL};
    REQUIRE(server_start(&sv, NULL, args));
    int port = sv.port;
    struct resp r;

    r = http(port, "GET", "/health", NULL, NULL);
    EXPECT(r, 200, "\"status\":\"ok\"");
    resp_free(&r);
    r = http(port, "GET", "/v1/models", NULL, NULL);
    EXPECT(r, 200, "\"id\":\"qwen2.Q8_0\"");
    CHECK(strstr(r.body, "\"id\":\"llama.Q8_0\"") && strstr(r.body, "\"object\":\"list\""));
    resp_free(&r);
    r = http(port, "GET", "/", NULL, NULL);
    EXPECT(r, 200, "<html");
    CHECK(strstr(r.head, "text/html") != NULL);
    resp_free(&r);
    r = http(port, "GET", "/app.js", NULL, NULL);
    EXPECT(r, 200, "");
    CHECK(strstr(r.head, "javascript") != NULL);
    resp_free(&r);
    r = http(port, "GET", "/nope", NULL, NULL);
    EXPECT(r, 404, "\"error\"");
    resp_free(&r);
    r = http(port, "GET", "/v1/nope", NULL, NULL);
    EXPECT(r, 404, "no such endpoint");
    resp_free(&r);
    r = http(port, "GET", "/v1/chat/completions", NULL, NULL);
    EXPECT(r, 405, "POST");
    resp_free(&r);

    /* malformed JSON, wrong types (the field is named), unknown model */
    const char *msgs = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]";
    char body[512];
    r = http(port, "POST", "/v1/chat/completions", "{\"messages\": [", NULL);
    EXPECT(r, 400, "malformed JSON");
    resp_free(&r);
    r = http(port, "POST", "/v1/chat/completions", "[1,2]", NULL);
    EXPECT(r, 400, "JSON object");
    resp_free(&r);
    r = http(port, "POST", "/v1/chat/completions", "{\"messages\":\"hi\"}", NULL);
    EXPECT(r, 400, "\"param\":\"messages\"");
    resp_free(&r);
    const char *bad[][2] = {{"\"temperature\":\"hot\"", "temperature"}, {"\"max_tokens\":\"10\"", "max_tokens"},
                            {"\"max_tokens\":1.5", "max_tokens"},       {"\"stream\":\"yes\"", "stream"},
                            {"\"top_p\":[1]", "top_p"},                 {"\"top_k\":-1", "top_k"},
                            {"\"stop\":7", "stop"},                     {"\"seed\":\"x\"", "seed"},
                            {"\"presence_penalty\":9", "presence_penalty"}, {"\"model\":5", "model"},
                            {"\"max_tokens\":100000000", "max_tokens"}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(body, sizeof body, "{%s,%s}", msgs, bad[i][0]);
        r = http(port, "POST", "/v1/chat/completions", body, NULL);
        char want[64];
        snprintf(want, sizeof want, "\"param\":\"%s\"", bad[i][1]);
        EXPECT(r, 400, want);
        resp_free(&r);
    }
    r = http(port, "POST", "/v1/completions", "{\"prompt\":3}", NULL);
    EXPECT(r, 400, "\"param\":\"prompt\"");
    resp_free(&r);
    snprintf(body, sizeof body, "{%s,\"model\":\"no-such-model\"}", msgs);
    r = http(port, "POST", "/v1/chat/completions", body, NULL);
    EXPECT(r, 404, "model_not_found");
    resp_free(&r);
    /* unknown fields are ignored: this one fails only because no model is loaded yet */
    snprintf(body, sizeof body, "{%s,\"frobnicate\":{\"x\":[1,2]},\"user\":\"u\"}", msgs);
    r = http(port, "POST", "/v1/chat/completions", body, NULL);
    EXPECT(r, 503, "no model is loaded");
    resp_free(&r);
    r = http(port, "POST", "/tokenize", "{\"content\":\"hi\"}", NULL);
    EXPECT(r, 503, "model_not_loaded");
    resp_free(&r);
    r = http(port, "POST", "/tokenize", "{\"content\":1}", NULL);
    EXPECT(r, 400, "\"param\":\"content\"");
    resp_free(&r);
    r = http(port, "POST", "/detokenize", "{\"tokens\":\"1 2\"}", NULL);
    EXPECT(r, 400, "\"param\":\"tokens\"");
    resp_free(&r);

    /* a body over --max-body */
    size_t big = 100000;
    char *huge = malloc(big + 1);
    memset(huge, ' ', big);
    huge[0] = '{';
    huge[big - 1] = '}';
    huge[big] = 0;
    r = http(port, "POST", "/v1/chat/completions", huge, NULL);
    EXPECT(r, 413, "limit is 65536");
    resp_free(&r);
    free(huge);

    /* lifecycle with a failing load: loading -> error, with timestamps */
    r = http(port, "POST", "/api/models/load", "{\"model\":\"nope\"}", NULL);
    EXPECT(r, 404, "model_not_found");
    resp_free(&r);
    r = http(port, "POST", "/api/models/load", "{\"model\":7}", NULL);
    EXPECT(r, 400, "\"param\":\"model\"");
    resp_free(&r);
    r = http(port, "POST", "/api/models/load", "{\"model\":\"broken\",\"wait\":true}", NULL);
    EXPECT(r, 500, "model_load_error");
    resp_free(&r);
    r = http(port, "GET", "/api/models", NULL, NULL);
    EXPECT(r, 200, "\"state\":\"error\"");
    char *ld = strstr(r.body, "\"state\":\"loading\"");
    CHECKF(ld && strstr(ld, "\"state\":\"error\"") && strstr(r.body, "\"t\":"), "%.600s", r.body);
    resp_free(&r);
    r = http(port, "GET", "/api/telemetry", NULL, NULL);
    EXPECT(r, 200, "\"memory\"");
    CHECK(strstr(r.body, "\"queue\"") && strstr(r.body, "\"used\":") && strstr(r.body, "\"timeline\""));
    resp_free(&r);

    /* telemetry stream: at least two events in about two seconds */
    int fd = send_request(port, "GET", "/api/telemetry/stream", "", 0, NULL);
    REQUIRE(fd >= 0);
    char buf[65536];
    size_t got = 0;
    int events = 0;
    double t0 = now_s();
    while (events < 2 && now_s() - t0 < 5) {
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = 0;
        events = 0;
        for (char *p = buf; (p = strstr(p, "data: {")); p++)
            events++;
        if (got > sizeof buf - 4096)
            got = 0;
    }
    close(fd);
    CHECKF(events >= 2, "events %d", events);
    CHECK(strstr(buf, "text/event-stream") != NULL || got == 0 || events >= 2);

    r = http(port, "GET", "/health", NULL, NULL);
    EXPECT(r, 200, "ok");
    resp_free(&r);
    CHECKF(server_stop(&sv) == 0, "the server did not stop cleanly");
    remove_models_dir();
}

TEST(server_api_key)
{
    SKIP_WITHOUT_INPUTS();
    REQUIRE(make_models_dir(false));
    struct server sv;
    const char *args[] = {"--models-dir", models_dir, "--api-key", "s3cret", NULL};
    REQUIRE(server_start(&sv, NULL, args));
    struct resp r = http(sv.port, "GET", "/v1/models", NULL, NULL);
    EXPECT(r, 401, "API key");
    resp_free(&r);
    r = http(sv.port, "GET", "/v1/models", NULL, "Authorization: Bearer wrong\r\n");
    EXPECT(r, 401, "API key");
    resp_free(&r);
    r = http(sv.port, "GET", "/v1/models", NULL, "Authorization: Bearer s3cret\r\n");
    EXPECT(r, 200, "qwen2.Q8_0");
    resp_free(&r);
    r = http(sv.port, "GET", "/health", NULL, NULL);
    EXPECT(r, 200, "ok");
    resp_free(&r);
    r = http(sv.port, "GET", "/", NULL, NULL);
    EXPECT(r, 200, "<html");
    resp_free(&r);
    CHECK(server_stop(&sv) == 0);
    remove_models_dir();
}

/* ---- with the engine ---- */

static int usage_n(const char *body, const char *key)
{
    const char *p = strstr(body, key);
    return p ? atoi(p + strlen(key)) : -1;
}

struct client_arg {
    int port, i;
    bool ok;
    char why[300];
};

static void *client_main(void *arg)
{
    struct client_arg *a = arg;
    char body[512];
    bool stream = a->i % 2;
    snprintf(body, sizeof body,
             "{\"messages\":[{\"role\":\"user\",\"content\":\"client %d says hello\"}],\"max_tokens\":6,"
             "\"ignore_eos\":true,\"temperature\":0,\"stream\":%s}",
             a->i, stream ? "true" : "false");
    struct resp r = http(a->port, "POST", "/v1/chat/completions", body, NULL);
    if (stream)
        a->ok = r.status == 200 && strstr(r.body, "data: [DONE]") && usage_n(r.body, "\"completion_tokens\":") == 6;
    else
        a->ok = r.status == 200 && usage_n(r.body, "\"completion_tokens\":") == 6 &&
                strstr(r.body, "\"finish_reason\":\"length\"");
    snprintf(a->why, sizeof a->why, "%d %.250s", r.status, r.body);
    resp_free(&r);
    return NULL;
}

TEST(server_generation_end_to_end)
{
    SKIP_WITHOUT_INPUTS();
    REQUIRE(make_models_dir(false));
    struct server sv;
    char mpath[600];
    snprintf(mpath, sizeof mpath, "%s/qwen2.Q8_0.gguf", models_dir);
    const char *args[] = {"-m", mpath, "--models-dir", models_dir, NULL};
    REQUIRE(server_start(&sv, "2", args));
    int port = sv.port;
    char body[512];
    struct resp r = http(port, "POST", "/api/models/load", "{\"model\":\"qwen2.Q8_0\",\"wait\":true}", NULL);
    if (r.status != 200) {
        resp_free(&r);
        server_stop(&sv);
        remove_models_dir();
        SKIP("the engine cannot load the fixture model yet");
    }
    resp_free(&r);

    /* chat, not streamed */
    r = http(port, "POST", "/v1/chat/completions",
             "{\"model\":\"qwen2.Q8_0\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
             "{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":8,\"temperature\":0,\"ignore_eos\":true}",
             NULL);
    EXPECT(r, 200, "\"object\":\"chat.completion\"");
    CHECKF(usage_n(r.body, "\"prompt_tokens\":") > 0 && usage_n(r.body, "\"completion_tokens\":") == 8 &&
               strstr(r.body, "\"finish_reason\":\"length\"") && strstr(r.body, "\"role\":\"assistant\""),
           "%.500s", r.body);
    resp_free(&r);

    /* chat, streamed: role chunk, content chunks, finish chunk with usage, [DONE] */
    r = http(port, "POST", "/v1/chat/completions",
             "{\"messages\":[{\"role\":\"user\",\"content\":\"Hello\"}],\"max_tokens\":8,\"stream\":true,"
             "\"ignore_eos\":true,\"seed\":3}",
             NULL);
    EXPECT(r, 200, "\"object\":\"chat.completion.chunk\"");
    CHECK(strstr(r.head, "text/event-stream") != NULL);
    size_t bl = strlen(r.body);
    CHECKF(bl > 14 && !strcmp(r.body + bl - 14, "data: [DONE]\n\n"), "tail %.60s", bl > 60 ? r.body + bl - 60 : r.body);
    CHECK(strstr(r.body, "\"delta\":{\"role\":\"assistant\"") && strstr(r.body, "\"finish_reason\":\"length\"") &&
          usage_n(r.body, "\"completion_tokens\":") == 8);
    resp_free(&r);

    /* completions, both ways; stop strings cut the text */
    r = http(port, "POST", "/v1/completions",
             "{\"prompt\":\"Once upon a time\",\"max_tokens\":5,\"temperature\":0,\"ignore_eos\":true}", NULL);
    EXPECT(r, 200, "\"object\":\"text_completion\"");
    CHECK(usage_n(r.body, "\"completion_tokens\":") == 5 && strstr(r.body, "\"text\":"));
    resp_free(&r);
    r = http(port, "POST", "/v1/completions",
             "{\"prompt\":\"Once upon a time\",\"max_tokens\":5,\"stream\":true,\"ignore_eos\":true}", NULL);
    EXPECT(r, 200, "data: [DONE]");
    CHECK(strstr(r.body, "\"text\":") && usage_n(r.body, "\"total_tokens\":") > 5);
    resp_free(&r);

    /* a stop string cuts the text before it and ends with finish_reason "stop" */
    r = http(port, "POST", "/v1/completions",
             "{\"prompt\":\"Once upon a time\",\"max_tokens\":12,\"temperature\":0,\"ignore_eos\":true}", NULL);
    char full[256] = "";
    const char *tx = strstr(r.body, "\"text\":\"");
    if (tx) {
        tx += 8;
        const char *q = strchr(tx, '"');
        if (q && q - tx < 200 && !memchr(tx, '\\', (size_t)(q - tx)))
            snprintf(full, sizeof full, "%.*s", (int)(q - tx), tx);
    }
    resp_free(&r);
    size_t fl = strlen(full);
    if (fl >= 6) {
        char stop[8], want[256];
        snprintf(stop, sizeof stop, "%.3s", full + fl / 2);
        const char *at = strstr(full, stop);
        snprintf(want, sizeof want, "\"text\":\"%.*s\"", (int)(at - full), full);
        snprintf(body, sizeof body,
                 "{\"prompt\":\"Once upon a time\",\"max_tokens\":12,\"temperature\":0,\"ignore_eos\":true,"
                 "\"stop\":[\"%s\"]}", stop);
        r = http(port, "POST", "/v1/completions", body, NULL);
        EXPECT(r, 200, want);
        CHECKF(strstr(r.body, "\"finish_reason\":\"stop\"") != NULL, "%.300s", r.body);
        resp_free(&r);
    }

    /* a prompt longer than the context is refused with the limit named */
    {
        char *lp = malloc(9000);
        int n = snprintf(lp, 9000, "{\"prompt\":\"");
        for (int i = 0; i < 1000; i++)
            n += snprintf(lp + n, (size_t)(9000 - n), "word%d ", i % 10);
        snprintf(lp + n, (size_t)(9000 - n), "\"}");
        r = http(port, "POST", "/v1/completions", lp, NULL);
        EXPECT(r, 400, "context_length_exceeded");
        CHECK(strstr(r.body, "the limit is") != NULL);
        resp_free(&r);
        free(lp);
    }

    /* tokenize / detokenize round trip */
    r = http(port, "POST", "/tokenize", "{\"content\":\"Hello world\"}", NULL);
    EXPECT(r, 200, "\"tokens\":[");
    char ids[256] = "";
    const char *a = strstr(r.body, "[");
    const char *b = a ? strchr(a, ']') : NULL;
    if (a && b && b - a < 200)
        snprintf(ids, sizeof ids, "{\"tokens\":%.*s}", (int)(b - a + 1), a);
    resp_free(&r);
    r = http(port, "POST", "/detokenize", ids, NULL);
    EXPECT(r, 200, "\"content\":\"Hello world\"");
    resp_free(&r);
    r = http(port, "POST", "/detokenize", "{\"tokens\":[99999999]}", NULL);
    EXPECT(r, 400, "\"param\":\"tokens\"");
    resp_free(&r);

    /* a client that leaves mid-stream frees the engine at once */
    r = http(port, "GET", "/api/telemetry", NULL, NULL);
    int cancelled0 = usage_n(r.body, "\"cancelled\":");
    resp_free(&r);
    int fd = send_request(port, "POST", "/v1/chat/completions",
                          "{\"messages\":[{\"role\":\"user\",\"content\":\"go on\"}],\"max_tokens\":400,"
                          "\"stream\":true,\"ignore_eos\":true}",
                          strlen("{\"messages\":[{\"role\":\"user\",\"content\":\"go on\"}],\"max_tokens\":400,"
                                 "\"stream\":true,\"ignore_eos\":true}"),
                          NULL);
    REQUIRE(fd >= 0);
    char buf[8192];
    size_t got = 0;
    double t0 = now_s();
    while (now_s() - t0 < 10 && got < sizeof buf - 1) {
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = 0;
        if (strstr(buf, "\"content\":\"") && strstr(strstr(buf, "\"content\":\"") + 1, "\"content\":"))
            break; /* at least one token arrived */
    }
    close(fd);
    double t_close = now_s();
    r = http(port, "POST", "/v1/completions", "{\"prompt\":\"Hi\",\"max_tokens\":2,\"ignore_eos\":true}", NULL);
    double waited = now_s() - t_close;
    EXPECT(r, 200, "text_completion");
    /* 400 tokens at 2 ms each would hold the engine for about a second */
    CHECKF(waited < 0.6, "the next request waited %.2f s after the client left", waited);
    resp_free(&r);
    r = http(port, "GET", "/api/telemetry", NULL, NULL);
    CHECKF(usage_n(r.body, "\"cancelled\":") == cancelled0 + 1, "%.300s", strstr(r.body, "requests"));
    CHECK(strstr(r.body, "\"last\":{") != NULL);
    resp_free(&r);

    /* a client that leaves while queued leaves the queue at once */
    {
        const char *longreq = "{\"prompt\":\"go\",\"max_tokens\":400,\"ignore_eos\":true}";
        int busy = send_request(port, "POST", "/v1/completions", longreq, strlen(longreq), NULL);
        REQUIRE(busy >= 0);
        usleep(150000); /* the engine is now busy with it */
        int queued = send_request(port, "POST", "/v1/completions", longreq, strlen(longreq), NULL);
        REQUIRE(queued >= 0);
        int q = -1;
        for (int i = 0; i < 50 && q != 1; i++) {
            r = http(port, "GET", "/health", NULL, NULL);
            q = usage_n(r.body, "\"queue\":");
            resp_free(&r);
            if (q != 1)
                usleep(20000);
        }
        CHECKF(q == 1, "queue %d with one request waiting", q);
        close(queued);
        for (int i = 0; i < 50 && q != 0; i++) {
            usleep(20000);
            r = http(port, "GET", "/health", NULL, NULL);
            q = usage_n(r.body, "\"queue\":");
            resp_free(&r);
        }
        CHECKF(q == 0, "queue %d after the waiting client left", q);
        struct resp rb;
        read_response(busy, &rb);
        CHECKF(rb.status == 200 && usage_n(rb.body, "\"completion_tokens\":") == 400, "%d %s", rb.status,
               strlen(rb.body) > 300 ? rb.body + strlen(rb.body) - 300 : rb.body);
        resp_free(&rb);
    }

    /* 20 clients at once, half streaming: every one answered in full */
    enum { NC = 20 };
    pthread_t th[NC];
    struct client_arg ca[NC];
    for (int i = 0; i < NC; i++) {
        ca[i] = (struct client_arg){.port = port, .i = i};
        pthread_create(&th[i], NULL, client_main, &ca[i]);
    }
    int ok = 0;
    for (int i = 0; i < NC; i++) {
        pthread_join(th[i], NULL);
        ok += ca[i].ok;
        CHECKF(ca[i].ok, "client %d: %s", i, ca[i].why);
    }
    CHECKF(ok == NC, "%d of %d clients answered", ok, NC);
    r = http(port, "GET", "/health", NULL, NULL);
    EXPECT(r, 200, "\"queue\":0");
    resp_free(&r);

    /* a request naming another model switches to it: unloading -> loading -> ready */
    r = http(port, "POST", "/v1/completions",
             "{\"model\":\"llama.Q8_0\",\"prompt\":\"Hi\",\"max_tokens\":2,\"ignore_eos\":true}", NULL);
    EXPECT(r, 200, "\"model\":\"llama.Q8_0\"");
    resp_free(&r);
    r = http(port, "GET", "/api/models", NULL, NULL);
    const char *u = strstr(r.body, "\"state\":\"unloading\",\"model\":\"qwen2.Q8_0\"");
    const char *l = u ? strstr(u, "\"state\":\"loading\",\"model\":\"llama.Q8_0\"") : NULL;
    CHECKF(l && strstr(l, "\"state\":\"ready\",\"model\":\"llama.Q8_0\""), "%.900s", r.body);
    resp_free(&r);
    r = http(port, "POST", "/api/models/unload", "{\"wait\":true}", NULL);
    EXPECT(r, 200, "\"state\":\"unloaded\"");
    resp_free(&r);
    CHECKF(server_stop(&sv) == 0, "the server did not stop cleanly");
    remove_models_dir();
}

/* `brasa serve` runs the brasa-server next to it */
TEST(server_brasa_serve_execs_server)
{
    SKIP_WITHOUT_INPUTS();
    const char *bin = getenv("BRASA_BIN") ? getenv("BRASA_BIN") : "build/brasa";
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s serve --help", bin);
    FILE *p = popen(cmd, "r");
    REQUIRE(p != NULL);
    char out[4096];
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = 0;
    int st = pclose(p);
    CHECKF(st == 0 && strstr(out, "--models-dir") && strstr(out, "--api-key"), "status %d: %.300s", st, out);
}

TEST_MAIN(T(server_refuses_remote_host_without_flag), T(server_brasa_serve_execs_server), T(server_routes_and_errors), T(server_api_key),
          T(server_generation_end_to_end))
