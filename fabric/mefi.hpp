// libmultiedge-fi: multiedge as a libfabric provider (FI_EP_RDM, FI_MSG and
// FI_TAGGED; FI_RMA and FI_ATOMIC with raw keys).  Documentation/libfabric.md
// says what it offers and how it maps onto the module; this header is what
// its files share.
//
// Objects: one open /dev/multiedge per domain (regions, connections and
// completions belong to an open file, so everything a domain posts shares
// it), bound to a port of the node (the endpoint's address is node and
// port), one endpoint per domain.  Endpoints of one node reach each other
// through a datagram socket of their own (local.cpp): the module connects
// nodes, not a node to itself.  Progress is manual: completion queue reads
// and posts drive it, under the domain's lock (FI_THREAD_SAFE).
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_eq.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <rdma/providers/fi_log.h>
#include <rdma/providers/fi_prov.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "multiedge.h"

namespace mefi {

extern fi_provider provider;

// The provider's parameters (libfabric reads them from FI_MULTIEDGE_*):
// defined once when libfabric loads the provider.
void define_params();
// Bytes of unexpected messages an endpoint holds before it stops taking
// more from the module and its node's sockets (FI_MULTIEDGE_MAX_UNEXPECTED).
std::size_t max_unexpected_param();
// Whether to use the module's sends of several packets when it has them
// (FI_MULTIEDGE_LARGE_SENDS, default 1).
bool large_sends_param();
// Whether sends and writes that are waited for ask for a prompt ack when
// the module has ME_POST_F_ACK_NOW (FI_MULTIEDGE_ACK_NOW, default 1).
bool ack_now_param();
constexpr std::size_t kMaxUnexpectedDefault = std::size_t{64} << 20;

#define MEFI_WARN(...) FI_WARN(&mefi::provider, FI_LOG_CORE, __VA_ARGS__)

// A libfabric object: the C struct libfabric sees, first, then the C++
// object behind it (standard layout: a pointer to the struct is one to
// the handle).
template <typename Fid, typename Self> struct Handle {
	Fid fid{};
	Self *self = nullptr;
};

template <typename Self, typename Fid> Self *self_of(Fid *f)
{
	// The generic struct fid is only the start of the object's own.
	static_assert(!std::is_same_v<Fid, fid>, "cast to the object's fid_* type first");
	return reinterpret_cast<Handle<Fid, Self> *>(f)->self;
}

// An endpoint: its node and the port its domain's file is bound to
// (ME_IOC_BIND), as one number; 0 names nobody.
using Addr = std::uint64_t;
constexpr Addr make_addr(std::uint32_t node, std::uint16_t port)
{
	return static_cast<Addr>(node) << 16 | port;
}
constexpr std::uint32_t addr_node(Addr a) { return static_cast<std::uint32_t>(a >> 16); }
constexpr std::uint16_t addr_port(Addr a) { return static_cast<std::uint16_t>(a); }

// An endpoint's name: "fi_me://<node>:<port>" (FI_ADDR_STR); without a
// port ("fi_me://<node>") it names the node only, as fi_getinfo's source
// address before an endpoint has a port.
constexpr std::size_t kAddrLen = 32;
std::string addr_string(Addr a);
// The address a name gives (port 0 when it has none), or nullopt when it
// is not one of ours.
std::optional<Addr> parse_addr(const void *addr, std::size_t len);
// A port given as a service name ("5001"), or nullopt (not 1..65535).
std::optional<std::uint16_t> parse_port(const char *service);

// What one message of the provider carries in front of its payload, in a
// multiedge send (at most ME_SEND_MAX bytes, ME_SEND_MAX_VER0 before ABI
// 26).  Little-endian on the wire.
enum class Kind : std::uint8_t {
	Eager = 1,	// the whole message follows
	Rts = 2,	// ready to send: read [0, len) of region/key, then Fin
	Fin = 3,	// the receiver is done with an Rts's region
	Shm = 4,	// same node only: the message is the file passed with it
	Frag = 5,	// a piece of an eager message of up to kFragMax bytes
			// (key: its offset), in consecutive sequence numbers
	Probe = 6,	// does the receiver still hold Rts `id`?  If not, its Fin
			// answers with ECONNRESET
};

constexpr std::uint8_t kFlagTagged = 1u << 0;
constexpr std::uint8_t kFlagData = 1u << 1;	// carries remote CQ data

struct Header {
	Kind kind = Kind::Eager;
	std::uint8_t flags = 0;
	std::uint32_t seq = 0;		// per (sender, receiver), from 0
	std::uint64_t tag = 0;
	std::uint64_t data = 0;		// remote CQ data
	std::uint64_t len = 0;		// Eager: payload; Rts, Frag: whole message
	std::uint32_t region = 0;	// Rts
	std::uint64_t key = 0;		// Rts; Frag: the piece's offset
	std::uint64_t id = 0;		// Rts, Fin: the sender's operation
	std::int32_t status = 0;	// Fin: 0 or a positive errno
	std::uint32_t session = 0;	// the sending endpoint's, random
	std::uint16_t port = 0;		// the sending endpoint's port, nonzero
};

constexpr std::size_t kHeaderSize = 64;
// The payload of one send from a small slot, and the most FI_INJECT takes.
constexpr std::size_t kEagerMax = ME_SEND_MAX_VER0 - kHeaderSize;
// A module that takes sends of several packets (ABI 26, Domain::send_large)
// carries a message of up to kLargeEagerMax bytes in one send, from a large
// slot: one operation each way instead of pieces, or a rendezvous's
// registrations and round trips.
constexpr std::size_t kLargeSlot = 16384;
constexpr std::size_t kLargeEagerMax = kLargeSlot - kHeaderSize;
static_assert(kLargeSlot <= ME_SEND_MAX);
// Without it, messages up to this size go eager in pieces of kEagerMax
// (Kind::Frag) rather than by rendezvous (an Rts, a read's round trip, a
// Fin and four registrations).  Each piece is a send of its own, so pieces
// win only while they are few: fi_pingpong between two namespaces (TCG)
// took 470, 403, 660, 1263 us at 1, 2, 4, 8 KiB in pieces, 812, 701, 721,
// 631 us by rendezvous.
constexpr std::size_t kFragMax = 4096;

void encode(const Header &h, std::uint8_t *out);
// Parses and checks a received message; nullopt when it is malformed.
std::optional<Header> decode(const std::uint8_t *in, std::size_t len);

// fi_domain(): opens the device for a new domain (domain.cpp).
int domain_open(fid_fabric *fabric, fi_info *info, fid_domain **dom, void *context);
// fi_eq_open() (eq.cpp).
int eq_open(fid_fabric *fabric, fi_eq_attr *attr, fid_eq **eq, void *context);

// A region's remote key as fi_mr_raw_attr gives it (FI_MR_RAW): the
// module's region id and 64-bit key, little-endian, 4 zero bytes between.
constexpr std::size_t kRawKeySize = 16;
void encode_raw_key(std::uint32_t region, std::uint64_t key, std::uint8_t *out);
// The region and key of a raw key, or nullopt when it is not one.
std::optional<std::pair<std::uint32_t, std::uint64_t>> decode_raw_key(const std::uint8_t *in,
								       std::size_t len);

// Maps a positive errno from the module to a libfabric error (positive).
int fi_error_of(int err);

// An open file descriptor, closed with its owner.
class Fd {
public:
	Fd() = default;
	explicit Fd(int fd) : fd_(fd) {}
	Fd(Fd &&o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
	Fd &operator=(Fd &&o) noexcept;
	Fd(const Fd &) = delete;
	Fd &operator=(const Fd &) = delete;
	~Fd();
	int get() const { return fd_; }
	explicit operator bool() const { return fd_ >= 0; }

private:
	int fd_ = -1;
};

// The same-node path (local.cpp): the datagram socket of the endpoint at
// `a`, bound under an abstract name of the network namespace, so only an
// endpoint of this node holding that port's module binding names it.
constexpr std::size_t kLocalInlineMax = 32768;	// larger ones go as Shm
std::string local_name(Addr a);

class Domain;
class Endpoint;

// fid_fabric: holds nothing but its event queues' factory.
class Fabric {
public:
	explicit Fabric(void *context);
	Handle<fid_fabric, Fabric> h;
};

// fid_eq: events written by the application (RDM endpoints raise none).
class EventQueue {
public:
	EventQueue(Fabric *fabric, const fi_eq_attr &attr, void *context);
	Handle<fid_eq, EventQueue> h;

