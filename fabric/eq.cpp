// Event queues: events the application writes (fi_eq_write) and reads
// back; an RDM endpoint of this provider raises none of its own.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <new>

#include "fabric/mefi.hpp"
#include "fabric/nosys.hpp"

namespace mefi {

namespace {

int eq_close(fid *f)
{
	delete self_of<EventQueue>(reinterpret_cast<fid_eq *>(f));
	return 0;
}

ssize_t eq_take(EventQueue *q, std::uint32_t *event, void *buf, std::size_t len,
		std::uint64_t flags, bool want_error)
{
	if (q->events.empty())
		return -FI_EAGAIN;
	EventQueue::Event &e = q->events.front();
	if (e.error != want_error)
		return want_error ? -FI_EAGAIN : -FI_EAVAIL;
	if (len < e.data.size())
		return -FI_ETOOSMALL;
	if (event)
		*event = e.type;
	std::memcpy(buf, e.data.data(), e.data.size());
	ssize_t n = static_cast<ssize_t>(e.data.size());
	if (!(flags & FI_PEEK))
		q->events.pop_front();
	return n;
}

ssize_t eq_read(fid_eq *eq, std::uint32_t *event, void *buf, std::size_t len, std::uint64_t flags)
{
	EventQueue *q = self_of<EventQueue>(eq);
	std::lock_guard<std::mutex> g(q->mu);
	return eq_take(q, event, buf, len, flags, false);
}

ssize_t eq_readerr(fid_eq *eq, fi_eq_err_entry *buf, std::uint64_t flags)
{
	EventQueue *q = self_of<EventQueue>(eq);
	std::lock_guard<std::mutex> g(q->mu);
	return eq_take(q, nullptr, buf, sizeof(*buf), flags, true);
}

ssize_t eq_write(fid_eq *eq, std::uint32_t event, const void *buf, std::size_t len,
		 std::uint64_t)
{
	EventQueue *q = self_of<EventQueue>(eq);
	const auto *p = static_cast<const std::uint8_t *>(buf);
	{
		std::lock_guard<std::mutex> g(q->mu);
		q->events.push_back({event, std::vector<std::uint8_t>(p, p + len), false});
	}
	q->cv.notify_all();
	return static_cast<ssize_t>(len);
}

ssize_t eq_sread(fid_eq *eq, std::uint32_t *event, void *buf, std::size_t len, int timeout,
		 std::uint64_t flags)
{
	EventQueue *q = self_of<EventQueue>(eq);
	std::unique_lock<std::mutex> g(q->mu);
	auto ready = [&] { return !q->events.empty(); };
	if (timeout < 0)
		q->cv.wait(g, ready);
	else if (!q->cv.wait_for(g, std::chrono::milliseconds(timeout), ready))
		return -FI_EAGAIN;
	return eq_take(q, event, buf, len, flags, false);
}

const char *eq_strerror(fid_eq *, int prov_errno, const void *, char *buf, std::size_t len)
{
	const char *s = std::strerror(prov_errno);
	if (buf && len) {
		std::snprintf(buf, len, "%s", s);
		return buf;
	}
	return s;
}

fi_ops eq_fi_ops = fid_ops(eq_close);

fi_ops_eq eq_ops = [] {
	fi_ops_eq o{};
	o.size = sizeof(fi_ops_eq);
	o.read = eq_read;
	o.readerr = eq_readerr;
	o.write = eq_write;
	o.sread = eq_sread;
	o.strerror = eq_strerror;
	return o;
}();

} // namespace

int eq_open(fid_fabric *fabric, fi_eq_attr *attr, fid_eq **eq, void *context)
{
	if (!attr || (attr->wait_obj != FI_WAIT_NONE && attr->wait_obj != FI_WAIT_UNSPEC))
		return -FI_ENOSYS;
	auto *q = new (std::nothrow) EventQueue(self_of<Fabric>(fabric), *attr, context);
	if (!q)
		return -FI_ENOMEM;
	*eq = &q->h.fid;
	return 0;
}

EventQueue::EventQueue(Fabric *, const fi_eq_attr &, void *context)
{
	h.self = this;
	h.fid.fid.fclass = FI_CLASS_EQ;
	h.fid.fid.context = context;
	h.fid.fid.ops = &eq_fi_ops;
	h.fid.ops = &eq_ops;
}

} // namespace mefi
