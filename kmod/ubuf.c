// SPDX-License-Identifier: GPL-2.0
/*
 * User buffers of SEND and RECV: the length limit, pinning (charged to
 * RLIMIT_MEMLOCK), registered buffers, and iterators over any part.
 */
#include <linux/module.h>
#include <linux/mm.h>
#include <linux/sched/mm.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>
#include <linux/io_uring.h>
#include <linux/shmem_fs.h>
#include "msg.h"

/*
 * The longest message one SEND or RECV may name.  Its pages are pinned for
 * the whole transfer, so this also bounds the page arrays allocated for it
 * (16 bytes a page: 256 GiB is a 1 GiB array, below kvmalloc's INT_MAX).
 * Below this, RLIMIT_MEMLOCK decides for users without CAP_IPC_LOCK.
 */
#define NZ_MAX_MSG_MB_LIMIT	(256U << 10)
static unsigned int max_msg_mb = 16U << 10;

static int nz_max_msg_set(const char *val, const struct kernel_param *kp)
{
	unsigned int v;
	int ret = kstrtouint(val, 0, &v);

	if (ret)
		return ret;
	if (!v || v > NZ_MAX_MSG_MB_LIMIT)
		return -ERANGE;
	WRITE_ONCE(max_msg_mb, v);
	return 0;
}

static const struct kernel_param_ops nz_max_msg_ops = {
	.set = nz_max_msg_set,
	.get = param_get_uint,
};
module_param_cb(max_msg_mb, &nz_max_msg_ops, &max_msg_mb, 0644);
MODULE_PARM_DESC(max_msg_mb,
		 "longest SEND or RECV in MiB (default 16384, at most 262144)");

/* ---- user buffers ------------------------------------------------------ */

/* A SEND or RECV length this module accepts; -EMSGSIZE otherwise. */
int nz_xfer_len_ok(u64 len)
{
	return len > ((u64)READ_ONCE(max_msg_mb) << 20) ? -EMSGSIZE : 0;
}

/*
 * Charge npages to the caller's pinned pages (VmPin), limited by
 * RLIMIT_MEMLOCK unless it has CAP_IPC_LOCK, as RDMA's ib_umem_get() does:
 * one atomic, no mmap lock on the command path.
 */
static int nz_ubuf_charge(struct nz_ubuf *b, unsigned long npages)
{
	unsigned long limit = rlimit(RLIMIT_MEMLOCK) >> PAGE_SHIFT;
	struct mm_struct *mm = current->mm;

	if (!mm)
		return -EFAULT;
	if (atomic64_add_return(npages, &mm->pinned_vm) > limit &&
	    !capable(CAP_IPC_LOCK)) {
		atomic64_sub(npages, &mm->pinned_vm);
		return -ENOMEM;
	}
	mmgrab(mm);
	b->mm = mm;
	b->locked = npages;
	return 0;
}

static void nz_ubuf_uncharge(struct nz_ubuf *b)
{
	if (!b->mm)
		return;
	atomic64_sub(b->locked, &b->mm->pinned_vm);
	mmdrop(b->mm);
	b->mm = NULL;
	b->locked = 0;
}

/*
 * A registered buffer is a bio_vec array; reaching byte off of it with
 * iov_iter_advance() walks every segment before it, and a message's chunks
 * did so each time (the O(pages) walk showed in the profile of a fixed-
 * buffer send).  io_uring registers one page per segment, the first from
 * the buffer's offset in its page: then the segment holding any byte is
 * found by arithmetic.  Checked once per command, not assumed: a kernel
 * that lays the buffer out in larger segments takes the walk.
 */
static bool nz_ubuf_fixed_pages(const struct iov_iter *it)
{
	unsigned long i;

	if (!iov_iter_is_bvec(it))
		return false;
	for (i = 1; i < it->nr_segs; i++)
		if (it->bvec[i].bv_offset ||
		    (it->bvec[i].bv_len != PAGE_SIZE && i + 1 < it->nr_segs))
			return false;
	return true;
}

static void nz_ubuf_fixed_seek(const struct nz_ubuf *b, u64 off,
			       struct iov_iter *it)
{
	u64 pos = b->fixed.iov_offset + off, first = b->fixed.bvec[0].bv_len;
	unsigned long idx = 0;

	*it = b->fixed;
	if (pos >= first) {
		idx = 1 + ((pos - first) >> PAGE_SHIFT);
		pos = (pos - first) & ~PAGE_MASK;
	}
	it->bvec += idx;
	it->nr_segs -= idx;
	it->iov_offset = pos;
	it->count -= off;
}

/*
 * A RECV writes into its pages from a worker, long after they were pinned.
 * Page-cache pages of a shared file mapping would be written behind the
 * file system's back (dirtied while it may be writing them back or
 * truncating the file): io_uring refuses such memory for its registered
 * buffers, and so do we, for the pages we are to write.  Anonymous memory,
 * private mappings (the write pin breaks copy-on-write), shmem and
 * hugetlbfs are fine.  A range with a hole or a VM_IO/VM_PFNMAP mapping
 * in it is left to the pin, which fails it with -EFAULT as before.  Under
 * mmap_lock, which the pin then keeps held.
 */