	struct Event {
		std::uint32_t type;
		std::vector<std::uint8_t> data;
		bool error;
	};
	std::mutex mu;
	std::condition_variable cv;
	std::deque<Event> events;
};

// fid_av: endpoint addresses by fi_addr_t (FI_AV_TABLE: indices;
// FI_AV_MAP: the Addr itself).
class AddressVector {
public:
	AddressVector(Domain *d, fi_av_type type, void *context);
	Handle<fid_av, AddressVector> h;
	Domain *domain;
	fi_av_type type;
	std::vector<Addr> table;	// FI_AV_TABLE; 0: removed

	std::optional<Addr> lookup(fi_addr_t a) const;
	fi_addr_t addr_of(Addr a) const;
};

// What a completion queue hands out, in the largest format.
struct Entry {
	fi_cq_tagged_entry e{};
	fi_addr_t src = FI_ADDR_NOTAVAIL;
	int err = 0;			// positive libfabric error; 0: success
	std::size_t olen = 0;		// FI_ETRUNC: bytes that did not fit
};

// fid_cq.  Entries are produced by its domain's progress.
class CompletionQueue {
public:
	CompletionQueue(Domain *d, const fi_cq_attr &attr, void *context);
	Handle<fid_cq, CompletionQueue> h;
	Domain *domain;
	fi_cq_format format;
	fi_wait_obj wait;
	std::deque<Entry> done;		// guarded by the domain's lock
	std::deque<Entry> errors;
	bool signalled = false;

