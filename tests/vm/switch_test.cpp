// Guest tests of a switched cluster (issue 15): N nodes (namespaces), each
// with one NIC per rail, every rail a Linux bridge (Cluster::add_switch),
// so every NIC reaches every other node.
//
// The mesh workload: every node writes into a slot of every other node's
// region, reads it back and writes it again with a notification, every
// byte checked at the target (the test process sees every node's memory)
// and in the read-back, every notify counted at its target.  One thread
// per node drives its own Device.
//
// Then what a cluster does to it: a node that joins late, one that leaves
// (its namespace, and so its engine, goes), a cable pulled at the switch
// on one node only, and a one-way failure (one node's transmissions on a
// rail dropped by netem on its egress while it still receives): no
// connection between nodes that stay may fail, and the failover time is
// measured and printed.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "cluster.hpp"
#include "module_util.hpp"
#include "streams.hpp"

using namespace metest;
using multiedge::Access;
using multiedge::Completion;
using multiedge::CompletionType;
using multiedge::Connection;
using multiedge::Device;
using multiedge::MemoryRegion;
using multiedge::RemoteRegion;
using Clock = std::chrono::steady_clock;
using Side = Cluster::Side;

namespace {

constexpr size_t kMaxNodes = 8;
constexpr uint32_t kMaxOp = 256u << 10;		// largest operation
constexpr size_t kSlot = 2 * kMaxOp;		// a sender's slot in a target
constexpr size_t kSrcLen = kMaxOp + 8192;	// room for unaligned offsets
constexpr auto kOpTimeout = std::chrono::seconds(30);

double ms_since(Clock::time_point t0, Clock::time_point t)
{
	return std::chrono::duration<double, std::milli>(t - t0).count();
}

uint32_t log_uniform(std::mt19937_64 &g, uint32_t max)
{
	std::uniform_real_distribution<double> d(0.0, std::log2(static_cast<double>(max)));
	return std::clamp<uint32_t>(static_cast<uint32_t>(std::exp2(d(g))), 1, max);
}

uint64_t uniform(std::mt19937_64 &g, uint64_t lo, uint64_t hi)
{
	return std::uniform_int_distribution<uint64_t>(lo, hi)(g);
}

// One node's memory in the mesh: a source, a target with one slot per
// sender, and a buffer for read-backs.
struct MeshNode {
	Buffer src{kSrcLen}, dst{kSlot * kMaxNodes}, back{kSrcLen};
	std::optional<MemoryRegion> mr_src, mr_dst, mr_back;
	RemoteRegion rdst;			// mr_dst as its senders name it
	std::map<int, Connection> conns;	// to each other node, by index
};

struct NodeResult {
	std::vector<std::string> failures;	// ops toward nodes that stay
	uint64_t ops = 0, bytes = 0;
	std::set<int> lost_peers;		// tolerant peers whose ops failed
	std::chrono::nanoseconds max_lat{0};
};

class Mesh {
public:
	Mesh(Cluster &c, uint64_t seed) : c_(c), seed_(seed) {}

	// Registers node n's memory (its source filled from the seed).
	::testing::AssertionResult add(int n)
	{
		auto &m = nodes_[n];
		m = std::make_unique<MeshNode>();
		if (!m->src.data() || !m->dst.data() || !m->back.data())
			return ::testing::AssertionFailure() << "no memory for node " << n;
		fill_random(m->src.data(), kSrcLen, seed_ * 131 + static_cast<unsigned>(n));
		Device &d = c_.dev(n);
		auto s = d.register_memory(m->src.data(), kSrcLen, Access::None);
		auto t = d.register_memory(m->dst.data(), kSlot * kMaxNodes, Access::RemoteReadWrite);
		auto b = d.register_memory(m->back.data(), kSrcLen, Access::None);
		if (!s || !t || !b)
			return ::testing::AssertionFailure()
			       << "node " << n << ": cannot register: "
			       << (!s ? s.error().message() : !t ? t.error().message() : b.error().message());
		m->mr_src.emplace(std::move(s).value());
		m->mr_dst.emplace(std::move(t).value());
		m->mr_back.emplace(std::move(b).value());
		m->rdst = multiedge::remote_of(*m->mr_dst);
		return ::testing::AssertionSuccess();
	}

