// Completion counters (fi_cntr).  The endpoint counts each operation of a
// bound kind as it completes it (ep.cpp, rma.cpp), with a CQ entry or
// without one (FI_INJECT, FI_SELECTIVE_COMPLETION): a counter counts every
// operation.  Progress is manual, so reads and waits make it, as CQ reads
// do; fi_cntr_wait sleeps in poll(2) on the domain's epoll set, as
// fi_cq_sread does.  The set also holds an eventfd that fi_cntr_add and
// the like write: a thread sleeping on the set (fi_cntr_wait, or polling
// the FI_GETWAIT fd) wakes for a change another thread makes.
#include <poll.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <new>

#include "fabric/mefi.hpp"
#include "fabric/nosys.hpp"

namespace mefi {

namespace {

std::uint64_t cntr_read(fid_cntr *f)
{
	Counter *c = self_of<Counter>(f);
	std::lock_guard<std::recursive_mutex> g(c->domain->mu);
	c->domain->progress();
	c->seen = c->value;
	return c->value;
}

std::uint64_t cntr_readerr(fid_cntr *f)
{
	Counter *c = self_of<Counter>(f);
	std::lock_guard<std::recursive_mutex> g(c->domain->mu);
	c->domain->progress();
	c->seen_errors = c->errors;
	return c->errors;
}

// fi_cntr_add, _adderr, _set, _seterr: `change` under the domain's lock,
// then waiters look again.
template <typename F> int change(fid_cntr *f, F &&how)
{
	Counter *c = self_of<Counter>(f);
	std::lock_guard<std::recursive_mutex> g(c->domain->mu);
	how(*c);
	if (c->wait != FI_WAIT_NONE)
		c->domain->wake_waiters();
	return 0;
}

int cntr_add(fid_cntr *f, std::uint64_t v)
{
	return change(f, [v](Counter &c) { c.value += v; });
}

int cntr_adderr(fid_cntr *f, std::uint64_t v)
{
	return change(f, [v](Counter &c) { c.errors += v; });
}

int cntr_set(fid_cntr *f, std::uint64_t v)
{
	return change(f, [v](Counter &c) { c.value = v; });
}

int cntr_seterr(fid_cntr *f, std::uint64_t v)
{
	return change(f, [v](Counter &c) { c.errors = v; });
}

// Until the counter reaches `threshold` (0), its error count changes
// (-FI_EAVAIL: fi_cntr_readerr says by how much) or `timeout` ms pass
// (-FI_ETIMEDOUT; negative: no limit).
int cntr_wait(fid_cntr *f, std::uint64_t threshold, int timeout)
{
	Counter *c = self_of<Counter>(f);
	if (c->wait == FI_WAIT_NONE)
		return -FI_EINVAL;	// fi_cntr(3): no waiting on these
	Domain *d = c->domain;
	using clock = std::chrono::steady_clock;
	auto deadline = clock::now() + std::chrono::milliseconds(timeout < 0 ? 0 : timeout);
	std::uint64_t errors;
	{
		std::lock_guard<std::recursive_mutex> g(d->mu);
		errors = c->errors;
	}
	for (;;) {
		{
			std::lock_guard<std::recursive_mutex> g(d->mu);
			d->progress();
			if (c->value >= threshold)
				return 0;
			if (c->errors != errors)
				return -FI_EAVAIL;
		}
		int slice = 100;	// re-check now and then: other threads' progress
		if (timeout >= 0) {
			auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
					    deadline - clock::now())
					    .count();
			if (left <= 0)
				return -FI_ETIMEDOUT;
			slice = static_cast<int>(std::min<long long>(left, slice));
		}
		pollfd p{d->wait_set.get(), POLLIN, 0};
		::poll(&p, 1, slice);
	}
}

int cntr_close(fid *f)
{
	Counter *c = self_of<Counter>(reinterpret_cast<fid_cntr *>(f));
	Domain *d = c->domain;
	std::lock_guard<std::recursive_mutex> g(d->mu);
	if (d->ep && d->ep->binds(c))
		return -FI_EBUSY;
	d->refs--;
	delete c;
	return 0;
}

int cntr_control(fid *f, int command, void *arg)
{
	Counter *c = self_of<Counter>(reinterpret_cast<fid_cntr *>(f));
	if (command != FI_GETWAIT)
		return -FI_ENOSYS;
	return c->domain->get_wait(c->wait, arg);
}

fi_ops cntr_fi_ops = fid_ops(cntr_close, cntr_control);

fi_ops_cntr cntr_ops = [] {
	fi_ops_cntr o{};
	o.size = sizeof(fi_ops_cntr);
	o.read = cntr_read;
	o.readerr = cntr_readerr;
	o.add = cntr_add;
	o.set = cntr_set;
	o.wait = cntr_wait;
	o.adderr = cntr_adderr;
	o.seterr = cntr_seterr;
	return o;
}();

} // namespace

