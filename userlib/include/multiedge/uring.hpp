// libmultiedge: remote operations through io_uring (module ABI 5).
//
// The same operations as Connection::write/read/write_notify/send/atomic, posted
// as IORING_OP_URING_CMD submissions: prepare many, submit them with one
// system call, reap their completions.  Each CQE arrives when the
// operation has completed (a write at the target, a read in local memory).
//
// On a ring of its own:
//
//   auto q = UringQueue::create(dev).value();
//   for (int i = 0; i < 64; i++)
//           q.write(conn, mr, i * 4096, remote, i * 4096, 4096, /*user_data=*/i);
//   q.submit();
//   auto done = q.reap(64, /*min=*/64).value();     // 64 Completions
//
// On the application's ring, next to its files and sockets: attach(), then
// in the application's own CQE loop hand every CQE to take(); it returns
// the Completion for the queue's own CQEs and nothing for the others:
//
//   auto q = UringQueue::attach(dev, &ring).value();
//   q.write(...); io_uring_prep_read(io_uring_get_sqe(&ring), ...);
//   io_uring_submit(&ring);
//   io_uring_wait_cqe(&ring, &cqe);
//   if (auto c = q.take(cqe)) ... else ...your own...;
//   io_uring_cqe_seen(&ring, cqe);
//
// A queue is used by one thread at a time, as an io_uring is.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "multiedge/connection.hpp"
#include "multiedge/error.hpp"

struct io_uring;
struct io_uring_cqe;

namespace multiedge {

class Device;
class MemoryRegion;

namespace detail {
class DeviceFile;
struct UringSlot;
struct AtomicArgs;
}

class UringQueue {
public:
	struct State;	// opaque: the ring and the operations' slots

	struct Options {
		unsigned sq_entries = 256;	// submission ring size (own ring only)
		// Operations prepared and not yet completed, at most; preparing
		// one more fails with EBUSY (reap first).  The own ring's
		// completion ring is made at least this large.
		unsigned max_inflight = 4096;
		// Own ring only: 128-byte SQEs carry the operation inline; with
		// false, 64-byte SQEs point at it in the queue's memory.
		bool sqe128 = true;
	};

	// A queue on a ring of its own.  Fails with ENOTSUP when the loaded
	// module has no io_uring door (ABI < 5), with the errno of
	// io_uring_setup when io_uring is not available to this process
	// (ENOSYS: kernel without it; EPERM: seccomp or policy forbids it; the
	// message says so and that the ioctl path still works), EINVAL for
	// bad options.
	static Result<UringQueue> create(const Device &dev, const Options &opts);
	static Result<UringQueue> create(const Device &dev) { return create(dev, Options{}); }

	// A queue on the application's ring, which must outlive it.  The ring
	// may have 64- or 128-byte SQEs and CQEs; EINVAL if it was set up with
	// IORING_SETUP_IOPOLL (nothing to poll), ENOTSUP as above.
	static Result<UringQueue> attach(const Device &dev, io_uring *ring,
					 unsigned max_inflight = 4096);

	UringQueue(UringQueue &&other) noexcept;
	UringQueue &operator=(UringQueue &&other) noexcept;
	UringQueue(const UringQueue &) = delete;
	UringQueue &operator=(const UringQueue &) = delete;
	// Own ring: waits until every operation prepared and submitted has
	// completed (each does: a dead peer fails it within its timeout),
	// then closes the ring.  Attached ring: must not be destroyed with
	// operations in flight (inflight() > 0), whose CQEs the application
	// has yet to take(); that is a programming error and aborts, as
	// destroying a joinable std::thread does.
	~UringQueue();

