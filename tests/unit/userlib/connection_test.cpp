// libmultiedge's ABI 4 side on the host: what it puts into each command and
// makes of each answer, against the stand-in module of fake_module.hpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <optional>
#include <thread>
#include <vector>

#include "fake_module.hpp"
#include "multiedge/multiedge.hpp"

using namespace std::chrono_literals;
using multiedge::Completion;
using multiedge::CompletionType;
using multiedge::Device;

namespace {

bool contains(const std::string &s, const std::string &part)
{
	return s.find(part) != std::string::npos;
}

me_completion kc(std::uint64_t cookie, std::uint32_t type = ME_CQ_WRITE, int status = 0)
{
	me_completion c{};
	c.cookie = cookie;
	c.type = type;
	c.status = status;
	c.conn = 3;
	c.peer = 2;
	c.len = status ? 0 : 100;
	return c;
}

class Fake : public ::testing::Test {
protected:
	fake::FakeModule mod;

	Device open()
	{
		auto dev = Device::open(mod.path());
		EXPECT_TRUE(dev) << (dev ? "" : dev.error().message());
		return std::move(dev).value();
	}
};

} // namespace

// ---- Completion::describe ---------------------------------------------------

TEST(Describe, FailedWriteGivesErrnoTextAndHint)
{
	Completion c;
	c.cookie = 7;
	c.type = CompletionType::Write;
	c.status = EACCES;
	c.conn = 3;
	EXPECT_EQ(c.describe(), "write (cookie 7) on connection 3 failed: Permission denied "
				"(wrong key, no such region at the target, or the region does not grant "
				"that access)");
}

TEST(Describe, SuccessSaysBytesMoved)
{
	Completion c;
	c.cookie = 9;
	c.type = CompletionType::Read;
	c.conn = 4;
	c.len = 4096;
	EXPECT_EQ(c.describe(), "read (cookie 9) on connection 4 done: 4096 bytes");
	c.type = CompletionType::Send;
	c.len = 12;
	EXPECT_EQ(c.describe(), "send (cookie 9) on connection 4 done: 12 bytes");
}

TEST(Describe, EveryHintedErrnoHasItsHint)
{
	struct Case {
		int err;
		const char *hint;
	} cases[] = {
		{EACCES, "wrong key"},
		{ERANGE, "outside the target region"},
		{ENOENT, "no such region at the target"},
		{ENOBUFS, "receive queue is full"},
		{ETIMEDOUT, "every link to it died"},
		{ECONNRESET, "closed or the peer restarted"},
		{ECANCELED, "before any of it was sent"},
		{ECONNREFUSED, "bound to the port"},
		{ECONNABORTED, "too many accesses with a wrong key"},
	};
	for (const auto &k : cases) {
		Completion c;
		c.type = CompletionType::Write;
		c.status = k.err;
		std::string d = c.describe();
		EXPECT_TRUE(contains(d, k.hint)) << d;
		EXPECT_TRUE(contains(d, std::generic_category().message(k.err))) << d;
	}
	Completion other;
	other.type = CompletionType::Read;
	other.status = EIO;
	EXPECT_EQ(other.describe(), "read (cookie 0) on connection 0 failed: Input/output error");
}

TEST(Describe, EventsSayWhatHappened)
{
	Completion n;
	n.type = CompletionType::Notify;
	n.conn = 5;
	n.peer = 2;
	n.len = 64;
	n.region = 8;
	n.off = 128;
	n.imm = 42;
	EXPECT_EQ(n.describe(), "notify from node 2 on connection 5: 64 bytes written to region 8 "
				"at offset 128, imm 42");

	Completion closed;
	closed.type = CompletionType::ConnClosed;
	closed.conn = 5;
	closed.peer = 2;
	EXPECT_EQ(closed.describe(), "connection 5 to node 2 closed");

	Completion dead = closed;
	dead.type = CompletionType::ConnDead;
	dead.status = ETIMEDOUT;
	EXPECT_TRUE(contains(dead.describe(), "connection 5 to node 2 died: Connection timed out"))
		<< dead.describe();
	// A connection dies of ENOENT when a local region goes from under it
	// (with a shared connection, another Device's region may).
	dead.status = ENOENT;
	EXPECT_TRUE(contains(dead.describe(), "died: No such file or directory (a local region"))
		<< dead.describe();
	EXPECT_FALSE(contains(dead.describe(), "at the target")) << dead.describe();

	Completion odd;
	odd.type = static_cast<CompletionType>(99);
	EXPECT_TRUE(contains(odd.describe(), "unknown type 99")) << odd.describe();
}

// ---- query and the lists ----------------------------------------------------

TEST_F(Fake, QueryFillsTheAbi4Fields)
{
	Device dev = open();
	auto info = dev.query();
	ASSERT_TRUE(info);
	EXPECT_EQ(info->abi_version, static_cast<unsigned>(ME_ABI_VERSION));
	EXPECT_EQ(info->features, static_cast<unsigned>(ME_FEATURE_URING_CMD));
	EXPECT_EQ(info->node_id, 0x0a000001u);
	EXPECT_EQ(info->incarnation, 0x5eedu);
	EXPECT_EQ(info->packet_size, 1486u);
	EXPECT_EQ(info->rx_queued, 4u);
	EXPECT_EQ(info->conns, 5u);
	EXPECT_EQ(info->ops_inflight, 6u);
	EXPECT_EQ(info->zc_skbs, 7u);
	EXPECT_EQ(info->staged_pages, 9u);
	EXPECT_EQ(info->regions, 1u);
}

TEST_F(Fake, QueryOfAnOlderModuleLeavesTheNewFieldsZero)
{
	mod.abi = 3;
	mod.query.abi_version = 3;
	Device dev = open();
	auto info = dev.query();
	ASSERT_TRUE(info);
	EXPECT_EQ(info->abi_version, 3u);
	EXPECT_EQ(info->pinned_pages, 3u);
	EXPECT_EQ(info->node_id, 0u);
	EXPECT_EQ(info->packet_size, 0u);
	EXPECT_EQ(info->ops_inflight, 0u);
	EXPECT_EQ(info->zc_skbs, 0u);
	EXPECT_EQ(info->staged_pages, 0u);
}

TEST_F(Fake, NewCommandsOnAnOlderModuleSayWhy)
{
	mod.abi = 3;
	Device dev = open();
	auto peers = dev.peers();
	ASSERT_FALSE(peers);
	EXPECT_EQ(peers.error().code(), std::errc::inappropriate_io_control_operation);
	EXPECT_TRUE(contains(peers.error().message(), "older than 4")) << peers.error().message();
	EXPECT_FALSE(dev.connections());
	EXPECT_FALSE(dev.stats());
	auto conn = dev.connect(2);
	ASSERT_FALSE(conn);
	EXPECT_TRUE(contains(conn.error().message(), "older than 4")) << conn.error().message();
}

TEST_F(Fake, LinksAskForTheAbi14EntryAndFillIt)
{
	me_link_info l{};
	std::strcpy(l.ifname, "eth1");
	l.ifindex = 3;
	l.mtu = 1500;
	l.flags = ME_LINK_F_UP | ME_LINK_F_ALIVE;
	l.index = 1;
	l.peer_node = 9;
	l.rate_mbps = 1000;
	l.tx_frames = 10;
	l.tx_bytes = 11;
	l.rx_dropped = 12;
	l.tx_errors = 13;
	l.rx_copied = 14;
	l.tx_zc_frames = 15;
	l.nbrs = 5;
	l.nbrs_alive = 4;
	l.rx_direct = 16;
	mod.links = {l};
	Device dev = open();
	auto links = dev.links();
	ASSERT_TRUE(links) << links.error().message();
	ASSERT_EQ(links->size(), 1u);
	ASSERT_FALSE(mod.link_calls.empty());
	EXPECT_EQ(mod.link_calls.back().info_size, static_cast<unsigned>(ME_LINK_INFO_SIZE_VER5));
	const auto &li = links->front();
	EXPECT_EQ(li.ifname, "eth1");
	EXPECT_TRUE(li.up);
	EXPECT_TRUE(li.alive);
	EXPECT_EQ(li.index, 1u);
	EXPECT_EQ(li.peer_node, 9u);
	EXPECT_EQ(li.rate_mbps, 1000u);
	EXPECT_EQ(li.tx_frames, 10u);
	EXPECT_EQ(li.tx_bytes, 11u);
	EXPECT_EQ(li.rx_dropped, 12u);
	EXPECT_EQ(li.tx_errors, 13u);
	EXPECT_EQ(li.rx_copied, 14u);
	EXPECT_EQ(li.tx_zc_frames, 15u);
	EXPECT_EQ(li.nbrs, 5u);
	EXPECT_EQ(li.nbrs_alive, 4u);
	EXPECT_EQ(li.rx_direct, 16u);

	mod.links[0].flags = ME_LINK_F_UP;
	links = dev.links();
	ASSERT_TRUE(links);
	EXPECT_FALSE(links->front().alive);
}

TEST_F(Fake, PeersAskAgainWhenThereAreMoreThanGuessed)
{
	for (std::uint32_t i = 0; i < 40; i++) {
		me_peer_info p{};
		p.node_id = 100 + i;
		p.incarnation = i;
		p.links = 3;
		p.alive_links = i % 2 ? 1 : 0;
		p.flags = i % 2 ? ME_PEER_F_ALIVE : 0;
		mod.peers.push_back(p);
	}
	Device dev = open();
	auto peers = dev.peers();
	ASSERT_TRUE(peers) << peers.error().message();
	ASSERT_EQ(peers->size(), 40u);
	EXPECT_EQ(mod.peer_calls.size(), 2u);
	EXPECT_EQ(mod.peer_calls.back().count, 40u);
	EXPECT_EQ(mod.peer_calls.back().info_size, sizeof(me_peer_info));
	EXPECT_EQ(peers.value()[39].node_id, 139u);
	EXPECT_TRUE(peers.value()[39].alive);
	EXPECT_EQ(peers.value()[39].alive_links, 1u);
	EXPECT_FALSE(peers.value()[38].alive);
	EXPECT_EQ(peers.value()[38].links, 3u);
}

