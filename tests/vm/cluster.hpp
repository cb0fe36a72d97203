// Guest tests: a cluster of multiedge nodes inside one guest.
//
// Each node is a network namespace (the module makes every namespace a node
// with its own id); links are veth pairs between two namespaces.  One test
// process drives every node: a Device opened while the calling thread is in
// a node's namespace keeps acting there (open_in()).
//
//   Cluster c;
//   int a = c.add_node(), b = c.add_node();
//   c.add_link(a, b, 9000);
//   ASSERT_TRUE(c.start());             // open a Device per node, attach links
//   ASSERT_TRUE(c.wait_peer(a, b, 1));  // discovery both ways
//   auto conn = c.dev(a).connect(c.id(b));
//
// Also: take a link end down, tc netem on a link, delete a node's
// namespace, and the module's accounting after the fact.
//
// Switches: add_switch() makes a Linux bridge in the cluster's "switch"
// namespace; plug(n, sw) gives node n a link whose other end is a port of
// that bridge.  One switch per link index ("rail") builds the usual
// cluster: every NIC of a node reaches every other node.
//
//   int sw0 = c.add_switch(), sw1 = c.add_switch();
//   for (int n : nodes) { c.plug(n, sw0); c.plug(n, sw1); }
//   c.port_qdisc(p, Side::Node, "netem loss 100%");   // n cannot send there
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "multiedge/multiedge.hpp"
#include "netns.hpp"

namespace metest {

struct ClusterNode {
	std::string ns;				// namespace name (/run/netns/<ns>)
	std::optional<multiedge::Device> dev;	// opened in ns by start()
	std::uint32_t id = 0;			// node id (DeviceInfo::node_id)
	std::vector<std::string> ifnames;	// its link ends, in creation order
	bool deleted = false;
};

// A bridge port: the node's end (a link of the node) and the bridge's end.
struct ClusterPort {
	int node = 0, sw = 0;
	std::string if_node, if_sw;
};

struct ClusterLink {
	int a = 0, b = 0;	// node indexes
	std::string if_a, if_b;	// veth ends in a's and b's namespace
	unsigned mtu = 1500;
};

class Cluster {
public:
	Cluster();
	~Cluster();	// closes every Device, deletes every namespace
	Cluster(const Cluster &) = delete;
	Cluster &operator=(const Cluster &) = delete;

	// A new namespace (a node); returns its index.  Fails the test on error
	// (then returns -1).
	int add_node();
	// A veth pair between nodes a and b, both ends with `mtu` and up;
	// returns the link index (-1 on error).
	int add_link(int a, int b, unsigned mtu = 1500);

	// A Linux bridge (STP off, forwarding at once) in the switch namespace;
	// returns its index (-1 on error).
	int add_switch();
	// A veth pair from node n to a port of switch sw, both ends `mtu` and
	// up; the node's end becomes its next link.  Returns the port index.
	int plug(int n, int sw, unsigned mtu = 1500);

	// Opens each node's Device in its namespace, records its node id and
	// attaches its links in creation order.
	::testing::AssertionResult start();
	// The same for one node (one that joins a running cluster).
	::testing::AssertionResult start_node(int n);
	// Opens (another) Device acting in node n's namespace.
	multiedge::Result<multiedge::Device> open_in(int n) const;
	// Runs the calling thread in namespace `ns` until the guard dies.
	using Enter = netns::Enter;

	// Waits until node a sees node b alive on at least `links` links.
	::testing::AssertionResult wait_peer(int a, int b, unsigned links,
					     std::chrono::milliseconds timeout = std::chrono::seconds(8));
	// wait_peer both ways.
	::testing::AssertionResult wait_pair(int a, int b, unsigned links,
					     std::chrono::milliseconds timeout = std::chrono::seconds(8));

	// Sets link l's end in node `side` (a or b of the link) down or up.
	::testing::AssertionResult set_link(int l, bool up, int side = -1);
	// tc netem on both ends of link l ("loss 1%", "delay 1ms reorder 25% 50%").
	::testing::AssertionResult netem(int l, const std::string &args);
	// Which end of a port a command acts on.
	enum class Side { Node, Switch };
	// Sets an end of port p down or up (Node: the node's NIC loses its
	// carrier; Switch: the cable is pulled at the switch).
	::testing::AssertionResult set_port(int p, bool up, Side side = Side::Node);
	// Replaces the root qdisc of an end of port p with `qdisc` ("netem loss
	// 100%": that end transmits nothing; "tbf rate 200mbit burst 32kb latency
	// 20ms" on the switch end: a bottleneck with an output queue); an empty
	// string restores the default.  Egress only: the other direction works.
	::testing::AssertionResult port_qdisc(int p, Side side, const std::string &qdisc);
	// The MAC address of node n's interface `ifname` ("aa:bb:..."), "" on error.
	std::string mac_of(int n, const std::string &ifname);

