// SPDX-License-Identifier: GPL-2.0
/*
 * nezha-aggd: the core on a UDP socket.  One thread, one socket: batches
 * of datagrams (recvmmsg) go through aggd_input() in order; the answers
 * they make are queued and sent after each batch in one sendmmsg (a
 * result goes to every rank of the job: one system call, not one per
 * rank), with MSG_DONTWAIT, so that a full socket buffer loses a packet
 * (counted, the protocol retransmits) and never stalls the node.
 */
#include <errno.h>
#include <netdb.h>
#include <poll.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "aggd.h"

#define AGGD_BATCH	32
#define AGGD_SOCKBUF	(4 << 20)

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int aggd_udp_open(struct aggd_udp *u, const char *bind_addr, uint16_t port)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC, .ai_socktype = SOCK_DGRAM,
		.ai_flags = AI_PASSIVE | AI_NUMERICHOST | AI_NUMERICSERV,
	}, *ai;
	char service[8];
	int buf = AGGD_SOCKBUF, fd, ret;

	memset(u, 0, sizeof(*u));
	u->fd = -1;
	snprintf(service, sizeof(service), "%u", port);
	/* No address: IPv4's every address (the rail's networks are IPv4). */
	ret = getaddrinfo(bind_addr ? bind_addr : "0.0.0.0", service, &hints, &ai);
	if (ret)
		return -EADDRNOTAVAIL;
	fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		ret = -errno;
		goto out;
	}
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof(buf));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen)) {
		ret = -errno;
		close(fd);
		goto out;
	}
	u->fd = fd;
	ret = 0;
out:
	freeaddrinfo(ai);
	return ret;
}

uint16_t aggd_udp_port(const struct aggd_udp *u)
{
	struct aggd_addr a = { .len = sizeof(a.u) };

	if (getsockname(u->fd, &a.u.sa, &a.len))
		return 0;
	return ntohs(a.u.sa.sa_family == AF_INET6 ? a.u.in6.sin6_port : a.u.in.sin_port);
}

void aggd_udp_flush(struct aggd_udp *u)
{
	struct mmsghdr msgs[AGGD_TX_BATCH];
	struct iovec iov[AGGD_TX_BATCH];
	unsigned int done = 0;

	for (unsigned int i = 0; i < u->ntx; i++) {
		iov[i] = (struct iovec){ u->tx_buf[i], u->tx_len[i] };
		msgs[i].msg_hdr = (struct msghdr){
			.msg_name = &u->tx_to[i].u, .msg_namelen = u->tx_to[i].len,
			.msg_iov = &iov[i], .msg_iovlen = 1,
		};
	}
	while (done < u->ntx) {
		int sent = sendmmsg(u->fd, msgs + done, u->ntx - done, MSG_DONTWAIT);

		u->tx_batches++;
		if (sent > 0) {
			done += (unsigned int)sent;
			continue;
		}
		if (sent < 0 && errno == EINTR)
			continue;
		/* The first one failed (a full buffer, an ICMP error of an
		 * earlier send): lost, as a network would lose it. */
		u->tx_errors++;
		done++;
	}
	u->ntx = 0;
}

void aggd_udp_send(void *arg, const struct aggd_addr *to, const uint8_t *buf, size_t len)
{
	struct aggd_udp *u = arg;

	if (len > sizeof(u->tx_buf[0])) {
		u->tx_errors++;
		return;
	}
	memcpy(u->tx_buf[u->ntx], buf, len);
	u->tx_len[u->ntx] = len;
	u->tx_to[u->ntx] = *to;
	if (++u->ntx == AGGD_TX_BATCH)
		aggd_udp_flush(u);
}

static int serve_batch(struct aggd *n, struct aggd_udp *u)
{
	uint8_t bufs[AGGD_BATCH][NZA_PKT_MAX + 1];
	struct aggd_addr from[AGGD_BATCH];
	struct mmsghdr msgs[AGGD_BATCH];
	struct iovec iov[AGGD_BATCH];
	uint64_t now;
	int got;

	for (int i = 0; i < AGGD_BATCH; i++) {
		iov[i] = (struct iovec){ bufs[i], sizeof(bufs[i]) };
		msgs[i].msg_hdr = (struct msghdr){
			.msg_name = &from[i].u, .msg_namelen = sizeof(from[i].u),
			.msg_iov = &iov[i], .msg_iovlen = 1,
		};
	}
	got = recvmmsg(u->fd, msgs, AGGD_BATCH, MSG_DONTWAIT, NULL);
	if (got < 0)
		return errno == EAGAIN || errno == EINTR ? 0 : -errno;
	u->batches++;
	now = now_ns();
	for (int i = 0; i < got; i++) {
		from[i].len = msgs[i].msg_hdr.msg_namelen;
		/* A datagram longer than any packet is cut here and then
		 * refused by its decoder (MSG_TRUNC: the length is wrong). */
		aggd_input(n, &from[i], bufs[i],
			   msgs[i].msg_hdr.msg_flags & MSG_TRUNC ? sizeof(bufs[i]) : msgs[i].msg_len,
			   now);
	}
	aggd_udp_flush(u);
	return got;
}

int aggd_run(struct aggd *n, struct aggd_udp *u, const struct aggd_run_opts *o)
{
	uint64_t next_tick = now_ns(), next_stats = next_tick;
	struct pollfd pfd = { .fd = u->fd, .events = POLLIN };
	int ret = 0;

	next_stats += (uint64_t)o->stats_sec * 1000000000ull;
	while (!atomic_load(o->stop)) {
		uint64_t now;

		ret = poll(&pfd, 1, 100);
		if (ret < 0 && errno != EINTR)
			return -errno;
		u->loops++;
		/* Drain what is there, a bounded batch at a time. */
		for (int i = 0; i < 64 && ret > 0; i++) {
			ret = serve_batch(n, u);
			if (ret < 0)
				return ret;
			if (ret < AGGD_BATCH)
				break;
		}
		now = now_ns();
		if (now >= next_tick) {
			aggd_tick(n, now);
			aggd_udp_flush(u);
			next_tick = now + 1000000000ull;
		}
		if (o->dump && atomic_exchange(o->dump, 0))
			aggd_stats_print(n, o->out);
		if (o->stats_sec && now >= next_stats) {
			aggd_stats_print(n, o->out);
			next_stats = now + (uint64_t)o->stats_sec * 1000000000ull;
		}
	}
	return 0;
}
