/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * libddp's rendezvous (rdv.c, protocol 2): rank 0 proves itself with munge
 * before any rank says more than which rank it claims, every rank proves
 * itself bound to rank 0's nonce and to its connection, then every pair
 * of ranks gets one connection authenticated with a token rank 0 handed
 * out. The wire formats are in proto.h, the credentials in auth.h, the
 * sockets in net.h; the result is a connected TCP mesh (tcp.h).
 */
#ifndef DDP_WK_RDV_H
#define DDP_WK_RDV_H

#include "ddp.h"
#include "tcp.h"

/*
 * Fills m->peers (fds connected, non-blocking and tuned, hosts, addresses
 * and data ports known) within cfg->timeout_s; m->rank, size, timeout_s,
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

#endif
