// Receives: tag matching (with ignore bits and, under FI_DIRECTED_RECV,
// the source), messages that came before their receive (held up to
// max_unexpected bytes), peek and claim, cancel, multi-receive buffers,
// and the completion of each.
#include <cstring>

#include "fabric/mefi.hpp"

namespace mefi {

namespace {

// What an unexpected message costs besides its payload (entry, list node).
constexpr std::size_t kUnexpectedEntry = sizeof(Unexpected) + 2 * sizeof(void *);

} // namespace

void Endpoint::complete_rx(const RecvRequest &r, Addr addr, const Header &h,
			   std::size_t got, int err, std::size_t olen)
{
	if (recv_cntr)
		recv_cntr->count(err);
	// The last message of a released FI_MULTI_RECV buffer to complete
	// hands the buffer back.
	bool last = r.multi && !--r.multi->pending && r.multi->released;
	if (!rx_cq || (!err && rx_selective && !(r.flags & FI_COMPLETION)))
		return;
	Entry e;
	e.e.op_context = r.context;
	e.e.flags = FI_RECV | ((h.flags & kFlagTagged) ? FI_TAGGED : FI_MSG) |
		    ((h.flags & kFlagData) ? FI_REMOTE_CQ_DATA : 0) | (last ? FI_MULTI_RECV : 0);
	e.e.len = got;
	e.e.buf = r.buf;
	e.e.data = h.data;
	e.e.tag = h.tag;
	e.src = av ? av->addr_of(addr) : FI_ADDR_NOTAVAIL;
	e.err = err;
	e.olen = olen;
	rx_cq->push(e);
}

bool Endpoint::matches(const RecvRequest &r, Addr addr, const Header &h) const
{
	if (r.tagged != ((h.flags & kFlagTagged) != 0))
		return false;
	if (r.src && r.src != addr)
		return false;
	return !r.tagged || ((h.tag ^ r.tag) & ~r.ignore) == 0;
}

RecvRequest Endpoint::multi_slice(RecvRequest &r, std::size_t len) const
{
	MultiRecv &m = *r.multi;
	RecvRequest slice = r;
	slice.buf = r.buf + m.used;
	slice.len = r.len - m.used;
	// Aligned so that whoever reads a header out of it can (MPICH does).
	std::size_t end = m.used + std::min(len, slice.len);
	m.used = std::min(r.len, (end + 7) & ~std::size_t{7});
	// Full, or with less left than the minimum (which may be 0).
	m.released = m.used == r.len || r.len - m.used < min_multi_recv;
	m.pending++;
	return slice;
}

ssize_t Endpoint::recv(void *buf, std::size_t len, void *desc, fi_addr_t src, std::uint64_t tag,
		       std::uint64_t ignore, std::uint64_t flags, bool tagged, void *context)
{
	if (!enabled)
		return -FI_EOPBADSTATE;
	if (len && !buf && !(flags & (FI_PEEK | FI_CLAIM)))
		return -FI_EINVAL;
	RecvRequest r;
	r.tagged = tagged;
	r.buf = static_cast<std::uint8_t *>(buf);
	r.len = len;
	r.mr = static_cast<MemoryRegion *>(desc);
	if (r.mr && !r.mr->covers(buf, len))
		r.mr = nullptr;
	// The source counts only where FI_DIRECTED_RECV was asked for (fi_recv
	// callers without it pass anything there, 0 often).
	if (directed && src != FI_ADDR_UNSPEC) {
		std::optional<Addr> addr = av->lookup(src);
		if (!addr)
			return -FI_EINVAL;
		r.src = *addr;
	}
	r.tag = tag;
	r.ignore = ignore;
	r.context = context;
	r.flags = flags;
	if (flags & FI_MULTI_RECV) {
		// Untagged only (libfabric 1.17), and never a peek or claim.
		if (tagged || (flags & (FI_PEEK | FI_CLAIM)) || !len)
			return -FI_EINVAL;
		r.multi = std::make_shared<MultiRecv>();
	}
	domain->progress();
	if (flags & FI_PEEK) {
		if (!tagged)
			return -FI_EINVAL;
		peek(r);
		return 0;
	}
	if (flags & FI_CLAIM) {
		if (!tagged)
			return -FI_EINVAL;
		for (auto it = unexpected.begin(); it != unexpected.end(); ++it) {
			if (it->claimed_by != context)
				continue;
			if (flags & FI_DISCARD) {
				if (it->h.kind == Kind::Rts)
					send_fin(it->addr, it->h.id, 0);
				complete_rx(r, it->addr, it->h, 0, 0, 0);
			} else {
				fulfil(r, it->addr, it->h, it->payload.data());
			}
			drop_unexpected(it);
			return 0;
		}
		return -FI_EINVAL;	// nothing claimed with this context
	}
	for (auto it = unexpected.begin(); it != unexpected.end();) {
		if (it->claimed_by || !matches(r, it->addr, it->h)) {
			++it;
			continue;
		}
		if (!r.multi) {
			fulfil(r, it->addr, it->h, it->payload.data());
			drop_unexpected(it);
			return 0;
		}
		// A multi-receive buffer takes every waiting message it can.
		RecvRequest slice = multi_slice(r, it->h.len);
		fulfil(slice, it->addr, it->h, it->payload.data());
		auto next = std::next(it);
		drop_unexpected(it);
		it = next;
		if (r.multi->released)
			return 0;
	}
	(tagged ? posted_tagged : posted_msg).push_back(r);
	return 0;
}

// A peek receives nothing, so it counts nothing unless it discards the
// message it found (FI_DISCARD: taken, as a receive takes it); a claimed
// message counts when its FI_CLAIM receive takes or discards it.
void Endpoint::peek(const RecvRequest &r)
{
	for (auto it = unexpected.begin(); it != unexpected.end(); ++it) {
		if (it->claimed_by || !matches(r, it->addr, it->h))
			continue;
		Entry e;
		e.e.op_context = r.context;
		e.e.flags = FI_RECV | FI_TAGGED | ((it->h.flags & kFlagData) ? FI_REMOTE_CQ_DATA : 0);
		e.e.len = it->h.len;
		e.e.data = it->h.data;
		e.e.tag = it->h.tag;
		e.src = av->addr_of(it->addr);
		if (rx_cq)
			rx_cq->push(e);
		if (r.flags & FI_CLAIM) {
			it->claimed_by = r.context;
		} else if (r.flags & FI_DISCARD) {
			if (it->h.kind == Kind::Rts)
				send_fin(it->addr, it->h.id, 0);
			drop_unexpected(it);
			if (recv_cntr)
				recv_cntr->count(0);
		}
		return;
	}
	if (rx_cq) {
		Entry e;
		e.e.op_context = r.context;
		e.e.flags = FI_RECV | FI_TAGGED;
		e.err = FI_ENOMSG;
		rx_cq->push(e);
	}
}

ssize_t Endpoint::cancel(void *context)
{
	for (auto *list : {&posted_msg, &posted_tagged})
		for (auto it = list->begin(); it != list->end(); ++it) {
			if (it->context != context)
				continue;
			if (recv_cntr)
				recv_cntr->count(FI_ECANCELED);	// completes in error
			// A multi-receive buffer with reads into it still running
			// is handed back by the last of them.
			bool handed_back = false;
			if (it->multi) {
				it->multi->released = true;
				handed_back = !it->multi->pending;
			}
			if (rx_cq) {
				Entry e;
				e.e.op_context = context;
				e.e.flags = FI_RECV | (it->tagged ? FI_TAGGED : FI_MSG) |
					    (handed_back ? FI_MULTI_RECV : 0);
				e.e.buf = it->buf;
				e.e.tag = it->tag;
				e.err = FI_ECANCELED;
				rx_cq->push(e);
			}
			list->erase(it);
			return 0;
		}
	return -FI_ENOENT;
}

void Endpoint::fulfil(RecvRequest &r, Addr addr, const Header &h,
		      const std::uint8_t *payload)
{
	if (h.kind == Kind::Rts) {
		start_read(r, addr, h);
		return;
	}
	std::size_t n = std::min<std::size_t>(h.len, r.len);
	if (n)
		std::memcpy(r.buf, payload, n);
	complete_rx(r, addr, h, n, h.len > r.len ? FI_ETRUNC : 0, h.len - n);
}

void Endpoint::deliver(Addr addr, const Header &h, const std::uint8_t *payload)
{
	if (h.kind == Kind::Probe) {
		// Its sender's stream is in order: the Rts came before, unless
		// this endpoint is not the one it was sent to (a new one on the
		// port), or finished with it (its Fin is ahead of this answer).
		if (!holds_rts(addr, h.id))
			send_fin(addr, h.id, ECONNRESET);
		return;
	}
	if (h.kind == Kind::Fin) {
		auto it = rendezvous.find(h.id);
		if (it == rendezvous.end() || it->second->addr != addr || it->second->fin_seen) {
			dropped++;	// not an Rts of ours to that addr
			return;
		}
		Op *op = it->second;
		if (op->cookie) {
			// Its Rts's own completion is still to come (harvested
			// later): the send completes then.
			op->fin_seen = true;
			op->fin_status = h.status;
			return;
		}
		const std::uint32_t stream = op->h.session;
		complete_tx(op, h.status ? fi_error_of(h.status) : 0);
		release(op);
		// A probe's answer, no such Rts there: another endpoint holds
		// the port now, and holds this stream's next messages for ever.
		if (h.status == ECONNRESET)
			restart_stream(addr, stream);
		return;
	}
	auto &list = (h.flags & kFlagTagged) ? posted_tagged : posted_msg;
	for (auto it = list.begin(); it != list.end(); ++it) {
		if (!matches(*it, addr, h))
			continue;
		// Taken off the list before fulfil(), which may post (and so
		// progress); a multi-receive buffer stays until released.
		RecvRequest r = it->multi ? multi_slice(*it, h.len) : *it;
		if (!it->multi || it->multi->released)
			list.erase(it);
		fulfil(r, addr, h, payload);
		return;
	}
	Unexpected u;
	u.h = h;
	u.addr = addr;
	if (h.kind == Kind::Eager)
		u.payload.assign(payload, payload + h.len);
	unexpected_bytes += kUnexpectedEntry + u.payload.size();
	unexpected.push_back(std::move(u));
}

void Endpoint::drop_unexpected(std::list<Unexpected>::iterator it)
{
	unexpected_bytes -= kUnexpectedEntry + it->payload.size();
	unexpected.erase(it);
	if (!unexpected_full())
		domain->wait_for_messages(true);
}

} // namespace mefi