TEST_F(Fake, PeersCarryNameAndConnections)
{
	me_peer_info p{};
	p.node_id = 7;
	std::strcpy(p.name, "node-seven");
	p.conns = 3;
	mod.peers = {p};
	Device dev = open();
	auto peers = dev.peers();
	ASSERT_TRUE(peers) << peers.error().message();
	ASSERT_EQ(peers->size(), 1u);
	EXPECT_EQ(peers->front().name, "node-seven");
	EXPECT_EQ(peers->front().conns, 3u);
}

// A full 32-byte name (no NUL inside) is taken as 32 characters, never read
// past the field.
TEST_F(Fake, PeerNameWithoutNulStopsAtTheField)
{
	me_peer_info p{};
	p.node_id = 7;
	std::memset(p.name, 'x', sizeof(p.name));
	mod.peers = {p};
	Device dev = open();
	auto peers = dev.peers();
	ASSERT_TRUE(peers);
	EXPECT_EQ(peers->front().name, std::string(32, 'x'));
}

TEST_F(Fake, NeighboursAskAgainWhenThereAreMoreThanGuessed)
{
	for (std::uint32_t i = 0; i < 70; i++) {
		me_nbr_info n{};
		n.link = i % 2;
		n.node_id = 200 + i / 2;
		n.incarnation = 9;
		n.flags = i % 2 == 0 ? ME_NBR_F_ALIVE | ME_NBR_F_RX | ME_NBR_F_HEARD : ME_NBR_F_RX;
		n.mac[0] = 0x52;
		n.mac[5] = static_cast<std::uint8_t>(i);
		n.rtt_us = 100 + i;
		n.rate_mbps = 1000;
		n.inflight = 4096;
		n.rx_age_ms = 3;
		n.tx_pkts = 1;
		n.rx_pkts = 2;
		n.lost_pkts = 3;
		n.tx_bytes = 4;
		n.rx_bytes = 5;
		n.cwnd = 18000 + i;
		n.data_rtt_us = 300 + i;
		n.data_delay_us = 200 + i;
		n.base_us = 50 + i;
		n.target_us = 1000 + i;
		n.noise_us = 70 + i;
		mod.nbrs.push_back(n);
	}
	Device dev = open();
	auto nbrs = dev.neighbours();
	ASSERT_TRUE(nbrs) << nbrs.error().message();
	ASSERT_EQ(nbrs->size(), 70u);
	EXPECT_EQ(mod.nbr_calls.size(), 2u);
	EXPECT_EQ(mod.nbr_calls.back().info_size, static_cast<unsigned>(ME_NBR_INFO_SIZE_VER3));
	const auto &n = nbrs.value()[69];
	EXPECT_EQ(n.link, 1u);
	EXPECT_EQ(n.node_id, 234u);
	EXPECT_EQ(n.incarnation, 9u);
	EXPECT_FALSE(n.alive);
	EXPECT_TRUE(n.rx);
	EXPECT_FALSE(n.heard);
	EXPECT_EQ(n.mac[0], 0x52);
	EXPECT_EQ(n.mac[5], 69);
	EXPECT_EQ(n.rtt_us, 169u);
	EXPECT_EQ(n.rate_mbps, 1000u);
	EXPECT_EQ(n.inflight, 4096u);
	EXPECT_EQ(n.rx_age_ms, 3u);
	EXPECT_EQ(n.tx_pkts, 1u);
	EXPECT_EQ(n.rx_pkts, 2u);
	EXPECT_EQ(n.lost_pkts, 3u);
	EXPECT_EQ(n.cwnd, 18069u);
	EXPECT_EQ(n.data_rtt_us, 369u);
	EXPECT_EQ(n.data_delay_us, 269u);
	EXPECT_EQ(n.base_us, 119u);
	EXPECT_EQ(n.target_us, 1069u);
	EXPECT_EQ(n.noise_us, 139u);
	EXPECT_EQ(n.tx_bytes, 4u);
	EXPECT_EQ(n.rx_bytes, 5u);
	EXPECT_TRUE(nbrs.value()[0].alive);
	EXPECT_TRUE(nbrs.value()[0].heard);
}

TEST_F(Fake, NeighboursOfAnOlderModuleSayWhatToLoad)
{
	mod.abi = 8;
	Device dev = open();
	auto nbrs = dev.neighbours();
	ASSERT_FALSE(nbrs);
	EXPECT_TRUE(contains(nbrs.error().message(), "older than 9")) << nbrs.error().message();
}

TEST_F(Fake, NoPeersIsAnEmptyList)
{
	Device dev = open();
	auto peers = dev.peers();
	ASSERT_TRUE(peers);
	EXPECT_TRUE(peers->empty());
}

TEST_F(Fake, ConnectionsNameTheirStates)
{
	const std::pair<std::uint32_t, const char *> states[] = {
		{ME_CONN_S_CONNECTING, "connecting"}, {ME_CONN_S_ESTABLISHED, "established"},
		{ME_CONN_S_CLOSING, "closing"},	      {ME_CONN_S_CLOSED, "closed"},
		{ME_CONN_S_DEAD, "dead"},	      {77, "state_77"},
	};
	for (const auto &[s, name] : states) {
		me_conn_info c{};
		c.conn = static_cast<std::uint32_t>(mod.conns.size() + 1);
		c.peer = 2;
		c.state = s;
		c.flags = ME_CONN_I_ORDERED;
		c.tx_packets = 1;
		c.retransmits = 2;
		c.copies = 8;
		mod.conns.push_back(c);
	}
	mod.conns.back().flags = ME_CONN_I_ACTIVE;
	Device dev = open();
	auto conns = dev.connections();
	ASSERT_TRUE(conns) << conns.error().message();
	ASSERT_EQ(conns->size(), std::size(states));
	for (std::size_t i = 0; i < std::size(states); i++)
		EXPECT_EQ(conns.value()[i].state, states[i].second);
	EXPECT_TRUE(conns.value()[0].ordered);
	EXPECT_FALSE(conns.value()[0].active);
	EXPECT_TRUE(conns->back().active);
	EXPECT_FALSE(conns->back().ordered);
	EXPECT_EQ(conns.value()[0].retransmits, 2u);
	EXPECT_EQ(conns.value()[0].copies, 8u);
}

TEST_F(Fake, StatsAreNamedInAbiOrderAndExtrasNumbered)
{
	for (std::uint64_t i = 0; i < ME_STAT_COUNT + 2; i++)
		mod.stats.push_back(1000 + i);
	Device dev = open();
	auto stats = dev.stats();
	ASSERT_TRUE(stats) << stats.error().message();
	ASSERT_EQ(stats->size(), static_cast<std::size_t>(ME_STAT_COUNT + 2));
	EXPECT_EQ(stats.value()[ME_STAT_RX_PKTS], std::make_pair(std::string("rx_pkts"), 1000ul));
	EXPECT_EQ(stats.value()[ME_STAT_TX_RTX_LOSS].first, "tx_rtx_loss");
	EXPECT_EQ(stats.value()[ME_STAT_RX_BADOP].first, "rx_badop");
	EXPECT_EQ(stats.value()[ME_STAT_CREDIT_STALL].first, "credit_stall");
	EXPECT_EQ(stats.value()[ME_STAT_CREDIT_STALL].second, 1000u + ME_STAT_CREDIT_STALL);
	EXPECT_EQ(stats.value()[ME_STAT_PEER_RESTART].first, "peer_restart");
	EXPECT_EQ(stats.value()[ME_STAT_COUNT].first, "stat_" + std::to_string(ME_STAT_COUNT));
	EXPECT_EQ(stats.value()[ME_STAT_COUNT + 1].first,
		  "stat_" + std::to_string(ME_STAT_COUNT + 1));
	EXPECT_EQ(stats.value()[ME_STAT_COUNT + 1].second, 1000u + ME_STAT_COUNT + 1);
	EXPECT_EQ(mod.stats_calls.size(), 2u);
}

TEST_F(Fake, StatsOfAModuleKnowingFewerAreThoseOnly)
{
	mod.stats.assign(20, 5);
	Device dev = open();
	auto stats = dev.stats();
	ASSERT_TRUE(stats);
	EXPECT_EQ(stats->size(), 20u);
	EXPECT_EQ(stats->back().first, "tx_fail");
}

// ---- connect and posting ----------------------------------------------------

TEST_F(Fake, ConnectPassesOrderingAndTimeout)
{
	Device dev = open();
	auto conn = dev.connect(7, multiedge::Ordering::Ordered, 1500ms);
	ASSERT_TRUE(conn) << conn.error().message();
	EXPECT_EQ(conn->id(), 1u);
	EXPECT_EQ(conn->peer(), 7u);
	ASSERT_EQ(mod.connects.size(), 1u);
	EXPECT_EQ(mod.connects[0].peer, 7u);
	EXPECT_EQ(mod.connects[0].flags, ME_CONNECT_F_ORDERED);
	EXPECT_EQ(mod.connects[0].timeout_ms, 1500u);

	auto plain = dev.connect(8);
	ASSERT_TRUE(plain);
	EXPECT_EQ(mod.connects[1].flags, 0u);
	EXPECT_EQ(mod.connects[1].timeout_ms, 5000u);
}

