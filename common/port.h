/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * MASTER_PORT choice. Every rank of a step computes the port on its own
 * node from the job and step ids alone, so all ranks agree without talking
 * to each other; the mapping keeps concurrent steps of one job, and steps
 * of jobs with nearby ids, on different ports.
 *
 * Scheme: slot = (job_id * stride + step_id) mod size, where size is the
 * number of ports in [min, max] and stride = DDP_PORT_STRIDE when size is
 * at least 2 * DDP_PORT_STRIDE (else 1). Steps with ids that differ by
 * less than stride never share a port within one job, and jobs whose ids
 * differ by less than size / stride never share a port as long as each
 * runs fewer than stride concurrent steps. Reentrant.
 */
#ifndef DDP_PORT_H
#define DDP_PORT_H

#define DDP_PORT_STRIDE 16

/*
 * Returns the port for (job_id, step_id) inside [min, max], or -1 when the
 * range is empty or not within 1..65535.
 */
long ddp_port_choose(unsigned long job_id, unsigned long step_id, unsigned min,
		     unsigned max);

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
