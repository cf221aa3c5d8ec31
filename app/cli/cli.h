/* The brasa command line: one function per subcommand, each in its own file. */
#ifndef BRASA_CLI_H
#define BRASA_CLI_H

/* Each returns the process exit code (0 ok, 1 error, 2 usage). argv[0] is the subcommand. */
int cmd_inspect(int argc, char **argv);
int cmd_quantize(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_logits(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_synth(int argc, char **argv);
int cmd_serve(int argc, char **argv);

#endif