	// Opens a connection from every node of `from` to every node of `to`
	// it has none to yet.
	::testing::AssertionResult connect(const std::vector<int> &from, const std::vector<int> &to)
	{
		for (int i : from)
			for (int j : to) {
				if (i == j || nodes_[i]->conns.count(j))
					continue;
				auto conn = c_.dev(i).connect(c_.id(j));
				if (!conn)
					return ::testing::AssertionFailure()
					       << "node " << i << " -> node " << j << ": "
					       << conn.error().message();
				nodes_[i]->conns.emplace(j, std::move(conn).value());
			}
		return ::testing::AssertionSuccess();
	}

	// Every node of `senders` runs `rounds` rounds toward every node of
	// `targets` (each round: a write, a read-back and a write with notify
	// to each target, all targets at once).  Ops toward a node of
	// `tolerant` may fail: that node is then left alone.  `during` runs on
	// the calling thread while they work (progress() says how far they are).
	std::vector<NodeResult> run(const std::vector<int> &senders, const std::vector<int> &targets,
				    int rounds, const std::set<int> &tolerant = {},
				    const std::function<void()> &during = {})
	{
		std::vector<NodeResult> res(senders.size());
		std::vector<std::thread> threads;
		for (size_t k = 0; k < senders.size(); k++)
			threads.emplace_back([&, k] {
				sender(senders[k], targets, rounds, tolerant, res[k]);
			});
		if (during)
			during();
		for (auto &t : threads)
			t.join();
		return res;
	}

	uint64_t progress() const { return rounds_done_.load(); }

	// Takes every target's Notify completions until each has all the
	// notifies its senders' successful write_notify ops promised; says
	// what is missing, duplicated or wrong.
	::testing::AssertionResult collect_notifies(const std::vector<int> &targets)
	{
		for (int j : targets) {
			std::set<uint32_t> want;
			{
				std::lock_guard lk(mu_);
				want = expected_[j];
				expected_[j].clear();
			}
			std::set<uint32_t> got;
			auto deadline = Clock::now() + std::chrono::seconds(10);
			while (got.size() < want.size() && Clock::now() < deadline) {
				auto cs = c_.dev(j).wait(64, std::chrono::milliseconds(200));
				if (!cs)
					return ::testing::AssertionFailure() << cs.error().message();
				for (const Completion &comp : cs.value()) {
					// A node that left ends its connections
					// when it goes: their events may come late.
					if ((comp.type == CompletionType::ConnClosed ||
					     comp.type == CompletionType::ConnDead) &&
					    gone_.count(comp.peer))
						continue;
					if (comp.type != CompletionType::Notify)
						return ::testing::AssertionFailure()
						       << "node " << j << ": unexpected " << comp.describe();
					if (!want.count(comp.imm))
						return ::testing::AssertionFailure()
						       << "node " << j << ": notify " << comp.imm
						       << " was not sent to it";
					if (!got.insert(comp.imm).second)
						return ::testing::AssertionFailure()
						       << "node " << j << ": notify " << comp.imm << " twice";
					const int from = static_cast<int>(comp.imm >> 24);
					if (comp.peer != c_.id(from) || comp.region != nodes_.at(j)->rdst.id ||
					    comp.off / kSlot != static_cast<uint64_t>(from) ||
					    (comp.off % kSlot) + comp.len > kSlot)
						return ::testing::AssertionFailure()
						       << "node " << j << ": notify " << comp.imm
						       << " names peer " << comp.peer << " region " << comp.region
						       << " offset " << comp.off << " length " << comp.len;
				}
			}
			if (got.size() != want.size())
				return ::testing::AssertionFailure()
				       << "node " << j << " got " << got.size() << " of " << want.size()
				       << " notifies";
		}
		return ::testing::AssertionSuccess();
	}

	// Drops node n's own connections and regions, so its namespace can
	// go; senders working meanwhile never touch them (its memory stays).
	void retire(int n)
	{
		MeshNode &m = *nodes_.at(n);
		gone_.insert(c_.id(n));
		m.conns.clear();
		m.mr_src.reset();
		m.mr_dst.reset();
		m.mr_back.reset();
	}

	// Drops every connection to node n (no sender may be running).
	void forget(int n)
	{
		retire(n);
		for (auto &[i, m] : nodes_)
			m->conns.erase(n);
	}

