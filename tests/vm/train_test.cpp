// Guest tests of trains (kernel/train.c): the frames of a transmit burst
// to one neighbour cross a veth as one skb and are taken apart by the
// receiving handler; where a device or shaper on the way takes frames
// only, the stack cuts the train back into frames with our segmentation.
// With rx_gro=1 a NAPI device's GRO chains arriving frames into trains
// (a veth in NAPI mode stands in for a NIC).  Every byte arrives; with
// trains=0 no train is sent.

#include <gtest/gtest.h>

#include <linux/ethtool.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "cluster.hpp"

using namespace metest;
using Side = Cluster::Side;

namespace {

constexpr size_t kLen = 8u << 20;

struct Counts {
	std::uint64_t frames = 0, trains = 0;
};

// Frames and trains node d sent (tx) or received (rx) on all its links.
Counts link_counts(multiedge::Device &d, bool tx)
{
	Counts c;
	auto links = d.links();
	if (!links) {
		ADD_FAILURE() << links.error().message();
		return c;
	}
	for (const auto &l : links.value()) {
		c.frames += tx ? l.tx_frames : l.rx_frames;
		c.trains += tx ? l.tx_trains : l.rx_trains;
	}
	return c;
}

std::uint64_t segmented() { return accounting().trains_segmented; }

// Counter `stat` (/sys/class/net/<if>/statistics) of node n's interface
// `ifname`; fails the test when it cannot be read.
std::uint64_t if_stat(Cluster &c, int n, const std::string &ifname, const std::string &stat)
{
	const std::string cmd = "ip netns exec " + c.ns(n) + " cat /sys/class/net/" + ifname +
				"/statistics/" + stat;
	FILE *f = ::popen(cmd.c_str(), "r");
	if (!f) {
		ADD_FAILURE() << "popen " << cmd << ": " << errno_name(errno);
		return 0;
	}
	unsigned long long v = 0;
	const bool got = std::fscanf(f, "%llu", &v) == 1;
	if (::pclose(f) != 0 || !got)
		ADD_FAILURE() << "cannot read: " << cmd;
	return v;
}

class TrainTest : public ClusterTest {
protected:
	// kLen bytes from node 0 to node 1 in 1 MiB writes, checked at the
	// target; the trains and frames each side counted meanwhile.
	void stream(Counts &tx0, Counts &rx1)
	{
		Counts t0, r0;
		ASSERT_NO_FATAL_FAILURE(stream_checked(kLen, 1u << 20, 0x7a1, [&] {
			t0 = link_counts(c_->dev(0), true);
			r0 = link_counts(c_->dev(1), false);
		}));
		const Counts t1 = link_counts(c_->dev(0), true), r1 = link_counts(c_->dev(1), false);
		tx0 = {t1.frames - t0.frames, t1.trains - t0.trains};
		rx1 = {r1.frames - r0.frames, r1.trains - r0.trains};
		std::printf("node 0 sent %llu frames in %llu trains; node 1 received %llu frames, "
			    "%llu trains\n",
			    static_cast<unsigned long long>(tx0.frames),
			    static_cast<unsigned long long>(tx0.trains),
			    static_cast<unsigned long long>(rx1.frames),
			    static_cast<unsigned long long>(rx1.trains));
	}
};

class TrainsOffTest : public TrainTest {
protected:
	std::string module_params() const override { return "trains=0"; }
};

class TrainGroTest : public TrainTest {
protected:
	std::string module_params() const override { return "trains=0 rx_gro=1"; }
};

// Sets a legacy ethtool flag (ETHTOOL_STSO, ETHTOOL_SGRO) of `ifname` in
// node n's namespace; "" or what failed.
std::string ethtool_set(Cluster &c, int n, const std::string &ifname, std::uint32_t cmd,
			bool on)
{
	Cluster::Enter in(c.ns(n));
	if (!in.ok())
		return "cannot enter " + c.ns(n);
	int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return "socket: " + errno_name(errno);
	ethtool_value ev{};
	ev.cmd = cmd;
	ev.data = on;
	ifreq ifr{};
	std::strncpy(ifr.ifr_name, ifname.c_str(), IFNAMSIZ - 1);
	ifr.ifr_data = reinterpret_cast<char *>(&ev);
	int rc = ::ioctl(fd, SIOCETHTOOL, &ifr);
	int err = errno;
	::close(fd);
	return rc == 0 ? "" : "SIOCETHTOOL " + std::to_string(cmd) + " on " + ifname + ": " +
				      errno_name(err);
}

} // namespace

