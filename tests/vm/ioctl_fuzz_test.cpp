// The ioctl and io_uring doors under random and mutated arguments (issue
// 13).  For ME_FUZZ_SECONDS (default 15) a sequence of forked child
// processes throws every command, and unknown ones, at /dev/multiedge:
// valid arguments mutated byte by byte, sizes around and far from each
// struct's, user pointers that are NULL, unmapped, read-only, kernel
// addresses, non-canonical or misaligned; receive areas of every shape
// (partly unmapped, made read-only, unmapped while registered, regions
// registered past their end); IORING_OP_URING_CMD submissions with random
// cmd_op and mutated command bytes on rings of every SQE/CQE size, some
// torn down with commands in flight.  Each child has a file in both nodes
// of a pair, a connection each way and both joined to the pair's shared
// connection (ABI 18), so posts really run and the peer's writes, read
// responses and message copies land where the fuzzed registrations say.
//
// Why children: the kernel and the peer write wherever the arguments point.
// A child keeps everything the fuzzed calls may name in one "arena" it
// maps for the purpose (scratch, read-only and PROT_NONE pages, area
// slots, a PROT_NONE tail), and folds every user pointer the kernel would
// write through into it, so neither its own heap nor stack, let alone the
// test process, can be hit.  The child streams one record per call through
// a pipe; the parent (this gtest process) requires every errno to be one
// the uapi header documents for that command, every child to exit
// normally (or by the one signal it announced it would send itself), the
// module's accounting to return to idle after each child, and the kernel
// log to stay clean (here per child, and guest_main for the whole test).
//
// The seed is printed; ME_TEST_SEED repeats the children's choices (the
// kernel's answers, and so the rest, depend on timing).  ME_FUZZ_TRACE=1
// makes the children print every call before making it.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "cluster.hpp"
#include "kmsg.hpp"
#include "module_util.hpp"
#include "uapi/multiedge.h"

using namespace metest;
using namespace std::chrono_literals;

namespace {

constexpr size_t kPage = 4096;
constexpr size_t MiB = size_t{1} << 20;

// ---- the whole run and each child ----

int fuzz_seconds()
{
	const char *s = std::getenv("ME_FUZZ_SECONDS");
	int v = s ? std::atoi(s) : 0;
	return v > 0 ? v : 15;
}

// Each child fuzzes for a slice of the run: a few children in `make test`,
// dozens in `make fuzz`; every exit (normal, after closing, killed) with
// work in flight is part of the test.
double child_seconds(int total)
{
	return std::clamp(total / 4.0, 2.0, 10.0);
}

// ---- the commands and what the uapi header says they may fail with ----

struct Command {
	const char *name;
	uint32_t cmd;
	uint32_t size;	// sizeof its struct
	uint32_t ver0;	// its first published size
	std::set<int> errors;	// documented for it, besides the common ones
};

// Errors common to every command (uapi header); -ENOTTY is for unknown
// commands only, so it is not among them.
const std::set<int> kCommon = {EFAULT, EINVAL, E2BIG};

const std::vector<Command> kCommands = {
	{"QUERY", ME_IOC_QUERY, sizeof(me_query), ME_QUERY_SIZE_VER0, {}},
	{"LINK_ATTACH", ME_IOC_LINK_ATTACH, sizeof(me_link_req), ME_LINK_REQ_SIZE_VER0,
	 {EPERM, EOPNOTSUPP, ENODEV, EEXIST, ENOSPC, EMSGSIZE}},
	{"LINK_DETACH", ME_IOC_LINK_DETACH, sizeof(me_link_req), ME_LINK_REQ_SIZE_VER0,
	 {EPERM, EOPNOTSUPP, ENOENT}},
	{"LINK_LIST", ME_IOC_LINK_LIST, sizeof(me_link_list), ME_LINK_LIST_SIZE_VER0, {}},
	{"MR_REG", ME_IOC_MR_REG, sizeof(me_mr_reg), ME_MR_REG_SIZE_VER0,
	 {EOPNOTSUPP, ENOMEM, ENOSPC}},
	{"MR_DEREG", ME_IOC_MR_DEREG, sizeof(me_mr_dereg), ME_MR_DEREG_SIZE_VER0, {ENOENT}},
	{"PEER_LIST", ME_IOC_PEER_LIST, sizeof(me_peer_list), ME_PEER_LIST_SIZE_VER0, {}},
	{"NBR_LIST", ME_IOC_NBR_LIST, sizeof(me_nbr_list), ME_NBR_LIST_SIZE_VER0, {}},
	{"CONNECT", ME_IOC_CONNECT, sizeof(me_connect), ME_CONNECT_SIZE_VER0,
	 {EOPNOTSUPP, ECONNREFUSED, ENETDOWN, EHOSTUNREACH, ETIMEDOUT, ECONNRESET, ENOSPC, EINTR}},
	{"DISCONNECT", ME_IOC_DISCONNECT, sizeof(me_disconnect), ME_DISCONNECT_SIZE_VER0,
	 {ENOENT, ENOTCONN}},
	{"POST", ME_IOC_POST, sizeof(me_post), ME_POST_SIZE_VER0,
	 {EOPNOTSUPP, EMSGSIZE, ENOENT, ERANGE, ENOTCONN, EAGAIN, EINTR, EDESTADDRREQ}},
	{"POLL_CQ", ME_IOC_POLL_CQ, sizeof(me_poll_cq), ME_POLL_CQ_SIZE_VER0, {EOPNOTSUPP}},
	{"RECV", ME_IOC_RECV, sizeof(me_recv), ME_RECV_SIZE_VER0,
	 {EOPNOTSUPP, EAGAIN, ETIMEDOUT, EINTR, EMSGSIZE}},
	{"CONN_LIST", ME_IOC_CONN_LIST, sizeof(me_conn_list), ME_CONN_LIST_SIZE_VER0, {}},
	{"STATS", ME_IOC_STATS, sizeof(me_stats), ME_STATS_SIZE_VER0, {}},
	{"BIND", ME_IOC_BIND, sizeof(me_bind), ME_BIND_SIZE_VER0,
	 {EOPNOTSUPP, EISCONN, EADDRINUSE, EADDRNOTAVAIL}},
};

// A post's status in its CQE: what posting may fail with, and what the
// completion may carry (uapi header, ME_IOC_POST and the io_uring part).
const std::set<int> kPostStatus = {EOPNOTSUPP, EMSGSIZE,  ENOENT,       ERANGE,
				   ENOTCONN,   EAGAIN,    EINTR,        EACCES,
				   ENOBUFS,    ECANCELED, ECONNRESET,   ETIMEDOUT,
				   ECONNREFUSED, EDESTADDRREQ, ECONNABORTED};

constexpr size_t kMaxStruct = 256;
static_assert(sizeof(me_query) <= kMaxStruct && sizeof(me_post) <= kMaxStruct);

const Command *command_of(uint32_t cmd)
{
	for (const auto &c : kCommands)
		if (c.cmd == cmd)
			return &c;
	return nullptr;
}

// ---- what a child reports ----

enum Door : uint8_t {
	kIoctl = 1,	// cmd, err (0 or errno), ret (the return value)
	kUring,		// cmd (cmd_op), err (-res), ret (res), flags kLinked
	kMmap,		// cmd (a MmapShape), err (0 or errno)
	kNote,		// text: something the parent prints
	kFinding,	// text: something that contradicts the uapi header
	kSignal,	// cmd: the signal the child is about to send itself
	kSetupFailed,	// text, err
};

enum MmapShape : uint32_t { kAreaGood = 1, kAreaPrivate, kAreaOffset, kAreaHuge, kAreaEmpty };

constexpr uint8_t kLinked = 1;	// the SQE followed one with IOSQE_IO_LINK

struct Record {
	uint8_t door;
	uint8_t flags;
	uint16_t end;	// which file: 0 node 0, 1 node 1, 2 node 0's other file
	uint32_t cmd;
	int32_t err;
	int32_t ret;
	char text[48];
};
static_assert(sizeof(Record) == 64);

std::string describe(const Record &r)
{
	char b[160];
	switch (r.door) {
	case kIoctl: {
		const Command *c = command_of(r.cmd);
		std::snprintf(b, sizeof(b), "ioctl %s (0x%08x) on file %u: %s, returned %d",
			      c ? c->name : "unknown", r.cmd, r.end, errno_name(r.err).c_str(), r.ret);
		break;
	}
	case kUring:
		std::snprintf(b, sizeof(b), "uring cmd_op 0x%08x on file %u%s: res %d (%s)", r.cmd,
			      r.end, r.flags & kLinked ? " (linked)" : "", r.ret,
			      errno_name(r.err).c_str());
		break;
	case kMmap:
		std::snprintf(b, sizeof(b), "mmap shape %u of file %u: %s", r.cmd, r.end,
			      errno_name(r.err).c_str());
		break;
	default:
		std::snprintf(b, sizeof(b), "door %u: %.48s (%s)", r.door, r.text,
			      errno_name(r.err).c_str());
	}
	return b;
}

// The verdict on one record: "" if the uapi header allows it, else why not.
std::string judge(const Record &r)
{
	switch (r.door) {
	case kIoctl: {
		if (r.ret > 0)
			return "a positive return value";
		const Command *c = command_of(r.cmd);
		if (!c)
			return r.err == ENOTTY ? "" : "an unknown command must fail with ENOTTY";
		if (r.err == 0 || kCommon.count(r.err) || c->errors.count(r.err))
			return "";
		return std::string("an error the uapi header does not list for ") + c->name;
	}
	case kUring: {
		if (r.ret > 0)
			return "a positive CQE res";
		if (r.err == 0 && r.cmd != ME_IOC_POST)
			return "an unknown cmd_op succeeded";
		if (r.err == ECANCELED && (r.flags & kLinked))
			return "";	// io_uring: the SQE it was linked to failed
		if (r.cmd != ME_IOC_POST)
			return r.err == ENOTTY ? "" : "an unknown cmd_op must complete with ENOTTY";
		if (r.err == 0 || kCommon.count(r.err) || kPostStatus.count(r.err))
			return "";
		return "a status the uapi header does not list for a post";
	}
	case kMmap:
		if (r.cmd == kAreaGood)
			return r.err == 0 || r.err == ENOMEM ? "" : "an undocumented mmap error";
		if (r.cmd == kAreaHuge)
			return r.err == EINVAL || r.err == ENOMEM ? "" : "mmap above the maximum: not EINVAL";
		return r.err == EINVAL ? "" : "a private, offset or empty mapping: not EINVAL";
	case kFinding:
		return std::string("contradicts the uapi header: ") + r.text;
	case kSetupFailed:
		return std::string("the child could not set up: ") + r.text;
	}
	return "";
}

// ---- the child ----

// Everything the parent hands a child.
struct ChildSetup {
	Cluster *cluster;
	uint64_t seed;
	double seconds;
	int pipe_fd;
	uint32_t ids[2];		// node ids of nodes 0 and 1
	std::string links[2];		// each node's link end
	bool trace;
};

// The arena: one reservation holding every byte a fuzzed call may make the
// kernel write.  Offsets:
constexpr size_t kArena = 512 * MiB;
constexpr size_t kData = 0, kDataLen = 8 * MiB;		// registered memory
constexpr size_t kOut = 8 * MiB, kOutLen = 4 * MiB;	// output arrays, recv buffers
constexpr size_t kArg = 12 * MiB, kArgLen = 2 * kPage;	// the ioctl argument
constexpr size_t kPosts = kArg + kArgLen;		// io_uring's me_posts
constexpr size_t kPostSlots = 512;
constexpr size_t kScratchLen = 16 * MiB;			// read-write up to here
constexpr size_t kRo = 16 * MiB, kRoLen = 16 * kPage;	// read-only
constexpr size_t kNone = 20 * MiB;			// PROT_NONE ("unmapped")
constexpr size_t kSlots = 32 * MiB, kSlotLen = 4 * MiB, kNSlots = 32;	// receive areas
// PROT_NONE from kSlots + kNSlots * kSlotLen to kArena: nothing the kernel
// writes sequentially (stride at most a page) can cross it.
static_assert(kPosts + kPostSlots * 128 <= kScratchLen);
static_assert(kSlots + kNSlots * kSlotLen + 64 * MiB <= kArena);

class Child {
public:
	explicit Child(const ChildSetup &s) : s_(s), rng_(s.seed) {}
	[[noreturn]] void run();

private:
	struct Region {
		uint32_t id, key;
	};
	struct Area {
		uint8_t *p;
		size_t len;
		int file;	// index into fds_
		size_t slot;
	};
	struct Ring {
		io_uring ring;
		bool sqe128;
		size_t inflight = 0;
		bool link_pending = false;	// the last SQE had IOSQE_IO_LINK
	};

