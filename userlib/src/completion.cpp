// libmultiedge: the completion queue (ME_IOC_POLL_CQ) and the receive
// queue (ME_IOC_RECV).
#include <algorithm>
#include <cerrno>
#include <sys/ioctl.h>
#include <system_error>

#include "internal.hpp"
#include "multiedge/connection.hpp"
#include "multiedge/device.hpp"
#include "uapi/multiedge.h"

namespace multiedge {

namespace {

const char *completion_hint(int status)
{
	switch (status) {
	case EACCES:
		return "wrong key, no such region at the target, or the region does not grant "
		       "that access";
	case ERANGE:
		return "outside the target region: check offset and length against the "
		       "region's length";
	case ENOENT:	/* modules before ABI 7 */
		return "no such region at the target: wrong id, or it was deregistered";
	case ENOBUFS:
		return "the peer's receive queue is full, or its node holds as many bytes of "
		       "messages as its module allows (recv_kb): it must take messages with recv()";
	case ECONNREFUSED:
		return "no Device of the peer is bound to the port the send named";
	case ECONNABORTED:
		return "the connection was given up after too many accesses with a wrong key; "
		       "it may or may not have taken effect at the target";
	case ETIMEDOUT:
		return "the peer or every link to it died: see mectl peers and mectl links; "
		       "it may or may not have taken effect at the target";
	case ECONNRESET:
		return "the connection was closed or the peer restarted; it may or may not "
		       "have taken effect at the target";
	case ECANCELED:
		return "the connection ended before any of it was sent, or the peer closed "
		       "it before taking any: the target never saw it";
	}
	return nullptr;
}

// What the target says about an atomic (ABI 19) beyond a write's refusals.
const char *atomic_hint(int status)
{
	switch (status) {
	case EINVAL:
		return "the target memory is not aligned to the atomic's size (4 or 8 bytes)";
	case EACCES:
		return "wrong key, no such region at the target, or the region does not grant "
		       "that access: an atomic needs Access::RemoteReadWrite, AtomicOp::Read "
		       "RemoteRead";
	}
	return nullptr;
}

std::string status_text(int status, CompletionType type)
{
	std::string s = std::generic_category().message(status);
	const char *hint = type == CompletionType::Atomic ? atomic_hint(status) : nullptr;
	if (!hint)
		hint = completion_hint(status);
	if (hint)
		s += std::string(" (") + hint + ")";
	return s;
}

} // namespace

std::string Completion::describe() const
{
	std::string c = detail::conn_label(conn);
	std::string n = std::to_string(peer);
	const char *op = nullptr;
	switch (type) {
	case CompletionType::Write:
		op = "write";
		break;
	case CompletionType::Read:
		op = "read";
		break;
	case CompletionType::Send:
		op = "send";
		break;
	case CompletionType::Atomic:
		op = "atomic";
		break;
	case CompletionType::Notify:
		if (status)
			return "notify from node " + n + " on connection " + c +
			       " failed: " + status_text(status, type);
		return "notify from node " + n + " on connection " + c + ": " +
		       std::to_string(len) + " bytes written to region " + std::to_string(region) +
		       " at offset " + std::to_string(off) + ", imm " + std::to_string(imm);
	case CompletionType::ConnClosed:
		return "connection " + c + " to node " + n + " closed" +
		       (status ? ": " + status_text(status, type) : std::string());
	case CompletionType::ConnDead:
		// ENOENT here is never the target's: it ended the connection.
		if (status == ENOENT)
			return "connection " + c + " to node " + n + " died: " +
			       std::generic_category().message(status) +
			       " (a local region an operation of it was being sent from was "
			       "deregistered, or its Device closed, while the operation was in flight)";
		return "connection " + c + " to node " + n + " died" +
		       (status ? ": " + status_text(status, type) : std::string());
	}
	std::string head = op ? std::string(op)
			      : "completion of unknown type " +
					std::to_string(static_cast<std::uint32_t>(type));
	head += " (cookie " + std::to_string(cookie) + ") on connection " + c;
	if (status)
		return head + " failed: " + status_text(status, type);
	return head + " done: " + std::to_string(len) + " bytes";
}

namespace {

Completion from_kernel(const me_completion &k)
{
	Completion c;
	c.cookie = k.cookie;
	c.type = static_cast<CompletionType>(k.type);
	c.status = k.status < 0 ? -k.status : k.status;
	c.conn = k.conn;
	c.peer = k.peer;
	c.len = k.len;
	c.imm = k.imm;
	c.region = k.region;
	c.off = k.off;
	return c;
}

constexpr std::size_t harvest_batch = 64;

// Takes up to `room` completions from the kernel into f.backlog; with
// `wait_ms` nonzero, blocks up to that long for the first.  Called with
// f.mu held for a non-blocking call; a blocking call must be made by the
// harvester with f.mu released, then `into` appended under the lock.
Status harvest(detail::DeviceFile &f, std::size_t room, std::uint32_t wait_ms,
	       std::vector<Completion> &into)
{
	room = std::clamp<std::size_t>(room, 1, ME_CQ_ENTRIES);
	// The kernel fills what it returns; kept per thread, not allocated
	// per call (a ping-pong harvests once or twice per round trip).
	thread_local std::vector<me_completion> raw;
	if (raw.size() < room)
		raw.resize(room);
	me_poll_cq req{};
	req.size = sizeof(req);
	req.flags = wait_ms ? ME_POLL_F_WAIT : 0;
	req.count = static_cast<std::uint32_t>(room);
	req.entry_size = sizeof(me_completion);
	req.entries = reinterpret_cast<std::uintptr_t>(raw.data());
	req.timeout_ms = wait_ms;
	if (::ioctl(f.fd, ME_IOC_POLL_CQ, &req) < 0) {
		int err = errno;
		std::string hint;
		if (err == EINTR)
			hint = "a signal arrived while waiting; the completions stay queued";
		else if (err == ENOTTY)
			hint = detail::abi4_hint();
		return detail::errno_error(err, "ME_IOC_POLL_CQ", hint);
	}
	f.overflow.store(req.overflow, std::memory_order_relaxed);
	std::uint32_t n = std::min<std::uint32_t>(req.count, static_cast<std::uint32_t>(room));
	for (std::uint32_t i = 0; i < n; i++)
		into.push_back(from_kernel(raw[i]));
	return {};
}

// Runs `take` (under f.mu) until it finds what it wants in the backlog,
// harvesting from the kernel meanwhile, or `deadline` passes (then `take`
// has had a last look after a non-blocking harvest, and ETIMEDOUT is
// returned).  One thread at a time blocks in the kernel; others wait for
// it on f.cv.
template <typename Take>
Status pump(detail::DeviceFile &f, std::chrono::steady_clock::time_point deadline,
	    std::size_t room, Take take)
{
	using clock = std::chrono::steady_clock;
	std::unique_lock lk(f.mu);
	for (;;) {
		if (take())
			return {};
		auto now = clock::now();
		bool expired = now >= deadline;
		if (expired) {
			std::vector<Completion> got;
			Status st = harvest(f, room, 0, got);
			if (!st)
				return st;
			f.backlog.insert(f.backlog.end(), got.begin(), got.end());
			if (!got.empty())
				f.cv.notify_all();
			if (take())
				return {};
			return detail::errno_error(ETIMEDOUT, "no completion in time");
		}
		if (!f.harvesting) {
			f.harvesting = true;
			lk.unlock();
			std::vector<Completion> got;
			Status st = harvest(f, room, detail::ms_arg(deadline - now), got);
			lk.lock();
			f.harvesting = false;
			f.backlog.insert(f.backlog.end(), got.begin(), got.end());
			f.cv.notify_all();
			if (!st)
				return st;
			continue;
		}
		if (deadline == clock::time_point::max())
			f.cv.wait(lk);
		else
			f.cv.wait_until(lk, deadline);
	}
}

std::size_t take_front(std::deque<Completion> &from, std::size_t max, std::vector<Completion> &to)
{
	std::size_t n = std::min(max, from.size());
	to.insert(to.end(), from.begin(), from.begin() + static_cast<std::ptrdiff_t>(n));
	from.erase(from.begin(), from.begin() + static_cast<std::ptrdiff_t>(n));
	return n;
}

} // namespace

Result<std::vector<Completion>> Device::poll(std::size_t max) const
{
	if (!file_)
		return detail::empty_error("cannot poll for completions", "Device");
	std::vector<Completion> out;
	if (max == 0)
		return out;
	std::lock_guard lk(file_->mu);
	take_front(file_->backlog, max, out);
	if (out.size() < max) {
		Status st = harvest(*file_, max - out.size(), 0, out);
		if (!st) {
			if (out.empty())
				return st.error();
			// Hand out what the backlog held; the error will show
			// again on the next call.
		}
	}
	return out;
}

Result<std::vector<Completion>> Device::wait(std::size_t max, std::chrono::milliseconds timeout) const
{
	if (!file_)
		return detail::empty_error("cannot wait for completions", "Device");
	std::vector<Completion> out;
	if (max == 0)
		return out;
	Status st = pump(*file_, detail::deadline_after(timeout), std::min(max, harvest_batch * 16),
			 [&] { return take_front(file_->backlog, max, out) > 0; });
	if (!st && st.error().code() != std::errc::timed_out)
		return st.error();
	return out;
}

Result<Completion> Device::wait_for(std::uint64_t cookie, std::chrono::milliseconds timeout) const
{
	std::string what = "no completion with cookie " + std::to_string(cookie);
	if (!file_)
		return detail::empty_error("cannot wait for cookie " + std::to_string(cookie), "Device");
	Completion found;
	Status st = pump(*file_, detail::deadline_after(timeout), harvest_batch, [&] {
		auto &b = file_->backlog;
		auto it = std::find_if(b.begin(), b.end(),
				       [&](const Completion &c) { return c.cookie == cookie; });
		if (it == b.end())
			return false;
		found = *it;
		b.erase(it);
		return true;
	});
	if (st)
		return found;
	if (st.error().code() == std::errc::timed_out)
		return detail::errno_error(
			ETIMEDOUT,
			what + " within " + std::to_string(timeout.count()) + " ms",
			"was an operation with that cookie posted on this Device? completions "
			"harvested meanwhile are kept for poll()/wait()");
	return st.error();
}

std::uint32_t Device::overflow() const noexcept
{
	return file_ ? file_->overflow.load(std::memory_order_relaxed) : 0;
}

Result<Message> Device::recv(std::uint32_t peer, std::chrono::milliseconds timeout) const
{
	std::string what = peer ? "no message from node " + std::to_string(peer)
				: std::string("no message");
	if (!file_)
		return detail::empty_error("cannot receive", "Device");
	auto deadline = detail::deadline_after(timeout);
	// Most messages are small: a longer one says its length (below).
	std::vector<std::byte> buf(ME_SEND_MAX_VER0);
	for (int attempt = 0;; attempt++) {
		auto now = std::chrono::steady_clock::now();
		me_recv req{};
		req.size = sizeof(req);
		req.peer = peer;
		req.len = static_cast<std::uint32_t>(buf.size());
		req.buf = reinterpret_cast<std::uintptr_t>(buf.data());
		if (now < deadline) {
			req.flags = ME_RECV_F_WAIT;
			req.timeout_ms = detail::ms_arg(deadline - now);
		}
		if (::ioctl(fd(), ME_IOC_RECV, &req) == 0) {
			Message m;
			m.peer = req.peer;
			m.conn = req.conn;
			m.port = static_cast<std::uint16_t>(req.port);
			buf.resize(std::min<std::size_t>(req.len, buf.size()));
			m.data = std::move(buf);
			return m;
		}
		int err = errno;
		// Longer than we had room for: it stays queued and req.len says
		// how long it is.  Another reader may take it meanwhile and a
		// longer one come next, so grow and look again, a few times.
		if (err == EMSGSIZE && attempt < 16) {
			buf.resize(std::max<std::size_t>(req.len, buf.size()));
			continue;
		}
		if (err == ETIMEDOUT || err == EAGAIN)
			return detail::errno_error(ETIMEDOUT,
						   what + " within " + std::to_string(timeout.count()) +
							   " ms",
						   "is the peer sending to this node? (mectl conns)");
		std::string hint;
		if (err == EINTR)
			hint = "a signal arrived while waiting";
		else if (err == ENOTTY)
			hint = detail::abi4_hint();
		return detail::errno_error(err, "ME_IOC_RECV", hint);
	}
}

} // namespace multiedge
