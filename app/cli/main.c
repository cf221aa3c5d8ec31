/* brasa: GGUF file in, tokens out. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "core/platform.h"

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
};

static const struct command commands[] = {
    {"run", cmd_run, "generate a continuation of a prompt"},
    {"chat", cmd_chat, "interactive multi-turn chat"},
    {"bench", cmd_bench, "prompt processing and generation speed"},
    {"inspect", cmd_inspect, "print a GGUF file's metadata and tensors"},
    {"perplexity", cmd_perplexity, "perplexity of a text file"},
    {"logits", cmd_logits, "write the logits of every prompt position"},
    {"tokenize", cmd_tokenize, "text to token ids"},
    {"detokenize", cmd_detokenize, "token ids to text"},
    {"quantize", cmd_quantize, "convert a GGUF file to another weight type"},
    {"synth", cmd_synth, "write a random-weight model of a real family's shapes"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server and web dashboard"},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: brasa COMMAND [options]\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n'brasa COMMAND --help' describes a command's options. Every command also takes\n"
               "--gpu cuda|hip|auto: the GPU driver to try (default auto: CUDA, then HIP;\n"
               "the CPU when neither is present).\n");
}

/* "--gpu cuda|hip|auto" is accepted by every command: it is taken out of argv here and handed
 * to the GPU layer as $BRASA_GPU (read where the driver is loaded, see gpu/drv_hip.h). */
static int take_gpu_option(int *argc, char **argv)
{
    for (int i = 2; i < *argc; i++) {
        const char *v = NULL;
        int used = 1;
        if (!strcmp(argv[i], "--gpu")) {
            if (i + 1 >= *argc) {
                fprintf(stderr, "brasa: --gpu needs a value: cuda, hip or auto\n");
                return 2;
            }
            v = argv[i + 1];
            used = 2;
        } else if (!strncmp(argv[i], "--gpu=", 6)) {
            v = argv[i] + 6;
        } else {
            continue;
        }
        if (strcmp(v, "cuda") && strcmp(v, "hip") && strcmp(v, "auto")) {
            fprintf(stderr, "brasa: --gpu must be cuda, hip or auto (got '%s')\n", v);
            return 2;
        }
        setenv("BRASA_GPU", v, 1);
        for (int k = i; k + used <= *argc; k++)
            argv[k] = argv[k + used];
        *argc -= used;
        i--;
    }
    return 0;
}

int main(int argc, char **argv)
{
    plat_main_init(&argc, &argv);
    if (take_gpu_option(&argc, argv) != 0)
        return 2;
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "brasa: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