	void push(Entry e);
};

// fid_cntr: the completions of the kinds of operation it is bound for
// (fi_ep_bind: FI_SEND, FI_RECV, FI_READ, FI_WRITE), successful ones in
// `value` and failed ones in `errors`, whether or not they give a CQ
// entry.  The endpoint counts them as it completes operations (cntr.cpp).
class Counter {
public:
	Counter(Domain *d, const fi_cntr_attr &attr, void *context);
	Handle<fid_cntr, Counter> h;
	Domain *domain;
	fi_wait_obj wait;
	std::uint64_t value = 0, errors = 0;	// guarded by the domain's lock
	// What the application saw last (a read, or fi_trywait): fi_trywait
	// tells it to look again when the counter moved since.
	std::uint64_t seen = 0, seen_errors = 0;

	void count(int err) { (err ? errors : value)++; }
	// Whether the counter moved since the application saw it; it has now.
	bool moved();
};

// fid_mr: a region registered on the domain's file.
class MemoryRegion {
public:
	MemoryRegion(Domain *d, const void *buf, std::size_t len, void *context);
	Handle<fid_mr, MemoryRegion> h;
	Domain *domain;
	const std::uint8_t *addr;
	std::size_t len;
	std::uint32_t region = 0;	// 0 for length 0: nothing registered
	std::uint64_t key = 0;
	std::uint64_t access = 0;	// FI_REMOTE_READ / FI_REMOTE_WRITE granted

	bool covers(const void *buf, std::size_t n) const;
};

// A region the provider registered for one operation; deregistered when
// it goes.  `copy` holds the bytes when the caller's memory could not be
// registered (read-only pages).
class TempRegion {
public:
	TempRegion() = default;
	TempRegion(const TempRegion &) = delete;
	TempRegion &operator=(const TempRegion &) = delete;
	~TempRegion();
	// Registers [buf, +len) with `access`; for a read-only send buffer,
	// a copy of it (always a copy with `copy_always`: the caller may
	// reuse the buffer at once).  Returns 0 or a positive errno.
	int make(Domain *d, const void *buf, std::size_t len, std::uint32_t access,
		 bool may_copy, bool copy_always = false);

