/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the ddp.conf reader: defaults, every key's accepted and
 * refused values, file parsing with line numbers, and the checks of
 * settings against the node.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ddp_conf.h"
#include "tap.h"

static char tmpdir[] = "/tmp/test-conf.XXXXXX";

/* Writes len bytes of text to a file in tmpdir; returns its path. */
static const char *
write_file(const char *name, const char *text, size_t len)
{
	static char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	if (!f || fwrite(text, 1, len, f) != len) {
		perror(path);
		exit(2);
	}
	fclose(f);
	return path;
}

static int
set_ok(const char *key, const char *value)
{
	struct ddp_conf c;
	char err[DDP_ERR_LEN];

	ddp_conf_defaults(&c);
	return ddp_conf_set(&c, key, value, err, sizeof(err)) == 0;
}

/* Checks that key=value is refused, the conf unchanged, and err mentions
 * both the key and want. */
static void
refused(const char *key, const char *value, const char *want)
{
	struct ddp_conf c, before;
	char err[DDP_ERR_LEN];
	int rc;

	ddp_conf_defaults(&c);
	before = c;
	rc = ddp_conf_set(&c, key, value, err, sizeof(err));
	if (!tap_ok(rc < 0 && memcmp(&c, &before, sizeof(c)) == 0 &&
			    strstr(err, key) && strstr(err, want),
		    "%s=%s refused", key, value))
		tap_diag("rc %d err '%s'", rc, err);
}

static void
test_defaults(void)
{
	struct ddp_conf c;

	ddp_conf_defaults(&c);
	tap_ok(c.port_min == 29400 && c.port_max == 29999,
	       "default port_range 29400-29999");
	tap_ok(c.default_bind == DDP_BIND_CORE, "default bind core");
	TAP_STREQ(c.port_key, "/etc/slurm/ddp-port.key",
		  "default port_key is /etc/slurm/ddp-port.key");
	tap_ok(c.shared_root[0] == '\0', "default shared_root empty");
	tap_ok(c.n_shared_fstypes == 7 &&
		       strcmp(c.shared_fstypes[0], "nfs") == 0 &&
		       strcmp(c.shared_fstypes[6], "ceph") == 0,
	       "default fstypes");
	tap_ok(c.shared_timeout == 10 && c.retention_days == 7 && c.firewall,
	       "default timeout, retention, firewall");
	TAP_STREQ(c.scratch_root, "/var/lib/slurm-ddp/scratch",
		  "default scratch_root");
	tap_ok(c.firewall_timeout == 7 * 86400, "default firewall_timeout 7d");
	TAP_STREQ(c.state_dir, "/run/slurm-ddp", "default state_dir");
	TAP_STREQ(c.nft_path, "/usr/sbin/nft", "default nft_path");
	TAP_STREQ(c.scontrol_path, "/usr/bin/scontrol", "default scontrol");
	tap_ok(c.nccl_ib_hca[0] == '\0' && c.nccl_socket_ifname[0] == '\0',
	       "no NCCL variable by default: NCCL chooses its NICs");
	tap_ok(c.check == DDP_CHECK_OFF && c.check_min_fraction == 0.5 &&
		       c.check_time_limit == 20 && c.check_join_limit == 60,
	       "default check off, min fraction 0.5, time limit 20 s, join "
	       "limit 60 s");
	TAP_STREQ(c.check_path, DDP_CHECK_PATH, "default check_path (BINDIR)");
	TAP_STREQ(c.restart_path, DDP_RESTART_PATH,
		  "default restart_path (LIBEXECDIR)");
	tap_ok(c.check_requeue_max == 2 && c.check_drain_jobs == 3 &&
		       c.check_drain_users == 2 &&
		       c.check_drain_window == 86400,
	       "default requeue max 2, drain after 3 jobs of 2 users in 1 d");
}

