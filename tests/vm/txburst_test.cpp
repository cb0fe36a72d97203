// Guest tests of transmit bursts (kernel/txbatch.c): the packetizer's
// frames go to the driver together, past the qdisc, only where nothing
// would see the difference.  A packet tap must still see every frame sent
// (the bursts then go through dev_queue_xmit), and so must the data.
// (Shaping qdiscs are honoured too: zerocopy_test holds frames in a netem
// queue and uring_test limits a link's rate with one.)

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>

#include "cluster.hpp"
#include "uapi/multiedge.h"

using namespace metest;
using multiedge::Access;
using namespace std::chrono_literals;

namespace {

constexpr size_t kLen = 4u << 20;

class TxBurstTest : public ClusterTest {};

uint64_t tx_frames(multiedge::Device &d, const std::string &ifname)
{
	auto links = d.links();
	if (!links) {
		ADD_FAILURE() << links.error().message();
		return 0;
	}
	for (const auto &l : links.value())
		if (l.ifname == ifname)
			return l.tx_frames;
	ADD_FAILURE() << "no link " << ifname;
	return 0;
}

} // namespace

// A tap (tcpdump's ETH_P_ALL packet socket) on the sender's interface
// sees every frame the link counts as sent during a 4 MiB write: with a
// tap active the frames may not skip dev_queue_xmit, which feeds taps.
TEST_F(TxBurstTest, PacketTapSeesEverySentFrame)
{
	ASSERT_NO_FATAL_FAILURE(make_pair(1));
	const std::string ifname = c_->node(0).ifnames.at(0);
	int tap = -1;
	{
		Cluster::Enter in(c_->ns(0));
		ASSERT_TRUE(in.ok());
		tap = ::socket(AF_PACKET, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, htons(ETH_P_ALL));
		ASSERT_GE(tap, 0) << errno_name(errno);
		sockaddr_ll sll{};
		sll.sll_family = AF_PACKET;
		sll.sll_protocol = htons(ETH_P_ALL);
		sll.sll_ifindex = static_cast<int>(if_nametoindex(ifname.c_str()));
		ASSERT_NE(sll.sll_ifindex, 0);
		ASSERT_EQ(::bind(tap, reinterpret_cast<sockaddr *>(&sll), sizeof(sll)), 0)
			<< errno_name(errno);
		int big = 64 << 20;
		ASSERT_EQ(::setsockopt(tap, SOL_SOCKET, SO_RCVBUFFORCE, &big, sizeof(big)), 0);
	}

	Buffer src(kLen), dst(kLen);
	fill_random(src.data(), kLen, 77);
	auto ms = c_->dev(0).register_memory(src.data(), kLen, Access::None);
	ME_ASSERT_OK(ms);
	auto md = c_->dev(1).register_memory(dst.data(), kLen, Access::RemoteReadWrite);
	ME_ASSERT_OK(md);
	auto conn = c_->dev(0).connect(c_->id(1));
	ME_ASSERT_OK(conn);

	const uint64_t before = tx_frames(c_->dev(0), ifname);
	ME_ASSERT_OK(conn->write(ms.value(), 0, multiedge::remote_of(md.value()), 0, kLen, 1));
	auto c = c_->dev(0).wait_for(1, 30s);
	ME_ASSERT_OK(c);
	EXPECT_TRUE(c->ok()) << c->describe();
	const uint64_t sent = tx_frames(c_->dev(0), ifname) - before;
	EXPECT_EQ(first_difference(src.data(), dst.data(), kLen), -1);

	// Every outgoing frame of our ethertype the tap holds (it also holds
	// some sent just before `before` and after the count: at least `sent`).
	uint64_t seen = 0;
	unsigned char frame[16];
	for (;;) {
		sockaddr_ll from{};
		socklen_t fl = sizeof(from);
		ssize_t n = ::recvfrom(tap, frame, sizeof(frame), MSG_TRUNC,
				       reinterpret_cast<sockaddr *>(&from), &fl);
		if (n < 0)
			break;
		if (from.sll_pkttype == PACKET_OUTGOING && from.sll_protocol == htons(ME_DEFAULT_ETHERTYPE))
			seen++;
	}
	tpacket_stats st{};
	socklen_t sl = sizeof(st);
	ASSERT_EQ(::getsockopt(tap, SOL_PACKET, PACKET_STATISTICS, &st, &sl), 0);
	::close(tap);
	ASSERT_EQ(st.tp_drops, 0u) << "the tap's buffer overflowed: its count is incomplete";
	EXPECT_GT(sent, 1000u) << "too few frames to have made bursts";
	EXPECT_GE(seen, sent) << "frames went past the tap";
}