	Domain *domain = nullptr;
	std::uint32_t region = 0;
	std::uint64_t key = 0;
	std::unique_ptr<std::uint8_t[], void (*)(void *)> copy{nullptr, nullptr};
};

// A receive buffer posted with FI_MULTI_RECV (fi_recvmsg): messages are
// placed in it one after another, each at an 8-byte boundary, until less
// than the endpoint's min_multi_recv is left.  Then it is released: the
// completion of the last message placed in it says so (FI_MULTI_RECV),
// the last to finish when rendezvous reads into it were still running.
struct MultiRecv {
	std::size_t used = 0;		// bytes taken from the buffer's start
	unsigned pending = 0;		// messages placed and not yet completed
	bool released = false;		// takes no more messages
};

// A posted receive (or a peek or claim) waiting for its message.
struct RecvRequest {
	bool tagged = false;
	std::uint8_t *buf = nullptr;
	std::size_t len = 0;
	MemoryRegion *mr = nullptr;	// the caller's desc, if it covers buf
	Addr src = 0;			// 0: any
	std::uint64_t tag = 0, ignore = 0;
	void *context = nullptr;
	std::uint64_t flags = 0;	// FI_COMPLETION and the like
	// FI_MULTI_RECV: the buffer's state, shared by the request and the
	// slices of it that messages were placed in.
	std::shared_ptr<MultiRecv> multi;
};

// A message that came before its receive: an Eager one's bytes, or an
// Rts to answer later.
struct Unexpected {
	Header h;
	Addr addr = 0;			// its sender
	std::vector<std::uint8_t> payload;
	void *claimed_by = nullptr;	// FI_CLAIM's context
};

// One operation posted to the module; its cookie is its address.
struct Op {
	// Send: a provider message; Read: a rendezvous read; Rma: the
	// application's fi_read/fi_write; Atomic: one of its fi_*atomic*.
	enum class Type { Send, Read, Rma, Atomic } type = Type::Send;
	std::uint64_t cookie = 0;	// the module's completion names it
	Addr addr = 0;			// the peer endpoint
	int slot = -1;			// bounce slot of a Send
	std::uint32_t send_len = 0;
	Header h;			// what a Send carries
	// The user's side: whom to tell, how.
	void *context = nullptr;
	std::uint64_t cq_flags = 0;	// FI_SEND | FI_TAGGED ...
	bool report = true;		// a completion is wanted
	// Someone waits for it to complete (a CQ entry or a counter), and its
	// completion is the module's: posted with ME_POST_F_ACK_NOW.
	bool waited = false;
	// A piece of a fragmented eager send: the pieces still to complete
	// and the first error, shared; the last one completes the send.
	struct Pieces {
		unsigned left = 0;
		int err = 0;
	};
	std::shared_ptr<Pieces> pieces;
	// Rendezvous: the sender's registered buffer, waiting for a Fin;
	// the receiver's read and the request it fills.
	std::unique_ptr<TempRegion> temp;
	// The connection a Send or an Rma was last posted on: a rendezvous
	// send waiting for its Fin fails when that connection ends.
	std::uint32_t conn = 0;
	std::size_t user_len = 0;
	RecvRequest req;
	std::chrono::steady_clock::time_point refused{};	// first ENOBUFS
	// Its connection ended after it left (ETIMEDOUT, ECONNRESET,
	// ECONNABORTED): the peer may have it.  The error, kept for when it
	// is given up, and how often it was sent again under its number.
	int maybe_err = 0;
	unsigned resent = 0;
	bool fin_seen = false;		// an Rts's Fin came before its completion
	std::chrono::steady_clock::time_point rts_sent{};	// its Rts's completion
	int fin_status = 0;
	// To an endpoint of this node: the datagram (header, inline payload)
	// and, for Kind::Shm, the file holding the message.
	std::vector<std::uint8_t> local_msg;
	Fd local_file;
	// Atomic: its slot of the domain's atomic buffer, the operand's size
	// and where a fetching one puts the value found (null: discarded).
	int atomic_slot = -1;
	std::uint32_t atomic_size = 0;
	void *result = nullptr;
};

// One atomic operation as the fi_*atomic* calls give it (atomic.cpp).
struct AtomicRequest {
	enum class Kind {
		Base,		// fi_atomic: the value found is not wanted
		Fetch,		// fi_fetch_atomic: it is, into `result`
		Compare,	// fi_compare_atomic: FI_CSWAP, with `compare`
	} kind = Kind::Base;
	fi_datatype datatype = FI_INT32;
	fi_op op = FI_SUM;
	std::size_t count = 1;		// elements; only 1 is taken
	const void *buf = nullptr;	// the operand (ignored by FI_ATOMIC_READ)
	const void *compare = nullptr;
	void *result = nullptr;
	fi_addr_t dest = 0;
	std::uint64_t addr = 0;		// offset into the remote region
	std::uint64_t key = 0;		// a fi_mr_map_raw key
	std::uint64_t flags = 0;
	void *context = nullptr;
};

// Whether the provider does `op` on `datatype` in calls of `kind`: 0 and
// the module's operation (ME_ATOMIC_*) and the operand's size, or
// -FI_EOPNOTSUPP.  One element per call: the valid queries say count 1.
int atomic_op(AtomicRequest::Kind kind, fi_datatype datatype, fi_op op, std::uint32_t *aop,
	      std::uint32_t *size);
// fi_query_atomic of a domain whose module has atomics.
int query_atomic(fi_datatype datatype, fi_op op, fi_atomic_attr *attr, std::uint64_t flags);

// What the provider knows of one peer endpoint, as a destination.
struct Peer {
	// A connection of the file to it, without shared connections (with
	// them, the domain's connection to its node: Domain::node_conns).
	std::uint32_t conn = 0;
	std::uint32_t tx_seq = 0;	// next to send
	std::deque<Op *> waiting;	// sends not yet given to the module
	unsigned inflight = 0;		// sends the module holds
	// After a refusal (ENOBUFS) nothing is posted to it before this; the
	// pause doubles while refusals go on (a receiver that takes nothing
	// is not flooded with resends) and ends at the first success.
	std::chrono::steady_clock::time_point hold_until{};
	std::chrono::microseconds backoff{0};
	// When its rendezvous were last asked after (a Probe).
	std::chrono::steady_clock::time_point probed{};
	// The session of this endpoint's stream to it (0: the endpoint's
	// own).  A new one, from sequence number 0, once the endpoint that
	// held its port was found gone: a new endpoint there starts with no
	// stream and would hold the old one's next message for ever.
	std::uint32_t session = 0;
};

// A stream's session: random, never 0 (stream.cpp).
std::uint32_t random_session();

// Messages of one sending endpoint (address, session), delivered in order.
struct Stream {
	std::uint32_t rx_seq = 0;	// next to deliver
	std::map<std::uint32_t, std::vector<std::uint8_t>> held;  // early ones
	// The pieces so far of a fragmented message (Kind::Frag) and its
	// first piece's header; empty between messages.
	std::vector<std::uint8_t> gathered;
	Header first;
};

class Domain {
public:
	Domain(Fabric *fabric, int fd, std::uint32_t node, std::uint16_t port, void *context);
	~Domain();
	Handle<fid_domain, Domain> h;
	Fabric *fabric;
	const int fd;
	const std::uint32_t node;
	const Addr self;		// the node and the port its file is bound to
	// The module takes ME_POST_F_MORE (ABI 15): sends queued for a peer
	// are posted as one batch, small ones packed several to a frame.
	bool post_more = false;
	// The module has shared connections (ABI 18): one connection per peer
	// node carries every endpoint of both nodes (sends name the
	// destination's port, receives say the sender's), instead of one per
	// pair of endpoints, which the module limits to 64 from one node.
	bool shared = false;
	// With `shared`: the shared connection this file joined to each peer
	// node (ME_CONNECT_F_SHARED), by node; absent: none yet, or it ended.
	std::unordered_map<std::uint32_t, std::uint32_t> node_conns;
	// Nodes a connect waited for in vain (the module did not know them):
	// the next connect to one fails at once, until one succeeds.
	std::unordered_set<std::uint32_t> unknown_nodes;
	std::recursive_mutex mu;
	Endpoint *ep = nullptr;
	int refs = 0;			// AVs, CQs, counters, MRs, endpoints open on it
	// The cookies of the module's operations, for every endpoint the
	// domain has had: operations of a closed endpoint still complete into
	// the file, and must never be taken for a later endpoint's.
	std::uint64_t next_cookie = 1;

