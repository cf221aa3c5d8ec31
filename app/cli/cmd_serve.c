#include <stdio.h>

#include "cli.h"

int cmd_serve(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "brasa serve: not built yet\n");
    return 1;
}