// Over a veth the writes' frames travel in trains, several frames each,
// and arrive as trains: nothing on the way cut them.
TEST_F(TrainTest, VethCarriesTrainsWhole)
{
	ASSERT_NO_FATAL_FAILURE(make_pair(1));
	const std::uint64_t seg0 = segmented();
	Counts tx0, rx1;
	ASSERT_NO_FATAL_FAILURE(stream(tx0, rx1));
	EXPECT_GT(tx0.frames, kLen / 1500);
	EXPECT_GT(tx0.trains, 0u);
	// Bursts of up to tx_burst frames: most frames rode in a train.
	EXPECT_LT(tx0.trains * 2, tx0.frames) << "trains of two frames or fewer on average";
	EXPECT_GT(rx1.trains, 0u);
	EXPECT_GE(rx1.frames, tx0.frames * 9 / 10);
	EXPECT_EQ(segmented(), seg0) << "a veth took a train in pieces";
}

// A shaper that meters frames (tbf with a bucket smaller than a train of
// 9000-byte frames) on the switch's port to the receiver: the stack
// segments the trains there with our callback, and every byte arrives.
TEST_F(TrainTest, ShaperSegmentsTrains)
{
	constexpr unsigned kMtu = 9000;
	ASSERT_EQ(c_->add_node(), 0);
	ASSERT_EQ(c_->add_node(), 1);
	ASSERT_EQ(c_->add_switch(), 0);
	ASSERT_EQ(c_->plug(0, 0, kMtu), 0);
	ASSERT_EQ(c_->plug(1, 0, kMtu), 1);
	ASSERT_TRUE(c_->start());
	ASSERT_TRUE(c_->wait_pair(0, 1, 1));
	ASSERT_TRUE(c_->port_qdisc(1, Side::Switch, "tbf rate 2gbit burst 16kb limit 4000000"));
	const std::uint64_t seg0 = segmented();
	Counts tx0, rx1;
	ASSERT_NO_FATAL_FAILURE(stream(tx0, rx1));
	const std::uint64_t seg = segmented() - seg0;
	std::printf("%llu trains segmented on the way\n", static_cast<unsigned long long>(seg));
	EXPECT_GT(tx0.trains, 0u);
	EXPECT_GT(seg, 0u);
	// A train of one full frame and a short one fits the bucket: at most
	// those arrive whole.
	EXPECT_LT(rx1.trains, tx0.trains / 2);
}

// trains=0: every frame leaves as an skb of its own.
TEST_F(TrainsOffTest, NoTrains)
{
	ASSERT_NO_FATAL_FAILURE(make_pair(1));
	Counts tx0, rx1;
	ASSERT_NO_FATAL_FAILURE(stream(tx0, rx1));
	EXPECT_GT(tx0.frames, kLen / 1500);
	EXPECT_EQ(tx0.trains, 0u);
	EXPECT_EQ(rx1.trains, 0u);
}

// rx_gro=1: a veth whose peer has GRO on runs NAPI for frames from a
// sender without TSO, as a NIC does: there the frames (sent one by one,
// trains=0) are chained into trains by our GRO callbacks and the handler
// takes them apart; every byte arrives.
TEST_F(TrainGroTest, GroChainsArrivingFrames)
{
	ASSERT_NO_FATAL_FAILURE(make_pair(1));
	const auto &l = c_->link(0);
	ASSERT_EQ(ethtool_set(*c_, 0, l.if_a, ETHTOOL_STSO, false), "");
	ASSERT_EQ(ethtool_set(*c_, 1, l.if_b, ETHTOOL_SGRO, false), "");
	ASSERT_EQ(ethtool_set(*c_, 1, l.if_b, ETHTOOL_SGRO, true), "");
	// The veth queues a NAPI device's frames in a ring of 256 and drops
	// (and counts) what does not fit when TCG runs its NAPI late (0.1-12%
	// of the frames in our runs); every other frame sent arrives and is
	// counted once, whether it came chained or alone.
	auto drops = [&] {
		return if_stat(*c_, 0, l.if_a, "tx_dropped") + if_stat(*c_, 1, l.if_b, "rx_dropped");
	};
	const std::uint64_t drops0 = drops();
	Counts tx0, rx1;
	ASSERT_NO_FATAL_FAILURE(stream(tx0, rx1));
	const std::uint64_t dropped = drops() - drops0;
	std::printf("the veth dropped %llu frames\n", static_cast<unsigned long long>(dropped));
	EXPECT_EQ(tx0.trains, 0u);
	EXPECT_GT(rx1.trains, 0u) << "no frames chained by GRO";
	EXPECT_GE(rx1.frames + dropped, tx0.frames * 99 / 100);
	EXPECT_LE(rx1.frames, tx0.frames) << "frames counted twice";
}
