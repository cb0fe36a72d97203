// Guest tests of incast (issue 16): N senders write 64 KiB messages into
// one receiver through a switch (a Linux bridge, Cluster::add_switch)
// whose port toward the receiver is a rate-limited bottleneck with a
// finite queue (tbf on the bridge's end of the port), while a prober's
// 8-byte writes to the receiver cross the same port.
//
// What is asserted, with congestion control: every write completes with
// its bytes in place, no connection dies, every sender gets writes
// through (without it, only that no byte is out of place).  What is printed, per
// case and for TCP (cubic) streams over the same port: goodput against the
// port's rate, data packets sent again, Jain's fairness among the senders,
// the prober's P99 latency loaded and idle.  The module is loaded with
// congestion control on (the default) and off (cc=0), so one run compares
// both.  Figures under TCG are ratios of one run, never absolutes.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include "cluster.hpp"
#include "module_util.hpp"
#include "streams.hpp"

using namespace metest;
using multiedge::Access;
using multiedge::Device;
using Clock = std::chrono::steady_clock;
using Side = Cluster::Side;

namespace {

constexpr unsigned kMtu = 9000;
constexpr std::uint32_t kMsg = 64u << 10;
constexpr unsigned kDepth = 4;			// writes each sender keeps posted
constexpr unsigned kRateMbit = 200;		// the bottleneck port
constexpr auto kWarm = std::chrono::milliseconds(700);
constexpr auto kMeasure = std::chrono::seconds(3);
// The bottleneck: a token bucket with a 256 KiB queue, like a switch port.
const std::string kPortQdisc = "tbf rate " + std::to_string(kRateMbit) +
			       "mbit burst 32kb limit 262144";

double port_bytes_per_s() { return kRateMbit * 1e6 / 8; }

double p99_ms(std::vector<double> v)
{
	if (v.empty())
		return 0;
	std::sort(v.begin(), v.end());
	return v[std::min(v.size() - 1, v.size() * 99 / 100)];
}

double jain(const std::vector<double> &x)
{
	double s = 0, sq = 0;
	for (double v : x) {
		s += v;
		sq += v * v;
	}
	return sq > 0 ? s * s / (static_cast<double>(x.size()) * sq) : 0;
}

struct Figures {
	double goodput = 0;	// share of the port's rate
	double rtx_pct = 0;
	double jain = 0;
	double p99_idle_ms = 0, p99_loaded_ms = 0;
};

void print(const char *who, int senders, const Figures &f)
{
	std::printf("incast %d->1 %-12s goodput %5.1f%% of the port, resent %5.2f%%, Jain %.3f, "
		    "probe P99 %.2f ms loaded, %.2f ms idle (%.1fx)\n",
		    senders, who, 100 * f.goodput, f.rtx_pct, f.jain, f.p99_loaded_ms,
		    f.p99_idle_ms, f.p99_idle_ms > 0 ? f.p99_loaded_ms / f.p99_idle_ms : 0);
	std::fflush(stdout);
}

// Each sender's share of the bytes, so an unfair run shows who starved.
void print_shares(const std::vector<double> &per)
{
	double total = 0;
	for (double b : per)
		total += b;
	std::printf("  shares (%% of the bytes, sender 1 first):");
	for (double b : per)
		std::printf(" %.1f", total > 0 ? 100 * b / total : 0.0);
	std::printf("\n");
	std::fflush(stdout);
}

// 8-byte writes from node `from` to node `to`, one at a time, on their own
// Device and thread; latencies of those completed while `loaded` was set
// go to one list, the others to another.
class Prober {
public:
	Prober(Cluster &c, int from, int to) : c_(c), from_(from), to_(to) {}

	::testing::AssertionResult start()
	{
		auto dev = c_.open_in(from_);
		if (!dev)
			return ::testing::AssertionFailure() << dev.error().message();
		dev_.emplace(std::move(dev).value());
		auto ms = dev_->register_memory(src_.data(), src_.size(), Access::None);
		auto md = c_.dev(to_).register_memory(dst_.data(), dst_.size(), Access::RemoteWrite);
		if (!ms || !md)
			return ::testing::AssertionFailure() << "cannot register probe memory";
		ms_.emplace(std::move(ms).value());
		md_.emplace(std::move(md).value());
		auto conn = dev_->connect(c_.id(to_));
		if (!conn)
			return ::testing::AssertionFailure() << conn.error().message();
		conn_.emplace(std::move(conn).value());
		thread_ = std::thread([this] { run(); });
		return ::testing::AssertionSuccess();
	}

