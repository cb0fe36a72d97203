// Sustained mixed load from one node to a peer: see mixed_load.hpp.
#include "mixed_load.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "uapi/multiedge.h"

namespace metest {

using multiedge::Completion;
using multiedge::CompletionType;
using multiedge::Connection;
using Clock = std::chrono::steady_clock;
using ms = std::chrono::milliseconds;

namespace {

constexpr int kInflight = 16;		// 8 ordered, 8 unordered
constexpr std::uint32_t kMaxLen = 1u << 20;
constexpr std::size_t kSlot = kMaxLen + 4096;
constexpr std::uint32_t kMsgMax = ME_SEND_MAX;	// ABI 26: of several packets
constexpr std::uint32_t kMsgHdr = 12;	// seq:8 len:4
constexpr std::uint64_t kFinal = 0xf1a1000000000000ull;	// | index: last message
constexpr std::uint32_t kFinalLen = kMsgHdr + 16;

using Kind = MixedKind;
constexpr Kind kWrite = kMixedWrite, kNotify = kMixedNotify, kRead = kMixedRead, kSend = kMixedSend;
const char *const kKindName[] = {"write", "notify", "read", "send"};

std::uint32_t log_uniform(std::mt19937_64 &g, std::uint32_t max)
{
	std::uniform_real_distribution<double> d(0.0, std::log2(static_cast<double>(max)));
	return std::max<std::uint32_t>(1, static_cast<std::uint32_t>(std::exp2(d(g))));
}

std::uint64_t uniform(std::mt19937_64 &g, std::uint64_t lo, std::uint64_t hi)
{
	return std::uniform_int_distribution<std::uint64_t>(lo, hi)(g);
}

std::uint8_t msg_byte(std::uint64_t seq, std::uint32_t i)
{
	return static_cast<std::uint8_t>(seq * 131 + i * 7);
}

void fill_message(std::uint8_t *p, std::uint64_t seq, std::uint32_t len)
{
	std::memcpy(p, &seq, 8);
	std::memcpy(p + 8, &len, 4);
	for (std::uint32_t i = kMsgHdr; i < len; i++)
		p[i] = msg_byte(seq, i);
}

// A message's number if its bytes are right (final messages excepted).
bool parse_message(const std::vector<std::byte> &m, std::uint64_t *seq)
{
	const auto *p = reinterpret_cast<const std::uint8_t *>(m.data());
	std::uint32_t len;
	if (m.size() < kMsgHdr)
		return false;
	std::memcpy(seq, p, 8);
	std::memcpy(&len, p + 8, 4);
	if (len != m.size())
		return false;
	if ((*seq & ~0xffull) == kFinal)
		return len == kFinalLen;
	for (std::uint32_t i = kMsgHdr; i < len; i++)
		if (p[i] != msg_byte(*seq, i))
			return false;
	return true;
}

struct Flight {
	bool busy = false;
	bool verifying = false;		// the read-back of a write or notify
	Kind kind = kWrite;
	std::uint64_t cookie = 0, so = 0, doff = 0;
	std::uint32_t len = 0;
	Clock::time_point t0;
};

} // namespace

int mixed_seconds(int fallback)
{
	const char *s = std::getenv("ME_MIXED_SECONDS");
	int v = s ? std::atoi(s) : 0;
	return v > 0 ? v : fallback;
}

void mixed_fill_source(std::uint8_t *p, std::size_t len, std::uint64_t seed, int index)
{
	fill_random(p, len, seed * 1000003 + static_cast<std::uint64_t>(index));
}

bool MixedNode::setup(multiedge::Device &d, int idx, std::uint64_t sd)
{
	using multiedge::Access;
	dev = &d;
	index = idx;
	seed = sd;
	src.emplace(kSrcLen);
	dst.emplace(kSlot * kInflight);
	back.emplace(kSlot * kInflight);
	check.emplace(kSlot * kInflight);
	msgs.emplace(std::size_t{kMsgMax} * kInflight);
	mixed_fill_source(src->data(), kSrcLen, seed, index);
	struct Reg {
		Buffer &b;
		Access a;
		std::optional<multiedge::MemoryRegion> &mr;
	} regs[] = {{*src, Access::RemoteRead, mr_src}, {*dst, Access::RemoteReadWrite, mr_dst},
		    {*back, Access::None, mr_back}, {*check, Access::None, mr_check},
		    {*msgs, Access::None, mr_msgs}};
	for (auto &r : regs) {
		auto m = dev->register_memory(r.b.data(), r.b.size(), r.a);
		if (!m) {
			ADD_FAILURE() << "register: " << m.error().message();
			return false;
		}
		r.mr.emplace(std::move(m).value());
	}
	return true;
}

void MixedNode::set_peer(const multiedge::RemoteRegion &s, const multiedge::RemoteRegion &d)
{
	peer_src = s;
	peer_dst = d;
	peer_src_bytes.resize(kSrcLen);
	mixed_fill_source(peer_src_bytes.data(), kSrcLen, seed, 1 - index);
}

void MixedNode::release()
{
	conns.clear();
	mr_src.reset();
	mr_dst.reset();
	mr_back.reset();
	mr_check.reset();
	mr_msgs.reset();
}

std::string MixedResult::summary(int node) const
{
	char b[512];
	std::snprintf(b, sizeof(b),
		      "node %d: %llu ops (%llu writes, %llu notifies, %llu reads, %llu sends), %.1f MB, "
		      "max latency ordered %lld ms, unordered %lld ms",
		      node, (unsigned long long)ops, (unsigned long long)by_kind[kWrite],
		      (unsigned long long)by_kind[kNotify], (unsigned long long)by_kind[kRead],
		      (unsigned long long)by_kind[kSend], bytes / 1e6,
		      (long long)std::chrono::duration_cast<ms>(max_lat[0]).count(),
		      (long long)std::chrono::duration_cast<ms>(max_lat[1]).count());
	return b;
}

std::string mixed_counters(multiedge::Device &dev, const std::string &prefix)
{
	std::string s;
	auto conns = dev.connections();
	if (!conns)
		return prefix + "connections: " + conns.error().message() + "\n";
	for (const auto &ci : conns.value())
		s += prefix + "conn " + std::to_string(ci.conn) + (ci.ordered ? " ordered" : " unordered") +
		     (ci.active ? " active " : " passive ") + ci.state + ": tx " +
		     std::to_string(ci.tx_packets) + " rtx " + std::to_string(ci.retransmits) + " rx " +
		     std::to_string(ci.rx_packets) + " dropped " + std::to_string(ci.rx_dropped) + "\n";
	return s;
}

namespace {

// Takes the messages queued for the node; what went wrong, or "".
std::string take_queued_messages(MixedNode &n, MixedResult &r)
{
	for (;;) {
		auto m = n.dev->recv(0, ms(0));
		if (!m)
			return "";
		std::uint64_t seq;
		if (!parse_message(m->data, &seq))
			return "a message arrived corrupted";
		if ((seq & ~0xffull) == kFinal) {
			const auto *p = reinterpret_cast<const std::uint8_t *>(m->data.data());
			std::memcpy(&r.peer_notifies, p + kMsgHdr, 8);
			std::memcpy(&r.peer_sends, p + kMsgHdr + 8, 8);
			r.peer_final = true;
		} else if (!r.msgs_got.insert(seq).second) {
			return "message " + std::to_string(seq) + " arrived twice";
		}
	}
}

class Runner {
public:
	Runner(MixedNode &n, MixedResult &r, std::atomic<bool> &stop)
		: n_(n), r_(r), stop_(stop), g_(n.seed * 77 + static_cast<std::uint64_t>(n.index))
	{
	}

