// SPDX-License-Identifier: GPL-2.0
// Deterministic discrete-event network simulator implementing the core's
// platform interface (me_plat.h): virtual time, links with rate, delay,
// loss, duplication, reordering and up/down, simulated registered memory.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <set>
#include <vector>

extern "C" {
#include "kernel/core/me_core.h"
#include "kernel/core/wire.h"
}

namespace mesim {

// splitmix64: small, fast and identical everywhere.
struct Rng {
	uint64_t s;
	explicit Rng(uint64_t seed) : s(seed) {}
	uint64_t next()
	{
		uint64_t z = (s += 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		return z ^ (z >> 31);
	}
	double uni() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
	uint64_t below(uint64_t n) { return n ? next() % n : 0; }
};

struct LinkParams {
	double gbps = 10.0;
	uint64_t delay_ns = 5000;
	double loss = 0, dup = 0, reorder = 0;
	uint64_t reorder_ns = 30000;	// extra delay of a reordered packet
};

// Ethernet header + FCS + preamble + inter-frame gap, counted on the wire.
constexpr uint32_t kEthOverhead = 14 + 4 + 8 + 12;

// A received frame as a host that flips pages passes it (me_core_rx_frame).
struct RxFrame {
	uint8_t *buf = nullptr;		// what the core parses
	std::vector<uint8_t> saved;	// the frame's real bytes
};

struct Region {
	std::vector<uint8_t> mem;
	std::vector<uint8_t> wcount;	// times each byte was written remotely
	uint64_t key = 0;
	uint32_t access = 0;
};

class Sim;

struct Node {
	Sim *sim = nullptr;
	int idx = 0;
	me_node_cfg cfg{};
	me_node *node = nullptr;
	std::map<uint32_t, Region> regions;
	std::vector<me_cqe> cqes;
	std::map<uint32_t, bool> conn_over;	// conn id -> closed/dead seen
	std::vector<uint32_t> retired;		// ids of retired connections
	std::set<uint32_t> open_ports;		// me_plat_ops.port_open says yes
	uint64_t writes_after_close = 0;
	std::set<uint64_t> write_keys;		// keys mr_write was given
	// mr_write with a frame reports ME_PLACE_COPIED for a whole page of
	// the region in its range, as a host whose frames hold no page it can
	// flip does (false: as one that flipped them).
	bool copies_pages = false;
	struct Place { uint32_t conn, region; uint64_t off; uint32_t len; };
	std::vector<Place> places;
	// Placed ranges per region not yet covered by mr_done.
	std::map<uint32_t, std::vector<std::pair<uint64_t, uint32_t>>> undone;
	uint64_t mr_dones = 0;
	uint64_t atomics = 0;	// atomics applied (mr_atomic)
	uint64_t mr_places = 0;	// write packets checked and placed in one call (mr_place)
	// Bytes mr_place was given per (conn, msg_id), and each msg_end: the
	// bytes placed of it by then, the engine's err, what it was told.
	std::map<std::pair<uint32_t, uint32_t>, uint64_t> msg_bytes;
	struct MsgEnd { uint32_t conn, msg_id, region; uint64_t len, placed; int err; };
	std::vector<MsgEnd> msg_ends;
	int msg_end_ret = 0;	// msg_end returns this when err is 0
	uint64_t rx_bad = 0;	// payload read outside the frame, or early notify
	std::vector<int> link_wire;	// local link index -> wire id, or -1
	std::vector<int> link_port;	// local link index -> switch port, or -1
	bool ticking = true;
	// A stalled host (an emulated guest's vCPU descheduled): until then
	// its timer, pacing and receive threads do nothing; frames that
	// arrive wait for its receive threads, which run just after the
	// timer's first pass (the order that makes the acks look missing).
	uint64_t frozen_until = 0;
	// The timer as the module runs it: every tick_ns, or the longer
	// period me_core_timer() returned until a kick (ops.timer_kick).
	uint64_t tick_gen = 0;		// the tick event that is current
	uint64_t next_tick = 0;		// when it runs
	uint64_t timer_passes = 0;
	uint64_t timer_kicks = 0;
	// Pacing (ops.pace_kick): me_core_pace() is due at pace_at (0: not).
	uint64_t pace_at = 0;
	uint64_t pace_calls = 0;
	// The ack timer (ops.ack_kick): me_core_acks() is due at ack_at (0:
	// not); ack_gen names the current request, ack_cancels counts drops.
	uint64_t ack_at = 0;
	uint64_t ack_gen = 0;
	uint64_t ack_calls = 0;
	uint64_t ack_cancels = 0;
	// Frames waiting for the link's receive thread (Sim::rx_batch_ns).
	struct Queued { uint64_t src, t; std::vector<uint8_t> pkt; };	// t: arrival
	std::map<uint32_t, std::vector<Queued>> rxq;
	std::map<uint32_t, bool> rx_armed;	// the link's thread is due or busy
	uint64_t rx_cpu_free = 0;	// the receive CPU's end of work (rx_cpu_ns_per_kb)

