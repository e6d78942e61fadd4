// SPDX-License-Identifier: GPL-2.0
/*
 * Communicators: creation from NZ_IOC_COMM_CREATE, the list in which
 * accepts find them, rails changing under them, and teardown.  Their
 * connections are in conn.c, what each heartbeat period does to a path in
 * heartbeat.c, messages in msg.c.
 */
#include <linux/module.h>
#include <linux/error-injection.h>
#include <linux/memcontrol.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <crypto/algapi.h>
#include <crypto/hash.h>
#include <net/net_namespace.h>
#include "comm.h"
#include "transport.h"

/* Largest message: the wire carries 64-bit lengths; keep it sane. */
#define NZ_MAX_MSG		(1ULL << 40)
/* How long leaving waits for the acknowledgements it owes to go out. */
#define NZ_FLUSH_MS		500

static LIST_HEAD(nz_comms);		/* every communicator, for accepts */
static DEFINE_MUTEX(nz_comms_lock);

static void nz_comm_release(struct kref *ref)
{
	struct nz_comm *comm = container_of(ref, struct nz_comm, ref);
	u32 r, s;

	/* A create that failed early has no peer array yet. */
	for (r = 0; comm->peers && r < comm->size; r++) {
		if (!comm->peers[r])
			continue;
		nz_peer_free_tags(comm->peers[r]);
		nz_peer_free_aborts(comm->peers[r]);
		kfree(comm->peers[r]);
	}
	kfree(comm->peers);
	kvfree(comm->addrs);
	for (s = 0; s < comm->nrails; s++)
		if (comm->rails[s])
			nz_rail_put(comm->rails[s]);
	if (!IS_ERR_OR_NULL(comm->hmac))
		crypto_free_shash(comm->hmac);
	mem_cgroup_put(comm->memcg);
	memzero_explicit(comm->secret, sizeof(comm->secret));
	kfree(comm);
	atomic_dec(&nz_stats.comms);
}

void nz_comm_put(struct nz_comm *comm)
{
	kref_put(&comm->ref, nz_comm_release);
}

/* Whether comm serves slot on rail with this unit and number of rails. */
static bool nz_comm_fits(const struct nz_comm *comm, const struct nz_rail *rail,
			 u32 slot, u32 unit, u32 nrails)
{
	return comm->unit == unit && comm->nrails == nrails &&
	       slot < comm->nrails && comm->rails[slot] == rail;
}

/*
 * The communicator a HELLO that came on rail is for.  Several may carry
 * its job id and rank -- one per local user (nz_comm_publish()), so that
 * nobody can squat another user's slot -- and the one whose key made the
 * HELLO's MAC is it.  NULL if none: *reason is NZ_CLOSE_IDENTITY if no
 * communicator of that job, rank and shape is here (yet), NZ_CLOSE_AUTH
 * if one is but none of them has the key, NZ_CLOSE_FRAME_MAC if the HELLO
 * asks for a per-frame MAC and the rail has none, or the reverse.
 */
struct nz_comm *nz_comm_find_hello(struct nz_rail *rail,
				   const struct nz_frame_hello *h,
				   const u8 *nonce_s, struct nz_conn **connp,
				   u32 *reason)
{
	u8 in[NZ_WIRE_HELLO_MAC_MAX], mac[NZ_WIRE_MAC_LEN];
	struct nz_comm *comm, *found = NULL;
	struct nz_conn *conn;
	unsigned int len;

	*reason = NZ_CLOSE_IDENTITY;
	len = nz_wire_hello_mac_input(h, nonce_s, in);
	mutex_lock(&nz_comms_lock);
	list_for_each_entry(comm, &nz_comms, node) {
		if (comm->job_id != h->job_id || comm->rank != h->dst_rank)
			continue;
		conn = nz_comm_conn(comm, h->src_rank, h->rail);
		if (!conn || conn->client ||
		    !nz_comm_fits(comm, rail, h->rail, h->unit, h->nrails))
			continue;
		*reason = NZ_CLOSE_AUTH;
		if (nz_comm_mac(comm, in, len, mac) ||
		    crypto_memneq(mac, h->mac, sizeof(mac)))
			continue;
		kref_get(&comm->ref);
		*connp = conn;
		found = comm;
		break;
	}
	mutex_unlock(&nz_comms_lock);
	memzero_explicit(mac, sizeof(mac));
	/* Both ends of a rail put a MAC on every frame, or neither. */
	if (found && !(h->flags & NZ_HELLO_F_FRAME_MAC) != !rail->frame_mac) {
		*reason = NZ_CLOSE_FRAME_MAC;
		nz_comm_put(found);
		return NULL;
	}
	if (found && nz_conn_incarnation(*connp, h->incarnation)) {
		*reason = NZ_CLOSE_RESTARTED;
		nz_comm_put(found);
		found = NULL;
	}
	return found;
}

