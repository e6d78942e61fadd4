// SPDX-License-Identifier: GPL-2.0
/*
 * The handshake that admits a connection, one for every transport
 * (Documentation/wire.rst):
 *
 *   server -> client   CHALLENGE (nonce_s)
 *   client -> server   HELLO     (job, ranks, rail, nonce_c, MAC)
 *   server -> client   WELCOME   (incarnation, MAC)   or CLOSE (reason)
 *
 * Here are the frames, their MACs and what they prove, and the client's
 * side as one sequence.  A transport brings only the moving of frames
 * (struct nz_hs_io) and, on the server, the wait for the communicator a
 * HELLO names (nz_comm_find_hello(), comm.c), since a TCP listener and an
 * RDMA connection manager wait in different contexts.
 */
#include <linux/random.h>
#include <crypto/algapi.h>
#include "comm.h"
#include "handshake.h"

/*
 * Server: the CHALLENGE carrying nonce_s, random and new for this
 * connection (the transport draws it as the connection starts, and keeps
 * it for the WELCOME).
 */
void nz_hs_make_challenge(const u8 *nonce_s, struct nz_frame *f)
{
	nz_frame_init(f, NZ_FRAME_CHALLENGE);
	memcpy(f->challenge.nonce_s, nonce_s, NZ_WIRE_NONCE_LEN);
}

/*
 * Server: the WELCOME for HELLO h, which nz_comm_find_hello() checked and
 * matched to comm.  Its MAC covers both nonces, so it answers this HELLO
 * and no other, and names this instance of the communicator.
 */
int nz_hs_make_welcome(struct nz_comm *comm, const struct nz_frame_hello *h,
		       const u8 *nonce_s, struct nz_frame *f)
{
	u8 in[NZ_WIRE_WELCOME_MAC_LEN];

	nz_frame_init(f, NZ_FRAME_WELCOME);
	f->welcome.incarnation = comm->incarnation;
	nz_wire_welcome_mac_input(h->nonce_c, nonce_s, comm->job_id,
				  comm->rank, h->src_rank, h->rail,
				  comm->incarnation, in);
	return nz_comm_mac(comm, in, sizeof(in), f->welcome.mac);
}

/*
 * Both ends, after the WELCOME: the per-frame MAC keys of the connection
 * between client and server on rail (slot), one per direction, derived
 * with the job secret from both nonces -- so they belong to this
 * connection alone.
 */
static int nz_hs_frame_keys(struct nz_comm *comm, const u8 *nonce_c,
			    const u8 *nonce_s, u32 client, u32 server,
			    u16 rail, bool is_server, struct nz_fmac_keys *k)
{
	u8 in[NZ_WIRE_FRAME_KEY_LEN];
	struct nz_fmac *dir[2];
	unsigned int d;
	int ret = 0;

	BUILD_BUG_ON(NZ_FMAC_KEY_LEN != NZ_WIRE_MAC_LEN);
	dir[0] = is_server ? &k->rx : &k->tx;	/* client -> server */
	dir[1] = is_server ? &k->tx : &k->rx;
	for (d = 0; d < 2 && !ret; d++) {
		nz_wire_frame_key_input(d, nonce_c, nonce_s, comm->job_id,
					client, server, rail, in);
		ret = nz_comm_mac(comm, in, sizeof(in), dir[d]->key);
	}
	if (ret)
		memzero_explicit(k, sizeof(*k));
	else
		k->on = true;
	return ret;
}

/*
 * Server: the per-frame MAC keys for the connection HELLO h opens, if it
 * asked for them (nz_comm_find_hello() checked that the rail agrees).
 */
int nz_hs_server_keys(struct nz_comm *comm, const struct nz_frame_hello *h,
		      const u8 *nonce_s, struct nz_fmac_keys *k)
{
	memset(k, 0, sizeof(*k));
	if (!(h->flags & NZ_HELLO_F_FRAME_MAC))
		return 0;
	return nz_hs_frame_keys(comm, h->nonce_c, nonce_s, h->src_rank,
				comm->rank, h->rail, true, k);
}

/* Client: our HELLO on conn, answering the server's CHALLENGE nonce_s. */
static int nz_conn_make_hello(struct nz_conn *conn, const u8 *nonce_s,
			      struct nz_frame *f)
{
	struct nz_comm *comm = conn->peer->comm;
	u8 in[NZ_WIRE_HELLO_MAC_MAX];
	unsigned int len;

	nz_frame_init(f, NZ_FRAME_HELLO);
	f->hello.incarnation = comm->incarnation;
	f->hello.job_id = comm->job_id;
	f->hello.src_rank = comm->rank;
	f->hello.dst_rank = conn->peer->rank;
	f->hello.rail = conn->slot;
	f->hello.nrails = comm->nrails;
	f->hello.unit = comm->unit;
	if (conn->rail->frame_mac)
		f->hello.flags |= NZ_HELLO_F_FRAME_MAC;
	get_random_bytes(f->hello.nonce_c, sizeof(f->hello.nonce_c));
	len = nz_wire_hello_mac_input(&f->hello, nonce_s, in);
	return nz_comm_mac(comm, in, len, f->hello.mac);
}