	// Zero-copy references (me_plat.h), modelled as the module keeps
	// them: an operation's payload is alive while the engine has not
	// completed it or a reference is held.
	std::map<uint64_t, int64_t> zc_refs;	// cookie -> references held
	std::map<uint64_t, bool> zc_engine_done;	// cookie -> completed
	uint64_t zc_bad = 0;		// put below zero, or tx without a reference
	uint64_t zc_revived = 0;	// hold on a completed op with none held:
					// a use after free unless the cookie was reused
	uint64_t zc_tx_pkts = 0;
	// Read answers by reference (resp_hold): handle -> region, one per
	// window entry holding one.
	std::map<uint64_t, uint32_t> resp_held;
	uint64_t resp_next = 1;
	uint64_t resp_tx_pkts = 0;
	// Transmit bursts (me_plat.h): packets held until the outermost close,
	// as the module hands them to its driver.
	int burst_depth = 0;
	uint64_t burst_held = 0;	// packets that waited for a close
	uint64_t burst_bad = 0;		// close without an open
	struct Held { uint32_t link; uint64_t dst; std::vector<uint8_t> pkt; };
	std::vector<Held> burst;
	int64_t zc_outstanding() const
	{
		int64_t s = 0;
		for (const auto &[c, r] : zc_refs)
			s += r;
		return s + (int64_t)resp_held.size();
	}
};

struct Wire {
	int node[2];
	uint32_t link[2];
	LinkParams p[2];	// per direction: p[d] for packets sent by node[d]
	bool up = true;
	uint64_t busy_until[2] = {0, 0};
	uint64_t bytes[2] = {0, 0};	// payload-carrying bytes, for figures
};

// A node's link plugged into a switch: up is the node's NIC and cable to
// the switch, down the switch's output port toward the node.
struct Port {
	int sw = 0, node = 0;
	uint32_t link = 0;
	LinkParams up, down;
	bool tx_ok = true;	// the node's transmit works (one-way failures)
	bool rx_ok = true;	// frames reach the node
	uint64_t nic_busy = 0, out_busy = 0;
	uint64_t queue_drops = 0;	// output queue full
	uint64_t out_max = 0;		// deepest output queue seen, bytes
	// Stalls of the output port (0: none), as a receiving host that
	// stops draining its socket for a while (an emulated guest's QEMU
	// descheduled): the port sends nothing for 0-stall_max ns, then works
	// for 0-2 x stall_every ns until the next stall; frames meanwhile wait
	// in its queue and are dropped once it is full.
	uint64_t stall_every = 0, stall_max = 0;
	uint64_t next_stall = 0, stall_start = 0, stall_end = 0;
};

struct Switch {
	uint64_t queue_bytes;	// per output port
	std::vector<int> ports;
};

// One packet of a frame a node sends: hooks see an ack that carries a
// packet (ME_F_CARRY, wire 9) and then that packet, `carried` set.
struct TxEvent {
	int node;
	uint32_t link;
	uint64_t t;
	me_hdr h;
	bool parsed;
	bool carried = false;
	const uint8_t *raw = nullptr;	// the packet's bytes, to its frame's end
	uint32_t raw_len = 0;
};

class Sim {
public:
	explicit Sim(uint64_t seed);
	~Sim();
	void deliver(Node &n, uint32_t link, uint64_t src, std::vector<uint8_t> pkt);
	// A frame injected on a link as if from its other end (a wire's).
	void deliver(Node &n, uint32_t link, std::vector<uint8_t> pkt);
	// A node's link-layer address on its link l.
	static uint64_t addr(int node, uint32_t l)
	{
		return 0x020000000000ull | (uint64_t)(node + 1) << 8 | l;
	}

	Node &add_node(const me_node_cfg &cfg);
	int add_link(int a, int b, const LinkParams &pa, const LinkParams &pb);
	int add_link(int a, int b, const LinkParams &p) { return add_link(a, b, p, p); }
	void set_wire_up(int w, bool up) { wires[w].up = up; }
	// A switch whose output ports queue queue_bytes at most.
	int add_switch(uint64_t queue_bytes = 256 * 1024);
	// Plugs a new link of `node` into switch sw; returns the port.
	int plug(int node, int sw, const LinkParams &up, const LinkParams &down);
	int plug(int node, int sw, const LinkParams &p = {}) { return plug(node, sw, p, p); }
	// Destroy a node's engine and start a new one with a new incarnation.
	void restart(int idx, uint32_t new_inc);