	// Sends leave from bounce slots of one registered buffer: kSlots of
	// ME_SEND_MAX_VER0 bytes, then, with send_large, kLargeSlots of
	// kLargeSlot bytes (numbered from kSlots on).
	static constexpr unsigned kSlots = 1024;
	static constexpr unsigned kLargeSlots = 64;
	std::uint8_t *bounce = nullptr;
	std::uint32_t bounce_region = 0;
	std::vector<int> free_slots;
	std::vector<int> free_large;
	// The module takes sends of up to ME_SEND_MAX (ABI 26).
	bool send_large = false;
	// The module takes ME_POST_F_ACK_NOW (ABI 27): a send or write whose
	// completion the application waits for is acked at once by the peer,
	// not held for a reply (an MPI_Send above inject_size returns only
	// at its completion, and the reply comes after what follows it).
	bool ack_now = false;
	// Where slot `slot` lies in the bounce buffer.
	static std::size_t slot_off(int slot)
	{
		const auto s = static_cast<std::size_t>(slot);
		return s < kSlots ? s * ME_SEND_MAX_VER0
				  : kSlots * ME_SEND_MAX_VER0 + (s - kSlots) * kLargeSlot;
	}
	std::uint8_t *slot_at(int slot) const { return bounce + slot_off(slot); }
	// A free slot for a send of `len` bytes (one is: the caller looked).
	int take_slot(std::size_t len);
	void put_slot(int slot);
	// What ME_IOC_RECV takes messages into (grown for the longest one
	// yet), and whether a progress() is using it.
	std::vector<std::uint8_t> recv_buf;
	bool receiving = false;
	// Remote regions by the key fi_mr_map_raw handed out (index + 1);
	// region 0: unmapped.
	std::vector<std::pair<std::uint32_t, std::uint64_t>> mapped;
	// This domain's own regions by id (RMA to the endpoint itself).
	std::unordered_map<std::uint32_t, MemoryRegion *> mrs;