/*
 * Before any key is checked (RDMA sizes its buffers by it): 1 if a
 * communicator of job and rank here serves rail at slot with this unit
 * and number of rails, 0 if there is none of that job and rank (yet), -1
 * if there are only ones of another shape.
 */
int nz_comm_job_fits(u64 job_id, u32 rank, struct nz_rail *rail, u32 slot,
		     u32 unit, u32 nrails)
{
	struct nz_comm *comm;
	int ret = 0;

	mutex_lock(&nz_comms_lock);
	list_for_each_entry(comm, &nz_comms, node) {
		if (comm->job_id != job_id || comm->rank != rank)
			continue;
		ret = nz_comm_fits(comm, rail, slot, unit, nrails) ? 1 : -1;
		if (ret > 0)
			break;
	}
	mutex_unlock(&nz_comms_lock);
	return ret;
}

struct nz_comm *nz_file_comm_get(struct nz_file *f, u32 id)
{
	struct nz_comm *comm, *found = NULL;

	mutex_lock(&f->comm_lock);
	list_for_each_entry(comm, &f->comms, node_file) {
		if (comm->id == id) {
			kref_get(&comm->ref);
			found = comm;
			break;
		}
	}
	mutex_unlock(&f->comm_lock);
	return found;
}

int nz_comm_mac(struct nz_comm *comm, const u8 *in, unsigned int len, u8 *out)
{
	SHASH_DESC_ON_STACK(desc, comm->hmac);
	int ret;

	desc->tfm = comm->hmac;
	ret = crypto_shash_digest(desc, in, len, out);
	shash_desc_zero(desc);
	return ret;
}
ALLOW_ERROR_INJECTION(nz_comm_mac, ERRNO);

struct nz_conn *nz_comm_conn(struct nz_comm *comm, u32 rank, u32 slot)
{
	if (rank >= comm->size || slot >= comm->nrails || !comm->peers[rank])
		return NULL;
	return &comm->peers[rank]->conns[slot];
}

/* ---- communicators --------------------------------------------------------- */

static int nz_comm_check_create(const struct nz_comm_create *cc)
{
	u32 i;

	for (i = 0; i < ARRAY_SIZE(cc->rsvd); i++)
		if (cc->rsvd[i])
			return -EINVAL;
	if (!cc->size || cc->size > NZ_MAX_RANKS || cc->rank >= cc->size)
		return -EINVAL;
	if (!cc->nrails || cc->nrails > NZ_MAX_RAILS)
		return -EINVAL;
	if (cc->unit && !nz_wire_unit_ok(cc->unit))
		return -EINVAL;
	if (cc->timeout_ms > NZ_MAX_TIMEOUT_MS)
		return -EINVAL;
	for (i = 0; i < NZ_MAX_RAILS; i++) {
		size_t n = strnlen(cc->rails[i], NZ_RAIL_NAME_LEN);

		if (n == NZ_RAIL_NAME_LEN || (i < cc->nrails) != (n > 0))
			return -EINVAL;
	}
	return 0;
}

/*
 * The rails named, each of the opener's network namespace: a rail of
 * another one is not there for it (its addresses would be dialled from a
 * namespace the caller has no part in).
 */
