/* The HTTP front end (libmicrohttpd). */
#ifndef BRASA_SERVER_HTTP_H
#define BRASA_SERVER_HTTP_H
#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <microhttpd.h>

#include "server.h"

/* Serves on an already listening socket; NULL when the daemon cannot start. */
struct MHD_Daemon *http_start(struct srv *s, int listen_fd, bool ipv6);

#endif