	// Everything registered, before the cluster goes.
	void release()
	{
		for (auto &[i, m] : nodes_)
			if (m) {
				m->conns.clear();
				m->mr_src.reset();
				m->mr_dst.reset();
				m->mr_back.reset();
			}
	}

private:
	struct Op {
		int peer;
		uint64_t so, doff, cookie;
		uint32_t len, imm;
		Clock::time_point posted;
	};

	void sender(int i, const std::vector<int> &targets, int rounds, const std::set<int> &tolerant,
		    NodeResult &r)
	{
		MeshNode &me = *nodes_.at(i);
		Device &dev = c_.dev(i);
		std::mt19937_64 g(seed_ ^ (0x9e37ull * static_cast<unsigned>(i + 1)));
		uint64_t cookie = 1;
		uint32_t seq = 0;
		auto fail = [&](int j, const std::string &what) {
			if (tolerant.count(j))
				r.lost_peers.insert(j);
			else
				r.failures.push_back("node " + std::to_string(i) + " -> node " +
						     std::to_string(j) + ": " + what);
		};
		// Posts one kind of op to every target, waits for them all,
		// checks each with `check`.
		auto phase = [&](int kind, std::vector<Op> &ops) {
			for (Op &op : ops) {
				Connection &conn = me.conns.at(op.peer);
				const RemoteRegion &rdst = nodes_.at(op.peer)->rdst;
				op.cookie = cookie++;
				op.posted = Clock::now();
				multiedge::Status st =
					kind == 0 ? conn.write(*me.mr_src, op.so, rdst, op.doff, op.len, op.cookie) :
					kind == 1 ? conn.read(*me.mr_back, op.so, rdst, op.doff, op.len, op.cookie) :
						    conn.write_notify(*me.mr_src, op.so, rdst, op.doff, op.len,
								      op.imm, op.cookie);
				if (!st) {
					fail(op.peer, "post: " + st.error().message());
					op.cookie = 0;
				}
			}
			for (Op &op : ops) {
				if (!op.cookie)
					continue;
				auto done = dev.wait_for(op.cookie, kOpTimeout);
				if (!done) {
					fail(op.peer, "wait: " + done.error().message());
					continue;
				}
				r.max_lat = std::max(r.max_lat, Clock::now() - op.posted);
				if (!done->ok()) {
					fail(op.peer, done->describe());
					continue;
				}
				const uint8_t *want = me.src.data() + op.so;
				const uint8_t *at = nodes_.at(op.peer)->dst.data() + op.doff;
				if (kind == 1)
					want = at, at = me.back.data() + op.so;
				long diff = first_difference(at, want, op.len);
				if (diff >= 0) {
					fail(op.peer, std::string(kind == 1 ? "read-back" : "target") +
							      " differs at byte " + std::to_string(diff) + " of " +
							      std::to_string(op.len));
					continue;
				}
				r.ops++;
				r.bytes += op.len;
				if (kind == 2) {
					std::lock_guard lk(mu_);
					expected_[op.peer].insert(op.imm);
				}
			}
		};
		for (int round = 0; round < rounds; round++) {
			std::vector<Op> ops;
			for (int j : targets) {
				if (j == i || r.lost_peers.count(j))
					continue;
				Op op{};
				op.peer = j;
				op.len = log_uniform(g, kMaxOp);
				op.so = uniform(g, 0, kSrcLen - op.len);
				op.doff = static_cast<uint64_t>(i) * kSlot + uniform(g, 0, kSlot - op.len);
				op.imm = (static_cast<uint32_t>(i) << 24) | (seq++ & 0xffffff);
				ops.push_back(op);
			}
			for (int kind = 0; kind < 3; kind++) {
				std::erase_if(ops, [&](const Op &op) { return r.lost_peers.count(op.peer); });
				phase(kind, ops);
			}
			rounds_done_++;
		}
	}

