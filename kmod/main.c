// SPDX-License-Identifier: GPL-2.0
/*
 * Nezha: bonds TCP and RDMA rails into one device for the collectives of
 * distributed DNN training.  Module init and exit, and their unwind only.
 */
#include <linux/module.h>
#include <linux/workqueue.h>
#include "nezha.h"
#include "rail.h"
#include "comm.h"
#include "frame_mac.h"
#include "transport.h"

struct nz_stats nz_stats;
struct workqueue_struct *nz_wq;

static int __init nz_init(void)
{
	int ret;

	ret = nz_msg_init();
	if (ret)
		return ret;
	nz_wq = alloc_workqueue("nezha", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	ret = -ENOMEM;
	if (!nz_wq)
		goto out_msg;
	ret = nz_sysfs_init();
	if (ret)
		goto out_destroy_wq;
	ret = nz_rails_init();
	if (ret)
		goto out_sysfs;
	ret = nz_netlink_init();
	if (ret)
		goto out_rails;
	ret = nz_health_init();
	if (ret)
		goto out_netlink_only;
	/* Last: once /dev/nezha exists, commands can arrive. */
	ret = nz_chardev_init();
	if (ret)
		goto out_netlink;
	pr_info("nezha %s loaded (abi %d)\n", NZ_RELEASE, NZ_ABI_VERSION);
	return 0;

out_netlink:
	nz_health_exit();
out_netlink_only:
	nz_netlink_exit();
out_rails:
	nz_rails_exit();
out_sysfs:
	nz_sysfs_exit();
out_destroy_wq:
	destroy_workqueue(nz_wq);
out_msg:
	nz_msg_exit();
	return ret;
}

/*
 * The module cannot be removed while /dev/nezha is open (the file holds a
 * module reference), so no command is in flight here.  Rails go once no
 * netlink request can add one any more (genl_unregister_family() waits for
 * requests in progress), and before their sysfs directories' parent and
 * the workqueue their teardown may use.  Zero-copy sends whose pages TCP
 * still referenced end before the workqueue goes.  Destroying it last
 * waits for a worker that is still returning from a completion it has
 * already handed to io_uring.
 */
static void __exit nz_exit(void)
{
	nz_chardev_exit();
	nz_health_exit();
	nz_netlink_exit();
	nz_rails_exit();
	nz_sysfs_exit();
	nz_tcp_exit();
	nz_tx_zc_exit();
	destroy_workqueue(nz_wq);
	nz_msg_exit();
	nz_fmac_exit();
	pr_info("nezha unloaded\n");
}

module_init(nz_init);
module_exit(nz_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("Nezha multi-rail, multi-protocol communication device");
MODULE_VERSION(NZ_RELEASE);