/* check = requeue and the keys of requeueing and draining. */
static void
test_requeue_drain_keys(void)
{
	struct ddp_conf c;
	char err[DDP_ERR_LEN], value[64];

	ddp_conf_defaults(&c);
	tap_ok(ddp_conf_set(&c, "check", "requeue", err, sizeof(err)) == 0 &&
		       c.check == DDP_CHECK_REQUEUE &&
		       ddp_conf_format(&c, "check", value, sizeof(value)) ==
			       0 &&
		       !strcmp(value, "requeue"),
	       "check = requeue, shown as requeue");
	refused("check", "Requeue", "fail, requeue, warn or off");
	tap_ok(ddp_conf_set(&c, "check_requeue_max", "0", err, sizeof(err)) ==
			       0 &&
		       c.check_requeue_max == 0 &&
		       ddp_conf_set(&c, "check_requeue_max", "100", err,
				    sizeof(err)) == 0 &&
		       c.check_requeue_max == 100,
	       "check_requeue_max 0 and 100");
	refused("check_requeue_max", "101", "0-100");
	refused("check_requeue_max", "-1", "0-100");
	refused("check_requeue_max", "", "0-100");
	tap_ok(c.restart_max == 3, "default restart_max 3");
	tap_ok(ddp_conf_set(&c, "restart_max", "0", err, sizeof(err)) == 0 &&
		       c.restart_max == 0 &&
		       ddp_conf_set(&c, "restart_max", "100", err,
				    sizeof(err)) == 0 &&
		       c.restart_max == 100 &&
		       ddp_conf_key_node_side("restart_max") == 0,
	       "restart_max 0 and 100, a key of the plugin alone");
	refused("restart_max", "101", "0-100");
	refused("restart_max", "2x", "0-100");
	tap_ok(ddp_conf_set(&c, "check_drain_jobs", "1", err, sizeof(err)) ==
			       0 &&
		       c.check_drain_jobs == 1 &&
		       ddp_conf_set(&c, "check_drain_users", "1000", err,
				    sizeof(err)) == 0 &&
		       c.check_drain_users == 1000,
	       "check_drain_jobs 1, check_drain_users 1000");
	refused("check_drain_jobs", "0", "1-1000");
	refused("check_drain_jobs", "1001", "1-1000");
	refused("check_drain_users", "0", "1-1000");
	refused("check_drain_users", "2 users", "1-1000");
	tap_ok(ddp_conf_set(&c, "check_drain_window", "60", err, sizeof(err)) ==
			       0 &&
		       c.check_drain_window == 60 &&
		       ddp_conf_set(&c, "check_drain_window", "31536000", err,
				    sizeof(err)) == 0 &&
		       c.check_drain_window == 31536000 &&
		       ddp_conf_set(&c, "check_drain_window", "2d", err,
				    sizeof(err)) == 0 &&
		       c.check_drain_window == 2 * 86400 &&
		       ddp_conf_format(&c, "check_drain_window", value,
				       sizeof(value)) == 0 &&
		       !strcmp(value, "172800s"),
	       "check_drain_window 60 s to 365 d, 2d read as 172800s");
	refused("check_drain_window", "59", "between 60s and 365d");
	refused("check_drain_window", "31536001", "between 60s and 365d");
	refused("check_drain_window", "1y", "between 60s and 365d");
}

/* check, check_min_fraction, check_time_limit: what --ddp-check and
 * ddp-check accept, and nothing it would read otherwise. */