	// Closes node n's Device and deletes its namespace (with its veths,
	// and so the other ends).  Regions the test still holds on that node
	// keep the namespace alive until they are destroyed.
	::testing::AssertionResult delete_node(int n);

	ClusterNode &node(int n) { return nodes_.at(static_cast<size_t>(n)); }
	const ClusterLink &link(int l) const { return links_.at(static_cast<size_t>(l)); }
	const ClusterPort &port(int p) const { return ports_.at(static_cast<size_t>(p)); }
	multiedge::Device &dev(int n) { return *node(n).dev; }
	std::uint32_t id(int n) { return node(n).id; }
	const std::string &ns(int n) { return node(n).ns; }
	size_t nodes() const { return nodes_.size(); }
	size_t links() const { return links_.size(); }

	// Closes every Device and deletes every namespace now.
	void teardown();

private:
	// A veth pair from if_a in node a to if_b in namespace ns_b, both ends
	// up; with b_master, if_b first becomes a port of that bridge.
	::testing::AssertionResult veth(const std::string &if_a, int a, const std::string &if_b,
					const std::string &ns_b, unsigned mtu,
					const std::string &b_master = "");

	std::vector<ClusterNode> nodes_;
	std::vector<ClusterLink> links_;
	std::vector<ClusterPort> ports_;
	int switches_ = 0;
	std::string switch_ns_;	// created by the first add_switch()
	int serial_;
};

// The module's accounting seen through a fresh Device in the initial
// namespace.
multiedge::DeviceInfo accounting();
// Waits (up to `timeout`) until pinned_pages, regions and ops_inflight are
// 0, and with `all` also rx_queued and conns; else says what is left.
::testing::AssertionResult accounting_idle(bool all,
					    std::chrono::milliseconds timeout = std::chrono::seconds(15));

// Anonymous memory (page aligned, zeroed), unmapped at destruction.
class Buffer {
public:
	explicit Buffer(size_t len);
	~Buffer();
	Buffer(Buffer &&o) noexcept : p_(o.p_), len_(o.len_) { o.p_ = nullptr; o.len_ = 0; }
	Buffer(const Buffer &) = delete;
	Buffer &operator=(const Buffer &) = delete;
	std::uint8_t *data() const { return p_; }
	size_t size() const { return len_; }
	std::uint8_t &operator[](size_t i) const { return p_[i]; }

private:
	std::uint8_t *p_ = nullptr;
	size_t len_ = 0;
};

// Fills [p, p + len) with bytes from a generator seeded by `seed`.
void fill_random(std::uint8_t *p, size_t len, std::uint64_t seed);
// First offset where a and b differ in [0, len), or -1 if equal.
long first_difference(const std::uint8_t *a, const std::uint8_t *b, size_t len);

// The engine counter `name` of d's namespace (mectl stats), 0 if unknown.
std::uint64_t engine_stat(const multiedge::Device &d, const std::string &name);

// Seed from $ME_TEST_SEED or a fixed default; logged by the caller.
std::uint64_t test_seed(std::uint64_t fallback);

// "ETIMEDOUT"-style name of an errno value (for messages).
std::string errno_name(int err);

// A two-node pair's shape, for suites parameterised over it (make_pair).
struct PairParam {
	unsigned links;
	unsigned mtu;
	multiedge::Ordering ordering;
};
// "2Links_Mtu9000_Unordered": the parameter's name in the test's.
std::string pair_param_name(const ::testing::TestParamInfo<PairParam> &i);

// Base fixture of the cluster suites: loads the module, gives a Cluster;
// at the end closes everything, deletes the namespaces, requires the
// module's accounting to come back to idle (nothing pinned, no region, no
// operation in flight, no skb queued, no connection) and unloads.
class ClusterTest : public ::testing::Test {
protected:
	void SetUp() override;
	void TearDown() override;
	// Parameters the module is loaded with for this test.
	virtual std::string module_params() const { return ""; }
	// Nodes 0 and 1 joined by `links` veth pairs of `mtu`, started, each
	// seeing the other alive on every link.
	void make_pair(unsigned links, unsigned mtu = 1500);
	// `len` bytes of random data (from `seed`) from node 0 to node 1 in
	// `chunk`-byte writes on one connection, every byte checked at the
	// target; `started` runs once connected, before the first write.
	void stream_checked(size_t len, size_t chunk, std::uint64_t seed,
			    const std::function<void()> &started);

	std::optional<Cluster> c_;
};

// Asserts a library Result/Status succeeded, showing its message.
#define ME_ASSERT_OK(expr)                                                         \
	do {                                                                       \
		const auto &me_r_ = (expr);                                        \
		ASSERT_TRUE(me_r_.ok()) << #expr << ": " << me_r_.error().message(); \
	} while (0)

// Prints node n's engine counters that are not 0, its connections and
// neighbours: what a test shows when a stream or message failed, so a
// rare failure says which mechanism gave up (retries, timeouts, paths).
void dump_node(multiedge::Device &d, int n);

} // namespace metest