static int nz_comm_get_rails(struct nz_comm *comm,
			     const struct nz_comm_create *cc, struct net *net)
{
	u32 s, t;

	for (s = 0; s < comm->nrails; s++) {
		comm->rails[s] = nz_rail_get(cc->rails[s]);
		if (!comm->rails[s])
			return -ENODEV;
		if (!net_eq(comm->rails[s]->net, net))
			return -ENODEV;
		/* An aggregation rail has no connections to peers. */
		if (!comm->rails[s]->ops->conn_connect)
			return -EPROTOTYPE;
		for (t = 0; t < s; t++)
			if (comm->rails[t] == comm->rails[s])
				return -EINVAL;
	}
	return 0;
}

static int nz_comm_get_addrs(struct nz_comm *comm, u64 uaddr)
{
	size_t n = (size_t)comm->size * comm->nrails, i;

	comm->addrs = kvmalloc_array(n, sizeof(*comm->addrs),
				     GFP_KERNEL_ACCOUNT);
	if (!comm->addrs)
		return -ENOMEM;
	if (copy_from_user(comm->addrs, u64_to_user_ptr(uaddr),
			   n * sizeof(*comm->addrs)))
		return -EFAULT;
	for (i = 0; i < n; i++)
		if (comm->addrs[i].rsvd ||
		    (i / comm->nrails != comm->rank &&
		     (!comm->addrs[i].addr || !comm->addrs[i].port)))
			return -EINVAL;
	return 0;
}

static int nz_comm_alloc_peers(struct nz_comm *comm)
{
	struct nz_peer *p;
	u32 r, s;

	comm->peers = kcalloc(comm->size, sizeof(*comm->peers),
			      GFP_KERNEL_ACCOUNT);
	if (!comm->peers)
		return -ENOMEM;
	for (r = 0; r < comm->size; r++) {
		if (r == comm->rank)
			continue;
		p = kzalloc(sizeof(*p), GFP_KERNEL_ACCOUNT);
		if (!p)
			return -ENOMEM;
		comm->peers[r] = p;
		p->comm = comm;
		p->rank = r;
		spin_lock_init(&p->lock);
		p->next_msg_id = 1;
		p->down_since = jiffies;
		p->last_progress = jiffies;
		nz_health_peer_init(p);
		INIT_LIST_HEAD(&p->tx_msgs);
		INIT_LIST_HEAD(&p->resend);
		INIT_LIST_HEAD(&p->aborts);
		INIT_LIST_HEAD(&p->refusals);
		INIT_LIST_HEAD(&p->rx_msgs);
		INIT_LIST_HEAD(&p->posted);
		nz_seqwin_init(&p->rxwin);
		for (s = 0; s < comm->nrails; s++)
			nz_conn_init(p, s);
	}
	return 0;
}

