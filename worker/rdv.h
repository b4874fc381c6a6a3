/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp's rendezvous (rdv.c, protocol 4; its files and states are in
 * rdv_internal.h): rank 0 (or a rank's node leader, which relays its
 * node's joins to rank 0) proves itself with munge before any rank says
 * more than which rank it claims, every rank proves itself bound to both
 * sides' nonces and to its connection, the roster goes down a tree of
 * ranks, then each rank connects the peers its collectives use
 * (peers.h), authenticated with a token rank 0 handed out. The wire
 * formats are in proto.h, the credentials in auth.h, the sockets in
 * ddp_net.h; the result is a connected sparse TCP mesh (tcp.h).
 */
#ifndef DDP_WK_RDV_H
#define DDP_WK_RDV_H

#include "ddp.h"
#include "tcp.h"

/*
 * Fills m->peers (hosts, addresses and data ports of every rank; fds
 * connected, non-blocking and tuned for the peers peers.h names, -1 for
 * the others) within cfg->timeout_s; m->rank, size, timeout_s,
 * myhost and the peers array (fd -1) must be set up, cfg is borrowed.
 * Rank 0 waits for MASTER_PORT while another process holds it, the others
 * connect again while what answers is not rank 0. Refusals are logged
 * (the first few, then a summary per 10 s). With cfg->auth 0, logs one
 * warning and refuses (DDP_ERR_ENV) a non-loopback MASTER_ADDR unless
 * DDP_AUTH_NONE_NETWORK=1. On failure the thread's last error says why
 * (DDP_ERR_RENDEZVOUS, _TIMEOUT, _AUTH, _ENV, _SYSTEM, _NOMEM) and the
 * fds already connected stay in m->peers for tcp_mesh_fini. Not
 * thread-safe for one mesh.
 */
enum ddp_status rdv_connect_all(struct wk_mesh *m,
				const struct ddp_config *cfg);

/*
 * The name of the abstract Unix socket where the ranks of one node of a
 * job join its leader (LOCAL_RANK 0), for cfg's user, job, step and
 * MASTER_ADDR/PORT, a world of world ranks and host, into name (without
 * the leading NUL). 0, or -1 when it does not fit. Thread-safe.
 */
int rdv_node_socket(const struct ddp_config *cfg, int world, const char *host,
		    char *name, size_t namelen);

#endif
