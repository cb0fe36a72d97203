// The endpoint's RMA: fi_read, fi_write and fi_writedata onto the module's
// remote read, write and write with notification, addressed by a region
// key fi_mr_map_raw made from a peer's raw key (FI_MR_RAW) and an offset
// into that region.  To the endpoint itself the bytes are copied here,
// with the same checks the module makes.
#include <cerrno>
#include <cstring>

#include "fabric/mefi.hpp"

namespace mefi {

void Endpoint::complete_rma(void *context, bool read, bool report, int err)
{
	// Counted whether or not it gets a CQ entry (FI_INJECT, selective).
	if (Counter *c = read ? read_cntr : write_cntr)
		c->count(err);
	if (!tx_cq || (!err && !report))
		return;
	Entry e;
	e.e.op_context = context;
	e.e.flags = FI_RMA | (read ? FI_READ : FI_WRITE);
	e.err = err;
	tx_cq->push(e);
}

ssize_t Endpoint::rma(bool read, void *buf, std::size_t len, void *desc, fi_addr_t dest,
		      std::uint64_t addr, std::uint64_t key, std::uint64_t data, std::uint64_t flags,
		      void *context)
{
	std::optional<Addr> peer;
	if (ssize_t err = check_post(buf, len, dest, peer))
		return err;
	if (key == 0 || key > domain->mapped.size() || !domain->mapped[key - 1].first)
		return -FI_EINVAL;	// not a key fi_mr_map_raw gave
	if ((flags & FI_INJECT) && (read || len > kEagerMax))
		return -FI_EMSGSIZE;
	// The module's notification carries 32 bits.
	if (read ? (flags & FI_REMOTE_CQ_DATA) : ((flags & FI_REMOTE_CQ_DATA) && data > 0xffffffffULL))
		return -FI_EINVAL;
	bool report = wants_tx_completion(flags);
	auto [region, rkey] = domain->mapped[key - 1];
	if (*peer == domain->self)
		return rma_local(read, buf, len, region, rkey, addr, data, flags, context);
	if (is_local(*peer) && !domain->loopback)
		return -FI_EOPNOTSUPP;	// another endpoint of this node: no path
	if (!len) {
		complete_rma(context, read, report, 0);
		return 0;
	}

	auto op = std::make_unique<Op>();
	op->type = Op::Type::Rma;
	op->addr = *peer;
	op->context = context;
	op->cq_flags = FI_RMA | (read ? FI_READ : FI_WRITE);
	op->report = report;
	me_post m{};
	m.size = sizeof(m);
	m.opcode = read ? ME_OP_READ : (flags & FI_REMOTE_CQ_DATA) ? ME_OP_NOTIFY : ME_OP_WRITE;
	m.flags = ME_POST_F_NONBLOCK |
		  (!read && domain->ack_now && (report || write_cntr) ? ME_POST_F_ACK_NOW : 0);
	m.len = static_cast<std::uint32_t>(len);
	m.remote_region = region;
	m.remote_key = static_cast<std::uint32_t>(rkey);
	m.remote_key_hi = static_cast<std::uint32_t>(rkey >> 32);
	m.remote_off = addr;
	m.imm = static_cast<std::uint32_t>(data);
	auto *mr = static_cast<MemoryRegion *>(desc);
	if (mr && mr->covers(buf, len)) {
		m.local_region = mr->region;
		m.local_off = static_cast<std::uint64_t>(static_cast<std::uint8_t *>(buf) - mr->addr);
	} else {
		op->temp = std::make_unique<TempRegion>();
		int err = op->temp->make(domain, buf, len, 0, !read, (flags & FI_INJECT) != 0);
		if (err)
			return -fi_error_of(err == ENOSPC ? ENOMEM : err);
		m.local_region = op->temp->region;
		m.local_off = 0;
	}
	op->cookie = domain->next_cookie++;
	m.cookie = op->cookie;
	// On the connection to the peer (with shared connections, its node's,
	// which every endpoint of this node may post on); one that closed or
	// died is replaced once.
	if (int err = post_to(*peer, m))
		return err == EAGAIN ? -FI_EAGAIN : -fi_error_of(err);
	op->conn = m.conn;
	posted[m.cookie] = op.release();
	return 0;
}

// To this endpoint: the region must be this domain's, the key and the access
// right, the range inside it (as the module checks a peer's request).
ssize_t Endpoint::rma_local(bool read, void *buf, std::size_t len, std::uint32_t region,
			    std::uint64_t key, std::uint64_t addr, std::uint64_t data,
			    std::uint64_t flags, void *context)
{
	bool report = wants_tx_completion(flags);
	auto it = domain->mrs.find(region);
	MemoryRegion *mr = it == domain->mrs.end() ? nullptr : it->second;
	int err = 0;
	if (!mr || mr->key != key || !(mr->access & (read ? FI_REMOTE_READ : FI_REMOTE_WRITE)))
		err = FI_EACCES;
	else if (addr > mr->len || len > mr->len - addr)
		err = ERANGE;	// as the module answers (no FI_ name)
	if (!err && len) {
		auto *at = const_cast<std::uint8_t *>(mr->addr) + addr;
		if (read)
			std::memmove(buf, at, len);
		else
			std::memmove(at, buf, len);
	}
	complete_rma(context, read, report, err);
	if (!err && !read && (flags & FI_REMOTE_CQ_DATA) && rx_cq) {
		Entry e;
		e.e.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
		e.e.len = len;
		e.e.data = data;
		e.src = av->addr_of(domain->self);
		rx_cq->push(e);
	}
	return 0;
}

} // namespace mefi
