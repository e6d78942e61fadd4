/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * libnezha private declarations: the bootstrap (rendezvous of the ranks of a
 * job), environment parsing and the error-detail buffer.
 *
 * Nothing here is exported: libnezha.map exports nz_* only, and these names
 * start with nzi_.  Host unit tests reach them through the static archive.
 */
#ifndef NEZHA_INTERNAL_H
#define NEZHA_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "nezha.h"

/* ---- Error detail (comm.c) ---- */

/*
 * Record a human-readable explanation of the failure about to be returned,
 * for nz_last_error().  Returns err, so that callers can write
 * "return nzi_error(-EINVAL, "...")".
 */
__attribute__((format(printf, 2, 3)))
int nzi_error(int err, const char *fmt, ...);

/* Log a line on stderr when verbose (NZ_COMM_F_VERBOSE or $NEZHA_DEBUG). */
__attribute__((format(printf, 3, 4)))
void nzi_log(bool verbose, int rank, const char *fmt, ...);

/* ---- Job keys (jobkey.c) ---- */

/*
 * Where a job's key comes from (Documentation/libnezha.rst, "The job
 * key"): given (opts->key, $NEZHA_JOB_KEY or $NEZHA_JOB_KEY_FILE), drawn by
 * rank 0 and passed through the framework's store, or none at all (the
 * fixed, public all-zero key: $NEZHA_INSECURE=1, trusted test networks).
 */
enum nzi_key_mode {
	NZI_KEY_GIVEN,
	NZI_KEY_FROM_STORE,
	NZI_KEY_INSECURE,
};

struct nzi_key {
	uint8_t key[NZ_JOB_KEY_LEN];
	enum nzi_key_mode mode;
};

/*
 * The key of a job of o->size ranks (size 1 needs none: mode GIVEN with
 * a random key).  kv: the rendezvous goes through a store, where
 * NZ_COMM_F_KEY_FROM_STORE / $NEZHA_KEY_FROM_STORE=1 are allowed.  Returns
 * 0, or -ENOKEY (no key, naming the variables), -EINVAL (malformed,
 * conflicting), -EPERM (a key file others may read) or a file's -errno.
 */
int nzi_key_resolve(const struct nz_comm_opts *o, bool kv, struct nzi_key *k);

/* Parse exactly 2 * NZ_JOB_KEY_LEN hex digits (surrounding blanks allowed). */
int nzi_key_parse(const char *s, size_t len, uint8_t key[NZ_JOB_KEY_LEN]);

/* A boolean variable: set, non-empty and not "0". */
bool nzi_env_flag(const char *name);

/* Fill buf with len random bytes (getrandom); 0 or -errno. */
int nzi_random(void *buf, size_t len);

/* ---- Bootstrap (boot_msg.c, bootstrap.c, boot_kv.c) ---- */

/* The module's rails (NZ_IOC_RAIL_LIST), names terminated: 0 or -errno. */
struct nz_comm;
int nzi_rail_info_read(int fd, struct nz_rail_info info[NZ_MAX_RAILS], unsigned int *n);
int nzi_rail_info_list(struct nz_comm *c, struct nz_rail_info info[NZ_MAX_RAILS],
		       unsigned int *n);

/* One local rail as the bootstrap sees it: what NZ_IOC_RAIL_LIST gives. */
struct nzi_rail {
	char name[NZ_RAIL_NAME_LEN];	/* NUL terminated, non-empty */
	uint32_t addr;			/* IPv4, network order */
	uint16_t port;			/* network order */
	uint32_t speed_mbps;		/* link speed, 0 = unknown */
};

