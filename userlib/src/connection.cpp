// libmultiedge: connections and the operations posted on them.
#include "multiedge/connection.hpp"

#include <cerrno>
#include <cstring>
#include <sys/ioctl.h>

#include "internal.hpp"
#include "multiedge/device.hpp"
#include "uapi/multiedge.h"

namespace multiedge {

namespace {

const char *op_name(const me_post &p)
{
	switch (p.opcode) {
	case ME_OP_WRITE:
		return "write";
	case ME_OP_NOTIFY:
		return "write_notify";
	case ME_OP_READ:
		return "read";
	case ME_OP_SEND:
		return "send";
	case ME_OP_ATOMIC:
		return p.imm == ME_ATOMIC_CSWAP ? "compare_swap" : "atomic";
	}
	return "operation";
}

std::string post_hint(int err, const me_post &p)
{
	std::string conn = detail::conn_label(p.conn);
	std::string region = std::to_string(p.local_region);
	switch (err) {
	case EINVAL:
		if (p.port)
			return "only a send on a shared connection (Device::connect_shared) names a "
			       "port; connection " + conn + " is not shared";
		if (p.opcode == ME_OP_ATOMIC)
			return "an atomic acts on 4 or 8 bytes";
		return "the length must be at least 1 byte";
	case EDESTADDRREQ:
		return "connection " + conn + " is shared: a send on it names the port of the "
		       "peer's Device that takes it (send_to)";
	case EMSGSIZE:
		return p.opcode == ME_OP_SEND
			       ? "a send carries at most " + std::to_string(ME_SEND_MAX) + " bytes (" +
					 std::to_string(ME_SEND_MAX_VER0) + " before ABI 26)"
			       : "an operation moves at most " + std::to_string(ME_OP_MAX_LEN) +
					 " bytes";
	case ENOENT:
		return "connection " + conn + " or local region " + region +
		       " is not (or no longer) of this device";
	case ERANGE: {
		// compare_swap's local range holds the value compared with too.
		std::uint64_t len = p.len;
		if (p.opcode == ME_OP_ATOMIC && p.imm == ME_ATOMIC_CSWAP)
			len *= 2;
		return "[" + std::to_string(p.local_off) + ", +" + std::to_string(len) +
		       ") is outside local region " + region +
		       ", or the remote offset plus the length wraps around";
	}
	case ENOTCONN:
		return "connection " + conn + " is closing, closed or dead: open a new one";
	case EAGAIN:
		return "the connection's operation queue or the completion queue is full: "
		       "harvest completions (Device::poll/wait) or post blocking";
	case EINTR:
		return "a signal arrived while waiting for room; nothing was posted";
	case EOPNOTSUPP:
		if (p.conn == ME_CONN_LOOPBACK && p.opcode == ME_OP_SEND)
			return "this node's loopback carries no sends: send to another Device of "
			       "the node through the means you share with it";
		if (p.flags & ME_POST_F_MORE)
			return "Post::More needs a module of ABI 15 or newer (mectl info)";
		if (p.flags & ME_POST_F_ACK_NOW)
			return "Post::AckNow needs a module of ABI 27 or newer (mectl info)";
		if (p.opcode == ME_OP_ATOMIC)
			return "the module does not know this atomic operation: is it older than "
			       "the library? (mectl info)";
		return "the module does not know this operation or flag: is it older than the "
		       "library? (mectl info)";
	case ENOTTY:
		return detail::abi4_hint();
	}
	return {};
}

} // namespace

Connection::Connection(Connection &&other) noexcept
	: file_(std::move(other.file_)), id_(other.id_), peer_(other.peer_), hold_(other.hold_)
{
	other.id_ = 0;
	other.peer_ = 0;
	other.hold_ = Hold::Own;
}

Connection &Connection::operator=(Connection &&other) noexcept
{
	if (this != &other) {
		if (file_ && id_)
			(void)close();
		file_ = std::move(other.file_);
		id_ = other.id_;
		peer_ = other.peer_;
		hold_ = other.hold_;
		other.id_ = 0;
		other.peer_ = 0;
		other.hold_ = Hold::Own;
	}
	return *this;
}

Connection::~Connection()
{
	// A connection the peer closed or that died is already gone
	// (ENOTCONN); one whose file went away is too (ENOENT).
	if (file_ && id_)
		(void)close();
}

Status Connection::close()
{
	if (!file_ || !id_)
		return detail::empty_error("cannot close the connection", "Connection");
	const Hold hold = hold_;
	std::uint32_t id = id_;
	std::shared_ptr<detail::DeviceFile> file = std::move(file_);
	std::uint32_t peer = peer_;
	id_ = 0;
	peer_ = 0;
	hold_ = Hold::Own;
	if (hold == Hold::Borrowed || hold == Hold::Loopback)
		return {};

	me_disconnect req{};
	req.size = sizeof(req);
	req.conn = id;
	int ret, err;
	if (hold == Hold::Joined) {
		// Leaving: under shared_mu, so that no connect_shared() of this
		// file joins again between the registry and the module.
		std::lock_guard lk(file->shared_mu);
		auto it = file->shared.find(peer);
		if (it != file->shared.end() && it->second == id)
			file->shared.erase(it);
		ret = ::ioctl(file->fd, ME_IOC_DISCONNECT, &req);
		err = errno;
	} else {
		ret = ::ioctl(file->fd, ME_IOC_DISCONNECT, &req);
		err = errno;
	}
	if (ret == 0)
		return {};
	std::string hint;
	if (err == ENOTCONN)
		hint = "it was already closing, closed or dead";
	else if (err == ENOENT)
		hint = hold == Hold::Joined ? "this device is no longer joined to it"
					    : "it is not a connection of this device";
	return detail::errno_error(err,
				   std::string(hold == Hold::Joined ? "cannot leave shared connection "
								    : "cannot close connection ") +
					   std::to_string(id),
				   hint);
}

namespace {

// Posts `p` on `file`, after the checks only the library can make.  An
// atomic's values (`atomic`) are written into `local` last, just before the
// system call: nothing is written for a post refused here.
Status post(const std::shared_ptr<detail::DeviceFile> &file, std::uint32_t conn, me_post &p,
	    const MemoryRegion &local, const std::shared_ptr<detail::DeviceFile> &local_file,
	    std::uint32_t local_id, Post how, const detail::AtomicArgs *atomic = nullptr)
{
	// Built only on failure: this runs once per operation.
	auto what = [&p, conn] {
		return std::string("cannot post ") + op_name(p) + " on connection " +
		       detail::conn_label(conn);
	};
	if (!file || !conn)
		return detail::empty_error(std::string("cannot post ") + op_name(p), "Connection");
	const auto bits = static_cast<std::uint32_t>(how);
	if (bits & ~static_cast<std::uint32_t>(Post::NonBlocking | Post::More | Post::AckNow))
		return detail::errno_error(EINVAL, what(),
					   "unknown Post bits " + std::to_string(bits) +
						   ": Post::Blocking, NonBlocking, More, AckNow and their |");
	if (!local_file || !local_id)
		return detail::errno_error(EINVAL, what(),
					   "the local memory region is empty: it was moved from or "
					   "deregistered");
	if (local_file != file)
		return detail::errno_error(EINVAL, what(),
					   "local region " + std::to_string(local_id) +
						   " was registered on another Device; register it on "
						   "the Device the connection was opened on");
	if (atomic) {
		if (auto st = detail::check_atomic(*file, op_name(p), conn, local, p.local_off,
						   *atomic);
		    !st)
			return st;
		detail::put_atomic_args(local, p.local_off, *atomic);
	}
	p.size = sizeof(p);
	p.conn = conn;
	p.local_region = local_id;
	p.flags = (bits & static_cast<std::uint32_t>(Post::NonBlocking) ? ME_POST_F_NONBLOCK : 0) |
		  (bits & static_cast<std::uint32_t>(Post::More) ? ME_POST_F_MORE : 0) |
		  (bits & static_cast<std::uint32_t>(Post::AckNow) ? ME_POST_F_ACK_NOW : 0);
	if (::ioctl(file->fd, ME_IOC_POST, &p) == 0)
		return {};
	int err = errno;
	return detail::errno_error(err, what(), post_hint(err, p));
}

} // namespace

// The fields every one-sided operation fills the same way.
static me_post one_sided(std::uint32_t opcode, std::uint64_t local_off,
			 const RemoteRegion &remote, std::uint64_t remote_off, std::uint32_t len,
			 std::uint64_t cookie)
{
	me_post p{};
	p.opcode = opcode;
	p.cookie = cookie;
	p.len = len;
	p.local_off = local_off;
	p.remote_region = remote.id;
	p.remote_key = static_cast<std::uint32_t>(remote.key);
	p.remote_key_hi = static_cast<std::uint32_t>(remote.key >> 32);
	p.remote_off = remote_off;
	return p;
}

Status Connection::write(const MemoryRegion &local, std::uint64_t local_off,
			 const RemoteRegion &remote, std::uint64_t remote_off, std::uint32_t len,
			 std::uint64_t cookie, Post how)
{
	me_post p = one_sided(ME_OP_WRITE, local_off, remote, remote_off, len, cookie);
	return post(file_, id_, p, local, local.file_, local.id_, how);
}

Status Connection::write_notify(const MemoryRegion &local, std::uint64_t local_off,
				const RemoteRegion &remote, std::uint64_t remote_off,
				std::uint32_t len, std::uint32_t imm, std::uint64_t cookie,
				Post how)
{
	me_post p = one_sided(ME_OP_NOTIFY, local_off, remote, remote_off, len, cookie);
	p.imm = imm;
	return post(file_, id_, p, local, local.file_, local.id_, how);
}

Status Connection::read(const MemoryRegion &local, std::uint64_t local_off,
			const RemoteRegion &remote, std::uint64_t remote_off, std::uint32_t len,
			std::uint64_t cookie, Post how)
{
	me_post p = one_sided(ME_OP_READ, local_off, remote, remote_off, len, cookie);
	return post(file_, id_, p, local, local.file_, local.id_, how);
}

Status Connection::send(const MemoryRegion &local, std::uint64_t local_off, std::uint32_t len,
			std::uint64_t cookie, Post how)
{
	me_post p{};
	p.opcode = ME_OP_SEND;
	p.cookie = cookie;
	p.len = len;
	p.local_off = local_off;
	return post(file_, id_, p, local, local.file_, local.id_, how);
}

Status Connection::send_to(std::uint16_t port, const MemoryRegion &local,
			   std::uint64_t local_off, std::uint32_t len, std::uint64_t cookie,
			   Post how)
{
	if (file_ && id_) {
		if (auto st = detail::check_send_port(*file_, id_, port); !st)
			return st;
	}
	me_post p{};
	p.opcode = ME_OP_SEND;
	p.cookie = cookie;
	p.len = len;
	p.local_off = local_off;
	p.port = port;
	return post(file_, id_, p, local, local.file_, local.id_, how);
}

// AtomicOp is the ABI's operation number.
static_assert(static_cast<std::uint32_t>(AtomicOp::Add) == ME_ATOMIC_ADD &&
	      static_cast<std::uint32_t>(AtomicOp::And) == ME_ATOMIC_AND &&
	      static_cast<std::uint32_t>(AtomicOp::Or) == ME_ATOMIC_OR &&
	      static_cast<std::uint32_t>(AtomicOp::Xor) == ME_ATOMIC_XOR &&
	      static_cast<std::uint32_t>(AtomicOp::Swap) == ME_ATOMIC_SWAP &&
	      static_cast<std::uint32_t>(AtomicOp::CompareSwap) == ME_ATOMIC_CSWAP &&
	      static_cast<std::uint32_t>(AtomicOp::SignedMin) == ME_ATOMIC_SMIN &&
	      static_cast<std::uint32_t>(AtomicOp::SignedMax) == ME_ATOMIC_SMAX &&
	      static_cast<std::uint32_t>(AtomicOp::UnsignedMin) == ME_ATOMIC_UMIN &&
	      static_cast<std::uint32_t>(AtomicOp::UnsignedMax) == ME_ATOMIC_UMAX &&
	      static_cast<std::uint32_t>(AtomicOp::Read) == ME_ATOMIC_READ);
static_assert(static_cast<std::uint32_t>(CompletionType::Atomic) == ME_CQ_ATOMIC);

Status Connection::atomic(AtomicOp op, const MemoryRegion &local, std::uint64_t local_off,
			  const RemoteRegion &remote, std::uint64_t remote_off, std::uint32_t size,
			  std::uint64_t operand, std::uint64_t cookie, Post how)
{
	if (op == AtomicOp::CompareSwap)
		return detail::errno_error(EINVAL,
					   "cannot post atomic on connection " + detail::conn_label(id_),
					   "AtomicOp::CompareSwap compares with a second value: post "
					   "it with compare_swap()");
	me_post p = one_sided(ME_OP_ATOMIC, local_off, remote, remote_off, size, cookie);
	p.imm = static_cast<std::uint32_t>(op);
	const detail::AtomicArgs args{op, size, operand, 0};
	return post(file_, id_, p, local, local.file_, local.id_, how, &args);
}

Status Connection::compare_swap(const MemoryRegion &local, std::uint64_t local_off,
				const RemoteRegion &remote, std::uint64_t remote_off,
				std::uint32_t size, std::uint64_t expected, std::uint64_t desired,
				std::uint64_t cookie, Post how)
{
	me_post p = one_sided(ME_OP_ATOMIC, local_off, remote, remote_off, size, cookie);
	p.imm = ME_ATOMIC_CSWAP;
	const detail::AtomicArgs args{AtomicOp::CompareSwap, size, desired, expected};
	return post(file_, id_, p, local, local.file_, local.id_, how, &args);
}

namespace detail {

void put_atomic_args(const MemoryRegion &local, std::uint64_t local_off,
		     const AtomicArgs &a) noexcept
{
	if (a.op == AtomicOp::Read)
		return;		// the module reads nothing
	auto *at = static_cast<unsigned char *>(local.addr()) + local_off;
	if (a.size == 4) {
		const std::uint32_t v[2] = {static_cast<std::uint32_t>(a.operand),
					    static_cast<std::uint32_t>(a.compare)};
		std::memcpy(at, v, a.op == AtomicOp::CompareSwap ? 8 : 4);
	} else {
		const std::uint64_t v[2] = {a.operand, a.compare};
		std::memcpy(at, v, a.op == AtomicOp::CompareSwap ? 16 : 8);
	}
}

} // namespace detail

Result<std::uint64_t> atomic_value(const MemoryRegion &local, std::uint64_t local_off,
				   std::uint32_t size)
{
	const std::string what = "cannot read the value an atomic found";
	if (!local.addr() || !local.id())
		return detail::errno_error(EINVAL, what,
					   "the memory region is empty: it was moved from or "
					   "deregistered");
	if (size != 4 && size != 8)
		return detail::errno_error(EINVAL, what,
					   "an atomic acts on 4 or 8 bytes, not " +
						   std::to_string(size));
	if (local_off > local.length() || size > local.length() - local_off)
		return detail::errno_error(ERANGE, what,
					   "[" + std::to_string(local_off) + ", +" +
						   std::to_string(size) + ") is outside region " +
						   std::to_string(local.id()) + " of " +
						   std::to_string(local.length()) + " bytes");
	const auto *at = static_cast<const unsigned char *>(local.addr()) + local_off;
	if (size == 4) {
		std::uint32_t v;
		std::memcpy(&v, at, sizeof(v));
		return std::uint64_t{v};
	}
	std::uint64_t v;
	std::memcpy(&v, at, sizeof(v));
	return v;
}

RemoteRegion remote_of(const MemoryRegion &mr)
{
	RemoteRegion r;
	r.id = mr.id();
	r.key = mr.key();
	r.length = mr.length();
	return r;
}

} // namespace multiedge
