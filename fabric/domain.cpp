// The domain (one open /dev/multiedge), its progress, memory registration
// and address vectors.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "fabric/mefi.hpp"
#include "fabric/nosys.hpp"

namespace mefi {

namespace {

// Registers [buf, +len) on `fd`; 0 or a positive errno.
int reg(int fd, const void *buf, std::size_t len, std::uint32_t access, std::uint32_t *region,
	std::uint64_t *key)
{
	me_mr_reg r{};
	r.size = sizeof(r);
	r.access = access;
	r.addr = reinterpret_cast<std::uintptr_t>(buf);
	r.length = len;
	if (::ioctl(fd, ME_IOC_MR_REG, &r))
		return errno;
	*region = r.region;
	*key = r.key | static_cast<std::uint64_t>(r.key_hi) << 32;
	return 0;
}

void dereg(int fd, std::uint32_t region)
{
	me_mr_dereg d{};
	d.size = sizeof(d);
	d.region = region;
	if (::ioctl(fd, ME_IOC_MR_DEREG, &d))
		MEFI_WARN("deregistering region %u: %s\n", region, std::strerror(errno));
}

// ---- memory regions ----

int mr_close(fid *f)
{
	MemoryRegion *mr = self_of<MemoryRegion>(reinterpret_cast<fid_mr *>(f));
	Domain *d = mr->domain;
	std::lock_guard<std::recursive_mutex> g(d->mu);
	if (mr->region) {
		d->mrs.erase(mr->region);
		dereg(d->fd, mr->region);
	}
	d->refs--;
	delete mr;
	return 0;
}

// fi_mr_raw_attr: the key a peer needs (FI_MR_RAW).
int mr_control(fid *f, int command, void *arg)
{
	MemoryRegion *mr = self_of<MemoryRegion>(reinterpret_cast<fid_mr *>(f));
	if (command != FI_GET_RAW_MR)
		return -FI_ENOSYS;
	auto *a = static_cast<struct fi_mr_raw_attr *>(arg);
	if (!a || !a->key_size || a->flags)
		return -FI_EINVAL;
	if (!mr->region)
		return -FI_EINVAL;	// length 0: nothing a peer could reach
	std::size_t room = *a->key_size;
	*a->key_size = kRawKeySize;
	if (room < kRawKeySize || !a->raw_key)
		return -FI_ETOOSMALL;
	encode_raw_key(mr->region, mr->key, a->raw_key);
	if (a->base_addr)
		*a->base_addr = reinterpret_cast<std::uintptr_t>(mr->addr);
	return 0;
}

fi_ops mr_fi_ops = fid_ops(mr_close, mr_control);

int mr_reg(fid *f, const void *buf, std::size_t len, std::uint64_t access, std::uint64_t offset,
	   std::uint64_t, std::uint64_t flags, fid_mr **out, void *context)
{
	if (f->fclass != FI_CLASS_DOMAIN || !out)
		return -FI_EINVAL;
	if (flags || offset)
		return -FI_EBADFLAGS;
	if (access & ~(FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ | FI_REMOTE_WRITE))
		return -FI_EINVAL;
	if (len && !buf)
		return -FI_EINVAL;
	Domain *d = self_of<Domain>(reinterpret_cast<fid_domain *>(f));
	auto *mr = new (std::nothrow) MemoryRegion(d, buf, len, context);
	if (!mr)
		return -FI_ENOMEM;
	if (len) {
		std::uint32_t a = 0;
		if (access & FI_REMOTE_READ)
			a |= ME_ACCESS_REMOTE_READ;
		if (access & FI_REMOTE_WRITE)
			a |= ME_ACCESS_REMOTE_WRITE;
		int err = reg(d->fd, buf, len, a, &mr->region, &mr->key);
		if (err) {
			delete mr;
			return -fi_error_of(err == ENOSPC ? ENOMEM : err);
		}
	}
	mr->access = access & (FI_REMOTE_READ | FI_REMOTE_WRITE);
	std::lock_guard<std::recursive_mutex> g(d->mu);
	d->refs++;
	if (mr->region)
		d->mrs[mr->region] = mr;
	// Keys are raw (FI_MR_RAW): fi_mr_raw_attr gives them, not fi_mr_key.
	mr->h.fid.key = FI_KEY_NOTAVAIL;
	*out = &mr->h.fid;
	return 0;
}

int mr_regv(fid *f, const iovec *iov, std::size_t count, std::uint64_t access,
	    std::uint64_t offset, std::uint64_t key, std::uint64_t flags, fid_mr **out,
	    void *context)
{
	if (count != 1 || !iov)
		return -FI_EINVAL;
	return mr_reg(f, iov->iov_base, iov->iov_len, access, offset, key, flags, out, context);
}

int mr_regattr(fid *f, const fi_mr_attr *attr, std::uint64_t flags, fid_mr **out)
{
	if (!attr || attr->iface != FI_HMEM_SYSTEM)
		return -FI_EINVAL;
	return mr_regv(f, attr->mr_iov, attr->iov_count, attr->access, attr->offset,
		       attr->requested_key, flags, out, attr->context);
}

fi_ops_mr mr_ops = [] {
	fi_ops_mr o{};
	o.size = sizeof(fi_ops_mr);
	o.reg = mr_reg;
	o.regv = mr_regv;
	o.regattr = mr_regattr;
	return o;
}();

// ---- address vectors ----

int av_close(fid *f)
{
	AddressVector *av = self_of<AddressVector>(reinterpret_cast<fid_av *>(f));
	Domain *d = av->domain;
	std::lock_guard<std::recursive_mutex> g(d->mu);
	if (d->ep && d->ep->av == av)
		return -FI_EBUSY;
	d->refs--;
	delete av;
	return 0;
}

fi_ops av_fi_ops = fid_ops(av_close);

fi_addr_t av_add(AddressVector *av, Addr a)
{
	if (av->type == FI_AV_MAP)
		return a;
	av->table.push_back(a);
	return av->table.size() - 1;
}

int av_insert(fid_av *f, const void *addr, std::size_t count, fi_addr_t *fi_addr,
	      std::uint64_t flags, void *)
{
	AddressVector *av = self_of<AddressVector>(f);
	if (flags & ~FI_SYNC_ERR)
		return -FI_EBADFLAGS;
	if (count && !addr)
		return -FI_EINVAL;
	std::lock_guard<std::recursive_mutex> g(av->domain->mu);
	const auto *p = static_cast<const std::uint8_t *>(addr);
	int inserted = 0;
	for (std::size_t i = 0; i < count; i++) {
		// An endpoint has a port; a name without one is a node's.
		std::optional<Addr> ep = parse_addr(p + i * kAddrLen, kAddrLen);
		if (ep && !addr_port(*ep))
			ep.reset();
		fi_addr_t a = ep ? av_add(av, *ep) : FI_ADDR_NOTAVAIL;
		if (ep)
			inserted++;
		else
			MEFI_WARN("fi_av_insert: address %zu is not a multiedge endpoint's "
				  "(fi_me://<node>:<port>)\n", i);
		if (fi_addr)
			fi_addr[i] = a;
	}
	return inserted;
}

int av_insertsvc(fid_av *f, const char *node, const char *service, fi_addr_t *fi_addr,
		 std::uint64_t flags, void *context)
{
	if (!node)
		return -FI_EINVAL;
	// The service is the port: ("fi_me://7", "5001") is fi_me://7:5001.
	std::string name = node;
	if (service && *service)
		name += std::string(":") + service;
	if (name.size() >= kAddrLen)
		return -FI_EINVAL;
	char buf[kAddrLen] = {};
	std::memcpy(buf, name.c_str(), name.size());
	return av_insert(f, buf, 1, fi_addr, flags, context);
}

int av_remove(fid_av *f, fi_addr_t *fi_addr, std::size_t count, std::uint64_t flags)
{
	AddressVector *av = self_of<AddressVector>(f);
	if (flags)
		return -FI_EBADFLAGS;
	std::lock_guard<std::recursive_mutex> g(av->domain->mu);
	for (std::size_t i = 0; i < count; i++) {
		if (!av->lookup(fi_addr[i]))
			return -FI_EINVAL;
		if (av->type == FI_AV_TABLE)
			av->table[fi_addr[i]] = 0;
	}
	return 0;
}

int av_lookup(fid_av *f, fi_addr_t fi_addr, void *addr, std::size_t *addrlen)
{
	AddressVector *av = self_of<AddressVector>(f);
	std::lock_guard<std::recursive_mutex> g(av->domain->mu);
	std::optional<Addr> ep = av->lookup(fi_addr);
	if (!ep)
		return -FI_EINVAL;
	char buf[kAddrLen] = {};
	std::string s = addr_string(*ep);
	std::memcpy(buf, s.c_str(), s.size());
	std::memcpy(addr, buf, std::min(*addrlen, kAddrLen));
	*addrlen = kAddrLen;
	return 0;
}

const char *av_straddr(fid_av *, const void *addr, char *buf, std::size_t *len)
{
	std::optional<Addr> a = parse_addr(addr, kAddrLen);
	std::string s = a ? addr_string(*a) : std::string("fi_me://?");
	if (buf && *len)
		std::snprintf(buf, *len, "%s", s.c_str());
	*len = s.size() + 1;
	return buf;
}

fi_ops_av av_ops = [] {
	fi_ops_av o{};
	o.size = sizeof(fi_ops_av);
	o.insert = av_insert;
	o.insertsvc = av_insertsvc;
	MEFI_NOSYS(o, insertsym);
	o.remove = av_remove;
	o.lookup = av_lookup;
	o.straddr = av_straddr;
	MEFI_NOSYS(o, av_set);
	return o;
}();

int av_open(fid_domain *f, fi_av_attr *attr, fid_av **out, void *context)
{
	if (!attr)
		return -FI_EINVAL;
	if (attr->name || (attr->flags & (FI_EVENT | FI_READ)))
		return -FI_ENOSYS;	// no shared or asynchronous AVs
	if (attr->type != FI_AV_UNSPEC && attr->type != FI_AV_MAP && attr->type != FI_AV_TABLE)
		return -FI_EINVAL;
	Domain *d = self_of<Domain>(f);
	fi_av_type t = attr->type == FI_AV_UNSPEC ? FI_AV_TABLE : attr->type;
	auto *av = new (std::nothrow) AddressVector(d, t, context);
	if (!av)
		return -FI_ENOMEM;
	attr->type = t;
	std::lock_guard<std::recursive_mutex> g(d->mu);
	d->refs++;
	*out = &av->h.fid;
	return 0;
}

// ---- domain ----

int domain_close(fid *f)
{
	Domain *d = self_of<Domain>(reinterpret_cast<fid_domain *>(f));
	{
		std::lock_guard<std::recursive_mutex> g(d->mu);
		if (d->refs)
			return -FI_EBUSY;
	}
	delete d;
	return 0;
}

// fi_mr_map_raw / fi_mr_unmap_key: a peer's raw key as a 64-bit handle
// for the RMA calls of this domain.
int domain_control(fid *f, int command, void *arg)
{
	Domain *d = self_of<Domain>(reinterpret_cast<fid_domain *>(f));
	std::lock_guard<std::recursive_mutex> g(d->mu);
	if (command == FI_MAP_RAW_MR) {
		auto *m = static_cast<struct fi_mr_map_raw *>(arg);
		if (!m || !m->key || m->flags)
			return -FI_EINVAL;
		auto rk = decode_raw_key(m->raw_key, m->key_size);
		if (!rk)
			return -FI_EINVAL;
		d->mapped.push_back(*rk);
		*m->key = d->mapped.size();
		return 0;
	}
	if (command == FI_UNMAP_KEY) {
		auto *key = static_cast<std::uint64_t *>(arg);
		if (!key || *key == 0 || *key > d->mapped.size() || !d->mapped[*key - 1].first)
			return -FI_EINVAL;
		d->mapped[*key - 1] = {0, 0};
		return 0;
	}
	return -FI_ENOSYS;
}

fi_ops domain_fi_ops = fid_ops(domain_close, domain_control);

// fi_query_atomic: what fi_atomicvalid and the like answer, for the
// domain; nothing without a module that has atomics.
int domain_query_atomic(fid_domain *f, fi_datatype datatype, fi_op op, fi_atomic_attr *attr,
			std::uint64_t flags)
{
	if (!self_of<Domain>(f)->atomics)
		return -FI_ENOSYS;
	return query_atomic(datatype, op, attr, flags);
}

} // namespace

int cq_open(fid_domain *domain, fi_cq_attr *attr, fid_cq **cq, void *context);
int cntr_open(fid_domain *domain, fi_cntr_attr *attr, fid_cntr **cntr, void *context);
int endpoint_open(fid_domain *domain, fi_info *info, fid_ep **ep, void *context);

namespace {
fi_ops_domain domain_ops = [] {
	fi_ops_domain o{};
	o.size = sizeof(fi_ops_domain);
	o.av_open = av_open;
	o.cq_open = cq_open;
	o.endpoint = endpoint_open;
	MEFI_NOSYS(o, scalable_ep);
	o.cntr_open = cntr_open;
	MEFI_NOSYS(o, poll_open);
	MEFI_NOSYS(o, stx_ctx);
	MEFI_NOSYS(o, srx_ctx);
	o.query_atomic = domain_query_atomic;
	MEFI_NOSYS(o, query_collective);
	MEFI_NOSYS(o, endpoint2);
	return o;
}();
} // namespace

int domain_open(fid_fabric *fabric, fi_info *info, fid_domain **out, void *context)
{
	if (!info || !info->domain_attr || (info->domain_attr->name &&
					    std::strcmp(info->domain_attr->name, "multiedge")))
		return -FI_EINVAL;
	int fd = ::open(ME_DEVICE_PATH, O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		int err = errno;
		MEFI_WARN("%s: %s\n", ME_DEVICE_PATH, std::strerror(err));
		return -fi_error_of(err == ENOENT ? ENODEV : err);
	}
	me_query q{};
	q.size = sizeof(q);
	if (::ioctl(fd, ME_IOC_QUERY, &q) || q.abi_version < 11 ||
	    !(q.features & ME_FEATURE_RECV_POLL) || !(q.features & ME_FEATURE_PORTS)) {
		MEFI_WARN("%s: the module is older than ABI 11\n", ME_DEVICE_PATH);
		::close(fd);
		return -FI_ENOSYS;
	}
	// The domain's endpoint is its file's port: the one the source
	// address names, else one the module picks.
	me_bind b{};
	b.size = sizeof(b);
	if (info->src_addr) {
		std::optional<Addr> src = parse_addr(info->src_addr, info->src_addrlen);
		if (!src || addr_node(*src) != q.node_id) {
			::close(fd);
			return -FI_EINVAL;
		}
		b.port = addr_port(*src);
	}
	if (::ioctl(fd, ME_IOC_BIND, &b)) {
		int err = errno;
		MEFI_WARN("binding port %u: %s\n", b.port, std::strerror(err));
		::close(fd);
		return -fi_error_of(err);
	}
	auto *d = new (std::nothrow) Domain(self_of<Fabric>(fabric), fd, q.node_id,
					    static_cast<std::uint16_t>(b.port), context);
	if (!d) {
		::close(fd);
		return -FI_ENOMEM;
	}
	d->post_more = q.features & ME_FEATURE_POST_MORE;
	// Without shared connections (a module before ABI 18), each endpoint
	// opens its own connection to each peer endpoint, as before.
	d->shared = q.features & ME_FEATURE_SHARED;
	d->send_large = (q.features & ME_FEATURE_SEND_LARGE) && large_sends_param();
	d->ack_now = (q.features & ME_FEATURE_ACK_NOW) && ack_now_param();
	int err = d->init_bounce();
	if (err) {
		MEFI_WARN("registering the send buffer: %s\n", std::strerror(err));
		delete d;
		return -fi_error_of(err);
	}
	// Without atomics in the module (before ABI 19) FI_ATOMIC is not
	// offered and the atomic calls answer -FI_ENOSYS.
	d->atomics = q.features & ME_FEATURE_ATOMIC;
	d->loopback = q.features & ME_FEATURE_LOOPBACK;
	if (d->atomics && (err = d->init_atomics())) {
		MEFI_WARN("registering the atomics' buffer: %s\n", std::strerror(err));
		delete d;
		return -fi_error_of(err);
	}
	err = d->init_local();
	if (err) {
		MEFI_WARN("the socket for this node's endpoints (%s): %s\n",
			  local_name(d->self).c_str(), std::strerror(err));
		delete d;
		return -fi_error_of(err);
	}
	err = d->init_wake();
	if (err) {
		MEFI_WARN("the counters' eventfd: %s\n", std::strerror(err));
		delete d;
		return -fi_error_of(err);
	}
	*out = &d->h.fid;
	return 0;
}

Domain::Domain(Fabric *fabric, int fd, std::uint32_t node, std::uint16_t port, void *context)
	: fabric(fabric), fd(fd), node(node), self(make_addr(node, port))
{
	h.self = this;
	h.fid.fid.fclass = FI_CLASS_DOMAIN;
	h.fid.fid.context = context;
	h.fid.fid.ops = &domain_fi_ops;
	h.fid.ops = &domain_ops;
	h.fid.mr = &mr_ops;
}

Domain::~Domain()
{
	// Closing the file deregisters the bounce and atomic regions and
	// gives up every connection of it.
	::close(fd);
	std::free(bounce);
	std::free(atomic_buf);
}

int Domain::init_bounce()
{
	std::size_t len = slot_off(kSlots + (send_large ? kLargeSlots : 0));
	void *p = nullptr;
	if (posix_memalign(&p, 4096, len))
		return ENOMEM;
	std::memset(p, 0, len);
	bounce = static_cast<std::uint8_t *>(p);
	std::uint64_t key = 0;
	int err = reg(fd, bounce, len, 0, &bounce_region, &key);
	if (err)
		return err;
	free_slots.reserve(kSlots);
	for (int i = kSlots - 1; i >= 0; i--)
		free_slots.push_back(i);
	if (send_large)
		for (int i = kSlots + kLargeSlots - 1; i >= int{kSlots}; i--)
			free_large.push_back(i);
	// Grown to the length of a longer message when one comes (progress()).
	recv_buf.resize(ME_SEND_MAX_VER0);
	return 0;
}

int Domain::take_slot(std::size_t len)
{
	auto &from = len > ME_SEND_MAX_VER0 ? free_large : free_slots;
	int slot = from.back();
	from.pop_back();
	return slot;
}

void Domain::put_slot(int slot)
{
	(slot < int{kSlots} ? free_slots : free_large).push_back(slot);
}

int Domain::init_atomics()
{
	std::size_t len = std::size_t{kAtomicSlots} * kAtomicSlotSize;
	void *p = nullptr;
	if (posix_memalign(&p, 4096, len))
		return ENOMEM;
	std::memset(p, 0, len);
	atomic_buf = static_cast<std::uint8_t *>(p);
	std::uint64_t key = 0;
	int err = reg(fd, atomic_buf, len, 0, &atomic_region, &key);
	if (err)
		return err;
	free_atomic_slots.reserve(kAtomicSlots);
	for (int i = kAtomicSlots - 1; i >= 0; i--)
		free_atomic_slots.push_back(i);
	return 0;
}

void Domain::progress()
{
	// A counter the application changed woke the wait set's sleepers;
	// left readable, the set would keep them spinning.
	if (woken)
		drain_wake();
	if (!ep)
		return;
	me_completion cs[64];
	for (;;) {
		me_poll_cq q{};
		q.size = sizeof(q);
		q.count = 64;
		q.entry_size = sizeof(me_completion);
		q.entries = reinterpret_cast<std::uintptr_t>(cs);
		if (::ioctl(fd, ME_IOC_POLL_CQ, &q)) {
			MEFI_WARN("polling completions: %s\n", std::strerror(errno));
			break;
		}
		for (unsigned i = 0; i < q.count && ep; i++)
			ep->on_completion(cs[i]);
		if (q.count < 64 || !ep)
			break;
	}
	// A progress() called while a message is handled leaves the receive
	// queue to this one: the buffer holds that message.
	const bool nested = receiving;
	receiving = true;
	for (int i = 0; i < 256 && !nested && ep && !ep->unexpected_full(); i++) {
		std::uint8_t *buf = recv_buf.data();
		me_recv r{};
		r.size = sizeof(r);
		r.buf = reinterpret_cast<std::uintptr_t>(buf);
		r.len = static_cast<std::uint32_t>(recv_buf.size());
		if (::ioctl(fd, ME_IOC_RECV, &r)) {
			// Longer than the buffer (a peer's send of several
			// packets, ABI 26): it stays queued; take it with room.
			if (errno == EMSGSIZE && r.len > recv_buf.size() && r.len <= ME_SEND_MAX) {
				recv_buf.resize(r.len);
				continue;
			}
			if (errno != EAGAIN)
				MEFI_WARN("receiving: %s\n", std::strerror(errno));
			break;
		}
		// An older module fills the struct up to its own size: port 0.
		ep->on_message(r.peer, r.conn, r.port, buf, r.len);
	}
	receiving = nested;
	drain_local();
	if (ep)
		ep->retry();
	if (ep)
		wait_for_messages(!ep->unexpected_full());
}

AddressVector::AddressVector(Domain *d, fi_av_type type, void *context) : domain(d), type(type)
{
	h.self = this;
	h.fid.fid.fclass = FI_CLASS_AV;
	h.fid.fid.context = context;
	h.fid.fid.ops = &av_fi_ops;
	h.fid.ops = &av_ops;
}

std::optional<Addr> AddressVector::lookup(fi_addr_t a) const
{
	if (type == FI_AV_MAP) {
		// What make_addr() can give: a node (not 0, not broadcast), a port.
		if (!addr_port(a) || !addr_node(a) || a >= make_addr(0xffffffffu, 0))
			return std::nullopt;
		return a;
	}
	if (a >= table.size() || !table[a])
		return std::nullopt;
	return table[a];
}

fi_addr_t AddressVector::addr_of(Addr ep) const
{
	if (type == FI_AV_MAP)
		return ep;
	for (std::size_t i = 0; i < table.size(); i++)
		if (table[i] == ep)
			return i;
	return FI_ADDR_NOTAVAIL;
}

MemoryRegion::MemoryRegion(Domain *d, const void *buf, std::size_t len, void *context)
	: domain(d), addr(static_cast<const std::uint8_t *>(buf)), len(len)
{
	h.self = this;
	h.fid.fid.fclass = FI_CLASS_MR;
	h.fid.fid.context = context;
	h.fid.fid.ops = &mr_fi_ops;
	h.fid.mem_desc = this;
}

bool MemoryRegion::covers(const void *buf, std::size_t n) const
{
	auto *p = static_cast<const std::uint8_t *>(buf);
	return region && p >= addr && n <= len && static_cast<std::size_t>(p - addr) <= len - n;
}

TempRegion::~TempRegion()
{
	if (region)
		dereg(domain->fd, region);
}

int TempRegion::make(Domain *d, const void *buf, std::size_t len, std::uint32_t access,
		     bool may_copy, bool copy_always)
{
	domain = d;
	if (!copy_always) {
		int err = reg(d->fd, buf, len, access, &region, &key);
		if (err != EFAULT || !may_copy)
			return err;
	}
	// Read-only memory (a constant, say) cannot be registered: send a copy.
	copy = {static_cast<std::uint8_t *>(std::malloc(len)), std::free};
	if (!copy)
		return ENOMEM;
	std::memcpy(copy.get(), buf, len);
	return reg(d->fd, copy.get(), len, access, &region, &key);
}

} // namespace mefi