	void fail(const std::string &m)
	{
		if (r_.failure.empty())
			r_.failure = m;
		stop_ = true;
	}

	Connection &conn_of(int slot) { return n_.conns[slot < kInflight / 2 ? 0 : 1]; }

	void post(int i)
	{
		Flight &f = fl_[i];
		f = Flight{};
		f.kind = uniform(g_, 0, 9) < 1 ? kSend : static_cast<Kind>(uniform(g_, 0, 2));
		f.cookie = next_++ * kInflight + static_cast<std::uint64_t>(i);
		f.doff = i * kSlot + uniform(g_, 0, 4095);
		f.t0 = Clock::now();
		f.busy = true;
		multiedge::Status st;
		Connection &cn = conn_of(i);
		if (f.kind == kSend) {
			f.len = std::max(kMsgHdr, log_uniform(g_, kMsgMax));
			std::uint64_t seq = (static_cast<std::uint64_t>(n_.index) + 1) << 48 | msg_no_++;
			fill_message(n_.msgs->data() + i * kMsgMax, seq, f.len);
			st = cn.send(*n_.mr_msgs, i * kMsgMax, f.len, f.cookie);
		} else {
			f.len = log_uniform(g_, kMaxLen);
			f.so = uniform(g_, 0, MixedNode::kSrcLen - f.len);
			if (f.kind == kRead)
				st = cn.read(*n_.mr_back, f.doff, n_.peer_src, f.so, f.len, f.cookie);
			else if (f.kind == kNotify)
				st = cn.write_notify(*n_.mr_src, f.so, n_.peer_dst, f.doff, f.len,
						     static_cast<std::uint32_t>(f.cookie), f.cookie);
			else
				st = cn.write(*n_.mr_src, f.so, n_.peer_dst, f.doff, f.len, f.cookie);
		}
		if (!st)
			fail(std::string("post ") + kKindName[f.kind] + ": " + st.error().message());
	}

