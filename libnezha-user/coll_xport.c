// SPDX-License-Identifier: LGPL-2.1-or-later
/*
 * The collectives' default transport: the communicator's own
 * point-to-point requests (p2p.c), through the public calls only.
 *
 * wait() must block for one given transfer for at most timeout_ms; it
 * sets the communicator's wait timeout for the duration of one nz_wait(),
 * which then returns -ETIME with the request still in flight, and puts the
 * user's value back.
 */
#include <errno.h>
#include "coll.h"

static int nzi_x_isend(void *ctx, const void *buf, size_t len, int peer,
		       uint64_t tag, void **handle)
{
	return nz_isend(ctx, buf, len, peer, tag, (struct nz_request **)handle);
}

static int nzi_x_irecv(void *ctx, void *buf, size_t len, int peer,
		       uint64_t tag, void **handle)
{
	return nz_irecv(ctx, buf, len, peer, tag, (struct nz_request **)handle);
}

static int64_t nzi_x_result(int ret, const struct nz_status *st)
{
	if (ret)
		return ret;
	return st->error ? st->error : (int64_t)st->bytes;
}

static int nzi_x_test(void *ctx, void *handle, int64_t *res)
{
	struct nz_status st = { 0 };
	int ret = nz_test(handle, &st);

	(void)ctx;
	if (ret == -EAGAIN)
		return -EAGAIN;
	*res = nzi_x_result(ret, &st);
	return 0;
}

static int nzi_x_wait(void *ctx, void *handle, int timeout_ms, int64_t *res)
{
	struct nz_comm *comm = ctx;
	struct nz_request *req = handle;
	struct nz_status st = { 0 };
	int saved = comm->wait_timeout_ms, ret;

	comm->wait_timeout_ms = timeout_ms > 0 ? timeout_ms : 0;
	comm->in_coll = true;
	ret = nz_wait(req, &st);
	comm->in_coll = false;
	comm->wait_timeout_ms = saved;
	/* -ETIME/-EINTR leave the request in flight; an outcome frees it. */
	if ((ret == -ETIME || ret == -EINTR) && req->state == NZI_REQ_INFLIGHT)
		return ret;
	*res = nzi_x_result(ret, &st);
	return 0;
}

static int nzi_x_wait_any(void *ctx, int timeout_ms)
{
	return nzi_comm_wait_any(ctx, timeout_ms);
}

/* NZ_CMD_CANCEL fails every waiting receive of (peer, tag): a collective's
 * tags carry its sequence number, so only this transfer has them. */
static int nzi_x_cancel(void *ctx, void *handle)
{
	struct nz_request *req = handle;
	int n;

	if (req->op != NZ_CMD_RECV || req->state != NZI_REQ_INFLIGHT)
		return -EBUSY;
	n = nz_cancel_recvs(ctx, req->peer, req->tag);
	if (n < 0)
		return n;
	return n ? 0 : -EBUSY;
}

const struct nzi_coll_xport nzi_coll_xport_p2p = {
	.isend = nzi_x_isend,
	.irecv = nzi_x_irecv,
	.test = nzi_x_test,
	.wait = nzi_x_wait,
	.wait_any = nzi_x_wait_any,
	.cancel = nzi_x_cancel,
};
