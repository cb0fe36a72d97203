// Sustained mixed load between two nodes of one guest (issue 14): two
// namespaces joined by one or two veth pairs, each node keeping 16
// operations in flight to the other on an ordered and an unordered
// connection for ME_MIXED_SECONDS (default 20) seconds (mixed_load.hpp).
// No operation slower than kMixedBound, every byte checked, every
// notification and message exactly once.  pair_test runs the same load
// between two guests.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdio>
#include <set>
#include <thread>

#include "cluster.hpp"
#include "mixed_load.hpp"

using namespace metest;
using multiedge::Ordering;

namespace {

class MixedTest : public ClusterTest {
protected:
	void run(unsigned links);
};

void MixedTest::run(unsigned links)
{
	ASSERT_NO_FATAL_FAILURE(make_pair(links));
	const uint64_t seed = test_seed(0x314159);
	RecordProperty("seed", std::to_string(seed));
	const int secs = mixed_seconds(20);
	std::printf("seed %llu, %d s, %u link(s)\n", static_cast<unsigned long long>(seed), secs,
		    links);

	MixedNode nodes[2];
	for (int n = 0; n < 2; n++)
		ASSERT_TRUE(nodes[n].setup(c_->dev(n), n, seed));
	for (int n = 0; n < 2; n++) {
		nodes[n].set_peer(multiedge::remote_of(*nodes[1 - n].mr_src),
				  multiedge::remote_of(*nodes[1 - n].mr_dst));
		for (Ordering o : {Ordering::Ordered, Ordering::Unordered}) {
			auto cn = c_->dev(n).connect(c_->id(1 - n), o);
			ME_ASSERT_OK(cn);
			nodes[n].conns.push_back(std::move(cn).value());
		}
	}

	std::atomic<bool> stop{false};
	MixedResult res[2];
	std::thread t0([&] { res[0] = run_mixed(nodes[0], secs, stop, false); });
	std::thread t1([&] { res[1] = run_mixed(nodes[1], secs, stop, false); });
	t0.join();
	t1.join();
	for (int n = 0; n < 2; n++)
		mixed_drain(nodes[n], res[n]);
	std::string counters;
	for (int n = 0; n < 2; n++)
		counters += mixed_counters(c_->dev(n), "  node " + std::to_string(n) + " ");
	for (int n = 0; n < 2; n++) {
		std::printf("%s\n", res[n].summary(n).c_str());
		RecordProperty("max_ms_ordered_node" + std::to_string(n),
			       std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
						      res[n].max_lat[0]).count()));
		EXPECT_EQ(res[n].failure, "") << "node " << n << "\n" << counters;
	}
	std::printf("%s", counters.c_str());
	for (int n = 0; n < 2; n++) {
		const MixedResult &peer = res[1 - n];
		std::set<uint64_t> want;
		for (uint64_t k = 0; k < peer.msgs_sent; k++)
			want.insert((uint64_t(1 - n) + 1) << 48 | k);
		EXPECT_EQ(res[n].msgs_got, want) << "messages to node " << n;
		EXPECT_EQ(res[n].notified, peer.by_kind[kMixedNotify])
			<< "notifications at node " << n << " (each exactly once)";
		EXPECT_GT(res[n].by_kind[kMixedWrite] + res[n].by_kind[kMixedNotify], 0u) << "node " << n << " wrote nothing";
		EXPECT_GT(res[n].by_kind[kMixedRead], 0u) << "node " << n << " read nothing";
	}
	for (auto &n : nodes)
		n.release();
}

} // namespace

TEST_F(MixedTest, OrderedAndUnorderedOneLink)
{
	run(1);
}

TEST_F(MixedTest, OrderedAndUnorderedTwoLinks)
{
	run(2);
}