static void
test_check_keys(void)
{
	static const char *const modes[] = DDP_CHECK_NAMES;
	struct ddp_conf c;
	char err[DDP_ERR_LEN], value[64];
	enum ddp_check m;
	size_t i;

	ddp_conf_defaults(&c);
	for (i = 0; i < sizeof(modes) / sizeof(modes[0]); i++)
		tap_ok(ddp_check_parse(modes[i], &m) == 0 && (size_t)m == i &&
			       !strcmp(ddp_check_name(m), modes[i]) &&
			       strstr(DDP_CHECK_USAGE, modes[i]) &&
			       strstr(DDP_CHECK_ACCEPTED, modes[i]),
		       "check mode %s: one name in the three spellings",
		       modes[i]);
	tap_ok(ddp_check_parse(NULL, &m) < 0 && ddp_check_parse("", &m) < 0 &&
		       !strcmp(ddp_check_name((enum ddp_check)7), "?"),
	       "no check mode for NULL, \"\" or out of range");
	tap_ok(ddp_conf_set(&c, "check", "warn", err, sizeof(err)) == 0 &&
		       c.check == DDP_CHECK_WARN,
	       "check = warn");
	refused("check", "maybe", "fail, requeue, warn or off");
	refused("check", "on", "fail, requeue, warn or off");
	tap_ok(ddp_conf_set(&c, "check_min_fraction", "0.25", err,
			    sizeof(err)) == 0 &&
		       c.check_min_fraction == 0.25 &&
		       ddp_conf_format(&c, "check_min_fraction", value,
				       sizeof(value)) == 0 &&
		       !strcmp(value, "0.25"),
	       "check_min_fraction 0.25, shown as 0.25");
	tap_ok(ddp_conf_set(&c, "check_min_fraction", "1", err, sizeof(err)) ==
			       0 &&
		       ddp_conf_format(&c, "check_min_fraction", value,
				       sizeof(value)) == 0 &&
		       !strcmp(value, "1"),
	       "check_min_fraction 1 (every link as fast as the typical)");
	tap_ok(ddp_conf_set(&c, "check_min_fraction", "0.000001", err,
			    sizeof(err)) == 0 &&
		       ddp_conf_format(&c, "check_min_fraction", value,
				       sizeof(value)) == 0 &&
		       !strcmp(value, "0.000001"),
	       "check_min_fraction: 6 decimals read back exactly");
	refused("check_min_fraction", "0", "(0, 1]");
	refused("check_min_fraction", "1.5", "(0, 1]");
	refused("check_min_fraction", "-0.5", "(0, 1]");
	refused("check_min_fraction", "5e-1", "(0, 1]");
	refused("check_min_fraction", "nan", "(0, 1]");
	refused("check_min_fraction", ".", "(0, 1]");
	refused("check_min_fraction", "0.0000001", "6 decimals");
	refused("check_min_fraction", "", "(0, 1]");
	tap_ok(ddp_conf_set(&c, "check_time_limit", "3600", err, sizeof(err)) ==
			       0 &&
		       c.check_time_limit == 3600,
	       "check_time_limit 3600");
	refused("check_time_limit", "0", "1-3600");
	refused("check_time_limit", "3601", "1-3600");
	refused("check_time_limit", "20s", "whole seconds");
	tap_ok(ddp_conf_set(&c, "check_join_limit", "600", err, sizeof(err)) ==
			       0 &&
		       c.check_join_limit == 600,
	       "check_join_limit 600");
	refused("check_join_limit", "0", "1-3600");
	refused("check_join_limit", "3601", "1-3600");
	tap_ok(ddp_conf_set(&c, "check_path", "/opt/ddp/bin/ddp-check", err,
			    sizeof(err)) == 0 &&
		       !strcmp(c.check_path, "/opt/ddp/bin/ddp-check"),
	       "check_path");
	refused("check_path", "ddp-check", "absolute path");
	refused("check_path", "", "absolute path");
	TAP_STREQ(c.topology_cache, "/run/slurm-ddp/topology.xml",
		  "default topology_cache");
	tap_ok(ddp_conf_set(&c, "topology_cache", "none", err, sizeof(err)) ==
			       0 &&
		       c.topology_cache[0] == '\0' &&
		       ddp_conf_format(&c, "topology_cache", value,
				       sizeof(value)) == 0 &&
		       !strcmp(value, "none"),
	       "topology_cache none: no cache, shown as none");
	tap_ok(ddp_conf_set(&c, "topology_cache", "/var/cache/ddp/topo.xml/",
			    err, sizeof(err)) == 0 &&
		       !strcmp(c.topology_cache, "/var/cache/ddp/topo.xml"),
	       "topology_cache path");
	refused("topology_cache", "", "or none");
	refused("topology_cache", "topo.xml", "absolute path");
	refused("topology_cache", "/run/../tmp/t.xml", "absolute path");
	tap_ok(c.cpus_per_gpu == DDP_CPUS_PER_GPU_SHARE,
	       "default cpus_per_gpu: share");
	tap_ok(c.kill_on_bad_exit == 1, "default kill_on_bad_exit: yes");
	tap_ok(ddp_conf_set(&c, "kill_on_bad_exit", "no", err, sizeof(err)) ==
			       0 &&
		       c.kill_on_bad_exit == 0 &&
		       ddp_conf_format(&c, "kill_on_bad_exit", value,
				       sizeof(value)) == 0 &&
		       !strcmp(value, "no"),
	       "kill_on_bad_exit no, shown as no");
	tap_ok(ddp_conf_set(&c, "kill_on_bad_exit", "off", err, sizeof(err)) <
			       0 &&
		       c.kill_on_bad_exit == 0 && strstr(err, "yes or no"),
	       "kill_on_bad_exit takes yes or no only");
	tap_ok(ddp_conf_key_node_side("kill_on_bad_exit") == 0,
	       "kill_on_bad_exit is the plugin's alone");
	tap_ok(!strcmp(c.stop_before, "auto") && c.stop_requeue_max == 2,
	       "default stop_before: auto, stop_requeue_max: 2");
	tap_ok(ddp_conf_set(&c, "stop_before", "300", err, sizeof(err)) == 0 &&
		       ddp_conf_format(&c, "stop_before", value,
				       sizeof(value)) == 0 &&
		       !strcmp(value, "300"),
	       "stop_before 300, shown as 300");
	tap_ok(ddp_conf_set(&c, "stop_before", "later", err, sizeof(err)) < 0 &&
		       !strcmp(c.stop_before, "300") &&
		       strstr(err, "stop_before") && strstr(err, "later") &&
		       strstr(err, "1 to 604800"),
	       "stop_before later refused, naming it and what works (%s)", err);
	tap_ok(ddp_conf_set(&c, "stop_requeue_max", "101", err, sizeof(err)) <
			       0 &&
		       ddp_conf_set(&c, "stop_requeue_max", "0", err,
				    sizeof(err)) == 0 &&
		       c.stop_requeue_max == 0,
	       "stop_requeue_max: 0-100");
	tap_ok(ddp_conf_set(&c, "cpus_per_gpu", "6", err, sizeof(err)) == 0 &&
		       c.cpus_per_gpu == 6 &&
		       ddp_conf_format(&c, "cpus_per_gpu", value,
				       sizeof(value)) == 0 &&
		       !strcmp(value, "6"),
	       "cpus_per_gpu 6");
	tap_ok(ddp_conf_set(&c, "cpus_per_gpu", "off", err, sizeof(err)) == 0 &&
		       c.cpus_per_gpu == DDP_CPUS_PER_GPU_OFF &&
		       ddp_conf_format(&c, "cpus_per_gpu", value,
				       sizeof(value)) == 0 &&
		       !strcmp(value, "off"),
	       "cpus_per_gpu off: Slurm's default, shown as off");
	refused("cpus_per_gpu", "0", "share");
	refused("cpus_per_gpu", "1025", "1-1024");
	refused("cpus_per_gpu", "-1", "off");
	refused("cpus_per_gpu", "4cpus", "whole number");
	refused("cpus_per_gpu", "", "share");
}

