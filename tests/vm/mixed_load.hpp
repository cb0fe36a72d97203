// Sustained mixed load from one node to a peer (issue 14), shared by the
// one-guest test (two nodes as namespaces, mixed_test) and the two-guest
// test (one node per guest, pair_test).
//
// A node keeps 16 operations in flight to the peer: 8 on an ordered and 8
// on an unordered connection, each a write of 1 B-1 MiB at an unaligned
// offset, a write with notification, a read, or a send of 12 B-64 KiB.
// Every operation owns a slot of its target while in flight.  A read is checked
// against the peer's source, whose bytes both sides compute from the seed;
// a write or notify is read back into the node's own memory when it
// completes and compared with what was written; a message carries its
// number and a pattern.  No operation may take longer than kMixedBound.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "cluster.hpp"

namespace metest {

/*
 * The bound on one operation, from the module's timers (kernel/engine.c)
 * and these links: on an ordered connection an operation waits behind at
 * most the 7 others of its connection and their read-backs, up to 8 MiB,
 * which the two-guest links (5-7 MB/s per direction, shared by all four
 * connections, which take turns at the path windows: share.c) move in
 * about 3-4 s; plus loss recovery: sack detection within reorder_ns
 * (2 ms), else timeouts doubling up to rto_max (1 s); plus a guest vCPU
 * that stalls now and then.  10 s covers it (the slowest operation seen
 * in 20 s runs took 3.6 s; 7-9 s before the connections took turns, one
 * CI run's read passed 10 s); the freezes of issue 14 lasted 5-23 s, as
 * long as the load, so a load of 20 s or more still shows one.
 */
constexpr auto kMixedBound = std::chrono::seconds(10);

// Seconds of load: $ME_MIXED_SECONDS, else `fallback`.
int mixed_seconds(int fallback);

// Bytes of node `index`'s source buffer (both sides compute them).
void mixed_fill_source(std::uint8_t *p, std::size_t len, std::uint64_t seed, int index);

// One node's side.  setup() registers its buffers on `dev`; the caller
// then opens conns[0] (ordered) and conns[1] (unordered) to the peer and
// fills in the peer's regions.
struct MixedNode {
	static constexpr std::size_t kSrcLen = 32u << 20;

	int index = 0;			// 0 or 1: picks the source bytes and message numbers
	std::uint64_t seed = 0;
	multiedge::Device *dev = nullptr;
	std::optional<Buffer> src, dst, back, check, msgs;
	std::optional<multiedge::MemoryRegion> mr_src, mr_dst, mr_back, mr_check, mr_msgs;
	std::vector<multiedge::Connection> conns;	// [0] ordered, [1] unordered
	multiedge::RemoteRegion peer_src, peer_dst;
	std::vector<std::uint8_t> peer_src_bytes;	// the peer's source, computed

	// Registers the buffers; false (and a test failure) on error.
	bool setup(multiedge::Device &d, int idx, std::uint64_t sd);
	// The peer's source regions and bytes.
	void set_peer(const multiedge::RemoteRegion &src, const multiedge::RemoteRegion &dst);
	void release();
};

// Operation kinds, the index of MixedResult::by_kind.
enum MixedKind { kMixedWrite, kMixedNotify, kMixedRead, kMixedSend };

struct MixedResult {
	std::string failure;		// empty if all went well
	std::uint64_t ops = 0, bytes = 0;
	std::uint64_t by_kind[4] = {};	// write, notify, read, send (successful)
	std::chrono::steady_clock::duration max_lat[2] = {};	// [ordered, unordered]
	std::uint64_t notified = 0;	// the peer's notifies that landed here
	std::set<std::uint64_t> msgs_got;	// numbers of the peer's messages taken here
	std::uint64_t msgs_sent = 0;
	// Two-guest mode: the peer's final counts, from its last message.
	bool peer_final = false;
	std::uint64_t peer_notifies = 0, peer_sends = 0;

	std::string summary(int node) const;
};

// Runs the load for `seconds`, then waits for what is in flight.  `stop`
// ends it early (set by the other node's thread on a failure).  With
// `final_message`, sends the peer its counts as the last message and
// takes messages until the peer's counts arrived (two guests).
MixedResult run_mixed(MixedNode &node, int seconds, std::atomic<bool> &stop, bool final_message);

// Messages and notifications the peer's thread had not taken when its
// load ended (one process: called after both threads joined).
void mixed_drain(MixedNode &node, MixedResult &r);

// The peer's connection counters as one line each (for failure messages).
std::string mixed_counters(multiedge::Device &dev, const std::string &prefix);

} // namespace metest
