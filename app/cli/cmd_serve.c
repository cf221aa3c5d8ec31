/* brasa serve: runs brasa-server, the HTTP server built next to this binary. The server is its
 * own program so that brasa itself needs nothing beyond libc, libm, pthreads and libdl. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

/* Directory of the running executable into buf (no trailing slash); false if unknown. */
static int self_dir(char *buf, size_t cap)
{
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    if (n <= 0 || (size_t)n >= cap - 1)
        return 0;
    buf[n] = 0;
    char *slash = strrchr(buf, '/');
    if (!slash)
        return 0;
    *slash = 0;
    return 1;
}

int cmd_serve(int argc, char **argv)
{
    char dir[PATH_MAX], path[PATH_MAX + 32];
    if (!self_dir(dir, sizeof dir)) {
        fprintf(stderr, "brasa serve: cannot find the folder of this program (/proc/self/exe)\n");
        return 1;
    }
    snprintf(path, sizeof path, "%s/brasa-server", dir);
    if (access(path, X_OK) != 0) {
        fprintf(stderr,
                "brasa serve: %s is missing: the server is built separately.\n"
                "Build it with `make server` (it needs libmicrohttpd and jansson:\n"
                "  sudo apt-get install -y pkg-config libmicrohttpd-dev libjansson-dev)\n",
                path);
        return 1;
    }
    char **args = calloc((size_t)argc + 1, sizeof *args);
    if (!args)
        return 1;
    args[0] = path;
    for (int i = 1; i < argc; i++)
        args[i] = argv[i];
    execv(path, args);
    fprintf(stderr, "brasa serve: cannot run %s: %s\n", path, strerror(errno));
    free(args);
    return 1;
}
