#include <stdio.h>

#include "cli.h"

int cmd_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "brasa run: not built yet\n");
    return 1;
}

int cmd_chat(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "brasa chat: not built yet\n");
    return 1;
}

int cmd_logits(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "brasa logits: not built yet\n");
    return 1;
}

int cmd_perplexity(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "brasa perplexity: not built yet\n");
    return 1;
}

int cmd_bench(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "brasa bench: not built yet\n");
    return 1;
}
