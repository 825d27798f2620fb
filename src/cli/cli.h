/* cli.h - subcommand entry points; each parses its own flags and returns an exit code. */
#ifndef GRIT_CLI_CLI_H
#define GRIT_CLI_CLI_H

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

#endif