/*
 * The key table is the one list: every default parses, the shown value of
 * every key reads back to the same setting, the unknown-key message names
 * every key, and the binding names agree with their two spellings.
 */
static void
test_table(void)
{
	static const char *const binds[] = DDP_BIND_NAMES;
	struct ddp_conf c, d;
	char err[DDP_ERR_LEN], value[4096], names[512], want[64];
	const char *key;
	size_t i, nkeys = 0, defaults_ok = 0, round_trip = 0, named = 0;

	ddp_conf_defaults(&c);
	for (i = 0; (key = ddp_conf_key_name(i)); i++) {
		nkeys++;
		d = c;
		if (ddp_conf_set(&d, key, ddp_conf_key_default(i), err,
				 sizeof(err)) == 0 &&
		    memcmp(&c, &d, sizeof(c)) == 0)
			defaults_ok++;
		else
			tap_diag("default of %s: %s", key, err);
	}
	tap_ok(nkeys == 32 && defaults_ok == nkeys,
	       "all %zu keys' defaults parse and are what ddp_conf_defaults "
	       "sets",
	       nkeys);
	tap_ok(ddp_conf_key_name(nkeys) == NULL &&
		       ddp_conf_key_default(nkeys) == NULL,
	       "no key past the table");

	/* A setting unlike every default, shown and read back. */
	d = c;
	tap_ok(ddp_conf_set(&d, "port_range", "40000-40099", err,
			    sizeof(err)) == 0 &&
		       ddp_conf_set(&d, "default_bind", "numa", err,
				    sizeof(err)) == 0 &&
		       ddp_conf_set(&d, "shared_root", "/shared/ddp", err,
				    sizeof(err)) == 0 &&
		       ddp_conf_set(&d, "shared_fstypes", "lustre,nfs4", err,
				    sizeof(err)) == 0 &&
		       ddp_conf_set(&d, "firewall", "off", err, sizeof(err)) ==
			       0 &&
		       ddp_conf_set(&d, "firewall_timeout", "2h", err,
				    sizeof(err)) == 0 &&
		       ddp_conf_set(&d, "scratch_root", "", err, sizeof(err)) ==
			       0 &&
		       ddp_conf_set(&d, "nccl_ib_hca", "=mlx5_0:1", err,
				    sizeof(err)) == 0,
	       "a non-default setting of eight keys");
	for (i = 0; (key = ddp_conf_key_name(i)); i++) {
		struct ddp_conf e;

		ddp_conf_defaults(&e);
		if (ddp_conf_format(&d, key, value, sizeof(value)) == 0 &&
		    ddp_conf_set(&e, key, value, err, sizeof(err)) == 0 &&
		    ddp_conf_format(&e, key, names, sizeof(names)) == 0 &&
		    !strcmp(value, names))
			round_trip++;
		else
			tap_diag("%s = '%s' does not read back", key, value);
	}
	tap_ok(round_trip == nkeys, "every key's shown value reads back");
	ddp_conf_format(&d, "firewall_timeout", value, sizeof(value));
	TAP_STREQ(value, "7200s", "firewall_timeout shown in seconds");
	ddp_conf_format(&d, "shared_fstypes", value, sizeof(value));
	TAP_STREQ(value, "lustre,nfs4", "shared_fstypes shown as a list");
	tap_ok(ddp_conf_format(&d, "colour", value, sizeof(value)) < 0,
	       "no value for an unknown key");
	tap_ok(ddp_conf_format(&d, "port_range", value, 4) < 0,
	       "a value that does not fit is refused");

	tap_ok(ddp_conf_set(&d, "colour", "blue", err, sizeof(err)) < 0,
	       "unknown key refused");
	for (i = 0; (key = ddp_conf_key_name(i)); i++) {
		/* "a, b, ... y or z" */
		snprintf(want, sizeof(want), " %s%s", key,
			 !ddp_conf_key_name(i + 1)   ? ""
			 : !ddp_conf_key_name(i + 2) ? " or "
						     : ",");
		if (strstr(err, want))
			named++;
	}
	if (!tap_ok(named == nkeys && strstr(err, "'colour'") &&
			    strstr(err, " or stop_requeue_max"),
		    "the unknown-key message names every key of the table"))
		tap_diag("%s", err);
	tap_ok(ddp_conf_key_names(names, 40, ", ") < 0,
	       "key names: a short buffer is refused");

	names[0] = '\0';
	for (i = 0; i < sizeof(binds) / sizeof(binds[0]); i++) {
		enum ddp_bind b;

		tap_ok(ddp_bind_parse(binds[i], &b) == 0 && (size_t)b == i &&
			       !strcmp(ddp_bind_name(b), binds[i]),
		       "bind mode %zu is '%s' both ways", i, binds[i]);
		snprintf(names + strlen(names), sizeof(names) - strlen(names),
			 "%s%s", i ? "|" : "", binds[i]);
	}
	TAP_STREQ(names, DDP_BIND_USAGE, "DDP_BIND_USAGE spells the names");
	snprintf(want, sizeof(want), "%s, %s or %s", binds[0], binds[1],
		 binds[2]);
	TAP_STREQ(want, DDP_BIND_ACCEPTED, "DDP_BIND_ACCEPTED spells them");
	tap_ok(sizeof(binds) / sizeof(binds[0]) == DDP_BIND_CORE + 1 &&
		       ddp_bind_parse(NULL, &(enum ddp_bind){0}) < 0 &&
		       !strcmp(ddp_bind_name((enum ddp_bind)7), "?"),
	       "one name per mode; NULL and unknown values refused");
}

