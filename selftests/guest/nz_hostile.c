// SPDX-License-Identifier: GPL-2.0
/*
 * A hostile or broken peer, from user space, against the module's TCP rail
 * on this guest: garbage instead of a handshake, a HELLO with the wrong
 * secret, then (with the right secret) frames that point outside the
 * receive buffer or break the chunking rule.  Each must close only that
 * connection, be counted, and leave the posted receive and the memory
 * around it untouched; a well-formed message afterwards must still land.
 *
 * Usage: nz_hostile RAIL ADDR PORT.  Links the module's own wire codec
 * (kmod/wire.c); HMAC-SHA256 comes from the kernel through AF_ALG.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_alg.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>
#include "nezha.h"
#include "wire.h"
#include "tap.h"

#define DATA_OFF_OFFSET	40	/* DATA header: offset field (wire.rst) */
#define UNIT		65536

static const char *rail;
static struct sockaddr_in target;
static const struct nz_wire_limits lim = { .max_msg = 1ULL << 40,
					   .max_payload = UNIT };

static long long sysfs_rail(const char *what)
{
	char path[256], line[64];
	long long v = -1;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/nezha/rail-%s/stats/%s",
		 rail, what);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (fgets(line, sizeof(line), f))
		v = atoll(line);
	fclose(f);
	return v;
}

static int hmac(const uint8_t *key, size_t klen, const uint8_t *in,
		size_t len, uint8_t *out)
{
	struct sockaddr_alg sa = { .salg_family = AF_ALG, .salg_type = "hash",
				   .salg_name = "hmac(sha256)" };
	int tfm, op, ret = -1;

	tfm = socket(AF_ALG, SOCK_SEQPACKET, 0);
	if (tfm < 0)
		return -1;
	if (bind(tfm, (struct sockaddr *)&sa, sizeof(sa)) ||
	    setsockopt(tfm, SOL_ALG, ALG_SET_KEY, key, klen))
		goto out;
	op = accept(tfm, NULL, 0);
	if (op < 0)
		goto out;
	if (write(op, in, len) == (ssize_t)len &&
	    read(op, out, 32) == 32)
		ret = 0;
	close(op);
out:
	close(tfm);
	return ret;
}

static int connect_rail(void)
{
	struct timeval tv = { .tv_sec = 8 };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&target, sizeof(target))) {
		close(fd);
		return -1;
	}
	return fd;
}

static int read_all(int fd, void *buf, size_t len)
{
	size_t got = 0;
	ssize_t n;

	while (got < len) {
		n = read(fd, (char *)buf + got, len - got);
		if (n <= 0)
			return -1;
		got += (size_t)n;
	}
	return 0;
}

static int write_all(int fd, const void *buf, size_t len)
{
	return write(fd, buf, len) == (ssize_t)len ? 0 : -1;
}

/* The server closes on us within 8 s: read until EOF or reset. */
static bool closed_by_peer(int fd)
{
	char buf[256];
	ssize_t n;

	do {
		n = read(fd, buf, sizeof(buf));
	} while (n > 0);
	return n == 0 || errno == ECONNRESET;
}

static int read_frame(int fd, struct nz_frame *f, uint8_t *body)
{
	uint8_t hdr[NZ_WIRE_HDR_LEN];

	if (read_all(fd, hdr, sizeof(hdr)) || nz_wire_decode_hdr(hdr, &lim, f))
		return -1;
	if (f->len > NZ_WIRE_HELLO_LEN || read_all(fd, body, f->len))
		return -1;
	return nz_wire_decode_body(f, body);
}

struct job {
	uint64_t id;
	uint8_t secret[NZ_SECRET_LEN];
};

/* Client side of the handshake as rank 1; 0 when WELCOME checks out. */
static int handshake(int fd, const struct job *j, const uint8_t *secret)
{
	uint8_t body[NZ_WIRE_HELLO_LEN], buf[128], in[64], mac[32];
	uint8_t nonce_s[NZ_WIRE_NONCE_LEN];
	struct nz_frame f;
	int len;

	if (read_frame(fd, &f, body) || f.type != NZ_FRAME_CHALLENGE)
		return -1;
	memcpy(nonce_s, f.challenge.nonce_s, sizeof(nonce_s));
	nz_frame_init(&f, NZ_FRAME_HELLO);
	f.hello.job_id = j->id;
	f.hello.src_rank = 1;
	f.hello.dst_rank = 0;
	f.hello.rail = 0;
	f.hello.nrails = 1;
	f.hello.unit = UNIT;
	getrandom(f.hello.nonce_c, sizeof(f.hello.nonce_c), 0);
	nz_wire_hello_mac_input(&f.hello, nonce_s, in);
	if (hmac(secret, NZ_SECRET_LEN, in, NZ_WIRE_HELLO_MAC_LEN,
		 f.hello.mac))
		return -1;
	len = nz_wire_encode(&f, &lim, buf, sizeof(buf));
	if (len < 0 || write_all(fd, buf, (size_t)len))
		return -1;
	nz_wire_welcome_mac_input(f.hello.nonce_c, nonce_s, j->id, 0, 1, 0,
				  in);
	if (hmac(secret, NZ_SECRET_LEN, in, NZ_WIRE_WELCOME_MAC_LEN, mac))
		return -1;
	if (read_frame(fd, &f, body) || f.type != NZ_FRAME_WELCOME)
		return -2;
	return memcmp(mac, f.welcome.mac, 32) ? -3 : 0;
}

