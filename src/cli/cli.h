/* cli.h - subcommand entry points; each parses its own flags and returns an exit code. */
#ifndef GRIT_CLI_CLI_H
#define GRIT_CLI_CLI_H

#include <stdint.h>

#define GRIT_VERSION "0.1.0"

int cmd_train(int argc, char **argv);
int cmd_ckpt(int argc, char **argv);
int cmd_health(int argc, char **argv);
int cmd_launch(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_eval(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_rate(int argc, char **argv);
int cmd_dashboard(int argc, char **argv);
int cmd_prep(int argc, char **argv);
int cmd_s3(int argc, char **argv);
int cmd_cluster(int argc, char **argv);

/* Number arguments (cli_num.c): the whole of S must be a decimal number in [lo, hi];
 * otherwise "grit CMD: FLAG: expected an integer in [lo, hi], got 'S'" goes to stderr
 * and -1 comes back (S may be NULL: a missing value). 0 and *out set on success. */
int cli_long(const char *cmd, const char *flag, const char *s, long lo, long hi, long *out);
int cli_int(const char *cmd, const char *flag, const char *s, int lo, int hi, int *out);
int cli_u64(const char *cmd, const char *flag, const char *s, uint64_t lo, uint64_t hi,
            uint64_t *out);
int cli_num(const char *cmd, const char *flag, const char *s, double lo, double hi, double *out);

#endif
