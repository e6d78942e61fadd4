/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Communicators, peers, connections and messages.
 *
 * A communicator (one per NZ_IOC_COMM_CREATE) is a job's view of its ranks.
 * For every other rank it has a peer, and for every (peer, rail slot) a
 * connection whose transport socket or QP comes and goes (connect, fail,
 * reconnect) while the connection object lives as long as the communicator.
 *
 * Messages: a send is cut into chunks that any connection of the peer may
 * carry; the sender keeps every chunk until its ACK arrives, so a chunk of a
 * connection that dies is sent again on another one.  A receive is matched
 * to an incoming message by (tag, tag_seq); a message that arrives before
 * its receive is held in a kernel buffer within a budget.
 *
 * Locking: peer->lock (a spinlock, taken with _bh) protects the peer's
 * message lists, tag table, reassembly state and each connection's chunk
 * list.  conn->io_lock (a mutex) serialises a connection's transport work
 * with attaching and detaching its socket.  comm->lock (a mutex) protects
 * the communicator's lifetime state.  Order: io_lock, then peer->lock.
 */
#ifndef _NZ_COMM_H
#define _NZ_COMM_H

#include <linux/kref.h>
#include <linux/mutex.h>
#include <linux/skbuff.h>
#include <linux/uio.h>
#include <linux/wait.h>
#include <linux/workqueue.h>
#include <uapi/linux/nezha_netlink.h>
#include "nezha.h"
#include "rail.h"
#include "wire.h"
#include "reasm.h"
#include "sched_est.h"
#include "health_learn.h"

struct crypto_shash;
struct nz_comm;
struct nz_peer;

/* A user buffer, pinned (or a registered io_uring buffer), as bvecs. */
struct nz_ubuf {
	u64 len;
	struct bio_vec *bvec;		/* NULL for fixed buffers */
	struct page **pages;
	unsigned int npages;
	unsigned int first_off;		/* offset in the first page */
	struct iov_iter fixed;		/* registered buffer, whole range */
	bool is_fixed;
	bool fixed_pages;		/* fixed: segments after the first are pages */
	bool dirty;			/* written: mark pages dirty on unpin */
	/* Pages charged to mm's pinned_vm (RLIMIT_MEMLOCK); mm is grabbed. */
	struct mm_struct *mm;
	unsigned long locked;
};

/* What a command holds while it is pending. */
struct nz_xreq {
	struct nz_req base;		/* chardev's pending-command record */
	unsigned long deadline;		/* jiffies */
	unsigned long timeout;		/* jiffies without progress allowed */
};

enum nz_msg_dir { NZ_MSG_TX, NZ_MSG_RX };

struct nz_msg {
	struct list_head node;		/* peer tx_msgs / rx_msgs / posted */
	struct kref ref;		/* lists, chunks in flight, writers */
	struct nz_peer *peer;
	enum nz_msg_dir dir;
	u64 msg_id;			/* 0 until known (posted receive) */
	u64 tag;
	u64 tag_seq;
	u64 total;			/* message length */
	u64 len;			/* buffer length (receive) */
	struct nz_ubuf ubuf;		/* the user's buffer, if any */
	struct nz_xreq *xreq;		/* command to complete, or NULL */
	s32 result;			/* completion result, once done */
	bool done;			/* result decided, off every list */

	/* tx */
	u64 next_off;			/* first byte not yet assigned */
	u32 outstanding;		/* chunks assigned, not acknowledged */
	bool assigned_all;
	u8 rail_mask;			/* slots the scheduler chose (sched.c) */
	u64 slot_bytes[NZ_MAX_RAILS];	/* bytes assigned to each slot */

	/* rx */
	struct nz_reasm reasm;
	u64 *map;
	void *kbuf;			/* unexpected: held here until complete */
	/*
	 * Copies touching the user buffer right now: a transport writing a
	 * received payload into it (RX) or a chunk of it onto the wire (TX,
	 * the chunk is busy).  The CQE waits for the last: after it the
	 * buffer is never touched again.
	 */
	u32 writers;
	/*
	 * tx, zero-copy (TCP): chunks written straight from the user's pages
	 * leave them referenced by the socket until TCP no longer needs them
	 * (acknowledged, or purged).  While zc_armed, that counts as one
	 * writer: the CQE waits for it, as it waits for a copy (tx.c).
	 */
	struct ubuf_info zc;
	struct work_struct zc_work;
	bool zc_armed;
	bool arrived;			/* msg_id known: first frame seen */
	bool complete;			/* every byte arrived */
	bool discard;			/* receive failed: drain the rest */
	bool cqe_posted;		/* nz_msg_complete() ran or will */
	bool overdue_said;		/* logged as kept past its deadline */
	u64 budget;			/* unexpected bytes it holds */
	/*
	 * rx: a message that will never arrive (its sender withdrew it, or
	 * we refused it): kept only so that the receive claiming it fails
	 * with this error instead of waiting, and the next one gets the
	 * next message.
	 */
	s32 gone_err;
	struct nz_abort *abort;		/* tx: its ABORT, should it fail */
};

