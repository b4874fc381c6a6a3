/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-nodectl: the helper behind slurm-ddp's Prolog, Epilog and health
 * check. main reads the options and ddp.conf and runs one command of the
 * table below; the commands are declared in nodectl_cmd.h, one family to a
 * file, and their decisions are in the Slurm-free core (nodectl.h).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ddp_conf.h"
#include "ddp_log.h"
#include "nodectl_cmd.h"

enum {
	CONF_ERROR_EXIT_0 = 1,
	CONF_ERROR_RUN = 2,
};

static const struct command {
	const char *name;
	const char *args; /* after the name in the usage */
	const char *help; /* one line */
	nc_command_fn *run;
	const char *ident; /* syslog ident, NULL: stderr only */
	/* A broken ddp.conf: 0 exits 2; CONF_ERROR_EXIT_0 exits 0 (prolog,
	 * epilog); CONF_ERROR_RUN runs the command with the defaults and
	 * nc_conf_error set (doctor reports it). */
	int conf_error;
} commands[] = {
	{"prolog", "", "per-job setup (Slurm Prolog environment)", cmd_prolog,
	 "ddp-prolog", CONF_ERROR_EXIT_0},
	{"epilog", "", "per-job cleanup (Slurm Epilog environment)", cmd_epilog,
	 "ddp-epilog", CONF_ERROR_EXIT_0},
	{"install", "", "make scratch_root, state_dir, the nft table (boot)",
	 cmd_install, "ddp-nodectl", 0},
	{"reconcile",
	 "[--squeue|--listpids] [--node NAME] [--grace S] [JOBID...]",
	 "drop firewall elements and scratch of jobs not live", cmd_reconcile,
	 "ddp-nodectl", 0},
	{"sweep", "[--dry-run] [--squeue] [JOBID...]",
	 "remove shared dirs of finished jobs after retention", cmd_sweep,
	 "ddp-nodectl", 0},
	{"show", "", "print the effective configuration", cmd_show, NULL, 0},
	{"port", "JOBID STEPID", "the MASTER_PORT srun --ddp gives the step",
	 cmd_port, NULL, 0},
	{"health", "[--node NAME] [--drain]",
	 "apply the drain rule; --drain drains (health check)", cmd_health,
	 "ddp-nodectl", 0},
	{"verdicts", "[--node NAME|--all] [--since SECONDS]",
	 "show the node's recent ddp-check verdicts", cmd_verdicts, NULL, 0},
	{"doctor", "[--slurm-conf FILE]",
	 "check the node's whole setup, say what to fix", cmd_doctor, NULL,
	 CONF_ERROR_RUN},
};

#define NCOMMANDS (sizeof(commands) / sizeof(commands[0]))

static void
usage(FILE *f)
{
	size_t i;
	int n;

	fprintf(f, "usage: ddp-nodectl [-c CONF] [-v] COMMAND [ARGS]\n"
		   "       ddp-nodectl -h|--help|--version\n");
	for (i = 0; i < NCOMMANDS; i++) {
		const struct command *c = &commands[i];

		n = fprintf(f, "  %s%s%s", c->name, c->args[0] ? " " : "",
			    c->args) -
		    2;
		/* A long synopsis gets its description on the next line. */
		if (n > 22)
			fprintf(f, "\n  %22s %s\n", "", c->help);
		else
			fprintf(f, "%*s %s\n", 22 - n, "", c->help);
	}
	fprintf(f,
		"CONF defaults to $DDP_CONF, else %s;\n"
		"a CONF given with -c or $DDP_CONF must exist.\n",
		DDP_CONF_DEFAULT);
}

static const struct command *
find_command(const char *name)
{
	size_t i;

	for (i = 0; i < NCOMMANDS; i++)
		if (strcmp(commands[i].name, name) == 0)
			return &commands[i];
	return NULL;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	const char *conf_path = getenv("DDP_CONF");
	const struct command *cmd;
	struct ddp_conf conf;
	char err[DDP_ERR_LEN + 64];
	enum ddp_log_level level = DDP_LOG_INFO;
	int c, conf_given = 0, loaded, rv;

	/* A file named by DDP_CONF or -c must exist: the defaults, read in
	 * its place, would put the state of a cluster whose
	 * configuration went away (its directory removed under a running
	 * Epilog) into the machine's own state_dir. */
	if (conf_path && conf_path[0])
		conf_given = 1;
	else
		conf_path = DDP_CONF_DEFAULT;
	while ((c = getopt_long(argc, argv, "+c:vh", opts, NULL)) != -1) {
		if (c == 'c') {
			conf_path = optarg;
			conf_given = 1;
		} else if (c == 'v') {
			level = DDP_LOG_DEBUG;
		} else if (c == 'V') {
			printf("ddp-nodectl %s\n", DDP_VERSION);
			return NC_EX_OK;
		} else {
			usage(c == 'h' ? stdout : stderr);
			return c == 'h' ? NC_EX_OK : NC_EX_USAGE;
		}
	}
	if (optind >= argc || !(cmd = find_command(argv[optind]))) {
		usage(stderr);
		return NC_EX_USAGE;
	}
	umask(022);
	nc_log_start(cmd->ident, level);
	ddp_conf_defaults(&conf);
	/* Only the default file may be missing (then the defaults hold). */
	nc_conf_path = conf_path;
	loaded = ddp_conf_load(&conf, conf_path, !conf_given, err,
			       sizeof(err)) == 0;
	if (!loaded && cmd->conf_error != CONF_ERROR_RUN) {
		ddp_error("%s", err);
		/* Every node has the same file: draining for it would stop
		 * every job on the cluster, --ddp or not. The job runs
		 * without openings or directories, and the plugin, which
		 * reads the same file, refuses its --ddp steps naming file,
		 * line and key. */
		return cmd->conf_error == CONF_ERROR_EXIT_0 ? NC_EX_OK
							    : NC_EX_USAGE;
	}
	if (!loaded) {
		/* The command reports it, with the defaults. */
		nc_conf_error = err;
		ddp_conf_defaults(&conf);
	}
	rv = cmd->run(&conf, argc - optind, argv + optind);
	if (rv == NC_EX_SHOW_USAGE) {
		usage(stderr);
		rv = NC_EX_USAGE;
	}
	return rv;
}