	Cluster &c_;
	uint64_t seed_;
	std::map<int, std::unique_ptr<MeshNode>> nodes_;
	std::mutex mu_;
	std::map<int, std::set<uint32_t>> expected_;	// notifies owed to each target
	std::set<uint32_t> gone_;	// ids of nodes retired: their connections end
	std::atomic<uint64_t> rounds_done_{0};
};

std::vector<int> range(int from, int to)
{
	std::vector<int> v;
	for (int i = from; i < to; i++)
		v.push_back(i);
	return v;
}

uint64_t sum_ops(const std::vector<NodeResult> &res, uint64_t *bytes = nullptr)
{
	uint64_t ops = 0, b = 0;
	for (const auto &r : res) {
		ops += r.ops;
		b += r.bytes;
	}
	if (bytes)
		*bytes = b;
	return ops;
}

::testing::AssertionResult no_failures(const std::vector<NodeResult> &res)
{
	for (const auto &r : res)
		if (!r.failures.empty())
			return ::testing::AssertionFailure()
			       << r.failures.size() << " operation(s) failed, first: " << r.failures[0];
	return ::testing::AssertionSuccess();
}

// The neighbour entry of node n for (link slot, peer id), if any.
std::optional<multiedge::NeighbourInfo> neighbour(Device &d, uint32_t link, uint32_t peer)
{
	auto nbrs = d.neighbours();
	if (!nbrs)
		return std::nullopt;
	for (const auto &nb : nbrs.value())
		if (nb.link == link && nb.node_id == peer)
			return nb;
	return std::nullopt;
}

class SwitchTest : public ClusterTest {
protected:
	// `nodes` nodes, each plugged into each of `rails` switches in rail
	// order (so a node's link slot r is rail r); started, every node
	// seeing every other alive on every rail.
	void make_cluster(int nodes, int rails)
	{
		for (int r = 0; r < rails; r++)
			ASSERT_EQ(c_->add_switch(), r);
		for (int n = 0; n < nodes; n++)
			ASSERT_EQ(c_->add_node(), n);
		for (int r = 0; r < rails; r++)
			for (int n = 0; n < nodes; n++)
				ASSERT_EQ(c_->plug(n, r), r * nodes + n);
		ASSERT_TRUE(c_->start());
		ASSERT_NO_FATAL_FAILURE(wait_all(range(0, nodes), static_cast<unsigned>(rails)));
		rails_ = rails;
		nodes_ = nodes;
	}

	void wait_all(const std::vector<int> &nodes, unsigned links)
	{
		for (int a : nodes) {
			for (int b : nodes) {
				if (a == b)
					continue;
				ASSERT_TRUE(c_->wait_peer(a, b, links, std::chrono::seconds(15)));
			}
		}
	}

	// The port of node n on rail r (make_cluster's order).
	int port(int n, int r) const { return r * nodes_ + n; }

	uint64_t seed(uint64_t fallback)
	{
		const uint64_t s = test_seed(fallback);
		RecordProperty("seed", std::to_string(s));
		std::printf("seed %" PRIu64 " (ME_TEST_SEED to repeat)\n", s);
		return s;
	}

	int rails_ = 0, nodes_ = 0;
};

} // namespace

