// libmultiedge: remote operations through io_uring.
//
// Every prepared operation lives in a slot of a table allocated once per
// queue (never moved: with 64-byte SQEs the kernel reads the struct
// me_post by address, possibly again from an io_uring worker, until the
// CQE).  The SQE's user_data is the slot's address, which is how take()
// tells the queue's CQEs from the application's.
#include "multiedge/uring.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <liburing.h>
#include <unordered_map>

#include "internal.hpp"
#include "multiedge/device.hpp"
#include "uapi/multiedge.h"

namespace multiedge {

namespace detail {
struct UringSlot {
	me_post post{};			// what the kernel reads
	std::uint64_t user_data = 0;	// the application's
	std::uint32_t peer = 0;
	bool busy = false;
};
} // namespace detail

struct UringQueue::State {
	std::shared_ptr<detail::DeviceFile> file;	// keeps the fd valid for SQEs
	io_uring own{};
	io_uring *ring = nullptr;
	bool owned = false;
	bool inline_cmd = false;	// 128-byte SQEs: me_post in sqe->cmd
	bool cqe32 = false;		// big_cqe[0] carries the bytes moved
	bool post_more = false;		// the module takes ME_POST_F_MORE
	// Per connection, its latest prepared post and where its SQE is in
	// the ring: a later one on the connection before the ring's next
	// submission marks it ME_POST_F_MORE, so the module sends the
	// connection's batch when it reaches the last (small writes packed).
	struct Latest {
		detail::UringSlot *slot;
		io_uring_sqe *sqe;
		unsigned pos;		// liburing's sqe_tail before it
	};
	std::unordered_map<std::uint32_t, Latest> latest;
	std::vector<detail::UringSlot> slots;	// sized once, never resized
	std::vector<std::uint32_t> free_slots;
	std::size_t inflight = 0;
};

namespace {

constexpr unsigned kMaxSqEntries = 32768;
constexpr unsigned kMaxInflight = 65536;

Error setup_error(int err)
{
	std::string hint;
	switch (err) {
	case ENOSYS:
		hint = "this kernel has no io_uring; the ioctl path (Connection::write, "
		       "Device::wait) works without it";
		break;
	case EPERM:
	case EACCES:
		hint = "io_uring is forbidden to this process (a seccomp filter, or a "
		       "policy such as the sysctl kernel.io_uring_disabled); the ioctl path "
		       "(Connection::write, Device::wait) works without it";
		break;
	case ENOMEM:
		hint = "no memory for the rings, or RLIMIT_MEMLOCK too low for them "
		       "(ulimit -l); try fewer entries";
		break;
	}
	return detail::errno_error(err, "io_uring is not available", hint);
}

// The module must have the io_uring door (ABI 5).
Status check_module(const Device &dev)
{
	auto info = dev.query();
	if (!info)
		return info.error();
	if (!(info->features & ME_FEATURE_URING_CMD))
		return detail::errno_error(
			ENOTSUP, "cannot post through io_uring",
			"the loaded module (ABI " + std::to_string(info->abi_version) +
				") has no io_uring door; load multiedge.ko of ABI 5 or newer, "
				"or post with Connection::write and friends");
	return {};
}

bool module_takes_more(const Device &dev)
{
	auto info = dev.query();
	return info && (info->features & ME_FEATURE_POST_MORE);
}

// Is the SQE prepared at `pos` still in the ring, not yet submitted?
// (io_uring_submit() moves sqe_head up to sqe_tail.)
bool unsubmitted(const io_uring *ring, unsigned pos)
{
	return pos - ring->sq.sqe_head < ring->sq.sqe_tail - ring->sq.sqe_head;
}

// The post in `l` has a successor on its connection in the same batch.
void mark_more(const UringQueue::State &s, const UringQueue::State::Latest &l)
{
	l.slot->post.flags |= ME_POST_F_MORE;
	if (s.inline_cmd)
		std::memcpy(l.sqe->cmd, &l.slot->post, sizeof(l.slot->post));
}

void init_slots(UringQueue::State &s, unsigned n)
{
	s.slots.resize(n);
	s.free_slots.reserve(n);
	for (unsigned i = n; i-- > 0;)
		s.free_slots.push_back(i);
}

CompletionType type_of(std::uint32_t opcode)
{
	switch (opcode) {
	case ME_OP_READ:
		return CompletionType::Read;
	case ME_OP_SEND:
		return CompletionType::Send;
	case ME_OP_ATOMIC:
		return CompletionType::Atomic;
	default:
		return CompletionType::Write;
	}
}

} // namespace

UringQueue::UringQueue(std::unique_ptr<State> s) : s_(std::move(s)) {}

UringQueue::UringQueue(UringQueue &&other) noexcept = default;

UringQueue &UringQueue::operator=(UringQueue &&other) noexcept
{
	if (this != &other) {
		drain_and_close();
		s_ = std::move(other.s_);
	}
	return *this;
}

UringQueue::~UringQueue()
{
	drain_and_close();
}

Result<UringQueue> UringQueue::create(const Device &dev, const Options &opts)
{
	if (dev.fd() < 0)
		return detail::empty_error("cannot create an io_uring queue", "Device");
	if (!opts.sq_entries || opts.sq_entries > kMaxSqEntries || !opts.max_inflight ||
	    opts.max_inflight > kMaxInflight)
		return detail::errno_error(EINVAL, "cannot create an io_uring queue",
					   "sq_entries must be 1.." + std::to_string(kMaxSqEntries) +
						   " and max_inflight 1.." +
						   std::to_string(kMaxInflight));
	if (auto st = check_module(dev); !st)
		return st.error();

	auto s = std::make_unique<State>();
	io_uring_params p{};
	p.flags = IORING_SETUP_CQSIZE | (opts.sqe128 ? IORING_SETUP_SQE128 : 0);
	// Every operation in flight may complete before the next reap.
	p.cq_entries = std::max(opts.max_inflight, 2 * opts.sq_entries);
	int ret = io_uring_queue_init_params(opts.sq_entries, &s->own, &p);
	if (ret < 0)
		return setup_error(-ret);
	s->ring = &s->own;
	s->owned = true;
	s->inline_cmd = opts.sqe128;
	s->file = dev.file_;
	s->post_more = module_takes_more(dev);
	init_slots(*s, opts.max_inflight);
	return UringQueue(std::move(s));
}

Result<UringQueue> UringQueue::attach(const Device &dev, io_uring *ring, unsigned max_inflight)
{
	const std::string what = "cannot attach an io_uring queue";
	if (dev.fd() < 0)
		return detail::empty_error(what, "Device");
	if (!ring || ring->ring_fd < 0)
		return detail::errno_error(EINVAL, what, "no ring given");
	if (ring->flags & IORING_SETUP_IOPOLL)
		return detail::errno_error(EINVAL, what,
					   "the ring was set up with IORING_SETUP_IOPOLL; remote "
					   "operations complete from the network, not by polling");
	if (!max_inflight || max_inflight > kMaxInflight)
		return detail::errno_error(EINVAL, what,
					   "max_inflight must be 1.." + std::to_string(kMaxInflight));
	if (auto st = check_module(dev); !st)
		return st.error();

	auto s = std::make_unique<State>();
	s->ring = ring;
	s->inline_cmd = ring->flags & IORING_SETUP_SQE128;
	s->cqe32 = ring->flags & IORING_SETUP_CQE32;
	s->file = dev.file_;
	s->post_more = module_takes_more(dev);
	init_slots(*s, max_inflight);
	return UringQueue(std::move(s));
}

void UringQueue::drain_and_close() noexcept
{
	if (!s_)
		return;
	if (!s_->owned) {
		if (s_->inflight) {
			std::fprintf(stderr,
				     "libmultiedge: UringQueue on the application's ring destroyed "
				     "with %zu operations in flight (their CQEs were not taken)\n",
				     s_->inflight);
			std::abort();
		}
		s_.reset();
		return;
	}
	// Operations never submitted cannot complete: submit them first.
	(void)io_uring_submit(s_->ring);
	while (s_->inflight > io_uring_sq_ready(s_->ring)) {
		io_uring_cqe *cqe = nullptr;
		int ret = io_uring_wait_cqe(s_->ring, &cqe);
		if (ret == -EINTR)
			continue;
		if (ret < 0)
			break;
		(void)take(cqe);
		io_uring_cqe_seen(s_->ring, cqe);
	}
	io_uring_queue_exit(s_->ring);
	s_.reset();
}

Status UringQueue::prepare(std::uint32_t opcode, const Connection &conn,
			   const MemoryRegion &local, std::uint64_t local_off,
			   const RemoteRegion *remote, std::uint64_t remote_off, std::uint32_t len,
			   std::uint32_t imm, std::uint16_t port, std::uint64_t user_data)
{
	// Built only on failure: this runs once per operation.
	auto what = [&conn] {
		return "cannot prepare an io_uring post on connection " + detail::conn_label(conn.id_);
	};
	if (!s_)
		return detail::empty_error("cannot prepare an io_uring post", "UringQueue");
	if (!conn.file_ || !conn.id_)
		return detail::empty_error("cannot prepare an io_uring post", "Connection");
	if (conn.file_ != s_->file)
		return detail::errno_error(EINVAL, what(),
					   "the connection was opened on another Device than the "
					   "queue's");
	if (!local.file_ || !local.id_)
		return detail::errno_error(EINVAL, what(),
					   "the local memory region is empty: it was moved from or "
					   "deregistered");
	if (local.file_ != s_->file)
		return detail::errno_error(EINVAL, what(),
					   "local region " + std::to_string(local.id_) +
						   " was registered on another Device than the queue's");
	if (s_->free_slots.empty())
		return detail::errno_error(EBUSY, what(),
					   std::to_string(s_->slots.size()) +
						   " operations are in flight (max_inflight): reap or "
						   "take completions first");

	unsigned pos = s_->ring->sq.sqe_tail;
	io_uring_sqe *sqe = io_uring_get_sqe(s_->ring);
	if (!sqe) {
		// The submission ring is full: hand what it holds to the kernel.
		int ret = io_uring_submit(s_->ring);
		if (ret < 0)
			return detail::errno_error(-ret, what() + ": submitting the full ring failed");
		pos = s_->ring->sq.sqe_tail;
		sqe = io_uring_get_sqe(s_->ring);
		if (!sqe)
			return detail::errno_error(EBUSY, what(),
						   "the submission ring is full and the kernel took "
						   "none of it");
	}

	std::uint32_t idx = s_->free_slots.back();
	s_->free_slots.pop_back();
	detail::UringSlot &slot = s_->slots[idx];
	slot.busy = true;
	slot.user_data = user_data;
	slot.peer = conn.peer_;
	slot.post = me_post{};
	slot.post.size = sizeof(slot.post);
	slot.post.opcode = opcode;
	slot.post.conn = conn.id_;
	slot.post.local_region = local.id_;
	slot.post.local_off = local_off;
	slot.post.len = len;
	if (remote) {
		slot.post.remote_region = remote->id;
		slot.post.remote_key = static_cast<std::uint32_t>(remote->key);
		slot.post.remote_key_hi = static_cast<std::uint32_t>(remote->key >> 32);
		slot.post.remote_off = remote_off;
	}
	slot.post.imm = imm;
	slot.post.port = port;
	s_->inflight++;

	io_uring_prep_rw(IORING_OP_URING_CMD, sqe, s_->file->fd, nullptr, 0, 0);
	sqe->cmd_op = ME_IOC_POST;	// after prep_rw: it shares the offset field
	if (s_->inline_cmd) {
		static_assert(sizeof(me_post) <= ME_URING_CMD_SIZE_SQE128);
		std::memcpy(sqe->cmd, &slot.post, sizeof(slot.post));
	} else {
		me_uring_ptr ptr{};
		ptr.arg = reinterpret_cast<std::uintptr_t>(&slot.post);
		static_assert(sizeof(ptr) == ME_URING_CMD_SIZE);
		std::memcpy(sqe->cmd, &ptr, sizeof(ptr));
	}
	io_uring_sqe_set_data64(sqe, reinterpret_cast<std::uintptr_t>(&slot));
	if (s_->post_more) {
		auto [it, fresh] = s_->latest.try_emplace(conn.id_, State::Latest{&slot, sqe, pos});
		if (!fresh) {
			if (unsubmitted(s_->ring, it->second.pos))
				mark_more(*s_, it->second);
			it->second = State::Latest{&slot, sqe, pos};
		}
	}
	return {};
}

Status UringQueue::write(const Connection &conn, const MemoryRegion &local,
			 std::uint64_t local_off, const RemoteRegion &remote,
			 std::uint64_t remote_off, std::uint32_t len, std::uint64_t user_data)
{
	return prepare(ME_OP_WRITE, conn, local, local_off, &remote, remote_off, len, 0, 0,
		       user_data);
}

Status UringQueue::write_notify(const Connection &conn, const MemoryRegion &local,
				std::uint64_t local_off, const RemoteRegion &remote,
				std::uint64_t remote_off, std::uint32_t len, std::uint32_t imm,
				std::uint64_t user_data)
{
	return prepare(ME_OP_NOTIFY, conn, local, local_off, &remote, remote_off, len, imm, 0,
		       user_data);
}

Status UringQueue::read(const Connection &conn, const MemoryRegion &local,
			std::uint64_t local_off, const RemoteRegion &remote,
			std::uint64_t remote_off, std::uint32_t len, std::uint64_t user_data)
{
	return prepare(ME_OP_READ, conn, local, local_off, &remote, remote_off, len, 0, 0,
		       user_data);
}

Status UringQueue::send(const Connection &conn, const MemoryRegion &local,
			std::uint64_t local_off, std::uint32_t len, std::uint64_t user_data)
{
	return prepare(ME_OP_SEND, conn, local, local_off, nullptr, 0, len, 0, 0, user_data);
}

Status UringQueue::send_to(const Connection &conn, std::uint16_t port, const MemoryRegion &local,
			   std::uint64_t local_off, std::uint32_t len, std::uint64_t user_data)
{
	if (s_ && conn.file_ && conn.id_ && conn.file_ == s_->file) {
		if (auto st = detail::check_send_port(*s_->file, conn.id_, port); !st)
			return st;
	}
	return prepare(ME_OP_SEND, conn, local, local_off, nullptr, 0, len, 0, port, user_data);
}

Status UringQueue::prepare_atomic(const Connection &conn, const MemoryRegion &local,
				  std::uint64_t local_off, const RemoteRegion &remote,
				  std::uint64_t remote_off, const detail::AtomicArgs &args,
				  std::uint64_t user_data)
{
	const char *call = args.op == AtomicOp::CompareSwap ? "compare_swap" : "atomic";
	// Where prepare() will refuse, it says why; else the atomic's own
	// checks come before it takes a slot and an SQE.
	if (s_ && conn.file_ && conn.id_ && conn.file_ == s_->file && local.file_ == s_->file &&
	    local.id_) {
		if (auto st = detail::check_atomic(*s_->file, call, conn.id_, local, local_off, args);
		    !st)
			return st;
	}
	if (auto st = prepare(ME_OP_ATOMIC, conn, local, local_off, &remote, remote_off, args.size,
			      static_cast<std::uint32_t>(args.op), 0, user_data);
	    !st)
		return st;
	// The SQE is not the kernel's before the next submission (liburing
	// publishes the ring's tail only then), and the module reads the
	// values when it issues it: writing them now is in time, and a
	// refused preparation has written nothing.
	detail::put_atomic_args(local, local_off, args);
	return {};
}

Status UringQueue::atomic(const Connection &conn, AtomicOp op, const MemoryRegion &local,
			  std::uint64_t local_off, const RemoteRegion &remote,
			  std::uint64_t remote_off, std::uint32_t size, std::uint64_t operand,
			  std::uint64_t user_data)
{
	if (op == AtomicOp::CompareSwap)
		return detail::errno_error(EINVAL,
					   "cannot prepare an io_uring atomic on connection " +
						   detail::conn_label(conn.id_),
					   "AtomicOp::CompareSwap compares with a second value: "
					   "prepare it with compare_swap()");
	return prepare_atomic(conn, local, local_off, remote, remote_off,
			      detail::AtomicArgs{op, size, operand, 0}, user_data);
}

Status UringQueue::compare_swap(const Connection &conn, const MemoryRegion &local,
				std::uint64_t local_off, const RemoteRegion &remote,
				std::uint64_t remote_off, std::uint32_t size, std::uint64_t expected,
				std::uint64_t desired, std::uint64_t user_data)
{
	return prepare_atomic(conn, local, local_off, remote, remote_off,
			      detail::AtomicArgs{AtomicOp::CompareSwap, size, desired, expected},
			      user_data);
}

Result<unsigned> UringQueue::submit()
{
	if (!s_)
		return detail::empty_error("cannot submit", "UringQueue");
	int ret = io_uring_submit(s_->ring);
	if (ret < 0) {
		std::string hint;
		if (ret == -EBUSY)
			hint = "the completion ring is full: reap completions first";
		return detail::errno_error(-ret, "io_uring_submit failed", hint);
	}
	return static_cast<unsigned>(ret);
}

std::optional<Completion> UringQueue::take(const io_uring_cqe *cqe)
{
	if (!s_ || !cqe || s_->slots.empty())
		return std::nullopt;
	auto base = reinterpret_cast<std::uintptr_t>(s_->slots.data());
	std::uint64_t ud = cqe->user_data;
	std::uint64_t span = s_->slots.size() * sizeof(detail::UringSlot);
	if (ud < base || ud - base >= span || (ud - base) % sizeof(detail::UringSlot))
		return std::nullopt;
	auto idx = static_cast<std::uint32_t>((ud - base) / sizeof(detail::UringSlot));
	detail::UringSlot &slot = s_->slots[idx];
	if (!slot.busy)
		return std::nullopt;

	Completion c;
	c.cookie = slot.user_data;
	c.type = type_of(slot.post.opcode);
	c.status = cqe->res < 0 ? -cqe->res : 0;
	c.conn = slot.post.conn;
	c.peer = slot.peer;
	if (!c.status)
		c.len = s_->cqe32 ? static_cast<std::uint32_t>(cqe->big_cqe[0]) : slot.post.len;
	if (slot.post.opcode == ME_OP_NOTIFY)
		c.imm = slot.post.imm;
	slot.busy = false;
	s_->free_slots.push_back(idx);
	s_->inflight--;
	return c;
}

Result<std::vector<Completion>> UringQueue::reap(std::size_t max, std::size_t min,
						 std::chrono::milliseconds timeout)
{
	const std::string what = "cannot reap io_uring completions";
	if (!s_)
		return detail::empty_error(what, "UringQueue");
	if (!s_->owned)
		return detail::errno_error(EINVAL, what,
					   "the queue is on the application's ring: reap its CQEs "
					   "there and pass them to take()");
	int ret = io_uring_submit(s_->ring);
	if (ret < 0)
		return detail::errno_error(-ret, what + ": submitting failed");

	std::vector<Completion> out;
	auto deadline = detail::deadline_after(timeout);
	for (;;) {
		io_uring_cqe *cqe = nullptr;
		while (out.size() < max && io_uring_peek_cqe(s_->ring, &cqe) == 0) {
			if (auto c = take(cqe))
				out.push_back(*c);
			io_uring_cqe_seen(s_->ring, cqe);
		}
		if (out.size() >= max || out.size() >= min)
			break;
		auto left = deadline - std::chrono::steady_clock::now();
		if (left <= std::chrono::steady_clock::duration::zero())
			break;
		auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(left).count();
		__kernel_timespec ts{};
		ts.tv_sec = ns / 1000000000;
		ts.tv_nsec = ns % 1000000000;
		ret = io_uring_wait_cqe_timeout(s_->ring, &cqe, &ts);
		if (ret < 0 && ret != -ETIME && ret != -EINTR)
			return detail::errno_error(-ret, what);
	}
	return out;
}

std::size_t UringQueue::inflight() const noexcept
{
	return s_ ? s_->inflight : 0;
}

io_uring *UringQueue::ring() const noexcept
{
	return s_ ? s_->ring : nullptr;
}

} // namespace multiedge