/*
 * A send that failed, announced to its receiver (an ABORT frame on every
 * path, until one is answered) so that the receiver drops what it holds
 * of it and its duplicate window moves past it.  Until then its msg_id
 * counts as in flight (sched.c keeps the window behind it).
 */
struct nz_abort {
	struct list_head node;		/* peer->aborts or peer->refusals */
	u64 msg_id, tag, tag_seq;
	u32 reason;			/* positive errno */
	u32 sent;			/* slots it was written on */
};

/* A chunk assigned to a connection, kept until acknowledged. */
struct nz_chunk {
	struct list_head node;		/* conn->chunks or peer->resend */
	struct nz_msg *msg;		/* holds a reference */
	u64 offset;
	u32 len;
	bool sent;			/* fully written to the transport */
	bool busy;			/* a transport is writing it now */
	bool acked;			/* acknowledged while busy: free at done */
	bool first;			/* assigned to an idle connection */
	u64 t_assign;			/* ktime ns it was assigned */
};

enum nz_conn_state {
	NZ_CONN_IDLE,			/* no socket; waiting or retrying */
	NZ_CONN_CONNECTING,
	NZ_CONN_UP,
	NZ_CONN_DEAD,			/* communicator going away */
};

/* A control frame waiting to be sent (ACK, heartbeat, close). */
struct nz_ctrl {
	struct list_head node;
	struct nz_frame f;
};

struct nz_conn {
	struct nz_peer *peer;
	u32 slot;			/* rail slot in the communicator */
	struct nz_rail *rail;
	enum nz_conn_state state;	/* under peer->lock */
	bool counted;			/* in conns_up and the rail's conns */
	bool established;		/* came up once: in conns_established */
	bool client;			/* we connect (our rank > peer's) */
	struct mutex io_lock;
	void *tp;			/* transport state (socket, parser) */
	struct list_head chunks;	/* struct nz_chunk in flight here */
	u64 inflight_bytes;		/* assigned, not acknowledged */
	/*
	 * Bytes the transport was handed and its peer's transport has not
	 * acknowledged yet (TCP: write_seq - snd_una), as the transport last
	 * saw them; U64_MAX when it does not tell.  The window counts the
	 * smaller of this and inflight_bytes (sched.c).
	 */
	u64 tp_held;
	struct list_head ctrl;		/* struct nz_ctrl to send */
	u32 nctrl;
	struct delayed_work connect_work;	/* client: (re)connect */
	struct mutex dial_lock;		/* dial: a connect <-> its abort */
	void *dial;			/* nz_conn_dial_begin(), conn.c */
	unsigned long redial;		/* bit 0: the dial was aborted to dial anew */
	unsigned long redial_last;	/* jiffies the peer's last ask was taken */
	struct work_struct fail_work;	/* transport reported an error */
	void *fail_tp;			/* the transport state that failed */
	int fail_err;
	unsigned int backoff_ms;
	spinlock_t kick_lock;		/* tp_dead and queueing its work */
	bool tp_dead;
	atomic64_t bytes_tx, bytes_rx, chunks_tx, chunks_rx;
	atomic64_t errors;		/* transport closed on an error */
	struct kobject *kobj;		/* sysfs; under io_lock */
	unsigned int rx_marks;		/* bumped by the transport on arrival */
	unsigned long rx_last;		/* jiffies of that arrival */
	unsigned long tx_last;		/* jiffies a frame was last sent */
	unsigned int hb_marks;		/* rx_marks at the last heartbeat */
	unsigned int silent;		/* heartbeat periods without arrival */
	unsigned int owed_last;		/* periods owed at the last run */
	unsigned int hb_sent;		/* heartbeats queued, under peer->lock */
	unsigned long quiet_since;	/* jiffies of the last arrival seen */
	unsigned long owed_since;	/* jiffies: last run it owed nothing */
	unsigned long probe_since;	/* jiffies: last run nothing was pending */
	unsigned long probe_last;	/* jiffies the last probe was queued */
	bool suspect;			/* silent too long: takes no chunks */
	u64 suspect_ns;			/* ktime_get_ns() it became suspect */
	unsigned long suspect_since;	/* the same, in jiffies */
	u64 echo_ns;			/* sent at: newest heartbeat echoed */
	bool doubt;			/* silent a while, chunks unacknowledged */
	bool rx_blocked;		/* transport holds back (budget full) */
	unsigned long blocked_since;	/* jiffies rx_blocked was last set */
	unsigned long up_since;		/* jiffies it came up */
	struct nz_est est;		/* sched.c, under peer->lock */
	struct nz_late peer_late;	/* its queue's delay: under peer->lock */
};