// Four nodes on two rails: every node writes to, reads from and notifies
// every other; both rails carry each node's traffic; every node sees every
// other on both rails at that peer's MAC address there.
TEST_F(SwitchTest, FourNodesTwoRailsAllToAll)
{
	ASSERT_NO_FATAL_FAILURE(make_cluster(4, 2));
	// Neighbours: 3 per link, alive both ways, at the right address.
	for (int a = 0; a < 4; a++) {
		auto nbrs = c_->dev(a).neighbours();
		ME_ASSERT_OK(nbrs);
		EXPECT_EQ(nbrs->size(), 6u) << "node " << a;
		for (int b = 0; b < 4; b++)
			for (uint32_t r = 0; r < 2 && a != b; r++) {
				auto nb = neighbour(c_->dev(a), r, c_->id(b));
				ASSERT_TRUE(nb) << "node " << a << " has no neighbour " << b << " on rail " << r;
				EXPECT_TRUE(nb->alive && nb->rx && nb->heard);
				char mac[18];
				std::snprintf(mac, sizeof(mac), "%02x:%02x:%02x:%02x:%02x:%02x", nb->mac[0],
					      nb->mac[1], nb->mac[2], nb->mac[3], nb->mac[4], nb->mac[5]);
				EXPECT_EQ(mac, c_->mac_of(b, c_->port(port(b, static_cast<int>(r))).if_node))
					<< "node " << a << "'s address of node " << b << " on rail " << r;
			}
		auto links = c_->dev(a).links();
		ME_ASSERT_OK(links);
		for (const auto &l : links.value()) {
			EXPECT_EQ(l.nbrs, 3u);
			EXPECT_EQ(l.nbrs_alive, 3u);
			EXPECT_EQ(l.peer_node, 0u) << "several neighbours: no single peer";
		}
	}

	Mesh mesh(*c_, seed(0x5c4));
	for (int n = 0; n < 4; n++)
		ASSERT_TRUE(mesh.add(n));
	ASSERT_TRUE(mesh.connect(range(0, 4), range(0, 4)));
	std::vector<uint64_t> tx0[4];
	for (int n = 0; n < 4; n++) {
		auto links = c_->dev(n).links();
		ME_ASSERT_OK(links);
		for (const auto &l : links.value())
			tx0[n].push_back(l.tx_bytes);
	}
	auto t0 = Clock::now();
	auto res = mesh.run(range(0, 4), range(0, 4), 8);
	double secs = ms_since(t0, Clock::now()) / 1000;
	EXPECT_TRUE(no_failures(res));
	EXPECT_TRUE(mesh.collect_notifies(range(0, 4)));
	uint64_t bytes = 0, ops = sum_ops(res, &bytes);
	EXPECT_EQ(ops, 4u * 3 * 8 * 3) << "every operation completes";
	std::printf("4 nodes x 2 rails: %" PRIu64 " operations, %.1f MiB in %.1f s\n", ops,
		    static_cast<double>(bytes) / (1 << 20), secs);
	for (int n = 0; n < 4; n++) {
		auto links = c_->dev(n).links();
		ME_ASSERT_OK(links);
		for (size_t r = 0; r < 2; r++)
			EXPECT_GT(links.value()[r].tx_bytes - tx0[n][r], 64u << 10)
				<< "node " << n << " rail " << r << " carried (almost) nothing";
		auto nbrs = c_->dev(n).neighbours();
		ME_ASSERT_OK(nbrs);
		for (const auto &nb : nbrs.value())
			EXPECT_GT(nb.rx_pkts, 0u) << "node " << n << " heard nothing from " << nb.node_id
						  << " on link " << nb.link;
	}
	mesh.release();
}

// Eight nodes on one switch, all to all.
TEST_F(SwitchTest, EightNodesOneRailAllToAll)
{
	ASSERT_NO_FATAL_FAILURE(make_cluster(8, 1));
	for (int a = 0; a < 8; a++) {
		auto peers = c_->dev(a).peers();
		ME_ASSERT_OK(peers);
		EXPECT_EQ(peers->size(), 7u) << "node " << a;
	}
	Mesh mesh(*c_, seed(0x5c8));
	for (int n = 0; n < 8; n++)
		ASSERT_TRUE(mesh.add(n));
	ASSERT_TRUE(mesh.connect(range(0, 8), range(0, 8)));
	auto t0 = Clock::now();
	auto res = mesh.run(range(0, 8), range(0, 8), 3);
	double secs = ms_since(t0, Clock::now()) / 1000;
	EXPECT_TRUE(no_failures(res));
	EXPECT_TRUE(mesh.collect_notifies(range(0, 8)));
	uint64_t bytes = 0, ops = sum_ops(res, &bytes);
	EXPECT_EQ(ops, 8u * 7 * 3 * 3);
	std::printf("8 nodes x 1 rail: %" PRIu64 " operations, %.1f MiB in %.1f s\n", ops,
		    static_cast<double>(bytes) / (1 << 20), secs);
	mesh.release();
}