static void
test_nccl(void)
{
	struct ddp_conf c;
	char err[DDP_ERR_LEN], long_list[400];
	size_t i;

	ddp_conf_defaults(&c);
	tap_ok(ddp_conf_set(&c, "nccl_ib_hca", "=mlx5_0:1,mlx5_1:1", err,
			    sizeof(err)) == 0,
	       "nccl_ib_hca exact names with ports");
	TAP_STREQ(c.nccl_ib_hca, "=mlx5_0:1,mlx5_1:1",
		  "nccl_ib_hca passed through unchanged");
	tap_ok(set_ok("nccl_ib_hca", "mlx5") &&
		       set_ok("nccl_ib_hca", "^=mlx5_2,mlx5_3") &&
		       set_ok("nccl_ib_hca", "^mlx5_4:2") &&
		       set_ok("nccl_ib_hca", ""),
	       "nccl_ib_hca prefixes, exclusions and empty");
	tap_ok(ddp_conf_set(&c, "nccl_socket_ifname", "=ib0,ib1", err,
			    sizeof(err)) == 0 &&
		       strcmp(c.nccl_socket_ifname, "=ib0,ib1") == 0,
	       "nccl_socket_ifname exact names");
	tap_ok(set_ok("nccl_socket_ifname", "^docker,lo") &&
		       set_ok("nccl_socket_ifname", "enp1s0f0.100") &&
		       set_ok("nccl_socket_ifname", "abcdefghijklmno"),
	       "nccl_socket_ifname exclusions, VLANs, 15-character names");
	refused("nccl_ib_hca", "mlx5_0, mlx5_1", "NCCL choose");
	refused("nccl_ib_hca", "mlx5_0,,mlx5_1", "[^][=]NAME[:PORT]");
	refused("nccl_ib_hca", "mlx5_0,", "[^][=]NAME[:PORT]");
	refused("nccl_ib_hca", "=", "[^][=]NAME[:PORT]");
	refused("nccl_ib_hca", "=^mlx5_0", "[^][=]NAME[:PORT]");
	refused("nccl_ib_hca", "mlx5_0:0", "[^][=]NAME[:PORT]");
	refused("nccl_ib_hca", "mlx5_0:+1", "[^][=]NAME[:PORT]");
	refused("nccl_ib_hca", "mlx5_0:1x", "[^][=]NAME[:PORT]");
	refused("nccl_ib_hca", "mlx5_0;reboot", "[^][=]NAME[:PORT]");
	refused("nccl_ib_hca", "$(id)", "[^][=]NAME[:PORT]");
	refused("nccl_socket_ifname", "ib0:1", "interface");
	refused("nccl_socket_ifname", "abcdefghijklmnop", "1-15 characters");
	refused("nccl_socket_ifname", "eth0 eth1", "interface");
	for (i = 0; i + 3 < sizeof(long_list); i += 3)
		memcpy(long_list + i, "a,b", 3);
	long_list[i] = '\0';
	refused("nccl_socket_ifname", long_list, "1-32");
	for (i = 0; i < 32; i++)
		memcpy(long_list + 2 * i, "a,", 2);
	long_list[63] = '\0';
	tap_ok(set_ok("nccl_socket_ifname", long_list), "32 names accepted");
	long_list[63] = ',';
	long_list[64] = 'b';
	long_list[65] = '\0';
	refused("nccl_socket_ifname", long_list, "1-32");
}