static bool nz_ubuf_shared_file(struct mm_struct *mm, unsigned long start,
				unsigned long end)
{
	struct vm_area_struct *vma;
	struct vma_iterator vmi;
	unsigned long next = start;
	bool file = false;

	vma_iter_init(&vmi, mm, start);
	for_each_vma_range(vmi, vma, end) {
		if (vma->vm_start > next || (vma->vm_flags & (VM_IO | VM_PFNMAP)))
			return false;
		if (vma->vm_file && (vma->vm_flags & VM_SHARED) &&
		    !(vma->vm_flags & VM_HUGETLB) && !shmem_file(vma->vm_file))
			file = true;
		next = vma->vm_end;
	}
	return file && next >= end;
}

/* Pin npages from start; -EOPNOTSUPP for pages a RECV may not write. */
static long nz_ubuf_pin_pages(unsigned long start, unsigned long npages,
			      bool write, struct page **pages)
{
	struct mm_struct *mm = current->mm;
	long got;

	/* Long term: a transfer may wait for its peer for minutes. */
	if (!write)
		return pin_user_pages_fast(start, npages, FOLL_LONGTERM, pages);
	if (mmap_read_lock_killable(mm))
		return -EINTR;
	if (nz_ubuf_shared_file(mm, start, start + (npages << PAGE_SHIFT)))
		got = -EOPNOTSUPP;
	else
		got = pin_user_pages(start, npages, FOLL_LONGTERM | FOLL_WRITE,
				     pages, NULL);
	mmap_read_unlock(mm);
	return got;
}

int nz_ubuf_pin(struct nz_ubuf *b, struct io_uring_cmd *cmd, u64 addr,
		u64 len, bool write)
{
	unsigned long npages, i;
	u64 left = len;
	long got;
	int ret;

	memset(b, 0, sizeof(*b));
	b->len = len;
	b->dirty = write;
	if (!len)
		return 0;
	if (cmd->flags & IORING_URING_CMD_FIXED) {
		b->is_fixed = true;
		ret = io_uring_cmd_import_fixed(addr, len,
						write ? ITER_DEST : ITER_SOURCE,
						&b->fixed, cmd);
		if (!ret)
			b->fixed_pages = nz_ubuf_fixed_pages(&b->fixed);
		return ret;
	}
	if (addr + len < addr || addr + len > TASK_SIZE_MAX)
		return -EFAULT;
	/* The caller checked len against max_msg_mb: npages fits an int. */
	b->first_off = offset_in_page(addr);
	npages = DIV_ROUND_UP(b->first_off + len, PAGE_SIZE);
	ret = nz_ubuf_charge(b, npages);
	if (ret)
		return ret;
	b->pages = kvmalloc_array(npages, sizeof(*b->pages),
				  GFP_KERNEL_ACCOUNT);
	b->bvec = kvmalloc_array(npages, sizeof(*b->bvec), GFP_KERNEL_ACCOUNT);
	ret = -ENOMEM;
	if (!b->pages || !b->bvec)
		goto out_free;
	got = nz_ubuf_pin_pages(addr & PAGE_MASK, npages, write, b->pages);
	if (got != npages) {
		if (got > 0)
			unpin_user_pages(b->pages, got);
		ret = got < 0 ? got : -EFAULT;
		goto out_free;
	}
	b->npages = npages;
	for (i = 0; i < npages; i++) {
		unsigned int off = i ? 0 : b->first_off;
		unsigned int n = min_t(u64, PAGE_SIZE - off, left);

		b->bvec[i].bv_page = b->pages[i];
		b->bvec[i].bv_offset = off;
		b->bvec[i].bv_len = n;
		left -= n;
	}
	return 0;

out_free:
	kvfree(b->pages);
	kvfree(b->bvec);
	b->pages = NULL;
	b->bvec = NULL;
	nz_ubuf_uncharge(b);
	return ret;
}

void nz_ubuf_release(struct nz_ubuf *b)
{
	if (b->npages)
		unpin_user_pages_dirty_lock(b->pages, b->npages, b->dirty);
	kvfree(b->pages);
	kvfree(b->bvec);
	b->npages = 0;
	b->pages = NULL;
	b->bvec = NULL;
	nz_ubuf_uncharge(b);
}

/* An iterator over [off, off + len) of the buffer. */
void nz_ubuf_iter(const struct nz_ubuf *b, unsigned int dir, u64 off,
		  u64 len, struct iov_iter *it)
{
	u64 pos, avail;
	unsigned long idx;

	if (b->is_fixed) {
		if (b->fixed_pages && off < b->fixed.count) {
			nz_ubuf_fixed_seek(b, off, it);
		} else {
			*it = b->fixed;
			iov_iter_advance(it, off);
		}
		iov_iter_truncate(it, len);
		return;
	}
	if (!b->npages) {
		iov_iter_kvec(it, dir, NULL, 0, 0);
		return;
	}
	/* Jump straight to the page that holds off. */
	pos = b->first_off + off;
	idx = pos >> PAGE_SHIFT;
	avail = b->first_off + b->len - ((u64)idx << PAGE_SHIFT) -
		(idx ? 0 : b->first_off);
	iov_iter_bvec(it, dir, b->bvec + idx, b->npages - idx, avail);
	iov_iter_advance(it, idx ? offset_in_page(pos) : off);
	iov_iter_truncate(it, len);
}
