// me_bench: the measuring loops, one thread each — the pipelined writer
// (oneway, and both sides of twoway), the ping-pong client and the
// server's echo.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common.hpp"
#include "control.hpp"
#include "cpu.hpp"

namespace bench {

// What one thread owns: its own open device (so its completions are its
// own), a connection to the peer, a source buffer, an optional region the
// peer may read and write, and a small buffer for read-back checks.
// Declaration order is teardown order reversed: the connection and
// regions go before the buffers they cover.
struct Endpoint {
	Buffer src_buf, dst_buf, chk_buf;
	std::optional<me::ReceiveArea> dst_area;	// the target, for Target::Area*
	std::optional<me::Device> dev;
	std::optional<me::MemoryRegion> src, dst, chk;
	std::optional<me::Connection> conn;

	// Opens a device, maps and registers src_len bytes of source and
	// dst_len bytes (0: none) of remotely writable/readable target, and
	// connects to `peer`.
	static me::Result<std::unique_ptr<Endpoint>> create(std::uint32_t peer,
							    std::size_t src_len,
							    std::size_t dst_len,
							    Target target = Target::Pinned);
	const std::byte *dst_data() const
	{
		return dst_area ? reinterpret_cast<const std::byte *>(dst_area->data())
				: dst_buf.data();
	}
};

// What a measurement asks of each thread.
struct RunSpec {
	std::uint64_t size = 0;		// bytes per operation
	unsigned depth = 1;		// operations in flight
	double seconds = 1.0;		// measured time, at least
	double warmup = 0.1;		// unmeasured time first, at least
	std::uint64_t min_ops = 1;	// measured operations, at least
	std::uint64_t salt = 0;		// makes stamps differ between runs and sides
	std::uint64_t misalign = 0;	// writer: bytes past each slot's start
};

// Shared by the threads of one measurement: all warm up, the last to be
// warm opens the measured window (CPU snapshot, start time), the last to
// finish closes it.  `abort` stops everybody after a failure.
class Phase {
public:
	explicit Phase(unsigned threads) : threads_(threads) {}

	void warm();			// this thread has warmed up
	bool measuring() const noexcept { return measuring_.load(std::memory_order_acquire); }
	void finished();		// this thread's measured window is over
	void abort() noexcept { abort_.store(true, std::memory_order_relaxed); }
	bool aborted() const noexcept { return abort_.load(std::memory_order_relaxed); }

	// Set before the threads start: the device whose engine counters
	// (Device::stats, this namespace's) are read when the window opens
	// and closes; nullptr: none.
	const me::Device *stats_dev = nullptr;

	// Valid after every thread returned.
	Clock::time_point start, end;
	CpuTimes cpu_start, cpu_end;
	bool cpu_ok = true;
	using Counters = std::vector<std::pair<std::string, std::uint64_t>>;
	Counters stats_start, stats_end;	// empty when not read

private:
	const unsigned threads_;
	std::atomic<unsigned> warm_{0}, done_{0};
	std::atomic<bool> measuring_{false}, abort_{false};
};

// One engine counter of a Device::stats reading (0 when it has none).
std::uint64_t counter(const Phase::Counters &c, const char *name);
// Frames an engine sent: data, retransmissions, acks and nacks.
std::uint64_t frames_sent(const Phase::Counters &c);

struct ThreadResult {
	std::uint64_t ops = 0;		// completed in the measured window
	std::uint64_t bytes = 0;
	std::vector<std::uint64_t> lat_ns;	// per op: post to completion (pingpong: RTT)
	// oprate: calls into the door during the measured window (ioctl:
	// posts and Device::wait calls; uring: submit() and reap() calls).
	std::uint64_t calls = 0;
	// oprate: microseconds of one ME_IOC_POST the module refuses at once
	// (the ioctl door's fixed cost), measured before the run.
	double syscall_us = NAN;
};

// Tracks the warm-up / measure / drain steps of one thread.
class Stepper {
public:
	enum class State { Warm, Measure, Drain };

	Stepper(const RunSpec &spec, Phase &phase) : spec_(spec), phase_(phase), begin_(Clock::now()) {}

	// One operation completed at `now` after `ns`; returns whether to
	// post another.
	bool completed(Clock::time_point now, std::uint64_t ns, ThreadResult &r)
	{
		switch (state_) {
		case State::Warm:
			if (!said_warm_ && seconds_between(begin_, now) >= spec_.warmup) {
				said_warm_ = true;
				phase_.warm();
			}
			if (phase_.measuring()) {
				state_ = State::Measure;
				t0_ = now;
			}
			break;
		case State::Measure:
			r.ops++;
			r.bytes += spec_.size;
			r.lat_ns.push_back(ns);
			if (r.ops >= spec_.min_ops && seconds_between(t0_, now) >= spec_.seconds) {
				state_ = State::Drain;
				phase_.finished();
			}
			break;
		case State::Drain:
			break;
		}
		return state_ != State::Drain;
	}

	bool measuring() const noexcept { return state_ == State::Measure; }

private:
	const RunSpec &spec_;
	Phase &phase_;
	Clock::time_point begin_, t0_;
	State state_ = State::Warm;
	bool said_warm_ = false;
};

// Back-to-back writes of spec.size bytes, spec.depth in flight, from
// slot s of ep's source to slot s of `target` (slot = s * size); then
// reads back the stamp windows of every slot's last write and compares.
// Fails on any failed completion or a stamp mismatch.
me::Result<ThreadResult> run_writer(Endpoint &ep, const me::RemoteRegion &target, unsigned thread,
				    const RunSpec &spec, Phase &phase);

// Back-to-back reads of spec.size bytes, spec.depth in flight, from slot
// s of `target` into slot s of ep's source.  Each remote slot is first
// written with a stamp of its own (and the local windows cleared); at the
// end every slot's windows must hold it.
me::Result<ThreadResult> run_reader(Endpoint &ep, const me::RemoteRegion &target, unsigned thread,
				    const RunSpec &spec, Phase &phase);

// The op-rate loop: spec.size-byte writes, spec.depth in flight, from
// slot s of ep's source to slot s of `target`, as run_writer, posted
// through `door`.  Ioctl: one Connection::write per operation, completions
// harvested by Device::wait (up to depth per call), each freed slot posted
// again at once.  Uring: a UringQueue of its own (128-byte SQEs); `batch`
// writes prepared, one submit(), and reap() waits for at least `batch`
// completions before the freed slots are refilled, `batch` at a time.
// Every completion must be a successful write of spec.size bytes; the
// stamp windows of every slot's last write are read back at the end.
me::Result<ThreadResult> run_oprate(Endpoint &ep, const me::RemoteRegion &target, unsigned thread,
				    const RunSpec &spec, Phase &phase, Door door, unsigned batch);

// One write_notify of spec.size bytes at a time into `target`; waits for
// the peer's echo (a Notify into ep.dst) and checks its stamp windows.
me::Result<ThreadResult> run_pingpong(Endpoint &ep, const me::RemoteRegion &target,
				      unsigned thread, const RunSpec &spec, Phase &phase);

// Server side of pingpong: every Notify into ep.dst is written back with
// write_notify from the same place of ep.dst into `back`, until `stop`.
me::Status run_echo(Endpoint &ep, const me::RemoteRegion &back, const std::atomic<bool> &stop);

} // namespace bench
