// Completion queues: entries the domain's progress produced, read in the
// format the queue was opened with; blocking reads sleep in poll(2) on the
// domain's epoll set: the device (completions: POLLIN; messages:
// POLLRDBAND) and the socket of this node's endpoints (local.cpp).
#include <poll.h>

#include <chrono>
#include <cstring>
#include <new>

#include "fabric/mefi.hpp"
#include "fabric/nosys.hpp"

namespace mefi {

namespace {

std::size_t entry_size(fi_cq_format f)
{
	switch (f) {
	case FI_CQ_FORMAT_CONTEXT:
		return sizeof(fi_cq_entry);
	case FI_CQ_FORMAT_MSG:
		return sizeof(fi_cq_msg_entry);
	case FI_CQ_FORMAT_DATA:
		return sizeof(fi_cq_data_entry);
	case FI_CQ_FORMAT_TAGGED:
		return sizeof(fi_cq_tagged_entry);
	default:
		return 0;
	}
}

// Copies the leading part of the tagged entry the format has; the
// formats are prefixes of one another.
void put_entry(const CompletionQueue *cq, const Entry &e, std::uint8_t *out)
{
	std::memcpy(out, &e.e, entry_size(cq->format));
}

// Reads up to `count` entries; the domain's lock is held.
ssize_t read_locked(CompletionQueue *cq, void *buf, std::size_t count, fi_addr_t *src)
{
	if (!cq->errors.empty())
		return -FI_EAVAIL;
	if (cq->done.empty())
		return -FI_EAGAIN;
	auto *out = static_cast<std::uint8_t *>(buf);
	std::size_t n = 0;
	for (; n < count && !cq->done.empty(); n++) {
		put_entry(cq, cq->done.front(), out + n * entry_size(cq->format));
		if (src)
			src[n] = cq->done.front().src;
		cq->done.pop_front();
	}
	return static_cast<ssize_t>(n);
}

ssize_t readfrom(fid_cq *f, void *buf, std::size_t count, fi_addr_t *src)
{
	CompletionQueue *cq = self_of<CompletionQueue>(f);
	if (count && !buf)
		return -FI_EINVAL;
	std::lock_guard<std::recursive_mutex> g(cq->domain->mu);
	cq->domain->progress();
	return read_locked(cq, buf, count, src);
}

ssize_t read(fid_cq *f, void *buf, std::size_t count)
{
	return readfrom(f, buf, count, nullptr);
}

ssize_t readerr(fid_cq *f, fi_cq_err_entry *buf, std::uint64_t flags)
{
	CompletionQueue *cq = self_of<CompletionQueue>(f);
	if (!buf || flags)
		return -FI_EINVAL;
	std::lock_guard<std::recursive_mutex> g(cq->domain->mu);
	if (cq->errors.empty())
		return -FI_EAGAIN;
	const Entry &e = cq->errors.front();
	buf->op_context = e.e.op_context;
	buf->flags = e.e.flags;
	buf->len = e.e.len;
	buf->buf = e.e.buf;
	buf->data = e.e.data;
	buf->tag = e.e.tag;
	buf->olen = e.olen;
	buf->err = e.err;
	buf->prov_errno = e.err;
	buf->err_data_size = 0;	// no provider data; a caller's buffer stays its own
	cq->errors.pop_front();
	return 1;
}

ssize_t sreadfrom(fid_cq *f, void *buf, std::size_t count, fi_addr_t *src, const void *cond,
		  int timeout)
{
	CompletionQueue *cq = self_of<CompletionQueue>(f);
	if (cq->wait == FI_WAIT_NONE)
		return -FI_EINVAL;
	if (cond)
		return -FI_EINVAL;	// no wait conditions
	using clock = std::chrono::steady_clock;
	auto deadline = clock::now() + std::chrono::milliseconds(timeout < 0 ? 0 : timeout);
	for (;;) {
		{
			std::lock_guard<std::recursive_mutex> g(cq->domain->mu);
			cq->domain->progress();
			ssize_t n = read_locked(cq, buf, count, src);
			if (n != -FI_EAGAIN)
				return n;
			if (cq->signalled) {
				cq->signalled = false;
				return -FI_EAGAIN;
			}
		}
		int slice = 100;	// re-check now and then: fi_cq_signal, other threads
		if (timeout >= 0) {
			auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
					    deadline - clock::now())
					    .count();
			if (left <= 0)
				return -FI_EAGAIN;
			slice = static_cast<int>(std::min<long long>(left, slice));
		}
		pollfd p{cq->domain->wait_set.get(), POLLIN, 0};
		::poll(&p, 1, slice);
	}
}

ssize_t sread(fid_cq *f, void *buf, std::size_t count, const void *cond, int timeout)
{
	return sreadfrom(f, buf, count, nullptr, cond, timeout);
}

int signal(fid_cq *f)
{
	CompletionQueue *cq = self_of<CompletionQueue>(f);
	std::lock_guard<std::recursive_mutex> g(cq->domain->mu);
	cq->signalled = true;
	return 0;
}

const char *cq_strerror(fid_cq *, int prov_errno, const void *, char *buf, std::size_t len)
{
	const char *s = fi_strerror(prov_errno);
	if (buf && len) {
		std::snprintf(buf, len, "%s", s);
		return buf;
	}
	return s;
}

int cq_close(fid *f)
{
	CompletionQueue *cq = self_of<CompletionQueue>(reinterpret_cast<fid_cq *>(f));
	Domain *d = cq->domain;
	std::lock_guard<std::recursive_mutex> g(d->mu);
	if (d->ep && (d->ep->tx_cq == cq || d->ep->rx_cq == cq))
		return -FI_EBUSY;
	d->refs--;
	delete cq;
	return 0;
}

int cq_control(fid *f, int command, void *arg)
{
	CompletionQueue *cq = self_of<CompletionQueue>(reinterpret_cast<fid_cq *>(f));
	if (command != FI_GETWAIT)
		return -FI_ENOSYS;
	return cq->domain->get_wait(cq->wait, arg);
}

fi_ops cq_fi_ops = fid_ops(cq_close, cq_control);

fi_ops_cq cq_ops = [] {
	fi_ops_cq o{};
	o.size = sizeof(fi_ops_cq);
	o.read = read;
	o.readfrom = readfrom;
	o.readerr = readerr;
	o.sread = sread;
	o.sreadfrom = sreadfrom;
	o.signal = signal;
	o.strerror = cq_strerror;
	return o;
}();

} // namespace