static struct nz_comm *nz_comm_new(struct nz_file *f,
				   const struct nz_comm_create *cc)
{
	static atomic64_t serial = ATOMIC64_INIT(0);

	struct nz_comm *comm;
	int ret;

	comm = kzalloc(sizeof(*comm), GFP_KERNEL_ACCOUNT);
	if (!comm)
		return ERR_PTR(-ENOMEM);
	kref_init(&comm->ref);
	/* What arrives for it later is charged to its creator's cgroup. */
	comm->memcg = get_mem_cgroup_from_mm(current->mm);
	atomic_inc(&nz_stats.comms);
	INIT_LIST_HEAD(&comm->node);
	INIT_LIST_HEAD(&comm->node_file);
	init_waitqueue_head(&comm->waitq);
	nz_health_comm_init(comm);
	comm->job_id = cc->job_id;
	do {
		get_random_bytes(&comm->incarnation, sizeof(comm->incarnation));
	} while (!comm->incarnation);
	comm->owner = nz_user_uid(f->user);
	comm->serial = atomic64_inc_return(&serial);
	memcpy(comm->secret, cc->secret, sizeof(comm->secret));
	comm->rank = cc->rank;
	comm->size = cc->size;
	comm->nrails = cc->nrails;
	comm->unit = cc->unit ? cc->unit : NZ_DEFAULT_UNIT;
	comm->timeout_ms = cc->timeout_ms ? cc->timeout_ms :
			   NZ_DEFAULT_TIMEOUT_MS;
	comm->lim.max_msg = NZ_MAX_MSG;
	comm->lim.max_payload = comm->unit;

	ret = nz_comm_get_rails(comm, cc, f->net);
	if (ret)
		goto out_put;
	ret = nz_comm_get_addrs(comm, cc->addrs);
	if (ret)
		goto out_put;
	comm->hmac = crypto_alloc_shash("hmac(sha256)", 0, 0);
	if (IS_ERR(comm->hmac)) {
		ret = PTR_ERR(comm->hmac);
		goto out_put;
	}
	ret = crypto_shash_setkey(comm->hmac, comm->secret,
				  sizeof(comm->secret));
	if (ret)
		goto out_put;
	ret = nz_comm_alloc_peers(comm);
	if (ret)
		goto out_put;
	return comm;

out_put:
	nz_comm_put(comm);
	return ERR_PTR(ret);
}

/* Make the communicator reachable: accepts find it, clients connect. */
static int nz_comm_publish(struct nz_comm *comm)
{
	struct nz_comm *other;
	u32 r, s;

	/*
	 * A (job, rank) slot is taken per user, not for the whole host:
	 * another user naming our job id gets a communicator of its own,
	 * which its key, not ours, authenticates (nz_comm_find_hello()).
	 */
	mutex_lock(&nz_comms_lock);
	list_for_each_entry(other, &nz_comms, node) {
		if (other->job_id == comm->job_id &&
		    other->rank == comm->rank &&
		    (uid_eq(other->owner, comm->owner) ||
		     !crypto_memneq(other->secret, comm->secret,
				    sizeof(comm->secret)))) {
			mutex_unlock(&nz_comms_lock);
			return -EEXIST;
		}
	}
	kref_get(&comm->ref);
	list_add_tail(&comm->node, &nz_comms);
	mutex_unlock(&nz_comms_lock);

	for (r = 0; r < comm->size; r++)
		for (s = 0; comm->peers[r] && s < comm->nrails; s++) {
			struct nz_conn *conn = &comm->peers[r]->conns[s];

			mutex_lock(&conn->io_lock);
			if (nz_sysfs_conn_add(conn))
				pr_warn_ratelimited("no sysfs statistics for rank %u on rail %s\n",
						    r, conn->rail->name);
			mutex_unlock(&conn->io_lock);
		}
	nz_health_comm_start(comm);
	for (r = 0; r < comm->size; r++)
		for (s = 0; comm->peers[r] && s < comm->nrails; s++)
			if (comm->peers[r]->conns[s].client)
				nz_health_conn_connect_in(&comm->peers[r]->conns[s], 0);
	return 0;
}

/* Nothing queued to send on any connection that is up: see below. */
static bool nz_comm_ctrl_flushed(struct nz_comm *comm)
{
	bool flushed = true;
	u32 r, s;

	for (r = 0; r < comm->size && flushed; r++) {
		struct nz_peer *p = comm->peers[r];

		if (!p)
			continue;
		spin_lock_bh(&p->lock);
		for (s = 0; s < comm->nrails; s++)
			if (p->conns[s].nctrl &&
			    p->conns[s].state == NZ_CONN_UP)
				flushed = false;
		spin_unlock_bh(&p->lock);
	}
	return flushed;
}