/* NCCL_SOCKET_IFNAME's matching, and the check against this machine's
 * interfaces (lo is up with 127.0.0.1 wherever the tests run). */
static void
test_nccl_ifname(void)
{
	struct ddp_conf c;
	char err[DDP_ERR_LEN];

	tap_ok(ddp_nccl_ifname_match("eth", "eth0") &&
		       ddp_nccl_ifname_match("eth", "eth10") &&
		       !ddp_nccl_ifname_match("eth", "ib0") &&
		       ddp_nccl_ifname_match("ib,eth", "eth1"),
	       "ifname: prefixes");
	tap_ok(ddp_nccl_ifname_match("=eth1", "eth1") &&
		       !ddp_nccl_ifname_match("=eth1", "eth10") &&
		       !ddp_nccl_ifname_match("=eth1,ib0", "ib01"),
	       "ifname: '=' means exact names");
	tap_ok(!ddp_nccl_ifname_match("^docker,lo", "docker0") &&
		       !ddp_nccl_ifname_match("^docker,lo", "lo") &&
		       ddp_nccl_ifname_match("^docker,lo", "eth0") &&
		       ddp_nccl_ifname_match("^=eth1", "eth10") &&
		       !ddp_nccl_ifname_match("^=eth1", "eth1"),
	       "ifname: '^' excludes, with or without '='");
	ddp_conf_defaults(&c);
	tap_ok(ddp_conf_check_socket_ifname(&c, err, sizeof(err)) == 0,
	       "ifname check: nothing named, nothing to check");
	ddp_conf_set(&c, "nccl_socket_ifname", "=lo", err, sizeof(err));
	tap_ok(ddp_conf_check_socket_ifname(&c, err, sizeof(err)) == 0,
	       "ifname check: =lo is up with an address");
	ddp_conf_set(&c, "nccl_socket_ifname", "=ddpnosuch0,ddpnone", err,
		     sizeof(err));
	if (!tap_ok(ddp_conf_check_socket_ifname(&c, err, sizeof(err)) < 0 &&
			    strstr(err, "'=ddpnosuch0,ddpnone' selects no "
					"interface") &&
			    strstr(err, "lo"),
		    "ifname check: a filter selecting nothing is refused, "
		    "naming it and the interfaces that are up"))
		tap_diag("%s", err);
	else
		tap_diag("%s", err);
}