	void stop()
	{
		stop_ = true;
		if (thread_.joinable())
			thread_.join();
	}

	~Prober() { stop(); }

	std::atomic<bool> loaded{false};
	std::vector<double> idle, busy;
	std::vector<std::string> failures;

private:
	void run()
	{
		std::uint64_t cookie = 1;
		while (!stop_) {
			bool during = loaded;
			auto t0 = Clock::now();
			auto st = conn_->write(*ms_, 0, multiedge::remote_of(*md_), 0, 8, cookie);
			if (!st) {
				failures.push_back("post: " + st.error().message());
				return;
			}
			auto done = dev_->wait_for(cookie++, std::chrono::seconds(30));
			if (!done || !done->ok()) {
				failures.push_back(done ? done->describe() : done.error().message());
				return;
			}
			double ms = Streams::ms_between(t0, Clock::now());
			if (during == loaded)
				(during ? busy : idle).push_back(ms);
			std::this_thread::sleep_for(std::chrono::milliseconds(5));
		}
	}

	Cluster &c_;
	int from_, to_;
	std::array<std::uint8_t, 64> src_{}, dst_{};
	std::optional<Device> dev_;
	std::optional<multiedge::MemoryRegion> ms_, md_;
	std::optional<multiedge::Connection> conn_;
	std::thread thread_;
	std::atomic<bool> stop_{false};
};

// TCP beside it: the same nodes, ports and bottleneck, addresses on the
// nodes' port ends.  Each sender writes 64 KiB at a time on its own
// connection to the receiver; the prober's 8 bytes are echoed back by the
// receiver (a round trip, as a write's completion is).
class TcpIncast {
public:
	TcpIncast(Cluster &c, int senders) : c_(c), senders_(senders), bytes_(senders) {}

	::testing::AssertionResult start()
	{
		for (int n = 0; n < senders_ + 2; n++) {
			std::string cmd = "ip -n " + c_.ns(n) + " addr add " + addr(n) + "/24 dev " +
					  c_.port(n).if_node;
			if (sh(cmd) != 0)
				return ::testing::AssertionFailure() << cmd;
		}
		{
			Cluster::Enter in(c_.ns(0));
			if (!in.ok())
				return ::testing::AssertionFailure() << "cannot enter the receiver";
			listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
			sockaddr_in a = sa(0);
			int one = 1;
			::setsockopt(listener_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
			if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr *>(&a), sizeof(a)) ||
			    ::listen(listener_, 64))
				return ::testing::AssertionFailure() << "listen: " << std::strerror(errno);
		}
		threads_.emplace_back([this] { accept_all(); });
		for (int n = 1; n <= senders_ + 1; n++) {
			int fd = connect_from(n);
			if (fd < 0)
				return ::testing::AssertionFailure() << "connect from node " << n << ": "
								     << std::strerror(errno);
			fds_.push_back(fd);
		}
		threads_.emplace_back([this] { probe_loop(fds_.back()); });
		return ::testing::AssertionSuccess();
	}

	// The senders start writing (after start(): the probe runs alone).
	void start_senders()
	{
		for (int i = 0; i < senders_; i++)
			threads_.emplace_back([this, i] { send_loop(fds_[static_cast<size_t>(i)]); });
	}

	void stop()
	{
		stop_ = true;
		for (int fd : fds_)
			::shutdown(fd, SHUT_RDWR);
		if (listener_ >= 0)
			::shutdown(listener_, SHUT_RDWR);
		for (auto &t : threads_)
			t.join();
		threads_.clear();
		// The accepting thread is gone: its list is ours now.
		for (int fd : accepted_)
			::shutdown(fd, SHUT_RDWR);
		for (auto &t : threads_echo_)
			t.join();
		threads_echo_.clear();
		for (int fd : fds_)
			::close(fd);
		fds_.clear();
		for (int fd : accepted_)
			::close(fd);
		accepted_.clear();
		if (listener_ >= 0)
			::close(listener_);
		listener_ = -1;
	}