/* Tag sequence numbers of one (peer, tag). */
struct nz_tagseq {
	struct hlist_node node;
	u64 tag;
	u64 tx_next;			/* next tag_seq we send */
	u64 rx_next;			/* next tag_seq a receive claims */
};

/* Longest timeout a communicator or a command may ask for: an hour. */
#define NZ_MAX_TIMEOUT_MS	(3600U * 1000)

#define NZ_TAG_HASH_BITS 6

struct nz_peer {
	struct nz_comm *comm;
	u32 rank;
	spinlock_t lock;
	struct nz_conn conns[NZ_MAX_RAILS];
	u32 conns_up;
	u32 conns_established;		/* connections that came up once */
	bool left;			/* closed the job in order, or restarted */
	u64 incarnation;		/* of its communicator; 0 before any */
	unsigned long down_since;	/* jiffies since no conn is up; 0 up */
	unsigned long last_progress;	/* jiffies of the last ACK or new data */
	/* health.c: silence tolerated on top of the suspect time, learned */
	struct nz_learn learn;
	struct hlist_head tags[1 << NZ_TAG_HASH_BITS];
	u32 ntags;			/* entries in tags: max_tags */
	/* tx */
	u64 next_msg_id;
	struct list_head tx_msgs;	/* sends, in submission order */
	struct list_head resend;	/* chunks of dead connections */
	u32 tx_inflight_msgs;
	atomic_t zc_held;		/* sends whose pages TCP still holds */
	struct list_head aborts;	/* struct nz_abort not yet answered */
	/* rx */
	struct nz_seqwin rxwin;
	struct list_head refusals;	/* struct nz_abort: messages refused */
	struct list_head rx_msgs;	/* incoming, by arrival */
	struct list_head posted;	/* receives not matched yet */
	u64 unexpected_bytes;
	u32 unexpected_msgs;		/* messages charged to that budget */
};

struct nz_comm {
	struct list_head node;		/* nz_comms, for accept lookups */
	struct list_head node_file;	/* its file's comms */
	struct kref ref;
	struct nz_file *file;
	u32 id;
	u64 job_id;
	u64 incarnation;		/* random, != 0: this instance */
	u64 serial;			/* host-wide, for sysfs: not the job id */
	kuid_t owner;			/* the creator's euid */
	struct mem_cgroup *memcg;	/* the creator's, charged (held) */
	u8 secret[NZ_SECRET_LEN];
	struct crypto_shash *hmac;
	u32 rank, size, nrails, unit, timeout_ms;
	struct nz_wire_limits lim;
	struct nz_rail *rails[NZ_MAX_RAILS];
	struct nz_comm_addr *addrs;	/* size * nrails */
	struct nz_peer **peers;		/* size; NULL for ourselves */
	bool dead;
	wait_queue_head_t waitq;	/* connection count changes */
	struct delayed_work scan_work;	/* health.c: timeouts */
	struct hrtimer hb_timer;	/* health.c: paces hb_work */
	struct work_struct hb_work;	/* health.c: heartbeats */
	unsigned long hb_last;		/* jiffies of the last heartbeat run */
};

/* Health parameters (nezhactl health), read with READ_ONCE. */
struct nz_health_cfg {
	u32 hb_interval_ms;
	u32 hb_misses;
	u32 grace_ms;
};

extern struct nz_health_cfg nz_health;

/* A path event, for the netlink multicast group and the tracepoint. */
struct nz_event {
	u32 type;			/* enum nz_event_type */
	struct nz_rail *rail;
	u64 job;
	u32 rank, peer;
	int err;
	u32 resent;
};

/* comm.c */
struct nz_comm *nz_file_comm_get(struct nz_file *f, u32 id);
int nz_comm_ioctl_create(struct nz_file *f, void __user *arg);
int nz_comm_ioctl_wait(struct nz_file *f, void __user *arg);
int nz_comm_ioctl_destroy(struct nz_file *f, void __user *arg);
void nz_comm_file_release(struct nz_file *f);
struct nz_comm *nz_comm_find_hello(struct nz_rail *rail,
				   const struct nz_frame_hello *h,
				   const u8 *nonce_s, struct nz_conn **connp,
				   u32 *reason);		/* referenced */