	// The module applies remote atomic operations (ABI 19,
	// ME_FEATURE_ATOMIC): FI_ATOMIC is offered (atomic.cpp).  Each one
	// in flight has a slot of kAtomicSlotSize bytes in one registered
	// buffer: the operand (and FI_CSWAP's compare value after it) is
	// copied in before posting, the module reads them from there and
	// writes the value it found over the operand before it completes the
	// atomic, which copies it out.  So the caller's buffers need no
	// registration.  No free slot: the post answers -FI_EAGAIN.
	bool atomics = false;
	static constexpr unsigned kAtomicSlots = 256;
	static constexpr std::size_t kAtomicSlotSize = 16;
	std::uint8_t *atomic_buf = nullptr;
	std::uint32_t atomic_region = 0;
	std::vector<int> free_atomic_slots;
	// The module's loopback (ABI 20): RMA and atomics to another endpoint
	// of this node go through it (ME_CONN_LOOPBACK); without it they
	// answer -FI_EOPNOTSUPP.
	bool loopback = false;

	int init_bounce();
	int init_atomics();
	// Drains the module's completions and messages.  Domain lock held.
	void progress();

	// Same node (local.cpp): this endpoint's socket, and what blocking
	// reads sleep on: an epoll set of the device and the socket.
	Fd local;
	Fd wait_set;
	// fi_control(FI_GETWAIT) of a CQ or counter waiting with `wait_obj`:
	// the wait set's fd into `arg`, or -FI_EINVAL.
	int get_wait(int wait_obj, void *arg) const;
	std::vector<std::uint8_t> local_buf;	// one datagram
	int init_local();
	void drain_local();
	// The wait set wakes for messages too (false: completions only).
	bool waits_for_messages = false;
	void wait_for_messages(bool want);
	// Counters (cntr.cpp): an eventfd in the wait set, written when the
	// application changes a counter (fi_cntr_add, fi_cntr_set...) so that
	// whoever sleeps on the set looks again; progress empties it.
	Fd wake;
	bool woken = false;		// `wake` was written and not emptied
	int init_wake();
	void wake_waiters();
	void drain_wake();
};

// fid_ep (FI_EP_RDM).
class Endpoint {
public:
	Endpoint(Domain *d, const fi_info *info, void *context);
	~Endpoint();
	Handle<fid_ep, Endpoint> h;
	Domain *domain;
	AddressVector *av = nullptr;
	CompletionQueue *tx_cq = nullptr, *rx_cq = nullptr;
	bool tx_selective = false, rx_selective = false;
	// The counter bound for each kind of operation (fi_ep_bind); null:
	// none.  A peer's reads and writes of this domain's regions are the
	// module's and are not seen here: nothing counts them.
	Counter *send_cntr = nullptr, *recv_cntr = nullptr;
	Counter *read_cntr = nullptr, *write_cntr = nullptr;
	bool binds(const Counter *c) const
	{
		return c == send_cntr || c == recv_cntr || c == read_cntr || c == write_cntr;
	}
	bool enabled = false;
	bool directed = false;		// FI_DIRECTED_RECV: receives name a source
	// FI_OPT_MIN_MULTI_RECV: an FI_MULTI_RECV buffer with less than this
	// left is released.  By default an eager message's size.
	std::size_t min_multi_recv = kEagerMax;
	std::uint64_t tx_op_flags = 0, rx_op_flags = 0;

