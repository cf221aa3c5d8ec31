#include <stdio.h>

#include "cli.h"

int cmd_synth(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "brasa synth: not built yet\n");
    return 1;
}