int nz_comm_job_fits(u64 job_id, u32 rank, struct nz_rail *rail, u32 slot,
		     u32 unit, u32 nrails);
void nz_comm_put(struct nz_comm *comm);
int nz_comm_mac(struct nz_comm *comm, const u8 *in, unsigned int len,
		u8 *out);

/* conn.c, for comm.c: a connection's lifetime. */
enum nz_rail_change { NZ_RAIL_REMOVED, NZ_RAIL_CHANGED, NZ_RAIL_LINK_DOWN };
void nz_conn_init(struct nz_peer *p, u32 slot);
void nz_conn_stop_dial(struct nz_conn *conn);
void nz_peer_redial(struct nz_peer *p, u64 slots);
/*
 * heartbeat.c: the peer said its answers on conn wait ms in its queue.
 * Under peer->lock.
 */
void nz_conn_peer_late(struct nz_conn *conn, unsigned int ms);
void nz_conn_shutdown(struct nz_conn *conn);
void nz_conn_rail_update(struct nz_conn *conn, enum nz_rail_change how);
void nz_peer_kick_all(struct nz_peer *p);
/* handshake.c: the identity a handshake proves. */
int nz_conn_incarnation(struct nz_conn *conn, u64 incarnation);

/* Transport -> comm: connection events. */
int nz_conn_attach(struct nz_conn *conn, void *tp);	/* under io_lock */
int nz_conn_dial_begin(struct nz_conn *conn, void *dial);
int nz_conn_dial_end(struct nz_conn *conn);
void nz_conn_detach(struct nz_conn *conn, int err);	/* under io_lock */
void nz_conn_fail(struct nz_conn *conn, void *tp, int err); /* any context */
void nz_conn_fail_live(struct nz_conn *conn, int err);
struct nz_conn *nz_comm_conn(struct nz_comm *comm, u32 rank, u32 slot);
void nz_conn_kick(struct nz_conn *conn);

/* Transport -> comm: receive path. */
struct nz_rx_dest {
	struct nz_msg *msg;		/* NULL: duplicate of a finished one */
	bool drain;			/* read the payload and drop it */
	struct kvec kv;			/* backs iter for kernel buffers */
	struct iov_iter iter;		/* where the payload goes */
	struct nz_frame f;
};
int nz_conn_rx_data(struct nz_conn *conn, const struct nz_frame *f,
		    struct nz_rx_dest *d);
int nz_conn_rx_data_done(struct nz_conn *conn, struct nz_rx_dest *d);
int nz_conn_rx_data_end(struct nz_conn *conn, struct nz_rx_dest *d);
void nz_conn_rx_data_abort(struct nz_conn *conn, struct nz_rx_dest *d);
bool nz_conn_rx_data_release(struct nz_conn *conn, struct nz_rx_dest *d);
void nz_peer_release_writers(struct nz_peer *p);
int nz_conn_rx_ctrl(struct nz_conn *conn, const struct nz_frame *f);
void nz_peer_confirm_done(struct nz_peer *p);	/* leaving: DONE */
bool nz_conn_done_frame(struct nz_conn *conn, struct nz_frame *f);

/* Transport -> comm: transmit path. */
struct nz_tx_item {
	struct nz_frame f;
	struct nz_chunk *chunk;		/* DATA only */
	struct iov_iter iter;		/* DATA payload */
	/*
	 * Zero-copy: the transport asks for it from zc_min bytes of payload
	 * on (0: never); nz_conn_tx_next() sets zc (or NULL) for the
	 * transport to pass to TCP (msg_ubuf).  The reference it holds is
	 * dropped by nz_conn_tx_done() or nz_conn_tx_abort().
	 */
	u32 zc_min;
	struct ubuf_info *zc;
};
int nz_conn_tx_next(struct nz_conn *conn, struct nz_tx_item *it);
int nz_conn_tx_next_ctrl(struct nz_conn *conn, struct nz_frame *f);
void nz_conn_tx_done(struct nz_conn *conn, struct nz_tx_item *it);
void nz_conn_tx_abort(struct nz_conn *conn, struct nz_tx_item *it);

/* sysfs.c */
int nz_sysfs_conn_add(struct nz_conn *conn);
const char *nz_conn_state_name(enum nz_conn_state state);
void nz_sysfs_conn_del(struct nz_conn *conn);