int cntr_open(fid_domain *domain, fi_cntr_attr *attr, fid_cntr **out, void *context)
{
	if (!attr || !out)
		return -FI_EINVAL;
	// Completions are the only events counted; no flags are defined.
	if (attr->events != FI_CNTR_EVENTS_COMP || attr->flags)
		return -FI_EINVAL;
	switch (attr->wait_obj) {
	case FI_WAIT_NONE:
	case FI_WAIT_UNSPEC:
	case FI_WAIT_FD:
		break;
	default:
		return -FI_ENOSYS;	// wait sets, mutexes, pollfds, yield
	}
	Domain *d = self_of<Domain>(domain);
	auto *c = new (std::nothrow) Counter(d, *attr, context);
	if (!c)
		return -FI_ENOMEM;
	std::lock_guard<std::recursive_mutex> g(d->mu);
	d->refs++;
	*out = &c->h.fid;
	return 0;
}

Counter::Counter(Domain *d, const fi_cntr_attr &attr, void *context)
	: domain(d), wait(attr.wait_obj == FI_WAIT_UNSPEC ? FI_WAIT_FD : attr.wait_obj)
{
	h.self = this;
	h.fid.fid.fclass = FI_CLASS_CNTR;
	h.fid.fid.context = context;
	h.fid.fid.ops = &cntr_fi_ops;
	h.fid.ops = &cntr_ops;
}

bool Counter::moved()
{
	bool m = value != seen || errors != seen_errors;
	seen = value;
	seen_errors = errors;
	return m;
}

int Domain::init_wake()
{
	wake = Fd(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
	if (!wake)
		return errno;
	epoll_event e{};
	e.events = EPOLLIN;
	e.data.fd = wake.get();
	if (::epoll_ctl(wait_set.get(), EPOLL_CTL_ADD, wake.get(), &e))
		return errno;
	return 0;
}

int Domain::get_wait(int wait_obj, void *arg) const
{
	if (wait_obj != FI_WAIT_FD || !arg)
		return -FI_EINVAL;
	// An epoll set, readable when the module has completions (POLLIN) or
	// messages (POLLRDBAND), this node's endpoints sent a message, or a
	// counter was changed: fi_trywait first, then poll it for POLLIN.
	*static_cast<int *>(arg) = wait_set.get();
	return 0;
}

void Domain::wake_waiters()
{
	if (woken)
		return;		// readable already
	std::uint64_t one = 1;
	if (::write(wake.get(), &one, sizeof(one)) != sizeof(one)) {
		MEFI_WARN("waking the domain's waiters: %s\n", std::strerror(errno));
		return;
	}
	woken = true;
}

void Domain::drain_wake()
{
	std::uint64_t n;
	if (::read(wake.get(), &n, sizeof(n)) < 0 && errno != EAGAIN)
		MEFI_WARN("emptying the domain's wake fd: %s\n", std::strerror(errno));
	woken = false;
}

} // namespace mefi