	~TcpIncast() { stop(); }

	// Segments node n's TCP sent, and sent again (its namespace's counters).
	std::pair<std::uint64_t, std::uint64_t> segs(int n)
	{
		Cluster::Enter in(c_.ns(n));
		std::ifstream f("/proc/thread-self/net/snmp");
		std::string line, names;
		while (std::getline(f, line)) {
			if (line.rfind("Tcp:", 0) != 0)
				continue;
			if (names.empty()) {
				names = line;
				continue;
			}
			std::istringstream hn(names), hv(line);
			std::string name, val;
			std::uint64_t out = 0, rtx = 0;
			while (hn >> name && hv >> val) {
				if (name == "OutSegs")
					out = std::stoull(val);
				else if (name == "RetransSegs")
					rtx = std::stoull(val);
			}
			return {out, rtx};
		}
		return {0, 0};
	}

	std::vector<std::atomic<std::uint64_t>> &received() { return bytes_; }
	std::atomic<bool> loaded{false};
	std::vector<double> idle, busy;

private:
	static std::string addr(int n) { return "10.77.0." + std::to_string(n + 1); }
	static sockaddr_in sa(int n)
	{
		sockaddr_in a{};
		a.sin_family = AF_INET;
		a.sin_port = htons(5077);
		::inet_pton(AF_INET, addr(n).c_str(), &a.sin_addr);
		return a;
	}

	int connect_from(int n)
	{
		Cluster::Enter in(c_.ns(n));
		int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		sockaddr_in a = sa(0);
		int one = 1;
		::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr *>(&a), sizeof(a))) {
			if (fd >= 0)
				::close(fd);
			return -1;
		}
		// The receiver tells connections apart by the first byte: the sender's index.
		std::uint8_t who = static_cast<std::uint8_t>(n - 1);
		if (::send(fd, &who, 1, MSG_NOSIGNAL) != 1) {
			::close(fd);
			return -1;
		}
		return fd;
	}

	void accept_all()
	{
		for (int k = 0; k <= senders_; k++) {
			int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
			if (fd < 0)
				return;
			accepted_.push_back(fd);
			std::uint8_t who = 0;
			if (::read(fd, &who, 1) != 1)
				return;
			if (who >= senders_)
				threads_echo_.emplace_back([fd] {
					char b[8];
					for (;;) {
						size_t got = 0;
						while (got < sizeof(b)) {
							ssize_t r = ::read(fd, b + got, sizeof(b) - got);
							if (r <= 0)
								return;
							got += static_cast<size_t>(r);
						}
						if (::send(fd, b, sizeof(b), MSG_NOSIGNAL) != sizeof(b))
							return;
					}
				});
			else
				threads_echo_.emplace_back([this, fd, who] {
					std::vector<char> b(kMsg);
					for (;;) {
						ssize_t r = ::read(fd, b.data(), b.size());
						if (r <= 0)
							return;
						bytes_[who] += static_cast<std::uint64_t>(r);
					}
				});
		}
	}

	// Sockets are written with MSG_NOSIGNAL: stop() shuts them down while
	// these threads may still be writing, and that write raised SIGPIPE,
	// which killed the test (6.12 once: exit 141).
	void send_loop(int fd)
	{
		std::vector<char> b(kMsg, 'x');
		while (!stop_)
			if (::send(fd, b.data(), b.size(), MSG_NOSIGNAL) <= 0)
				return;
	}

	void probe_loop(int fd)
	{
		char b[8] = {};
		while (!stop_) {
			bool during = loaded;
			auto t0 = Clock::now();
			if (::send(fd, b, sizeof(b), MSG_NOSIGNAL) != sizeof(b))
				return;
			size_t got = 0;
			while (got < sizeof(b)) {
				ssize_t r = ::read(fd, b + got, sizeof(b) - got);
				if (r <= 0)
					return;
				got += static_cast<size_t>(r);
			}
			double ms = Streams::ms_between(t0, Clock::now());
			if (during == loaded)
				(during ? busy : idle).push_back(ms);
			std::this_thread::sleep_for(std::chrono::milliseconds(5));
		}
	}

	Cluster &c_;
	int senders_;
	std::vector<std::atomic<std::uint64_t>> bytes_;
	int listener_ = -1;
	std::vector<int> fds_, accepted_;
	std::vector<std::thread> threads_, threads_echo_;
	std::atomic<bool> stop_{false};
};