/* health.c: every timer of a communicator. */
void nz_health_comm_init(struct nz_comm *comm);
void nz_health_comm_start(struct nz_comm *comm);
void nz_health_comm_stop(struct nz_comm *comm);
void nz_health_conn_retry(struct nz_conn *conn);
void nz_health_conn_connect_in(struct nz_conn *conn, unsigned int ms);
void nz_health_conn_up(struct nz_conn *conn);
bool nz_health_doubt(unsigned int silent);
bool nz_health_suspect(unsigned int silent);
void nz_health_peer_init(struct nz_peer *p);
void nz_health_near_miss(struct nz_conn *conn, unsigned long now,
			 unsigned int owed_ms);
unsigned int nz_health_suspect_extra_ms(const struct nz_peer *p,
					unsigned long now);
void nz_health_readmitted(struct nz_conn *conn, unsigned long now);
bool nz_health_dead(unsigned int silent);
bool nz_health_peer_gone(unsigned int silent);
unsigned long nz_health_wait_period(void);
void nz_health_event(struct nz_conn *conn, u32 type, int err, u32 resent);
int nz_health_set(const u32 *interval_ms, const u32 *misses,
		  const u32 *grace_ms);
int nz_health_init(void);
void nz_health_exit(void);
u64 nz_health_now_ms(void);

/* heartbeat.c, for health.c */
void nz_conn_heartbeat(struct nz_conn *conn, unsigned long stall);
void nz_peer_no_rail(struct nz_peer *p);
/* comm.c, for health.c */
void nz_comm_rail_link(struct nz_rail *rail, bool up);

/* netlink.c */
void nz_netlink_event(const struct nz_event *ev);

/* msg.c */
int nz_cmd_send(struct nz_file *f, struct io_uring_cmd *cmd,
		const struct nz_sqe *sqe, unsigned int issue_flags);
int nz_cancel_recvs(struct nz_file *f, const struct nz_sqe *sqe);
int nz_cmd_recv(struct nz_file *f, struct io_uring_cmd *cmd,
		const struct nz_sqe *sqe, unsigned int issue_flags);
void nz_peer_fail_all(struct nz_peer *p, s32 err);
void nz_peer_scan(struct nz_peer *p);
u32 nz_conn_requeue_chunks(struct nz_conn *conn, bool all);
u32 nz_peer_fail_pending(struct nz_peer *p, s32 err);
void nz_conn_drop_chunks(struct nz_conn *conn);
void nz_conn_free_ctrl(struct nz_conn *conn);
void nz_peer_free_tags(struct nz_peer *p);
void nz_peer_free_aborts(struct nz_peer *p);
bool nz_conn_refuse_due(const struct nz_conn *conn);	/* rx.c */
u64 nz_peer_oldest_abort(const struct nz_peer *p);
int nz_msg_init(void);
void nz_msg_exit(void);
void nz_tx_zc_exit(void);		/* after the last socket: tx.c */

/*
 * sched.c: under peer->lock; spare is used or left for the caller, and
 * ERR_PTR(-ENOMEM) asks for one when a new chunk is due and *spare is NULL.
 */
struct nz_chunk *nz_sched_next_chunk(struct nz_conn *conn,
				     struct nz_chunk **spare);
u64 nz_sched_window(const struct nz_conn *conn);
void nz_sched_msg_new(struct nz_peer *p, struct nz_msg *m);
void nz_sched_acked(struct nz_conn *conn, const struct nz_chunk *ch);
/* An echo of our heartbeat sent at ts_ns came back.  Under peer->lock. */
void nz_sched_rtt(struct nz_conn *conn, u64 ts_ns, u64 flags);
void nz_sched_conn_up(struct nz_conn *conn);
void nz_sched_conn_fault(struct nz_conn *conn);
/* sched.c: not under peer->lock (health.c, every heartbeat period). */
void nz_sched_tick(struct nz_conn *conn);
const char *nz_sched_state_name(u8 state);

/*
 * Transports, on every arrival (any context): the path is alive now.  The
 * time goes first, so a heartbeat run that sees the new mark never reads
 * an older arrival time.
 */
static inline void nz_conn_rx_mark(struct nz_conn *conn)
{
	WRITE_ONCE(conn->rx_last, jiffies);
	smp_wmb();	/* pairs with nz_conn_heartbeat()'s smp_rmb() */
	WRITE_ONCE(conn->rx_marks, conn->rx_marks + 1);
}

#endif /* _NZ_COMM_H */
