/* obs_cli.h - observation flags shared by grit launch and grit dashboard (cmd_dashboard.c). */
#ifndef GRIT_CLI_OBS_CLI_H
#define GRIT_CLI_OBS_CLI_H

#include "obs/obs.h"

typedef struct obs_cli {
    obs_cfg cfg;      /* figures given as flags (0: not given) */
    const char *bind; /* NULL: 127.0.0.1 */
    int port, off, set;
    int standalone; /* grit dashboard: also --port and --bind */
    obs_server *srv;
} obs_cli;

extern const char obs_cli_help[];
/* 1: argv[*i] (and its value) consumed; 0: not an observation flag; -1: bad value (printed). */
int obs_cli_opt(int argc, char **argv, int *i, obs_cli *o);
/* Merges the flags into RUN_DIR/obs.json, saves it and starts the live server
 * (unless --no-dashboard); -1 on error (printed). */
int obs_cli_start(obs_cli *o, const char *run_dir, int quiet);
/* Stops the server and prints the cost/energy/CO2 summary. */
void obs_cli_finish(obs_cli *o, const char *run_dir);

#endif