TEST_F(Fake, ConnectErrorsSayWhatToCheck)
{
	Device dev = open();
	mod.connect_err = -EHOSTUNREACH;
	auto conn = dev.connect(7);
	ASSERT_FALSE(conn);
	EXPECT_EQ(conn.error().code(), std::errc::host_unreachable);
	EXPECT_TRUE(contains(conn.error().message(),
			     "no link reaches node 7 yet: is the peer's module loaded and its "
			     "links attached? (mectl peers)"))
		<< conn.error().message();

	mod.connect_err = -ENETDOWN;
	conn = dev.connect(7);
	ASSERT_FALSE(conn);
	EXPECT_TRUE(contains(conn.error().message(), "mectl attach")) << conn.error().message();

	mod.connect_err = -ETIMEDOUT;
	conn = dev.connect(7, multiedge::Ordering::Unordered, 250ms);
	ASSERT_FALSE(conn);
	EXPECT_EQ(conn.error().code(), std::errc::timed_out);
	EXPECT_TRUE(contains(conn.error().message(), "within 250 ms")) << conn.error().message();
}

TEST_F(Fake, PortsBindAndConnect)
{
	Device dev = open();
	auto p = dev.bind();
	ASSERT_TRUE(p) << p.error().message();
	EXPECT_EQ(p.value(), ME_PORT_EPHEMERAL + 7);
	auto q = dev.bind(4242);
	ASSERT_TRUE(q) << q.error().message();
	EXPECT_EQ(q.value(), 4242u);
	ASSERT_EQ(mod.binds.size(), 2u);
	EXPECT_EQ(mod.binds[0].port, 0u);
	EXPECT_EQ(mod.binds[1].port, 4242u);
	mod.bind_err = -EADDRINUSE;
	auto taken = dev.bind(4242);
	ASSERT_FALSE(taken);
	EXPECT_TRUE(contains(taken.error().message(), "cannot bind port 4242")) << taken.error().message();
	EXPECT_TRUE(contains(taken.error().message(), "another open device")) << taken.error().message();
	mod.bind_err = -ENOTTY;
	EXPECT_TRUE(contains(dev.bind().error().message(), "ABI 11"));

	auto conn = dev.connect(7, 4242, multiedge::Ordering::Ordered);
	ASSERT_TRUE(conn) << conn.error().message();
	EXPECT_EQ(mod.connects.back().port, 4242u);
	EXPECT_EQ(mod.connects.back().flags, ME_CONNECT_F_ORDERED);
	ASSERT_TRUE(dev.connect(7));
	EXPECT_EQ(mod.connects.back().port, 0u);
	mod.connect_err = -ECONNREFUSED;
	auto refused = dev.connect(7, 4243);
	ASSERT_FALSE(refused);
	EXPECT_EQ(refused.error().code(), std::errc::connection_refused);
	EXPECT_TRUE(contains(refused.error().message(),
			     "cannot connect to node 7 port 4243"))
		<< refused.error().message();
	EXPECT_TRUE(contains(refused.error().message(), "no program on node 7 is bound to port 4243"))
		<< refused.error().message();
}

TEST_F(Fake, ConnectWithZeroTimeoutStillWaitsAMillisecond)
{
	// 0 would mean "the default, 5 s" to the module.
	Device dev = open();
	auto conn = dev.connect(7, multiedge::Ordering::Unordered, 0ms);
	ASSERT_TRUE(conn);
	EXPECT_EQ(mod.connects[0].timeout_ms, 1u);
}

TEST_F(Fake, PostsCarryEveryField)
{
	Device dev = open();
	std::vector<char> buf(4096);
	auto mr = dev.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(mr);
	auto conn = dev.connect(2);
	ASSERT_TRUE(conn);
	multiedge::RemoteRegion remote{21, 0x01234567'0000feedull, 1 << 20};

	ASSERT_TRUE(conn->write(mr.value(), 16, remote, 32, 100, 1));
	ASSERT_TRUE(conn->write_notify(mr.value(), 0, remote, 64, 200, 42, 2, multiedge::Post::NonBlocking));
	ASSERT_TRUE(conn->read(mr.value(), 8, remote, 128, 300, 3));
	ASSERT_TRUE(conn->send(mr.value(), 4, 50, 4));
	ASSERT_EQ(mod.posts.size(), 4u);

	const me_post &w = mod.posts[0];
	EXPECT_EQ(w.opcode, static_cast<unsigned>(ME_OP_WRITE));
	EXPECT_EQ(w.conn, conn->id());
	EXPECT_EQ(w.cookie, 1u);
	EXPECT_EQ(w.local_region, mr->id());
	EXPECT_EQ(w.local_off, 16u);
	EXPECT_EQ(w.len, 100u);
	EXPECT_EQ(w.remote_region, 21u);
	EXPECT_EQ(w.remote_key, 0xfeedu);
	EXPECT_EQ(w.remote_key_hi, 0x1234567u);
	EXPECT_EQ(w.remote_off, 32u);
	EXPECT_EQ(w.flags, 0u);

	const me_post &n = mod.posts[1];
	EXPECT_EQ(n.opcode, static_cast<unsigned>(ME_OP_NOTIFY));
	EXPECT_EQ(n.imm, 42u);
	EXPECT_EQ(n.flags, ME_POST_F_NONBLOCK);

	const me_post &r = mod.posts[2];
	EXPECT_EQ(r.opcode, static_cast<unsigned>(ME_OP_READ));
	EXPECT_EQ(r.remote_off, 128u);
	EXPECT_EQ(r.len, 300u);

	const me_post &s = mod.posts[3];
	EXPECT_EQ(s.opcode, static_cast<unsigned>(ME_OP_SEND));
	EXPECT_EQ(s.remote_region, 0u);
	EXPECT_EQ(s.remote_key, 0u);
	EXPECT_EQ(s.remote_key_hi, 0u);
	EXPECT_EQ(s.remote_off, 0u);
	EXPECT_EQ(s.len, 50u);
}

// Post::More reaches the module as ME_POST_F_MORE, alone or with
// NonBlocking; an older module's refusal says what it lacks; bits the
// library does not know are refused before any system call.
TEST_F(Fake, PostMoreIsAFlagThatCombines)
{
	mod.query.features |= ME_FEATURE_POST_MORE;
	Device dev = open();
	std::vector<char> buf(4096);
	auto mr = dev.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(mr);
	auto conn = dev.connect(2);
	ASSERT_TRUE(conn);
	multiedge::RemoteRegion remote{21, 0xfeed, 1 << 20};
	using multiedge::Post;
	ASSERT_TRUE(conn->write(mr.value(), 0, remote, 0, 8, 1, Post::More));
	ASSERT_TRUE(conn->send(mr.value(), 0, 8, 2, Post::More | Post::NonBlocking));
	ASSERT_TRUE(conn->write(mr.value(), 0, remote, 8, 8, 3));
	ASSERT_EQ(mod.posts.size(), 3u);
	EXPECT_EQ(mod.posts[0].flags, ME_POST_F_MORE);
	EXPECT_EQ(mod.posts[1].flags, ME_POST_F_MORE | ME_POST_F_NONBLOCK);
	EXPECT_EQ(mod.posts[2].flags, 0u);

	auto st = conn->write(mr.value(), 0, remote, 0, 8, 4, static_cast<Post>(8));
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::invalid_argument);
	EXPECT_TRUE(contains(st.error().message(), "unknown Post bits")) << st.error().message();
	EXPECT_EQ(mod.posts.size(), 3u);

	mod.query.features &= ~ME_FEATURE_POST_MORE;
	st = conn->write(mr.value(), 0, remote, 0, 8, 5, Post::More);
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::operation_not_supported);
	EXPECT_TRUE(contains(st.error().message(), "ABI 15")) << st.error().message();
}

// Post::AckNow (ABI 27) reaches the module as ME_POST_F_ACK_NOW; a module
// without it is named.
TEST_F(Fake, PostAckNowFlag)
{
	mod.query.features |= ME_FEATURE_ACK_NOW;
	Device dev = open();
	std::vector<char> buf(64);
	auto mr = dev.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(mr);
	auto conn = dev.connect(2);
	ASSERT_TRUE(conn);
	multiedge::RemoteRegion remote{21, 0xfeed, 1 << 20};
	using multiedge::Post;
	ASSERT_TRUE(conn->write(mr.value(), 0, remote, 0, 8, 1, Post::AckNow));
	ASSERT_TRUE(conn->send(mr.value(), 0, 8, 2, Post::AckNow | Post::NonBlocking));
	ASSERT_EQ(mod.posts.size(), 2u);
	EXPECT_EQ(mod.posts[0].flags, ME_POST_F_ACK_NOW);
	EXPECT_EQ(mod.posts[1].flags, ME_POST_F_ACK_NOW | ME_POST_F_NONBLOCK);

	mod.query.features &= ~ME_FEATURE_ACK_NOW;
	auto st = conn->write(mr.value(), 0, remote, 0, 8, 3, Post::AckNow);
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::operation_not_supported);
	EXPECT_TRUE(contains(st.error().message(), "ABI 27")) << st.error().message();
}

TEST_F(Fake, PostErrorsCarryAHint)
{
	Device dev = open();
	std::vector<char> buf(64);
	auto mr = dev.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(mr);
	auto conn = dev.connect(2);
	ASSERT_TRUE(conn);
	mod.post_err = -EAGAIN;
	auto st = conn->write(mr.value(), 0, {1, 1, 64}, 0, 64, 1, multiedge::Post::NonBlocking);
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::resource_unavailable_try_again);
	EXPECT_TRUE(contains(st.error().message(), "harvest completions")) << st.error().message();

	mod.post_err = -ERANGE;
	st = conn->send(mr.value(), 60, 10, 2);
	ASSERT_FALSE(st);
	EXPECT_TRUE(contains(st.error().message(), "outside local region")) << st.error().message();
}