static void nz_comm_destroy(struct nz_comm *comm)
{
	u32 r, s;

	mutex_lock(&nz_comms_lock);
	if (!list_empty(&comm->node)) {
		list_del_init(&comm->node);
		nz_comm_put(comm);		/* the list's reference */
	}
	mutex_unlock(&nz_comms_lock);

	WRITE_ONCE(comm->dead, true);
	wake_up_all(&comm->waitq);
	nz_health_comm_stop(comm);
	/*
	 * The ACK of the last message we received may still be queued: a
	 * transport's close sends its CLOSE after what it wrote but drops
	 * what is queued, and the sender, told that we left, would fail the
	 * send we received whole.  An ACK already written on a path that
	 * went down is lost: DONE says on every path still up what we have.
	 * Let the queues drain first, bounded: a peer that does not read any
	 * more must not hold us.
	 */
	for (r = 0; r < comm->size; r++)
		if (comm->peers[r])
			nz_peer_confirm_done(comm->peers[r]);
	wait_event_timeout(comm->waitq, nz_comm_ctrl_flushed(comm),
			   msecs_to_jiffies(NZ_FLUSH_MS));
	/*
	 * Every dial gives up first, so that their works unwind side by side
	 * while we wait for the first: one after the other, a job with
	 * hundreds of unanswered dials took seconds to go.
	 */
	for (r = 0; r < comm->size; r++)
		for (s = 0; comm->peers[r] && s < comm->nrails; s++)
			nz_conn_stop_dial(&comm->peers[r]->conns[s]);
	for (r = 0; r < comm->size; r++)
		for (s = 0; comm->peers[r] && s < comm->nrails; s++)
			nz_conn_shutdown(&comm->peers[r]->conns[s]);
	for (r = 0; r < comm->size; r++)
		if (comm->peers[r])
			nz_peer_fail_all(comm->peers[r], -ECANCELED);
}

int nz_comm_ioctl_create(struct nz_file *f, void __user *arg)
{
	struct nz_comm_create cc;
	struct nz_comm *comm;
	int ret;

	if (copy_from_user(&cc, arg, sizeof(cc)))
		return -EFAULT;
	ret = nz_comm_check_create(&cc);
	if (!ret)
		ret = nz_user_charge_comm(f->user);
	if (ret) {
		memzero_explicit(cc.secret, sizeof(cc.secret));
		return ret;
	}
	comm = nz_comm_new(f, &cc);
	memzero_explicit(cc.secret, sizeof(cc.secret));
	if (IS_ERR(comm)) {
		nz_user_uncharge_comm(f->user);
		return PTR_ERR(comm);
	}

	/*
	 * The id is taken now but the file's list gets the communicator only
	 * once it is whole and published: until then no SEND, RECV, WAIT or
	 * DESTROY of another thread can find it.
	 */
	mutex_lock(&f->comm_lock);
	comm->id = ++f->next_comm_id;
	comm->file = f;
	mutex_unlock(&f->comm_lock);

	ret = nz_comm_publish(comm);
	if (!ret)
		ret = put_user(comm->id,
			       &((struct nz_comm_create __user *)arg)->comm_id);
	if (!ret)
		ret = put_user(comm->serial,
			       &((struct nz_comm_create __user *)arg)->serial);
	if (ret) {
		nz_comm_destroy(comm);
		nz_comm_put(comm);
		nz_user_uncharge_comm(f->user);
		return ret;
	}
	mutex_lock(&f->comm_lock);
	list_add_tail(&comm->node_file, &f->comms);
	mutex_unlock(&f->comm_lock);
	pr_debug("comm %u: job %llx rank %u/%u, %u rails\n", comm->id,
		 comm->job_id, comm->rank, comm->size, comm->nrails);
	return 0;
}

/*
 * Connections that came up at least once.  Not those up now: a peer may
 * have connected, sent, seen its message acknowledged and left before we
 * wait -- its connections were there, and what it sent is here.
 */
static u32 nz_comm_conns_established(struct nz_comm *comm)
{
	u32 r, n = 0;

	for (r = 0; r < comm->size; r++)
		if (comm->peers[r])
			n += READ_ONCE(comm->peers[r]->conns_established);
	return n;
}

