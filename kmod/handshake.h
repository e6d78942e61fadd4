/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The handshake every transport runs (handshake.c): what a transport calls
 * to build the server's frames and to run the client's side.
 */
#ifndef _NZ_HANDSHAKE_H
#define _NZ_HANDSHAKE_H

#include "frame_mac.h"
#include "wire.h"

struct nz_comm;
struct nz_conn;

/*
 * How a transport moves the client's handshake frames.  recv: the next
 * frame, one a client in state ws may get (nz_wire_type_expected()), a
 * CLOSE as -ECONNREFUSED; send_hello: our HELLO.  Both may block until
 * the transport's handshake deadline.
 */
struct nz_hs_io {
	int (*recv)(void *ctx, enum nz_wire_state ws, struct nz_frame *f);
	int (*send_hello)(void *ctx, const struct nz_frame *f);
};

int nz_hs_client(struct nz_conn *conn, const struct nz_hs_io *io, void *ctx,
		 struct nz_fmac_keys *keys);
int nz_hs_server_keys(struct nz_comm *comm, const struct nz_frame_hello *h,
		      const u8 *nonce_s, struct nz_fmac_keys *k);
void nz_hs_make_challenge(const u8 *nonce_s, struct nz_frame *f);
int nz_hs_make_welcome(struct nz_comm *comm, const struct nz_frame_hello *h,
		       const u8 *nonce_s, struct nz_frame *f);

#endif