static void
test_set(void)
{
	struct ddp_conf c;
	char err[DDP_ERR_LEN];

	ddp_conf_defaults(&c);
	tap_ok(ddp_conf_set(&c, "port_range", "40000-40099", err,
			    sizeof(err)) == 0 &&
		       c.port_min == 40000 && c.port_max == 40099,
	       "port_range LOW-HIGH");
	tap_ok(ddp_conf_set(&c, "port_range", "29500", err, sizeof(err)) == 0 &&
		       c.port_min == 29500 && c.port_max == 29500,
	       "port_range single port");
	refused("port_range", "2000-1000", "LOW-HIGH");
	refused("port_range", "80-90", "1024");
	refused("port_range", "1024-65536", "65535");
	refused("port_range", "+2000-3000", "LOW-HIGH");
	refused("port_range", "2000--3000", "LOW-HIGH");
	refused("port_range", "2000-3000x", "LOW-HIGH");
	refused("port_range", "", "LOW-HIGH");
	refused("port_range", " 2000-3000", "LOW-HIGH");

	tap_ok(ddp_conf_set(&c, "default_bind", "numa", err, sizeof(err)) ==
			       0 &&
		       c.default_bind == DDP_BIND_NUMA,
	       "default_bind numa");
	tap_ok(set_ok("default_bind", "none") && set_ok("default_bind", "core"),
	       "default_bind none/core");
	refused("default_bind", "socket", "none, numa or core");

	tap_ok(ddp_conf_set(&c, "shared_root", "/shared/ddp//", err,
			    sizeof(err)) == 0,
	       "shared_root accepted");
	TAP_STREQ(c.shared_root, "/shared/ddp", "trailing slashes dropped");
	tap_ok(ddp_conf_set(&c, "shared_root", "", err, sizeof(err)) == 0 &&
		       c.shared_root[0] == '\0',
	       "empty shared_root means none");
	refused("shared_root", "shared", "absolute path");
	tap_ok(ddp_conf_set(&c, "port_key", "/etc/ddp/k", err, sizeof(err)) ==
			       0 &&
		       !strcmp(c.port_key, "/etc/ddp/k"),
	       "port_key accepted");
	tap_ok(ddp_conf_set(&c, "port_key", "", err, sizeof(err)) == 0 &&
		       c.port_key[0] == '\0',
	       "empty port_key means the public formula");
	refused("port_key", "ddp-port.key", "anyone can compute");
	refused("port_key", "/etc/../k", "'..'");
	refused("shared_root", "/", "absolute path");
	refused("shared_root", "///", "absolute path");
	refused("shared_root", "/a/../b", "'..'");
	refused("shared_root", "/a/./b", "'.'");
	refused("shared_root", "/a/..", "'..'");
	refused("shared_root", "/a\tb", "control");
	tap_ok(set_ok("shared_root", "/a/..b/.c/d.") &&
		       set_ok("shared_root", "/with space"),
	       "dots inside names and spaces are fine");
	refused("scratch_root", "tmp", "absolute path");
	tap_ok(ddp_conf_set(&c, "shared_mount", "/shared/", err, sizeof(err)) ==
			       0 &&
		       strcmp(c.shared_mount, "/shared") == 0,
	       "shared_mount set");
	refused("state_dir", "", "absolute path");
	refused("nft_path", "nft", "absolute path");
	ddp_conf_set(&c, "nft_path", "/sbin/nft", err, sizeof(err));
	ddp_conf_set(&c, "scontrol_path", "/opt/slurm/bin/scontrol", err,
		     sizeof(err));
	ddp_conf_set(&c, "state_dir", "/run/x", err, sizeof(err));
	TAP_STREQ(c.nft_path, "/sbin/nft", "nft_path set");
	TAP_STREQ(c.scontrol_path, "/opt/slurm/bin/scontrol", "scontrol set");
	TAP_STREQ(c.state_dir, "/run/x", "state_dir set");

	tap_ok(ddp_conf_set(&c, "shared_fstypes", "nfs4, lustre ,tmpfs", err,
			    sizeof(err)) == 0 &&
		       c.n_shared_fstypes == 3 &&
		       strcmp(c.shared_fstypes[0], "nfs4") == 0 &&
		       strcmp(c.shared_fstypes[1], "lustre") == 0 &&
		       strcmp(c.shared_fstypes[2], "tmpfs") == 0,
	       "shared_fstypes list with spaces");
	tap_ok(set_ok("shared_fstypes", "fuse.sshfs"), "fuse.sshfs accepted");
	refused("shared_fstypes", "", "comma list");
	refused("shared_fstypes", "nfs,,lustre", "comma list");
	refused("shared_fstypes", "nfs,", "comma list");
	refused("shared_fstypes", "NFS", "comma list");
	refused("shared_fstypes", "a,b,c,d,e,f,g,h,i,j,k,l,m,n,o,p,q", "1-16");
	refused("shared_fstypes", "abcdefghijabcdefghijabcdefghijabc",
		"comma list");

	tap_ok(ddp_conf_set(&c, "shared_timeout", "30", err, sizeof(err)) ==
			       0 &&
		       c.shared_timeout == 30,
	       "shared_timeout 30");
	refused("shared_timeout", "0", "1-600");
	refused("shared_timeout", "601", "1-600");
	refused("shared_timeout", "+5", "1-600");
	refused("shared_timeout", "5s", "1-600");
	tap_ok(ddp_conf_set(&c, "retention_days", "0", err, sizeof(err)) == 0 &&
		       c.retention_days == 0,
	       "retention_days 0");
	refused("retention_days", "-1", "0-3650");

	tap_ok(ddp_conf_set(&c, "firewall", "off", err, sizeof(err)) == 0 &&
		       c.firewall == 0,
	       "firewall off");
	refused("firewall", "yes", "on or off");

	tap_ok(ddp_conf_set(&c, "firewall_timeout", "2h", err, sizeof(err)) ==
			       0 &&
		       c.firewall_timeout == 7200,
	       "firewall_timeout 2h");
	tap_ok(ddp_conf_set(&c, "firewall_timeout", "90", err, sizeof(err)) ==
			       0 &&
		       c.firewall_timeout == 90,
	       "firewall_timeout in plain seconds");
	tap_ok(set_ok("firewall_timeout", "365d") &&
		       set_ok("firewall_timeout", "1m"),
	       "firewall_timeout bounds accepted");
	refused("firewall_timeout", "59s", "60s and 365d");
	refused("firewall_timeout", "366d", "60s and 365d");
	refused("firewall_timeout", "1w", "60s and 365d");
	refused("firewall_timeout", "5hh", "60s and 365d");
	refused("firewall_timeout", "99999999999999999999d", "60s and 365d");

	ddp_conf_defaults(&c);
	tap_ok(ddp_conf_set(&c, "colour", "blue", err, sizeof(err)) < 0 &&
		       strstr(err, "unknown key 'colour'") &&
		       strstr(err, "port_range"),
	       "unknown key names itself and the accepted keys");
	tap_ok(ddp_conf_set(&c, "shared_root", "/a\033[2J", err, sizeof(err)) <
			       0 &&
		       strchr(err, '\033') == NULL,
	       "control characters are not echoed into the message");
}

