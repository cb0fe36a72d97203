// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/multiedge: the misc character device and its ioctl ABI
 * (uapi/multiedge.h).  Every command validates its whole argument before it
 * acts: size through copy_struct_from_user(), reserved fields, flags.
 *
 * An open file belongs to the network namespace of the process that opened
 * it (a reference is held until release): commands act on that node.
 */
#include <linux/capability.h>
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/nsproxy.h>
#include <linux/rtnetlink.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/uaccess.h>
#include <net/net_namespace.h>

#include "area.h"
#include "chardev.h"
#include "engine.h"
#include "link.h"
#include "lists.h"
#include "mr.h"
#include "netns.h"
#include "ops.h"
#include "ports.h"
#include "recvq.h"
#include "shared.h"
#include "stage.h"
#include "train.h"
#include "txheads.h"
#include "uring.h"
#include "uapi/multiedge.h"

long me_copy_arg_in(void *karg, size_t ksize, size_t min, void __user *uarg)
{
	u32 usize;
	int ret;

	if (get_user(usize, (u32 __user *)uarg))
		return -EFAULT;
	if (usize < min)
		return -EINVAL;
	/* No struct will grow that far; spare scanning gigabytes for zeros. */
	if (usize > PAGE_SIZE)
		return -E2BIG;
	ret = copy_struct_from_user(karg, ksize, uarg, usize);
	if (ret)
		return ret;
	return usize;
}

int me_copy_array_out(u64 uptr, u32 stride, const void *src, size_t ksize,
		      unsigned int n)
{
	size_t len = min_t(size_t, stride, ksize);
	unsigned int i;

	/* Callers refuse it first: each entry's tail is cleared. */
	if (stride > PAGE_SIZE)
		return -E2BIG;
	/* The caller's layout is ours: one copy (and one usercopy check). */
	if (stride == ksize)
		return copy_to_user(u64_to_user_ptr(uptr), src, (size_t)n * ksize) ? -EFAULT : 0;

	for (i = 0; i < n; i++) {
		void __user *dst = u64_to_user_ptr(uptr + (u64)i * stride);

		if (copy_to_user(dst, src + i * ksize, len) ||
		    (stride > len && clear_user(dst + len, stride - len)))
			return -EFAULT;
	}
	return 0;
}

static long me_ioc_query(struct me_file *f, void __user *uarg)
{
	struct me_net *mn = me_net(f->net);
	struct me_area_stats as;
	struct me_link_stats stats;
	struct me_query q;
	long usize;

	usize = me_copy_arg_in(&q, sizeof(q), ME_QUERY_SIZE_VER0, uarg);
	if (usize < 0)
		return usize;

	me_link_get_stats(&stats);
	memset(&q, 0, sizeof(q));
	q.size = usize;
	q.abi_version = ME_ABI_VERSION;
	q.features = me_uring_features() | ME_FEATURE_RX_AREA | ME_FEATURE_RECV_POLL |
		     ME_FEATURE_PORTS | ME_FEATURE_POST_MORE | ME_FEATURE_SHARED |
		     ME_FEATURE_ATOMIC | ME_FEATURE_LOOPBACK | ME_FEATURE_SEND_LARGE |
		     ME_FEATURE_ACK_NOW;
	q.ethertype = me_link_ethertype();
	q.rx_frames = stats.rx_frames;
	q.rx_dropped = stats.rx_dropped;
	q.pinned_pages = me_mr_pinned_pages();
	q.regions = me_mr_count();
	q.node_id = mn->node_id;
	q.incarnation = mn->incarnation;
	q.packet_size = READ_ONCE(mn->packet_size);
	q.rx_queued = me_rx_queued();
	q.conns = me_engine_conns();
	q.ops_inflight = me_engine_ops_inflight();
	q.zc_skbs = me_link_zc_skbs();
	q.staged_pages = me_stage_pages();
	me_area_stats(&as);
	q.area_pages = as.area_pages;
	q.pool_pages = as.pool_pages;
	q.rx_flipped = as.flipped;
	q.rx_flip_copied = as.flip_copied;
	q.tlb_flushes = as.tlb_flushes;
	q.trains_segmented = me_train_segmented();
	me_txheads_stats(&q.heads_reused, &q.heads_fresh);

	if (copy_to_user(uarg, &q, min_t(size_t, usize, sizeof(q))))
		return -EFAULT;
	return 0;
}

static long me_ioc_link_req(struct net *net, unsigned int cmd, void __user *uarg)
{
	struct me_link_req req;
	long ret;

	ret = me_copy_arg_in(&req, sizeof(req), ME_LINK_REQ_SIZE_VER0, uarg);
	if (ret < 0)
		return ret;
	if (!ns_capable(net->user_ns, CAP_NET_ADMIN))
		return -EPERM;
	if (req.flags)
		return -EOPNOTSUPP;
	if (!req.ifname[0] || !memchr(req.ifname, 0, sizeof(req.ifname)))
		return -EINVAL;

	rtnl_lock();
	if (cmd == ME_IOC_LINK_ATTACH)
		ret = me_link_attach(net, req.ifname);
	else
		ret = me_link_detach(net, req.ifname);
	rtnl_unlock();
	return ret;
}