	const std::uint32_t session;	// names this endpoint's streams
	std::unordered_map<Addr, Peer> peers;
	std::map<std::pair<Addr, std::uint32_t>, Stream> streams;	// by (sender, session)
	std::list<RecvRequest> posted_msg, posted_tagged;
	std::list<Unexpected> unexpected;
	// What `unexpected` holds, payloads and entries; at max_unexpected
	// the domain takes no more messages (they wait in the module's queue,
	// whose refusals make senders wait and resend).
	std::size_t unexpected_bytes = 0, max_unexpected;
	bool unexpected_full() const { return unexpected_bytes >= max_unexpected; }
	void drop_unexpected(std::list<Unexpected>::iterator it);
	std::unordered_map<std::uint64_t, Op *> posted;		// by cookie
	std::unordered_map<std::uint64_t, Op *> rendezvous;	// sends by Rts id
	std::deque<Op *> reads;		// rendezvous reads the module refused (full)
	struct Fin {
		Addr addr;
		std::uint64_t id;
		int status;
	};
	std::deque<Fin> fins;		// Fins waiting for a send slot
	std::uint64_t next_id = 1;
	std::uint64_t dropped = 0;	// malformed or duplicate messages

	// Posting (domain lock held by the callers in ep.cpp).
	ssize_t send(const void *buf, std::size_t len, void *desc, fi_addr_t dest,
		     std::uint64_t tag, std::uint64_t data, std::uint64_t flags, bool tagged,
		     void *context);
	ssize_t recv(void *buf, std::size_t len, void *desc, fi_addr_t src, std::uint64_t tag,
		     std::uint64_t ignore, std::uint64_t flags, bool tagged, void *context);
	ssize_t cancel(void *context);
	// fi_read (read) or fi_write/fi_writedata: [buf, +len) and the
	// remote region `key` (a fi_mr_map_raw key) at offset `addr`.
	ssize_t rma(bool read, void *buf, std::size_t len, void *desc, fi_addr_t dest,
		    std::uint64_t addr, std::uint64_t key, std::uint64_t data, std::uint64_t flags,
		    void *context);
	// fi_atomic, fi_fetch_atomic, fi_compare_atomic and their forms: one
	// element onto the remote region `r.key` at offset `r.addr`.
	ssize_t atomic(const AtomicRequest &r);