struct Case {
	int senders;
	bool cc;
};

class IncastTest : public ClusterTest, public ::testing::WithParamInterface<Case> {
protected:
	std::string module_params() const override { return GetParam().cc ? "" : "cc=0"; }

	// Node 0 receives, 1..senders send, senders + 1 probes; one switch,
	// the receiver's port limited on the switch's side.
	void make_incast(int senders)
	{
		ASSERT_EQ(c_->add_switch(), 0);
		for (int n = 0; n < senders + 2; n++) {
			ASSERT_EQ(c_->add_node(), n);
			ASSERT_EQ(c_->plug(n, 0, kMtu), n);
		}
		ASSERT_TRUE(c_->start());
		for (int n = 1; n < senders + 2; n++)
			ASSERT_TRUE(c_->wait_pair(0, n, 1, std::chrono::seconds(15)));
		ASSERT_TRUE(c_->port_qdisc(0, Side::Switch, kPortQdisc));
	}

	// Data packets node n sent to node 0, and how many of them went again.
	std::pair<std::uint64_t, std::uint64_t> sent_lost(Device &d)
	{
		std::uint64_t tx = 0, lost = 0;
		auto nbrs = d.neighbours();
		EXPECT_TRUE(nbrs) << nbrs.error().message();
		if (nbrs)
			for (const auto &nb : nbrs.value())
				if (nb.node_id == c_->id(0)) {
					tx += nb.tx_pkts;
					lost += nb.lost_pkts;
				}
		return {tx, lost};
	}

	// Node n's congestion state toward node 0, "cwnd KiB/target/base/noise us".
	std::string path_state(Device &d)
	{
		auto nbrs = d.neighbours();
		if (!nbrs)
			return "?";
		for (const auto &nb : nbrs.value())
			if (nb.node_id == c_->id(0))
				return std::to_string(nb.cwnd >> 10) + "K/" + std::to_string(nb.target_us) +
				       "/" + std::to_string(nb.base_us) + "/" + std::to_string(nb.noise_us);
		return "-";
	}
};

TEST_P(IncastTest, SendersShareOnePort)
{
	const int senders = GetParam().senders;
	ASSERT_NO_FATAL_FAILURE(make_incast(senders));
	Prober probe(*c_, senders + 1, 0);
	ASSERT_TRUE(probe.start());
	std::this_thread::sleep_for(std::chrono::seconds(1));	// idle latency

	std::vector<std::pair<int, int>> pairs;
	std::vector<Device> stats;
	for (int n = 1; n <= senders; n++) {
		pairs.emplace_back(n, 0);
		auto d = c_->open_in(n);
		ASSERT_TRUE(d) << d.error().message();
		stats.push_back(std::move(d).value());
	}
	Streams st(*c_, pairs, test_seed(0x1ca5) + static_cast<unsigned>(senders), kDepth, kMsg);
	ASSERT_TRUE(st.start());
	std::this_thread::sleep_for(kWarm);
	probe.loaded = true;
	std::vector<std::pair<std::uint64_t, std::uint64_t>> before;
	for (auto &d : stats)
		before.push_back(sent_lost(d));
	auto t0 = Clock::now();
	std::this_thread::sleep_for(kMeasure);
	auto t1 = Clock::now();
	std::uint64_t tx = 0, lost = 0;
	for (size_t i = 0; i < stats.size(); i++) {
		auto [t, l] = sent_lost(stats[i]);
		tx += t - before[i].first;
		lost += l - before[i].second;
	}
	// After the counters, so reading the paths does not widen their span.
	std::vector<std::string> state;
	for (auto &d : stats)
		state.push_back(path_state(d));
	probe.loaded = false;
	st.stop();
	probe.stop();

	Figures f;
	std::vector<double> per;
	double total = 0;
	// Without congestion control (the baseline) writes may time out and
	// senders starve: counted and printed, not asserted; a byte out of
	// place never passes.
	const bool cc = GetParam().cc;
	size_t failed = 0;
	for (const Stream &s : st.streams()) {
		for (const std::string &why : s.failures) {
			EXPECT_TRUE(cc == false && why.rfind("target differs", 0) != 0)
				<< s.from << " -> 0: " << why;
			failed++;
		}
		double b = static_cast<double>(Streams::done_between(s, t0, t1)) * kMsg;
		if (cc) {
			EXPECT_GT(b, 0) << "sender " << s.from << " starved";
		}
		per.push_back(b);
		total += b;
	}
	if (failed)
		std::printf("incast %d->1 without congestion control: %zu write(s) failed\n",
			    senders, failed);
	EXPECT_TRUE(probe.failures.empty()) << probe.failures.front();
	double secs = std::chrono::duration<double>(t1 - t0).count();
	f.goodput = total / secs / port_bytes_per_s();
	f.rtx_pct = tx ? 100.0 * static_cast<double>(lost) / static_cast<double>(tx) : 0;
	f.jain = jain(per);
	f.p99_idle_ms = p99_ms(probe.idle);
	f.p99_loaded_ms = p99_ms(probe.busy);
	print(GetParam().cc ? "multiedge" : "multiedge-nocc", senders, f);
	print_shares(per);
	std::printf("  paths at the end (cwnd/target/base/noise us):");
	for (const auto &s : state)
		std::printf(" %s", s.c_str());
	std::printf("\n");
	RecordProperty("goodput_pct", std::to_string(100 * f.goodput));
	RecordProperty("rtx_pct", std::to_string(f.rtx_pct));
	RecordProperty("jain", std::to_string(f.jain));
	st.release();
}