static long me_ioc_link_list(struct net *net, void __user *uarg)
{
	struct me_link_info *infos;
	struct me_link_list req;
	unsigned int n;
	long ret;

	ret = me_copy_arg_in(&req, sizeof(req), ME_LINK_LIST_SIZE_VER0, uarg);
	if (ret < 0)
		return ret;
	if (req.__reserved || req.info_size < ME_LINK_INFO_SIZE_VER0)
		return -EINVAL;
	if (req.info_size > PAGE_SIZE)
		return -E2BIG;

	infos = kcalloc(ME_MAX_LINKS, sizeof(*infos), GFP_KERNEL);
	if (!infos)
		return -ENOMEM;
	rtnl_lock();
	n = me_link_list(net, infos, ME_MAX_LINKS);
	rtnl_unlock();

	ret = me_copy_array_out(req.links, req.info_size, infos, sizeof(*infos),
				min_t(unsigned int, req.count, n));
	kfree(infos);
	if (ret)
		return ret;
	if (put_user(n, (u32 __user *)(uarg + offsetof(struct me_link_list, count))))
		return -EFAULT;
	return 0;
}

static long me_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct me_file *f = file->private_data;
	struct net *net = f->net;
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case ME_IOC_QUERY:
		return me_ioc_query(f, uarg);
	case ME_IOC_LINK_ATTACH:
	case ME_IOC_LINK_DETACH:
		return me_ioc_link_req(net, cmd, uarg);
	case ME_IOC_LINK_LIST:
		return me_ioc_link_list(net, uarg);
	case ME_IOC_MR_REG:
		return me_mr_reg(f, uarg);
	case ME_IOC_MR_DEREG:
		return me_mr_dereg(f, uarg);
	case ME_IOC_PEER_LIST:
		return me_ioc_peer_list(f, uarg);
	case ME_IOC_NBR_LIST:
		return me_ioc_nbr_list(f, uarg);
	case ME_IOC_CONN_LIST:
		return me_engine_ioc_conn_list(f, uarg);
	case ME_IOC_STATS:
		return me_ioc_stats(f, uarg);
	case ME_IOC_CONNECT:
		return me_engine_ioc_connect(f, uarg);
	case ME_IOC_DISCONNECT:
		return me_engine_ioc_disconnect(f, uarg);
	case ME_IOC_POST:
		return me_engine_ioc_post(f, uarg);
	case ME_IOC_POLL_CQ:
		return me_cq_ioc_poll(&f->cq, uarg);
	case ME_IOC_RECV:
		return me_recvq_ioc_recv(f, uarg);
	case ME_IOC_BIND:
		return me_ports_ioc_bind(f, uarg);
	default:
		return -ENOTTY;
	}
}

/*
 * Readable (EPOLLIN) while completions are queued; EPOLLRDBAND (ABI 10)
 * while a message waits that ME_IOC_RECV would take.
 */
static __poll_t me_poll(struct file *file, poll_table *wait)
{
	struct me_file *f = file->private_data;

	return me_cq_poll(&f->cq, file, wait) | me_recvq_poll(f, file, wait);
}

static int me_open(struct inode *inode, struct file *file)
{
	struct me_file *f = kzalloc(sizeof(*f), GFP_KERNEL);

	if (!f)
		return -ENOMEM;
	if (me_cq_init(&f->cq)) {
		kfree(f);
		return -ENOMEM;
	}
	f->net = get_net(current->nsproxy->net_ns);
	mutex_init(&f->lock);
	INIT_LIST_HEAD(&f->mrs);
	INIT_LIST_HEAD(&f->bound_node);
	me_recvq_file_init(f);
	me_shared_file_init(f);
	file->private_data = f;
	return 0;
}

/* The last reference is gone: no ioctl runs any more. */
static int me_release(struct inode *inode, struct file *file)
{
	struct me_file *f = file->private_data;

	/*
	 * Connections first (closed in order), then regions: deregistering
	 * waits for the operations using them, so afterwards no completion
	 * can reach the queue.
	 */
	me_ports_release(f);
	me_shared_release_file(f);
	me_engine_release_file(f);
	me_recvq_file_release(f);
	me_ops_release_file(f);
	me_mr_release_file(f);
	me_cq_destroy(&f->cq);
	put_net(f->net);
	mutex_destroy(&f->lock);
	kfree(f);
	return 0;
}

static const struct file_operations me_fops = {
	.owner = THIS_MODULE,
	.open = me_open,
	.release = me_release,
	.unlocked_ioctl = me_ioctl,
	.poll = me_poll,
	.uring_cmd = me_uring_cmd,
	.mmap = me_area_mmap,
	.compat_ioctl = compat_ptr_ioctl,
	.llseek = noop_llseek,
};

/* Anyone may open the device; privileged commands check capabilities. */
static struct miscdevice me_miscdev = {
	.minor = MISC_DYNAMIC_MINOR,
	.name = ME_DEVICE_NAME,
	.fops = &me_fops,
	.mode = 0666,
};

int me_chardev_init(void)
{
	int ret = misc_register(&me_miscdev);

	if (ret)
		pr_err("cannot register /dev/%s: %d\n", ME_DEVICE_NAME, ret);
	return ret;
}

void me_chardev_uninit(void)
{
	misc_deregister(&me_miscdev);
}
