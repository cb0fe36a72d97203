// libmultiedge: connections, remote operations and completions.
//
// A Connection belongs to the Device it was opened on (the same open file):
// operations post through it and complete into that Device's completion
// queue, harvested with Device::poll() / Device::wait().  Each posted
// operation completes exactly once, with the cookie given at posting.
//
//   auto dev = Device::open().value();
//   auto conn = dev.connect(peer).value();
//   auto mr = dev.register_memory(buf, len, Access::None).value();
//   conn.write(mr, 0, remote, 0, len, /*cookie=*/1);
//   auto done = dev.wait_for(1).value();      // the write is at the target
//
// A remote atomic (module ABI 19) takes its operand as a value; the value
// it found at the target lands in the local buffer:
//
//   conn.atomic(AtomicOp::Add, mr, 0, counter, 0, 8, /*operand=*/1, /*cookie=*/2);
//   if (dev.wait_for(2).value().ok())
//           old = atomic_value(mr, 0, 8).value();
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "multiedge/error.hpp"

namespace multiedge {

class Device;
class MemoryRegion;

namespace detail {
class DeviceFile;
}

// What a peer hands out so others can reach one of its regions: the
// region's id and key (exchanged with send/recv, for example).
struct RemoteRegion {
	std::uint32_t id = 0;
	std::uint64_t key = 0;
	std::uint64_t length = 0;	// informational; the target checks ranges
};

enum class CompletionType : std::uint32_t {
	Write = 1,	// a write or notify posted here finished
	Read = 2,	// a read posted here finished: the data are in place
	Notify = 3,	// a peer's notify landed in a region registered here
	Send = 4,	// a send posted here finished
	ConnClosed = 5,	// a connection of this device closed
	ConnDead = 6,	// a connection of this device died (status says why)
	Atomic = 7,	// an atomic posted here finished: the value found is in place
};

// A remote atomic operation (module ABI 19): what it leaves in the 4 or 8
// bytes at the target where it found `old`.  Each is applied exactly once,
// as one step against every other atomic on that memory and the owner's own
// atomic instructions, and gives back `old`.
enum class AtomicOp : std::uint32_t {
	Add = 1,		// old + operand (wraps)
	And = 2,		// old & operand
	Or = 3,			// old | operand
	Xor = 4,		// old ^ operand
	Swap = 5,		// operand
	CompareSwap = 6,	// desired if old == expected, else old (compare_swap())
	SignedMin = 7,		// the smaller, as signed integers
	SignedMax = 8,		// the larger, as signed integers
	UnsignedMin = 9,	// the smaller, as unsigned integers
	UnsignedMax = 10,	// the larger, as unsigned integers
	Read = 11,		// old: nothing changes
};

struct Completion {
	std::uint64_t cookie = 0;	// the poster's cookie; 0 for events
	CompletionType type = CompletionType::Write;
	int status = 0;			// 0 or a positive errno value
	std::uint32_t conn = 0;
	std::uint32_t peer = 0;
	std::uint32_t len = 0;		// bytes moved (0 on error); Atomic: its size
	std::uint32_t imm = 0;		// Notify
	std::uint32_t region = 0;	// Notify: the local region written
	std::uint64_t off = 0;		// Notify: where the write began

