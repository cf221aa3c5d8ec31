#include <stdio.h>

#include "cli.h"

int cmd_tokenize(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "brasa tokenize: not built yet\n");
    return 1;
}

int cmd_detokenize(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "brasa detokenize: not built yet\n");
    return 1;
}