// A node joins a running cluster and takes part; then one leaves in the
// middle of a run (its namespace and engine go, as when its host unloads
// the module): operations toward it fail, every other goes on.
TEST_F(SwitchTest, NodeJoinsLateAndOneLeaves)
{
	ASSERT_NO_FATAL_FAILURE(make_cluster(3, 2));
	Mesh mesh(*c_, seed(0x10e));
	for (int n = 0; n < 3; n++)
		ASSERT_TRUE(mesh.add(n));
	ASSERT_TRUE(mesh.connect(range(0, 3), range(0, 3)));
	auto res = mesh.run(range(0, 3), range(0, 3), 2);
	ASSERT_TRUE(no_failures(res));
	ASSERT_TRUE(mesh.collect_notifies(range(0, 3)));

	// Node 3 joins on both rails.
	ASSERT_EQ(c_->add_node(), 3);
	ASSERT_GE(c_->plug(3, 0), 0);
	ASSERT_GE(c_->plug(3, 1), 0);
	auto t_join = Clock::now();
	ASSERT_TRUE(c_->start_node(3));
	ASSERT_NO_FATAL_FAILURE(wait_all(range(0, 4), 2));
	std::printf("node 3 seen by all and seeing all on both rails %.0f ms after it attached\n",
		    ms_since(t_join, Clock::now()));
	ASSERT_TRUE(mesh.add(3));
	ASSERT_TRUE(mesh.connect(range(0, 4), range(0, 4)));
	res = mesh.run(range(0, 4), range(0, 4), 2);
	ASSERT_TRUE(no_failures(res));
	ASSERT_TRUE(mesh.collect_notifies(range(0, 4)));

	// Nodes 0, 1 and 3 work with everyone; node 2 goes once they are under
	// way.  Its own Device and regions go first (the namespace cannot
	// die while they live).
	std::vector<int> stay = {0, 1, 3};
	Clock::time_point t_leave;
	res = mesh.run(stay, range(0, 4), 6, {2}, [&] {
		while (mesh.progress() < 3 * 2 + 4 * 2 + 3)
			std::this_thread::sleep_for(std::chrono::milliseconds(2));
		t_leave = Clock::now();
		mesh.retire(2);
		EXPECT_TRUE(c_->delete_node(2));
	});
	EXPECT_TRUE(no_failures(res)) << "an operation between nodes that stay failed";
	for (size_t k = 0; k < res.size(); k++)
		std::printf("node %d: %" PRIu64 " operations, lost node 2: %s\n", stay[k], res[k].ops,
			    res[k].lost_peers.count(2) ? "yes" : "no (finished before)");
	EXPECT_TRUE(mesh.collect_notifies(stay));
	// The others forget it: no path to it stays alive.
	for (int n : stay) {
		auto deadline = Clock::now() + std::chrono::seconds(10);
		for (;;) {
			auto peers = c_->dev(n).peers();
			ME_ASSERT_OK(peers);
			bool alive = std::any_of(peers->begin(), peers->end(), [&](const auto &p) {
				return p.node_id == c_->id(2) && p.alive;
			});
			if (!alive)
				break;
			ASSERT_LT(Clock::now(), deadline) << "node " << n << " still sees node 2 alive";
			std::this_thread::sleep_for(std::chrono::milliseconds(10));
		}
	}
	std::printf("node 2 no longer alive anywhere %.0f ms after it left\n",
		    ms_since(t_leave, Clock::now()));
	// The three that stay still work together.
	mesh.forget(2);
	res = mesh.run(stay, stay, 1);
	EXPECT_TRUE(no_failures(res));
	EXPECT_TRUE(mesh.collect_notifies(stay));
	mesh.release();
}

namespace {

// A neighbour entry to watch: (node's Device, link slot, peer id).
struct Watch {
	Device *dev;
	uint32_t link, peer;
};

// What a fault did, in ms from the moment it took effect: when each
// watched neighbour was taken down, if it was within the limit.  A time
// below 0 is a path taken down before the peer's engine had processed the
// last frame sent before the fault: its receive ring was that far behind
// (seen at 0.4-2 s under a loaded TCG host), so "took effect" is late by
// as much; it is not a path left in use.
struct Failover {
	double effective_ms = -1;	// since the fault command began
	std::vector<double> down_ms;
	std::vector<bool> went_down;
};

// Runs `fault` (a command) and times it: the moment it took effect is the
// last time `cut`'s frame counter moved (a neighbour that stops hearing
// anything when the fault is in: the guest takes a while to run `tc` or
// `ip`, and the fault starts somewhere inside it); then, for each watched
// neighbour, when its alive flag fell.
Failover time_fault(const std::function<void()> &fault, const Watch &cut,
		    const std::vector<Watch> &watch, std::chrono::milliseconds limit)
{
	std::atomic<bool> done{false};
	Clock::time_point t0 = Clock::now(), last_rx = t0;
	std::vector<Clock::time_point> down(watch.size());
	std::vector<bool> seen(watch.size(), false);
	std::thread poll([&] {
		uint64_t rx = 0;
		size_t left = watch.size();
		while (Clock::now() - t0 <= limit && (left || !done)) {
			auto now = Clock::now();
			auto nb = neighbour(*cut.dev, cut.link, cut.peer);
			if (nb && nb->rx_pkts != rx) {
				rx = nb->rx_pkts;
				last_rx = now;
			}
			for (size_t i = 0; i < watch.size(); i++) {
				if (seen[i])
					continue;
				auto w = neighbour(*watch[i].dev, watch[i].link, watch[i].peer);
				if (w && !w->alive) {
					seen[i] = true;
					down[i] = now;
					left--;
				}
			}
			std::this_thread::sleep_for(std::chrono::milliseconds(1));
		}
	});
	fault();
	done = true;
	poll.join();
	Failover f;
	f.effective_ms = ms_since(t0, last_rx);
	for (size_t i = 0; i < watch.size(); i++) {
		f.went_down.push_back(seen[i]);
		f.down_ms.push_back(seen[i] ? ms_since(last_rx, down[i]) : -1);
	}
	return f;
}

} // namespace