/*
 * Client: the server's WELCOME proves it knows the secret (its MAC covers
 * our HELLO's nonce, so it answers this HELLO) and names its instance.
 * -EACCES if the MAC does not check, -ESTALE for another instance of a
 * peer we knew.  Process context.
 */
static int nz_conn_check_welcome(struct nz_conn *conn,
				 const struct nz_frame_welcome *w,
				 const u8 *nonce_c, const u8 *nonce_s)
{
	struct nz_comm *comm = conn->peer->comm;
	u8 in[NZ_WIRE_WELCOME_MAC_LEN], mac[NZ_WIRE_MAC_LEN];
	int ret;

	nz_wire_welcome_mac_input(nonce_c, nonce_s, comm->job_id,
				  conn->peer->rank, comm->rank, conn->slot,
				  w->incarnation, in);
	ret = nz_comm_mac(comm, in, sizeof(in), mac);
	if (!ret && crypto_memneq(mac, w->mac, sizeof(mac)))
		ret = -EACCES;
	memzero_explicit(mac, sizeof(mac));
	return ret ?: nz_conn_incarnation(conn, w->incarnation);
}

/*
 * The handshake (checked: MAC, job, ranks) names the instance of the
 * peer's communicator at the other end of conn.  The first one named is
 * the peer for the life of this communicator.  Another one means that rank
 * restarted -- its process or its node -- with the same job and secret:
 * the instance we knew is gone with whatever was in flight with it, and
 * the new one cannot take its place, as its message ids start again from
 * 1 and our duplicate window would drain and acknowledge them as old ones
 * (its sends would complete, delivered nowhere).  So the peer counts as
 * gone (-ECONNRESET for its transfers, no more dialling) and the new
 * instance is refused: -ESTALE.  Process context.
 */
int nz_conn_incarnation(struct nz_conn *conn, u64 incarnation)
{
	struct nz_peer *p = conn->peer;
	bool first = false;
	int ret = 0;

	spin_lock_bh(&p->lock);
	if (!p->incarnation) {
		p->incarnation = incarnation;
	} else if (p->incarnation != incarnation) {
		ret = -ESTALE;
		first = !p->left;
		p->left = true;
	}
	spin_unlock_bh(&p->lock);
	if (!ret)
		return 0;
	atomic64_inc(&conn->rail->stats.hs_refused);
	pr_warn_ratelimited("rail %s: rank %u of job %llx restarted: another instance of its communicator connected; it is refused%s\n",
			    conn->rail->name, p->rank, p->comm->job_id,
			    first ? ", and transfers with the one before fail" : "");
	if (first)
		nz_peer_fail_all(p, -ECONNRESET);
	return ret;
}
/*
 * Client: the whole handshake on conn, through io: the CHALLENGE, our
 * HELLO, the WELCOME.  0 once the server proved it knows the secret and
 * named an instance we accept; -ECONNREFUSED for its CLOSE, -EACCES for a
 * MAC that does not check, -ESTALE for a restarted peer, or io's error.
 * keys: the connection's per-frame MAC keys if its rail has them (the
 * server agreed: it sends no WELCOME otherwise).  Process context.
 */
int nz_hs_client(struct nz_conn *conn, const struct nz_hs_io *io, void *ctx,
		 struct nz_fmac_keys *keys)
{
	u8 nonce_s[NZ_WIRE_NONCE_LEN], nonce_c[NZ_WIRE_NONCE_LEN];
	struct nz_frame f;
	int ret;

	ret = io->recv(ctx, NZ_WS_CLIENT_WAIT_CHALLENGE, &f);
	if (ret)
		return ret;
	memcpy(nonce_s, f.challenge.nonce_s, sizeof(nonce_s));

	ret = nz_conn_make_hello(conn, nonce_s, &f);
	if (ret)
		return ret;
	ret = io->send_hello(ctx, &f);
	if (ret)
		return ret;
	memcpy(nonce_c, f.hello.nonce_c, sizeof(nonce_c));
	ret = io->recv(ctx, NZ_WS_CLIENT_WAIT_WELCOME, &f);
	if (ret)
		return ret;
	ret = nz_conn_check_welcome(conn, &f.welcome, nonce_c, nonce_s);
	memset(keys, 0, sizeof(*keys));
	if (ret || !conn->rail->frame_mac)
		return ret;
	return nz_hs_frame_keys(conn->peer->comm, nonce_c, nonce_s,
				conn->peer->comm->rank, conn->peer->rank,
				conn->slot, false, keys);
}
