/* Helpers shared by the subcommands: a table-driven option parser, a progress bar on
 * stderr, token-id lists, and loading a model with the usual messages. */
#ifndef BRASA_CLI_OPTS_H
#define BRASA_CLI_OPTS_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "brasa.h"

enum opt_kind {
    OPT_FLAG,  /* bool, no value */
    OPT_STR,   /* const char * */
    OPT_INT,   /* int */
    OPT_FLOAT, /* float */
    OPT_U64,   /* uint64_t */
};

struct opt {
    const char *shrt;  /* "-m" or NULL */
    const char *lng;   /* "--model" or NULL */
    enum opt_kind kind;
    void *dst;
    const char *meta;  /* value name in the help ("FILE") */
    const char *help;
};

/* Parses argv[1..argc) (argv[0] is the subcommand) against a table ending in {0}. Accepts
 * "--name value" and "--name=value". Prints help on -h/--help. Returns 0 to go on, -1 when
 * help was printed (exit 0), 2 on a usage error (message printed). */
int opts_parse(const char *usage, const struct opt *tbl, int argc, char **argv);
void opts_help(const char *usage, const struct opt *tbl, FILE *f);

/* Parses "1,2,3" (spaces allowed) into a malloc'd array. Returns false on a bad list. */
bool opts_parse_ids(const char *s, int32_t **ids, int *n);

/* A one-line progress bar on stderr, drawn only when stderr is a terminal. */
struct progress {
    bool on;
    const char *label;
    int last; /* last permille drawn */
    double t0;
};
void progress_begin(struct progress *p, const char *label);
void progress_update(struct progress *p, float fraction);
void progress_end(struct progress *p); /* clears the line */
/* Adapter for brasa_model_opts.progress (ud is a struct progress). */
void progress_cb(void *ud, float fraction);

/* How a command loads its model: threads, and the GPUs it is split over (--gpus; across
 * processes --tp-world, --tp-rank, --tp-id) */
struct cli_model {
    int threads, world, rank;
    bool keep_mapped; /* --mmap */
    const char *gpus; /* a count or a list (brasa_gpus_parse) */
    const char *id;
};
/* Loads a model with a progress bar; prints the error and returns NULL on failure. */
struct brasa_model *cli_load_model(const char *cmd, const char *path, const struct cli_model *cm);
/* "f16" or "f32"; false if neither. */
bool cli_kv_type(const char *s, enum brasa_kv_type *out);
/* Human-readable byte count ("373.7 MiB") into buf. */
const char *cli_bytes(uint64_t n, char *buf, size_t cap);
/* Tensor-mix name of a GGUF file ("Q4_K_M") from general.file_type, or "?" */
const char *cli_file_type_name(const char *path, char *buf, size_t cap);

#endif