TEST_F(Fake, RegionOfAnotherDeviceIsRefusedLocally)
{
	Device dev = open();
	Device other = open();
	std::vector<char> buf(64);
	auto mr = other.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(mr);
	auto conn = dev.connect(2);
	ASSERT_TRUE(conn);
	auto st = conn->write(mr.value(), 0, {1, 1, 64}, 0, 64, 1);
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::invalid_argument);
	EXPECT_TRUE(contains(st.error().message(), "registered on another Device"))
		<< st.error().message();
	EXPECT_TRUE(mod.posts.empty());
}

TEST_F(Fake, EmptyRegionIsRefusedLocally)
{
	Device dev = open();
	std::vector<char> buf(64);
	auto mr = dev.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(mr);
	ASSERT_TRUE(mr->deregister());
	auto conn = dev.connect(2);
	ASSERT_TRUE(conn);
	auto st = conn->read(mr.value(), 0, {1, 1, 64}, 0, 64, 1);
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::invalid_argument);
	EXPECT_TRUE(contains(st.error().message(), "region is empty")) << st.error().message();
}

TEST_F(Fake, RemoteOfGivesIdKeyAndLength)
{
	Device dev = open();
	std::vector<char> buf(777);
	auto mr = dev.register_memory(buf.data(), buf.size(), multiedge::Access::RemoteReadWrite);
	ASSERT_TRUE(mr);
	auto r = multiedge::remote_of(mr.value());
	EXPECT_EQ(r.id, mr->id());
	EXPECT_EQ(r.key, mr->key());
	EXPECT_EQ(r.key >> 32, 0x5eed0000u + r.id) << "the key's high half from key_hi";
	EXPECT_EQ(r.length, 777u);
}

// The placement travels as the registration's flags; the module's answer
// says whether the range is a receive area.
TEST_F(Fake, PlacementIsPassedAndAreaReported)
{
	Device dev = open();
	std::vector<char> buf(4096);
	auto plain = dev.register_memory(buf.data(), buf.size(), multiedge::Access::RemoteWrite);
	ASSERT_TRUE(plain);
	EXPECT_FALSE(plain->is_area());
	mod.mr_info = ME_MR_INFO_AREA;
	auto area = dev.register_memory(buf.data(), buf.size(), multiedge::Access::RemoteWrite,
					multiedge::Placement::FlipEager);
	ASSERT_TRUE(area);
	EXPECT_TRUE(area->is_area());
	ASSERT_EQ(mod.mr_regs.size(), 2u);
	EXPECT_EQ(mod.mr_regs[0].flags, 0u);
	EXPECT_EQ(mod.mr_regs[1].flags, static_cast<std::uint32_t>(ME_MR_TLB_EAGER));
	EXPECT_EQ(mod.mr_regs[1].size, sizeof(me_mr_reg));
	multiedge::MemoryRegion moved = std::move(area).value();
	EXPECT_TRUE(moved.is_area());
}

TEST_F(Fake, MapAreaRefusesBadLengths)
{
	Device dev = open();
	auto zero = dev.map_area(0);
	ASSERT_FALSE(zero);
	EXPECT_EQ(zero.error().code(), std::errc::invalid_argument);
	auto huge = dev.map_area((1ull << 30) + 1);
	ASSERT_FALSE(huge);
	EXPECT_EQ(huge.error().code(), std::errc::invalid_argument);
}

// ---- closing and moving -----------------------------------------------------

TEST_F(Fake, DestructorDisconnects)
{
	Device dev = open();
	{
		auto conn = dev.connect(2);
		ASSERT_TRUE(conn);
	}
	ASSERT_EQ(mod.disconnects.size(), 1u);
	EXPECT_EQ(mod.disconnects[0], 1u);
}

TEST_F(Fake, DestructorIgnoresAConnectionAlreadyGone)
{
	Device dev = open();
	mod.disconnect_err = -ENOTCONN;
	{
		auto conn = dev.connect(2);
		ASSERT_TRUE(conn);
	}
	EXPECT_EQ(mod.disconnects.size(), 1u);
}

TEST_F(Fake, CloseEmptiesTheConnection)
{
	Device dev = open();
	auto conn = dev.connect(2);
	ASSERT_TRUE(conn);
	ASSERT_TRUE(conn->close());
	EXPECT_EQ(conn->id(), 0u);
	auto again = conn->close();
	ASSERT_FALSE(again);
	EXPECT_EQ(again.error().code(), std::errc::bad_file_descriptor);
	EXPECT_EQ(mod.disconnects.size(), 1u);
}

TEST_F(Fake, CloseReportsAConnectionAlreadyClosing)
{
	Device dev = open();
	auto conn = dev.connect(2);
	ASSERT_TRUE(conn);
	mod.disconnect_err = -ENOTCONN;
	auto st = conn->close();
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::not_connected);
	EXPECT_TRUE(contains(st.error().message(), "already closing")) << st.error().message();
	EXPECT_EQ(conn->id(), 0u);
}

TEST_F(Fake, MovedFromConnectionFailsClearly)
{
	Device dev = open();
	std::vector<char> buf(64);
	auto mr = dev.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(mr);
	auto conn = dev.connect(2);
	ASSERT_TRUE(conn);
	multiedge::Connection moved = std::move(conn.value());
	EXPECT_EQ(conn->id(), 0u);
	EXPECT_EQ(conn->peer(), 0u);
	EXPECT_EQ(moved.id(), 1u);

	auto st = conn->write(mr.value(), 0, {1, 1, 64}, 0, 8, 1);
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::bad_file_descriptor);
	EXPECT_TRUE(contains(st.error().message(), "moved from")) << st.error().message();
	EXPECT_FALSE(conn->read(mr.value(), 0, {1, 1, 64}, 0, 8, 1));
	EXPECT_FALSE(conn->write_notify(mr.value(), 0, {1, 1, 64}, 0, 8, 0, 1));
	EXPECT_FALSE(conn->send(mr.value(), 0, 8, 1));
	EXPECT_FALSE(conn->close());
	EXPECT_TRUE(mod.posts.empty());
	EXPECT_TRUE(mod.disconnects.empty());

	ASSERT_TRUE(moved.write(mr.value(), 0, {1, 1, 64}, 0, 8, 1));
	EXPECT_EQ(mod.posts.size(), 1u);
}

TEST_F(Fake, MoveAssignmentClosesTheConnectionItReplaces)
{
	Device dev = open();
	auto a = dev.connect(2);
	auto b = dev.connect(3);
	ASSERT_TRUE(a && b);
	a.value() = std::move(b.value());
	ASSERT_EQ(mod.disconnects.size(), 1u);
	EXPECT_EQ(mod.disconnects[0], 1u);
	EXPECT_EQ(a->id(), 2u);
	EXPECT_EQ(a->peer(), 3u);
}

TEST_F(Fake, MovedFromDeviceFailsClearly)
{
	Device dev = open();
	Device taken = std::move(dev);
	auto peers = dev.peers();
	ASSERT_FALSE(peers);
	EXPECT_EQ(peers.error().code(), std::errc::bad_file_descriptor);
	EXPECT_FALSE(dev.connect(2));
	EXPECT_FALSE(dev.poll());
	EXPECT_EQ(dev.overflow(), 0u);
	EXPECT_TRUE(taken.peers());
}

TEST_F(Fake, ConnectionKeepsTheFileOpenAfterTheDeviceIsGone)
{
	std::optional<multiedge::Connection> conn;
	{
		Device dev = open();
		auto c = dev.connect(2);
		ASSERT_TRUE(c);
		conn.emplace(std::move(c.value()));
	}
	ASSERT_TRUE(conn->close());
	EXPECT_EQ(mod.disconnects.size(), 1u);
}

// ---- the completion queue ---------------------------------------------------

TEST_F(Fake, PollConvertsStatusToPositiveErrno)
{
	mod.cq.push_back(kc(1));
	mod.cq.push_back(kc(2, ME_CQ_READ, -EACCES));
	mod.overflow = 3;
	Device dev = open();
	auto got = dev.poll();
	ASSERT_TRUE(got) << got.error().message();
	ASSERT_EQ(got->size(), 2u);
	EXPECT_TRUE(got.value()[0].ok());
	EXPECT_EQ(got.value()[0].len, 100u);
	EXPECT_EQ(got.value()[1].type, CompletionType::Read);
	EXPECT_EQ(got.value()[1].status, EACCES);
	EXPECT_FALSE(got.value()[1].ok());
	EXPECT_EQ(dev.overflow(), 3u);
	ASSERT_FALSE(mod.poll_calls.empty());
	EXPECT_EQ(mod.poll_calls.back().flags, 0u);
	EXPECT_EQ(mod.poll_calls.back().entry_size, sizeof(me_completion));
	EXPECT_TRUE(dev.poll()->empty());
}

TEST_F(Fake, PollRespectsMax)
{
	for (int i = 1; i <= 5; i++)
		mod.cq.push_back(kc(i));
	Device dev = open();
	auto got = dev.poll(2);
	ASSERT_TRUE(got);
	ASSERT_EQ(got->size(), 2u);
	EXPECT_EQ(got.value()[1].cookie, 2u);
	EXPECT_EQ(dev.poll(10)->size(), 3u);
	EXPECT_TRUE(dev.poll(0)->empty());
}

TEST_F(Fake, WaitForKeepsTheOthersForLater)
{
	for (int i = 1; i <= 4; i++)
		mod.cq.push_back(kc(i));
	Device dev = open();
	auto three = dev.wait_for(3, 1s);
	ASSERT_TRUE(three) << three.error().message();
	EXPECT_EQ(three->cookie, 3u);
	// The backlog comes first, in order, and holds 1, 2 and 4.
	auto rest = dev.poll(2);
	ASSERT_TRUE(rest);
	ASSERT_EQ(rest->size(), 2u);
	EXPECT_EQ(rest.value()[0].cookie, 1u);
	EXPECT_EQ(rest.value()[1].cookie, 2u);
	auto four = dev.wait_for(4, 0ms);
	ASSERT_TRUE(four);
	EXPECT_EQ(four->cookie, 4u);
}

