// Each sending endpoint's messages in order.  Every message carries a
// sequence number of its (sender, session) stream: the receiver delivers
// in that order, holding early ones and gathering a message's pieces, so
// a message the peer's full receive queue refused (ENOBUFS: the sender
// sends it again) or one that took another connection never overtakes,
// and one sent again after its connection ended (the peer may have it)
// is dropped if it came before.  A stream whose next number will never
// come (its endpoint gone, a message failed for good) starts again under
// a new session.
#include <algorithm>
#include <map>
#include <random>

#include "fabric/mefi.hpp"

namespace mefi {

namespace {

constexpr std::size_t kMaxHeld = 4096;	// early messages held per stream

} // namespace

std::uint32_t random_session()
{
	std::random_device rd;
	std::uint32_t s = 0;
	while (!s)
		s = rd();
	return s;
}

// Everything waiting for `addr` fails with `err` (it cannot be reached);
// the numbers they had are lost to the stream, which starts again.
void Endpoint::fail_peer(Addr addr, int err)
{
	Peer &p = peers[addr];
	bool gap = false;
	while (!p.waiting.empty()) {
		Op *op = p.waiting.front();
		p.waiting.pop_front();
		gap |= in_stream(op) && op->h.session == stream_session(p);
		complete_tx(op, err);
		release(op);
	}
	if (gap)
		restart_stream(addr, stream_session(p));
}

void Endpoint::restart_stream(Addr addr, std::uint32_t old)
{
	Peer &p = peers[addr];
	if (old != stream_session(p))
		return;		// restarted already
	std::uint32_t next;
	do
		next = random_session();
	while (next == old || next == session);
	p.session = next;
	p.tx_seq = 0;
	// The old stream's messages still waiting go in the new one, in
	// their order (the deque's may differ: refused ones went back to
	// its front), all but those the receiver may have already (sent
	// before, their connection ended: delivered twice otherwise) and the
	// pieces of a message that are not all here, from its first, in
	// turn (the others went, or are in the module, in the old stream).
	std::vector<Op *> moved;
	// By message in pieces: how many are waiting, then whether that is
	// all it has left (taken before any fails below).
	std::map<const Op::Pieces *, unsigned> all_here;
	for (Op *op : p.waiting)
		if (in_stream(op) && op->h.session == old) {
			moved.push_back(op);
			if (op->pieces)
				all_here[op->pieces.get()]++;
		}
	for (auto &[m, n] : all_here)
		n = n == m->left;
	std::stable_sort(moved.begin(), moved.end(), [](const Op *a, const Op *b) {
		return static_cast<std::int32_t>(a->h.seq - b->h.seq) < 0;
	});
	const bool local = is_local(addr);
	const Op *prev = nullptr;	// the last one kept
	for (Op *op : moved) {
		const bool whole = op->h.kind != Kind::Frag ||
				   (all_here[op->pieces.get()] &&
				    (!op->h.key || (prev && prev->pieces == op->pieces &&
						    prev->h.key + kEagerMax == op->h.key)));
		if (op->maybe_err || !whole) {
			p.waiting.erase(std::find(p.waiting.begin(), p.waiting.end(), op));
			complete_tx(op, fi_error_of(op->maybe_err ? op->maybe_err : ECONNRESET));
			release(op);
			continue;
		}
		op->h.seq = p.tx_seq++;
		op->h.session = next;
		encode(op->h, local ? op->local_msg.data()
				    : domain->slot_at(op->slot));
		prev = op;
	}
}

void Endpoint::refused(Addr addr, std::uint32_t old)
{
	// No endpoint of its node holds that port now (it closed): as when a
	// connection to it is refused, what waits for it fails, and so do its
	// rendezvous sends waiting for a Fin, which nobody will send (with a
	// connection of its own they would fail when it closed).
	fail_peer(addr, FI_ECONNREFUSED);
	restart_stream(addr, old);
	std::vector<Op *> lost;
	for (auto &[id, op] : rendezvous)
		if (op->addr == addr && !op->cookie && op->slot < 0)
			lost.push_back(op);
	for (Op *op : lost) {
		complete_tx(op, FI_ECONNREFUSED);
		release(op);
	}
}

void Endpoint::accept_in_order(Addr addr, const Header &h, const std::uint8_t *msg,
			       std::size_t len)
{
	if (h.kind == Kind::Probe) {
		deliver(addr, h, msg + kHeaderSize);	// outside the stream
		return;
	}
	Stream &s = streams[{addr, h.session}];
	if (h.seq != s.rx_seq) {
		if (static_cast<std::int32_t>(h.seq - s.rx_seq) > 0 && s.held.size() < kMaxHeld)
			s.held.emplace(h.seq, std::vector<std::uint8_t>(msg, msg + len));
		else
			dropped++;	// a duplicate, or too far ahead
		return;
	}
	take(s, addr, h, msg + kHeaderSize, len - kHeaderSize);
	s.rx_seq++;
	for (auto it = s.held.begin(); it != s.held.end() && it->first == s.rx_seq;
	     it = s.held.erase(it)) {
		std::optional<Header> early = decode(it->second.data(), it->second.size());
		take(s, addr, *early, it->second.data() + kHeaderSize,
		     it->second.size() - kHeaderSize);
		s.rx_seq++;
	}
}

// The next message of stream `s` in order: delivered, or gathered when it
// is a piece (Kind::Frag) until its message is whole.
void Endpoint::take(Stream &s, Addr addr, const Header &h, const std::uint8_t *payload,
		    std::size_t n)
{
	if (h.kind != Kind::Frag) {
		if (!s.gathered.empty()) {
			dropped++;	// a message whose sender gave up its pieces
			s.gathered.clear();
		}
		deliver(addr, h, payload);
		return;
	}
	const Header &f = s.first;
	if (h.key != s.gathered.size() ||
	    (h.key && (h.flags != f.flags || h.tag != f.tag || h.data != f.data || h.len != f.len))) {
		dropped++;	// not the piece that comes next
		s.gathered.clear();
		if (h.key)
			return;
	}
	if (!h.key)
		s.first = h;
	s.gathered.insert(s.gathered.end(), payload, payload + n);
	if (s.gathered.size() < h.len)
		return;
	Header whole = s.first;
	whole.kind = Kind::Eager;
	whole.key = 0;
	std::vector<std::uint8_t> message;
	message.swap(s.gathered);
	deliver(addr, whole, message.data());
}

} // namespace mefi
