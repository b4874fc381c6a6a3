/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * The commands of ddp-nodectl and what they share. ddp-nodectl.c holds
 * main and the one table that names each command; the commands live one
 * family to a file: nodectl_job.c (prolog, epilog), nodectl_reconcile.c
 * (reconcile, sweep), nodectl_health.c (health, verdicts),
 * nodectl_setup.c (install, show, port) and nodectl_doctor.c (doctor).
 * nodectl_cmd.c holds what several of them use: the log sink, Slurm's
 * commands, the node's name.
 *
 * Unlike the core (nodectl.h), these speak to Slurm (its Prolog/Epilog
 * environment, scontrol, squeue) and log through ddp_log (common/ddp_log.h)
 * into the sink nc_log_start installs.
 * Thread safety: none; ddp-nodectl is a short-lived single-threaded tool.
 */
#ifndef DDP_NODECTL_CMD_H
#define DDP_NODECTL_CMD_H

#include <stddef.h>

#include "ddp_conf.h"
#include "ddp_log.h"
#include "nodectl.h"

/* Exit statuses: 0 fine, 1 the node cannot run the job (drained), 2 usage
 * or configuration error. A command returns NC_EX_SHOW_USAGE for arguments
 * it does not accept: main prints the usage on stderr and exits
 * NC_EX_USAGE. */
enum {
	NC_EX_OK = 0,
	NC_EX_NODE = 1,
	NC_EX_USAGE = 2,
	NC_EX_SHOW_USAGE = -1,
};

/*
 * A command. conf is ddp.conf as loaded (borrowed); argv[0] is the
 * command's name and argv[1..argc) its arguments, which it parses with
 * getopt_long from optind = 1. Returns an exit status (NC_EX_*).
 */
typedef int nc_command_fn(const struct ddp_conf *conf, int argc, char **argv);

/* nodectl_job.c: per-job setup and cleanup from the Slurm Prolog and
 * Epilog environment (SLURM_JOB_ID, SLURM_JOB_UID, SLURM_JOB_GID,
 * SLURM_NODELIST, SLURMD_NODENAME). The epilog always exits 0. */
nc_command_fn cmd_prolog, cmd_epilog;
/* nodectl_reconcile.c: drop what jobs that are not live left on the node;
 * remove shared directories of finished jobs after retention_days. */
nc_command_fn cmd_reconcile, cmd_sweep;
/* nodectl_health.c: the drain rule over the node's ddp-check verdicts, and
 * the verdicts themselves. */
nc_command_fn cmd_health, cmd_verdicts;
/* nodectl_setup.c: boot-time setup, the effective configuration, the
 * MASTER_PORT of a step. */
nc_command_fn cmd_install, cmd_show, cmd_port;
/* nodectl_doctor.c: the node's whole setup (slurm.conf's plugstack line,
 * Prolog, Epilog and PrologFlags; ddp.conf and what it names) checked,
 * one line per check; 0 all good, 1 something to fix, 2 bad arguments or
 * a slurm.conf or ddp.conf it cannot read. Runs with a broken ddp.conf
 * (nc_conf_error) to report it. */
nc_command_fn cmd_doctor;

/*
 * The ddp.conf main loaded (nc_conf_path) and, for a command that runs
 * despite a broken one (doctor), why it did not load: nc_conf_error, ""
 * when it did. Set by main before the command runs; the command then has
 * the defaults.
 */
extern const char *nc_conf_path;
extern const char *nc_conf_error;

/* ---- what the commands share (nodectl_cmd.c) -------------------------- */

/*
 * Installs ddp-nodectl's log sink for messages up to max_level: each goes
 * to stderr as "ddp-nodectl: [error: ]MSG" and, when ident is not NULL,
 * to syslog (facility daemon) under ident. Call once, before logging.
 */
void nc_log_start(const char *ident, enum ddp_log_level max_level);

/* Prefixes every later message with "job JOBID: ". */
void nc_log_job(unsigned long jobid);

/* Sends one line to syslog alone, at LOG_WARNING, when nc_log_start named
 * an ident; else does nothing. */
void nc_log_syslog_warning(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/*
 * Runs one of Slurm's commands (argv[0] an absolute path) by nc_run, with
 * SLURM_CONF kept from our environment and Slurm's timeout; out as for
 * nc_run. Returns its exit status, or -1 with err.
 */
int nc_slurm_run(char *const argv[], struct ddp_buf *out, char *err,
		 size_t errlen);

/* Drains node with reason, through scontrol. Returns 0 or -1 with err. */
int nc_scontrol_drain(const struct ddp_conf *conf, const char *node,
		      const char *reason, char *err, size_t errlen);

/*
 * The node a command asks about: given (--node), else SLURMD_NODENAME,
 * else this host's name up to the first dot, copied into node. Returns 0,
 * or -1 (a name that is not a valid Slurm node name is logged, with the
 * fix).
 */
int nc_node_name(const char *given, char *node, size_t len);

/*
 * Removes libddp's shared-memory segments of job jobid (the Epilog), or of
 * the jobs not in live (nlive ids) and older than grace seconds (reconcile,
 * jobid 0), by nc_remove_shm, and logs what went and what could not.
 */
void nc_cleanup_shm(unsigned long jobid, const unsigned long *live,
		    size_t nlive, long grace);

/*
 * Removes the step keys below state_dir (stepkey.h) that slurmstepd left:
 * of job jobid (the Epilog), else of the jobs not in live (nlive ids;
 * reconcile), and in any case a key file its owner grew past a key (all
 * the Prolog asks for, with jobid 0 and live NULL). Logs what went and
 * what could not; never fails.
 */
void nc_cleanup_step_keys(const struct ddp_conf *conf, unsigned long jobid,
			  const unsigned long *live, size_t nlive);

#endif