struct nzi_boot_cfg {
	int rank;			/* 0..size-1 */
	int size;			/* 1..NZ_MAX_RANKS */
	const char *master_addr;	/* host name or address of rank 0 */
	int master_port;		/* 1..65535 */
	int timeout_ms;			/* > 0: the whole rendezvous */
	const struct nzi_rail *rails;	/* this rank's rails (input) */
	unsigned int nrails;		/* 0..NZ_MAX_RAILS */
	unsigned int unit;		/* chunk unit asked for, 0 = chosen */
	/*
	 * The job key, NZ_JOB_KEY_LEN bytes: every message of the rendezvous
	 * is authenticated with it and the job's secret derived from it.
	 * Required above one rank, but with key_from_store (the store
	 * rendezvous only: rank 0 draws it and writes it to the store).
	 */
	const uint8_t *key;
	bool key_from_store;
	bool verbose;
};

#define NZI_NONCE_LEN	32

/* What every rank of a job learns; identical on every rank. */
struct nzi_boot_job {
	uint64_t job_id;
	uint8_t nonce[NZI_NONCE_LEN];	/* drawn by rank 0, sent in the WELCOME */
	uint8_t secret[NZ_SECRET_LEN];	/* derived from key and nonce, never sent */
	unsigned int size;
	unsigned int nrails;		/* rail slots: names on every rank */
	char rails[NZ_MAX_RAILS][NZ_RAIL_NAME_LEN];	/* rank 0's order */
	struct nz_comm_addr *addrs;	/* [rank * nrails + slot], malloc'd */
	uint32_t min_speed_mbps;	/* slowest known link of the slots, 0 = none known */
	unsigned int unit;		/* the job's chunk unit */
	unsigned int rejected;		/* rank 0: connections or HELLOs dropped */
	unsigned int bad_mac;		/* rank 0: of those, HELLOs whose MAC failed;
					 * a rank: answers whose MAC failed */
};

/*
 * Run the rendezvous.  Returns 0 with *job filled in (free it with
 * nzi_boot_job_free()), or a negative errno with nz_last_error() set:
 * -ETIMEDOUT a rank (or rank 0) did not show up in time, -EKEYREJECTED
 * rank 0 refused this rank's MAC (another key), -EEXIST another process
 * with the key already holds this rank, -EINVAL bad configuration or a job
 * of another size, -EPROTO incompatible peer, -ENODEV no rail common to
 * every rank, -EADDRINUSE / -EADDRNOTAVAIL rank 0 cannot listen on
 * MASTER_ADDR:MASTER_PORT, -ECONNRESET rank 0 went away.
 */
int nzi_bootstrap(const struct nzi_boot_cfg *cfg, struct nzi_boot_job *job);
void nzi_boot_job_free(struct nzi_boot_job *job);

/*
 * The slot computation alone: the names present on every rank, in rank 0's
 * order, and the address table.  rails[r] / nrails[r] are rank r's rails.
 * Fills job->nrails, job->rails, job->addrs (malloc'd) and
 * job->min_speed_mbps.
 */
int nzi_boot_slots(struct nzi_boot_job *job, unsigned int size,
		   const struct nzi_rail *const *rails,
		   const unsigned int *nrails);

/*
 * The chunk unit of a job whose ranks asked for none: one chunk takes at
 * most NZI_UNIT_CHUNK_US on the slowest link of the job's rails (a power of
 * two, NZI_UNIT_FLOOR..NZ_DEFAULT_UNIT); NZ_DEFAULT_UNIT when no link
 * reports its speed.  A rail's chunk is what a failover resends and what
 * the survivor's queue holds ahead of it (libnezha.rst, "Chunk unit").
 */
#define NZI_UNIT_CHUNK_US	8000
#define NZI_UNIT_FLOOR		(16 * 1024)
unsigned int nzi_unit_for_speed(uint32_t mbps);

/* A chunk unit the module accepts: a power of two in NZ_MIN_UNIT..NZ_MAX_UNIT. */
static inline bool nzi_unit_ok(unsigned int unit)
{
	return unit >= NZ_MIN_UNIT && unit <= NZ_MAX_UNIT && !(unit & (unit - 1));
}

