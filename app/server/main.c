/* brasa-server: options, the listening socket, signals. `brasa serve` runs this program. */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http.h"
#include "web_assets.h"

const struct embedded_file *web_find(const char *url)
{
    if (strstr(url, ".."))
        return NULL;
    size_t ul = strlen(url);
    for (const struct embedded_file *f = web_files; f->path; f++) {
        size_t pl = strlen(f->path);
        /* match "/name" against ".../web/name" */
        if (pl >= ul + 3 && !strcmp(f->path + pl - ul, url) && !memcmp(f->path + pl - ul - 3, "web", 3))
            return f;
    }
    return NULL;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: brasa serve [-m FILE.gguf] [--models-dir DIR] [--host ADDR] [--port N] [--api-key KEY]\n"
            "  -m, --model FILE       model loaded at start (also listed by /v1/models)\n"
            "  --models-dir DIR       offer every *.gguf in DIR; switch with POST /api/models/load\n"
            "  --host ADDR            numeric address to listen on (default 127.0.0.1)\n"
            "  --allow-remote         needed for a non-loopback --host (the API would be reachable by others)\n"
            "  --port N               port (default 8080; 0 picks a free one, printed on stdout)\n"
            "  --api-key KEY          require \"Authorization: Bearer KEY\" on the API (or $BRASA_API_KEY)\n"
            "  -t, --threads N        engine threads (default: all cores)\n"
            "  --gpus N|2,3           split each model over GPUs 0..N-1, or these (NCCL)\n"
            "  -c, --ctx N            context length per model (default: from the file, capped)\n"
            "  --mmap                 CPU: read the weights from the file's mapping (default: moved\n"
            "                         into memory in huge pages, where the memory is there)\n"
            "  --max-body BYTES       largest request body (default 1048576)\n"
            "  --max-prompt N         largest prompt in tokens (default 8192)\n"
            "  --max-tokens N         largest max_tokens a request may ask for (default 4096)\n"
            "  --max-queue N          requests waiting at once (default 64)\n"
            "The dashboard is at http://HOST:PORT/.\n");
}

static bool parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (!*s || *end || v < lo || v > hi)
        return false;
    *out = v;
    return true;
}

/* Returns 0 ok, 2 usage error (message printed), -1 help printed. */
static int parse_args(int argc, char **argv, struct srv_config *c)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return -1;
        }
        if (!strcmp(a, "--allow-remote")) {
            c->allow_remote = true;
            continue;
        }
        if (!strcmp(a, "--mmap")) {
            c->keep_mapped = true;
            continue;
        }
        if (!v) {
            fprintf(stderr, "brasa serve: %s needs a value (see --help)\n", a);
            return 2;
        }
        i++;
        if (!strcmp(a, "-m") || !strcmp(a, "--model"))
            c->model = v;
        else if (!strcmp(a, "--models-dir"))
            c->models_dir = v;
        else if (!strcmp(a, "--host"))
            c->host = v;
        else if (!strcmp(a, "--api-key"))
            c->api_key = v;
        else if (!strcmp(a, "--port") && parse_int(v, 0, 65535, &n))
            c->port = (int)n;
        else if ((!strcmp(a, "-t") || !strcmp(a, "--threads")) && parse_int(v, 0, 1024, &n))
            c->n_threads = (int)n;
        else if (!strcmp(a, "--gpus")) {
            struct brasa_err e = {{0}};
            if (brasa_gpus_parse(v, &c->n_gpus, c->gpu_ids, &e) != BRASA_OK) {
                fprintf(stderr, "brasa serve: %s\n", e.msg);
                return 2;
            }
        } else if ((!strcmp(a, "-c") || !strcmp(a, "--ctx")) && parse_int(v, 0, 1 << 24, &n))
            c->n_ctx = (int)n;
        else if (!strcmp(a, "--max-body") && parse_int(v, 1024, 1L << 30, &n))
            c->max_body = (size_t)n;
        else if (!strcmp(a, "--max-prompt") && parse_int(v, 1, 1 << 24, &n))
            c->max_prompt_tokens = (int)n;
        else if (!strcmp(a, "--max-tokens") && parse_int(v, 1, 1 << 24, &n))
            c->max_tokens = (int)n;
        else if (!strcmp(a, "--max-queue") && parse_int(v, 1, 100000, &n))
            c->max_queue = (int)n;
        else {
            fprintf(stderr, "brasa serve: bad option or value: %s %s (see --help)\n", a, v);
            return 2;
        }
    }
    if (!c->model && !c->models_dir) {
        fprintf(stderr, "brasa serve: give a model (-m FILE.gguf) or a folder of models (--models-dir DIR)\n");
        return 2;
    }
    if (!srv_loopback_host(c->host) && !c->allow_remote) {
        fprintf(stderr,
                "brasa serve: --host %s is not a loopback address; anyone who can reach it could use the API.\n"
                "Add --allow-remote (and consider --api-key) if that is what you want.\n",
                c->host);
        return 2;
    }
    return 0;
}

/* A listening socket on host:port; fills the port actually bound. */
static int listen_on(const char *host, int *port, bool *v6)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE};
    struct addrinfo *ai = NULL;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", *port);
    if (!strcmp(host, "localhost"))
        host = "127.0.0.1";
    int rc = getaddrinfo(host, ps, &hints, &ai);
    if (rc != 0) {
        fprintf(stderr, "brasa serve: --host %s: %s (give a numeric address)\n", host, gai_strerror(rc));
        return -1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 128) != 0) {
        fprintf(stderr, "brasa serve: cannot listen on %s port %d: %s\n", host, *port, strerror(errno));
        if (fd >= 0)
            close(fd);
        freeaddrinfo(ai);
        return -1;
    }
    *v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
        *port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

int main(int argc, char **argv)
{
    struct srv_config cfg = {.host = "127.0.0.1", .port = 8080, .api_key = getenv("BRASA_API_KEY"),
                             .max_body = 1 << 20, .max_prompt_tokens = 8192, .max_tokens = 4096,
                             .max_queue = 64, .max_conn = 256};
    const char *delay = getenv("BRASA_SERVE_TOKEN_DELAY_MS");
    cfg.token_delay_ms = delay ? atoi(delay) : 0;
    if (cfg.api_key && !cfg.api_key[0])
        cfg.api_key = NULL;
    int rc = parse_args(argc, argv, &cfg);
    if (rc)
        return rc < 0 ? 0 : rc;

    /* Signals go to main alone (sigwait below); every thread started later inherits the mask. */
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    bool v6 = false;
    int fd = listen_on(cfg.host, &cfg.port, &v6);
    if (fd < 0)
        return 1;
    static struct srv s;
    char err[1200];
    if (srv_init(&s, &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "brasa serve: %s\n", err);
        close(fd);
        return 1;
    }
    struct MHD_Daemon *d = http_start(&s, fd, v6);
    if (!d) {
        fprintf(stderr, "brasa serve: cannot start the HTTP server\n");
        srv_shutdown(&s);
        srv_free(&s);
        close(fd);
        return 1;
    }
    printf("brasa serve: listening on http://%s%s%s:%d/ (%d model%s offered)\n", v6 ? "[" : "", cfg.host,
           v6 ? "]" : "", cfg.port, s.n_models, s.n_models == 1 ? "" : "s");
    fflush(stdout);

    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "brasa serve: %s, stopping\n", sig == SIGINT ? "interrupted" : "terminated");
    srv_shutdown(&s);
    MHD_stop_daemon(d);
    close(fd);
    srv_free(&s);
    return 0;
}
