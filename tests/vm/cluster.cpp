// Guest tests: a cluster of multiedge nodes (network namespaces) in one guest.
#include "cluster.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <sched.h>
#include <sstream>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

#include "module_util.hpp"

using multiedge::Device;
using multiedge::DeviceInfo;
using ::testing::AssertionFailure;
using ::testing::AssertionResult;
using ::testing::AssertionSuccess;

namespace metest {

namespace {

std::atomic<int> cluster_serial{0};

} // namespace

Cluster::Cluster() : serial_(cluster_serial++) {}

Cluster::~Cluster()
{
	teardown();
}

int Cluster::add_node()
{
	ClusterNode n;
	n.ns = "me-c" + std::to_string(serial_) + "n" + std::to_string(nodes_.size());
	if (auto r = netns::add(n.ns); !r) {
		ADD_FAILURE() << "cannot create node " << nodes_.size() << ": " << r.message();
		return -1;
	}
	nodes_.push_back(std::move(n));
	return static_cast<int>(nodes_.size()) - 1;
}

AssertionResult Cluster::veth(const std::string &if_a, int a, const std::string &if_b,
			      const std::string &ns_b, unsigned mtu, const std::string &b_master)
{
	if (auto r = netns::add_veth(if_a, ns(a), if_b, ns_b, mtu); !r)
		return r;
	if (auto r = netns::set_up(ns_b, if_b, true, b_master); !r)
		return r;
	return netns::set_up(ns(a), if_a, true);
}

int Cluster::add_link(int a, int b, unsigned mtu)
{
	ClusterLink l;
	l.a = a;
	l.b = b;
	l.mtu = mtu;
	std::string base = "me" + std::to_string(serial_) + "l" + std::to_string(links_.size());
	l.if_a = base + "a";
	l.if_b = base + "b";
	if (auto r = veth(l.if_a, a, l.if_b, ns(b), mtu); !r) {
		ADD_FAILURE() << "cannot link nodes " << a << " and " << b << ": " << r.message();
		return -1;
	}
	node(a).ifnames.push_back(l.if_a);
	node(b).ifnames.push_back(l.if_b);
	links_.push_back(l);
	return static_cast<int>(links_.size()) - 1;
}

int Cluster::add_switch()
{
	if (switch_ns_.empty()) {
		std::string ns = "me-c" + std::to_string(serial_) + "sw";
		if (auto r = netns::add(ns); !r) {
			ADD_FAILURE() << "cannot create the switch namespace: " << r.message();
			return -1;
		}
		switch_ns_ = ns;
	}
	// STP off and no forwarding delay: a port forwards as soon as it is
	// up, like an edge port of a cluster switch.
	std::string br = "br" + std::to_string(switches_);
	if (auto r = netns::add_bridge(switch_ns_, br); !r) {
		ADD_FAILURE() << "cannot create switch " << switches_ << ": " << r.message()
			      << " (is the bridge module there?)";
		return -1;
	}
	return switches_++;
}

int Cluster::plug(int n, int sw, unsigned mtu)
{
	if (sw < 0 || sw >= switches_) {
		ADD_FAILURE() << "no switch " << sw;
		return -1;
	}
	ClusterPort p;
	p.node = n;
	p.sw = sw;
	std::string base = "me" + std::to_string(serial_) + "p" + std::to_string(ports_.size());
	p.if_node = base + "n";
	p.if_sw = base + "s";
	if (auto r = veth(p.if_node, n, p.if_sw, switch_ns_, mtu, "br" + std::to_string(sw)); !r) {
		ADD_FAILURE() << "cannot plug node " << n << " into switch " << sw << ": "
			      << r.message();
		return -1;
	}
	node(n).ifnames.push_back(p.if_node);
	ports_.push_back(p);
	return static_cast<int>(ports_.size()) - 1;
}

AssertionResult Cluster::set_port(int p, bool up, Side side)
{
	const auto &pt = port(p);
	return side == Side::Node ? netns::set_up(ns(pt.node), pt.if_node, up) :
				    netns::set_up(switch_ns_, pt.if_sw, up);
}

AssertionResult Cluster::port_qdisc(int p, Side side, const std::string &qdisc)
{
	const auto &pt = port(p);
	std::string where = side == Side::Node ? "tc -n " + ns(pt.node) + " qdisc " :
						 "tc -n " + switch_ns_ + " qdisc ";
	std::string dev = " dev " + (side == Side::Node ? pt.if_node : pt.if_sw);
	if (qdisc.empty()) {
		// No root qdisc of ours to delete is not an error.
		sh(where + "del" + dev + " root 2>/dev/null");
		return AssertionSuccess();
	}
	std::string kind = qdisc.substr(0, qdisc.find(' '));
	if (modprobe("sch_" + kind) != 0)
		return AssertionFailure() << "modprobe sch_" << kind << " failed: the guest "
					  << "kernel lacks that qdisc";
	std::string cmd = where + "replace" + dev + " root " + qdisc;
	if (sh(cmd) != 0)
		return AssertionFailure() << "failed: " << cmd;
	return AssertionSuccess();
}

std::string Cluster::mac_of(int n, const std::string &ifname)
{
	std::string cmd = "ip -n " + ns(n) + " -o link show dev " + ifname;
	FILE *f = ::popen(cmd.c_str(), "r");
	if (!f)
		return "";
	char buf[1024];
	std::string out;
	while (std::fgets(buf, sizeof(buf), f))
		out += buf;
	::pclose(f);
	auto at = out.find("link/ether ");
	if (at == std::string::npos)
		return "";
	return out.substr(at + 11, 17);
}

multiedge::Result<Device> Cluster::open_in(int n) const
{
	Enter in(nodes_.at(static_cast<size_t>(n)).ns);
	if (!in.ok())
		return multiedge::Error::from_errno(errno, "cannot enter namespace " +
								  nodes_.at(static_cast<size_t>(n)).ns);
	return Device::open();
}

AssertionResult Cluster::start()
{
	for (size_t i = 0; i < nodes_.size(); i++) {
		auto r = start_node(static_cast<int>(i));
		if (!r)
			return r;
	}
	return AssertionSuccess();
}

AssertionResult Cluster::start_node(int i)
{
	auto &n = node(i);
	auto d = open_in(i);
	if (!d)
		return AssertionFailure() << "node " << i << ": " << d.error().message();
	n.dev.emplace(std::move(d).value());
	auto info = n.dev->query();
	if (!info)
		return AssertionFailure() << "node " << i << ": " << info.error().message();
	if (info->abi_version < 4)
		return AssertionFailure() << "module ABI " << info->abi_version << " < 4";
	n.id = info->node_id;
	if (n.id == 0)
		return AssertionFailure() << "node " << i << " (" << n.ns << ") has node id 0";
	for (const auto &ifn : n.ifnames) {
		auto st = n.dev->attach_link(ifn);
		if (!st)
			return AssertionFailure() << "node " << i << ": " << st.error().message();
	}
	for (size_t j = 0; j < nodes_.size(); j++)
		if (static_cast<int>(j) != i && nodes_[j].dev && nodes_[j].id == n.id)
			return AssertionFailure() << "nodes " << j << " and " << i << " share node id "
						  << n.id;
	return AssertionSuccess();
}

AssertionResult Cluster::wait_peer(int a, int b, unsigned links, std::chrono::milliseconds timeout)
{
	auto deadline = std::chrono::steady_clock::now() + timeout;
	std::string last = "no peer list";
	for (;;) {
		auto peers = dev(a).peers();
		if (!peers)
			return AssertionFailure() << peers.error().message();
		last = "peers of node " + std::to_string(a) + ":";
		for (const auto &p : peers.value()) {
			std::ostringstream s;
			s << " [id " << p.node_id << " links 0x" << std::hex << p.links << " alive 0x"
			  << p.alive_links << std::dec << (p.alive ? " alive" : " dead") << "]";
			last += s.str();
			if (p.node_id == id(b) && p.alive &&
			    static_cast<unsigned>(std::popcount(p.alive_links)) >= links)
				return AssertionSuccess();
		}
		if (std::chrono::steady_clock::now() > deadline)
			return AssertionFailure() << "node " << a << " does not see node " << b << " (id "
						  << id(b) << ") alive on " << links << " link(s) after "
						  << timeout.count() << " ms; " << last;
		std::this_thread::sleep_for(std::chrono::milliseconds(20));
	}
}

AssertionResult Cluster::wait_pair(int a, int b, unsigned links, std::chrono::milliseconds timeout)
{
	auto r = wait_peer(a, b, links, timeout);
	if (!r)
		return r;
	return wait_peer(b, a, links, timeout);
}

AssertionResult Cluster::set_link(int l, bool up, int side)
{
	const auto &lk = link(l);
	int n = side < 0 || side == lk.a ? lk.a : lk.b;
	return netns::set_up(ns(n), n == lk.a ? lk.if_a : lk.if_b, up);
}

AssertionResult Cluster::netem(int l, const std::string &args)
{
	static bool loaded = false;
	if (!loaded) {
		if (sh("command -v tc >/dev/null") != 0)
			return AssertionFailure() << "tc (iproute2) is not installed: netem tests "
						     "cannot run";
		if (modprobe("sch_netem") != 0)
			return AssertionFailure() << "modprobe sch_netem failed: the guest kernel "
						     "has no netem (CONFIG_NET_SCH_NETEM)";
		loaded = true;
	}
	const auto &lk = link(l);
	for (auto [n, ifn] : {std::pair{lk.a, lk.if_a}, std::pair{lk.b, lk.if_b}}) {
		std::string cmd = "tc -n " + ns(n) + " qdisc replace dev " + ifn + " root netem " + args;
		if (sh(cmd) != 0)
			return AssertionFailure() << "failed: " << cmd;
	}
	return AssertionSuccess();
}

AssertionResult Cluster::delete_node(int n)
{
	auto &nd = node(n);
	nd.dev.reset();
	if (nd.deleted)
		return AssertionSuccess();
	nd.deleted = true;
	return netns::del(nd.ns);
}

void Cluster::teardown()
{
	for (auto &n : nodes_)
		n.dev.reset();
	for (auto &n : nodes_)
		if (!n.deleted) {
			if (auto r = netns::del(n.ns); !r)
				ADD_FAILURE() << r.message();
			n.deleted = true;
		}
	if (!switch_ns_.empty()) {
		if (auto r = netns::del(switch_ns_); !r)
			ADD_FAILURE() << r.message();
		switch_ns_.clear();
	}
}

void ClusterTest::SetUp()
{
	ASSERT_FALSE(module_loaded()) << "an earlier test left multiedge loaded";
	ASSERT_EQ(modprobe("veth"), 0) << "modprobe veth failed";
	ASSERT_EQ(load_module(module_params()), 0) << "parameters: " << module_params();
	c_.emplace();
}

void ClusterTest::TearDown()
{
	c_.reset();
	if (!module_loaded())
		return;
	EXPECT_TRUE(accounting_idle(true));
	int err = unload_module();
	// A namespace being dismantled may hold the module for a moment.
	for (int i = 0; i < 100 && (err == EBUSY || err == EAGAIN); i++) {
		std::this_thread::sleep_for(std::chrono::milliseconds(100));
		err = unload_module();
	}
	EXPECT_EQ(err, 0) << "cannot unload multiedge: " << errno_name(err);
}

void ClusterTest::make_pair(unsigned links, unsigned mtu)
{
	ASSERT_EQ(c_->add_node(), 0);
	ASSERT_EQ(c_->add_node(), 1);
	for (unsigned l = 0; l < links; l++)
		ASSERT_GE(c_->add_link(0, 1, mtu), 0);
	ASSERT_TRUE(c_->start());
	ASSERT_TRUE(c_->wait_pair(0, 1, links));
}

void ClusterTest::stream_checked(size_t len, size_t chunk, std::uint64_t seed,
				 const std::function<void()> &started)
{
	using namespace std::chrono_literals;
	Buffer src(len), dst(len);
	fill_random(src.data(), len, seed);
	auto ms = c_->dev(0).register_memory(src.data(), len, multiedge::Access::None);
	ME_ASSERT_OK(ms);
	auto md = c_->dev(1).register_memory(dst.data(), len, multiedge::Access::RemoteWrite);
	ME_ASSERT_OK(md);
	auto conn = c_->dev(0).connect(c_->id(1));
	ME_ASSERT_OK(conn);
	started();
	for (size_t off = 0; off < len; off += chunk)
		ME_ASSERT_OK(conn->write(ms.value(), off, multiedge::remote_of(md.value()), off,
					 std::min(chunk, len - off), off / chunk + 1));
	for (size_t i = 0; i < (len + chunk - 1) / chunk; i++) {
		auto c = c_->dev(0).wait_for(i + 1, 30s);
		ME_ASSERT_OK(c);
		ASSERT_TRUE(c->ok()) << c->describe();
	}
	EXPECT_EQ(first_difference(src.data(), dst.data(), len), -1);
}

DeviceInfo accounting()
{
	auto d = Device::open();
	if (!d) {
		ADD_FAILURE() << d.error().message();
		return {};
	}
	auto info = d->query();
	if (!info) {
		ADD_FAILURE() << info.error().message();
		return {};
	}
	return info.value();
}

AssertionResult accounting_idle(bool all, std::chrono::milliseconds timeout)
{
	auto deadline = std::chrono::steady_clock::now() + timeout;
	for (;;) {
		DeviceInfo i = accounting();
		bool idle = i.pinned_pages == 0 && i.regions == 0 && i.ops_inflight == 0 &&
			    i.zc_skbs == 0 && i.staged_pages == 0 && i.area_pages == 0 &&
			    (!all || (i.rx_queued == 0 && i.conns == 0));
		if (idle)
			return AssertionSuccess();
		if (std::chrono::steady_clock::now() > deadline)
			return AssertionFailure()
			       << "module accounting not idle after " << timeout.count()
			       << " ms: pinned_pages " << i.pinned_pages << ", regions " << i.regions
			       << ", ops_inflight " << i.ops_inflight << ", zc_skbs " << i.zc_skbs
			       << ", staged_pages " << i.staged_pages << ", area_pages " << i.area_pages
			       << ", rx_queued " << i.rx_queued
			       << ", conns " << i.conns;
		std::this_thread::sleep_for(std::chrono::milliseconds(50));
	}
}

Buffer::Buffer(size_t len) : len_(len)
{
	size_t pg = static_cast<size_t>(sysconf(_SC_PAGESIZE));
	size_t map = (len + pg - 1) / pg * pg;
	void *p = mmap(nullptr, map ? map : pg, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (p == MAP_FAILED) {
		ADD_FAILURE() << "mmap of " << len << " bytes failed";
		p_ = nullptr;
		len_ = 0;
		return;
	}
	p_ = static_cast<std::uint8_t *>(p);
}

Buffer::~Buffer()
{
	if (p_) {
		size_t pg = static_cast<size_t>(sysconf(_SC_PAGESIZE));
		munmap(p_, len_ ? (len_ + pg - 1) / pg * pg : pg);
	}
}

void fill_random(std::uint8_t *p, size_t len, std::uint64_t seed)
{
	// splitmix64: fast, and every seed gives a different stream.
	std::uint64_t x = seed;
	size_t i = 0;
	while (i < len) {
		std::uint64_t z = (x += 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		z ^= z >> 31;
		size_t n = std::min<size_t>(8, len - i);
		std::memcpy(p + i, &z, n);
		i += n;
	}
}

long first_difference(const std::uint8_t *a, const std::uint8_t *b, size_t len)
{
	if (std::memcmp(a, b, len) == 0)
		return -1;
	for (size_t i = 0; i < len; i++)
		if (a[i] != b[i])
			return static_cast<long>(i);
	return -1;
}

std::uint64_t engine_stat(const multiedge::Device &d, const std::string &name)
{
	auto s = d.stats();
	if (!s)
		return 0;
	for (const auto &[n, v] : s.value())
		if (n == name)
			return v;
	return 0;
}

std::uint64_t test_seed(std::uint64_t fallback)
{
	if (const char *s = std::getenv("ME_TEST_SEED"))
		return std::strtoull(s, nullptr, 0);
	return fallback;
}

std::string pair_param_name(const ::testing::TestParamInfo<PairParam> &i)
{
	return std::to_string(i.param.links) + "Links_Mtu" + std::to_string(i.param.mtu) + "_" +
	       (i.param.ordering == multiedge::Ordering::Ordered ? "Ordered" : "Unordered");
}

std::string errno_name(int err)
{
	switch (err) {
	case 0: return "0";
	case ENOENT: return "ENOENT";
	case EACCES: return "EACCES";
	case ERANGE: return "ERANGE";
	case ENOBUFS: return "ENOBUFS";
	case ECONNRESET: return "ECONNRESET";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ECANCELED: return "ECANCELED";
	case EINVAL: return "EINVAL";
	case EFAULT: return "EFAULT";
	case E2BIG: return "E2BIG";
	case EOPNOTSUPP: return "EOPNOTSUPP";
	case EMSGSIZE: return "EMSGSIZE";
	case EAGAIN: return "EAGAIN";
	case ENOTCONN: return "ENOTCONN";
	case ENETDOWN: return "ENETDOWN";
	case EHOSTUNREACH: return "EHOSTUNREACH";
	case EBUSY: return "EBUSY";
	case EISCONN: return "EISCONN";
	case EADDRINUSE: return "EADDRINUSE";
	case EADDRNOTAVAIL: return "EADDRNOTAVAIL";
	case ECONNREFUSED: return "ECONNREFUSED";
	case EDESTADDRREQ: return "EDESTADDRREQ";
	}
	return std::to_string(err) + " (" + std::strerror(err) + ")";
}

void dump_node(multiedge::Device &d, int n)
{
	std::printf("node %d:", n);
	if (auto st = d.stats())
		for (const auto &[name, v] : st.value())
			if (v)
				std::printf(" %s=%" PRIu64, name.c_str(), v);
	std::printf("\n");
	if (auto cs = d.connections())
		for (const auto &c : cs.value())
			std::printf("  conn %u to %u %s: tx %" PRIu64 " rtx %" PRIu64 " rx %" PRIu64
				    " errors %" PRIu64 "\n",
				    c.conn, c.peer, c.state.c_str(), c.tx_packets, c.retransmits,
				    c.rx_packets, c.errors);
	if (auto nbs = d.neighbours())
		for (const auto &nb : nbs.value())
			std::printf("  link %u peer %u: alive %d rx %d heard %d, tx %" PRIu64
				    " rx %" PRIu64 " lost %" PRIu64 ", inflight %u cwnd %u rate %u Mb/s,"
				    " rtt %u delay %u base %u target %u noise %u us\n",
				    nb.link, nb.node_id, nb.alive, nb.rx, nb.heard, nb.tx_pkts,
				    nb.rx_pkts, nb.lost_pkts, nb.inflight, nb.cwnd, nb.rate_mbps,
				    nb.data_rtt_us, nb.data_delay_us, nb.base_us, nb.target_us,
				    nb.noise_us);
}

} // namespace metest