/*
 * Wire format of the rendezvous (boot_msg.c; all integers big endian;
 * Documentation/libnezha.rst, "The rendezvous").  MAC = HMAC-SHA256 under
 * the job key, each over its own label (domain separation).
 *
 *   header     magic u32, version u16, type u16, payload length u32
 *   CHALLENGE  nonce_s[32]                               rank 0 -> rank
 *   HELLO      rank u32, size u32, nrails u32, unit u32, nonce_c[32],
 *              nrails x rail[28], mac[32]                rank -> rank 0
 *              mac = MAC("hello" | nonce_s | header | payload up to mac)
 *   WELCOME    job_id u64, job_nonce[32], size u32, nrails u32, unit u32,
 *              ntags u32, names[nrails][16], addrs[size][nrails][8],
 *              tags[ntags][32]                           rank 0 -> rank
 *              tag_r = MAC("welcome" | r | nonce_c of r | nonce_s |
 *                          SHA-256(payload up to the tags))
 *              ntags: 1 (the recipient's, over TCP) or size - 1 (ranks
 *              1..size-1 in order, through a store)
 *   ABORT      errno u32, reason text (not authenticated: it can only stop
 *              a rank, as cutting its connection would)
 *
 * The job's secret (NZ_IOC_COMM_CREATE) = MAC("secret" | job_id |
 * job_nonce): each rank derives it, none sends it.
 */
#define NZI_BOOT_MAGIC		0x4e5a4253u	/* "NZBS" */
#define NZI_BOOT_VERSION	3
#define NZI_BOOT_HDR_LEN	12	/* magic u32, version u16, type u16, len u32 */
#define NZI_BOOT_RAIL_LEN	28	/* name[16], addr be32, port be16, rsvd u16,
					 * speed_mbps be32 */
#define NZI_MAC_LEN		32
#define NZI_HELLO_FIXED		(16 + NZI_NONCE_LEN)
#define NZI_BOOT_HELLO_MAX	(NZI_BOOT_HDR_LEN + NZI_HELLO_FIXED + \
				 NZ_MAX_RAILS * NZI_BOOT_RAIL_LEN + NZI_MAC_LEN)
#define NZI_BOOT_CHALLENGE_LEN	(NZI_BOOT_HDR_LEN + NZI_NONCE_LEN)
#define NZI_WELCOME_FIXED	(8 + NZI_NONCE_LEN + 16)
#define NZI_ADDR_LEN		8
/* The longest WELCOME payload with one tag (what a rank reads over TCP). */
#define NZI_WELCOME_MAX		(NZI_WELCOME_FIXED + NZ_MAX_RAILS * NZ_RAIL_NAME_LEN + \
				 (size_t)NZ_MAX_RANKS * NZ_MAX_RAILS * NZI_ADDR_LEN)

enum nzi_boot_type {
	NZI_BOOT_HELLO	   = 1,	/* rank -> rank 0: rank, size, rails, unit */
	NZI_BOOT_WELCOME   = 2,	/* rank 0 -> rank: job id and nonce, unit, table */
	NZI_BOOT_ABORT	   = 3,	/* rank 0 -> rank: errno and reason */
	NZI_BOOT_CHALLENGE = 4,	/* rank 0 -> rank: the nonce its HELLO must MAC */
};

/* A CHALLENGE into buf (NZI_BOOT_CHALLENGE_LEN bytes); returns its length. */
size_t nzi_boot_encode_challenge(uint8_t *buf, const uint8_t *nonce_s);
/* Decode a whole CHALLENGE: 0 or -EPROTO. */
int nzi_boot_parse_challenge(const uint8_t *buf, size_t len, uint8_t *nonce_s);

/* The parts of a HELLO that are not in the configuration. */
struct nzi_hello_auth {
	const uint8_t *key;		/* NZ_JOB_KEY_LEN bytes */
	const uint8_t *nonce_s;		/* rank 0's challenge */
	const uint8_t *nonce_c;		/* this rank's fresh nonce */
};

