// The endpoint's send side and its connections: messages over multiedge
// sends (eager up to kEagerMax bytes, or kLargeEagerMax where the module
// takes large sends, else in pieces up to kFragMax; rendezvous by remote
// read above), the reads a rendezvous takes, the
// module's completions, and what is sent again after a refusal or a
// connection that ended.  Receives and tag matching are recv.cpp's; the
// order of each sender's messages is stream.cpp's.
#include <sys/ioctl.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <thread>

#include "fabric/mefi.hpp"

namespace mefi {

namespace {

constexpr unsigned kWindow = 32;	// sends per peer the module holds at once
constexpr unsigned kSlotReserve = 64;	// send slots only Fins may take
constexpr auto kRefusedLimit = std::chrono::seconds(60);
// Sends again of a message whose connection ended after it left, each on
// a new connection (one that cannot be opened fails it sooner).
constexpr unsigned kResendMaybeDelivered = 2;
// How long a connect waits for a node the module does not know (yet).
constexpr auto kUnreachableWait = std::chrono::seconds(1);
// A rendezvous send whose Fin has not come this long after its Rts is
// asked after: its receiver may have closed (a send to its port is then
// refused) or given the port to a new endpoint (which answers that it
// holds no such Rts); a receiver that is only late costs a small message
// this often.
constexpr auto kProbeEvery = std::chrono::seconds(1);
constexpr std::chrono::microseconds kBackoffMin{100}, kBackoffMax{20000};

// An operation's status saying its connection ended after it left: the
// peer may have its data (api.md, the module's completion statuses).
bool ended_after_sent(int err)
{
	return err == ETIMEDOUT || err == ECONNRESET || err == ECONNABORTED;
}

} // namespace

Endpoint::~Endpoint()
{
	// Sends the module still holds keep their slots out of the free list:
	// it may read them until it completes them, and nobody will see that.
	// So do atomics in flight: the module writes the value found into
	// theirs.
	std::set<Op *> all;
	for (auto &[cookie, op] : posted)
		all.insert(op);
	for (auto &[addr, p] : peers)
		for (Op *op : p.waiting) {
			if (op->slot >= 0)
				domain->put_slot(op->slot);
			all.insert(op);
		}
	for (auto &[id, op] : rendezvous)
		all.insert(op);
	for (Op *op : reads)
		all.insert(op);
	for (Op *op : all)
		delete op;
}

ssize_t Endpoint::send(const void *buf, std::size_t len, void *desc, fi_addr_t dest,
		       std::uint64_t tag, std::uint64_t data, std::uint64_t flags, bool tagged,
		       void *context)
{
	(void)desc;	// every rendezvous registers its own region (remote read)
	std::optional<Addr> addr;
	if (ssize_t err = check_post(buf, len, dest, addr))
		return err;
	if ((flags & FI_INJECT) && len > kEagerMax)
		return -FI_EMSGSIZE;
	bool local = is_local(*addr);
	// One send from a large slot (ABI 26), not pieces or a rendezvous.
	const bool large = !local && *addr != domain->self && domain->send_large &&
			   len > kEagerMax && len <= kLargeEagerMax;
	if (!local && !large && domain->free_slots.size() <= kSlotReserve) {
		domain->progress();
		if (domain->free_slots.size() <= kSlotReserve)
			return -FI_EAGAIN;
	}
	if (large && domain->free_large.empty()) {
		domain->progress();
		if (domain->free_large.empty())
			return -FI_EAGAIN;
	}

	auto op = std::make_unique<Op>();
	op->type = Op::Type::Send;
	op->addr = *addr;
	op->context = context;
	op->cq_flags = FI_SEND | (tagged ? FI_TAGGED : FI_MSG);
	op->report = wants_tx_completion(flags);
	op->waited = domain->ack_now && (op->report || send_cntr);
	op->user_len = len;
	Header &h = op->h;
	h.flags = (tagged ? kFlagTagged : 0) | ((flags & FI_REMOTE_CQ_DATA) ? kFlagData : 0);
	h.tag = tagged ? tag : 0;
	h.data = (flags & FI_REMOTE_CQ_DATA) ? data : 0;
	h.len = len;
	if (local)
		return local_send(std::move(op), buf, len);
	const std::uint8_t *payload = static_cast<const std::uint8_t *>(buf);
	std::size_t n = len;
	if (!domain->send_large && len > kEagerMax && len <= kFragMax && *addr != domain->self)
		return send_pieces(std::move(op), payload, len);
	if (len <= kEagerMax || large || *addr == domain->self) {
		h.kind = Kind::Eager;
	} else {
		op->temp = std::make_unique<TempRegion>();
		int err = op->temp->make(domain, buf, len, ME_ACCESS_REMOTE_READ, true);
		if (err)
			return -fi_error_of(err == ENOSPC ? ENOMEM : err);
		h.kind = Kind::Rts;
		h.region = op->temp->region;
		h.key = op->temp->key;
		h.id = next_id++;
		payload = nullptr;
		n = 0;
	}
	if (*addr == domain->self) {
		// FI_LOCAL_COMM: to this endpoint itself.
		// Delivered at once, whole, in call order; the send is done.
		deliver(*addr, h, static_cast<const std::uint8_t *>(buf));
		complete_tx(op.get(), 0);
		return 0;
	}
	Op *raw = op.release();
	if (h.kind == Kind::Rts)
		rendezvous[h.id] = raw;
	return queue_send(*addr, raw, payload, n);
}

// An eager message too big for one send: pieces of kEagerMax bytes in
// consecutive sequence numbers (the receiver gathers them before it
// matches the message); the send completes when every piece has.
ssize_t Endpoint::send_pieces(std::unique_ptr<Op> whole, const std::uint8_t *buf,
			      std::size_t len)
{
	const std::size_t count = (len + kEagerMax - 1) / kEagerMax;
	if (domain->free_slots.size() < kSlotReserve + count) {
		domain->progress();
		if (domain->free_slots.size() < kSlotReserve + count)
			return -FI_EAGAIN;
	}
	auto pieces = std::make_shared<Op::Pieces>();
	pieces->left = static_cast<unsigned>(count);
	for (std::size_t off = 0; off < len; off += kEagerMax) {
		auto op = std::make_unique<Op>();
		op->addr = whole->addr;
		op->context = whole->context;
		op->cq_flags = whole->cq_flags;
		op->report = whole->report;
		// Its ack covers the pieces before it.
		op->waited = whole->waited && off + kEagerMax >= len;
		op->user_len = len;
		op->pieces = pieces;
		op->h = whole->h;
		op->h.kind = Kind::Frag;
		op->h.key = off;
		queue_send(whole->addr, op.release(), buf + off, std::min(kEagerMax, len - off));
	}
	return 0;
}

ssize_t Endpoint::check_post(const void *buf, std::size_t len, fi_addr_t dest,
			     std::optional<Addr> &addr) const
{
	if (!enabled)
		return -FI_EOPBADSTATE;
	if (len && !buf)
		return -FI_EINVAL;
	addr = av->lookup(dest);
	if (!addr)
		return -FI_EINVAL;
	return len > ME_OP_MAX_LEN ? -FI_EMSGSIZE : 0;
}

bool Endpoint::wants_tx_completion(std::uint64_t flags) const
{
	return tx_cq && !(flags & FI_INJECT) && (!tx_selective || (flags & FI_COMPLETION));
}

ssize_t Endpoint::queue_send(Addr addr, Op *op, const std::uint8_t *payload,
			     std::size_t n)
{
	op->slot = domain->take_slot(kHeaderSize + n);
	Peer &p = peers[addr];
	// A probe is answered at once, out of the stream (deliver()).
	op->h.seq = op->h.kind == Kind::Probe ? 0 : p.tx_seq++;
	op->h.session = stream_session(p);
	op->h.port = addr_port(domain->self);
	std::uint8_t *at = domain->slot_at(op->slot);
	encode(op->h, at);
	if (n)
		std::memcpy(at + kHeaderSize, payload, n);
	op->send_len = static_cast<std::uint32_t>(kHeaderSize + n);
	p.waiting.push_back(op);
	flush(addr);
	return 0;
}

std::uint32_t Endpoint::conn_to(Addr addr)
{
	if (!domain->shared)
		return peers[addr].conn;
	auto it = domain->node_conns.find(addr_node(addr));
	return it == domain->node_conns.end() ? 0 : it->second;
}

// Without shared connections, one to the peer endpoint's port (its file's
// from the start); with them, the one to its node, which this file opens,
// or joins when it is up or being opened already (by another endpoint of
// either node).
int Endpoint::connect(Addr addr)
{
	const bool shared = domain->shared;
	me_connect c{};
	c.size = sizeof(c);
	c.flags = shared ? ME_CONNECT_F_SHARED : 0;
	c.peer = addr_node(addr);
	c.port = shared ? 0 : addr_port(addr);
	c.timeout_ms = 5000;
	const bool known = !domain->unknown_nodes.count(c.peer);
	const auto give_up = std::chrono::steady_clock::now() + kUnreachableWait;
	int ret, err;
	for (;;) {
		ret = ::ioctl(domain->fd, ME_IOC_CONNECT, &c);
		// A shared connection found while it ended (its side closed
		// it, its last endpoint gone) cannot be joined: a second look
		// opens a new one.
		if (ret && shared && errno == ECONNRESET)
			ret = ::ioctl(domain->fd, ME_IOC_CONNECT, &c);
		err = ret ? errno : 0;
		// A node the module does not know now: gone, or forgotten
		// while a link was down and known again within a HELLO
		// period (100 ms) of the link coming back.  Waited for once:
		// a gone one would hold up every progress call that sends
		// it something (a rendezvous' probe each second).
		if (err != EHOSTUNREACH || !known || std::chrono::steady_clock::now() >= give_up)
			break;
		std::this_thread::sleep_for(std::chrono::milliseconds(10));
	}
	if (err == EHOSTUNREACH)
		domain->unknown_nodes.insert(c.peer);
	else if (!err)
		domain->unknown_nodes.erase(c.peer);
	if (ret) {
		MEFI_WARN("connecting to %s: %s\n",
			  addr_string(shared ? make_addr(c.peer, 0) : addr).c_str(),
			  std::strerror(err));
		return err;
	}
	if (shared)
		domain->node_conns[c.peer] = c.conn;
	else
		peers[addr].conn = c.conn;
	return 0;
}

// A shared connection forgotten here stays joined until its end's event
// (on_completion leaves it then); if it was still up, connecting again
// joins it again, which the module takes as the same connection.
void Endpoint::forget_conn(Addr addr, std::uint32_t conn)
{
	if (!domain->shared) {
		Peer &p = peers[addr];
		if (p.conn == conn)
			p.conn = 0;
		return;
	}
	auto it = domain->node_conns.find(addr_node(addr));
	if (it != domain->node_conns.end() && it->second == conn)
		domain->node_conns.erase(it);
}

int Endpoint::post_to(Addr addr, me_post &m)
{
	// Another endpoint of this node: the module's loopback, no connection.
	if (is_local(addr)) {
		m.conn = ME_CONN_LOOPBACK;
		return ::ioctl(domain->fd, ME_IOC_POST, &m) ? errno : 0;
	}
	for (bool again = false;; again = true) {
		m.conn = conn_to(addr);
		if (!m.conn) {
			if (int err = connect(addr))
				return err;
			m.conn = conn_to(addr);
		}
		if (!::ioctl(domain->fd, ME_IOC_POST, &m))
			return 0;
		int err = errno;
		if ((err != ENOTCONN && err != ENOENT) || again)
			return err;
		forget_conn(addr, m.conn);	// closed or died: once more on a new one
	}
}

void Endpoint::flush(Addr addr)
{
	Peer &p = peers[addr];
	if (is_local(addr)) {
		flush_local(addr, p);
		return;
	}
	if (p.backoff.count() && std::chrono::steady_clock::now() < p.hold_until)
		return;		// retry() comes back with the next progress
	bool reconnected = false;
	while (!p.waiting.empty() && p.inflight < kWindow) {
		std::uint32_t conn = conn_to(addr);
		if (!conn) {
			int err = connect(addr);
			if (err) {
				// A shared connection is the node's: none of its
				// endpoints can be reached (rather than each
				// waiting out a connect of its own).
				if (!domain->shared) {
					fail_peer(addr, fi_error_of(err));
					return;
				}
				for (auto &[a, q] : peers)
					if (addr_node(a) == addr_node(addr))
						fail_peer(a, fi_error_of(err));
				return;
			}
			conn = conn_to(addr);
		}
		Op *op = p.waiting.front();
		if (!op->cookie)
			op->cookie = domain->next_cookie++;
		// Another follows at once in this pass: let the module hold this
		// one and send them together (a failed or refused last post
		// leaves them to the module's timer, within a tick).
		const bool more = domain->post_more && p.waiting.size() > 1 &&
				  p.inflight + 1 < kWindow;
		me_post m{};
		m.size = sizeof(m);
		m.opcode = ME_OP_SEND;
		m.flags = ME_POST_F_NONBLOCK | (more ? ME_POST_F_MORE : 0) |
			  (op->waited && op->h.kind != Kind::Rts ? ME_POST_F_ACK_NOW : 0);
		m.conn = conn;
		// On the node's shared connection the module hands the message
		// to the file bound to this port.
		m.port = domain->shared ? addr_port(addr) : 0;
		m.cookie = op->cookie;
		m.local_region = domain->bounce_region;
		m.local_off = Domain::slot_off(op->slot);
		m.len = op->send_len;
		if (::ioctl(domain->fd, ME_IOC_POST, &m)) {
			int err = errno;
			if (err == EAGAIN)
				return;		// the module's queues: retry() later
			if ((err == ENOTCONN || err == ENOENT) && !reconnected) {
				forget_conn(addr, conn);  // closed or died: once more on a new one
				reconnected = true;
				continue;
			}
			p.waiting.pop_front();
			complete_tx(op, fi_error_of(err));
			const std::uint32_t stream = op->h.session;
			const bool gap = in_stream(op);
			release(op);
			if (gap)	// the later ones take numbers after it
				restart_stream(addr, stream);
			continue;
		}
		p.waiting.pop_front();
		p.inflight++;
		op->conn = conn;
		posted[op->cookie] = op;
	}
}

// Frees an operation that the module no longer holds, with its slot and
// region.
void Endpoint::release(Op *op)
{
	if (op->slot >= 0)
		domain->put_slot(op->slot);
	if (op->type == Op::Type::Send && op->h.kind == Kind::Rts)
		rendezvous.erase(op->h.id);
	delete op;
}

void Endpoint::send_fin(Addr addr, std::uint64_t id, int status)
{
	// Behind those already waiting: a probe's answer must not pass the
	// Fin that finished the same Rts.
	if (domain->free_slots.empty() || !fins.empty()) {
		fins.push_back({addr, id, status});
		return;
	}
	auto *op = new Op;
	op->type = Op::Type::Send;
	op->addr = addr;
	op->report = false;
	op->h.kind = Kind::Fin;
	op->h.id = id;
	op->h.status = status;
	queue_send(addr, op, nullptr, 0);
}

void Endpoint::probe_rendezvous()
{
	const auto now = std::chrono::steady_clock::now();
	std::map<Addr, Op *> oldest;
	for (auto &[id, op] : rendezvous) {
		// Sent, and waiting for its Fin alone.
		if (op->cookie || op->slot >= 0 || op->fin_seen || now - op->rts_sent < kProbeEvery)
			continue;
		Op *&o = oldest[op->addr];
		if (!o || op->h.id < o->h.id)
			o = op;
	}
	for (auto &[addr, op] : oldest) {
		Peer &p = peers[addr];
		if (now - p.probed < kProbeEvery || domain->free_slots.empty())
			continue;	// asked lately, or no slot: the next progress
		p.probed = now;
		auto *probe = new Op;
		probe->type = Op::Type::Send;
		probe->addr = addr;
		probe->report = false;
		probe->h.kind = Kind::Probe;
		probe->h.id = op->h.id;
		queue_send(addr, probe, nullptr, 0);
	}
}

bool Endpoint::holds_rts(Addr addr, std::uint64_t id) const
{
	for (const Unexpected &u : unexpected)
		if (u.h.kind == Kind::Rts && u.addr == addr && u.h.id == id)
			return true;
	// Held early, behind a message of its stream still to come.
	for (auto it = streams.lower_bound({addr, 0}); it != streams.end() && it->first.first == addr;
	     ++it)
		for (const auto &[seq, msg] : it->second.held) {
			std::optional<Header> h = decode(msg.data(), msg.size());
			if (h && h->kind == Kind::Rts && h->id == id)
				return true;
		}
	for (const Op *op : reads)
		if (op->addr == addr && op->h.id == id)
			return true;
	for (const auto &[cookie, op] : posted)
		if (op->type == Op::Type::Read && op->addr == addr && op->h.id == id)
			return true;
	return false;
}

void Endpoint::complete_tx(Op *op, int err)
{
	if (op->h.kind == Kind::Fin || op->h.kind == Kind::Probe)
		return;		// the provider's own message: nobody posted it
	if (op->pieces) {	// the send completes with its last piece
		Op::Pieces &p = *op->pieces;
		if (err && !p.err)
			p.err = err;
		if (--p.left)
			return;
		err = p.err;
	}
	// Counted whether or not it gets a CQ entry (FI_INJECT, selective).
	if (send_cntr)
		send_cntr->count(err);
	if (!tx_cq || (!err && !op->report))
		return;
	Entry e;
	e.e.op_context = op->context;
	e.e.flags = op->cq_flags;
	e.err = err;
	tx_cq->push(e);
}

void Endpoint::start_read(const RecvRequest &r, Addr addr, const Header &h)
{
	std::size_t n = std::min<std::size_t>(h.len, r.len);
	if (!n) {
		send_fin(addr, h.id, 0);
		complete_rx(r, addr, h, 0, FI_ETRUNC, h.len);
		return;
	}
	auto op = std::make_unique<Op>();
	op->type = Op::Type::Read;
	op->addr = addr;
	op->req = r;
	op->h = h;
	op->user_len = n;
	if (!r.mr) {
		op->temp = std::make_unique<TempRegion>();
		int err = op->temp->make(domain, r.buf, n, 0, false);
		if (err) {
			MEFI_WARN("registering a receive buffer: %s\n", std::strerror(err));
			send_fin(addr, h.id, EIO);
			complete_rx(r, addr, h, 0, fi_error_of(err), 0);
			return;
		}
	}
	Op *raw = op.release();
	if (!post_read(raw))
		reads.push_back(raw);
}

// Posts a rendezvous read; false when the module's queues are full.
bool Endpoint::post_read(Op *op)
{
	op->cookie = domain->next_cookie++;
	me_post m{};
	m.size = sizeof(m);
	m.opcode = ME_OP_READ;
	m.flags = ME_POST_F_NONBLOCK;
	m.cookie = op->cookie;
	if (op->temp) {
		m.local_region = op->temp->region;
		m.local_off = 0;
	} else {
		m.local_region = op->req.mr->region;
		m.local_off = static_cast<std::uint64_t>(op->req.buf - op->req.mr->addr);
	}
	m.len = static_cast<std::uint32_t>(op->user_len);
	m.remote_region = op->h.region;
	m.remote_key = static_cast<std::uint32_t>(op->h.key);
	m.remote_key_hi = static_cast<std::uint32_t>(op->h.key >> 32);
	m.remote_off = 0;
	// On the connection its Rts came on, normally (the sender's to this
	// port, or the nodes' shared one): this endpoint joins a shared one
	// before it posts on it, to learn of its end.
	if (int err = post_to(op->addr, m)) {
		if (err == EAGAIN)
			return false;
		send_fin(op->addr, op->h.id, EIO);
		complete_rx(op->req, op->addr, op->h, 0, fi_error_of(err), 0);
		delete op;
		return true;
	}
	posted[op->cookie] = op;
	return true;
}

void Endpoint::retry()
{
	while (!fins.empty() && !domain->free_slots.empty()) {
		Fin f = fins.front();
		fins.pop_front();
		send_fin(f.addr, f.id, f.status);
	}
	while (!reads.empty()) {
		if (!post_read(reads.front()))
			break;
		reads.pop_front();
	}
	for (auto &[addr, p] : peers)
		if (!p.waiting.empty())
			flush(addr);
	if (!rendezvous.empty())
		probe_rendezvous();
}

void Endpoint::on_completion(const me_completion &c)
{
	if (c.type == ME_CQ_CONN_CLOSED || c.type == ME_CQ_CONN_DEAD) {
		// A connection ended.  Without shared connections, the one to
		// a peer endpoint (opened here, or to this endpoint's port: both
		// report here): it closed its endpoint, or died.  With them, the
		// one to a peer node, which every endpoint of that node used:
		// the node went, or its side closed it (its last endpoint that
		// opened it left).  It goes; the next send connects again.  No
		// Fin will come on it for a rendezvous sent on it.
		if (domain->shared) {
			for (auto it = domain->node_conns.begin(); it != domain->node_conns.end(); ++it)
				if (it->second == c.conn) {
					domain->node_conns.erase(it);
					break;
				}
		} else {
			for (auto &[addr, p] : peers)
				if (p.conn == c.conn)
					p.conn = 0;
		}
		// One this file opened stays its own (a slot of its 256) until
		// given up, and a shared one joined until left; one opened to
		// its port is let go already (ENOENT).
		me_disconnect d{};
		d.size = sizeof(d);
		d.conn = c.conn;
		(void)::ioctl(domain->fd, ME_IOC_DISCONNECT, &d);
		std::vector<Op *> lost;
		for (auto &[id, op] : rendezvous)
			if (op->conn == c.conn && !op->cookie && op->slot < 0)
				lost.push_back(op);
		int err = c.type == ME_CQ_CONN_DEAD && c.status < 0 ? -c.status : ECONNRESET;
		for (Op *op : lost) {
			complete_tx(op, fi_error_of(err));
			release(op);
		}
		return;
	}
	if (c.type == ME_CQ_NOTIFY) {
		// A peer's fi_writedata landed in a region of this domain.
		if (rx_cq) {
			Entry e;
			e.e.flags = FI_RMA | FI_REMOTE_WRITE | FI_REMOTE_CQ_DATA;
			e.e.len = c.len;
			e.e.data = c.imm;
			e.src = av ? av->addr_of(c.peer) : FI_ADDR_NOTAVAIL;
			rx_cq->push(e);
		}
		return;
	}
	auto it = posted.find(c.cookie);
	if (it == posted.end())
		return;
	Op *op = it->second;
	posted.erase(it);
	int err = c.status < 0 ? -c.status : 0;
	const Addr addr = op->addr;

	if (op->type == Op::Type::Rma) {
		complete_rma(op->context, (op->cq_flags & FI_READ) != 0, op->report,
			     err ? fi_error_of(err) : 0);
		delete op;
		return;
	}
	if (op->type == Op::Type::Atomic) {
		atomic_done(op, err);
		return;
	}

	if (op->type == Op::Type::Read) {
		if ((err == ECANCELED || ended_after_sent(err)) && op->resent < kResendMaybeDelivered) {
			// Its connection ended under it: a read may go again
			// (it changes nothing at the sender), on a new one.
			forget_conn(op->addr, c.conn);
			op->resent++;
			op->cookie = 0;
			reads.push_back(op);
			return;
		}
		if (err) {
			send_fin(op->addr, op->h.id, EIO);
			complete_rx(op->req, op->addr, op->h, 0, fi_error_of(err), 0);
		} else {
			send_fin(op->addr, op->h.id, 0);
			bool trunc = op->h.len > op->req.len;
			complete_rx(op->req, op->addr, op->h, op->user_len, trunc ? FI_ETRUNC : 0,
				    op->h.len - op->user_len);
		}
		delete op;
		return;
	}

	Peer &p = peers[op->addr];
	p.inflight--;
	auto now = std::chrono::steady_clock::now();
	if (ended_after_sent(err) && in_stream(op) && op->h.session == stream_session(p) &&
	    op->resent < kResendMaybeDelivered) {
		// Its connection ended after it left: the peer may have it or
		// not.  Sent again on a new one under its number, which a
		// receiver that has it drops; a link down for longer than the
		// module waits for a silent peer costs no message.
		forget_conn(addr, c.conn);
		op->maybe_err = err;
		op->resent++;
		op->cookie = 0;
		p.waiting.push_front(op);
		flush(addr);
		return;
	}
	// Refused by a full receive queue, or never taken (not sent, or
	// beyond the cut of the peer's close): again, in turn (the receiver
	// orders by sequence number) unless its stream started again
	// meanwhile: a message before it failed, the new stream may have
	// overtaken it.
	const bool stale = (err == ENOBUFS || err == ECANCELED) && in_stream(op) &&
			   op->h.session != stream_session(p);
	if (stale)
		err = op->maybe_err ? op->maybe_err : ECONNRESET;
	if (err == ENOBUFS || err == ECANCELED) {
		if (err == ENOBUFS && op->refused == std::chrono::steady_clock::time_point{})
			op->refused = now;
		if (err == ECANCELED || now - op->refused < kRefusedLimit) {
			if (err == ECANCELED)
				forget_conn(addr, c.conn);
			if (err == ENOBUFS) {
				p.backoff = std::min(kBackoffMax, std::max(kBackoffMin, p.backoff * 2));
				p.hold_until = now + p.backoff;
			}
			op->cookie = 0;
			p.waiting.push_front(op);
			flush(op->addr);
			return;
		}
		err = ETIMEDOUT;	// a receiver that takes nothing for a minute
	}
	if (err) {
		// ECONNREFUSED (a shared connection's send to a port nobody
		// holds) says nothing of the connection, as EACCES and ERANGE.
		if (err != EACCES && err != ERANGE && err != ECONNREFUSED && !stale)
			forget_conn(addr, c.conn);
		if (op->h.kind != Kind::Fin && op->h.kind != Kind::Probe)
			complete_tx(op, fi_error_of(err));
		const std::uint32_t stream = op->h.session;
		const bool gap = in_stream(op);
		release(op);
		// Its number will not come: the receiver would hold every
		// later message of the stream for ever.
		if (err == ECONNREFUSED)
			refused(addr, stream);
		else if (gap)
			restart_stream(addr, stream);
	} else if (op->h.kind == Kind::Rts && !op->fin_seen) {
		p.backoff = std::chrono::microseconds{0};
		// Sent; the send completes with the receiver's Fin.
		domain->put_slot(op->slot);
		op->slot = -1;
		op->cookie = 0;
		op->rts_sent = now;
	} else {
		p.backoff = std::chrono::microseconds{0};
		if (op->h.kind == Kind::Eager || op->h.kind == Kind::Frag)
			complete_tx(op, 0);
		else if (op->h.kind == Kind::Rts)	// its Fin came first
			complete_tx(op, op->fin_status ? fi_error_of(op->fin_status) : 0);
		release(op);
	}
	flush(addr);
}

void Endpoint::on_message(std::uint32_t node, std::uint32_t conn, std::uint32_t port,
			  const std::uint8_t *msg, std::size_t len)
{
	std::optional<Header> h = decode(msg, len);
	if (!h) {
		if (!dropped++)
			MEFI_WARN("dropped a malformed message from node %u\n", node);
		return;
	}
	if (h->kind == Kind::Shm || node == domain->node) {
		dropped++;	// a file to pass: from this node's endpoints only
		return;
	}
	if (domain->shared) {
		// The module vouches for the node and, on a shared connection,
		// for the sending file's port: a header naming another endpoint
		// is not believed.  A message on a connection of another kind
		// (port 0: from a provider that does not use shared ones) is
		// not taken either, as its port is nobody's word.  Answers go
		// on this file's own shared connection to the node (the one
		// this came on, joined).
		if (h->port != port) {
			if (!dropped++)
				MEFI_WARN("dropped a message from node %u whose header names port "
					  "%u, not its sender's %u\n", node, h->port, port);
			return;
		}
		accept_in_order(make_addr(node, h->port), *h, msg, len);
		return;
	}
	// The module vouches for the node, the header names the endpoint.
	const Addr addr = make_addr(node, h->port);
	Peer &p = peers[addr];
	if (!p.conn)
		p.conn = conn;		// opened to our port: answers may use it
	accept_in_order(addr, *h, msg, len);
}

Endpoint::Endpoint(Domain *d, const fi_info *info, void *context)
	: domain(d), session(random_session()), max_unexpected(max_unexpected_param())
{
	h.self = this;
	h.fid.fid.fclass = FI_CLASS_EP;
	h.fid.fid.context = context;
	if (info && info->tx_attr)
		tx_op_flags = info->tx_attr->op_flags;
	if (info && info->rx_attr)
		rx_op_flags = info->rx_attr->op_flags;
	directed = info && (info->caps & FI_DIRECTED_RECV);
}

} // namespace mefi