	uint64_t pick(uint64_t lo, uint64_t hi)
	{
		return std::uniform_int_distribution<uint64_t>(lo, hi)(rng_);
	}
	bool chance(unsigned percent) { return pick(0, 99) < percent; }
	uint8_t *at(size_t off) const { return base_ + off; }
	uint64_t addr(size_t off) const { return reinterpret_cast<uint64_t>(base_ + off); }

	// Every user pointer the kernel may write through, after the fuzzer
	// chose or mutated it: addresses that can never be mapped (the first
	// 64 KiB, kernel and non-canonical ones) stay, other user addresses
	// are folded into the arena.
	uint64_t fold(uint64_t p) const
	{
		if (p < 0x10000 || p >= (uint64_t{1} << 47))
			return p;
		const uint64_t b = reinterpret_cast<uint64_t>(base_);
		if (p >= b && p < b + kArena)
			return p;
		return b + p % kArena;
	}

	// A user pointer worth trying: mostly good, often not.
	uint64_t pointer(uint64_t good, size_t good_len)
	{
		switch (pick(0, 15)) {
		case 0: return 0;
		case 1: return addr(kNone) + pick(0, 8) * kPage;	// PROT_NONE
		case 2: return addr(kRo) + pick(0, kRoLen - 1);	// read-only
		case 3: return 0xffff888000000000ull + pick(0, 1 << 20);	// kernel
		case 4: return good + good_len - pick(0, 16);	// at the end
		case 5: return good + pick(1, 7);		// misaligned
		case 6: return fold(pick(0, ~0ull));
		case 7: return pick(1, 0xffff);			// never mapped
		case 8: return 0x0000800000000000ull + pick(0, 1 << 20);	// non-canonical
		case 9: return addr(kSlots) + pick(0, kNSlots * kSlotLen - 1);	// areas, holes
		default: return good;
		}
	}

	void record(Door door, int file, uint32_t cmd, int err, int ret, uint8_t flags = 0,
		    const char *text = nullptr);
	void flush();
	[[noreturn]] void setup_failed(const char *what, int err);