/* Encode a HELLO into buf (at least NZI_BOOT_HELLO_MAX); returns its length. */
size_t nzi_boot_encode_hello(uint8_t *buf, const struct nzi_hello_auth *auth,
			     int rank, int size, const struct nzi_rail *rails,
			     unsigned int nrails, unsigned int unit);

/* A HELLO as rank 0 reads it. */
struct nzi_boot_hello {
	int rank;
	unsigned int unit;
	unsigned int nrails;
	struct nzi_rail rails[NZ_MAX_RAILS];
	uint8_t nonce_c[NZI_NONCE_LEN];
};

/*
 * Decode a whole HELLO message (header included) of a job of size ranks,
 * its MAC checked under key with rank 0's challenge nonce_s before any
 * field is believed: -EPROTO malformed, -EKEYREJECTED the MAC fails (a
 * stranger, another key, a replay), -EINVAL a rank of this key but of
 * another job size, out of range, or with a bad unit.
 */
int nzi_boot_parse_hello(const uint8_t *buf, size_t len, int size,
			 const uint8_t *key, const uint8_t *nonce_s,
			 struct nzi_boot_hello *h);

/*
 * A WELCOME (header included) for job with room for ntags tags (zero),
 * malloc'd; NULL without memory.  *hash gets what the tags cover.
 */
uint8_t *nzi_boot_encode_welcome(const struct nzi_boot_job *job, unsigned int ntags,
				 size_t *len, uint8_t *hash);
/* Rank r's tag of a WELCOME whose body hashes to hash. */
void nzi_boot_welcome_tag(const uint8_t *key, const uint8_t *hash,
			  const uint8_t *nonce_s, int rank, const uint8_t *nonce_c,
			  uint8_t *tag);
/* An ABORT (header included) into buf[0..cap); returns its length. */
size_t nzi_boot_encode_abort(uint8_t *buf, size_t cap, int err, const char *reason);
/*
 * Rank 0's answer to this rank's HELLO (auth: the key and both nonces):
 * a WELCOME whose tag checks (0, *job filled, its secret derived), an
 * ABORT (its errno), or -EKEYREJECTED for a WELCOME whose tag fails (not
 * rank 0 of this key, or not an answer to this HELLO).
 */
int nzi_boot_parse_answer(const struct nzi_boot_cfg *cfg,
			  const struct nzi_hello_auth *auth, const uint8_t *buf,
			  size_t len, struct nzi_boot_job *job);
/* Draw a fresh job id (never 0) and job nonce. */
int nzi_boot_identity(struct nzi_boot_job *job);
/* The job's secret from the key, job id and job nonce (into job->secret). */
void nzi_boot_derive_secret(const uint8_t *key, struct nzi_boot_job *job);

/*
 * The rendezvous through a key-value store the framework provides
 * (boot_kv.c): the same job as nzi_bootstrap() forms, with no socket of
 * its own.  cfg->master_addr and master_port are ignored.
 */
int nzi_bootstrap_kv(const struct nzi_boot_cfg *cfg, const struct nz_kv *kv,
		     struct nzi_boot_job *job);

/* ---- Environment (bootstrap.c) ---- */

struct nzi_env {
	int rank;
	int size;
	char master_addr[256];		/* "" when unset */
	int master_port;		/* 0 when unset */
	int timeout_ms;			/* 0 when $NEZHA_TIMEOUT_MS is unset */
};

/*
 * Read RANK/WORLD_SIZE (torchrun) or OMPI_COMM_WORLD_RANK/_SIZE (Open MPI),
 * MASTER_ADDR and MASTER_PORT (required when the size is above 1) and
 * NEZHA_TIMEOUT_MS (optional).  Returns 0 or -EINVAL with nz_last_error()
 * naming the missing or malformed variable.
 */
int nzi_env_parse(struct nzi_env *env);