// TCP (the guest's default, cubic) through the same port, for comparison.
TEST_P(IncastTest, TcpSharesOnePortTheSameWay)
{
	const int senders = GetParam().senders;
	if (!GetParam().cc)
		GTEST_SKIP() << "TCP is measured once per size";
	ASSERT_NO_FATAL_FAILURE(make_incast(senders));
	TcpIncast tcp(*c_, senders);
	ASSERT_TRUE(tcp.start());
	std::this_thread::sleep_for(std::chrono::seconds(1));	// idle latency
	tcp.start_senders();
	std::this_thread::sleep_for(kWarm);
	tcp.loaded = true;
	std::vector<std::pair<std::uint64_t, std::uint64_t>> before;
	std::vector<std::uint64_t> got0;
	for (int n = 1; n <= senders; n++)
		before.push_back(tcp.segs(n));
	for (auto &b : tcp.received())
		got0.push_back(b);
	auto t0 = Clock::now();
	std::this_thread::sleep_for(kMeasure);
	auto t1 = Clock::now();
	std::vector<double> per;
	double total = 0;
	for (size_t i = 0; i < tcp.received().size(); i++) {
		double b = static_cast<double>(tcp.received()[i] - got0[i]);
		per.push_back(b);
		total += b;
	}
	std::uint64_t out = 0, rtx = 0;
	for (int n = 1; n <= senders; n++) {
		auto [o, r] = tcp.segs(n);
		out += o - before[static_cast<size_t>(n - 1)].first;
		rtx += r - before[static_cast<size_t>(n - 1)].second;
	}
	tcp.loaded = false;
	tcp.stop();
	Figures f;
	double secs = std::chrono::duration<double>(t1 - t0).count();
	f.goodput = total / secs / port_bytes_per_s();
	f.rtx_pct = out ? 100.0 * static_cast<double>(rtx) / static_cast<double>(out) : 0;
	f.jain = jain(per);
	f.p99_loaded_ms = p99_ms(tcp.busy);
	f.p99_idle_ms = p99_ms(tcp.idle);
	print("tcp-cubic", senders, f);
	print_shares(per);
	for (double b : per)
		EXPECT_GT(b, 0) << "a TCP sender starved";
}

INSTANTIATE_TEST_SUITE_P(Cases, IncastTest,
			 ::testing::Values(Case{4, true}, Case{4, false}, Case{8, true},
					   Case{8, false}),
			 [](const ::testing::TestParamInfo<Case> &i) {
				 return std::to_string(i.param.senders) +
					(i.param.cc ? "_senders" : "_senders_without_cc");
			 });

}  // namespace
