// The guest harness's kernel-log verdict, tested on the host.
#include <gtest/gtest.h>

#include "tests/vm/kmsg.hpp"

using metest::kernel_trouble;

TEST(KernelTrouble, FindsEachPattern)
{
	std::vector<std::string> log = {
		"multiedge: registered /dev/multiedge, ethertype 0x88b5, abi 1",
		"WARNING: CPU: 0 PID: 1 at kernel/foo.c:1 bar+0x1/0x2",
		"BUG: unable to handle page fault for address: 0000000000000008",
		"Oops: 0000 [#1] PREEMPT SMP NOPTI",
		"multiedge: 3 pages leak at unload",
		"virtio_net virtio0 eth0: renamed",
	};
	auto bad = kernel_trouble(log);
	ASSERT_EQ(bad.size(), 4u);
	EXPECT_EQ(bad[0], log[1]);
	EXPECT_EQ(bad[3], log[4]);
}

TEST(KernelTrouble, IgnoresTheHarnessOwnMarkers)
{
	std::vector<std::string> log = {
		"multiedge-test: start Mr.RegisterDeregisterNoLeak",
		"multiedge-test: end Mr.RegisterDeregisterNoLeak",
	};
	EXPECT_TRUE(kernel_trouble(log).empty());
}

TEST(KernelTrouble, CleanLogIsClean)
{
	EXPECT_TRUE(kernel_trouble({}).empty());
	EXPECT_TRUE(kernel_trouble({"multiedge: unloaded", "loading out-of-tree module taints kernel."})
			    .empty());
}