/* Strict decimal parse of [min, max]; returns 0 or -EINVAL. */
int nzi_parse_int(const char *s, long min, long max, long *out);

/* Monotonic clock in milliseconds, microseconds. */
int64_t nzi_now_ms(void);
int64_t nzi_now_us(void);

/* ---- Communicator internals (comm.c, p2p.c) ---- */

#include <sys/uio.h>

enum nzi_req_state {
	NZI_REQ_FREE,		/* on the free list */
	NZI_REQ_INFLIGHT,	/* submitted, no completion yet */
	NZI_REQ_DONE,		/* completed, not yet waited for */
};

/*
 * A request lives in comm->reqs[idx] from its first use to the comm's
 * destruction and is recycled through the free list.  The completion's
 * user_data is gen << 32 | idx: a completion is only applied to the request
 * it was submitted for, never to a recycled one.
 */
struct nz_request {
	struct nz_comm *comm;
	uint32_t idx;
	uint32_t gen;		/* bumped on every reuse */
	uint8_t state;		/* enum nzi_req_state */
	bool orphan;		/* nobody waits: free it on completion */
	uint32_t op;		/* NZ_CMD_SEND or NZ_CMD_RECV */
	int peer;
	uint64_t tag;
	size_t len;
	int32_t res;		/* the CQE's result once done */
	struct nz_request *next_free;
};

struct nz_comm {
	struct nz_queue *q;
	int rank, size;
	bool has_kcomm;		/* a module communicator exists */
	uint32_t comm_id;
	uint64_t features;	/* NZ_FEAT_* of the module */
	uint64_t job_id;
	unsigned int unit;		/* the job's chunk unit, bytes */
	unsigned int nrails;
	char rails[NZ_MAX_RAILS][NZ_RAIL_NAME_LEN];
	bool verbose;
	int wait_timeout_ms;	/* <= 0: block */
	bool in_coll;		/* inside the collectives' own nz_wait() */

	struct nz_request **reqs;	/* every request ever allocated */
	unsigned int nreqs, reqs_cap;
	struct nz_request *free_reqs;
	unsigned int inflight;
	unsigned long stray;	/* completions that matched no request */
	unsigned long reaped;	/* completions taken off the ring */
	unsigned long reaped_seen; /* reaped, when wait_any last returned */

	struct iovec bufs[NZ_COMM_MAX_BUFFERS];	/* iov_base NULL: hole */
	unsigned int nbufs;	/* highest used index + 1 */

	struct nzi_coll *coll;	/* collectives (collective.c); NULL until the
				 * first one, freed by nzi_coll_release() */
};

/* Free the collectives' state of a communicator (collective.c). */
void nzi_coll_release(struct nz_comm *comm);

/* Reap every completion already posted (p2p.c); returns how many. */
int nzi_comm_reap(struct nz_comm *comm);
/*
 * Reap at least one completion, waiting at most timeout_ms (< 0: no
 * limit) for it (p2p.c): 0, -ETIME, -EINTR or another negative errno.
 */
int nzi_comm_wait_any(struct nz_comm *comm, int timeout_ms);
/* The registered buffer index holding buf[0..len), or -1 (p2p.c). */
int nzi_fixed_index(const struct nz_comm *comm, const void *buf, size_t len);
/* Release every request (comm destruction, p2p.c). */
void nzi_comm_free_requests(struct nz_comm *comm);


/*
 * Build a communicator around an already open queue without bootstrap or
 * ioctls: p2p.c's machinery can then be exercised on any file (host tests
 * point the queue at /dev/null).  Takes ownership of q.
 */
int nzi_comm_wrap(struct nz_comm **out, struct nz_queue *q, int rank,
		  int size, uint32_t comm_id, uint64_t features);
struct nz_queue *nzi_comm_queue(struct nz_comm *comm);
/* Completions the comm reaped that matched no request in flight. */
unsigned long nzi_comm_stray(const struct nz_comm *comm);

#endif /* NEZHA_INTERNAL_H */