// A cable pulled at the switch on one node's rail 1: that node and its
// peers use rail 0 alone toward each other, the other pairs keep both
// rails; nothing fails.  Plugged back, both rails come back.
TEST_F(SwitchTest, CablePulledOnOneNode)
{
	ASSERT_NO_FATAL_FAILURE(make_cluster(3, 2));
	Streams st(*c_, {{0, 1}, {1, 0}, {2, 0}, {1, 2}}, seed(0xcab));
	ASSERT_TRUE(st.start());
	std::this_thread::sleep_for(std::chrono::milliseconds(500));
	auto t_pull = Clock::now();
	Failover f = time_fault([&] { EXPECT_TRUE(c_->set_port(port(0, 1), false, Side::Switch)); },
				{&c_->dev(1), 1, c_->id(0)},
				{{&c_->dev(0), 1, c_->id(1)}, {&c_->dev(1), 1, c_->id(0)}},
				std::chrono::seconds(5));
	double down0 = f.down_ms[0], down1 = f.down_ms[1];
	std::this_thread::sleep_for(std::chrono::milliseconds(500));
	auto t_back = Clock::now();
	// Nodes 1 and 2 still reach each other on both rails.
	EXPECT_TRUE(c_->wait_peer(1, 2, 2, std::chrono::seconds(2)));
	ASSERT_TRUE(c_->set_port(port(0, 1), true, Side::Switch));
	ASSERT_NO_FATAL_FAILURE(wait_all(range(0, 3), 2));
	double up = ms_since(t_back, Clock::now());
	std::this_thread::sleep_for(std::chrono::milliseconds(300));
	st.stop();
	std::printf("cable pulled (in effect %.0f ms into the command): node 0's path down after "
		    "%.0f ms at node 0, %.0f ms at node 1; plugged back: both rails alive everywhere "
		    "after %.0f ms\n",
		    f.effective_ms, down0, down1, up);
	EXPECT_TRUE(f.went_down[0]) << "node 0 still uses its unplugged rail";
	EXPECT_TRUE(f.went_down[1]) << "node 1 still uses the unplugged rail toward node 0";
	for (const auto &s : st.streams()) {
		EXPECT_TRUE(s.failures.empty()) << s.from << " -> " << s.to << ": " << s.failures.size()
						<< " failure(s), first: " << s.failures.front();
		EXPECT_GT(Streams::done_after(s, t_pull + std::chrono::milliseconds(300)), 0u)
			<< s.from << " -> " << s.to << " stopped";
		std::printf("  %d -> %d: %" PRIu64 " writes, longest pause %.0f ms\n", s.from, s.to, s.ops,
			    Streams::longest_gap_ms(s, t_pull, t_back));
	}
	if (HasFailure())
		for (int n = 0; n < 3; n++)
			dump_node(c_->dev(n), n);
	st.release();
}