TEST_F(Fake, WaitForACompletionThatComesLater)
{
	Device dev = open();
	mod.complete_later(kc(1), 20ms);
	mod.complete_later(kc(9, ME_CQ_SEND, -ENOBUFS), 40ms);
	auto nine = dev.wait_for(9, 5s);
	ASSERT_TRUE(nine) << nine.error().message();
	EXPECT_EQ(nine->status, ENOBUFS);
	EXPECT_TRUE(contains(nine->describe(), "receive queue is full"));
	// Waiting blocked in the module with the time left, not spinning.
	ASSERT_FALSE(mod.poll_calls.empty());
	EXPECT_EQ(mod.poll_calls.front().flags, ME_POLL_F_WAIT);
	EXPECT_GT(mod.poll_calls.front().timeout_ms, 4000u);
	auto one = dev.wait(64, 0ms);
	ASSERT_TRUE(one);
	ASSERT_EQ(one->size(), 1u);
	EXPECT_EQ(one->front().cookie, 1u);
}

TEST_F(Fake, WaitForTimesOut)
{
	mod.cq.push_back(kc(1));
	Device dev = open();
	auto t0 = std::chrono::steady_clock::now();
	auto none = dev.wait_for(5, 50ms);
	auto took = std::chrono::steady_clock::now() - t0;
	ASSERT_FALSE(none);
	EXPECT_EQ(none.error().code(), std::errc::timed_out);
	EXPECT_TRUE(contains(none.error().message(), "cookie 5")) << none.error().message();
	EXPECT_GE(took, 50ms);
	EXPECT_LT(took, 2s);
	// What it harvested meanwhile is still there.
	auto got = dev.poll();
	ASSERT_TRUE(got);
	ASSERT_EQ(got->size(), 1u);
	EXPECT_EQ(got->front().cookie, 1u);
}

TEST_F(Fake, WaitReturnsEmptyAfterTheTimeout)
{
	Device dev = open();
	auto got = dev.wait(8, 30ms);
	ASSERT_TRUE(got) << got.error().message();
	EXPECT_TRUE(got->empty());
}

TEST_F(Fake, WaitReturnsAsSoonAsOneIsThere)
{
	Device dev = open();
	mod.complete_later(kc(6), 10ms);
	auto t0 = std::chrono::steady_clock::now();
	auto got = dev.wait(8, 5s);
	ASSERT_TRUE(got);
	ASSERT_EQ(got->size(), 1u);
	EXPECT_LT(std::chrono::steady_clock::now() - t0, 2s);
}

TEST_F(Fake, ThreadsWaitingForDifferentCookiesEachGetTheirs)
{
	Device dev = open();
	constexpr int threads = 4;
	for (int i = 0; i < threads; i++)
		mod.complete_later(kc(100 + i), std::chrono::milliseconds(10 + 15 * (threads - i)));
	std::vector<std::thread> pool;
	std::vector<int> ok(threads, 0);
	for (int i = 0; i < threads; i++)
		pool.emplace_back([&, i] {
			auto c = dev.wait_for(100 + i, 5s);
			ok[i] = c && c->cookie == static_cast<std::uint64_t>(100 + i);
		});
	for (auto &t : pool)
		t.join();
	for (int i = 0; i < threads; i++)
		EXPECT_TRUE(ok[i]) << "thread " << i;
	EXPECT_TRUE(dev.poll()->empty());
}

// ---- the receive queue ------------------------------------------------------

TEST_F(Fake, RecvGrowsItsBufferForALongMessage)
{
	std::vector<std::byte> big(3000);
	for (std::size_t i = 0; i < big.size(); i++)
		big[i] = static_cast<std::byte>(i);
	mod.messages.push_back({4, 12, big});
	Device dev = open();
	auto m = dev.recv(0, 1s);
	ASSERT_TRUE(m) << m.error().message();
	EXPECT_EQ(m->peer, 4u);
	EXPECT_EQ(m->conn, 12u);
	EXPECT_EQ(m->data, big);
	ASSERT_EQ(mod.recv_calls.size(), 2u);
	EXPECT_EQ(mod.recv_calls[0].len, static_cast<unsigned>(ME_SEND_MAX_VER0));
	EXPECT_EQ(mod.recv_calls[0].flags, ME_RECV_F_WAIT);
	EXPECT_EQ(mod.recv_calls[1].len, 3000u);
}

TEST_F(Fake, RecvFiltersByPeerAndKeepsTheLength)
{
	mod.messages.push_back({4, 12, std::vector<std::byte>(10)});
	mod.messages.push_back({5, 13, std::vector<std::byte>(7, std::byte{1})});
	Device dev = open();
	auto m = dev.recv(5, 1s);
	ASSERT_TRUE(m) << m.error().message();
	EXPECT_EQ(m->peer, 5u);
	EXPECT_EQ(m->data.size(), 7u);
	EXPECT_EQ(mod.recv_calls[0].peer, 5u);
}

TEST_F(Fake, RecvTimesOut)
{
	Device dev = open();
	auto m = dev.recv(3, 20ms);
	ASSERT_FALSE(m);
	EXPECT_EQ(m.error().code(), std::errc::timed_out);
	EXPECT_TRUE(contains(m.error().message(), "no message from node 3")) << m.error().message();
	auto now = dev.recv(0, 0ms);
	ASSERT_FALSE(now);
	EXPECT_EQ(now.error().code(), std::errc::timed_out);
}

// ---- shared connections (ABI 18) --------------------------------------------

namespace {

class FakeShared : public Fake {
protected:
	void SetUp() override { mod.query.features |= ME_FEATURE_SHARED; }
};

} // namespace

// connect_shared() asks for the node pair's connection (no port, never
// ordered) and holds the join; a second one to the same peer is refused
// before any system call (the module keeps one join per file: the first
// leave would leave for both), another peer is fine, and once the first is
// closed (left) the peer can be joined again.
TEST_F(FakeShared, ConnectSharedJoinsOncePerPeer)
{
	Device dev = open();
	auto a = dev.connect_shared(7, 1500ms);
	ASSERT_TRUE(a) << a.error().message();
	EXPECT_TRUE(a->shared());
	EXPECT_EQ(a->peer(), 7u);
	ASSERT_EQ(mod.connects.size(), 1u);
	EXPECT_EQ(mod.connects[0].flags, ME_CONNECT_F_SHARED);
	EXPECT_EQ(mod.connects[0].port, 0u);
	EXPECT_EQ(mod.connects[0].peer, 7u);
	EXPECT_EQ(mod.connects[0].timeout_ms, 1500u);

	auto again = dev.connect_shared(7);
	ASSERT_FALSE(again);
	EXPECT_EQ(again.error().code(), std::errc::already_connected);
	EXPECT_TRUE(contains(again.error().message(),
			     "holds it already as connection " + std::to_string(a->id())))
		<< again.error().message();
	EXPECT_EQ(mod.connects.size(), 1u) << "the refused join reached the module";

	auto b = dev.connect_shared(8);
	ASSERT_TRUE(b) << b.error().message();
	EXPECT_NE(b->id(), a->id());
	// Another Device of the node joins the same connection: one per file.
	Device other = open();
	auto c = other.connect_shared(7);
	ASSERT_TRUE(c) << c.error().message();
	EXPECT_EQ(c->id(), a->id());

	const std::uint32_t id = a->id();
	ASSERT_TRUE(a->close());
	ASSERT_EQ(mod.disconnects.size(), 1u);
	EXPECT_EQ(mod.disconnects[0], id);
	auto rejoined = dev.connect_shared(7);
	ASSERT_TRUE(rejoined) << rejoined.error().message();
	EXPECT_EQ(rejoined->id(), id);
}

// A moved join is still the one join: the moved-from object leaves nothing,
// the peer stays taken until the object holding it is destroyed.
TEST_F(FakeShared, MovedJoinLeavesOnceWhenItsHolderGoes)
{
	Device dev = open();
	auto a = dev.connect_shared(7);
	ASSERT_TRUE(a) << a.error().message();
	{
		multiedge::Connection moved = std::move(a.value());
		EXPECT_TRUE(moved.shared());
		EXPECT_FALSE(a->shared());
		EXPECT_EQ(a->close().error().code(), std::errc::bad_file_descriptor);
		EXPECT_FALSE(dev.connect_shared(7));
		EXPECT_TRUE(mod.disconnects.empty());
	}
	EXPECT_EQ(mod.disconnects.size(), 1u);
	auto back = dev.connect_shared(7);
	EXPECT_TRUE(back) << back.error().message();
	// Move assignment over a join leaves it.
	auto x = dev.connect_shared(8);
	auto y = dev.connect_shared(9);
	ASSERT_TRUE(x && y);
	const std::uint32_t xid = x->id();
	x.value() = std::move(y.value());
	ASSERT_EQ(mod.disconnects.size(), 2u);
	EXPECT_EQ(mod.disconnects[1], xid);
	auto eight = dev.connect_shared(8);
	EXPECT_TRUE(eight) << "the replaced join still holds its peer: " << eight.error().message();
}

// A failed join frees its peer; the module's refusal carries a hint.
TEST_F(FakeShared, FailedJoinFreesThePeer)
{
	Device dev = open();
	mod.connect_err = -ETIMEDOUT;
	auto a = dev.connect_shared(7, 250ms);
	ASSERT_FALSE(a);
	EXPECT_EQ(a.error().code(), std::errc::timed_out);
	EXPECT_TRUE(contains(a.error().message(), "cannot join the shared connection to node 7"))
		<< a.error().message();
	EXPECT_TRUE(contains(a.error().message(), "within 250 ms")) << a.error().message();
	mod.connect_err = -ENOSPC;
	auto full = dev.connect_shared(7);
	ASSERT_FALSE(full);
	EXPECT_TRUE(contains(full.error().message(), "shared connections joined"))
		<< full.error().message();
	mod.connect_err = 0;
	EXPECT_TRUE(dev.connect_shared(7));
}

