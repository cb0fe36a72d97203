// SPDX-License-Identifier: GPL-2.0
/*
 * multiedge: RDMA-style remote memory access over stock Ethernet NICs.
 *
 * This file only orders the subsystems' init and uninit; each mechanism
 * lives in its own file.  The character device comes last so user space
 * never sees a half-initialised module.
 */
#include <linux/module.h>

#include "area.h"
#include "chardev.h"
#include "engine.h"
#include "link.h"
#include "mr.h"
#include "ops.h"
#include "txheads.h"
#include "uring.h"
#include "uapi/multiedge.h"

static int __init me_init(void)
{
	int ret;

	ret = me_mr_init();
	if (ret)
		return ret;
	ret = me_area_init();
	if (ret)
		return ret;
	ret = me_engine_init();
	if (ret)
		return ret;
	ret = me_ops_init();
	if (ret)
		return ret;
	ret = me_uring_init();
	if (ret)
		goto err_ops;
	ret = me_link_init();
	if (ret)
		goto err_uring;

	ret = me_chardev_init();
	if (ret)
		goto err_link;

	pr_info("registered /dev/%s, ethertype 0x%04x, abi %u\n",
		ME_DEVICE_NAME, me_link_ethertype(), ME_ABI_VERSION);
	return 0;

err_link:
	me_link_uninit();
err_uring:
	me_uring_exit();
err_ops:
	me_ops_uninit();
	return ret;
}

static void __exit me_exit(void)
{
	me_chardev_uninit();
	me_link_uninit();
	me_engine_check_unload();
	me_mr_check_unload();
	me_area_exit();
	me_uring_exit();
	me_ops_uninit();
	me_txheads_exit();
	pr_info("unloaded\n");
}

module_init(me_init);
module_exit(me_exit);

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("multiedge: RDMA-style remote memory over multiple Ethernet links");
MODULE_AUTHOR("multiedge developers");
