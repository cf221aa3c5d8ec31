#include <stdio.h>

#include "cli.h"

int cmd_quantize(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "brasa quantize: not built yet\n");
    return 1;
}