	bool ok() const noexcept { return status == 0; }
	// "write (cookie 7) on connection 3 failed: Permission denied (wrong
	// key, or the region does not grant that access)" and the like.
	std::string describe() const;
};

// A message taken from the node's receive queue (Device::recv()).
struct Message {
	std::uint32_t peer = 0;
	std::uint32_t conn = 0;		// receiving side's connection id
	std::vector<std::byte> data;
	// ABI 18: on a shared connection, the port the sending Device is bound
	// to (0: none, then no send can answer it); 0 on any other connection.
	// The module fills it in: the sender cannot forge it.
	std::uint16_t port = 0;
};

// A node seen by discovery (Device::peers()).
struct PeerInfo {
	std::uint32_t node_id = 0;
	std::uint32_t incarnation = 0;
	std::uint32_t links = 0;	// bit i: link slot i reaches it
	std::uint32_t alive_links = 0;	// bit i: ... and it answers there
	bool alive = false;
	// ABI 9 (empty / 0 from older modules)
	std::string name;		// from its HELLO
	std::uint32_t conns = 0;	// connections to it in the namespace
};

// A neighbour: one peer as reached through one link (Device::neighbours()).
struct NeighbourInfo {
	std::uint32_t link = 0;		// link slot (LinkInfo::index)
	std::uint32_t node_id = 0;
	std::uint32_t incarnation = 0;
	std::array<std::uint8_t, 6> mac{};	// its address on that link
	bool alive = false;		// both directions work
	bool rx = false;		// we hear it
	bool heard = false;		// it hears us
	std::uint32_t rtt_us = 0;	// last keepalive round trip, 0: none
	std::uint32_t rate_mbps = 0;
	std::uint32_t inflight = 0;	// data bytes not yet acknowledged
	std::uint32_t rx_age_ms = 0;	// since its last frame there
	std::uint64_t tx_pkts = 0, rx_pkts = 0, lost_pkts = 0;
	std::uint64_t tx_bytes = 0, rx_bytes = 0;
	std::uint32_t cwnd = 0;		// congestion window, bytes
	std::uint32_t data_rtt_us = 0;	// last round trip of data, 0: none
	std::uint32_t data_delay_us = 0; // the same without the hosts' queues (ABI 12)
	std::uint32_t base_us = 0;	// the least such delay lately, 0: none
	std::uint32_t target_us = 0;	// the delay its window aims at, 0: cc off (ABI 13)
	std::uint32_t noise_us = 0;	// mean excess of idle exchanges over base
};

// Counters of one connection of the namespace (Device::connections()).
struct ConnectionInfo {
	std::uint32_t conn = 0;
	std::uint32_t peer = 0;
	std::string state;		// "connecting", "established", ...
	bool ordered = false;
	bool active = false;		// opened from this side
	std::uint64_t tx_packets = 0, tx_bytes = 0, retransmits = 0;
	std::uint64_t rx_packets = 0, rx_bytes = 0, rx_dropped = 0;
	std::uint64_t errors = 0, copies = 0;
	std::uint16_t port = 0;		// ABI 11: the port it was opened to (0: any)
	bool shared = false;		// ABI 18: the node pair's shared connection
};

enum class Ordering : std::uint32_t { Unordered = 0, Ordered = 1 };

// Posting: by default a post waits while the queues are full; with
// Post::NonBlocking it fails with EAGAIN instead.  Post::More (module ABI
// 15) says that more posts on the connection follow at once: the module
// holds this one until the next post without it (or its timer, within a
// tick) and sends them together, small ones several to a frame.
// Post::AckNow (module ABI 27) says the caller waits for this write's,
// notify's or send's completion before it goes on: the target acks it at
// once instead of holding the ack for a reply to carry (which the reply
// could only bring after what the caller does next).  They combine:
// Post::NonBlocking | Post::More.
enum class Post : std::uint32_t { Blocking = 0, NonBlocking = 1, More = 2, AckNow = 4 };

constexpr Post operator|(Post a, Post b) noexcept
{
	return static_cast<Post>(static_cast<std::uint32_t>(a) | static_cast<std::uint32_t>(b));
}

// A connection to a peer node.  Owns it: movable, not copyable; the
// destructor closes it in order (posted operations still complete).
// A shared one (Device::connect_shared) is left instead: the connection
// stays for the other Devices that joined it.
class Connection {
public:
	Connection(Connection &&other) noexcept;
	Connection &operator=(Connection &&other) noexcept;
	Connection(const Connection &) = delete;
	Connection &operator=(const Connection &) = delete;
	~Connection();

	std::uint32_t id() const noexcept { return id_; }
	std::uint32_t peer() const noexcept { return peer_; }
	// The node pair's shared connection (ABI 18): joined through
	// Device::connect_shared, or that of a message taken by
	// Device::accept.  Its sends name a port: send_to().
	bool shared() const noexcept { return hold_ == Hold::Joined || hold_ == Hold::Borrowed; }
	// This node itself (Device::loopback(), ABI 20).
	bool loopback() const noexcept { return hold_ == Hold::Loopback; }

	// local[local_off, +len) -> remote[remote_off, +len).
	Status write(const MemoryRegion &local, std::uint64_t local_off,
		     const RemoteRegion &remote, std::uint64_t remote_off,
		     std::uint32_t len, std::uint64_t cookie, Post how = Post::Blocking);
	// The same, and the target's region owner gets a Notify with imm.
	Status write_notify(const MemoryRegion &local, std::uint64_t local_off,
			    const RemoteRegion &remote, std::uint64_t remote_off,
			    std::uint32_t len, std::uint32_t imm, std::uint64_t cookie,
			    Post how = Post::Blocking);
	// remote[remote_off, +len) -> local[local_off, +len).
	Status read(const MemoryRegion &local, std::uint64_t local_off,
		    const RemoteRegion &remote, std::uint64_t remote_off,
		    std::uint32_t len, std::uint64_t cookie, Post how = Post::Blocking);
	// Up to ME_SEND_MAX (64 KiB; 1024 bytes before ABI 26, EMSGSIZE
	// beyond) from local[local_off, +len) into the peer's receive queue,
	// which takes it whole.
	Status send(const MemoryRegion &local, std::uint64_t local_off, std::uint32_t len,
		    std::uint64_t cookie, Post how = Post::Blocking);
	// The same on a shared connection (ABI 18), to the peer's Device bound
	// to `port` (Device::bind); a send there must name one (plain send()
	// fails with EDESTADDRREQ).  The receiver's Message::port says this
	// Device's port, so it can answer.  EDESTADDRREQ for port 0 (the sender
	// of a Message with port 0 has none), EINVAL on a connection that is
	// not shared, EOPNOTSUPP from a module before ABI 18; the completion
	// fails with ECONNREFUSED when nobody there is bound to `port`.
	Status send_to(std::uint16_t port, const MemoryRegion &local, std::uint64_t local_off,
		       std::uint32_t len, std::uint64_t cookie, Post how = Post::Blocking);

