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
    fprintf(f, "\n'brasa COMMAND --help' describes a command's options. Every command also takes:\n"
               "  --gpu cuda|hip|auto|none\n"
               "                        the GPU driver to try (default auto: CUDA, then HIP;\n"
               "                        the CPU when neither is present; none: the CPU)\n"
               "  --gpu-duty F          keep the GPU busy at most this fraction of the time\n"
               "                        (e.g. 0.6 on a desktop whose screen shares the GPU;\n"
               "                        default 1, off)\n"
               "  --gpu-timeout S       a GPU step that takes longer than S seconds is an\n"
               "                        error naming the kernel (default 60)\n");
}

/* The GPU options every command accepts, taken out of argv here and handed to the GPU layer
 * as environment variables (read where the driver is loaded and the device opened). */
static const struct {
    const char *opt, *env, *what;
    int kind; /* 0: cuda|hip|auto|none; 1: a fraction in (0, 1]; 2: seconds > 0 */
} gpu_opts[] = {
    {"--gpu", "BRASA_GPU", "cuda, hip, auto or none", 0},
    {"--gpu-duty", "BRASA_GPU_DUTY", "a fraction of the time in (0, 1], e.g. 0.6", 1},
    {"--gpu-timeout", "BRASA_GPU_TIMEOUT", "seconds (> 0) a kernel may run", 2},
};

static int gpu_value_ok(int kind, const char *v)
{
    if (kind == 0)
        return !strcmp(v, "cuda") || !strcmp(v, "hip") || !strcmp(v, "auto") || !strcmp(v, "none");
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end)
        return 0;
    return kind == 1 ? d > 0 && d <= 1 : d > 0 && d < 1e6;
}

static int take_gpu_options(int *argc, char **argv)
{
    for (int i = 2; i < *argc; i++) {
        for (size_t o = 0; o < sizeof gpu_opts / sizeof gpu_opts[0]; o++) {
            size_t n = strlen(gpu_opts[o].opt);
            const char *v = NULL;
            int used = 1;
            if (!strcmp(argv[i], gpu_opts[o].opt)) {
                if (i + 1 >= *argc) {
                    fprintf(stderr, "brasa: %s needs a value: %s\n", gpu_opts[o].opt,
                            gpu_opts[o].what);
                    return 2;
                }
                v = argv[i + 1];
                used = 2;
            } else if (!strncmp(argv[i], gpu_opts[o].opt, n) && argv[i][n] == '=') {
                v = argv[i] + n + 1;
            } else {
                continue;
            }
            if (!gpu_value_ok(gpu_opts[o].kind, v)) {
                fprintf(stderr, "brasa: %s must be %s (got '%s')\n", gpu_opts[o].opt,
                        gpu_opts[o].what, v);
                return 2;
            }
            setenv(gpu_opts[o].env, v, 1);
            for (int k = i; k + used <= *argc; k++)
                argv[k] = argv[k + used];
            *argc -= used;
            i--;
            break;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    plat_main_init(&argc, &argv);
    if (take_gpu_options(&argc, argv) != 0)
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
