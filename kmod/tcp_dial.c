// SPDX-License-Identifier: GPL-2.0
/*
 * TCP rails: the client's side.  The connect work dials the peer's rail
 * and runs the handshake with blocking socket calls bounded by
 * NZ_TCP_HS_TIMEOUT, then hands the socket to its connection.
 */
#include <linux/net.h>
#include <linux/inet.h>
#include <net/sock.h>
#include <net/route.h>
#include "transport_tcp.h"
#include "handshake.h"

/* Handshake frames carry no DATA: these limits admit none. */
const struct nz_wire_limits nz_tcp_hs_lim = {
	.max_msg = 0,
	.max_payload = 0,
};

/* ---- blocking helpers for the handshake ------------------------------------ */

static int nz_tcp_send_all(struct socket *sock, const void *buf, size_t len)
{
	struct msghdr msg = { .msg_flags = MSG_NOSIGNAL };
	struct kvec kv = { (void *)buf, len };
	int ret;

	ret = kernel_sendmsg(sock, &msg, &kv, 1, len);
	if (ret == len)
		return 0;
	return ret < 0 ? ret : -EIO;
}

static int nz_tcp_recv_all(struct socket *sock, void *buf, size_t len)
{
	struct msghdr msg = { };
	struct kvec kv = { buf, len };
	int ret;

	if (!len)
		return 0;
	ret = kernel_recvmsg(sock, &msg, &kv, 1, len, MSG_WAITALL);
	if (ret == len)
		return 0;
	if (ret == -EAGAIN)
		return -ETIMEDOUT;
	return ret < 0 ? ret : -ECONNRESET;
}

static int nz_tcp_send_frame(void *sock, const struct nz_frame *f)
{
	u8 buf[NZ_WIRE_HDR_LEN + NZ_WIRE_HELLO_LEN];
	int len;

	len = nz_wire_encode(f, &nz_tcp_hs_lim, buf, sizeof(buf));
	if (len < 0)
		return len;
	return nz_tcp_send_all(sock, buf, len);
}

/* Read one handshake frame expected in state st. */
static int nz_tcp_recv_frame(void *sock, enum nz_wire_state st,
			     struct nz_frame *f)
{
	u8 hdr[NZ_WIRE_HDR_LEN], body[NZ_WIRE_HELLO_LEN];
	int ret;

	ret = nz_tcp_recv_all(sock, hdr, sizeof(hdr));
	if (ret)
		return ret;
	ret = nz_wire_decode_hdr(hdr, &nz_tcp_hs_lim, f);
	if (ret)
		return ret;
	if (!nz_wire_type_expected(st, f->type) || f->len > sizeof(body))
		return -EPROTO;
	ret = nz_tcp_recv_all(sock, body, f->len);
	if (ret)
		return ret;
	ret = nz_wire_decode_body(f, body);
	if (ret)
		return ret;
	return f->type == NZ_FRAME_CLOSE ? -ECONNREFUSED : 0;
}

static void nz_tcp_set_timeouts(struct socket *sock)
{
	struct sock *sk = sock->sk;

	lock_sock(sk);
	sk->sk_rcvtimeo = NZ_TCP_HS_TIMEOUT;
	sk->sk_sndtimeo = NZ_TCP_HS_TIMEOUT;
	release_sock(sk);
}

/* ---- client side --------------------------------------------------------------- */

static const struct nz_hs_io nz_tcp_hs_io = {
	.recv = nz_tcp_recv_frame,
	.send_hello = nz_tcp_send_frame,
};

int nz_tcp_conn_connect(struct nz_conn *conn)
{
	struct nz_comm *comm = conn->peer->comm;
	const struct nz_comm_addr *a;
	struct nz_rail *rail = conn->rail;
	struct sockaddr_in peer = { .sin_family = AF_INET };
	struct nz_fmac_keys keys = {};
	struct socket *sock;
	int ret;

	a = &comm->addrs[conn->peer->rank * comm->nrails + conn->slot];
	peer.sin_addr.s_addr = a->addr;
	peer.sin_port = a->port;

	ret = sock_create_kern(rail->net, AF_INET, SOCK_STREAM, IPPROTO_TCP,
			       &sock);
	if (ret)
		return ret;
	ret = nz_conn_dial_begin(conn, sock);
	if (ret)
		goto out_release;
	nz_tcp_set_timeouts(sock);
	ret = nz_rail_bind(rail, sock, a->addr);
	if (ret)
		goto out_release;
	ret = kernel_connect(sock, (struct sockaddr *)&peer, sizeof(peer), 0);
	if (ret)
		goto out_release;
	ret = nz_hs_client(conn, &nz_tcp_hs_io, sock, &keys);
	if (ret) {
		if (ret == -EACCES) {
			atomic64_inc(&rail->stats.hs_refused);
			pr_warn_ratelimited("rail %s: rank %u failed to authenticate\n",
					    rail->name, conn->peer->rank);
		}
		goto out_release;
	}
	/* Aborted after the handshake: the socket is shut, do not attach. */
	ret = nz_conn_dial_end(conn);
	if (!ret)
		ret = nz_tcp_attach(conn, sock, &keys);
	memzero_explicit(&keys, sizeof(keys));
	if (ret)
		goto out_release;
	return 0;

out_release:
	nz_conn_dial_end(conn);
	sock_release(sock);
	return ret;
}

/*
 * Teardown: a dial in progress gives up at once.  Shutting the socket down
 * wakes a connect() waiting for SYN-ACK (or for ARP) and a handshake
 * waiting to read: both return an error and the connect work ends.
 */
void nz_tcp_dial_abort(void *dial)
{
	kernel_sock_shutdown(dial, SHUT_RDWR);
}