// While one thread's join is in the module, another's to the same peer
// is refused at once (it would be a second join of the same file).
TEST_F(FakeShared, ConcurrentJoinOfOnePeerIsRefused)
{
	Device dev = open();
	mod.hold_connects = true;
	std::optional<multiedge::Result<multiedge::Connection>> first;
	std::thread t([&] { first.emplace(dev.connect_shared(7)); });
	while (mod.connects_held.load() == 0)
		std::this_thread::sleep_for(1ms);
	auto second = dev.connect_shared(7);
	mod.hold_connects = false;
	t.join();
	ASSERT_FALSE(second);
	EXPECT_EQ(second.error().code(), std::errc::already_connected);
	EXPECT_TRUE(contains(second.error().message(), "another thread")) << second.error().message();
	ASSERT_TRUE(first.has_value());
	ASSERT_TRUE(first->ok()) << first->error().message();
	EXPECT_EQ(mod.connects.size(), 1u);
}

// A module before ABI 18: the library says so, and asks the module nothing
// (it would refuse the flag, and take a port for a nonzero unknown field).
TEST_F(Fake, SharedCallsOnAnOlderModuleSayWhy)
{
	mod.query.abi_version = 17;
	Device dev = open();
	auto a = dev.connect_shared(7);
	ASSERT_FALSE(a);
	EXPECT_EQ(a.error().code(), std::errc::operation_not_supported);
	EXPECT_TRUE(contains(a.error().message(), "ABI 17")) << a.error().message();
	EXPECT_TRUE(contains(a.error().message(), "ABI 18 or newer")) << a.error().message();
	EXPECT_TRUE(mod.connects.empty());

	std::vector<char> buf(64);
	auto mr = dev.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(mr);
	auto conn = dev.connect(2);
	ASSERT_TRUE(conn);
	auto st = conn->send_to(5001, mr.value(), 0, 8, 1);
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::operation_not_supported);
	EXPECT_TRUE(contains(st.error().message(), "ABI 18")) << st.error().message();
	EXPECT_TRUE(mod.posts.empty());
	// Plain sends still carry the 72-byte struct with a zero port, which
	// an older module takes (a larger struct with a zero tail).
	ASSERT_TRUE(conn->send(mr.value(), 0, 8, 2));
	ASSERT_EQ(mod.posts.size(), 1u);
	EXPECT_EQ(mod.posts[0].size, static_cast<unsigned>(ME_POST_SIZE_VER1));
	EXPECT_EQ(mod.posts[0].port, 0u);
	EXPECT_EQ(mod.posts[0].__reserved, 0u);
}

// send_to() names the port; send() names none; port 0 is refused before
// any system call; the module's refusals carry hints.
TEST_F(FakeShared, SendToNamesThePort)
{
	Device dev = open();
	std::vector<char> buf(64);
	auto mr = dev.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(mr);
	auto conn = dev.connect_shared(2);
	ASSERT_TRUE(conn) << conn.error().message();
	ASSERT_TRUE(conn->send_to(5001, mr.value(), 4, 20, 1, multiedge::Post::NonBlocking));
	ASSERT_TRUE(conn->send_to(65535, mr.value(), 0, 8, 2));
	ASSERT_EQ(mod.posts.size(), 2u);
	const me_post &s = mod.posts[0];
	EXPECT_EQ(s.opcode, static_cast<unsigned>(ME_OP_SEND));
	EXPECT_EQ(s.port, 5001u);
	EXPECT_EQ(s.conn, conn->id());
	EXPECT_EQ(s.local_off, 4u);
	EXPECT_EQ(s.len, 20u);
	EXPECT_EQ(s.cookie, 1u);
	EXPECT_EQ(s.flags, ME_POST_F_NONBLOCK);
	EXPECT_EQ(s.remote_region, 0u);
	EXPECT_EQ(s.__reserved, 0u);
	EXPECT_EQ(mod.posts[1].port, 65535u);

	auto none = conn->send_to(0, mr.value(), 0, 8, 3);
	ASSERT_FALSE(none);
	EXPECT_EQ(none.error().code(), std::errc::destination_address_required);
	EXPECT_TRUE(contains(none.error().message(), "port 0 names no Device"))
		<< none.error().message();
	EXPECT_EQ(mod.posts.size(), 2u);

	// The module refuses a plain send on a shared connection...
	mod.post_err = -EDESTADDRREQ;
	auto plain = conn->send(mr.value(), 0, 8, 4);
	ASSERT_FALSE(plain);
	EXPECT_EQ(plain.error().code(), std::errc::destination_address_required);
	EXPECT_TRUE(contains(plain.error().message(), "send_to")) << plain.error().message();
	EXPECT_EQ(mod.posts.back().port, 0u);
	// ... and a port on a connection that is not shared.
	mod.post_err = -EINVAL;
	auto own = dev.connect(3);
	ASSERT_TRUE(own);
	EXPECT_FALSE(own->shared());
	auto wrong = own->send_to(5001, mr.value(), 0, 8, 5);
	ASSERT_FALSE(wrong);
	EXPECT_EQ(wrong.error().code(), std::errc::invalid_argument);
	EXPECT_TRUE(contains(wrong.error().message(), "is not shared")) << wrong.error().message();
	// An empty Connection says so, port or not.
	multiedge::Connection gone = std::move(own.value());
	auto empty = own->send_to(0, mr.value(), 0, 8, 6);
	ASSERT_FALSE(empty);
	EXPECT_EQ(empty.error().code(), std::errc::bad_file_descriptor);
}

TEST(Describe, RefusedSendToAPortSaysNobodyIsBound)
{
	Completion c;
	c.cookie = 3;
	c.type = CompletionType::Send;
	c.status = ECONNREFUSED;
	c.conn = 6;
	EXPECT_EQ(c.describe(), "send (cookie 3) on connection 6 failed: Connection refused (no "
				"Device of the peer is bound to the port the send named)");
}

TEST_F(FakeShared, RecvGivesTheSendersPort)
{
	mod.messages.push_back({4, 12, std::vector<std::byte>(3), 5001});
	mod.messages.push_back({4, 13, std::vector<std::byte>(3)});
	Device dev = open();
	auto m = dev.recv(0, 1s);
	ASSERT_TRUE(m) << m.error().message();
	EXPECT_EQ(m->port, 5001u);
	EXPECT_EQ(mod.recv_calls.back().size, static_cast<unsigned>(ME_RECV_SIZE_VER1));
	auto n = dev.recv(0, 1s);
	ASSERT_TRUE(n) << n.error().message();
	EXPECT_EQ(n->port, 0u);
}

// accept() of a shared connection's message gives a Connection that tells
// the module nothing when it goes: a DISCONNECT there would leave the
// join of this Device's connect_shared() Connection.  A message with a
// port came on a shared connection; one without is looked up.
TEST_F(FakeShared, AcceptOfASharedMessageNeverLeaves)
{
	me_conn_info listed{};
	listed.conn = 13;
	listed.peer = 4;
	listed.state = ME_CONN_S_ESTABLISHED;
	listed.flags = ME_CONN_I_SHARED;
	mod.conns.push_back(listed);
	Device dev = open();
	multiedge::Message with_port{4, 12, {}, 5001};
	multiedge::Message unbound_sender{4, 13, {}, 0};
	multiedge::Message plain{4, 14, {}, 0};
	{
		auto a = dev.accept(with_port);
		ASSERT_TRUE(a) << a.error().message();
		EXPECT_TRUE(a->shared());
		auto b = dev.accept(unbound_sender);
		ASSERT_TRUE(b) << b.error().message();
		EXPECT_TRUE(b->shared());
		auto c = dev.accept(plain);
		ASSERT_TRUE(c) << c.error().message();
		EXPECT_FALSE(c->shared());
		ASSERT_TRUE(a->close());
		EXPECT_EQ(a->id(), 0u);
	}
	ASSERT_EQ(mod.disconnects.size(), 1u) << "a shared connection was disconnected";
	EXPECT_EQ(mod.disconnects[0], 14u);
}

TEST_F(Fake, ConnectionsSayShared)
{
	me_conn_info c{};
	c.conn = 1;
	c.peer = 2;
	c.state = ME_CONN_S_ESTABLISHED;
	c.flags = ME_CONN_I_SHARED | ME_CONN_I_ACTIVE;
	mod.conns.push_back(c);
	c.conn = 2;
	c.flags = ME_CONN_I_ACTIVE;
	mod.conns.push_back(c);
	Device dev = open();
	auto conns = dev.connections();
	ASSERT_TRUE(conns) << conns.error().message();
	ASSERT_EQ(conns->size(), 2u);
	EXPECT_TRUE(conns.value()[0].shared);
	EXPECT_TRUE(conns.value()[0].active);
	EXPECT_FALSE(conns.value()[0].ordered);
	EXPECT_FALSE(conns.value()[1].shared);
}

// ---- remote atomics (ABI 19) ------------------------------------------------