static int data_frame(uint8_t *hdr, uint64_t msg_id, uint64_t tag,
		      uint64_t total, uint64_t off, uint32_t len)
{
	struct nz_frame f;

	nz_frame_init(&f, NZ_FRAME_DATA);
	f.len = len;
	f.data.msg_id = msg_id;
	f.data.tag = tag;
	f.data.total = total;
	f.data.offset = off;
	return nz_wire_encode(&f, &lim, hdr, NZ_WIRE_HDR_LEN);
}

static void put_be64(uint8_t *p, uint64_t v)
{
	for (int i = 7; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

int main(int argc, char **argv)
{
	struct nz_queue_opts qo = { .entries = 8 };
	struct nz_comm_create cc = { 0 };
	struct nz_comm_addr addrs[2] = { 0 };
	struct nz_comm_wait w = { 0 };
	uint8_t hdr[NZ_WIRE_HDR_LEN], junk[NZ_WIRE_HDR_LEN];
	uint8_t *area, *rbuf, *payload;
	long long refused0, errors0;
	struct nz_queue *q;
	struct nz_cqe cqe;
	struct nz_sqe cmd = { 0 };
	struct job j;
	uint8_t wrong[NZ_SECRET_LEN];
	bool canary_ok = true;
	int fd, ret, i;

	if (argc != 4)
		return 2;
	rail = argv[1];
	target.sin_family = AF_INET;
	inet_pton(AF_INET, argv[2], &target.sin_addr);
	target.sin_port = htons((uint16_t)atoi(argv[3]));
	j.id = 0x4e5a4f5354494c45ULL;
	getrandom(j.secret, sizeof(j.secret), 0);
	memcpy(wrong, j.secret, sizeof(wrong));
	wrong[0] ^= 1;

	/* 1. Garbage where a HELLO should be. */
	refused0 = sysfs_rail("handshakes_refused");
	fd = connect_rail();
	memset(junk, 0xa5, sizeof(junk));
	ret = fd >= 0 && !read_all(fd, hdr, sizeof(hdr)) &&
	      !write_all(fd, junk, sizeof(junk));
	tap_ok(ret && closed_by_peer(fd), "garbage handshake: connection closed");
	close(fd);
	tap_ok(sysfs_rail("handshakes_refused") == refused0 + 1,
	       "garbage handshake: counted as refused");

	/* A communicator of our own that expects rank 1 on this rail. */
	if (nz_queue_open(&q, &qo)) {
		tap_ok(0, "open /dev/nezha");
		return tap_exit();
	}
	cc.job_id = j.id;
	memcpy(cc.secret, j.secret, sizeof(cc.secret));
	cc.rank = 0;
	cc.size = 2;
	cc.nrails = 1;
	cc.unit = UNIT;
	cc.timeout_ms = 60000;
	snprintf(cc.rails[0], sizeof(cc.rails[0]), "%s", rail);
	addrs[1].addr = target.sin_addr.s_addr;
	addrs[1].port = htons(1);	/* never used: rank 1 connects to us */
	cc.addrs = (uintptr_t)addrs;
	ret = ioctl(nz_queue_fd(q), NZ_IOC_COMM_CREATE, &cc);
	tap_ok(ret == 0 && cc.comm_id, "communicator created (%s)",
	       ret ? strerror(errno) : "ok");

	/* 2. The right job, the wrong secret. */
	fd = connect_rail();
	ret = fd >= 0 ? handshake(fd, &j, wrong) : -1;
	tap_ok(ret == -2, "HELLO with a wrong secret: no WELCOME (%d)", ret);
	close(fd);
	tap_ok(sysfs_rail("handshakes_refused") == refused0 + 2,
	       "wrong secret: counted as refused");

	/* A posted receive with canaries on both sides. */
	area = malloc(3 * UNIT);
	rbuf = area + UNIT;
	payload = malloc(UNIT);
	memset(area, 0x5c, 3 * UNIT);
	for (i = 0; i < UNIT; i++)
		payload[i] = (uint8_t)(i * 7 + 3);
	cmd.comm_id = cc.comm_id;
	cmd.xfer.addr = (uintptr_t)rbuf;
	cmd.xfer.len = UNIT;
	cmd.xfer.tag = 5;
	cmd.xfer.peer = 1;
	nz_queue_prep(q, NZ_CMD_RECV, &cmd, 77, -1);
	nz_queue_submit(q);

	/* 3. Authenticated, then a frame whose offset lies past the end. */
	errors0 = sysfs_rail("errors");
	fd = connect_rail();
	ret = fd >= 0 ? handshake(fd, &j, j.secret) : -1;
	tap_ok(ret == 0, "handshake with the right secret (%d)", ret);
	w.comm_id = cc.comm_id;
	w.timeout_ms = 5000;
	tap_ok(!ioctl(nz_queue_fd(q), NZ_IOC_COMM_WAIT, &w) && w.up == 1,
	       "the module counts the connection up");
	data_frame(hdr, 1, 5, UNIT, 0, UNIT);
	put_be64(hdr + DATA_OFF_OFFSET, 3 * UNIT);	/* outside */
	write_all(fd, hdr, sizeof(hdr));
	write_all(fd, payload, UNIT);
	tap_ok(closed_by_peer(fd), "DATA past the end of the message: closed");
	close(fd);

	/* 4. Authenticated, then a frame breaking the chunking rule. */
	fd = connect_rail();
	ret = fd >= 0 ? handshake(fd, &j, j.secret) : -1;
	data_frame(hdr, 1, 5, UNIT, 0, UNIT);
	put_be64(hdr + DATA_OFF_OFFSET, 100);		/* misaligned */
	write_all(fd, hdr, sizeof(hdr));
	write_all(fd, payload, 100);
	tap_ok(!ret && closed_by_peer(fd), "misaligned DATA offset: closed");
	close(fd);

	/* 5. Authenticated, then a header of garbage. */
	fd = connect_rail();
	ret = fd >= 0 ? handshake(fd, &j, j.secret) : -1;
	write_all(fd, junk, sizeof(junk));
	tap_ok(!ret && closed_by_peer(fd), "garbage frame header: closed");
	close(fd);

	usleep(300 * 1000);
	tap_ok(sysfs_rail("errors") >= errors0 + 3,
	       "each malformed frame counted as a connection error (+%lld)",
	       sysfs_rail("errors") - errors0);
	tap_ok(nz_queue_peek(q, &cqe) == -EAGAIN,
	       "the posted receive was not completed by any of it");
	for (i = 0; i < 3 * UNIT; i++)
		if ((i < UNIT || i >= 2 * UNIT) && area[i] != 0x5c)
			canary_ok = false;
	tap_ok(canary_ok && rbuf[0] == 0x5c,
	       "no byte written into or around the receive buffer");

	/* 6. A well-formed message still lands, and is acknowledged. */
	fd = connect_rail();
	ret = fd >= 0 ? handshake(fd, &j, j.secret) : -1;
	data_frame(hdr, 1, 5, UNIT, 0, UNIT);
	ret = ret || write_all(fd, hdr, sizeof(hdr)) ||
	      write_all(fd, payload, UNIT);
	ret = ret || nz_queue_wait(q, &cqe, 8000);
	tap_ok(!ret && cqe.user_data == 77 && cqe.res == UNIT &&
	       !memcmp(rbuf, payload, UNIT),
	       "then a well-formed message is delivered intact (res %d)",
	       cqe.res);
	canary_ok = true;
	for (i = 0; i < 3 * UNIT; i++)
		if ((i < UNIT || i >= 2 * UNIT) && area[i] != 0x5c)
			canary_ok = false;
	tap_ok(canary_ok, "and nothing around the buffer changed");
	{
		struct nz_frame f;
		uint8_t body[NZ_WIRE_HELLO_LEN];

		/* Heartbeats may come first: the module sends them. */
		for (i = 0; i < 1000; i++) {
			ret = read_frame(fd, &f, body);
			if (ret || f.type != NZ_FRAME_HEARTBEAT)
				break;
		}
		tap_ok(!ret && f.type == NZ_FRAME_ACK && f.ack.msg_id == 1 &&
		       f.ack.len == UNIT, "and acknowledged");
	}
	close(fd);
	ret = ioctl(nz_queue_fd(q), NZ_IOC_COMM_DESTROY, &cc.comm_id);
	tap_ok(ret == 0, "communicator destroyed");
	nz_queue_close(q);
	free(area);
	free(payload);
	tap_plan(tap_n);
	return tap_exit();
}