	// The written range read back into our own memory.
	void post_verify(int i)
	{
		Flight &f = fl_[i];
		f.verifying = true;
		f.cookie = next_++ * kInflight + static_cast<std::uint64_t>(i);
		f.t0 = Clock::now();
		auto st = conn_of(i).read(*n_.mr_check, f.doff, n_.peer_dst, f.doff, f.len, f.cookie);
		if (!st)
			fail("post read-back: " + st.error().message());
	}

	void completed(const Completion &c, bool posting)
	{
		int i = static_cast<int>(c.cookie % kInflight);
		Flight &f = fl_[i];
		if (!f.busy || f.cookie != c.cookie || c.status) {
			fail("unexpected completion: " + c.describe());
			return;
		}
		auto lat = Clock::now() - f.t0;
		auto &mx = r_.max_lat[i < kInflight / 2 ? 0 : 1];
		mx = std::max(mx, lat);
		r_.ops++;
		if (f.verifying) {
			if (std::memcmp(n_.check->data() + f.doff, n_.src->data() + f.so, f.len))
				fail(std::string(kKindName[f.kind]) + " of " + std::to_string(f.len) +
				     " bytes: the target holds other bytes (read back)");
		} else {
			r_.bytes += f.len;
			r_.by_kind[f.kind]++;
			if (f.kind == kSend)
				r_.msgs_sent++;
			if (f.kind == kRead &&
			    std::memcmp(n_.back->data() + f.doff, n_.peer_src_bytes.data() + f.so, f.len))
				fail("read of " + std::to_string(f.len) + " bytes: wrong bytes");
			if (f.kind == kWrite || f.kind == kNotify) {
				post_verify(i);
				return;
			}
		}
		f.busy = false;
		if (posting)
			post(i);
	}

	void take_messages()
	{
		if (std::string e = take_queued_messages(n_, r_); !e.empty())
			fail(e);
	}

