// SPDX-License-Identifier: GPL-2.0
/*
 * Host tests: the in-process transport of tw_xport.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "tw_xport.h"

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void tw_link(struct tw_world *w, struct tw_hdl *h)
{
	h->anext = w->all[h->owner];
	if (h->anext)
		h->anext->aprev = h;
	w->all[h->owner] = h;
}

static void tw_unlink(struct tw_world *w, struct tw_hdl *h)
{
	if (h->aprev)
		h->aprev->anext = h->anext;
	else
		w->all[h->owner] = h->anext;
	if (h->anext)
		h->anext->aprev = h->aprev;
}

static void tw_deliver(struct tw_hdl *h, const void *data, size_t len)
{
	if (len > h->len) {
		h->res = -EMSGSIZE;
	} else {
		if (len)
			memcpy(h->buf, data, len);
		h->res = (int64_t)len;
	}
	h->done = 1;
}

static struct tw_hdl *tw_new(struct tw_world *w, int owner, int peer, int recv,
			     uint64_t tag, void *buf, size_t len)
{
	struct tw_hdl *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->owner = owner;
	h->peer = peer;
	h->recv = recv;
	h->tag = tag;
	h->buf = buf;
	h->len = len;
	h->deadline = now_ms() + w->timeout_ms;
	tw_link(w, h);
	return h;
}

static int tw_isend(void *ctx, const void *buf, size_t len, int peer,
		    uint64_t tag, void **handle)
{
	struct tw_ctx *c = ctx;
	struct tw_world *w = c->w;
	struct tw_hdl *h, **pp;
	int ret = 0;

	pthread_mutex_lock(&w->mu);
	h = tw_new(w, c->rank, peer, 0, tag, NULL, len);
	if (!h) {
		ret = -ENOMEM;
		goto out;
	}
	h->done = 1;
	h->res = (int64_t)len;
	h->deadline = now_ms() + w->ack_ms;	/* a send reports at its ack */
	w->msgs++;
	if (w->dead[peer]) {
		h->res = -ECONNRESET;
		goto done;
	}
	for (pp = &w->posted[peer]; *pp; pp = &(*pp)->next) {
		if ((*pp)->peer == c->rank && (*pp)->tag == tag) {
			struct tw_hdl *r = *pp;

			*pp = r->next;
			tw_deliver(r, buf, len);
			goto done;
		}
	}
	{
		struct tw_msg *m = malloc(sizeof(*m) + len), **mp;

		if (!m) {
			tw_unlink(w, h);
			free(h);
			ret = -ENOMEM;
			goto out;
		}
		m->next = NULL;
		m->src = c->rank;
		m->tag = tag;
		m->len = len;
		if (len)
			memcpy(m->data, buf, len);
		for (mp = &w->unexp[peer]; *mp; mp = &(*mp)->next)
			;
		*mp = m;
	}
done:
	*handle = h;
	pthread_cond_broadcast(&w->cv);
out:
	pthread_mutex_unlock(&w->mu);
	return ret;
}

static int tw_irecv(void *ctx, void *buf, size_t len, int peer,
		    uint64_t tag, void **handle)
{
	struct tw_ctx *c = ctx;
	struct tw_world *w = c->w;
	struct tw_msg **mp;
	struct tw_hdl *h, **pp;

	pthread_mutex_lock(&w->mu);
	h = tw_new(w, c->rank, peer, 1, tag, buf, len);
	if (!h) {
		pthread_mutex_unlock(&w->mu);
		return -ENOMEM;
	}
	for (mp = &w->unexp[c->rank]; *mp; mp = &(*mp)->next) {
		struct tw_msg *m = *mp;

		if (m->src == peer && m->tag == tag) {
			*mp = m->next;
			tw_deliver(h, m->data, m->len);
			free(m);
			goto out;
		}
	}
	if (w->dead[peer]) {
		h->done = 1;
		h->res = -ECONNRESET;
		goto out;
	}
	for (pp = &w->posted[c->rank]; *pp; pp = &(*pp)->next)
		;
	*pp = h;
out:
	*handle = h;
	pthread_mutex_unlock(&w->mu);
	return 0;
}

static void tw_unpost(struct tw_world *w, struct tw_hdl *h)
{
	for (struct tw_hdl **pp = &w->posted[h->owner]; *pp; pp = &(*pp)->next)
		if (*pp == h) {
			*pp = h->next;
			return;
		}
}

/* Locked: 1 and *res if h is reported now (and freed). */
static int tw_report(struct tw_world *w, struct tw_hdl *h, int64_t *res, int force)
{
	if (!h->done && now_ms() >= h->deadline) {
		tw_unpost(w, h);
		h->done = 1;
		h->res = -ETIMEDOUT;
	}
	if (!h->done || (!h->recv && now_ms() < h->deadline))
		return 0;
	/* Hold some completions back: the engine must cope with any order. */
	if (!force && w->jitter && (++h->polls & 1))
		return 0;
	*res = h->res;
	tw_unlink(w, h);
	free(h);
	return 1;
}

