/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MASTER_PORT choice. Every rank of a step computes the port on its own
 * node, so all ranks agree without talking to each other; the mapping
 * keeps concurrent steps of one job on different ports.
 *
 * Public scheme (ddp_port_choose, port_key = ""): slot = (job_id * stride
 * + step_id) mod size, where size is the number of ports in [min, max] and
 * stride = DDP_PORT_STRIDE when size is at least 2 * DDP_PORT_STRIDE (else
 * 1). Steps with ids that differ by less than stride never share a port
 * within one job, and jobs whose ids differ by less than size / stride
 * never share a port as long as each runs fewer than stride concurrent
 * steps. Anyone who knows the job id can compute it, and bind it first.
 *
 * Keyed scheme (ddp_port_choose_keyed, the default): every job has a
 * keyed pseudo-random permutation of [0, size) of its own, and step s
 * gets the port min + perm_job(s mod size): an 8-round Feistel network on
 * the smallest even number of bits covering size, with SipHash-2-4 under
 * the site key of (job id, range, round, half) as its round function and
 * cycle walking back into [0, size).
 *   - Steps of one job whose ids differ by less than size never share a
 *     port (any step s' != s mod size, e.g. a second port for the same
 *     step, is another port of the job).
 *   - Two different jobs get independent ports: two of their steps share
 *     one with probability 1 / size, jobs with nearby ids included. (A
 *     guarantee that jobs never share would tell a user who owns the
 *     other jobs of a group which ports the rest of the group has.)
 *   - Without the key, a step's port is uniform over the range, even to
 *     a user who has seen every port of all their own jobs' steps.
 * Reentrant. */
#ifndef DDP_PORT_H
#define DDP_PORT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "sitekey.h"

#define DDP_PORT_STRIDE 16

/* The site key's file (sitekey.h), ddp.conf's port_key [this path]. */
#define DDP_PORT_KEY_DEFAULT "/etc/slurm/ddp-port.key"

/*
 * The public scheme (see above): the port for (job_id, step_id) inside
 * [min, max], or -1 when the range is empty or not within 1..65535.
 */
long ddp_port_choose(unsigned long job_id, unsigned long step_id, unsigned min,
		     unsigned max);

/*
 * The keyed scheme (see above): the port for (job_id, step_id) inside
 * [min, max] under key (borrowed, not kept), or -1 when the range is empty
 * or not within 1..65535. Same inputs, same port, on every node. Leaves
 * no key material on the stack.
 */
long ddp_port_choose_keyed(const struct ddp_site_key *key, unsigned long job_id,
			   unsigned long step_id, unsigned min, unsigned max);

/*
 * The port ddp-check's rendezvous takes when srun --ddp-check (or the
 * site's check) runs it before the program: never MASTER_PORT, so the
 * listening socket a user on the node sees during the check tells them
 * nothing they could squat before the program's rendezvous. It is the
 * same scheme's port (key NULL: public, else keyed under key, borrowed)
 * for the input half the range away from the step's own,
 * (step_id mod size + size / 2) mod size: one of the job's other slots,
 * which the job's mapping sends to another port than the step's own and
 * which is, without the key, as unpredictable as MASTER_PORT (it tells
 * only that MASTER_PORT is another port). Where master_port (-1: none)
 * is that port anyway, a MASTER_PORT the user chose, the step's own
 * slot's port is taken instead, which differs from it. The check port
 * of step s is the chosen MASTER_PORT of step s + size / 2 of the same
 * job. Returns -1 when [min, max] is not within 1..65535 or holds fewer
 * than 2 ports (no port is left for the check). Reentrant.
 */
long ddp_port_choose_check(const struct ddp_site_key *key, unsigned long job_id,
			   unsigned long step_id, unsigned min, unsigned max,
			   long master_port);

/*
 * SipHash-2-4 (Aumasson and Bernstein) of msg[0..len) under a 128-bit key:
 * the keyed scheme's round function, exported for its test vectors.
 */
uint64_t ddp_siphash24(const unsigned char key[16], const void *msg,
		       size_t len);

/*
 * Parses a port given by a user (--ddp-port, MASTER_PORT): decimal digits
 * only, 1..65535. Returns the port or -1.
 */
long ddp_port_parse(const char *s);

/*
 * Returns 1 when [min, max] overlaps the ephemeral range [eph_lo, eph_hi],
 * else 0.
 */
int ddp_port_overlaps(unsigned min, unsigned max, unsigned eph_lo,
		      unsigned eph_hi);

/*
 * Tries to bind a TCP socket to port on all IPv4 addresses (with
 * SO_REUSEADDR, as PyTorch's TCPStore does) and closes it at once.
 * Returns 1 when the bind succeeded, 0 when the port is in use, -1 on
 * another error. Advisory only: the port can be taken right after.
 */
int ddp_port_probe(unsigned port);

#endif