	// Prepare one operation (an SQE, not yet submitted); user_data comes
	// back in its Completion's cookie.  The same checks and hints as
	// Connection's: EINVAL (an empty object, or a region or connection of
	// another Device), EBUSY (max_inflight operations outstanding, or the
	// submission ring is full even after submitting what it held).
	// Everything else the kernel finds (ERANGE, ENOTCONN, EACCES at the
	// target, ...) comes back as the Completion's status.
	Status write(const Connection &conn, const MemoryRegion &local, std::uint64_t local_off,
		     const RemoteRegion &remote, std::uint64_t remote_off, std::uint32_t len,
		     std::uint64_t user_data);
	Status write_notify(const Connection &conn, const MemoryRegion &local,
			    std::uint64_t local_off, const RemoteRegion &remote,
			    std::uint64_t remote_off, std::uint32_t len, std::uint32_t imm,
			    std::uint64_t user_data);
	Status read(const Connection &conn, const MemoryRegion &local, std::uint64_t local_off,
		    const RemoteRegion &remote, std::uint64_t remote_off, std::uint32_t len,
		    std::uint64_t user_data);
	Status send(const Connection &conn, const MemoryRegion &local, std::uint64_t local_off,
		    std::uint32_t len, std::uint64_t user_data);
	// A send on a shared connection to the peer's Device bound to `port`
	// (ABI 18), as Connection::send_to: EDESTADDRREQ for port 0,
	// EOPNOTSUPP from a module before ABI 18, before anything is prepared.
	Status send_to(const Connection &conn, std::uint16_t port, const MemoryRegion &local,
		       std::uint64_t local_off, std::uint32_t len, std::uint64_t user_data);
	// Remote atomics (ABI 19), as Connection::atomic and compare_swap:
	// the same refusals (EOPNOTSUPP, EINVAL, ERANGE) before an SQE is
	// taken.  The values are written into the local buffer when the
	// operation is prepared (the module reads them when it is issued,
	// after submit()); the value found is there when its Completion
	// (type Atomic) is reaped or taken: atomic_value().
	Status atomic(const Connection &conn, AtomicOp op, const MemoryRegion &local,
		      std::uint64_t local_off, const RemoteRegion &remote, std::uint64_t remote_off,
		      std::uint32_t size, std::uint64_t operand, std::uint64_t user_data);
	Status compare_swap(const Connection &conn, const MemoryRegion &local,
			    std::uint64_t local_off, const RemoteRegion &remote,
			    std::uint64_t remote_off, std::uint32_t size, std::uint64_t expected,
			    std::uint64_t desired, std::uint64_t user_data);

	// Submits every SQE prepared on the ring (the application's too, on
	// an attached ring): io_uring_submit().  Returns how many the kernel
	// took.
	Result<unsigned> submit();

	// Own ring: submits what is prepared, then returns up to `max`
	// completions, waiting until at least `min` are there or `timeout`
	// passed (then fewer).  EINVAL on an attached ring (the application
	// reaps there: take()).
	Result<std::vector<Completion>> reap(std::size_t max = 64, std::size_t min = 0,
					     std::chrono::milliseconds timeout = std::chrono::seconds(30));

	// The Completion of `cqe` if it is one of this queue's (and forgets
	// the operation), or nothing if the CQE is someone else's.  The caller
	// still marks the CQE seen.
	std::optional<Completion> take(const io_uring_cqe *cqe);

	// Operations prepared and not yet taken or reaped.
	std::size_t inflight() const noexcept;
	// The ring (own or attached); nullptr for an empty object.
	io_uring *ring() const noexcept;

private:
	explicit UringQueue(std::unique_ptr<State> s);
	Status prepare(std::uint32_t opcode, const Connection &conn, const MemoryRegion &local,
		       std::uint64_t local_off, const RemoteRegion *remote,
		       std::uint64_t remote_off, std::uint32_t len, std::uint32_t imm,
		       std::uint16_t port, std::uint64_t user_data);
	Status prepare_atomic(const Connection &conn, const MemoryRegion &local,
			      std::uint64_t local_off, const RemoteRegion &remote,
			      std::uint64_t remote_off, const detail::AtomicArgs &args,
			      std::uint64_t user_data);
	void drain_and_close() noexcept;

	std::unique_ptr<State> s_;
};

} // namespace multiedge