	void add_region(int node, uint32_t id, size_t size, uint64_t key,
			uint32_t access, uint8_t fill = 0);

	void at(uint64_t t, std::function<void()> fn);
	// Run until pred() holds or virtual time passes limit; true if pred held.
	bool run(const std::function<bool()> &pred, uint64_t limit);
	void run_for(uint64_t dt);

	// Establish a connection a -> b; returns (conn at a, conn id at b).
	me_conn *connect(int a, int b, uint32_t mode, uint32_t *peer_id = nullptr);

	uint64_t now = 0;
	Rng rng;
	std::vector<std::unique_ptr<Node>> nodes;
	std::vector<Wire> wires;
	std::vector<Switch> switches;
	std::vector<Port> ports;
	uint64_t misaddressed = 0;	// unicast frames to an address nobody has
	uint64_t credit_violations = 0;
	uint64_t data_pkts = 0;
	std::function<bool(const TxEvent &)> drop_hook;	// true = drop
	std::function<void(const TxEvent &)> tx_hook;
	std::function<void(Node &, const me_cqe &)> cqe_hook;
	// Runs when node n's core asks for a frame's payload (rx_fill): after
	// it claimed the frame's slot, before it scans the window.
	std::function<void(Node &)> rx_fill_hook;
	// Hand data frames over with their payload only reachable through
	// mr_write's rx (as a flipping host does); false: plain buffers.
	bool frame_payload = true;
	// 0: each frame reaches the core when it arrives.  Else a link's
	// receive thread wakes this long after a frame found it idle and
	// hands the core everything queued by then as receive batches of
	// up to kRxBatch frames (me_core_rx_batch), as the module's do.
	uint64_t rx_batch_ns = 0;
	static constexpr size_t kRxBatch = 64;
	// 0: receiving costs no time.  Else (with rx_batch_ns) the receive
	// threads of a node's links share one CPU: a batch takes this many
	// ns per KiB of its frames before the core sees it, and a thread
	// that wakes while another's batch is in work waits for it.  A
	// bottleneck all of a node's paths share, as one guest's receiving
	// vCPU is for its veth links.
	uint64_t rx_cpu_ns_per_kb = 0;

	// platform
	int tx(Node &n, uint32_t link, uint64_t dst, const void *buf, uint32_t len);
	// Zero-copy references still held on any node, and misuses seen.
	int64_t zc_outstanding() const;
	uint64_t zc_bad() const;

	// ops.timer_kick: the node's timer runs within a tick, as if it had
	// never stopped ticking, not at its idle period's end.
	void timer_kick(Node &n);
	// ops.pace_kick: me_core_pace() at `at`, as a high-resolution timer.
	void pace_kick(Node &n, uint64_t at);
	// ops.ack_kick: me_core_acks() at `at`, or none (0) while no ack
	// is held, as the module's hrtimer.
	void ack_kick(Node &n, uint64_t at);

private:
	struct Ev {
		uint64_t t, seq;
		std::function<void()> fn;
		bool operator<(const Ev &o) const
		{
			return t != o.t ? t > o.t : seq > o.seq;
		}
	};
	std::priority_queue<Ev> q;
	uint64_t evseq = 0;
	void tick(int idx, uint64_t gen);
	void schedule_tick(Node &n, uint64_t t);
	void rx_drain(Node &n, uint32_t link);
	void rx_handle(Node &n, uint32_t link, std::vector<Node::Queued> &q);
	void rx_finish(Node &n, uint32_t link, std::shared_ptr<std::vector<Node::Queued>> batch);
	void deliver_one(Node &n, uint32_t link, uint64_t src, std::vector<uint8_t> pkt,
			 me_rx_batch *b);
	int port_tx(Node &n, uint32_t link, uint64_t dst, const void *buf, uint32_t len);
	std::vector<TxEvent> frame_events(Node &n, uint32_t link, const void *buf, uint32_t len);
	bool frame_dropped(const std::vector<TxEvent> &evs);
	void switch_forward(int in, uint64_t src, uint64_t dst, const std::vector<uint8_t> &pkt);
	void start_node(Node &n);
	void credit_check(int node, const me_hdr &h);
	std::map<std::pair<int, uint32_t>, uint32_t> right;	// (node, conn)
	std::map<std::pair<int, uint32_t>, std::pair<uint32_t, uint32_t>> conn_req;
};

// The simulator's platform operations (for engines a test creates itself).
const me_plat_ops *sim_plat();

// Node `id` of the simulator, in incarnation `inc`.
me_node_cfg default_cfg(uint32_t id, uint32_t inc = 1);
// The engine configured as the module configures it (kernel/engine.c).
me_node_cfg module_cfg(uint32_t id, uint32_t mtu = 9000);

}  // namespace mesim