static int tw_test(void *ctx, void *handle, int64_t *res)
{
	struct tw_world *w = ((struct tw_ctx *)ctx)->w;
	int done;

	pthread_mutex_lock(&w->mu);
	done = tw_report(w, handle, res, 0);
	pthread_mutex_unlock(&w->mu);
	return done ? 0 : -EAGAIN;
}

/* Locked: wait for a change of the world, until wake (ms, CLOCK_MONOTONIC). */
static void tw_sleep_until(struct tw_world *w, int64_t wake)
{
	struct timespec ts = { .tv_sec = wake / 1000,
			       .tv_nsec = (wake % 1000) * 1000000 };

	pthread_cond_timedwait(&w->cv, &w->mu, &ts);
}

static int tw_wait(void *ctx, void *handle, int timeout_ms, int64_t *res)
{
	struct tw_world *w = ((struct tw_ctx *)ctx)->w;
	struct tw_hdl *h = handle;
	int64_t end = timeout_ms < 0 ? INT64_MAX : now_ms() + timeout_ms;
	int ret = -ETIME;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		/* A receive times out, a send's ack is due, at its deadline. */
		int64_t wake = h->deadline < end ? h->deadline : end;

		if (tw_report(w, h, res, 1)) {
			ret = 0;
			break;
		}
		if (now_ms() >= end)
			break;
		tw_sleep_until(w, wake);
	}
	pthread_mutex_unlock(&w->mu);
	return ret;
}

/* Until one of the rank's transfers can be reported, or timeout_ms. */
static int tw_wait_any(void *ctx, int timeout_ms)
{
	struct tw_ctx *c = ctx;
	struct tw_world *w = c->w;
	int64_t end = timeout_ms < 0 ? INT64_MAX : now_ms() + timeout_ms;
	int ret = -ETIME;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		int64_t now = now_ms(), wake = end;
		int ready = 0;

		for (struct tw_hdl *h = w->all[c->rank]; h; h = h->anext) {
			ready |= now >= h->deadline || (h->done && h->recv);
			if (h->deadline < wake)
				wake = h->deadline;
		}
		if (ready) {
			ret = 0;
			break;
		}
		if (now >= end)
			break;
		tw_sleep_until(w, wake);
	}
	pthread_mutex_unlock(&w->mu);
	return ret;
}

/* As NZ_CMD_CANCEL: a receive still waiting for its message fails. */
static int tw_cancel(void *ctx, void *handle)
{
	struct tw_world *w = ((struct tw_ctx *)ctx)->w;
	struct tw_hdl *h = handle;
	int ret = -EBUSY;

	pthread_mutex_lock(&w->mu);
	if (h->recv && !h->done) {
		tw_unpost(w, h);
		h->done = 1;
		h->res = -ECANCELED;
		w->cancelled++;
		pthread_cond_broadcast(&w->cv);
		ret = 0;
	}
	pthread_mutex_unlock(&w->mu);
	return ret;
}

const struct nzi_coll_xport tw_xport = {
	.isend = tw_isend, .irecv = tw_irecv, .test = tw_test, .wait = tw_wait,
	.wait_any = tw_wait_any, .cancel = tw_cancel,
};

void tw_init(struct tw_world *w, int n, int timeout_ms)
{
	pthread_condattr_t ca;

	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	w->n = n;
	w->timeout_ms = timeout_ms;
	w->jitter = getenv("NZ_TEST_NOJITTER") ? 0 : 1;
}

/* Locked.  Rank r leaves: its transfers go, its peers' fail. */
static void tw_kill_locked(struct tw_world *w, int r)
{
	w->dead[r] = 1;
	for (int d = 0; d < w->n; d++) {
		for (struct tw_hdl **pp = &w->posted[d]; *pp;) {
			struct tw_hdl *h = *pp;

			if (h->peer == r || d == r) {
				*pp = h->next;
				h->done = 1;
				h->res = -ECONNRESET;
			} else {
				pp = &h->next;
			}
		}
	}
	while (w->all[r]) {
		struct tw_hdl *h = w->all[r];

		tw_unlink(w, h);
		free(h);
	}
	while (w->unexp[r]) {
		struct tw_msg *m = w->unexp[r];

		w->unexp[r] = m->next;
		free(m);
	}
	pthread_cond_broadcast(&w->cv);
}

void tw_kill(struct tw_world *w, int r)
{
	pthread_mutex_lock(&w->mu);
	tw_kill_locked(w, r);
	pthread_mutex_unlock(&w->mu);
}

void tw_destroy(struct tw_world *w)
{
	for (int r = 0; r < w->n; r++)
		tw_kill_locked(w, r);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
}
