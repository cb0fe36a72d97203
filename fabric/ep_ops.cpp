// The endpoint as libfabric sees it: fi_endpoint, bind, enable, names, and
// the message, tagged, RMA and atomic operation tables, each taking the
// domain's lock and handing over to Endpoint (ep.cpp, rma.cpp, atomic.cpp).
#include <cstring>
#include <new>

#include "fabric/mefi.hpp"
#include "fabric/nosys.hpp"

namespace mefi {

namespace {

struct Locked {
	explicit Locked(fid_ep *f) : ep(self_of<Endpoint>(f)), g(ep->domain->mu) {}
	Endpoint *ep;
	std::lock_guard<std::recursive_mutex> g;
};

bool one_iov(std::size_t count)
{
	return count <= 1;
}

// ---- fid ----

int ep_close(fid *f)
{
	Endpoint *ep = self_of<Endpoint>(reinterpret_cast<fid_ep *>(f));
	Domain *d = ep->domain;
	std::lock_guard<std::recursive_mutex> g(d->mu);
	d->ep = nullptr;
	d->refs--;
	delete ep;
	return 0;
}

int ep_bind(fid *f, fid *bfid, std::uint64_t flags)
{
	Endpoint *ep = self_of<Endpoint>(reinterpret_cast<fid_ep *>(f));
	std::lock_guard<std::recursive_mutex> g(ep->domain->mu);
	if (ep->enabled)
		return -FI_EOPBADSTATE;
	switch (bfid->fclass) {
	case FI_CLASS_AV: {
		AddressVector *av = self_of<AddressVector>(reinterpret_cast<fid_av *>(bfid));
		if (av->domain != ep->domain)
			return -FI_EINVAL;
		ep->av = av;
		return 0;
	}
	case FI_CLASS_CQ: {
		auto *cq = self_of<CompletionQueue>(reinterpret_cast<fid_cq *>(bfid));
		if (cq->domain != ep->domain)
			return -FI_EINVAL;
		if (flags & ~(FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION))
			return -FI_EBADFLAGS;
		if (!(flags & (FI_TRANSMIT | FI_RECV)))
			return -FI_EINVAL;
		if (flags & FI_TRANSMIT) {
			ep->tx_cq = cq;
			ep->tx_selective = flags & FI_SELECTIVE_COMPLETION;
		}
		if (flags & FI_RECV) {
			ep->rx_cq = cq;
			ep->rx_selective = flags & FI_SELECTIVE_COMPLETION;
		}
		return 0;
	}
	case FI_CLASS_EQ:
		return 0;	// an RDM endpoint raises no events
	case FI_CLASS_CNTR: {
		auto *c = self_of<Counter>(reinterpret_cast<fid_cntr *>(bfid));
		if (c->domain != ep->domain)
			return -FI_EINVAL;
		if (flags & ~(FI_SEND | FI_RECV | FI_READ | FI_WRITE | FI_REMOTE_READ |
			      FI_REMOTE_WRITE))
			return -FI_EBADFLAGS;
		// A peer's reads and writes of this domain's regions are done by
		// the module without the provider: it sees only a write with
		// data (ME_CQ_NOTIFY), and a count of those would pass for a
		// count of remote writes.  No FI_RMA_EVENT, no such counters.
		if (flags & (FI_REMOTE_READ | FI_REMOTE_WRITE))
			return -FI_ENOSYS;
		if (!flags)
			return -FI_EINVAL;
		// One counter per kind of operation (fi_endpoint(3)).
		struct {
			std::uint64_t flag;
			Counter *&slot;
		} kinds[] = {{FI_SEND, ep->send_cntr},
			     {FI_RECV, ep->recv_cntr},
			     {FI_READ, ep->read_cntr},
			     {FI_WRITE, ep->write_cntr}};
		for (auto &k : kinds)
			if ((flags & k.flag) && k.slot)
				return -FI_EINVAL;
		for (auto &k : kinds)
			if (flags & k.flag)
				k.slot = c;
		return 0;
	}
	default:
		return -FI_EINVAL;
	}
}

int ep_control(fid *f, int command, void *arg)
{
	Endpoint *ep = self_of<Endpoint>(reinterpret_cast<fid_ep *>(f));
	std::lock_guard<std::recursive_mutex> g(ep->domain->mu);
	switch (command) {
	case FI_ENABLE:
		if (!ep->av)
			return -FI_ENOAV;
		if (!ep->tx_cq && !ep->rx_cq)
			return -FI_ENOCQ;
		ep->enabled = true;
		return 0;
	case FI_GETOPSFLAG:
	case FI_SETOPSFLAG: {
		auto *flags = static_cast<std::uint64_t *>(arg);
		if (!flags)
			return -FI_EINVAL;
		bool tx = *flags & FI_TRANSMIT, rx = *flags & FI_RECV;
		if (tx == rx)
			return -FI_EINVAL;
		std::uint64_t &ops = tx ? ep->tx_op_flags : ep->rx_op_flags;
		if (command == FI_GETOPSFLAG)
			*flags = ops | (tx ? FI_TRANSMIT : FI_RECV);
		else
			ops = *flags & ~(FI_TRANSMIT | FI_RECV);
		return 0;
	}
	default:
		return -FI_ENOSYS;
	}
}

fi_ops ep_fi_ops = fid_ops(ep_close, ep_control, ep_bind);

// ---- fi_ops_ep ----

ssize_t ep_cancel(fid_t f, void *context)
{
	Locked l(reinterpret_cast<fid_ep *>(f));
	return l.ep->cancel(context);
}

// FI_OPT_MIN_MULTI_RECV is the one option (a size_t).
int ep_getopt(fid_t f, int level, int name, void *val, std::size_t *len)
{
	if (level != FI_OPT_ENDPOINT || name != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!val || !len || *len < sizeof(std::size_t))
		return -FI_EINVAL;
	Locked l(reinterpret_cast<fid_ep *>(f));
	std::memcpy(val, &l.ep->min_multi_recv, sizeof(std::size_t));
	*len = sizeof(std::size_t);
	return 0;
}

int ep_setopt(fid_t f, int level, int name, const void *val, std::size_t len)
{
	if (level != FI_OPT_ENDPOINT || name != FI_OPT_MIN_MULTI_RECV)
		return -FI_ENOPROTOOPT;
	if (!val || len != sizeof(std::size_t))
		return -FI_EINVAL;
	Locked l(reinterpret_cast<fid_ep *>(f));
	std::memcpy(&l.ep->min_multi_recv, val, sizeof(std::size_t));
	return 0;
}

fi_ops_ep ep_ops = [] {
	fi_ops_ep o{};
	o.size = sizeof(fi_ops_ep);
	o.cancel = ep_cancel;
	o.getopt = ep_getopt;
	o.setopt = ep_setopt;
	MEFI_NOSYS(o, tx_ctx);
	MEFI_NOSYS(o, rx_ctx);
	MEFI_NOSYS(o, rx_size_left);
	MEFI_NOSYS(o, tx_size_left);
	return o;
}();

// ---- fi_ops_cm ----

int ep_getname(fid_t f, void *addr, std::size_t *addrlen)
{
	Endpoint *ep = self_of<Endpoint>(reinterpret_cast<fid_ep *>(f));
	if (!addrlen)
		return -FI_EINVAL;
	char buf[kAddrLen] = {};
	std::string s = addr_string(ep->domain->self);
	std::memcpy(buf, s.c_str(), s.size());
	std::size_t room = *addrlen;
	*addrlen = kAddrLen;
	if (room < kAddrLen || !addr)
		return -FI_ETOOSMALL;
	std::memcpy(addr, buf, kAddrLen);
	return 0;
}

fi_ops_cm cm_ops = [] {
	fi_ops_cm o{};
	o.size = sizeof(fi_ops_cm);
	MEFI_NOSYS(o, setname);
	o.getname = ep_getname;
	MEFI_NOSYS(o, getpeer);
	MEFI_NOSYS(o, connect);
	MEFI_NOSYS(o, listen);
	MEFI_NOSYS(o, accept);
	MEFI_NOSYS(o, reject);
	MEFI_NOSYS(o, shutdown);
	MEFI_NOSYS(o, join);
	return o;
}();

// ---- fi_ops_msg and fi_ops_tagged ----

template <bool Tagged> struct Ops {
	static ssize_t recv_tagged(fid_ep *f, void *buf, std::size_t len, void *desc,
				   fi_addr_t src, std::uint64_t tag, std::uint64_t ignore,
				   void *context)
	{
		Locked l(f);
		// A default FI_MULTI_RECV (rx_attr op_flags) is for untagged
		// receives: tagged ones have none in libfabric 1.17.
		std::uint64_t flags = l.ep->rx_op_flags & (Tagged ? ~std::uint64_t{FI_MULTI_RECV} : ~0ULL);
		return l.ep->recv(buf, len, desc, src, tag, ignore, flags, Tagged, context);
	}
	static ssize_t recvv_tagged(fid_ep *f, const iovec *iov, void **desc, std::size_t count,
				    fi_addr_t src, std::uint64_t tag, std::uint64_t ignore,
				    void *context)
	{
		if (!one_iov(count))
			return -FI_EINVAL;
		return recv_tagged(f, count ? iov->iov_base : nullptr, count ? iov->iov_len : 0,
				   desc ? desc[0] : nullptr, src, tag, ignore, context);
	}
	static ssize_t send_tagged(fid_ep *f, const void *buf, std::size_t len, void *desc,
				   fi_addr_t dest, std::uint64_t tag, void *context)
	{
		Locked l(f);
		return l.ep->send(buf, len, desc, dest, tag, 0, l.ep->tx_op_flags, Tagged, context);
	}
	static ssize_t sendv_tagged(fid_ep *f, const iovec *iov, void **desc, std::size_t count,
				    fi_addr_t dest, std::uint64_t tag, void *context)
	{
		if (!one_iov(count))
			return -FI_EINVAL;
		return send_tagged(f, count ? iov->iov_base : nullptr, count ? iov->iov_len : 0,
				   desc ? desc[0] : nullptr, dest, tag, context);
	}
	static ssize_t inject_tagged(fid_ep *f, const void *buf, std::size_t len, fi_addr_t dest,
				     std::uint64_t tag)
	{
		Locked l(f);
		return l.ep->send(buf, len, nullptr, dest, tag, 0, FI_INJECT, Tagged, nullptr);
	}
	static ssize_t senddata_tagged(fid_ep *f, const void *buf, std::size_t len, void *desc,
				       std::uint64_t data, fi_addr_t dest, std::uint64_t tag,
				       void *context)
	{
		Locked l(f);
		return l.ep->send(buf, len, desc, dest, tag, data,
				  l.ep->tx_op_flags | FI_REMOTE_CQ_DATA, Tagged, context);
	}
	static ssize_t injectdata_tagged(fid_ep *f, const void *buf, std::size_t len,
					 std::uint64_t data, fi_addr_t dest, std::uint64_t tag)
	{
		Locked l(f);
		return l.ep->send(buf, len, nullptr, dest, tag, data, FI_INJECT | FI_REMOTE_CQ_DATA,
				  Tagged, nullptr);
	}
};

using MsgOps = Ops<false>;
using TagOps = Ops<true>;

ssize_t msg_recv(fid_ep *f, void *buf, std::size_t len, void *desc, fi_addr_t src, void *ctx)
{
	return MsgOps::recv_tagged(f, buf, len, desc, src, 0, 0, ctx);
}
ssize_t msg_recvv(fid_ep *f, const iovec *iov, void **desc, std::size_t count, fi_addr_t src,
		  void *ctx)
{
	return MsgOps::recvv_tagged(f, iov, desc, count, src, 0, 0, ctx);
}
ssize_t msg_recvmsg(fid_ep *f, const fi_msg *m, std::uint64_t flags)
{
	if (!m || !one_iov(m->iov_count))
		return -FI_EINVAL;
	Locked l(f);
	return l.ep->recv(m->iov_count ? m->msg_iov->iov_base : nullptr,
			  m->iov_count ? m->msg_iov->iov_len : 0, m->desc ? m->desc[0] : nullptr,
			  m->addr, 0, 0, flags, false, m->context);
}
ssize_t msg_send(fid_ep *f, const void *buf, std::size_t len, void *desc, fi_addr_t dest,
		 void *ctx)
{
	return MsgOps::send_tagged(f, buf, len, desc, dest, 0, ctx);
}
ssize_t msg_sendv(fid_ep *f, const iovec *iov, void **desc, std::size_t count, fi_addr_t dest,
		  void *ctx)
{
	return MsgOps::sendv_tagged(f, iov, desc, count, dest, 0, ctx);
}
ssize_t msg_sendmsg(fid_ep *f, const fi_msg *m, std::uint64_t flags)
{
	if (!m || !one_iov(m->iov_count))
		return -FI_EINVAL;
	Locked l(f);
	return l.ep->send(m->iov_count ? m->msg_iov->iov_base : nullptr,
			  m->iov_count ? m->msg_iov->iov_len : 0, m->desc ? m->desc[0] : nullptr,
			  m->addr, 0, m->data, flags, false, m->context);
}
ssize_t msg_inject(fid_ep *f, const void *buf, std::size_t len, fi_addr_t dest)
{
	return MsgOps::inject_tagged(f, buf, len, dest, 0);
}
ssize_t msg_senddata(fid_ep *f, const void *buf, std::size_t len, void *desc, std::uint64_t data,
		     fi_addr_t dest, void *ctx)
{
	return MsgOps::senddata_tagged(f, buf, len, desc, data, dest, 0, ctx);
}
ssize_t msg_injectdata(fid_ep *f, const void *buf, std::size_t len, std::uint64_t data,
		       fi_addr_t dest)
{
	return MsgOps::injectdata_tagged(f, buf, len, data, dest, 0);
}

ssize_t tag_recvmsg(fid_ep *f, const fi_msg_tagged *m, std::uint64_t flags)
{
	if (!m || !one_iov(m->iov_count))
		return -FI_EINVAL;
	Locked l(f);
	return l.ep->recv(m->iov_count ? m->msg_iov->iov_base : nullptr,
			  m->iov_count ? m->msg_iov->iov_len : 0, m->desc ? m->desc[0] : nullptr,
			  m->addr, m->tag, m->ignore, flags, true, m->context);
}
ssize_t tag_sendmsg(fid_ep *f, const fi_msg_tagged *m, std::uint64_t flags)
{
	if (!m || !one_iov(m->iov_count))
		return -FI_EINVAL;
	Locked l(f);
	return l.ep->send(m->iov_count ? m->msg_iov->iov_base : nullptr,
			  m->iov_count ? m->msg_iov->iov_len : 0, m->desc ? m->desc[0] : nullptr,
			  m->addr, m->tag, m->data, flags, true, m->context);
}

fi_ops_msg msg_ops = [] {
	fi_ops_msg o{};
	o.size = sizeof(fi_ops_msg);
	o.recv = msg_recv;
	o.recvv = msg_recvv;
	o.recvmsg = msg_recvmsg;
	o.send = msg_send;
	o.sendv = msg_sendv;
	o.sendmsg = msg_sendmsg;
	o.inject = msg_inject;
	o.senddata = msg_senddata;
	o.injectdata = msg_injectdata;
	return o;
}();

fi_ops_tagged tagged_ops = [] {
	fi_ops_tagged o{};
	o.size = sizeof(fi_ops_tagged);
	o.recv = TagOps::recv_tagged;
	o.recvv = TagOps::recvv_tagged;
	o.recvmsg = tag_recvmsg;
	o.send = TagOps::send_tagged;
	o.sendv = TagOps::sendv_tagged;
	o.sendmsg = tag_sendmsg;
	o.inject = TagOps::inject_tagged;
	o.senddata = TagOps::senddata_tagged;
	o.injectdata = TagOps::injectdata_tagged;
	return o;
}();

// ---- fi_ops_rma (rma.cpp) ----

ssize_t rma_read(fid_ep *f, void *buf, std::size_t len, void *desc, fi_addr_t src,
		 std::uint64_t addr, std::uint64_t key, void *ctx)
{
	Locked l(f);
	return l.ep->rma(true, buf, len, desc, src, addr, key, 0, l.ep->tx_op_flags, ctx);
}
ssize_t rma_readv(fid_ep *f, const iovec *iov, void **desc, std::size_t count, fi_addr_t src,
		  std::uint64_t addr, std::uint64_t key, void *ctx)
{
	if (!one_iov(count))
		return -FI_EINVAL;
	return rma_read(f, count ? iov->iov_base : nullptr, count ? iov->iov_len : 0,
			desc ? desc[0] : nullptr, src, addr, key, ctx);
}
// One local iov and one remote one, of the same length.
bool one_rma(const fi_msg_rma *m)
{
	return m && one_iov(m->iov_count) && m->rma_iov_count == 1 && m->rma_iov &&
	       (m->iov_count ? m->msg_iov->iov_len : 0) == m->rma_iov->len;
}
ssize_t rma_readmsg(fid_ep *f, const fi_msg_rma *m, std::uint64_t flags)
{
	if (!one_rma(m))
		return -FI_EINVAL;
	Locked l(f);
	return l.ep->rma(true, m->iov_count ? m->msg_iov->iov_base : nullptr, m->rma_iov->len,
			 m->desc ? m->desc[0] : nullptr, m->addr, m->rma_iov->addr, m->rma_iov->key,
			 0, flags, m->context);
}
ssize_t rma_write(fid_ep *f, const void *buf, std::size_t len, void *desc, fi_addr_t dest,
		  std::uint64_t addr, std::uint64_t key, void *ctx)
{
	Locked l(f);
	return l.ep->rma(false, const_cast<void *>(buf), len, desc, dest, addr, key, 0,
			 l.ep->tx_op_flags, ctx);
}
ssize_t rma_writev(fid_ep *f, const iovec *iov, void **desc, std::size_t count, fi_addr_t dest,
		   std::uint64_t addr, std::uint64_t key, void *ctx)
{
	if (!one_iov(count))
		return -FI_EINVAL;
	return rma_write(f, count ? iov->iov_base : nullptr, count ? iov->iov_len : 0,
			 desc ? desc[0] : nullptr, dest, addr, key, ctx);
}
ssize_t rma_writemsg(fid_ep *f, const fi_msg_rma *m, std::uint64_t flags)
{
	if (!one_rma(m))
		return -FI_EINVAL;
	Locked l(f);
	return l.ep->rma(false, m->iov_count ? m->msg_iov->iov_base : nullptr, m->rma_iov->len,
			 m->desc ? m->desc[0] : nullptr, m->addr, m->rma_iov->addr, m->rma_iov->key,
			 m->data, flags, m->context);
}
ssize_t rma_inject(fid_ep *f, const void *buf, std::size_t len, fi_addr_t dest,
		   std::uint64_t addr, std::uint64_t key)
{
	Locked l(f);
	return l.ep->rma(false, const_cast<void *>(buf), len, nullptr, dest, addr, key, 0, FI_INJECT,
			 nullptr);
}
ssize_t rma_writedata(fid_ep *f, const void *buf, std::size_t len, void *desc,
		      std::uint64_t data, fi_addr_t dest, std::uint64_t addr, std::uint64_t key,
		      void *ctx)
{
	Locked l(f);
	return l.ep->rma(false, const_cast<void *>(buf), len, desc, dest, addr, key, data,
			 l.ep->tx_op_flags | FI_REMOTE_CQ_DATA, ctx);
}
ssize_t rma_injectdata(fid_ep *f, const void *buf, std::size_t len, std::uint64_t data,
		       fi_addr_t dest, std::uint64_t addr, std::uint64_t key)
{
	Locked l(f);
	return l.ep->rma(false, const_cast<void *>(buf), len, nullptr, dest, addr, key, data,
			 FI_INJECT | FI_REMOTE_CQ_DATA, nullptr);
}

fi_ops_rma rma_ops = [] {
	fi_ops_rma o{};
	o.size = sizeof(fi_ops_rma);
	o.read = rma_read;
	o.readv = rma_readv;
	o.readmsg = rma_readmsg;
	o.write = rma_write;
	o.writev = rma_writev;
	o.writemsg = rma_writemsg;
	o.inject = rma_inject;
	o.writedata = rma_writedata;
	o.injectdata = rma_injectdata;
	return o;
}();

// ---- fi_ops_atomic (atomic.cpp) ----

using Kind = AtomicRequest::Kind;

// The elements an ioc vector holds (each ioc counts its own) and where the
// first one is; count 0 and a null vector hold none.  Endpoint::atomic
// takes one element per call.
struct Elements {
	std::size_t n = 0;
	void *first = nullptr;
	bool ok = true;			// not a count without a vector
};
Elements elements_of(const fi_ioc *iov, std::size_t count)
{
	Elements e;
	if (count && !iov) {
		e.ok = false;
		return e;
	}
	for (std::size_t i = 0; i < count; i++) {
		if (iov[i].count && !e.first)
			e.first = iov[i].addr;
		e.n += iov[i].count;
	}
	return e;
}

AtomicRequest request(Kind kind, const void *buf, std::size_t count, fi_addr_t dest,
		      std::uint64_t addr, std::uint64_t key, fi_datatype datatype, fi_op op,
		      std::uint64_t flags, void *context)
{
	AtomicRequest r;
	r.kind = kind;
	r.datatype = datatype;
	r.op = op;
	r.count = count;
	r.buf = buf;
	r.dest = dest;
	r.addr = addr;
	r.key = key;
	r.flags = flags;
	r.context = context;
	return r;
}

// A message's operands and its one remote range, of as many elements.
bool fill_from_msg(AtomicRequest &r, const fi_msg_atomic *m)
{
	if (!m)
		return false;
	Elements e = elements_of(m->msg_iov, m->iov_count);
	if (!e.ok || m->rma_iov_count != 1 || !m->rma_iov || m->rma_iov->count != e.n)
		return false;
	r.datatype = m->datatype;
	r.op = m->op;
	r.count = e.n;
	r.buf = e.first;
	r.dest = m->addr;
	r.addr = m->rma_iov->addr;
	r.key = m->rma_iov->key;
	r.context = m->context;
	return true;
}

// The results (or compare values) of a vector call: as many elements as
// its operands.
bool fill_vector(const fi_ioc *iov, std::size_t count, std::size_t want, void **out)
{
	Elements e = elements_of(iov, count);
	if (!e.ok || e.n != want)
		return false;
	*out = e.first;
	return true;
}

ssize_t atomic_post(fid_ep *f, const AtomicRequest &r)
{
	Locked l(f);
	return l.ep->atomic(r);
}

ssize_t atomic_write(fid_ep *f, const void *buf, std::size_t count, void *, fi_addr_t dest,
		     std::uint64_t addr, std::uint64_t key, fi_datatype datatype, fi_op op,
		     void *ctx)
{
	Locked l(f);
	return l.ep->atomic(request(Kind::Base, buf, count, dest, addr, key, datatype, op,
				    l.ep->tx_op_flags, ctx));
}
ssize_t atomic_writev(fid_ep *f, const fi_ioc *iov, void **, std::size_t count, fi_addr_t dest,
		      std::uint64_t addr, std::uint64_t key, fi_datatype datatype, fi_op op,
		      void *ctx)
{
	Elements e = elements_of(iov, count);
	if (!e.ok)
		return -FI_EINVAL;
	return atomic_write(f, e.first, e.n, nullptr, dest, addr, key, datatype, op, ctx);
}
ssize_t atomic_writemsg(fid_ep *f, const fi_msg_atomic *m, std::uint64_t flags)
{
	AtomicRequest r;
	r.kind = Kind::Base;
	r.flags = flags;
	if (!fill_from_msg(r, m))
		return -FI_EINVAL;
	return atomic_post(f, r);
}
ssize_t atomic_inject(fid_ep *f, const void *buf, std::size_t count, fi_addr_t dest,
		      std::uint64_t addr, std::uint64_t key, fi_datatype datatype, fi_op op)
{
	return atomic_post(f, request(Kind::Base, buf, count, dest, addr, key, datatype, op,
				      FI_INJECT, nullptr));
}

ssize_t atomic_readwrite(fid_ep *f, const void *buf, std::size_t count, void *, void *result,
			 void *, fi_addr_t dest, std::uint64_t addr, std::uint64_t key,
			 fi_datatype datatype, fi_op op, void *ctx)
{
	Locked l(f);
	AtomicRequest r = request(Kind::Fetch, buf, count, dest, addr, key, datatype, op,
				  l.ep->tx_op_flags, ctx);
	r.result = result;
	return l.ep->atomic(r);
}
ssize_t atomic_readwritev(fid_ep *f, const fi_ioc *iov, void **, std::size_t count,
			  fi_ioc *resultv, void **, std::size_t result_count, fi_addr_t dest,
			  std::uint64_t addr, std::uint64_t key, fi_datatype datatype, fi_op op,
			  void *ctx)
{
	Elements e = elements_of(iov, count);
	void *result = nullptr;
	if (!e.ok || !fill_vector(resultv, result_count, e.n, &result))
		return -FI_EINVAL;
	return atomic_readwrite(f, e.first, e.n, nullptr, result, nullptr, dest, addr, key,
				datatype, op, ctx);
}
ssize_t atomic_readwritemsg(fid_ep *f, const fi_msg_atomic *m, fi_ioc *resultv, void **,
			    std::size_t result_count, std::uint64_t flags)
{
	AtomicRequest r;
	r.kind = Kind::Fetch;
	r.flags = flags;
	if (!fill_from_msg(r, m) || !fill_vector(resultv, result_count, r.count, &r.result))
		return -FI_EINVAL;
	return atomic_post(f, r);
}

ssize_t atomic_compwrite(fid_ep *f, const void *buf, std::size_t count, void *,
			 const void *compare, void *, void *result, void *, fi_addr_t dest,
			 std::uint64_t addr, std::uint64_t key, fi_datatype datatype, fi_op op,
			 void *ctx)
{
	Locked l(f);
	AtomicRequest r = request(Kind::Compare, buf, count, dest, addr, key, datatype, op,
				  l.ep->tx_op_flags, ctx);
	r.compare = compare;
	r.result = result;
	return l.ep->atomic(r);
}
ssize_t atomic_compwritev(fid_ep *f, const fi_ioc *iov, void **, std::size_t count,
			  const fi_ioc *comparev, void **, std::size_t compare_count,
			  fi_ioc *resultv, void **, std::size_t result_count, fi_addr_t dest,
			  std::uint64_t addr, std::uint64_t key, fi_datatype datatype, fi_op op,
			  void *ctx)
{
	Elements e = elements_of(iov, count);
	void *compare = nullptr, *result = nullptr;
	if (!e.ok || !fill_vector(comparev, compare_count, e.n, &compare) ||
	    !fill_vector(resultv, result_count, e.n, &result))
		return -FI_EINVAL;
	return atomic_compwrite(f, e.first, e.n, nullptr, compare, nullptr, result, nullptr, dest,
				addr, key, datatype, op, ctx);
}
ssize_t atomic_compwritemsg(fid_ep *f, const fi_msg_atomic *m, const fi_ioc *comparev, void **,
			    std::size_t compare_count, fi_ioc *resultv, void **,
			    std::size_t result_count, std::uint64_t flags)
{
	AtomicRequest r;
	r.kind = Kind::Compare;
	r.flags = flags;
	void *compare = nullptr;
	if (!fill_from_msg(r, m) || !fill_vector(comparev, compare_count, r.count, &compare) ||
	    !fill_vector(resultv, result_count, r.count, &r.result))
		return -FI_EINVAL;
	r.compare = compare;
	return atomic_post(f, r);
}

// fi_atomicvalid and the like: 0 and one element per call, or
// -FI_EOPNOTSUPP.
template <Kind K> int atomic_valid(fid_ep *, fi_datatype datatype, fi_op op, std::size_t *count)
{
	std::uint32_t aop = 0, size = 0;
	if (int err = atomic_op(K, datatype, op, &aop, &size))
		return err;
	if (count)
		*count = 1;
	return 0;
}

// With a module that has atomics (ME_FEATURE_ATOMIC).
fi_ops_atomic atomic_ops = [] {
	fi_ops_atomic o{};
	o.size = sizeof(fi_ops_atomic);
	o.write = atomic_write;
	o.writev = atomic_writev;
	o.writemsg = atomic_writemsg;
	o.inject = atomic_inject;
	o.readwrite = atomic_readwrite;
	o.readwritev = atomic_readwritev;
	o.readwritemsg = atomic_readwritemsg;
	o.compwrite = atomic_compwrite;
	o.compwritev = atomic_compwritev;
	o.compwritemsg = atomic_compwritemsg;
	o.writevalid = atomic_valid<Kind::Base>;
	o.readwritevalid = atomic_valid<Kind::Fetch>;
	o.compwritevalid = atomic_valid<Kind::Compare>;
	return o;
}();

// Without: every call answers -FI_ENOSYS.
fi_ops_atomic atomic_nosys_ops = [] {
	fi_ops_atomic o{};
	o.size = sizeof(fi_ops_atomic);
	MEFI_NOSYS(o, write);
	MEFI_NOSYS(o, writev);
	MEFI_NOSYS(o, writemsg);
	MEFI_NOSYS(o, inject);
	MEFI_NOSYS(o, readwrite);
	MEFI_NOSYS(o, readwritev);
	MEFI_NOSYS(o, readwritemsg);
	MEFI_NOSYS(o, compwrite);
	MEFI_NOSYS(o, compwritev);
	MEFI_NOSYS(o, compwritemsg);
	MEFI_NOSYS(o, writevalid);
	MEFI_NOSYS(o, readwritevalid);
	MEFI_NOSYS(o, compwritevalid);
	return o;
}();

fi_ops_collective collective_ops = [] {
	fi_ops_collective o{};
	o.size = sizeof(fi_ops_collective);
	MEFI_NOSYS(o, barrier);
	MEFI_NOSYS(o, broadcast);
	MEFI_NOSYS(o, alltoall);
	MEFI_NOSYS(o, allreduce);
	MEFI_NOSYS(o, allgather);
	MEFI_NOSYS(o, reduce_scatter);
	MEFI_NOSYS(o, reduce);
	MEFI_NOSYS(o, scatter);
	MEFI_NOSYS(o, gather);
	MEFI_NOSYS(o, msg);
	MEFI_NOSYS(o, barrier2);
	return o;
}();

} // namespace

int endpoint_open(fid_domain *domain, fi_info *info, fid_ep **out, void *context)
{
	if (!out)
		return -FI_EINVAL;
	if (info && info->ep_attr && info->ep_attr->type != FI_EP_RDM &&
	    info->ep_attr->type != FI_EP_UNSPEC)
		return -FI_EINVAL;
	Domain *d = self_of<Domain>(domain);
	std::lock_guard<std::recursive_mutex> g(d->mu);
	if (d->ep)
		return -FI_ENOSPC;	// one endpoint per domain (ep_cnt 1)
	auto *ep = new (std::nothrow) Endpoint(d, info, context);
	if (!ep)
		return -FI_ENOMEM;
	ep->h.fid.fid.ops = &ep_fi_ops;
	ep->h.fid.ops = &ep_ops;
	ep->h.fid.cm = &cm_ops;
	ep->h.fid.msg = &msg_ops;
	ep->h.fid.tagged = &tagged_ops;
	ep->h.fid.rma = &rma_ops;
	ep->h.fid.atomic = d->atomics ? &atomic_ops : &atomic_nosys_ops;
	ep->h.fid.collective = &collective_ops;
	d->ep = ep;
	d->refs++;
	*out = &ep->h.fid;
	return 0;
}

} // namespace mefi