	// A remote atomic (module ABI 19): `op` with `operand` on the `size`
	// (4 or 8) bytes at remote[remote_off], which must be aligned to
	// `size` in the target's memory.  The call writes `operand` into
	// local[local_off, +size) in host order (AtomicOp::Read ignores it and
	// writes nothing), where the module reads it at posting; the value
	// found at the target lands there before the Atomic completion (read
	// it with atomic_value()).  Leave that range alone until then.  The
	// target region must grant Access::RemoteReadWrite (AtomicOp::Read:
	// RemoteRead).  Refused before any system call, with nothing written:
	// EOPNOTSUPP from a module without atomics (before ABI 19); EINVAL for
	// a size other than 4 or 8, an op the library does not know, or
	// AtomicOp::CompareSwap (compare_swap() carries its two values);
	// ERANGE when local[local_off, +size) is outside the region; and what
	// write() refuses.  The completion fails with EINVAL when the target
	// memory is not aligned to `size`, EACCES and ERANGE as a write's.
	Status atomic(AtomicOp op, const MemoryRegion &local, std::uint64_t local_off,
		      const RemoteRegion &remote, std::uint64_t remote_off, std::uint32_t size,
		      std::uint64_t operand, std::uint64_t cookie, Post how = Post::Blocking);
	// Compare-and-swap (ABI 19), as atomic(): `desired` replaces the
	// remote value if it equals `expected`.  The call writes `desired`
	// into local[local_off, +size) and `expected` into the `size` bytes
	// after it, so the local range is 2 * size (ERANGE otherwise); the
	// value found lands in local[local_off, +size): the swap took place if
	// it equals `expected`.
	Status compare_swap(const MemoryRegion &local, std::uint64_t local_off,
			    const RemoteRegion &remote, std::uint64_t remote_off,
			    std::uint32_t size, std::uint64_t expected, std::uint64_t desired,
			    std::uint64_t cookie, Post how = Post::Blocking);

	// Orderly close now; the object is empty afterwards.  A shared
	// connection joined by connect_shared() is left (the connection
	// closes when the last Device of this node that joined it leaves, if
	// this node opened it); one taken by accept() only empties the object.
	Status close();

private:
	friend class Device;
	friend class UringQueue;
	// What close() gives back to the module.
	enum class Hold : std::uint8_t {
		Own,		// its own or accepted: ME_IOC_DISCONNECT closes it
		Joined,		// shared, joined by this handle: ME_IOC_DISCONNECT leaves
		Borrowed,	// shared, not joined by this handle: nothing to give back
		Loopback,	// this node itself (ME_CONN_LOOPBACK): nothing to give back
	};
	Connection(std::shared_ptr<detail::DeviceFile> file, std::uint32_t id, std::uint32_t peer,
		   Hold hold = Hold::Own)
		: file_(std::move(file)), id_(id), peer_(peer), hold_(hold) {}

	std::shared_ptr<detail::DeviceFile> file_;
	std::uint32_t id_ = 0;
	std::uint32_t peer_ = 0;
	Hold hold_ = Hold::Own;
};

// Helper for bootstrap: a region's id and key as a peer should receive them.
RemoteRegion remote_of(const MemoryRegion &mr);

// The value an atomic (ABI 19) found at the target, once its Atomic
// completion came without error: the `size` (4 or 8) bytes at
// local[local_off] in host order, zero-extended (for SignedMin/SignedMax,
// cast to std::int32_t or std::int64_t).  EINVAL for another size or an
// empty region, ERANGE when the range is outside it.
Result<std::uint64_t> atomic_value(const MemoryRegion &local, std::uint64_t local_off,
				   std::uint32_t size);

} // namespace multiedge