static void
test_load(void)
{
	static const char good[] = "# site policy\n"
				   "\n"
				   "port_range = 40000-40099   # rendezvous\n"
				   "  shared_root=/shared/ddp\n"
				   "shared_fstypes = nfs4,tmpfs\r\n"
				   "scratch_root = \"\"\n"
				   "firewall=off";
	struct ddp_conf c;
	char err[DDP_ERR_LEN];
	const char *p;
	char big[6000];

	ddp_conf_defaults(&c);
	p = write_file("good.conf", good, sizeof(good) - 1);
	tap_ok(ddp_conf_load(&c, p, 0, err, sizeof(err)) == 0, "good file");
	tap_ok(c.port_min == 40000 && c.port_max == 40099 &&
		       strcmp(c.shared_root, "/shared/ddp") == 0 &&
		       c.n_shared_fstypes == 2 && c.scratch_root[0] == '\0' &&
		       c.firewall == 0 && c.shared_timeout == 10,
	       "good file values applied over defaults");

	ddp_conf_defaults(&c);
	p = write_file("bad.conf", "firewall = on\n\nshared_timeout = 9x\n",
		       36);
	tap_ok(ddp_conf_load(&c, p, 0, err, sizeof(err)) < 0 &&
		       strstr(err, "bad.conf:3: shared_timeout: invalid value "
				   "'9x': expected whole seconds, 1-600"),
	       "error names file, line, key, value, accepted");
	tap_diag("%s", err);

	p = write_file("noeq.conf", "firewall on\n", 12);
	tap_ok(ddp_conf_load(&c, p, 0, err, sizeof(err)) < 0 &&
		       strstr(err, "noeq.conf:1: expected 'key = value'"),
	       "line without '=' refused");

	p = write_file("nul.conf", "firewall = on\0off\n", 18);
	tap_ok(ddp_conf_load(&c, p, 0, err, sizeof(err)) < 0 &&
		       strstr(err, "NUL"),
	       "NUL byte refused");

	memset(big, 'a', sizeof(big));
	memcpy(big, "shared_root = /", 15);
	big[sizeof(big) - 1] = '\n';
	p = write_file("long.conf", big, sizeof(big));
	tap_ok(ddp_conf_load(&c, p, 0, err, sizeof(err)) < 0 &&
		       strstr(err, "longer than"),
	       "overlong line refused");

	ddp_conf_defaults(&c);
	tap_ok(ddp_conf_load(&c, "/nonexistent/ddp.conf", 1, err,
			     sizeof(err)) == 0,
	       "missing file allowed when missing_ok");
	tap_ok(ddp_conf_load(&c, "/nonexistent/ddp.conf", 0, err, sizeof(err)) <
			       0 &&
		       strstr(err, "/nonexistent/ddp.conf: cannot open"),
	       "missing file is an error otherwise");
}

static void
test_ports(void)
{
	struct ddp_conf c;
	char err[DDP_ERR_LEN];
	unsigned lo, hi;

	ddp_conf_defaults(&c);
	tap_ok(ddp_conf_check_ports(&c, 32768, 60999, err, sizeof(err)) == 0,
	       "default range outside the default ephemeral range");
	tap_ok(ddp_conf_check_ports(&c, 29000, 29400, err, sizeof(err)) < 0 &&
		       strstr(err, "overlaps"),
	       "touching ranges overlap");
	tap_ok(ddp_conf_check_ports(&c, 30000, 31000, err, sizeof(err)) == 0,
	       "range above port_range is fine");
	tap_ok(ddp_read_ephemeral_range(&lo, &hi) == 0 ? lo <= hi && lo > 0
						       : lo == 32768,
	       "ephemeral range read (or defaulted)");
	tap_diag("ephemeral range %u-%u", lo, hi);
}

int
main(void)
{
	static const char *const names[] = {
		"good.conf", "bad.conf", "noeq.conf", "nul.conf", "long.conf",
	};
	char path[600];
	size_t i;

	if (!mkdtemp(tmpdir)) {
		perror("mkdtemp");
		return 2;
	}
	test_defaults();
	test_check_keys();
	test_requeue_drain_keys();
	test_table();
	test_set();
	test_nccl();
	test_nccl_ifname();
	test_load();
	test_ports();
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", tmpdir, names[i]);
		unlink(path);
	}
	rmdir(tmpdir);
	return tap_done();
}
