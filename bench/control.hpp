// me_bench: how client and server find each other and talk between
// measurements — discovery, and small control messages by send/recv.
//
// A session (one test of one client process):
//   client -> server  Hello   test, threads, depth, largest size, and the
//                             client's receive region per thread (twoway
//                             and pingpong write back into them)
//   server -> client  Ready   the server's target region per thread
//   per size:
//     client -> server  Begin  size, seconds, operations (twoway: the
//                              server starts its writers)
//     client -> server  End    the client's threads are done
//     server -> client  Result the server's CPU use over Begin..End (and
//                              how long that was) and, for twoway, what
//                              its writers moved
//   client -> server  Bye     session over; finished=1: the server exits
// Every message carries the client's random session number; a message of
// another session is ignored.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "common.hpp"

namespace bench {

enum class Test : std::uint32_t { OneWay = 1, TwoWay = 2, PingPong = 3, OpRate = 4, Read = 5 };
const char *test_name(Test t);

// How the oprate test posts: one ME_IOC_POST ioctl per operation
// (Connection::write, completions harvested by Device::wait), or
// IORING_OP_URING_CMD submissions in batches (UringQueue).
enum class Door : std::uint32_t { Ioctl = 1, Uring = 2 };
const char *door_name(Door d);

// The server's target memory: pinned pages, or a receive area placed by
// copy or page flip (lazy or eager TLB invalidation).
enum class Target : std::uint32_t { Pinned = 0, AreaCopy, AreaLazy, AreaEager };
const char *target_name(Target t);

enum class Kind : std::uint32_t { Hello = 1, Ready = 2, Begin = 3, End = 4, Result = 5, Bye = 6 };

struct RegionRef {
	std::uint32_t id;
	std::uint32_t reserved;
	std::uint64_t key;
};

constexpr std::uint64_t kNoFrames = ~0ull;

struct Msg {
	char magic[8];
	Kind kind;
	std::uint32_t status;		// Ready/Result/Bye: 0 ok, else failed (text says why)
	std::uint64_t session;
	Test test;			// Hello
	std::uint32_t threads;		// Hello
	std::uint32_t depth;		// Hello
	std::uint32_t finished;		// Bye: 1 = the server should exit
	std::uint64_t max_size;		// Hello: bytes per thread region slot
	std::uint64_t size;		// Begin
	std::uint64_t seconds_ns;	// Begin
	std::uint64_t warmup_ns;	// Begin
	std::uint64_t min_ops;		// Begin: per thread
	std::uint64_t ops;		// Result (twoway): server writes measured
	std::uint64_t bytes;		// Result (twoway)
	std::uint64_t elapsed_ns;	// Result (twoway)
	std::uint64_t cpu_busy;		// Result: server ticks over Begin..End
	std::uint64_t cpu_total;	// Result
	std::uint64_t lat_median_ns;	// Result (twoway)
	std::uint64_t lat_p99_ns;	// Result (twoway)
	std::uint64_t window_ns;	// Result: Begin..End at the server
	std::uint64_t frames;		// Result: frames the server's engine sent
					// over Begin..End (data, resent, acks);
					// kNoFrames: not read
	RegionRef regions[kMaxThreads];	// Hello: client's; Ready: server's
	char text[256];			// failure text
};
static_assert(sizeof(Msg) <= 1024, "a control message must fit one send");

Msg make_msg(Kind kind, std::uint64_t session);
void set_text(Msg &m, const std::string &s);
std::string text_of(const Msg &m);

// Waits until one peer is alive on every attached link (or on all of
// `want_peer`'s links when it is not 0) and returns it.  Fails with a
// sentence after `limit`.
me::Result<me::PeerInfo> wait_for_peer(const me::Device &dev, std::chrono::seconds limit,
				       std::uint32_t want_peer);
// The start both roles share: NUMA binding, the device, a line saying who
// we are and what we wait for (`waiting_for`), then wait_for_peer().
struct Options;
struct Started {
	me::Device dev;
	me::PeerInfo peer;
};
me::Result<Started> start_role(const Options &o, const char *role, const char *waiting_for);

// Whether `peer` is still there, checked about once a second while
// waiting: false once it restarted (another incarnation) or was not alive
// at kAbsentChecks checks in a row (`absent` counts them; a loaded guest's
// links may blink for a moment, as at phase C's 1% loss).
constexpr int kAbsentChecks = 5;
bool still_there(const me::Device &dev, const me::PeerInfo &peer, int &absent);

// A connection for control messages to one peer, with its own small
// registered send buffer.  Receives go through the node's receive queue.
class Channel {
public:
	static me::Result<Channel> open(const me::Device &dev, std::uint32_t peer);

	std::uint32_t peer() const noexcept { return conn_.peer(); }
	// Sends and waits until the message is in the peer's queue.
	me::Status send(const Msg &m);

private:
	Channel(const me::Device &dev, Buffer buf, me::MemoryRegion mr, me::Connection conn)
		: dev_(&dev), buf_(std::move(buf)), mr_(std::move(mr)), conn_(std::move(conn)) {}
	const me::Device *dev_;
	Buffer buf_;
	me::MemoryRegion mr_;
	me::Connection conn_;
	std::uint64_t cookie_ = 1ull << 62;
};

// Takes the next message of this benchmark from `from` (0: anyone);
// nullopt when none came within `timeout`.  Messages of other programs
// are dropped with a note on stderr.
struct Received {
	Msg msg;
	std::uint32_t peer;
};
me::Result<std::optional<Received>> receive(const me::Device &dev, std::uint32_t from,
					    std::chrono::milliseconds timeout);

} // namespace bench
