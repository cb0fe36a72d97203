#include "workers.hpp"

#include <sys/ioctl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <string>

#include "uapi/multiedge.h"

namespace bench {

namespace {

// No completion for this long means the data path is stuck.
constexpr std::chrono::seconds kStuck{60};
// Cookies of read-back checks, above any slot cookie.
constexpr std::uint64_t kCheckCookie = 1ull << 40;

me::Status completion_error(const me::Completion &c)
{
	if (c.type == me::CompletionType::ConnClosed || c.type == me::CompletionType::ConnDead ||
	    !c.ok())
		return failure(c.describe());
	return {};
}

std::string hex(std::uint64_t v)
{
	char s[24];
	std::snprintf(s, sizeof(s), "%016" PRIx64, v);
	return s;
}

// Says once per process that a wait was interrupted without a signal.
void note_eintr()
{
	static std::atomic<bool> said{false};
	if (!said.exchange(true))
		std::fprintf(stderr,
			     "me_bench: note: Device::wait_for failed with EINTR although no signal "
			     "was sent (io_uring task work interrupts the module's wait); waiting "
			     "again\n");
}

// Reads the two stamp windows of [off, off + size) of `target` into ep.chk
// (at 0 and at kWindow) and checks them against `seed`.
me::Status check_remote(Endpoint &ep, const me::RemoteRegion &target, std::uint64_t off,
			std::uint64_t size, std::uint64_t seed, std::uint64_t &cookie)
{
	const auto w = static_cast<std::uint32_t>(window_len(size));
	const std::uint64_t c1 = cookie++, c2 = cookie++;
	if (auto st = ep.conn->read(*ep.chk, 0, target, off, w, c1); !st)
		return st;
	if (auto st = ep.conn->read(*ep.chk, kWindow, target, off + size - w, w, c2); !st)
		return st;
	for (auto c : {c1, c2}) {
		auto done = ep.dev->wait_for(c, kStuck);
		// EINTR with no signal: modules before dce7e0b ended the
		// ME_IOC_POLL_CQ wait with -EINTR when io_uring task work
		// (TWA_SIGNAL, e.g. from tearing down the oprate test's ring)
		// woke it.  The completions stay queued: wait again, a few times.
		for (int retry = 0; !done && retry < 8 &&
				    done.error().code() == std::errc::interrupted;
		     retry++) {
			note_eintr();
			done = ep.dev->wait_for(c, kStuck);
		}
		if (!done)
			return done.error();
		if (!done->ok())
			return failure("read-back check: " + done->describe());
	}
	std::uint64_t where = 0;
	if (!stamp_matches(ep.chk_buf.data(), ep.chk_buf.data() + kWindow, size, seed, where))
		return failure("DATA MISMATCH: the " + std::to_string(size) +
			       "-byte write at remote offset " + std::to_string(off) +
			       " (region " + std::to_string(target.id) + ") differs at byte " +
			       std::to_string(where) + " of the operation (stamp " + hex(seed) +
			       "); no result is reported for corrupted transfers");
	return {};
}

// Wall-clock microseconds of one ME_IOC_POST ioctl that the module
// refuses at its first check (len 0: EINVAL before any lookup): the fixed
// cost of the ioctl door — system call, argument copy, checks — without
// the engine.  Median of 5 rounds of 200 calls; NaN if the module answers
// anything but EINVAL.
double post_syscall_us(const Endpoint &ep)
{
	me_post p{};
	p.size = sizeof(p);
	p.opcode = ME_OP_WRITE;
	p.local_region = ep.src->id();
	p.len = 0;
	std::vector<double> rounds;
	for (int r = 0; r < 5; r++) {
		const auto t0 = Clock::now();
		for (int i = 0; i < 200; i++)
			if (::ioctl(ep.dev->fd(), ME_IOC_POST, &p) == 0 || errno != EINVAL)
				return NAN;
		rounds.push_back(seconds_between(t0, Clock::now()) * 1e6 / 200);
	}
	std::sort(rounds.begin(), rounds.end());
	return rounds[rounds.size() / 2];
}

} // namespace

me::Result<std::unique_ptr<Endpoint>> Endpoint::create(std::uint32_t peer, std::size_t src_len,
						       std::size_t dst_len, Target target)
{
	auto ep = std::make_unique<Endpoint>();
	auto dev = me::Device::open();
	if (!dev)
		return dev.error();
	ep->dev.emplace(std::move(dev).value());

	auto reg = [&](Buffer &buf, std::optional<me::MemoryRegion> &mr, std::size_t len,
		       me::Access access, const char *what) -> me::Status {
		auto b = Buffer::map(len, what);
		if (!b)
			return b.error();
		buf = std::move(b).value();
		auto r = ep->dev->register_memory(buf.data(), buf.size(), access);
		if (!r)
			return r.error();
		mr.emplace(std::move(r).value());
		return {};
	};
	if (auto st = reg(ep->src_buf, ep->src, src_len, me::Access::None, "a source buffer"); !st)
		return st.error();
	if (dst_len && target == Target::Pinned) {
		if (auto st = reg(ep->dst_buf, ep->dst, dst_len, me::Access::RemoteReadWrite,
				  "a target region");
		    !st)
			return st.error();
	} else if (dst_len) {
		auto a = ep->dev->map_area(dst_len);
		if (!a)
			return a.error();
		ep->dst_area.emplace(std::move(a).value());
		const me::Placement pl = target == Target::AreaCopy  ? me::Placement::Copy
					 : target == Target::AreaLazy ? me::Placement::FlipLazy
								      : me::Placement::FlipEager;
		auto r = ep->dev->register_memory(ep->dst_area->data(), ep->dst_area->size(),
						  me::Access::RemoteReadWrite, pl);
		if (!r)
			return r.error();
		ep->dst.emplace(std::move(r).value());
	}
	if (auto st = reg(ep->chk_buf, ep->chk, 4096, me::Access::None, "a check buffer"); !st)
		return st.error();

	auto conn = ep->dev->connect(peer);
	if (!conn)
		return conn.error();
	ep->conn.emplace(std::move(conn).value());
	return ep;
}

std::uint64_t counter(const Phase::Counters &c, const char *name)
{
	for (const auto &[k, v] : c)
		if (k == name)
			return v;
	return 0;
}

std::uint64_t frames_sent(const Phase::Counters &c)
{
	return counter(c, "tx_data") + counter(c, "tx_rtx_loss") + counter(c, "tx_rtx_rto") +
	       counter(c, "tx_rtx_fail") + counter(c, "tx_ack") + counter(c, "tx_nack");
}

void Phase::warm()
{
	if (warm_.fetch_add(1) + 1 == threads_) {
		if (stats_dev)
			if (auto st = stats_dev->stats())
				stats_start = std::move(st).value();
		auto c = read_cpu_times();
		cpu_ok = c.ok();
		if (c)
			cpu_start = c.value();
		start = Clock::now();
		measuring_.store(true, std::memory_order_release);
	}
}

void Phase::finished()
{
	if (done_.fetch_add(1) + 1 == threads_) {
		end = Clock::now();
		auto c = read_cpu_times();
		cpu_ok = cpu_ok && c.ok();
		if (c)
			cpu_end = c.value();
		if (stats_dev)
			if (auto st = stats_dev->stats())
				stats_end = std::move(st).value();
	}
}

namespace {

// The loop of run_writer and run_reader: `depth` operations of spec.size
// bytes in flight, slot s posted by post(s, cookie s + 1), each completion
// of type `type` freeing its slot to be posted again until the phase ends.
template <typename Post>
me::Result<ThreadResult> run_stream(Endpoint &ep, const RunSpec &spec, Phase &phase,
				    me::CompletionType type, const char *what, Post post_op)
{
	const unsigned depth = spec.depth;
	std::vector<Clock::time_point> slot_time(depth);
	unsigned inflight = 0;
	ThreadResult r;
	r.lat_ns.reserve(4096);
	Stepper step(spec, phase);

	auto fail = [&](me::Error e) -> me::Result<ThreadResult> {
		phase.abort();
		return e;
	};
	auto post = [&](unsigned s) -> me::Status {
		slot_time[s] = Clock::now();
		auto st = post_op(s);
		if (st)
			inflight++;
		return st;
	};

	for (unsigned s = 0; s < depth; s++)
		if (auto st = post(s); !st)
			return fail(st.error());
	while (inflight) {
		auto cs = ep.dev->wait(64, kStuck);
		if (!cs)
			return fail(cs.error());
		if (cs->empty())
			return fail(failure("no " + std::string(what) + " completed for " +
					    std::to_string(kStuck.count()) + " s (" +
					    std::to_string(inflight) + " in flight)"));
		const auto now = Clock::now();
		for (const auto &c : cs.value()) {
			if (auto st = completion_error(c); !st)
				return fail(st.error());
			if (c.type != type || c.cookie == 0 || c.cookie > depth)
				return fail(failure("unexpected completion: " + c.describe()));
			const auto s = static_cast<unsigned>(c.cookie - 1);
			inflight--;
			bool more = step.completed(now, ns_between(slot_time[s], now), r);
			if (phase.aborted())
				return fail(failure("stopped because another thread failed"));
			if (more)
				if (auto st = post(s); !st)
					return fail(st.error());
		}
	}
	return r;
}

// Waits for the completion with `cookie`, which must be a success.
me::Status await_ok(Endpoint &ep, std::uint64_t cookie, const char *what)
{
	auto done = ep.dev->wait_for(cookie, kStuck);
	if (!done)
		return done.error();
	if (!done->ok())
		return failure(std::string(what) + ": " + done->describe());
	return {};
}

} // namespace

me::Result<ThreadResult> run_writer(Endpoint &ep, const me::RemoteRegion &target, unsigned thread,
				    const RunSpec &spec, Phase &phase)
{
	const std::uint64_t size = spec.size;
	const unsigned depth = spec.depth;
	// Slot s at the same offset on both sides, spec.misalign past s * size.
	auto at = [&](unsigned s) { return s * size + spec.misalign; };
	std::vector<std::uint64_t> slot_seq(depth, 0);
	std::uint64_t seq = 0;

	auto r = run_stream(ep, spec, phase, me::CompletionType::Write, "write", [&](unsigned s) {
		seq++;
		stamp(ep.src_buf.data() + at(s), size, op_seed(spec.salt, thread, seq));
		slot_seq[s] = seq;
		return ep.conn->write(*ep.src, at(s), target, at(s),
				      static_cast<std::uint32_t>(size), s + 1);
	});
	if (!r)
		return r;

	std::uint64_t cookie = kCheckCookie;
	for (unsigned s = 0; s < depth; s++)
		if (slot_seq[s])
			if (auto st = check_remote(ep, target, at(s), size,
						   op_seed(spec.salt, thread, slot_seq[s]), cookie);
			    !st) {
				phase.abort();
				return st.error();
			}
	return r;
}

me::Result<ThreadResult> run_reader(Endpoint &ep, const me::RemoteRegion &target, unsigned thread,
				    const RunSpec &spec, Phase &phase)
{
	const std::uint64_t size = spec.size;
	const unsigned depth = spec.depth;
	const auto len = static_cast<std::uint32_t>(size);
	const std::size_t w = window_len(size);
	auto at = [&](unsigned s) { return s * size; };
	auto seed = [&](unsigned s) { return op_seed(spec.salt, thread, s + 1); };

	// Each remote slot gets a stamp of its own; the local windows are
	// cleared, so only a read can bring the stamp back.
	std::uint64_t cookie = kCheckCookie;
	for (unsigned s = 0; s < depth; s++) {
		std::byte *p = ep.src_buf.data() + at(s);
		stamp(p, size, seed(s));
		if (auto st = ep.conn->write(*ep.src, at(s), target, at(s), len, cookie); !st)
			return st.error();
		if (auto st = await_ok(ep, cookie++, "stamping the remote slots"); !st)
			return st.error();
		std::fill_n(p, w, std::byte{0});
		std::fill_n(p + size - w, w, std::byte{0});
	}

	auto r = run_stream(ep, spec, phase, me::CompletionType::Read, "read", [&](unsigned s) {
		return ep.conn->read(*ep.src, at(s), target, at(s), len, s + 1);
	});
	if (!r)
		return r;

	for (unsigned s = 0; s < depth; s++) {
		const std::byte *p = ep.src_buf.data() + at(s);
		std::uint64_t where = 0;
		if (!stamp_matches(p, p + size - w, size, seed(s), where)) {
			phase.abort();
			return failure("DATA MISMATCH: the " + std::to_string(size) +
				       "-byte read of remote offset " + std::to_string(at(s)) +
				       " (region " + std::to_string(target.id) +
				       ") differs at byte " + std::to_string(where) +
				       " of the operation (stamp " + hex(seed(s)) +
				       "); no result is reported for corrupted transfers");
		}
	}
	return r;
}

me::Result<ThreadResult> run_oprate(Endpoint &ep, const me::RemoteRegion &target, unsigned thread,
				    const RunSpec &spec, Phase &phase, Door door, unsigned batch)
{
	const std::uint64_t size = spec.size;
	const unsigned depth = spec.depth;
	const auto len = static_cast<std::uint32_t>(size);
	std::vector<std::uint64_t> slot_seq(depth, 0);
	std::vector<Clock::time_point> slot_time(depth);
	std::uint64_t seq = 0;
	unsigned inflight = 0;
	ThreadResult r;
	r.lat_ns.reserve(1u << 16);
	r.syscall_us = post_syscall_us(ep);
	Stepper step(spec, phase);

	auto fail = [&](me::Error e) -> me::Result<ThreadResult> {
		phase.abort();
		return e;
	};
	// The slot's next operation: a fresh stamp in its source range.
	auto next = [&](unsigned s) {
		seq++;
		stamp(ep.src_buf.data() + s * size, size, op_seed(spec.salt, thread, seq));
		slot_seq[s] = seq;
		slot_time[s] = Clock::now();
	};
	// Checks one completion and accounts it; returns whether its slot
	// may be posted again.
	auto completed = [&](const me::Completion &c, Clock::time_point now,
			     unsigned &slot) -> me::Result<bool> {
		if (auto st = completion_error(c); !st)
			return st.error();
		if (c.type != me::CompletionType::Write || c.cookie == 0 || c.cookie > depth ||
		    c.len != len)
			return failure("unexpected completion: " + c.describe());
		slot = static_cast<unsigned>(c.cookie - 1);
		inflight--;
		return step.completed(now, ns_between(slot_time[slot], now), r);
	};

	if (door == Door::Ioctl) {
		// With batch > 1 the writes posted together (the first fill, the
		// slots one harvest freed) go `batch` at a time: all but the last
		// of each group say Post::More, so the module sends them packed.
		auto post = [&](unsigned s, bool more) -> me::Status {
			next(s);
			auto st = ep.conn->write(*ep.src, s * size, target, s * size, len, s + 1,
						 more ? me::Post::More : me::Post::Blocking);
			if (st) {
				inflight++;
				if (step.measuring())
					r.calls++;
			}
			return st;
		};
		auto post_group = [&](const std::vector<unsigned> &slots) -> me::Status {
			for (std::size_t i = 0; i < slots.size(); i++) {
				const bool more = batch > 1 && i + 1 < slots.size() && (i + 1) % batch;
				if (auto st = post(slots[i], more); !st)
					return st;
			}
			return {};
		};
		std::vector<unsigned> freed;
		for (unsigned s = 0; s < depth; s++)
			freed.push_back(s);
		if (auto st = post_group(freed); !st)
			return fail(st.error());
		while (inflight) {
			const bool counted = step.measuring();
			auto cs = ep.dev->wait(depth, kStuck);
			if (!cs)
				return fail(cs.error());
			if (counted)
				r.calls++;
			if (cs->empty())
				return fail(failure("no write completed for " +
						    std::to_string(kStuck.count()) + " s (" +
						    std::to_string(inflight) + " in flight)"));
			const auto now = Clock::now();
			freed.clear();
			for (const auto &c : cs.value()) {
				unsigned s = 0;
				auto more = completed(c, now, s);
				if (!more)
					return fail(more.error());
				if (phase.aborted())
					return fail(failure("stopped because another thread failed"));
				if (more.value())
					freed.push_back(s);
			}
			if (auto st = post_group(freed); !st)
				return fail(st.error());
		}
	} else {
		me::UringQueue::Options qo;
		qo.sq_entries = depth;
		qo.max_inflight = depth;
		qo.sqe128 = true;
		auto q = me::UringQueue::create(*ep.dev, qo);
		if (!q)
			return fail(q.error());
		std::vector<unsigned> idle;	// slots free to post, refilled by completions
		for (unsigned s = depth; s-- > 0;)
			idle.push_back(s);
		bool posting = true;
		// Whole batches only: `batch` SQEs, then one submit.
		auto post_batches = [&]() -> me::Status {
			while (posting && idle.size() >= batch) {
				for (unsigned i = 0; i < batch; i++) {
					const unsigned s = idle.back();
					next(s);
					if (auto st = q->write(*ep.conn, *ep.src, s * size, target, s * size,
							       len, s + 1);
					    !st)
						return st;
					idle.pop_back();
					inflight++;
				}
				auto n = q->submit();
				if (!n)
					return n.error();
				if (step.measuring())
					r.calls++;
			}
			return {};
		};
		if (auto st = post_batches(); !st)
			return fail(st.error());
		while (inflight) {
			const bool counted = step.measuring();
			auto cs = q->reap(depth, std::min<std::size_t>(batch, inflight), kStuck);
			if (!cs)
				return fail(cs.error());
			if (counted)
				r.calls++;
			if (cs->empty())
				return fail(failure("no write completed for " +
						    std::to_string(kStuck.count()) + " s (" +
						    std::to_string(inflight) + " in flight)"));
			const auto now = Clock::now();
			for (const auto &c : cs.value()) {
				unsigned s = 0;
				auto more = completed(c, now, s);
				if (!more)
					return fail(more.error());
				if (phase.aborted())
					return fail(failure("stopped because another thread failed"));
				if (more.value())
					idle.push_back(s);
				else
					posting = false;
			}
			if (auto st = post_batches(); !st)
				return fail(st.error());
		}
	}

	std::uint64_t cookie = kCheckCookie;
	for (unsigned s = 0; s < depth; s++)
		if (slot_seq[s])
			if (auto st = check_remote(ep, target, s * size, size,
						   op_seed(spec.salt, thread, slot_seq[s]), cookie);
			    !st)
				return fail(st.error());
	return r;
}

me::Result<ThreadResult> run_pingpong(Endpoint &ep, const me::RemoteRegion &target,
				      unsigned thread, const RunSpec &spec, Phase &phase)
{
	const std::uint64_t size = spec.size;
	const std::size_t w = window_len(size);
	ThreadResult r;
	r.lat_ns.reserve(4096);
	Stepper step(spec, phase);
	unsigned pending = 0;	// our writes not completed yet
	auto fail = [&](me::Error e) -> me::Result<ThreadResult> {
		phase.abort();
		return e;
	};

	for (std::uint64_t seq = 1;; seq++) {
		const std::uint64_t seed = op_seed(spec.salt, thread, seq);
		stamp(ep.src_buf.data(), size, seed);
		const auto t = Clock::now();
		if (auto st = ep.conn->write_notify(*ep.src, 0, target, 0,
						    static_cast<std::uint32_t>(size),
						    static_cast<std::uint32_t>(seq), seq);
		    !st)
			return fail(st.error());
		pending++;
		std::optional<Clock::time_point> echoed;
		while (!echoed) {
			auto cs = ep.dev->wait(16, kStuck);
			if (!cs)
				return fail(cs.error());
			if (cs->empty())
				return fail(failure("no echo for " + std::to_string(kStuck.count()) +
						    " s (operation " + std::to_string(seq) + ")"));
			const auto now = Clock::now();
			for (const auto &c : cs.value()) {
				if (auto st = completion_error(c); !st)
					return fail(st.error());
				if (c.type == me::CompletionType::Write && pending) {
					pending--;
				} else if (c.type == me::CompletionType::Notify && !echoed &&
					   c.imm == static_cast<std::uint32_t>(seq) &&
					   c.region == ep.dst->id() && c.off == 0 && c.len == size) {
					echoed = now;
				} else {
					return fail(failure("unexpected completion while waiting for "
							    "echo " + std::to_string(seq) + ": " +
							    c.describe()));
				}
			}
		}
		std::uint64_t where = 0;
		const std::byte *d = ep.dst_data();
		if (!stamp_matches(d, d + size - w, size, seed, where))
			return fail(failure("DATA MISMATCH: echo " + std::to_string(seq) + " of " +
					    std::to_string(size) + " bytes differs at byte " +
					    std::to_string(where) +
					    "; no result is reported for corrupted transfers"));
		bool more = step.completed(*echoed, ns_between(t, *echoed), r);
		if (phase.aborted())
			return fail(failure("stopped because another thread failed"));
		if (!more)
			break;
	}
	while (pending) {
		auto cs = ep.dev->wait(16, kStuck);
		if (!cs)
			return fail(cs.error());
		if (cs->empty())
			return fail(failure("a write_notify did not complete within " +
					    std::to_string(kStuck.count()) + " s"));
		for (const auto &c : cs.value()) {
			if (auto st = completion_error(c); !st)
				return fail(st.error());
			if (c.type != me::CompletionType::Write)
				return fail(failure("unexpected completion: " + c.describe()));
			pending--;
		}
	}
	return r;
}

me::Status run_echo(Endpoint &ep, const me::RemoteRegion &back, const std::atomic<bool> &stop)
{
	std::uint64_t cookie = 1, pending = 0;
	auto handle = [&](const me::Completion &c) -> me::Status {
		if (auto st = completion_error(c); !st)
			return st;
		if (c.type == me::CompletionType::Write) {
			pending--;
			return {};
		}
		if (c.type != me::CompletionType::Notify || c.region != ep.dst->id())
			return failure("echo: unexpected completion: " + c.describe());
		if (auto st = ep.conn->write_notify(*ep.dst, c.off, back, c.off, c.len, c.imm,
						    cookie++);
		    !st)
			return st;
		pending++;
		return {};
	};
	while (!stop.load(std::memory_order_relaxed)) {
		auto cs = ep.dev->wait(16, std::chrono::milliseconds(100));
		if (!cs)
			return cs.error();
		for (const auto &c : cs.value())
			if (auto st = handle(c); !st)
				return st;
	}
	auto deadline = Clock::now() + kStuck;
	while (pending && Clock::now() < deadline) {
		auto cs = ep.dev->wait(16, std::chrono::milliseconds(500));
		if (!cs)
			return cs.error();
		for (const auto &c : cs.value())
			if (auto st = handle(c); !st)
				return st;
	}
	if (pending)
		return failure("echo: " + std::to_string(pending) + " write(s) back never completed");
	return {};
}

} // namespace bench
