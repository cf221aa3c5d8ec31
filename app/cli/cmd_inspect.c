#include <stdio.h>

#include "cli.h"

int cmd_inspect(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "brasa inspect: not built yet\n");
    return 1;
}