// A one-way failure: node 0 can no longer transmit on rail 1 (netem drops
// all its egress there) but still receives.  Both sides take the path
// down and move the traffic to rail 0; no write fails; the time is printed.
// When the fault goes, rail 1 comes back.
TEST_F(SwitchTest, OneWayFailureMovesTrafficToTheOtherRail)
{
	ASSERT_NO_FATAL_FAILURE(make_cluster(3, 2));
	Streams st(*c_, {{0, 1}, {1, 0}, {2, 0}, {1, 2}}, seed(0x1a7));
	ASSERT_TRUE(st.start());
	std::this_thread::sleep_for(std::chrono::milliseconds(500));
	ASSERT_EQ(modprobe("sch_netem"), 0) << "the guest kernel has no netem";
	auto t_cmd = Clock::now();
	Failover f = time_fault(
		[&] { EXPECT_TRUE(c_->port_qdisc(port(0, 1), Side::Node, "netem loss 100%")); },
		{&c_->dev(1), 1, c_->id(0)},
		{{&c_->dev(0), 1, c_->id(1)}, {&c_->dev(1), 1, c_->id(0)}, {&c_->dev(2), 1, c_->id(0)}},
		std::chrono::seconds(5));
	auto t_fault = t_cmd + std::chrono::microseconds(static_cast<int64_t>(f.effective_ms * 1000));
	double down0 = f.down_ms[0], down1 = f.down_ms[1], down2 = f.down_ms[2];
	// Let the failover settle, then check rail 1 carries nothing more
	// between node 0 and its peers in either direction.
	std::this_thread::sleep_for(std::chrono::milliseconds(200));
	auto n01 = neighbour(c_->dev(0), 1, c_->id(1));
	auto n10 = neighbour(c_->dev(1), 1, c_->id(0));
	auto t_settled = Clock::now();
	std::this_thread::sleep_for(std::chrono::milliseconds(700));
	auto m01 = neighbour(c_->dev(0), 1, c_->id(1));
	auto m10 = neighbour(c_->dev(1), 1, c_->id(0));
	auto t_heal = Clock::now();
	ASSERT_TRUE(c_->port_qdisc(port(0, 1), Side::Node, ""));
	ASSERT_NO_FATAL_FAILURE(wait_all(range(0, 3), 2));
	double up = ms_since(t_heal, Clock::now());
	std::this_thread::sleep_for(std::chrono::milliseconds(300));
	st.stop();

	std::printf("one-way failure (node 0 cannot send on rail 1; in effect %.0f ms into the "
		    "command): path down after %.0f ms at node 0, %.0f ms at node 1, %.0f ms at "
		    "node 2; healed: rail 1 alive everywhere after %.0f ms\n",
		    f.effective_ms, down0, down1, down2, up);
	EXPECT_TRUE(f.went_down[0]) << "node 0 never took its mute rail down";
	EXPECT_TRUE(f.went_down[1]) << "node 1 never took the path to node 0 on rail 1 down";
	EXPECT_TRUE(f.went_down[2]) << "node 2 never took the path to node 0 on rail 1 down";
	ASSERT_TRUE(n01 && n10 && m01 && m10);
	EXPECT_EQ(m01->tx_pkts, n01->tx_pkts) << "node 0 still sends data on its mute rail";
	EXPECT_EQ(m10->tx_pkts, n10->tx_pkts) << "node 1 still sends data to node 0 on rail 1";
	double worst = 0;
	for (const auto &s : st.streams()) {
		EXPECT_TRUE(s.failures.empty()) << s.from << " -> " << s.to << ": " << s.failures.size()
						<< " failure(s), first: " << s.failures.front();
		EXPECT_GT(Streams::done_after(s, t_settled), 0u) << s.from << " -> " << s.to << " stopped";
		double base = Streams::longest_gap_ms(s, t_fault - std::chrono::milliseconds(400), t_fault);
		double gap = Streams::longest_gap_ms(s, t_fault, t_heal);
		if (s.from == 0 || s.to == 0)
			worst = std::max(worst, gap);
		std::printf("  %d -> %d: %" PRIu64 " writes; longest pause %.0f ms after the fault "
			    "(%.0f ms in the 400 ms before)\n",
			    s.from, s.to, s.ops, gap, base);
	}
	double detect = *std::max_element(f.down_ms.begin(), f.down_ms.end());
	std::printf("failover time: every side off the mute path %.0f ms after the fault, longest "
		    "pause of a stream through node 0 %.0f ms\n", detect, worst);
	if (HasFailure())
		for (int n = 0; n < 3; n++)
			dump_node(c_->dev(n), n);
	RecordProperty("failover_ms", std::to_string(static_cast<int>(detect)));
	RecordProperty("failover_pause_ms", std::to_string(static_cast<int>(worst)));
	st.release();
}