	// One round: bound check, harvest, messages.  False when done.
	bool round(bool posting)
	{
		auto now = Clock::now();
		bool any = false;
		for (auto &f : fl_)
			if (f.busy) {
				any = true;
				if (now - f.t0 > kMixedBound)
					fail(std::string(f.verifying ? "read-back of a " : "") + kKindName[f.kind] +
					     " of " + std::to_string(f.len) + " bytes on the " +
					     (&f - fl_.data() < kInflight / 2 ? "ordered" : "unordered") +
					     " connection still not complete after " +
					     std::to_string(std::chrono::duration_cast<ms>(now - f.t0).count()) +
					     " ms (bound " +
					     std::to_string(std::chrono::duration_cast<ms>(kMixedBound).count()) +
					     " ms)");
			}
		if (!any && !posting)
			return false;
		auto got = n_.dev->wait(64, ms(100));
		if (!got) {
			fail("wait: " + got.error().message());
			return false;
		}
		for (const Completion &c : got.value()) {
			if (c.type == CompletionType::Notify) {
				if (c.region != n_.mr_dst->id() || c.status)
					fail("bad notify: " + c.describe());
				r_.notified++;
				continue;
			}
			if (c.type == CompletionType::ConnDead || c.type == CompletionType::ConnClosed) {
				// Said first: the failed operations that follow are its echo.
				r_.failure.clear();
				fail(c.describe());
				continue;
			}
			completed(c, posting);
		}
		take_messages();
		return true;
	}

	void run(int seconds, bool final_message)
	{
		const auto end = Clock::now() + std::chrono::seconds(seconds);
		for (int i = 0; i < kInflight; i++)
			post(i);
		while (!stop_ && round(Clock::now() < end))
			;
		if (stop_ || !final_message)
			return;
		// Our counts to the peer, then the peer's to us.
		std::uint64_t ck = next_++ * kInflight;
		fill_message(n_.msgs->data(), kFinal | static_cast<std::uint64_t>(n_.index), kFinalLen);
		std::memcpy(n_.msgs->data() + kMsgHdr, &r_.by_kind[kNotify], 8);
		std::memcpy(n_.msgs->data() + kMsgHdr + 8, &r_.msgs_sent, 8);
		auto st = n_.conns[1].send(*n_.mr_msgs, 0, kFinalLen, ck);
		if (!st)
			return fail("send the final counts: " + st.error().message());
		bool sent = false;
		const auto deadline = Clock::now() + std::chrono::seconds(seconds + 60);
		while (!stop_ && (!sent || !r_.peer_final)) {
			if (Clock::now() > deadline)
				return fail(std::string("no ") + (sent ? "final counts from the peer" :
							     "completion of the final counts"));
			auto got = n_.dev->wait(64, ms(100));
			if (!got)
				return fail("wait: " + got.error().message());
			for (const Completion &c : got.value()) {
				if (c.type == CompletionType::Notify) {
					r_.notified++;
				} else if (c.cookie == ck && c.status == 0) {
					sent = true;
				} else {
					fail("unexpected completion: " + c.describe());
				}
			}
			take_messages();
		}
	}

private:
	MixedNode &n_;
	MixedResult &r_;
	std::atomic<bool> &stop_;
	std::mt19937_64 g_;
	std::array<Flight, kInflight> fl_{};
	std::uint64_t next_ = 1;
	std::uint64_t msg_no_ = 0;	// messages posted
};

} // namespace

MixedResult run_mixed(MixedNode &node, int seconds, std::atomic<bool> &stop, bool final_message)
{
	MixedResult r;
	Runner(node, r, stop).run(seconds, final_message);
	return r;
}

void mixed_drain(MixedNode &node, MixedResult &r)
{
	if (std::string e = take_queued_messages(node, r); !e.empty()) {
		r.failure = e;
		return;
	}
	auto more = node.dev->poll(1024);
	if (!more) {
		r.failure = "poll: " + more.error().message();
		return;
	}
	for (const Completion &c : more.value()) {
		if (c.type != CompletionType::Notify)
			r.failure = "unexpected completion: " + c.describe();
		r.notified++;
	}
}

} // namespace metest
