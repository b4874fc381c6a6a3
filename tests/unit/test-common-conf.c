/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * Unit tests of the ddp.conf reader: defaults, every key's accepted and
 * refused values, file parsing with line numbers, and the per-job paths.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
	char err[DDP_CONF_ERR_LEN];

	ddp_conf_defaults(&c);
	return ddp_conf_set(&c, key, value, err, sizeof(err)) == 0;
}

/* Checks that key=value is refused, the conf unchanged, and err mentions
 * both the key and want. */
static void
refused(const char *key, const char *value, const char *want)
{
	struct ddp_conf c, before;
	char err[DDP_CONF_ERR_LEN];
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
	tap_ok(c.shared_root[0] == '\0', "default shared_root empty");
	tap_ok(c.n_shared_fstypes == 7 &&
		       strcmp(c.shared_fstypes[0], "nfs") == 0 &&
		       strcmp(c.shared_fstypes[6], "ceph") == 0,
	       "default fstypes");
	tap_ok(c.shared_timeout == 10 && c.retention_days == 7 && c.firewall,
	       "default timeout, retention, firewall");
	TAP_STREQ(c.scratch_root, "/var/tmp/ddp", "default scratch_root");
	tap_ok(c.firewall_timeout == 7 * 86400, "default firewall_timeout 7d");
	TAP_STREQ(c.state_dir, "/run/slurm-ddp", "default state_dir");
	TAP_STREQ(c.nft_path, "/usr/sbin/nft", "default nft_path");
	TAP_STREQ(c.scontrol_path, "/usr/bin/scontrol", "default scontrol");
}

static void
test_set(void)
{
	struct ddp_conf c;
	char err[DDP_CONF_ERR_LEN];

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
	char err[DDP_CONF_ERR_LEN];
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
test_paths(void)
{
	struct ddp_conf c;
	char buf[PATH_MAX], err[DDP_CONF_ERR_LEN], long_user[66];

	memset(long_user, 'u', sizeof(long_user) - 1);
	long_user[sizeof(long_user) - 1] = '\0';
	ddp_conf_defaults(&c);
	tap_ok(ddp_conf_valid_user(long_user + 1), "64-character user name");
	tap_ok(ddp_conf_shared_dir(&c, "alice", 42, buf, sizeof(buf)) < 0,
	       "no shared dir without shared_root");
	ddp_conf_set(&c, "shared_root", "/shared/ddp", err, sizeof(err));
	tap_ok(ddp_conf_shared_dir(&c, "alice", 42, buf, sizeof(buf)) == 0,
	       "shared dir named");
	TAP_STREQ(buf, "/shared/ddp/alice/42", "shared = root/user/jobid");
	tap_ok(ddp_conf_shared_dir(&c, "../root", 42, buf, sizeof(buf)) < 0 &&
		       ddp_conf_shared_dir(&c, "a/b", 42, buf, sizeof(buf)) <
			       0 &&
		       ddp_conf_shared_dir(&c, "", 42, buf, sizeof(buf)) < 0 &&
		       ddp_conf_shared_dir(&c, "alice", 0, buf, sizeof(buf)) <
			       0,
	       "unsafe user names and job 0 refused");
	tap_ok(ddp_conf_shared_dir(&c, "alice", 42, buf, 10) < 0,
	       "shared dir that does not fit refused");
	tap_ok(ddp_conf_scratch_dir(&c, 42, buf, sizeof(buf)) == 0,
	       "scratch dir named");
	TAP_STREQ(buf, "/var/tmp/ddp/42", "scratch = root/jobid");
	tap_ok(ddp_conf_valid_user("svc.ddp-1_x@ad") &&
		       !ddp_conf_valid_user("-x") &&
		       !ddp_conf_valid_user(".x") &&
		       !ddp_conf_valid_user("a b") &&
		       !ddp_conf_valid_user(long_user),
	       "user-name rule");
}

static void
test_ports(void)
{
	struct ddp_conf c;
	char err[DDP_CONF_ERR_LEN];
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
	test_set();
	test_load();
	test_paths();
	test_ports();
	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		snprintf(path, sizeof(path), "%s/%s", tmpdir, names[i]);
		unlink(path);
	}
	rmdir(tmpdir);
	return tap_done();
}