namespace {

using multiedge::AtomicOp;

class FakeAtomic : public Fake {
protected:
	static constexpr unsigned char kUntouched = 0xa5;
	std::vector<unsigned char> buf = std::vector<unsigned char>(256, kUntouched);
	multiedge::RemoteRegion remote{21, 0x01234567'0000feedull, 1 << 20};

	void SetUp() override { mod.query.features |= ME_FEATURE_ATOMIC; }

	// The `size` bytes at buf[off] in host order.
	std::uint64_t at(std::size_t off, std::uint32_t size) const
	{
		if (size == 4) {
			std::uint32_t v;
			std::memcpy(&v, &buf[off], 4);
			return v;
		}
		std::uint64_t v;
		std::memcpy(&v, &buf[off], 8);
		return v;
	}
	// Whether buf[from, to) was left alone.
	bool untouched(std::size_t from, std::size_t to) const
	{
		return std::all_of(buf.begin() + static_cast<std::ptrdiff_t>(from),
				   buf.begin() + static_cast<std::ptrdiff_t>(to),
				   [](unsigned char c) { return c == kUntouched; });
	}
};

} // namespace

// Every operation but compare-and-swap, at both sizes: the post names the
// operation and the size, the target as a write's does, and the operand is
// in the local buffer, in host order, when the module reads it (nothing
// else is written; AtomicOp::Read writes nothing).
TEST_F(FakeAtomic, AtomicPostsTheOpAndPutsTheOperandWhereTheModuleReadsIt)
{
	Device dev = open();
	auto mr = dev.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(mr);
	auto conn = dev.connect(2);
	ASSERT_TRUE(conn);
	const std::pair<AtomicOp, std::uint32_t> ops[] = {
		{AtomicOp::Add, ME_ATOMIC_ADD},		{AtomicOp::And, ME_ATOMIC_AND},
		{AtomicOp::Or, ME_ATOMIC_OR},		{AtomicOp::Xor, ME_ATOMIC_XOR},
		{AtomicOp::Swap, ME_ATOMIC_SWAP},	{AtomicOp::SignedMin, ME_ATOMIC_SMIN},
		{AtomicOp::SignedMax, ME_ATOMIC_SMAX},	{AtomicOp::UnsignedMin, ME_ATOMIC_UMIN},
		{AtomicOp::UnsignedMax, ME_ATOMIC_UMAX}, {AtomicOp::Read, ME_ATOMIC_READ},
	};
	std::uint64_t cookie = 100;
	for (std::uint32_t size : {4u, 8u}) {
		for (const auto &[op, imm] : ops) {
			SCOPED_TRACE("op " + std::to_string(imm) + " size " + std::to_string(size));
			std::fill(buf.begin(), buf.end(), kUntouched);
			const std::uint64_t operand = 0xfedcba98'76543210ull + cookie;
			const auto how = cookie % 2 ? multiedge::Post::NonBlocking
						    : multiedge::Post::Blocking;
			auto st = conn->atomic(op, mr.value(), 40, remote, 4096 + size, size, operand,
					       cookie, how);
			ASSERT_TRUE(st) << st.error().message();
			const me_post &p = mod.posts.back();
			EXPECT_EQ(p.size, sizeof(me_post));
			EXPECT_EQ(p.opcode, static_cast<unsigned>(ME_OP_ATOMIC));
			EXPECT_EQ(p.imm, imm);
			EXPECT_EQ(p.len, size);
			EXPECT_EQ(p.conn, conn->id());
			EXPECT_EQ(p.cookie, cookie);
			EXPECT_EQ(p.flags, cookie % 2 ? ME_POST_F_NONBLOCK : 0u);
			EXPECT_EQ(p.local_region, mr->id());
			EXPECT_EQ(p.local_off, 40u);
			EXPECT_EQ(p.remote_region, 21u);
			EXPECT_EQ(p.remote_key, 0xfeedu);
			EXPECT_EQ(p.remote_key_hi, 0x1234567u);
			EXPECT_EQ(p.remote_off, 4096u + size);
			EXPECT_EQ(p.port, 0u);
			EXPECT_EQ(p.__reserved, 0u);
			ASSERT_FALSE(mod.atomics.empty());
			if (op == AtomicOp::Read) {
				EXPECT_TRUE(untouched(0, buf.size()));
			} else {
				const std::uint64_t want = size == 4 ? operand & 0xffffffffu : operand;
				EXPECT_EQ(mod.atomics.back().operand, want);
				EXPECT_EQ(at(40, size), want);
				EXPECT_TRUE(untouched(0, 40));
				EXPECT_TRUE(untouched(40 + size, buf.size()));
			}
			cookie++;
		}
	}
	EXPECT_EQ(mod.posts.size(), 20u);
}

// compare_swap(): desired, then expected in the size bytes after it; the
// post's len is the size, not the range.
TEST_F(FakeAtomic, CompareSwapPutsDesiredThenExpected)
{
	Device dev = open();
	auto mr = dev.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(mr);
	auto conn = dev.connect(2);
	ASSERT_TRUE(conn);
	for (std::uint32_t size : {4u, 8u}) {
		SCOPED_TRACE(size);
		std::fill(buf.begin(), buf.end(), kUntouched);
		const std::uint64_t expected = 0x11111111'22222222ull, desired = 0x33333333'44444444ull;
		auto st = conn->compare_swap(mr.value(), 16, remote, 64, size, expected, desired, 7);
		ASSERT_TRUE(st) << st.error().message();
		const me_post &p = mod.posts.back();
		EXPECT_EQ(p.opcode, static_cast<unsigned>(ME_OP_ATOMIC));
		EXPECT_EQ(p.imm, static_cast<unsigned>(ME_ATOMIC_CSWAP));
		EXPECT_EQ(p.len, size);
		EXPECT_EQ(p.local_off, 16u);
		EXPECT_EQ(p.remote_off, 64u);
		EXPECT_EQ(p.cookie, 7u);
		const std::uint64_t mask = size == 4 ? 0xffffffffull : ~0ull;
		ASSERT_FALSE(mod.atomics.empty());
		EXPECT_EQ(mod.atomics.back().operand, desired & mask);
		EXPECT_EQ(mod.atomics.back().compare, expected & mask);
		EXPECT_EQ(at(16, size), desired & mask);
		EXPECT_EQ(at(16 + size, size), expected & mask);
		EXPECT_TRUE(untouched(0, 16));
		EXPECT_TRUE(untouched(16 + 2 * size, buf.size()));
	}
}

// What the library can see is refused before any post reaches the module,
// and nothing is written into the local buffer.
TEST_F(FakeAtomic, BadAtomicsAreRefusedBeforeAnyPostWithNothingWritten)
{
	Device dev = open();
	auto mr = dev.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(mr);
	auto conn = dev.connect(2);
	ASSERT_TRUE(conn);
	const std::uint64_t len = buf.size();
	auto refused = [&](multiedge::Status st, std::errc code, const std::string &says) {
		ASSERT_FALSE(st) << says;
		EXPECT_EQ(st.error().code(), code) << st.error().message();
		EXPECT_TRUE(contains(st.error().message(), says)) << st.error().message();
	};
	for (std::uint32_t size : {0u, 1u, 2u, 3u, 5u, 7u, 16u}) {
		SCOPED_TRACE(size);
		refused(conn->atomic(AtomicOp::Add, mr.value(), 0, remote, 0, size, 1, 1),
			std::errc::invalid_argument, "4 or 8 bytes, not " + std::to_string(size));
		refused(conn->compare_swap(mr.value(), 0, remote, 0, size, 1, 2, 1),
			std::errc::invalid_argument, "4 or 8 bytes");
	}
	for (std::uint32_t op : {0u, 12u, 0xffffffffu})
		refused(conn->atomic(static_cast<AtomicOp>(op), mr.value(), 0, remote, 0, 8, 1, 1),
			std::errc::invalid_argument, "unknown AtomicOp " + std::to_string(op));
	refused(conn->atomic(AtomicOp::CompareSwap, mr.value(), 0, remote, 0, 8, 1, 1),
		std::errc::invalid_argument, "compare_swap()");
	// The local range: size bytes, 2 * size for compare_swap.
	refused(conn->atomic(AtomicOp::Add, mr.value(), len - 4, remote, 0, 8, 1, 1),
		std::errc::result_out_of_range, "is outside local region");
	refused(conn->atomic(AtomicOp::Add, mr.value(), len - 7, remote, 0, 8, 1, 1),
		std::errc::result_out_of_range, "[249, +8) is outside local region");
	refused(conn->compare_swap(mr.value(), len - 15, remote, 0, 8, 1, 2, 1),
		std::errc::result_out_of_range, "[241, +16) is outside local region");
	refused(conn->atomic(AtomicOp::Read, mr.value(), len - 2, remote, 0, 4, 1, 1),
		std::errc::result_out_of_range, "is outside local region");
	refused(conn->atomic(AtomicOp::Add, mr.value(), len + 1, remote, 0, 4, 1, 1),
		std::errc::result_out_of_range, "is outside local region");
	refused(conn->atomic(AtomicOp::Add, mr.value(), ~0ull - 3, remote, 0, 8, 1, 1),
		std::errc::result_out_of_range, "is outside local region");
	refused(conn->compare_swap(mr.value(), len - 8, remote, 0, 8, 1, 2, 1),
		std::errc::result_out_of_range, "+16) is outside local region");
	refused(conn->compare_swap(mr.value(), len - 12, remote, 0, 8, 1, 2, 1),
		std::errc::result_out_of_range, "the value compared with");
	// What every post refuses.
	refused(conn->atomic(AtomicOp::Add, mr.value(), 0, remote, 0, 8, 1, 1,
			     static_cast<multiedge::Post>(8)),
		std::errc::invalid_argument, "unknown Post bits");
	Device other = open();
	auto omr = other.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(omr);
	refused(conn->atomic(AtomicOp::Swap, omr.value(), 0, remote, 0, 8, 1, 1),
		std::errc::invalid_argument, "registered on another Device");
	refused(conn->compare_swap(omr.value(), 0, remote, 0, 8, 1, 2, 1),
		std::errc::invalid_argument, "registered on another Device");
	multiedge::MemoryRegion moved = std::move(omr.value());
	refused(conn->atomic(AtomicOp::Swap, omr.value(), 0, remote, 0, 8, 1, 1),
		std::errc::invalid_argument, "region is empty");
	multiedge::Connection gone = std::move(conn.value());
	refused(conn->atomic(AtomicOp::Swap, mr.value(), 0, remote, 0, 8, 1, 1),
		std::errc::bad_file_descriptor, "cannot post atomic");
	refused(conn->compare_swap(mr.value(), 0, remote, 0, 8, 1, 2, 1),
		std::errc::bad_file_descriptor, "cannot post compare_swap");

	EXPECT_TRUE(mod.posts.empty());
	EXPECT_TRUE(untouched(0, buf.size()));
	// The last byte is usable: nothing is off by one.
	EXPECT_TRUE(gone.atomic(AtomicOp::Add, mr.value(), len - 8, remote, 0, 8, 1, 2));
	EXPECT_TRUE(gone.compare_swap(mr.value(), len - 16, remote, 0, 8, 1, 2, 3));
	EXPECT_EQ(mod.posts.size(), 2u);
}

// A module before ABI 19: the library says what to load and asks it
// nothing (it would refuse the opcode as unknown).
TEST_F(Fake, AtomicsOnAModuleWithoutThemSayWhy)
{
	mod.query.abi_version = 18;
	Device dev = open();
	std::vector<unsigned char> buf(64, 0xa5);
	auto mr = dev.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(mr);
	auto conn = dev.connect(2);
	ASSERT_TRUE(conn);
	multiedge::Status st[] = {
		conn->atomic(multiedge::AtomicOp::Add, mr.value(), 0, {1, 1, 64}, 0, 8, 1, 1),
		conn->compare_swap(mr.value(), 0, {1, 1, 64}, 0, 8, 1, 2, 2),
	};
	for (const auto &s : st) {
		ASSERT_FALSE(s);
		EXPECT_EQ(s.error().code(), std::errc::operation_not_supported);
		EXPECT_TRUE(contains(s.error().message(), "has no remote atomics")) << s.error().message();
		EXPECT_TRUE(contains(s.error().message(), "(ABI 18)")) << s.error().message();
		EXPECT_TRUE(contains(s.error().message(), "ABI 19 or newer")) << s.error().message();
	}
	EXPECT_TRUE(mod.posts.empty());
	EXPECT_TRUE(std::all_of(buf.begin(), buf.end(), [](unsigned char c) { return c == 0xa5; }));
}

// The value found lands where the operand was; the completion is an
// Atomic of the size; atomic_value() reads it back, zero-extended.
TEST_F(FakeAtomic, TheValueFoundIsReadFromTheLocalBuffer)
{
	Device dev = open();
	auto mr = dev.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(mr);
	auto conn = dev.connect(2);
	ASSERT_TRUE(conn);
	mod.atomic_found = 0x80000000'00000005ull;
	ASSERT_TRUE(conn->atomic(AtomicOp::Add, mr.value(), 8, remote, 0, 8, 3, 41));
	auto c = dev.wait_for(41, 1s);
	ASSERT_TRUE(c) << c.error().message();
	EXPECT_EQ(c->type, CompletionType::Atomic);
	EXPECT_TRUE(c->ok());
	EXPECT_EQ(c->len, 8u);
	EXPECT_EQ(c->describe(), "atomic (cookie 41) on connection " + std::to_string(conn->id()) +
					 " done: 8 bytes");
	auto v = multiedge::atomic_value(mr.value(), 8, 8);
	ASSERT_TRUE(v) << v.error().message();
	EXPECT_EQ(v.value(), 0x80000000'00000005ull);

	mod.atomic_found = 0xdeadbeef'fffffffeull;
	ASSERT_TRUE(conn->compare_swap(mr.value(), 100, remote, 0, 4, /*expected=*/0x77,
				       /*desired=*/1, 42));
	c = dev.wait_for(42, 1s);
	ASSERT_TRUE(c) << c.error().message();
	EXPECT_EQ(c->type, CompletionType::Atomic);
	EXPECT_EQ(c->len, 4u);
	v = multiedge::atomic_value(mr.value(), 100, 4);
	ASSERT_TRUE(v) << v.error().message();
	EXPECT_EQ(v.value(), 0xfffffffeu);
	EXPECT_EQ(static_cast<std::int32_t>(v.value()), -2);
	EXPECT_EQ(at(104, 4), 0x77u) << "the value compared with, after it, was overwritten";
	EXPECT_TRUE(untouched(108, buf.size()));

	auto bad = multiedge::atomic_value(mr.value(), 0, 2);
	ASSERT_FALSE(bad);
	EXPECT_EQ(bad.error().code(), std::errc::invalid_argument);
	bad = multiedge::atomic_value(mr.value(), buf.size() - 4, 8);
	ASSERT_FALSE(bad);
	EXPECT_EQ(bad.error().code(), std::errc::result_out_of_range);
	EXPECT_TRUE(multiedge::atomic_value(mr.value(), buf.size() - 8, 8));
	multiedge::MemoryRegion moved = std::move(mr.value());
	bad = multiedge::atomic_value(mr.value(), 0, 8);
	ASSERT_FALSE(bad);
	EXPECT_TRUE(contains(bad.error().message(), "region is empty")) << bad.error().message();
}

// The module's refusals at posting carry hints that fit an atomic.
TEST_F(FakeAtomic, RefusalsOfTheModuleSayWhatFits)
{
	Device dev = open();
	auto mr = dev.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(mr);
	auto conn = dev.connect(2);
	ASSERT_TRUE(conn);
	mod.post_err = -ERANGE;
	auto st = conn->compare_swap(mr.value(), 0, remote, ~0ull - 4, 8, 1, 2, 1);
	ASSERT_FALSE(st);
	EXPECT_EQ(st.error().code(), std::errc::result_out_of_range);
	EXPECT_TRUE(contains(st.error().message(), "cannot post compare_swap")) << st.error().message();
	EXPECT_TRUE(contains(st.error().message(), "[0, +16)")) << st.error().message();
	EXPECT_TRUE(contains(st.error().message(), "wraps around")) << st.error().message();
	mod.post_err = -EAGAIN;
	st = conn->atomic(AtomicOp::Add, mr.value(), 0, remote, 0, 8, 1, 2,
			  multiedge::Post::NonBlocking);
	ASSERT_FALSE(st);
	EXPECT_TRUE(contains(st.error().message(), "cannot post atomic")) << st.error().message();
	EXPECT_TRUE(contains(st.error().message(), "harvest completions")) << st.error().message();
}

TEST(Describe, AtomicRefusalsOfTheTargetSayWhy)
{
	Completion c;
	c.cookie = 5;
	c.type = CompletionType::Atomic;
	c.conn = 2;
	c.status = EINVAL;
	EXPECT_EQ(c.describe(), "atomic (cookie 5) on connection 2 failed: Invalid argument (the "
				"target memory is not aligned to the atomic's size (4 or 8 bytes))");
	c.status = EACCES;
	EXPECT_TRUE(contains(c.describe(), "Access::RemoteReadWrite")) << c.describe();
	c.status = ERANGE;
	EXPECT_TRUE(contains(c.describe(), "outside the target region")) << c.describe();
	c.status = ETIMEDOUT;
	EXPECT_TRUE(contains(c.describe(), "may or may not have taken effect")) << c.describe();
	// Not a write's: no alignment there.
	c.type = CompletionType::Write;
	c.status = EINVAL;
	EXPECT_EQ(c.describe(), "write (cookie 5) on connection 2 failed: Invalid argument");
	c.status = EACCES;
	EXPECT_FALSE(contains(c.describe(), "RemoteReadWrite")) << c.describe();
}

// ---- the loopback (ABI 20) ------------------------------------------------------

// This node as a connection: posts carry ME_CONN_LOOPBACK, close() tells
// the module nothing, and messages name it.
TEST_F(Fake, LoopbackPostsOnThisNodeAndGivesNothingBack)
{
	mod.query.features |= ME_FEATURE_LOOPBACK;
	mod.query.node_id = 0x1234;
	Device dev = open();
	std::vector<unsigned char> buf(64);
	auto mr = dev.register_memory(buf.data(), buf.size(), multiedge::Access::None);
	ASSERT_TRUE(mr);
	auto lb = dev.loopback();
	ASSERT_TRUE(lb) << lb.error().message();
	EXPECT_TRUE(lb->loopback());
	EXPECT_FALSE(lb->shared());
	EXPECT_EQ(lb->id(), ME_CONN_LOOPBACK);
	EXPECT_EQ(lb->peer(), 0x1234u);
	ASSERT_TRUE(lb->write(mr.value(), 0, {5, 6, 64}, 8, 16, 1));
	ASSERT_EQ(mod.posts.size(), 1u);
	EXPECT_EQ(mod.posts[0].conn, ME_CONN_LOOPBACK);
	mod.post_err = -EOPNOTSUPP;
	auto st = lb->send(mr.value(), 0, 8, 2);
	ASSERT_FALSE(st);
	EXPECT_TRUE(contains(st.error().message(), "on connection loopback")) << st.error().message();
	EXPECT_TRUE(contains(st.error().message(), "carries no sends")) << st.error().message();
	EXPECT_TRUE(lb->close());
	EXPECT_TRUE(mod.disconnects.empty());

	Completion c;
	c.cookie = 3;
	c.type = CompletionType::Read;
	c.status = EACCES;
	c.conn = ME_CONN_LOOPBACK;
	EXPECT_TRUE(contains(c.describe(), "on connection loopback failed")) << c.describe();
}

TEST_F(Fake, LoopbackOnAModuleWithoutItSaysWhy)
{
	mod.query.abi_version = 19;
	Device dev = open();
	auto lb = dev.loopback();
	ASSERT_FALSE(lb);
	EXPECT_EQ(lb.error().code(), std::errc::operation_not_supported);
	EXPECT_TRUE(contains(lb.error().message(), "(ABI 19)")) << lb.error().message();
	EXPECT_TRUE(contains(lb.error().message(), "ABI 20 or newer")) << lb.error().message();
}
