// The endpoint's atomics (FI_ATOMIC, with a module of ABI 19): fi_atomic,
// fi_fetch_atomic and fi_compare_atomic onto the module's ME_OP_ATOMIC, one
// element of 4 or 8 bytes per call, addressed as RMA is (a fi_mr_map_raw
// key and an offset into its region).  The operands go through a slot of
// the domain's registered atomic buffer, so the caller's buffers need no
// registration.  To the endpoint itself the operation is applied here, with
// the CPU's atomic instructions and the checks the module makes.
#include <cerrno>
#include <cstring>
#include <type_traits>

#include "fabric/mefi.hpp"

namespace mefi {

namespace {

// The operand size of `datatype`, 0 when atomics do not take it.
std::uint32_t size_of(fi_datatype datatype)
{
	switch (datatype) {
	case FI_INT32:
	case FI_UINT32:
		return 4;
	case FI_INT64:
	case FI_UINT64:
		return 8;
	default:
		return 0;
	}
}

bool is_signed(fi_datatype datatype)
{
	return datatype == FI_INT32 || datatype == FI_INT64;
}

// What the module's operation leaves in place of `old` (as the module's
// me_aop_apply does), or nothing changes (ME_ATOMIC_READ).  U is the
// operand's unsigned type; S its signed one.
template <typename U> U apply(std::uint32_t aop, U old, U operand)
{
	using S = std::make_signed_t<U>;
	switch (aop) {
	case ME_ATOMIC_SMIN:
		return static_cast<S>(operand) < static_cast<S>(old) ? operand : old;
	case ME_ATOMIC_SMAX:
		return static_cast<S>(operand) > static_cast<S>(old) ? operand : old;
	case ME_ATOMIC_UMIN:
		return operand < old ? operand : old;
	case ME_ATOMIC_UMAX:
		return operand > old ? operand : old;
	default:
		return old;
	}
}

// Applies `aop` to *p as one atomic step against every other atomic
// instruction on it (the module's on a peer's behalf included); returns
// the value found.
template <typename U> U apply_at(U *p, std::uint32_t aop, U operand, U compare)
{
	switch (aop) {
	case ME_ATOMIC_ADD:
		return __atomic_fetch_add(p, operand, __ATOMIC_SEQ_CST);
	case ME_ATOMIC_AND:
		return __atomic_fetch_and(p, operand, __ATOMIC_SEQ_CST);
	case ME_ATOMIC_OR:
		return __atomic_fetch_or(p, operand, __ATOMIC_SEQ_CST);
	case ME_ATOMIC_XOR:
		return __atomic_fetch_xor(p, operand, __ATOMIC_SEQ_CST);
	case ME_ATOMIC_SWAP:
		return __atomic_exchange_n(p, operand, __ATOMIC_SEQ_CST);
	case ME_ATOMIC_CSWAP:
		// On a mismatch `compare` becomes the value found; on a match
		// it was it.
		__atomic_compare_exchange_n(p, &compare, operand, false, __ATOMIC_SEQ_CST,
					    __ATOMIC_SEQ_CST);
		return compare;
	case ME_ATOMIC_READ:
		return __atomic_load_n(p, __ATOMIC_SEQ_CST);
	default: {	// min and max: written only when the operand wins
		U old = __atomic_load_n(p, __ATOMIC_SEQ_CST);
		for (;;) {
			U v = apply(aop, old, operand);
			if (v == old || __atomic_compare_exchange_n(p, &old, v, false,
								    __ATOMIC_SEQ_CST,
								    __ATOMIC_SEQ_CST))
				return old;
		}
	}
	}
}

template <typename U> void apply_bytes(void *at, std::uint32_t aop, const void *buf,
				       const void *compare, void *found)
{
	U operand = 0, cmp = 0;
	if (buf)
		std::memcpy(&operand, buf, sizeof(U));
	if (compare)
		std::memcpy(&cmp, compare, sizeof(U));
	U old = apply_at(static_cast<U *>(at), aop, operand, cmp);
	std::memcpy(found, &old, sizeof(U));
}

} // namespace

int atomic_op(AtomicRequest::Kind kind, fi_datatype datatype, fi_op op, std::uint32_t *aop,
	      std::uint32_t *size)
{
	using Kind = AtomicRequest::Kind;
	*size = size_of(datatype);
	if (!*size)
		return -FI_EOPNOTSUPP;	// floats, complex, 8 and 16 bits, 128 bits
	bool s = is_signed(datatype);
	switch (op) {
	case FI_CSWAP:
		*aop = ME_ATOMIC_CSWAP;
		return kind == Kind::Compare ? 0 : -FI_EOPNOTSUPP;
	case FI_ATOMIC_READ:
		*aop = ME_ATOMIC_READ;
		return kind == Kind::Fetch ? 0 : -FI_EOPNOTSUPP;
	case FI_SUM:
		*aop = ME_ATOMIC_ADD;
		break;
	case FI_BOR:
		*aop = ME_ATOMIC_OR;
		break;
	case FI_BAND:
		*aop = ME_ATOMIC_AND;
		break;
	case FI_BXOR:
		*aop = ME_ATOMIC_XOR;
		break;
	case FI_MIN:
		*aop = s ? ME_ATOMIC_SMIN : ME_ATOMIC_UMIN;
		break;
	case FI_MAX:
		*aop = s ? ME_ATOMIC_SMAX : ME_ATOMIC_UMAX;
		break;
	case FI_ATOMIC_WRITE:
		*aop = ME_ATOMIC_SWAP;	// a fetch keeps what it found
		break;
	default:
		// FI_PROD, the logical ones, the other compares, FI_MSWAP:
		// the module has no such operation.
		return -FI_EOPNOTSUPP;
	}
	return kind == Kind::Compare ? -FI_EOPNOTSUPP : 0;
}

int query_atomic(fi_datatype datatype, fi_op op, fi_atomic_attr *attr, std::uint64_t flags)
{
	using Kind = AtomicRequest::Kind;
	if (!attr || (flags & ~(FI_FETCH_ATOMIC | FI_COMPARE_ATOMIC | FI_TAGGED)))
		return -FI_EINVAL;
	if ((flags & FI_FETCH_ATOMIC) && (flags & FI_COMPARE_ATOMIC))
		return -FI_EINVAL;
	if (flags & FI_TAGGED)
		return -FI_EOPNOTSUPP;	// no atomics onto tagged receive buffers
	Kind kind = (flags & FI_FETCH_ATOMIC)	  ? Kind::Fetch
		    : (flags & FI_COMPARE_ATOMIC) ? Kind::Compare
						  : Kind::Base;
	std::uint32_t aop = 0, size = 0;
	if (int err = atomic_op(kind, datatype, op, &aop, &size))
		return err;
	attr->count = 1;
	attr->size = size;
	return 0;
}

void Endpoint::complete_atomic(void *context, bool fetch, bool report, int err)
{
	// Counted whether or not it gets a CQ entry (FI_INJECT, selective).
	if (Counter *c = fetch ? read_cntr : write_cntr)
		c->count(err);
	if (!tx_cq || (!err && !report))
		return;
	Entry e;
	e.e.op_context = context;
	e.e.flags = FI_ATOMIC | (fetch ? FI_READ : FI_WRITE);
	e.err = err;
	tx_cq->push(e);
}

ssize_t Endpoint::atomic(const AtomicRequest &r)
{
	using Kind = AtomicRequest::Kind;
	std::uint32_t aop = 0, size = 0;
	if (int err = atomic_op(r.kind, r.datatype, r.op, &aop, &size))
		return err;
	if (r.count != 1)
		return -FI_EINVAL;	// one element per call (the valid queries say so)
	std::optional<Addr> peer;
	if (ssize_t err = check_post(nullptr, 0, r.dest, peer))
		return err;
	if ((aop != ME_ATOMIC_READ && !r.buf) || (aop == ME_ATOMIC_CSWAP && !r.compare) ||
	    (r.kind != Kind::Base && !r.result))
		return -FI_EINVAL;
	if (r.key == 0 || r.key > domain->mapped.size() || !domain->mapped[r.key - 1].first)
		return -FI_EINVAL;	// not a key fi_mr_map_raw gave
	if (r.flags & FI_REMOTE_CQ_DATA)
		return -FI_EOPNOTSUPP;	// the module's atomics notify nobody
	// FI_INJECT concerns the constant buffers, which are copied anyway;
	// it drops the completion of a base atomic (fi_inject_atomic), while
	// a fetching one tells when its result is there.
	const bool fetch = r.kind != Kind::Base;
	const bool report = wants_tx_completion(fetch ? r.flags & ~FI_INJECT : r.flags);
	auto [region, rkey] = domain->mapped[r.key - 1];
	if (*peer == domain->self)
		return atomic_local(r, aop, size, region, rkey, report);
	if (is_local(*peer) && !domain->loopback)
		return -FI_EOPNOTSUPP;	// another endpoint of this node: no path
	if (domain->free_atomic_slots.empty()) {
		domain->progress();
		if (domain->free_atomic_slots.empty())
			return -FI_EAGAIN;
	}

	auto op = std::make_unique<Op>();
	op->type = Op::Type::Atomic;
	op->addr = *peer;
	op->context = r.context;
	op->cq_flags = FI_ATOMIC | (fetch ? FI_READ : FI_WRITE);
	op->report = report;
	op->atomic_size = size;
	op->result = r.kind == Kind::Base ? nullptr : r.result;
	op->atomic_slot = domain->free_atomic_slots.back();
	domain->free_atomic_slots.pop_back();
	const std::size_t off = std::size_t{static_cast<unsigned>(op->atomic_slot)} *
				Domain::kAtomicSlotSize;
	std::uint8_t *slot = domain->atomic_buf + off;
	std::memset(slot, 0, Domain::kAtomicSlotSize);
	if (aop != ME_ATOMIC_READ)
		std::memcpy(slot, r.buf, size);
	if (aop == ME_ATOMIC_CSWAP)
		std::memcpy(slot + size, r.compare, size);

	me_post m{};
	m.size = sizeof(m);
	m.opcode = ME_OP_ATOMIC;
	m.flags = ME_POST_F_NONBLOCK;
	m.len = size;
	m.local_region = domain->atomic_region;
	m.local_off = off;
	m.remote_region = region;
	m.remote_key = static_cast<std::uint32_t>(rkey);
	m.remote_key_hi = static_cast<std::uint32_t>(rkey >> 32);
	m.remote_off = r.addr;
	m.imm = aop;
	op->cookie = domain->next_cookie++;
	m.cookie = op->cookie;
	// On the connection to the peer's node, as RMA (rma.cpp).
	if (int err = post_to(*peer, m)) {
		domain->free_atomic_slots.push_back(op->atomic_slot);
		return err == EAGAIN ? -FI_EAGAIN : -fi_error_of(err);
	}
	op->conn = m.conn;
	posted[m.cookie] = op.release();
	return 0;
}

void Endpoint::atomic_done(Op *op, int err)
{
	const std::uint8_t *slot = domain->atomic_buf +
				   std::size_t{static_cast<unsigned>(op->atomic_slot)} *
					   Domain::kAtomicSlotSize;
	// The module wrote the value found before it completed the atomic.
	if (!err && op->result)
		std::memcpy(op->result, slot, op->atomic_size);
	domain->free_atomic_slots.push_back(op->atomic_slot);
	complete_atomic(op->context, (op->cq_flags & FI_READ) != 0, op->report,
			err ? fi_error_of(err) : 0);
	delete op;
}

// To this endpoint: the checks the module makes for a peer (the region is
// this domain's, the key, the access: read and write, read alone for
// FI_ATOMIC_READ; the range; memory aligned to the operand), then one
// atomic instruction on the region's memory.
ssize_t Endpoint::atomic_local(const AtomicRequest &r, std::uint32_t aop, std::uint32_t size,
			       std::uint32_t region, std::uint64_t key, bool report)
{
	const bool fetch = r.kind != AtomicRequest::Kind::Base;
	auto it = domain->mrs.find(region);
	MemoryRegion *mr = it == domain->mrs.end() ? nullptr : it->second;
	std::uint64_t need = aop == ME_ATOMIC_READ ? FI_REMOTE_READ : FI_REMOTE_READ | FI_REMOTE_WRITE;
	int err = 0;
	if (!mr || mr->key != key || (mr->access & need) != need)
		err = FI_EACCES;
	else if (r.addr > mr->len || size > mr->len - r.addr)
		err = ERANGE;	// as the module answers (no FI_ name)
	else if ((reinterpret_cast<std::uintptr_t>(mr->addr) + r.addr) % size)
		err = FI_EINVAL;	// as the module answers
	if (!err) {
		void *at = const_cast<std::uint8_t *>(mr->addr) + r.addr;
		std::uint64_t discard;
		void *found = fetch ? r.result : &discard;
		const void *buf = aop == ME_ATOMIC_READ ? nullptr : r.buf;
		const void *compare = aop == ME_ATOMIC_CSWAP ? r.compare : nullptr;
		if (size == 4)
			apply_bytes<std::uint32_t>(at, aop, buf, compare, found);
		else
			apply_bytes<std::uint64_t>(at, aop, buf, compare, found);
	}
	complete_atomic(r.context, fetch, report, err);
	return 0;
}

} // namespace mefi
