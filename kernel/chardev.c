// SPDX-License-Identifier: GPL-2.0
/*
 * /dev/multiedge: the misc character device and its ioctl ABI
 * (uapi/multiedge.h).  Every command validates its whole argument before it
 * acts: size through copy_struct_from_user(), reserved fields, flags.
 */
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>
#include <linux/uaccess.h>

#include "chardev.h"
#include "link.h"
#include "uapi/multiedge.h"

/*
 * Read the size field of an extensible argument and copy the struct in.
 * Returns the caller's size (>= @min) or a negative errno.
 */
static long me_copy_arg_in(void *karg, size_t ksize, size_t min,
			   void __user *uarg)
{
	u32 usize;
	int ret;

	if (get_user(usize, (u32 __user *)uarg))
		return -EFAULT;
	if (usize < min)
		return -EINVAL;
	ret = copy_struct_from_user(karg, ksize, uarg, usize);
	if (ret)
		return ret;
	return usize;
}

static long me_ioc_query(void __user *uarg)
{
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
	q.features = 0;
	q.ethertype = me_link_ethertype();
	q.rx_frames = stats.rx_frames;
	q.rx_dropped = stats.rx_dropped;

	if (copy_to_user(uarg, &q, min_t(size_t, usize, sizeof(q))))
		return -EFAULT;
	return 0;
}

static long me_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	void __user *uarg = (void __user *)arg;

	switch (cmd) {
	case ME_IOC_QUERY:
		return me_ioc_query(uarg);
	default:
		return -ENOTTY;
	}
}

static const struct file_operations me_fops = {
	.owner = THIS_MODULE,
	.unlocked_ioctl = me_ioctl,
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