int nz_comm_ioctl_wait(struct nz_file *f, void __user *arg)
{
	struct nz_comm_wait w;
	struct nz_comm *comm;
	u32 expected;
	long left;
	int ret = 0;

	if (copy_from_user(&w, arg, sizeof(w)))
		return -EFAULT;
	if (w.rsvd || w.timeout_ms > NZ_MAX_TIMEOUT_MS)
		return -EINVAL;
	comm = nz_file_comm_get(f, w.comm_id);
	if (!comm)
		return -EINVAL;
	expected = (comm->size - 1) * comm->nrails;
	left = wait_event_interruptible_timeout(comm->waitq,
			nz_comm_conns_established(comm) >= expected ||
			READ_ONCE(comm->dead),
			msecs_to_jiffies(w.timeout_ms));
	w.up = nz_comm_conns_established(comm);
	w.expected = expected;
	if (left < 0)
		ret = left;
	else if (w.up < expected)
		ret = READ_ONCE(comm->dead) ? -ECANCELED : -ETIMEDOUT;
	nz_comm_put(comm);
	if (copy_to_user(arg, &w, sizeof(w)))
		return -EFAULT;
	return ret;
}

int nz_comm_ioctl_destroy(struct nz_file *f, void __user *arg)
{
	struct nz_comm *comm;
	u32 id;

	if (get_user(id, (u32 __user *)arg))
		return -EFAULT;
	mutex_lock(&f->comm_lock);
	list_for_each_entry(comm, &f->comms, node_file) {
		if (comm->id == id) {
			list_del_init(&comm->node_file);
			mutex_unlock(&f->comm_lock);
			nz_comm_destroy(comm);
			nz_comm_put(comm);
			nz_user_uncharge_comm(f->user);
			return 0;
		}
	}
	mutex_unlock(&f->comm_lock);
	return -EINVAL;
}

void nz_comm_file_release(struct nz_file *f)
{
	struct nz_comm *comm;

	for (;;) {
		mutex_lock(&f->comm_lock);
		comm = list_first_entry_or_null(&f->comms, struct nz_comm,
						node_file);
		if (comm)
			list_del_init(&comm->node_file);
		mutex_unlock(&f->comm_lock);
		if (!comm)
			return;
		nz_comm_destroy(comm);
		nz_comm_put(comm);
		nz_user_uncharge_comm(f->user);
	}
}

/* ---- rails changing under communicators ------------------------------------ */

/*
 * Update every connection that uses rail, outside nz_comms_lock since
 * closing sleeps.
 */
static void nz_rail_conns_update(struct nz_rail *rail, enum nz_rail_change how)
{
	struct nz_comm **comms;
	struct nz_comm *comm;
	unsigned int n = 0, i, max = 0;
	u32 r, s;

	mutex_lock(&nz_comms_lock);
	list_for_each_entry(comm, &nz_comms, node)
		max++;
	comms = kcalloc(max, sizeof(*comms), GFP_KERNEL);
	list_for_each_entry(comm, &nz_comms, node) {
		if (!comms || n == max)
			break;
		kref_get(&comm->ref);
		comms[n++] = comm;
	}
	mutex_unlock(&nz_comms_lock);

	for (i = 0; i < n; i++) {
		comm = comms[i];
		for (r = 0; r < comm->size; r++)
			for (s = 0; comm->peers[r] && s < comm->nrails; s++)
				if (comm->rails[s] == rail)
					nz_conn_rail_update(&comm->peers[r]->conns[s],
							    how);
		nz_comm_put(comm);
	}
	kfree(comms);
}

void nz_comm_rail_removed(struct nz_rail *rail)
{
	nz_rail_conns_update(rail, NZ_RAIL_REMOVED);
}

void nz_comm_rail_changed(struct nz_rail *rail)
{
	nz_rail_conns_update(rail, NZ_RAIL_CHANGED);
}

/* health.c: the rail's netdev lost or regained its link. */
void nz_comm_rail_link(struct nz_rail *rail, bool up)
{
	nz_rail_conns_update(rail, up ? NZ_RAIL_CHANGED : NZ_RAIL_LINK_DOWN);
}
