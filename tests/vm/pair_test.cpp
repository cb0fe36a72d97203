// Sustained mixed load between two guests (issue 14), run in each of them
// by tests/vm/run-pair under `scripts/vm --nodes 2 --links M`: the load of
// mixed_test (mixed_load.hpp) over QEMU's emulated NICs, where a receiver
// that falls behind drops frames in bursts (the conditions in which
// ordered connections froze for 5-23 s).  Each guest loads the module,
// attaches eth0..eth(M-1), waits for the other node on every link, trades
// region ids and keys with it over a send, runs the load for
// ME_MIXED_SECONDS (default 20) seconds, and trades its final counts.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <thread>

#include "cluster.hpp"
#include "mixed_load.hpp"
#include "module_util.hpp"

using namespace metest;
using multiedge::Device;
using multiedge::Ordering;
using multiedge::RemoteRegion;
using namespace std::chrono_literals;

namespace {

int env_int(const char *name, int fallback)
{
	const char *s = std::getenv(name);
	return s && *s ? std::atoi(s) : fallback;
}

constexpr uint64_t kHello = 0x6d65706169720001ull;	// "mepair", version 1

struct Bootstrap {
	uint64_t magic;
	RemoteRegion src, dst;
};

class PairTest : public ::testing::Test {
protected:
	void SetUp() override
	{
		if (env_int("ME_NODES", 0) != 2)
			GTEST_SKIP() << "run in two guests: scripts/vm --nodes 2 --links 2 -- "
					"tests/vm/run-pair RESULTS build/bin/guest/pair_test";
		node_ = env_int("ME_NODE", 0);
		links_ = env_int("ME_LINKS", 1);
		ASSERT_FALSE(module_loaded());
		ASSERT_EQ(load_module(), 0);
		auto d = Device::open();
		ME_ASSERT_OK(d);
		dev_.emplace(std::move(d).value());
		for (int l = 0; l < links_; l++) {
			std::string ifn = "eth" + std::to_string(l);
			ASSERT_EQ(sh("ip link set " + ifn + " up"), 0);
			ME_ASSERT_OK(dev_->attach_link(ifn));
		}
	}

	void TearDown() override
	{
		dev_.reset();
		if (!module_loaded())
			return;
		int err = unload_module();
		for (int i = 0; i < 100 && (err == EBUSY || err == EAGAIN); i++) {
			std::this_thread::sleep_for(100ms);
			err = unload_module();
		}
		EXPECT_EQ(err, 0) << "cannot unload multiedge: " << errno_name(err);
	}

	// The other node, once alive on every link.
	uint32_t wait_peer()
	{
		auto deadline = std::chrono::steady_clock::now() + 30s;
		while (std::chrono::steady_clock::now() < deadline) {
			auto p = dev_->peers();
			if (p)
				for (const auto &pi : p.value())
					if (pi.alive && std::popcount(pi.alive_links) == links_)
						return pi.node_id;
			std::this_thread::sleep_for(50ms);
		}
		return 0;
	}

	int node_ = 0, links_ = 1;
	std::optional<Device> dev_;
};

TEST_F(PairTest, MixedOrderedAndUnorderedLoad)
{
	const uint64_t seed = test_seed(0x271828);
	const int secs = mixed_seconds(20);
	std::printf("node %d: seed %llu, %d s, %d link(s)\n", node_,
		    static_cast<unsigned long long>(seed), secs, links_);
	const uint32_t peer = wait_peer();
	ASSERT_NE(peer, 0u) << "the other guest is not alive on all " << links_ << " links";

	MixedNode me;
	ASSERT_TRUE(me.setup(*dev_, node_, seed));
	for (Ordering o : {Ordering::Ordered, Ordering::Unordered}) {
		auto cn = dev_->connect(peer, o, 10s);
		ME_ASSERT_OK(cn);
		me.conns.push_back(std::move(cn).value());
	}

	// Trade region ids and keys.
	Bootstrap mine{kHello, multiedge::remote_of(*me.mr_src), multiedge::remote_of(*me.mr_dst)};
	std::memcpy(me.msgs->data(), &mine, sizeof(mine));
	ME_ASSERT_OK(me.conns[1].send(*me.mr_msgs, 0, sizeof(mine), 1));
	auto sent = dev_->wait_for(1, 30s);
	ME_ASSERT_OK(sent);
	ASSERT_EQ(sent->status, 0) << sent->describe();
	auto m = dev_->recv(peer, 60s);
	ME_ASSERT_OK(m);
	Bootstrap theirs{};
	ASSERT_EQ(m->data.size(), sizeof(theirs));
	std::memcpy(&theirs, m->data.data(), sizeof(theirs));
	ASSERT_EQ(theirs.magic, kHello);
	me.set_peer(theirs.src, theirs.dst);

	std::atomic<bool> stop{false};
	MixedResult r = run_mixed(me, secs, stop, true);
	std::string counters = mixed_counters(*dev_, "  ");
	std::printf("%s\n%s", r.summary(node_).c_str(), counters.c_str());
	RecordProperty("max_ms_ordered", std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
						r.max_lat[0]).count()));
	EXPECT_EQ(r.failure, "") << counters;
	ASSERT_TRUE(r.peer_final);
	std::set<uint64_t> want;
	for (uint64_t k = 0; k < r.peer_sends; k++)
		want.insert((uint64_t(1 - node_) + 1) << 48 | k);
	EXPECT_EQ(r.msgs_got, want) << "messages from the other node";
	EXPECT_EQ(r.notified, r.peer_notifies) << "notifications (each exactly once)";
	EXPECT_GT(r.by_kind[kMixedWrite] + r.by_kind[kMixedNotify], 0u);
	EXPECT_GT(r.by_kind[kMixedRead], 0u);

	// The other node may still wait for an ack of its last message: stay
	// on the wire a moment before the module goes.
	std::this_thread::sleep_for(2s);
	me.release();
}

} // namespace
