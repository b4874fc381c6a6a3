/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ddp-nodectl install, show and port: a node's boot-time setup, the
 * configuration it runs with, and the MASTER_PORT its port_key gives a
 * step, which an admin compares across nodes.
 */
#include "nodectl_cmd.h"

#include <limits.h>
#include <stdio.h>
#include <unistd.h>

#include "ddp_util.h"
#include "port.h"
#include "sitekey.h"

/* Boot-time setup: the node-local roots, made root-owned before any user
 * can make them, then the nftables table. Does all it can; exit 1 when
 * something failed. */
int
cmd_install(const struct ddp_conf *conf, int argc, char **argv)
{
	char err[DDP_ERR_LEN];
	int fd, squatted, rv = NC_EX_OK;

	if (conf->scratch_root[0]) {
		fd = ddp_jobdir_open_root(conf->scratch_root, "scratch root",
					  &squatted, err, sizeof(err));
		if (fd < 0) {
			ddp_error("install: %s", err);
			rv = NC_EX_NODE;
		} else {
			close(fd);
			ddp_info("scratch root %s ready", conf->scratch_root);
		}
	}
	fd = nc_fw_state_open(conf, err, sizeof(err));
	if (fd < 0) {
		ddp_error("install: %s", err);
		rv = NC_EX_NODE;
	} else {
		close(fd);
		ddp_info("state dir %s ready", conf->state_dir);
	}
	if (conf->firewall && nc_fw_install(conf, err, sizeof(err)) < 0) {
		ddp_error("install: %s", err);
		rv = NC_EX_NODE;
	}
	/* Said at boot rather than at the first --ddp step. */
	if (conf->port_key[0]) {
		struct ddp_site_key key;
		char kerr[1024];

		if (ddp_site_key_load(conf->port_key, 0, &key, kerr,
				      sizeof(kerr)) < 0) {
			ddp_error("install: %s", kerr);
			rv = NC_EX_NODE;
		} else {
			ddp_info("port key %s ready", conf->port_key);
		}
		ddp_site_key_wipe(&key);
	}
	return rv;
}

/* Every key of ddp.conf's table, as ddp.conf accepts it back. */
int
cmd_show(const struct ddp_conf *conf, int argc, char **argv)
{
	char value[PATH_MAX];
	const char *key;
	size_t i;

	for (i = 0; (key = ddp_conf_key_name(i)); i++) {
		if (ddp_conf_format(conf, key, value, sizeof(value)) < 0) {
			ddp_error("show: %s: cannot format its value", key);
			return NC_EX_NODE;
		}
		printf("%s = %s\n", key, value);
	}
	return NC_EX_OK;
}

/*
 * The MASTER_PORT srun --ddp gives step JOBID.STEPID when the user sets
 * none: how an admin checks that every node holds the same port_key (run
 * it on each and compare) and finds the port of a step. Needs what the
 * plugin needs, a key file only root can read.
 */
int
cmd_port(const struct ddp_conf *conf, int argc, char **argv)
{
	struct ddp_site_key key;
	char err[1024];
	long job, step, port;

	if (argc != 3 || ddp_parse_long(argv[1], 0, 4294967295L, &job) < 0 ||
	    ddp_parse_long(argv[2], 0, 4294967295L, &step) < 0) {
		ddp_error("port: expected JOBID STEPID (whole numbers, e.g. "
			  "port 1234 0)");
		return NC_EX_USAGE;
	}
	if (!conf->port_key[0]) {
		port = ddp_port_choose((unsigned long)job, (unsigned long)step,
				       conf->port_min, conf->port_max);
	} else {
		if (ddp_site_key_load(conf->port_key, 0, &key, err,
				      sizeof(err)) < 0) {
			ddp_error("%s", err);
			return NC_EX_NODE;
		}
		port = ddp_port_choose_keyed(&key, (unsigned long)job,
					     (unsigned long)step,
					     conf->port_min, conf->port_max);
		ddp_site_key_wipe(&key);
	}
	if (port < 0) {
		ddp_error("port: port_range is empty");
		return NC_EX_NODE;
	}
	printf("%ld\n", port);
	return NC_EX_OK;
}