int cq_open(fid_domain *domain, fi_cq_attr *attr, fid_cq **out, void *context)
{
	if (!attr || !out)
		return -FI_EINVAL;
	if (attr->format == FI_CQ_FORMAT_UNSPEC)
		attr->format = FI_CQ_FORMAT_CONTEXT;
	if (!entry_size(attr->format))
		return -FI_EINVAL;
	switch (attr->wait_obj) {
	case FI_WAIT_NONE:
	case FI_WAIT_UNSPEC:
	case FI_WAIT_FD:
		break;
	default:
		return -FI_ENOSYS;	// wait sets, mutexes, pollfds
	}
	if (attr->wait_cond != FI_CQ_COND_NONE)
		return -FI_ENOSYS;
	Domain *d = self_of<Domain>(domain);
	auto *cq = new (std::nothrow) CompletionQueue(d, *attr, context);
	if (!cq)
		return -FI_ENOMEM;
	std::lock_guard<std::recursive_mutex> g(d->mu);
	d->refs++;
	*out = &cq->h.fid;
	return 0;
}

CompletionQueue::CompletionQueue(Domain *d, const fi_cq_attr &attr, void *context)
	: domain(d), format(attr.format),
	  wait(attr.wait_obj == FI_WAIT_UNSPEC ? FI_WAIT_FD : attr.wait_obj)
{
	h.self = this;
	h.fid.fid.fclass = FI_CLASS_CQ;
	h.fid.fid.context = context;
	h.fid.fid.ops = &cq_fi_ops;
	h.fid.ops = &cq_ops;
}

void CompletionQueue::push(Entry e)
{
	if (e.err)
		errors.push_back(e);
	else
		done.push_back(e);
}

} // namespace mefi