	// Progress hooks.
	// A message the module delivered from `node` on connection `conn`;
	// `port`: the sending file's port when it came on a shared connection
	// (the module's word for it), else 0.
	void on_message(std::uint32_t node, std::uint32_t conn, std::uint32_t port,
			const std::uint8_t *msg, std::size_t len);
	// A datagram from endpoint `from` of this node (local.cpp) and the
	// files that came with it (closed with the vector, whatever it is).
	void on_local_message(Addr from, const std::uint8_t *msg, std::size_t len,
			      const std::vector<Fd> &files);
	void on_completion(const me_completion &c);
	// Posts what waited for room (window, slots, the module's queues),
	// and asks after overdue rendezvous.
	void retry();

private:
	// The checks every post makes: enabled, a buffer for its length, a
	// known destination (its node out), a length the module takes.
	ssize_t check_post(const void *buf, std::size_t len, fi_addr_t dest,
			   std::optional<Addr> &addr) const;
	// Whether a successful transmit with `flags` gets a completion.
	bool wants_tx_completion(std::uint64_t flags) const;
	void deliver(Addr addr, const Header &h, const std::uint8_t *payload);
	void fulfil(RecvRequest &r, Addr addr, const Header &h,
		    const std::uint8_t *payload);
	void start_read(const RecvRequest &r, Addr addr, const Header &h);
	bool post_read(Op *op);
	void fail_peer(Addr addr, int err);
	// A send's completion said no endpoint holds that port at its node.
	void refused(Addr addr, std::uint32_t session);
	// The session of this endpoint's stream to peer `p`.
	std::uint32_t stream_session(const Peer &p) const { return p.session ? p.session : session; }
	// If `session` is still the stream's to `addr`, the stream starts
	// again (a new session from 0): the endpoint there is gone, or a
	// message of it failed and its number will never come.  The sends
	// waiting for `addr` take numbers in the new one.
	void restart_stream(Addr addr, std::uint32_t session);
	// Whether a Send op carries a number of its stream (a Probe does not).
	static bool in_stream(const Op *op) { return op->h.kind != Kind::Probe; }
	bool matches(const RecvRequest &r, Addr addr, const Header &h) const;
	// The part of FI_MULTI_RECV buffer `r` that a message of `len` bytes
	// goes to, taken from it (r.multi->released says whether `r` is done).
	RecvRequest multi_slice(RecvRequest &r, std::size_t len) const;
	void flush(Addr addr);
	// Same node (local.cpp).
	bool is_local(Addr a) const;
	ssize_t local_send(std::unique_ptr<Op> op, const void *buf, std::size_t len);
	void flush_local(Addr to, Peer &p);
	// In order per (sender, session): delivers or holds a checked message.
	void take(Stream &s, Addr addr, const Header &h, const std::uint8_t *payload,
		  std::size_t n);
	void accept_in_order(Addr from, const Header &h, const std::uint8_t *msg,
			     std::size_t len);
	// The connection posts to `addr` go on (0: none yet); connect() opens
	// or joins it, forget_conn() drops it if it is still `conn` (it ended
	// or cannot be used: the next post connects again).
	std::uint32_t conn_to(Addr addr);
	int connect(Addr addr);
	void forget_conn(Addr addr, std::uint32_t conn);
	// Posts `m` to `addr`, connecting first when there is no connection
	// and once more when it ended; 0 or a positive errno.
	int post_to(Addr addr, me_post &m);
	ssize_t send_pieces(std::unique_ptr<Op> whole, const std::uint8_t *buf, std::size_t len);
	ssize_t queue_send(Addr addr, Op *op, const std::uint8_t *payload,
			   std::size_t n);
	void send_fin(Addr addr, std::uint64_t id, int status);
	// Rendezvous sends whose Fin is overdue: ask each receiver after the
	// oldest (a Probe), at most every kProbeEvery per receiver.
	void probe_rendezvous();
	// Whether an Rts `id` from `addr` is still this endpoint's to finish.
	bool holds_rts(Addr addr, std::uint64_t id) const;
	void complete_tx(Op *op, int err);
	void complete_rx(const RecvRequest &r, Addr addr, const Header &h,
			 std::size_t got, int err, std::size_t olen);
	void release(Op *op);
	void peek(const RecvRequest &r);
	ssize_t rma_local(bool read, void *buf, std::size_t len, std::uint32_t region,
			  std::uint64_t key, std::uint64_t addr, std::uint64_t data,
			  std::uint64_t flags, void *context);
	void complete_rma(void *context, bool read, bool report, int err);
	ssize_t atomic_local(const AtomicRequest &r, std::uint32_t aop, std::uint32_t size,
			     std::uint32_t region, std::uint64_t key, bool report);
	// An atomic is done: its counter, its CQ entry (FI_ATOMIC and
	// FI_READ when it fetched, else FI_WRITE).
	void complete_atomic(void *context, bool fetch, bool report, int err);
	// The module's completion of an atomic (ME_CQ_ATOMIC).
	void atomic_done(Op *op, int err);
};

} // namespace mefi