	int ioctl_as(int file, uint32_t cmd, void *arg);
	void setup();
	bool connect_end(int e, uint32_t timeout_ms);
	bool join_shared(int e, uint32_t timeout_ms);
	void build(const Command &c, uint8_t *arg, int file);
	void mutate(const Command &c, uint8_t *arg);
	void after_ioctl(const Command &c, const uint8_t *arg, int file, int ret);
	void one_ioctl();
	void fill_post(me_post *p, int e);
	void shape_area();
	void drop_area();
	void uring_step();
	void reap(Ring &r);
	void poll_all();
	[[noreturn]] void finish();

	ChildSetup s_;
	std::mt19937_64 rng_;
	uint8_t *base_ = nullptr;
	int fds_[3] = {-1, -1, -1};	// node 0, node 1, node 0 again
	uint32_t conn_[2] = {0, 0};	// each end's connection to the other
	uint32_t shared_[2] = {0, 0};	// each end's id of the shared one (ABI 18)
	uint32_t port_[3] = {0, 0, 0};	// each file's bound port, 0: none yet
	std::vector<Region> regions_[3];	// registered on each file
	std::vector<Area> areas_;
	std::vector<bool> slot_used_ = std::vector<bool>(kNSlots);
	std::vector<Ring *> rings_;
	size_t post_slot_ = 0;
	uint64_t user_data_ = 0;
	std::array<Record, 64> buf_{};
	size_t nbuf_ = 0;
};

void Child::record(Door door, int file, uint32_t cmd, int err, int ret, uint8_t flags,
		   const char *text)
{
	Record &r = buf_[nbuf_++];
	r = Record{};
	r.door = door;
	r.flags = flags;
	r.end = static_cast<uint16_t>(file);
	r.cmd = cmd;
	r.err = err;
	r.ret = ret;
	if (text)
		std::snprintf(r.text, sizeof(r.text), "%s", text);
	if (nbuf_ == buf_.size() || door >= kNote)
		flush();
}

void Child::flush()
{
	const char *p = reinterpret_cast<const char *>(buf_.data());
	size_t n = nbuf_ * sizeof(Record);
	while (n) {
		ssize_t w = ::write(s_.pipe_fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			_exit(3);	// the parent is gone
		p += w;
		n -= static_cast<size_t>(w);
	}
	nbuf_ = 0;
}

void Child::setup_failed(const char *what, int err)
{
	record(kSetupFailed, 0, 0, err, 0, 0, what);
	_exit(2);
}

int Child::ioctl_as(int file, uint32_t cmd, void *arg)
{
	if (s_.trace) {
		const Command *c = command_of(cmd);
		std::fprintf(stderr, "fuzz: file %d %s (0x%08x) at %p\n", file, c ? c->name : "unknown",
			     cmd, arg);
	}
	errno = 0;
	int r = ::ioctl(fds_[file], cmd, arg);
	int e = r < 0 ? errno : 0;
	record(kIoctl, file, cmd, e, r);
	return r < 0 ? -e : r;
}

bool Child::connect_end(int e, uint32_t timeout_ms)
{
	auto *c = reinterpret_cast<me_connect *>(at(kArg));
	std::memset(c, 0, sizeof(*c));
	c->size = sizeof(*c);
	c->peer = s_.ids[1 - e];
	c->timeout_ms = timeout_ms;
	if (ioctl_as(e, ME_IOC_CONNECT, c) != 0)
		return false;
	conn_[e] = c->conn;
	return true;
}

// Joins the shared connection between the nodes (ABI 18) from end e.
bool Child::join_shared(int e, uint32_t timeout_ms)
{
	auto *c = reinterpret_cast<me_connect *>(at(kArg));
	std::memset(c, 0, sizeof(*c));
	c->size = sizeof(*c);
	c->flags = ME_CONNECT_F_SHARED;
	c->peer = s_.ids[1 - e];
	c->timeout_ms = timeout_ms;
	if (ioctl_as(e, ME_IOC_CONNECT, c) != 0)
		return false;
	shared_[e] = c->conn;
	return true;
}

void Child::setup()
{
	void *a = mmap(nullptr, kArena, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (a == MAP_FAILED)
		setup_failed("arena reservation", errno);
	base_ = static_cast<uint8_t *>(a);
	if (mmap(base_, kScratchLen, PROT_READ | PROT_WRITE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_POPULATE, -1, 0) != base_ ||
	    mmap(at(kRo), kRoLen, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_POPULATE,
		 -1, 0) != at(kRo))
		setup_failed("arena scratch", errno);
	fill_random(at(kData), kDataLen, s_.seed);

	for (int f = 0; f < 3; f++) {
		auto d = s_.cluster->open_in(f == 1 ? 1 : 0);
		if (!d)
			setup_failed("open /dev/multiedge", d.error().code().value());
		// Kept open until the child exits (or closes them at the end).
		fds_[f] = (new multiedge::Device(std::move(d).value()))->fd();
	}
	// Each end: a region over its half of the data, and a connection to
	// the other (the link may still be coming back from an earlier
	// child's detach: try for a while).
	for (int e = 0; e < 2; e++) {
		auto *r = reinterpret_cast<me_mr_reg *>(at(kArg));
		std::memset(r, 0, sizeof(*r));
		r->size = sizeof(*r);
		r->access = ME_ACCESS_ALL;
		r->addr = addr(kData + static_cast<size_t>(e) * kDataLen / 2);
		r->length = kDataLen / 2;
		int ret = ioctl_as(e, ME_IOC_MR_REG, r);
		if (ret)
			setup_failed("register the data", -ret);
		regions_[e].push_back({r->region, r->key});
	}
	for (int e = 0; e < 2; e++) {
		auto deadline = std::chrono::steady_clock::now() + 20s;
		while (!connect_end(e, 2000))
			if (std::chrono::steady_clock::now() > deadline)
				setup_failed("connect", ENOTCONN);
	}
	// And the shared connection, which every file of a node may post on.
	for (int e = 0; e < 2; e++) {
		auto deadline = std::chrono::steady_clock::now() + 20s;
		while (!join_shared(e, 2000))
			if (std::chrono::steady_clock::now() > deadline)
				setup_failed("join the shared connection", ENOTCONN);
	}
}

// A valid post of end e (or file 2, which has no connection), before any
// mutation: from one of its regions to one of the other end's.
void Child::fill_post(me_post *r, int e)
{
	const int me = e == 2 ? 0 : e;
	std::memset(r, 0, sizeof(*r));
	r->size = sizeof(*r);
	r->opcode = static_cast<uint32_t>(pick(ME_OP_WRITE, ME_OP_ATOMIC));
	const uint64_t which = pick(0, 99);
	const bool shared = which >= 75 && which < 95;
	r->conn = which < 75   ? conn_[me]
		  : shared     ? shared_[me]
		  : which < 97 ? ME_CONN_LOOPBACK	// this node (ABI 20)
			       : static_cast<uint32_t>(pick(0, 300));
	r->cookie = pick(0, ~0ull);
	const auto &mine = regions_[e];
	// The loopback reaches this node's regions: the file's own.
	const auto &theirs = r->conn == ME_CONN_LOOPBACK ? mine : regions_[1 - me];
	const Region lr = mine.empty() ? Region{0, 0} : mine[pick(0, mine.size() - 1)];
	r->local_region = chance(95) ? lr.id : static_cast<uint32_t>(pick(0, 5000));
	r->len = static_cast<uint32_t>(chance(60) ? pick(1, 4096) : chance(90) ? pick(1, 1 << 20)
									 : pick(0, ~0u));
	if (r->opcode == ME_OP_SEND && chance(90))
		r->len = static_cast<uint32_t>(pick(1, ME_SEND_MAX));
	r->local_off = chance(90) ? pick(0, 64 * kPage) : pick(0, ~0ull);
	if (r->opcode != ME_OP_SEND || chance(5)) {
		const Region rr = theirs.empty() ? Region{0, 0} : theirs[pick(0, theirs.size() - 1)];
		r->remote_region = chance(95) ? rr.id : static_cast<uint32_t>(pick(0, 5000));
		r->remote_key = chance(97) ? rr.key : static_cast<uint32_t>(pick(0, ~0u));
		r->remote_off = chance(90) ? pick(0, 64 * kPage) : pick(0, ~0ull);
	}
	if (r->opcode == ME_OP_NOTIFY || chance(3))
		r->imm = static_cast<uint32_t>(pick(0, ~0u));
	// An atomic (ABI 19): mostly a known operation on 4 or 8 bytes, often
	// aligned; its operand comes from the local buffer.
	if (r->opcode == ME_OP_ATOMIC) {
		r->imm = static_cast<uint32_t>(chance(90) ? pick(ME_ATOMIC_ADD, ME_ATOMIC_READ)
							  : pick(0, ~0u));
		r->len = static_cast<uint32_t>(chance(90) ? (chance(50) ? 4 : 8) : pick(0, 64));
		if (chance(80))
			r->remote_off &= ~7ull;
	}
	// A send's port on a shared connection (ABI 18): mostly that of a
	// file bound on the other node, if one is; rarely on anything else.
	if (chance(r->opcode == ME_OP_SEND ? (shared ? 90 : 30) : 3)) {
		const uint32_t known = port_[1 - me];
		r->port = static_cast<uint32_t>(known && chance(60) ? known
					       : chance(90)	  ? pick(1, 65535)
								  : pick(0, ~0u));
	}
}

// A valid argument for c at arg (the argument page, zeroed around it).
void Child::build(const Command &c, uint8_t *arg, int file)
{
	const int e = file == 2 ? 0 : file;
	std::memset(arg, 0, kArgLen);
	*reinterpret_cast<uint32_t *>(arg) = c.size;
	switch (c.cmd) {
	case ME_IOC_MR_REG: {
		auto *r = reinterpret_cast<me_mr_reg *>(arg);
		r->access = static_cast<uint32_t>(chance(90) ? pick(0, 3) : pick(0, ~0u));
		r->flags = static_cast<uint32_t>(chance(90) ? pick(0, 7) : pick(0, ~0u));
		if (!areas_.empty() && chance(40)) {
			const Area &a = areas_[pick(0, areas_.size() - 1)];
			// Whole pages or not, and past the area's end.
			uint64_t off = chance(70) ? kPage * pick(0, a.len / kPage) : pick(0, a.len);
			r->addr = reinterpret_cast<uint64_t>(a.p) + off;
			r->length = chance(70) ? kPage * pick(1, a.len / kPage + 2) : pick(0, a.len + 2 * kPage);
		} else if (chance(75)) {
			r->addr = addr(kData) + pick(0, kDataLen - 1);
			r->length = chance(95) ? pick(1, MiB) : pick(0, ~0ull);
		} else {
			r->addr = pointer(addr(kData), kDataLen);
			r->length = chance(90) ? pick(0, 64 * kPage) : pick(0, ~0ull);
		}
		break;
	}
	case ME_IOC_MR_DEREG: {
		const auto &rs = regions_[file];
		reinterpret_cast<me_mr_dereg *>(arg)->region =
			!rs.empty() && chance(70) ? rs[pick(0, rs.size() - 1)].id
						  : static_cast<uint32_t>(pick(0, 5000));
		break;
	}
	case ME_IOC_CONNECT: {
		auto *r = reinterpret_cast<me_connect *>(arg);
		// Rarely the real peer: each success is one more connection.
		const uint32_t peers[] = {0, 0xffffffffu, s_.ids[e], s_.ids[1 - e] + 1,
					  static_cast<uint32_t>(pick(0, ~0u))};
		r->peer = chance(5) ? s_.ids[1 - e] : peers[pick(0, 4)];
		// Ordered, shared (ABI 18), both (refused), or garbage.
		r->flags = static_cast<uint32_t>(chance(90) ? pick(0, 3) : pick(0, ~0u));
		break;
	}
	case ME_IOC_DISCONNECT:
		// The own connections rarely: they are set up again, slowly.
		reinterpret_cast<me_disconnect *>(arg)->conn =
			chance(3)   ? conn_[e]
			: chance(2) ? shared_[e]
				    : static_cast<uint32_t>(pick(0, 300));
		break;
	case ME_IOC_POST:
		fill_post(reinterpret_cast<me_post *>(arg), file);
		break;
	case ME_IOC_POLL_CQ: {
		auto *r = reinterpret_cast<me_poll_cq *>(arg);
		r->flags = static_cast<uint32_t>(chance(90) ? pick(0, 1) : pick(0, ~0u));
		r->count = static_cast<uint32_t>(chance(90) ? pick(0, 64) : pick(0, ~0u));
		r->entry_size = static_cast<uint32_t>(chance(80) ? sizeof(me_completion) + 8 * pick(0, 4)
								 : pick(0, 2 * kPage));
		r->entries = pointer(addr(kOut), kOutLen);
		break;
	}
	case ME_IOC_RECV: {
		auto *r = reinterpret_cast<me_recv *>(arg);
		r->flags = static_cast<uint32_t>(chance(90) ? pick(0, 1) : pick(0, ~0u));
		r->peer = chance(70) ? 0 : s_.ids[pick(0, 1)];
		r->len = static_cast<uint32_t>(chance(90) ? pick(0, 2048) : pick(0, ~0u));
		r->buf = pointer(addr(kOut), kOutLen);
		break;
	}
	case ME_IOC_LINK_LIST:
	case ME_IOC_PEER_LIST:
	case ME_IOC_NBR_LIST:
	case ME_IOC_CONN_LIST: {
		auto *r = reinterpret_cast<me_link_list *>(arg);	// the same head
		r->count = static_cast<uint32_t>(chance(90) ? pick(0, 40) : pick(0, ~0u));
		r->links = pointer(addr(kOut), kOutLen);
		r->info_size = static_cast<uint32_t>(chance(70) ? 24 + 8 * pick(0, 16) : pick(0, 9000));
		break;
	}
	case ME_IOC_STATS: {
		auto *r = reinterpret_cast<me_stats *>(arg);
		r->count = static_cast<uint32_t>(chance(90) ? pick(0, 64) : pick(0, ~0u));
		r->values = pointer(addr(kOut), kOutLen);
		break;
	}
	case ME_IOC_BIND: {
		// Once per file it binds; later tries say EISCONN.  A bound file
		// still posts on its connections (opened to the peer's port 0).
		auto *r = reinterpret_cast<me_bind *>(arg);
		r->port = static_cast<uint32_t>(chance(40) ? 0 : chance(90) ? pick(1, 65535)
									     : pick(0, ~0u));
		r->flags = chance(90) ? 0 : static_cast<uint32_t>(pick(0, ~0u));
		break;
	}
	case ME_IOC_LINK_ATTACH:
	case ME_IOC_LINK_DETACH: {
		auto *r = reinterpret_cast<me_link_req *>(arg);
		const char *names[] = {"lo", "nonexistent0", "", s_.links[e].c_str(), s_.links[1 - e].c_str()};
		std::snprintf(r->ifname, sizeof(r->ifname), "%s", names[pick(0, 4)]);
		if (chance(5))	// not terminated
			std::memset(r->ifname, 'x', sizeof(r->ifname));
		r->flags = chance(90) ? 0 : static_cast<uint32_t>(pick(0, ~0u));
		break;
	}
	}
}

// Bytes flipped anywhere (pointers too: fold() takes them back into the
// arena afterwards), the size field, the tail past the struct.
void Child::mutate(const Command &c, uint8_t *arg)
{
	if (chance(50))
		for (uint64_t k = pick(1, 4); k; k--)
			arg[pick(0, c.size - 1)] = static_cast<uint8_t>(pick(0, 255));
	if (chance(25)) {
		const uint64_t sizes[] = {0,	      4,	 c.ver0 - 1,	 c.ver0, c.size - 4,
					  c.size + 8, c.size + pick(1, 64), kPage, kPage + 1, pick(0, ~0u)};
		*reinterpret_cast<uint32_t *>(arg) = static_cast<uint32_t>(sizes[pick(0, 9)]);
	}
	if (chance(10))
		for (size_t i = c.size, n = pick(1, 64); i < c.size + n; i++)
			arg[i] = static_cast<uint8_t>(pick(0, 255));
}

void Child::after_ioctl(const Command &c, const uint8_t *arg, int file, int ret)
{
	const int e = file == 2 ? 0 : file;
	if (ret != 0) {
		if (c.cmd == ME_IOC_POST && ret == -ENOTCONN && file < 2) {
			// The connection died (wrong keys, detach).
			if (reinterpret_cast<const me_post *>(arg)->conn == shared_[e])
				join_shared(e, 200);
			else
				connect_end(e, 200);
		}
		return;
	}
	const uint32_t size = *reinterpret_cast<const uint32_t *>(arg);
	if (c.cmd == ME_IOC_MR_REG && size >= ME_MR_REG_SIZE_VER0) {
		auto *r = reinterpret_cast<const me_mr_reg *>(arg);
		auto &rs = regions_[file];
		rs.push_back({r->region, r->key});
		if (rs.size() > 48) {	// keep the file's count well below the limit
			auto *d = reinterpret_cast<me_mr_dereg *>(at(kArg + kPage));
			*d = me_mr_dereg{sizeof(*d), rs[1].id};
			ioctl_as(file, ME_IOC_MR_DEREG, d);
			rs.erase(rs.begin() + 1);	// the first is the data's
		}
	} else if (c.cmd == ME_IOC_MR_DEREG) {
		auto &rs = regions_[file];
		const uint32_t id = reinterpret_cast<const me_mr_dereg *>(arg)->region;
		std::erase_if(rs, [&](const Region &r) { return r.id == id; });
	} else if (c.cmd == ME_IOC_DISCONNECT && file < 2 &&
		   reinterpret_cast<const me_disconnect *>(arg)->conn == conn_[e]) {
		connect_end(e, 2000);
	} else if (c.cmd == ME_IOC_DISCONNECT && file < 2 &&
		   reinterpret_cast<const me_disconnect *>(arg)->conn == shared_[e]) {
		join_shared(e, 2000);	// it left (the last to: the connection closes)
	} else if (c.cmd == ME_IOC_BIND && size >= ME_BIND_SIZE_VER0) {
		port_[file] = reinterpret_cast<const me_bind *>(arg)->port;
	} else if (c.cmd == ME_IOC_LINK_DETACH) {
		// A real link went: attach it again at once, so that the
		// connections (whose packets now fail) can be set up again.
		auto *r = reinterpret_cast<me_link_req *>(at(kArg + kPage));
		std::memset(r, 0, sizeof(*r));
		r->size = sizeof(*r);
		std::memcpy(r->ifname, reinterpret_cast<const me_link_req *>(arg)->ifname, ME_IFNAMSIZ);
		r->ifname[ME_IFNAMSIZ - 1] = 0;
		if (ioctl_as(file, ME_IOC_LINK_ATTACH, r) != 0)
			record(kFinding, file, ME_IOC_LINK_ATTACH, 0, 0, 0, "re-attaching a detached link failed");
	}
}

void Child::one_ioctl()
{
	const int file = chance(85) ? static_cast<int>(pick(0, 1)) : 2;
	uint8_t *arg = at(kArg);
	uint32_t cmd;
	const Command *c = nullptr;
	if (chance(3)) {
		// Unknown: other numbers of the module's type, any direction and
		// size (the type keeps clear of the numbers the VFS handles).
		cmd = static_cast<uint32_t>(_IOC(pick(0, 3), ME_IOC_MAGIC, pick(0, 255), pick(0, 1023)));
		if (command_of(cmd))
			cmd ^= 0x80;
		std::memset(arg, static_cast<int>(pick(0, 255)), 64);
	} else {
		// Posts and polls most: they run the data path.
		const uint64_t w = pick(0, 99);
		c = w < 30   ? command_of(ME_IOC_POST)
		    : w < 42 ? command_of(ME_IOC_POLL_CQ)
		    : w < 52 ? command_of(ME_IOC_MR_REG)
		    : w < 58 ? command_of(ME_IOC_MR_DEREG)
			     : &kCommands[pick(0, kCommands.size() - 1)];
		cmd = c->cmd;
		build(*c, arg, file);
		mutate(*c, arg);
		// The pointers the kernel writes through, into the arena.
		switch (cmd) {
		case ME_IOC_MR_REG:
			reinterpret_cast<me_mr_reg *>(arg)->addr = fold(reinterpret_cast<me_mr_reg *>(arg)->addr);
			break;
		case ME_IOC_POLL_CQ:
			reinterpret_cast<me_poll_cq *>(arg)->entries =
				fold(reinterpret_cast<me_poll_cq *>(arg)->entries);
			break;
		case ME_IOC_RECV:
			reinterpret_cast<me_recv *>(arg)->buf = fold(reinterpret_cast<me_recv *>(arg)->buf);
			break;
		case ME_IOC_STATS:
			reinterpret_cast<me_stats *>(arg)->values = fold(reinterpret_cast<me_stats *>(arg)->values);
			break;
		case ME_IOC_LINK_LIST:
		case ME_IOC_PEER_LIST:
		case ME_IOC_NBR_LIST:
		case ME_IOC_CONN_LIST:
			reinterpret_cast<me_link_list *>(arg)->links =
				fold(reinterpret_cast<me_link_list *>(arg)->links);
			break;
		}
		// Never block for long (a timeout of 0 waits forever).
		if (cmd == ME_IOC_CONNECT)
			reinterpret_cast<me_connect *>(arg)->timeout_ms = static_cast<uint32_t>(pick(1, 200));
		if (cmd == ME_IOC_POLL_CQ)
			reinterpret_cast<me_poll_cq *>(arg)->timeout_ms = static_cast<uint32_t>(pick(1, 20));
		if (cmd == ME_IOC_RECV)
			reinterpret_cast<me_recv *>(arg)->timeout_ms = static_cast<uint32_t>(pick(1, 20));
		if (cmd == ME_IOC_POST)
			reinterpret_cast<me_post *>(arg)->flags |= ME_POST_F_NONBLOCK;
	}
	void *p = arg;
	if (chance(5))
		p = reinterpret_cast<void *>(fold(pointer(addr(kArg), kArgLen)));
	int ret = ioctl_as(file, cmd, p);
	if (c && p == arg)
		after_ioctl(*c, arg, file, ret);
}

// A receive area of a random shape in a free slot, through a random file;
// or a mapping the header says mmap refuses.
void Child::shape_area()
{
	const int file = chance(85) ? static_cast<int>(pick(0, 1)) : 2;
	const int fd = fds_[file];
	if (chance(10)) {
		// Refused shapes, never MAP_FIXED: should one be mapped after
		// all, it must not land on anything.
		const MmapShape shape = static_cast<MmapShape>(pick(kAreaPrivate, kAreaEmpty));
		size_t len = kPage * pick(1, 4);
		int flags = MAP_SHARED;
		off_t off = 0;
		if (shape == kAreaPrivate)
			flags = MAP_PRIVATE;
		else if (shape == kAreaOffset)
			off = static_cast<off_t>(kPage * pick(1, 4));
		else if (shape == kAreaHuge)
			len = ME_MR_MAX_LENGTH + kPage * pick(1, 4);
		else
			len = 0;
		void *p = mmap(nullptr, len, PROT_READ | PROT_WRITE, flags | MAP_NORESERVE, fd, off);
		record(kMmap, file, shape, p == MAP_FAILED ? errno : 0, 0);
		if (p != MAP_FAILED)
			munmap(p, len);
		return;
	}
	size_t slot = pick(0, kNSlots - 1);
	if (slot_used_[slot])
		return;
	const size_t pages = chance(90) ? pick(1, 64) : pick(65, 256);
	const size_t len = pages * kPage;
	const int prot = chance(85) ? PROT_READ | PROT_WRITE : PROT_READ;
	uint8_t *want = at(kSlots + slot * kSlotLen);
	void *p = mmap(want, len, prot, MAP_SHARED | MAP_FIXED, fd, 0);
	record(kMmap, file, kAreaGood, p == MAP_FAILED ? errno : 0, 0);
	if (p == MAP_FAILED) {
		// A failed MAP_FIXED may have unmapped the slot: plug it.
		mmap(want, kSlotLen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
		return;
	}
	slot_used_[slot] = true;
	areas_.push_back({want, len, file, slot});
	if (prot & PROT_WRITE && chance(30))
		std::memset(want, 0x33, std::min<size_t>(len, kPage));	// fault a page in
	if (pages > 2 && chance(30)) {
		// A hole: unmapped, then plugged with PROT_NONE so that nothing
		// of the child's own (a ring, say) can be mapped there.
		size_t from = pick(1, pages - 2), n = pick(1, pages - 1 - from);
		munmap(want + from * kPage, n * kPage);
		mmap(want + from * kPage, n * kPage, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	}
	if (chance(30))
		mprotect(want + pick(0, pages - 1) * kPage, kPage * pick(1, 4), PROT_READ);
	if (chance(10))
		madvise(want + pick(0, pages - 1) * kPage, kPage, MADV_DONTNEED);
	if (chance(5)) {
		// The header: mremap() cannot move or grow it.
		size_t to = pick(0, kNSlots - 1);
		if (!slot_used_[to]) {
			void *r = mremap(want, len, len, MREMAP_MAYMOVE | MREMAP_FIXED,
					 at(kSlots + to * kSlotLen));
			if (r != MAP_FAILED) {
				record(kFinding, file, 0, 0, 0, 0, "mremap moved a receive area");
				mmap(want, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE,
				     -1, 0);
				areas_.back().p = static_cast<uint8_t *>(r);
				areas_.back().slot = to;
				slot_used_[slot] = false;
				slot_used_[to] = true;
			}
		}
	}
}

// An area unmapped, whatever is registered on it (its regions stay).
void Child::drop_area()
{
	if (areas_.empty())
		return;
	auto it = areas_.begin() + static_cast<long>(pick(0, areas_.size() - 1));
	munmap(it->p, it->len);
	mmap(it->p, it->len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	slot_used_[it->slot] = false;
	areas_.erase(it);
}

void Child::reap(Ring &r)
{
	io_uring_cqe *cqe;
	while (io_uring_peek_cqe(&r.ring, &cqe) == 0) {
		const uint64_t ud = cqe->user_data;
		const int res = cqe->res;
		io_uring_cqe_seen(&r.ring, cqe);
		r.inflight--;
		// user_data: cmd_op in the low 32 bits, then flags, then the file.
		record(kUring, static_cast<int>(ud >> 40), static_cast<uint32_t>(ud),
		       res < 0 ? -res : 0, res, static_cast<uint8_t>(ud >> 32));
	}
}

void Child::uring_step()
{
	if (rings_.empty() || (rings_.size() < 3 && chance(5))) {
		auto *r = new Ring;
		io_uring_params p{};
		const unsigned kinds[] = {0, IORING_SETUP_SQE128, IORING_SETUP_CQE32,
					  IORING_SETUP_SQE128 | IORING_SETUP_CQE32};
		p.flags = kinds[pick(0, 3)];
		int ret = io_uring_queue_init_params(static_cast<unsigned>(1u << pick(2, 6)), &r->ring, &p);
		if (ret) {
			record(kNote, 0, 0, -ret, 0, 0, "io_uring_queue_init failed");
			delete r;
			return;
		}
		r->sqe128 = p.flags & IORING_SETUP_SQE128;
		rings_.push_back(r);
	}
	Ring &r = *rings_[pick(0, rings_.size() - 1)];
	reap(r);
	for (uint64_t n = pick(1, 16); n; n--) {
		io_uring_sqe *sqe = io_uring_get_sqe(&r.ring);
		if (!sqe)
			break;
		const int file = chance(85) ? static_cast<int>(pick(0, 1)) : 2;
		uint32_t cmd_op = ME_IOC_POST;
		if (chance(8))
			cmd_op = chance(50) ? kCommands[pick(0, kCommands.size() - 1)].cmd
					    : static_cast<uint32_t>(pick(0, ~0u));
		io_uring_prep_rw(IORING_OP_URING_CMD, sqe, fds_[file], nullptr, 0, 0);
		sqe->cmd_op = cmd_op;	// after prep_rw: it shares the offset field
		uint8_t *cmd = reinterpret_cast<uint8_t *>(sqe) + offsetof(io_uring_sqe, addr3);
		const size_t cap = r.sqe128 ? ME_URING_CMD_SIZE_SQE128 : ME_URING_CMD_SIZE;
		std::memset(cmd, 0, cap);
		// The post: inline, or in a slot of the arena (the kernel only
		// reads it, maybe again later from a worker).
		auto *post = reinterpret_cast<me_post *>(at(kPosts + (post_slot_++ % kPostSlots) * 128));
		fill_post(post, file);
		if (chance(70))
			post->flags = chance(50) ? ME_POST_F_NONBLOCK : 0;
		if (r.sqe128) {
			std::memcpy(cmd, post, sizeof(*post));
			if (chance(25))
				*reinterpret_cast<uint32_t *>(cmd) = static_cast<uint32_t>(
					chance(50) ? pick(60, 84) : pick(0, ~0u));
		} else {
			me_uring_ptr u{};
			u.arg = chance(90) ? reinterpret_cast<uint64_t>(post)
					   : pointer(reinterpret_cast<uint64_t>(post), 128);
			u.__reserved = chance(95) ? 0 : pick(0, ~0ull);
			std::memcpy(cmd, &u, sizeof(u));
			if (chance(20))
				*reinterpret_cast<uint32_t *>(post) = static_cast<uint32_t>(pick(0, 2 * kPage));
		}
		if (chance(30))
			for (uint64_t k = pick(1, 4); k; k--)
				cmd[pick(0, cap - 1)] = static_cast<uint8_t>(pick(0, 255));
		uint8_t flags = 0;
		if (chance(10))
			flags |= IOSQE_ASYNC;
		if (chance(5))
			flags |= IOSQE_IO_LINK;
		sqe->flags = flags;
		const uint8_t rec_flags = r.link_pending ? kLinked : 0;
		r.link_pending = flags & IOSQE_IO_LINK;
		io_uring_sqe_set_data64(sqe, uint64_t{cmd_op} | uint64_t{rec_flags} << 32 |
						     uint64_t(file) << 40);
		r.inflight++;
		user_data_++;
	}
	int ret = io_uring_submit(&r.ring);
	if (ret < 0 && ret != -EBUSY && ret != -EAGAIN)
		record(kNote, 0, 0, -ret, 0, 0, "io_uring_submit failed");
	reap(r);
	// A ring torn down with its commands in flight.
	if (chance(3)) {
		if (s_.trace)
			std::fprintf(stderr, "fuzz: ring torn down, %zu in flight\n", r.inflight);
		io_uring_queue_exit(&r.ring);
		std::erase(rings_, &r);
		delete &r;
	}
}

void Child::poll_all()
{
	// Room in the files' completion queues for more posts.
	for (int f = 0; f < 3; f++) {
		auto *q = reinterpret_cast<me_poll_cq *>(at(kArg + kPage));
		*q = me_poll_cq{};
		q->size = sizeof(*q);
		q->count = 64;
		q->entry_size = sizeof(me_completion);
		q->entries = addr(kOut);
		if (ioctl_as(f, ME_IOC_POLL_CQ, q) != 0)
			continue;
		const auto *c = reinterpret_cast<const me_completion *>(at(kOut));
		for (uint32_t i = 0; i < q->count && i < 64; i++)
			if (c[i].type == ME_CQ_CONN_DEAD) {
				char t[48];
				std::snprintf(t, sizeof(t), "file %d: conn %u dead", f, c[i].conn);
				record(kNote, f, 0, -c[i].status, 0, 0, t);
			}
	}
	for (Ring *r : rings_)
		reap(*r);
}

// One of three ends, each with work in flight: exit as it is; close
// everything first (rings, then files); or SIGKILL itself.
void Child::finish()
{
	switch (pick(0, 2)) {
	case 0:
		flush();
		_exit(0);
	case 1:
		for (Ring *r : rings_)
			io_uring_queue_exit(&r->ring);
		for (int fd : fds_)
			::close(fd);
		flush();
		_exit(0);
	default:
		record(kSignal, 0, SIGKILL, 0, 0);
		::raise(SIGKILL);
		_exit(4);
	}
}

void Child::run()
{
	setup();
	record(kNote, 0, 0, 0, 0, 0, "set up");
	const auto end = std::chrono::steady_clock::now() +
			 std::chrono::duration_cast<std::chrono::steady_clock::duration>(
				 std::chrono::duration<double>(s_.seconds));
	while (std::chrono::steady_clock::now() < end) {
		for (int i = 0; i < 32; i++) {
			const uint64_t w = pick(0, 99);
			if (w < 70)
				one_ioctl();
			else if (w < 88)
				uring_step();
			else if (w < 93)
				poll_all();
			else if (w < 97)
				shape_area();
			else
				drop_area();
		}
	}
	finish();
}

// ---- the parent ----

class IoctlFuzzTest : public ClusterTest {
protected:
	// Each successful connect uses up a connection id of the namespace.
	std::string module_params() const override { return "max_conns=65536"; }
};

struct Tally {
	std::map<std::tuple<uint8_t, uint32_t, int>, uint64_t> outcomes;	// door, cmd, err
	std::map<std::string, uint64_t> failures;	// verdict + record -> count
	uint64_t calls = 0, sets_up = 0;
};

// Both engines as mectl shows them (connections, counters, every path's
// window and bytes in flight): what a child stuck in the module left, for
// whoever reads the failure.
std::string engine_report(Cluster &c)
{
	const std::string file = "/tmp/me-fuzz-engines";
	std::string out;
	for (int n = 0; n < 2; n++) {
		const std::string mectl = "ip netns exec " + c.ns(n) + " " ME_BIN_DIR "/mectl ";
		sh(mectl + "counters > " + file + " 2>&1; " + mectl + "neighbours >> " + file + " 2>&1");
		out += "node " + std::to_string(n) + ":\n" + read_file(file);
	}
	::unlink(file.c_str());
	return out;
}

// Runs one child; returns false if the run should stop.
bool run_child(const ChildSetup &base, int index, Tally &t)
{
	int fds[2];
	if (::pipe2(fds, O_CLOEXEC) != 0) {
		ADD_FAILURE() << "pipe: " << strerror(errno);
		return false;
	}
	ChildSetup s = base;
	s.pipe_fd = fds[1];
	std::fflush(nullptr);
	pid_t pid = ::fork();
	if (pid < 0) {
		ADD_FAILURE() << "fork: " << strerror(errno);
		return false;
	}
	if (pid == 0) {
		::close(fds[0]);
		Child(s).run();
	}
	::close(fds[1]);
	std::deque<Record> last;	// for the report of a crash
	int announced = 0;
	bool set_up = false;
	std::vector<char> pending;
	const auto hard = std::chrono::steady_clock::now() + std::chrono::seconds(60) +
			  std::chrono::seconds(static_cast<long>(s.seconds));
	bool eof = false, stuck = false;
	while (!eof) {
		pollfd pfd{fds[0], POLLIN, 0};
		int n = ::poll(&pfd, 1, 200);
		if (n > 0) {
			char buf[64 * 64];
			ssize_t r = ::read(fds[0], buf, sizeof(buf));
			if (r <= 0) {
				eof = r == 0 || errno != EINTR;
				continue;
			}
			pending.insert(pending.end(), buf, buf + r);
			size_t used = 0;
			for (; pending.size() - used >= sizeof(Record); used += sizeof(Record)) {
				Record rec;
				std::memcpy(&rec, pending.data() + used, sizeof(rec));
				if (rec.door == kSignal) {
					announced = static_cast<int>(rec.cmd);
					continue;
				}
				if (rec.door == kNote) {
					if (std::string(rec.text) == "set up")
						set_up = true;
					else
						std::printf("child %d: %s (%s)\n", index, rec.text,
							    errno_name(rec.err).c_str());
					continue;
				}
				t.calls++;
				const bool known = rec.door != kIoctl || command_of(rec.cmd);
				const bool post = rec.door != kUring || rec.cmd == ME_IOC_POST;
				t.outcomes[{rec.door, known && post ? rec.cmd : 0, rec.err}]++;
				last.push_back(rec);
				if (last.size() > 16)
					last.pop_front();
				std::string why = judge(rec);
				if (!why.empty() && t.failures[why + ": " + describe(rec)]++ == 0)
					ADD_FAILURE() << "child " << index << " (seed " << s.seed << "): " << why
						      << ": " << describe(rec);
			}
			pending.erase(pending.begin(), pending.begin() + static_cast<long>(used));
		}
		if (std::chrono::steady_clock::now() > hard) {
			stuck = true;
			break;
		}
	}
	::close(fds[0]);
	int st = 0;
	pid_t r = 0;
	auto deadline = std::chrono::steady_clock::now() + (stuck ? 1s : 60s);
	while ((r = ::waitpid(pid, &st, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
		std::this_thread::sleep_for(20ms);
	if (r != pid) {
		ADD_FAILURE() << "child " << index << " (seed " << s.seed << ") did not exit in time; its kernel stack:\n"
			      << read_file("/proc/" + std::to_string(pid) + "/stack")
			      << "the engines:\n" << engine_report(*base.cluster);
		// A child stuck in the module may not even die: never wait
		// for it without a limit.
		::kill(pid, SIGKILL);
		for (int i = 0; i < 100 && ::waitpid(pid, &st, WNOHANG) == 0; i++)
			std::this_thread::sleep_for(50ms);
		return false;
	}
	t.sets_up += set_up;
	std::string trail;
	for (const auto &rec : last)
		trail += "\n    " + describe(rec);
	if (WIFSIGNALED(st)) {
		EXPECT_EQ(WTERMSIG(st), announced)
			<< "child " << index << " (seed " << s.seed << ") died of signal " << WTERMSIG(st)
			<< " (" << strsignal(WTERMSIG(st)) << "); its last calls:" << trail;
	} else {
		EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0 && !announced)
			<< "child " << index << " (seed " << s.seed << ") exited with status "
			<< WEXITSTATUS(st) << "; its last calls:" << trail;
	}
	return set_up && !::testing::Test::HasFatalFailure();
}

// Every connection of both nodes closed or dead (a child's files are all
// gone), and no skb queued to a receive thread.
::testing::AssertionResult connections_ended(Cluster &c, std::chrono::seconds timeout)
{
	const auto deadline = std::chrono::steady_clock::now() + timeout;
	for (;;) {
		std::string alive, all;
		for (int n = 0; n < 2; n++) {
			auto list = c.dev(n).connections();
			if (!list)
				return ::testing::AssertionFailure() << list.error().message();
			for (const auto &i : list.value()) {
				const std::string one = " node " + std::to_string(n) + " conn " +
							std::to_string(i.conn) + (i.active ? " active " : " passive ") +
							i.state + ";";
				all += one;
				if (i.state != "closed" && i.state != "dead")
					alive += one;
			}
		}
		const uint64_t queued = accounting().rx_queued;
		if (alive.empty() && queued == 0)
			return ::testing::AssertionSuccess();
		if (std::chrono::steady_clock::now() > deadline)
			return ::testing::AssertionFailure()
			       << "after " << timeout.count() << " s still alive:" << alive << " rx_queued "
			       << queued << "\nall connections:" << all;
		std::this_thread::sleep_for(50ms);
	}
}

// Found by the fuzzer: a connect that times out while the CONNECT is on
// its way is abandoned by its file; when the peer's ACCEPT came after all,
// the connection stayed established with nobody able to close it (the
// file closed, its peer's passive side too).  Now it is closed at once.
TEST_F(IoctlFuzzTest, AbandonedConnectIsClosedWhenThePeerAccepts)
{
	ASSERT_NO_FATAL_FAILURE(make_pair(1));
	int timedout = 0;
	{
		auto d = c_->open_in(0);
		ME_ASSERT_OK(d);
		// A timeout of 1 ms: the answer comes later under emulation,
		// usually; some connects may still succeed.
		for (int i = 0; i < 50 && timedout < 5; i++) {
			me_connect cn{};
			cn.size = sizeof(cn);
			cn.peer = c_->id(1);
			cn.timeout_ms = 1;
			errno = 0;
			int r = ioctl(d->fd(), ME_IOC_CONNECT, &cn);
			if (r < 0) {
				ASSERT_EQ(errno, ETIMEDOUT) << errno_name(errno);
				timedout++;
			}
		}
	}
	if (timedout == 0)
		GTEST_SKIP() << "every connect was answered within 1 ms";
	std::printf("%d connects timed out\n", timedout);
	EXPECT_TRUE(connections_ended(*c_, 10s));
}

TEST_F(IoctlFuzzTest, RandomAndMutatedArgumentsLeaveNothingBehind)
{
	// MTU 9000: packets of whole pages.  With the default untracked
	// references over veth they carry the writers' pages, copied into
	// areas (flips are area_test's and area_life_test's, staged).
	ASSERT_NO_FATAL_FAILURE(make_pair(1, 9000));
	const uint64_t seed = test_seed(std::random_device{}());
	const int total = fuzz_seconds();
	RecordProperty("seed", std::to_string(seed));
	std::printf("seed %llu (ME_TEST_SEED repeats it), %d s in children of %.1f s\n",
		    static_cast<unsigned long long>(seed), total, child_seconds(total));

	ChildSetup s{};
	s.cluster = &*c_;
	s.ids[0] = c_->id(0);
	s.ids[1] = c_->id(1);
	s.links[0] = c_->node(0).ifnames.at(0);
	s.links[1] = c_->node(1).ifnames.at(0);
	s.trace = std::getenv("ME_FUZZ_TRACE") != nullptr;
	Tally t;
	KmsgReader log;
	const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(total);
	int children = 0;
	while (std::chrono::steady_clock::now() < end && !HasFailure()) {
		const double left =
			std::chrono::duration<double>(end - std::chrono::steady_clock::now()).count();
		s.seed = seed + static_cast<uint64_t>(children) * 0x9e3779b97f4a7c15ull;
		s.seconds = std::max(0.5, std::min(child_seconds(total), left));
		const bool go_on = run_child(s, children, t);
		children++;
		// Whatever the child left (regions, areas, operations, rings,
		// queued frames) is gone once it is, and its connections are
		// closed or dead on both sides.  (The "conns" count is of ids
		// the namespaces gave out: it falls only when they go.)
		EXPECT_TRUE(accounting_idle(false, 30s))
			<< "after child " << children - 1 << " (seed " << s.seed << ")";
		EXPECT_TRUE(connections_ended(*c_, 30s))
			<< "after child " << children - 1 << " (seed " << s.seed << ")";
		auto trouble = kernel_trouble(log.read_new());
		for (const auto &line : trouble)
			ADD_FAILURE() << "kernel log after child " << children - 1 << " (seed " << s.seed
				      << "): " << line;
		if (!go_on)
			break;
	}

	std::printf("%d children, %llu calls\n", children, static_cast<unsigned long long>(t.calls));
	std::map<std::string, std::string> lines;
	for (const auto &[key, n] : t.outcomes) {
		const auto &[door, cmd, err] = key;
		std::string name;
		if (door == kIoctl) {
			const Command *c = command_of(cmd);
			name = std::string("ioctl ") + (c ? c->name : "unknown");
		} else if (door == kUring) {
			name = cmd == ME_IOC_POST ? "uring POST" : "uring unknown";
		} else if (door == kMmap) {
			name = "mmap shape " + std::to_string(cmd);
		} else {
			name = "door " + std::to_string(door);
		}
		lines[name] += " " + (err ? errno_name(err) : std::string("ok")) + " " + std::to_string(n);
	}
	for (const auto &[name, line] : lines)
		std::printf("  %s:%s\n", name.c_str(), line.c_str());
	EXPECT_EQ(t.sets_up, static_cast<uint64_t>(children)) << "a child could not set up";
	// The fuzzer is not too blunt: things went through, on both doors.
	EXPECT_GT((t.outcomes[{kIoctl, ME_IOC_POST, 0}]), 0u) << "no post went through";
	EXPECT_GT((t.outcomes[{kIoctl, ME_IOC_MR_REG, 0}]), 0u) << "no registration went through";
	EXPECT_GT((t.outcomes[{kUring, ME_IOC_POST, 0}]), 0u) << "no io_uring post completed";
	EXPECT_GT((t.outcomes[{kMmap, kAreaGood, 0}]), 0u) << "no receive area was mapped";
}

} // namespace
