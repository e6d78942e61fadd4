/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Calls shared by the message files, and by them only: msg.c (lifetime,
 * commands, timeouts), ubuf.c (user buffers), rx.c (receive path), tx.c
 * (transmit path and acknowledgements).  What the rest of the module
 * calls is in comm.h.
 *
 * Locking: peer->lock protects a peer's lists and every message and chunk
 * on them.  Functions marked "under p->lock" assert it; nz_msg_complete(),
 * nz_complete_list(), nz_chunk_free() and nz_msg_put() may sleep and are
 * never called under it.
 */
#ifndef _NZ_MSG_H
#define _NZ_MSG_H

#include "comm.h"
#include "transport.h"

struct io_uring_cmd;

/* msg.c: lifetime and results */
void nz_msg_put(struct nz_msg *m);
struct nz_msg *nz_msg_alloc(struct nz_peer *p, enum nz_msg_dir dir);
bool nz_msg_set_done(struct nz_msg *m, s32 result);	/* under p->lock */
bool nz_msg_writer_done(struct nz_msg *m);		/* under p->lock */
void nz_chunk_write_lost(struct nz_chunk *ch,		/* under p->lock */
			 struct list_head *done);
void nz_msg_complete(struct nz_msg *m);
void nz_complete_list(struct list_head *done);
void nz_msg_zc_release(struct work_struct *work);	/* tx.c */
void nz_peer_kick(struct nz_peer *p);
struct nz_tagseq *nz_tagseq_find(struct nz_peer *p, u64 tag); /* under p->lock */

/* ubuf.c */
int nz_xfer_len_ok(u64 len);
int nz_ubuf_pin(struct nz_ubuf *b, struct io_uring_cmd *cmd, u64 addr,
		u64 len, bool write);
void nz_ubuf_release(struct nz_ubuf *b);
void nz_ubuf_iter(const struct nz_ubuf *b, unsigned int dir, u64 off,
		  u64 len, struct iov_iter *it);

/* tx.c: chunks, and the answers a sender gets */
void nz_chunk_free(struct nz_chunk *ch);
void nz_chunks_free_list(struct list_head *chunks);
int nz_conn_rx_ack(struct nz_conn *conn, const struct nz_frame_ack *a);
int nz_conn_rx_abort_ack(struct nz_conn *conn, const struct nz_frame_abort *a);
int nz_conn_rx_refuse(struct nz_conn *conn, const struct nz_frame_abort *a);
int nz_conn_rx_done(struct nz_conn *conn, const struct nz_frame_done *d);

#endif /* _NZ_MSG_H */
