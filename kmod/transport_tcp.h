/* SPDX-License-Identifier: GPL-2.0 */
/*
 * TCP rails: what the files of the TCP transport share, and nobody else
 * (transport_tcp.c, tcp_dial.c, tcp_listen.c, tcp_rx.c, tcp_tx.c).
 */
#ifndef _NZ_TRANSPORT_TCP_H
#define _NZ_TRANSPORT_TCP_H

#include <linux/net.h>
#include <linux/workqueue.h>
#include "comm.h"
#include "frame_mac.h"
#include "transport.h"

#define NZ_TCP_HS_TIMEOUT	(5 * HZ)

/* ACKs and echoes written in one go: 16 of them in 768 (1024) bytes. */
#define NZ_TCP_TX_CTRL_BATCH	16
#define NZ_TCP_TX_HDR_MAX	(NZ_TCP_TX_CTRL_BATCH *			\
				 (NZ_WIRE_HDR_LEN + NZ_FMAC_TAG_LEN))

struct nz_tcp_conn {
	struct nz_conn *conn;
	struct socket *sock;
	struct work_struct rx_work;
	struct work_struct tx_work;
	void (*saved_data_ready)(struct sock *sk);
	void (*saved_write_space)(struct sock *sk);
	void (*saved_state_change)(struct sock *sk);
	struct nz_fmac_keys mac;	/* the per-frame MAC, if on */

	/* Receive progress; touched by rx_work only. */
	u8 rx_hdr[NZ_WIRE_HDR_LEN + NZ_FMAC_TAG_LEN];	/* and its tag */
	u32 rx_hdr_got;
	bool rx_decoded;
	bool rx_in_body;
	bool rx_stalled;
	u64 rx_left;
	struct nz_frame rx_frame;
	struct nz_rx_dest rx_dest;
	u8 *scratch;			/* where drained payload goes */
	unsigned long rx_data_at;	/* jiffies a DATA frame last began */
	bool rx_ack_due;		/* ACKs queued, the tx work not kicked */
	u32 rx_ack_bytes;		/* payload they acknowledge */
	struct shash_desc *rx_mac;	/* the tag being checked, if MAC on */
	u8 rx_tag[NZ_FMAC_TAG_LEN];	/* the payload's, as it came */
	u32 rx_tag_got;

	/* Transmit progress; touched by tx_work only. */
	struct nz_tx_item tx;
	bool tx_busy;
	u32 tx_lowat;			/* notsent_lowat set on the socket */
	u8 tx_hdr[NZ_TCP_TX_HDR_MAX];	/* a header, or a run of ACKs */
	u32 tx_hdr_len;
	u32 tx_hdr_sent;
	u64 tx_left;
	u8 tx_tag[NZ_FMAC_TAG_LEN];	/* the payload's, after it */
	u32 tx_tag_len;
	u32 tx_tag_sent;
	bool tx_zc;			/* a chunk went out without a copy */
};

/* transport_tcp.c: an established connection's socket. */
int nz_tcp_attach(struct nz_conn *conn, struct socket *sock,
		  struct nz_fmac_keys *keys);
void nz_tcp_fail(struct nz_tcp_conn *tc, int err);

/* tcp_dial.c: the client's side. */
extern const struct nz_wire_limits nz_tcp_hs_lim;
int nz_tcp_conn_connect(struct nz_conn *conn);
void nz_tcp_dial_abort(void *dial);

/* tcp_listen.c: the listener and the server's side. */
int nz_tcp_rail_start(struct nz_rail *rail);
void nz_tcp_rail_stop(struct nz_rail *rail);
int nz_tcp_send_frame_nowait(struct socket *sock, const struct nz_frame *f);
void nz_tcp_send_close_nowait(struct socket *sock, u32 reason);

/* tcp_rx.c, tcp_tx.c: an established connection's works. */
void nz_tcp_rx_work(struct work_struct *work);
void nz_tcp_tx_work(struct work_struct *work);
void nz_tcp_set_lowat(struct nz_tcp_conn *tc);
int nz_tcp_tx_encode(struct nz_tcp_conn *tc, const struct nz_frame *f,
		     u8 *buf, size_t size);

/* Bytes of a frame header as it travels: with its tag if the MAC is on. */
static inline u32 nz_tcp_hdr_len(const struct nz_tcp_conn *tc)
{
	return NZ_WIRE_HDR_LEN + (tc->mac.on ? NZ_FMAC_TAG_LEN : 0);
}

#endif /* _NZ_TRANSPORT_TCP_H */
