// SPDX-License-Identifier: GPL-2.0
// A request's ack carried by its reply (ME_F_CARRY, wire 9): once a
// connection is seen answering quickly, a request and its reply cost a
// frame each way, not two; a stream, an answer that does not come and an
// answer too large to take the ack along keep acks of their own.
#include "harness.hpp"

using namespace mesim;

namespace {

struct Frames {
	uint64_t alone[2] = {};		// acks and nacks in frames of their own
	uint64_t carrying[2] = {};	// acks that carried a packet
	uint64_t data[2] = {};		// sequenced packets, alone or carried
};

void count_frames(Sim &sim, Frames &f)
{
	sim.tx_hook = [&f](const TxEvent &e) {
		if (!e.parsed)
			return;
		if (e.h.type == ME_PT_ACK && (e.h.flags & ME_F_CARRY))
			f.carrying[e.node]++;
		else if (e.h.type == ME_PT_ACK || e.h.type == ME_PT_NACK)
			f.alone[e.node]++;
		else if (me_pt_sequenced(e.h.type))
			f.data[e.node]++;
	};
}

uint64_t stat(Sim &sim, int node, enum me_stat st)
{
	return me_node_stat(sim.nodes[node]->node, st);
}

// Node 0 sends a notify of `ask` bytes; node 1 answers each with a notify
// of `answer` bytes `think` ns after it landed, node 0 asks again `think`
// ns after the answer landed; `rounds` times, answering only the first
// `answered` requests.
struct PingPong {
	Sim &sim;
	Workload w;
	me_conn *c[2] = {};
	uint32_t ask, answer;
	uint32_t ask_flags = 0;		// ME_RW_* of node 0's requests
	uint64_t think;
	int rounds = 0, answered = 0, asked = 0, answers = 0;
	uint64_t last_ask = 0;		// when node 0 posted its last request
	int answers_in = 0, asks_done = 0;	// at node 0
	int answer_first = 0;	// request completed after its answer landed

	PingPong(Sim &s, uint64_t seed, uint32_t ask_len, uint32_t answer_len, uint64_t think_ns)
		: sim(s), w(s, seed), ask(ask_len), answer(answer_len), think(think_ns)
	{
		uint32_t pid = 0;
		c[0] = sim.connect(0, 1, ME_MODE_UNORDERED, &pid);
		c[1] = me_conn_get(sim.nodes[1]->node, pid);
		sim.cqe_hook = [this](Node &n, const me_cqe &q) {
			w.on_cqe(n, q);
			if (n.idx == 0 && q.type == ME_CQE_WRITE && answers_in > asks_done++)
				answer_first++;
			if (q.type != ME_CQE_NOTIFY)
				return;
			if (n.idx == 0)
				answers_in++;
			// Posting from inside a completion would call into the core.
			if (n.idx == 1 && answers < answered) {
				answers++;
				sim.at(sim.now + think, [this] { post(1, answer); });
			} else if (n.idx == 0 && asked < rounds) {
				sim.at(sim.now + think, [this] { post(0, ask); });
			}
		};
	}
	void post(int from, uint32_t len)
	{
		if (from == 0) {
			asked++;
			last_ask = sim.now;
		}
		ASSERT_EQ(w.submit(c[from], from, Op::NOTIFY, len, from == 0 ? ask_flags : 0), 0);
	}
	void run(int n, int n_answered)
	{
		rounds = n;
		answered = n_answered;
		post(0, ask);
		ASSERT_TRUE(sim.run([&] { return asked == rounds && w.all_done(); },
				    sim.now + 20000000000ull));
		// Let a last held ack go (no answer takes it along).
		sim.run_for(5000000);
		w.check();
	}
};

}  // namespace

// Answers of several packets: the ack of the request waits for the first
// of them.
TEST(Carry, answers_of_several_packets__carry_too)
{
	Sim sim(606);
	setup_pair(sim, 1, {}, default_cfg(1), default_cfg(2));
	Frames f;
	count_frames(sim, f);
	PingPong pp(sim, 606, 3000, 20000, 10000);
	ASSERT_NE(pp.c[0], nullptr);
	pp.run(50, 50);
	EXPECT_GE(f.carrying[0], 45u);
	EXPECT_GE(f.carrying[1], 45u);
	EXPECT_LE(stat(sim, 1, ME_ST_ACK_HOLD_EXPIRED), 0u);
}

// 200 round trips of small notifies: after the first, each answer carries
// the ack of its request and each request the ack of the answer before
// it: one frame each way per round trip.
TEST(Carry, ping_pong__one_frame_each_way)
{
	Sim sim(601);
	setup_pair(sim, 1, {}, default_cfg(1), default_cfg(2));
	Frames f;
	count_frames(sim, f);
	PingPong pp(sim, 601, 8, 8, 10000);
	ASSERT_NE(pp.c[0], nullptr);
	ASSERT_NE(pp.c[1], nullptr);
	const uint64_t a0[2] = {f.alone[0], f.alone[1]}, d0[2] = {f.data[0], f.data[1]};
	pp.run(200, 200);
	for (int n = 0; n < 2; n++) {
		SCOPED_TRACE(n);
		EXPECT_EQ(f.data[n] - d0[n], 200u);	// nothing resent
		EXPECT_GE(f.carrying[n], 196u);
		EXPECT_LE(f.alone[n] - a0[n], 3u);
		EXPECT_EQ(stat(sim, n, ME_ST_TX_ACK_CARRIED), f.carrying[n]);
		// Only node 0's last answer waits in vain: nothing asks again.
		EXPECT_LE(stat(sim, n, ME_ST_ACK_HOLD_EXPIRED), n == 0 ? 1u : 0u);
	}
	EXPECT_EQ(stat(sim, 0, ME_ST_RX_DUP) + stat(sim, 1, ME_ST_RX_DUP), 0u);
	// The answer is taken before the ack that rode with it.
	EXPECT_GE(pp.answer_first, 196);
}

// A one-way stream of writes: nothing answers, no ack is held.
TEST(Carry, one_way_stream__acks_not_held)
{
	Sim sim(602);
	setup_pair(sim, 1, {}, default_cfg(1), default_cfg(2));
	me_conn *c = sim.connect(0, 1, ME_MODE_UNORDERED);
	ASSERT_NE(c, nullptr);
	Workload w(sim, 602);
	for (int i = 0; i < 300; i++) {
		int r;
		while ((r = w.submit(c, 0, i % 2 ? Op::NOTIFY : Op::WRITE, 100 + 37 * i)) == -EAGAIN)
			sim.run_for(10000);
		ASSERT_EQ(r, 0);
	}
	ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 2000000000ull));
	w.check();
	EXPECT_EQ(stat(sim, 1, ME_ST_ACK_HELD), 0u);
	EXPECT_EQ(stat(sim, 1, ME_ST_TX_ACK_CARRIED), 0u);
}

// Answers stop: the request's held ack goes alone after ack_hold_ns, and
// the next requests are acked at once again.
TEST(Carry, answers_stop__ack_sent_by_timer__holding_ends)
{
	Sim sim(603);
	setup_pair(sim, 1, {}, default_cfg(1), default_cfg(2));
	PingPong pp(sim, 603, 64, 64, 20000);
	ASSERT_NE(pp.c[0], nullptr);
	pp.run(30, 29);		// the 30th request is not answered
	EXPECT_EQ(stat(sim, 1, ME_ST_ACK_HOLD_EXPIRED), 1u);
	// The unanswered request completed one hold (and a tick) late.
	const uint64_t hold = sim.nodes[1]->cfg.ack_hold_ns;
	uint64_t posted = 0, done = 0;
	Workload &w = pp.w;
	sim.cqe_hook = [&](Node &n, const me_cqe &q) {
		w.on_cqe(n, q);
		if (n.idx == 0 && q.type == ME_CQE_WRITE)
			done = sim.now;
	};
	const uint64_t held = stat(sim, 1, ME_ST_ACK_HELD);
	for (int i = 0; i < 5; i++) {
		posted = sim.now;
		done = 0;
		ASSERT_EQ(w.submit(pp.c[0], 0, Op::WRITE, 64), 0);
		ASSERT_TRUE(sim.run([&] { return done != 0; }, sim.now + 100000000ull));
		EXPECT_LT(done - posted, hold / 2) << i;	// acked at once
		sim.run_for(100000);
	}
	EXPECT_EQ(stat(sim, 1, ME_ST_ACK_HELD), held);
	w.check();
}

// The held ack of the last unanswered request: it completes after the
// hold, not before (the timer does not send it at its next tick).
TEST(Carry, unanswered_request__completes_after_the_hold)
{
	Sim sim(604);
	setup_pair(sim, 1, {}, default_cfg(1), default_cfg(2));
	PingPong pp(sim, 604, 64, 64, 20000);
	ASSERT_NE(pp.c[0], nullptr);
	pp.rounds = 10;
	pp.answered = 9;
	uint64_t done = 0;
	sim.cqe_hook = [&, inner = sim.cqe_hook](Node &n, const me_cqe &q) {
		inner(n, q);
		if (n.idx == 0 && q.type == ME_CQE_WRITE && pp.asked == 10)
			done = sim.now;
	};
	pp.post(0, 64);
	ASSERT_TRUE(sim.run([&] { return done != 0; }, sim.now + 1000000000ull));
	const uint64_t hold = sim.nodes[1]->cfg.ack_hold_ns, tick = sim.nodes[1]->cfg.tick_ns;
	EXPECT_GE(done - pp.last_ask, hold);
	EXPECT_LE(done - pp.last_ask, hold + 2 * tick + 100000);
	EXPECT_EQ(stat(sim, 1, ME_ST_ACK_HOLD_EXPIRED), 1u);
	sim.run_for(5000000);
	pp.w.check();
}

// Answers of a whole packet leave no room for the ack: it goes alone, at
// once, beside the answer, never waiting for the timer.  (At an MTU of
// 1500 no message is cut at page boundaries, which would leave room.)
TEST(Carry, answer_too_large__ack_goes_beside_it)
{
	Sim sim(605);
	me_node_cfg a = default_cfg(1), b = default_cfg(2);
	a.mtu = b.mtu = 1500;
	setup_pair(sim, 1, {}, a, b);
	Frames f;
	count_frames(sim, f);
	PingPong pp(sim, 605, 8, b.mtu - ME_HDR_SEQ, 10000);
	ASSERT_NE(pp.c[0], nullptr);
	pp.run(50, 50);
	EXPECT_GT(stat(sim, 1, ME_ST_ACK_HELD), 40u);
	EXPECT_EQ(f.carrying[1], 0u);
	EXPECT_EQ(stat(sim, 1, ME_ST_ACK_HOLD_EXPIRED), 0u);
	// Node 0's small requests still carry its acks of the answers.
	EXPECT_GE(f.carrying[0], 45u);
}

// Lost, duplicated and reordered frames, carried packets among them:
// every request and answer lands once and completes once.
TEST(Carry, lossy_link__each_once)
{
	LinkParams lp;
	lp.loss = 0.05;
	lp.dup = 0.05;
	lp.reorder = 0.05;
	for (uint64_t seed = 610; seed < 614; seed++) {
		SCOPED_TRACE(seed);
		Sim sim(seed);
		setup_pair(sim, 1, lp, default_cfg(1), default_cfg(2));
		PingPong pp(sim, seed, 1 + (uint32_t)(seed % 3) * 700, 300, 5000);
		ASSERT_NE(pp.c[0], nullptr);
		pp.run(150, 150);
		EXPECT_GT(stat(sim, 1, ME_ST_TX_ACK_CARRIED), 50u);
	}
}

// Crafted frames: an ack carries only a sequenced packet between the same
// two nodes, which must pass the checks of its own connection; anything
// else in that place is counted and dropped, the ack itself still taken,
// and a carried packet is taken even when its ack is not.
TEST(Carry, crafted__only_a_valid_packet_taken)
{
	Sim sim(620);
	setup_pair(sim, 1, {}, default_cfg(1), default_cfg(2));
	PingPong pp(sim, 620, 8, 8, 10000);
	ASSERT_NE(pp.c[0], nullptr);
	std::vector<uint8_t> real;	// node 0's first carrying frame
	sim.tx_hook = [&](const TxEvent &e) {
		if (e.node == 0 && !e.carried && e.parsed && (e.h.flags & ME_F_CARRY) &&
		    real.empty())
			real.assign(e.raw, e.raw + e.raw_len);
	};
	pp.run(20, 20);
	ASSERT_FALSE(real.empty());
	me_node *b = sim.nodes[1]->node;
	auto send = [&](std::vector<uint8_t> fr) { sim.deliver(*sim.nodes[1], 0, sim.addr(0, 0), fr); };
	auto st = [&](enum me_stat s) { return me_node_stat(b, s); };
	const uint64_t field0 = st(ME_ST_RX_FIELD), stale0 = st(ME_ST_RX_STALE);
	const uint64_t cookie0 = st(ME_ST_RX_COOKIE), dup0 = st(ME_ST_RX_DUP);
	// The real frame again: the ack is old news, the packet a duplicate.
	send(real);
	EXPECT_EQ(st(ME_ST_RX_DUP), dup0 + 1);
	// A carried packet of a connection that does not exist (dst_conn + 1).
	auto other = real;
	me_put_be32(&other[ME_HDR_ACK + 28], me_get_be32(&other[ME_HDR_ACK + 28]) + 1);
	send(other);
	EXPECT_EQ(st(ME_ST_RX_STALE), stale0 + 1);
	// Its own connection, a wrong cookie.
	auto cookie = real;
	cookie[ME_HDR_ACK + 39] ^= 1;
	send(cookie);
	EXPECT_EQ(st(ME_ST_RX_COOKIE), cookie0 + 1);
	// From another node than the ack.
	auto stranger = real;
	me_put_be32(&stranger[ME_HDR_ACK + 8], 7);
	send(stranger);
	// An ack carrying an ack (which might carry another).
	auto acks = real;
	std::copy(real.begin(), real.begin() + ME_HDR_ACK, acks.begin() + ME_HDR_ACK);
	send(acks);
	// Room for no packet after the ack: the ack is malformed.
	send(std::vector<uint8_t>(real.begin(), real.begin() + ME_HDR_ACK + 10));
	// CARRY on anything but an ack.
	auto seq = std::vector<uint8_t>(real.begin() + ME_HDR_ACK, real.end());
	seq[3] |= ME_F_CARRY;
	send(seq);
	EXPECT_EQ(st(ME_ST_RX_FIELD), field0 + 4);
	// The ack fails its connection's checks: the packet it carries is
	// still taken (here: a duplicate again).
	auto bad_ack = real;
	bad_ack[39] ^= 1;
	const uint64_t dup1 = st(ME_ST_RX_DUP), cookie1 = st(ME_ST_RX_COOKIE);
	send(bad_ack);
	EXPECT_EQ(st(ME_ST_RX_COOKIE), cookie1 + 1);
	EXPECT_EQ(st(ME_ST_RX_DUP), dup1 + 1);
	// A truncated packet.
	const uint64_t short0 = st(ME_ST_RX_SHORT);
	auto cut = real;
	cut.resize(ME_HDR_ACK + ME_HDR_SEQ - 1);
	send(cut);
	EXPECT_EQ(st(ME_ST_RX_SHORT), short0 + 1);
	sim.run_for(5000000);
	EXPECT_EQ(me_conn_state(pp.c[0]), ME_CS_ESTABLISHED);
	pp.w.check();
}

// Requests on one connection, answers on another (one each way, as the
// libfabric provider and me_bench open them): the answers carry the acks
// of the requests all the same.
TEST(Carry, answers_on_another_connection__carry_its_acks)
{
	Sim sim(630);
	setup_pair(sim, 1, {}, default_cfg(1), default_cfg(2));
	me_conn *ab = sim.connect(0, 1, ME_MODE_UNORDERED);
	me_conn *ba = sim.connect(1, 0, ME_MODE_UNORDERED);
	ASSERT_NE(ab, nullptr);
	ASSERT_NE(ba, nullptr);
	Frames f;
	count_frames(sim, f);
	Workload w(sim, 630);
	int asked = 0;
	sim.cqe_hook = [&](Node &n, const me_cqe &q) {
		w.on_cqe(n, q);
		if (q.type != ME_CQE_NOTIFY)
			return;
		if (n.idx == 1)
			sim.at(sim.now + 10000, [&] { ASSERT_EQ(w.submit(ba, 1, Op::NOTIFY, 16), 0); });
		else if (asked < 100)
			sim.at(sim.now + 10000, [&] {
				asked++;
				ASSERT_EQ(w.submit(ab, 0, Op::NOTIFY, 16), 0);
			});
	};
	asked++;
	ASSERT_EQ(w.submit(ab, 0, Op::NOTIFY, 16), 0);
	ASSERT_TRUE(sim.run([&] { return asked == 100 && w.all_done(); }, sim.now + 1000000000ull));
	sim.run_for(5000000);
	w.check();
	EXPECT_GE(f.carrying[0], 95u);
	EXPECT_GE(f.carrying[1], 95u);
	EXPECT_LE(f.alone[0] + f.alone[1], 6u);
}

// The requester closes right after the last answer landed, while it holds
// that answer's ack: the ack carries the CLOSE, which the peer takes first
// and which completes the answer itself, being below its cut (wire 15).
TEST(Carry, close_after_the_last_answer__answer_completes)
{
	Sim sim(608);
	setup_pair(sim, 1, {}, default_cfg(1), default_cfg(2));
	uint64_t close_carrying = 0, ack_before_close = 0;
	bool closing = false;
	sim.tx_hook = [&](const TxEvent &e) {
		if (!e.parsed || e.node != 0 || !closing)
			return;
		if (e.h.type == ME_PT_CLOSE && e.carried)
			close_carrying++;
		if (e.h.type == ME_PT_ACK && !(e.h.flags & ME_F_CARRY))
			ack_before_close++;
	};
	PingPong pp(sim, 608, 8, 8, 10000);
	ASSERT_NE(pp.c[0], nullptr);
	pp.rounds = 20;
	pp.answered = 20;
	sim.cqe_hook = [&, inner = sim.cqe_hook](Node &n, const me_cqe &q) {
		inner(n, q);
		if (n.idx == 0 && q.type == ME_CQE_NOTIFY && pp.answers_in == pp.rounds) {
			closing = true;
			sim.at(sim.now + 1000, [&] { ASSERT_EQ(me_conn_close(pp.c[0]), 0); });
		}
	};
	pp.post(0, 8);
	ASSERT_TRUE(sim.run([&] {
		return pp.w.all_done() && me_conn_state(pp.c[0]) == ME_CS_CLOSED;
	}, sim.now + 1000000000ull));
	// Every ack node 0 held rode on its next request, the last one on
	// the CLOSE.
	EXPECT_GE(stat(sim, 0, ME_ST_ACK_HELD), 15u);
	EXPECT_EQ(stat(sim, 0, ME_ST_ACK_HELD), stat(sim, 0, ME_ST_TX_ACK_CARRIED));
	EXPECT_EQ(close_carrying, 1u);
	EXPECT_EQ(ack_before_close, 0u);
	EXPECT_EQ(stat(sim, 0, ME_ST_ACK_HOLD_EXPIRED), 0u);
	pp.w.check();	// every answer completed with success
}

// With the module's timing (1 ms tick, 1 ms hold, 5 ms minimum RTO), a
// ping-pong kicks each timer once: its first packet times out before
// the idle timer's next pass (a keepalive's, up to 20 ms away); after
// it the timer passes by each packet's timeout, which the next packet's
// never comes before.  Each request's ack rides on its answer and the
// ack timer that the hold armed is dropped (ops.ack_kick(0)).  The
// timers pass every 5 ms, not every tick.  The last, unanswered request
// is acked by the ack timer when its hold ends, not at a tick after it.
TEST(Carry, ping_pong__no_tick_one_kick__the_ack_timer_sends_what_no_answer_took)
{
	Sim sim(606);
	me_node_cfg ca = module_cfg(1), cb = module_cfg(2);
	ca.ack_hold_ns = cb.ack_hold_ns = 1000000;
	LinkParams lp;
	lp.delay_ns = 20000;
	setup_pair(sim, 1, lp, ca, cb);
	PingPong pp(sim, 606, 64, 64, 0);
	ASSERT_NE(pp.c[0], nullptr);
	sim.run_for(100000000);
	Node &a = *sim.nodes[0], &b = *sim.nodes[1];
	const uint64_t pa = a.timer_passes, pb = b.timer_passes, ka = a.timer_kicks,
		       kb = b.timer_kicks, xb = b.ack_cancels, t0 = sim.now;
	uint64_t done = 0;
	sim.cqe_hook = [&, inner = sim.cqe_hook](Node &n, const me_cqe &q) {
		inner(n, q);
		if (n.idx == 0 && q.type == ME_CQE_WRITE && pp.asked == pp.rounds)
			done = sim.now;
	};
	pp.rounds = 1000;
	pp.answered = 999;
	pp.post(0, 64);
	ASSERT_TRUE(sim.run([&] { return done != 0; }, sim.now + 10000000000ull));
	const uint64_t ms = (pp.last_ask - t0) / 1000000;
	printf("%d round trips in %llu ms: timer passes %llu and %llu, kicks %llu and %llu, held acks dropped %llu, last request acked %llu us after it was sent\n",
	       pp.asked - 1, (unsigned long long)ms, (unsigned long long)(a.timer_passes - pa),
	       (unsigned long long)(b.timer_passes - pb), (unsigned long long)(a.timer_kicks - ka),
	       (unsigned long long)(b.timer_kicks - kb), (unsigned long long)(b.ack_cancels - xb),
	       (unsigned long long)(done - pp.last_ask) / 1000);
	ASSERT_GE(ms, 20u);
	EXPECT_LE(a.timer_kicks, ka + 1);
	EXPECT_LE(b.timer_kicks, kb + 1);
	// The minimum RTO is 5 ms: a pass per 5 ms and a few, not per ms.
	EXPECT_LE(a.timer_passes - pa, ms / 5 + 3);
	EXPECT_LE(b.timer_passes - pb, ms / 5 + 3);
	EXPECT_GE(b.ack_cancels - xb, 900u);
	EXPECT_GE(done - pp.last_ask, cb.ack_hold_ns);
	EXPECT_LT(done - pp.last_ask, cb.ack_hold_ns + 200000);
	EXPECT_EQ(stat(sim, 1, ME_ST_ACK_HOLD_EXPIRED), 1u);
	sim.run_for(20000000);
	// Nothing held is left counted, and no ack timer is left armed.
	for (Node *n : {&a, &b}) {
		EXPECT_FALSE(me_core_acks_pending(n->node)) << n->idx;
		EXPECT_EQ(n->ack_at, 0u) << n->idx;
	}
	pp.w.check();
}

// Requests whose poster waits for their completion (ME_RW_ACK_NOW, wire
// 18): the peer acks each at once although it answers them all, so a
// request completes before its answer lands however long the answer takes;
// the answers' acks are still held and carried by the next requests.
// Without the flag (the same exchange) the answer carries the ack.
TEST(Carry, waited_request__acked_at_once__answers_still_carry)
{
	for (uint32_t flags : {0u, (uint32_t)ME_RW_ACK_NOW}) {
		SCOPED_TRACE(flags);
		Sim sim(640);
		setup_pair(sim, 1, {}, default_cfg(1), default_cfg(2));
		Frames f;
		count_frames(sim, f);
		uint64_t flagged = 0;
		sim.tx_hook = [&flagged, inner = sim.tx_hook](const TxEvent &e) {
			inner(e);
			if (e.parsed && (e.h.flags & ME_F_NOW))
				flagged++;
		};
		// The answer comes 60 us after its request landed: many times
		// the link's round trip, within the hold (100 us).
		PingPong pp(sim, 640, 64, 64, 60000);
		ASSERT_NE(pp.c[0], nullptr);
		pp.ask_flags = flags;
		pp.run(100, 100);
		EXPECT_EQ(stat(sim, 1, ME_ST_ACK_NOW), flagged);
		if (flags) {
			EXPECT_EQ(flagged, 100u);
			EXPECT_EQ(stat(sim, 1, ME_ST_ACK_HELD), 0u);
			EXPECT_EQ(pp.answer_first, 0);
			EXPECT_GE(f.alone[1], 100u);
			EXPECT_EQ(stat(sim, 1, ME_ST_TX_ACK_CARRIED), 0u);
		} else {
			EXPECT_EQ(flagged, 0u);
			EXPECT_GE(stat(sim, 1, ME_ST_ACK_HELD), 96u);
			EXPECT_GE(pp.answer_first, 96);
			EXPECT_LE(f.alone[1], 4u);
		}
		// Node 0 holds the answers' acks for its next request either way.
		EXPECT_GE(stat(sim, 0, ME_ST_TX_ACK_CARRIED), 96u);
		EXPECT_EQ(stat(sim, 1, ME_ST_ACK_HOLD_EXPIRED), 0u);
	}
}

// Small writes packed into one frame: one of them waited for flags the
// whole PACK, and the peer holds none of their acks; a pack of writes
// nobody waits for is not flagged.
TEST(Carry, waited_write_in_a_pack__the_pack_flagged)
{
	Sim sim(641);
	setup_pair(sim, 1, {}, default_cfg(1), default_cfg(2));
	me_conn *c = sim.connect(0, 1, ME_MODE_UNORDERED);
	ASSERT_NE(c, nullptr);
	Workload w(sim, 641);
	int packs = 0, flagged = 0;
	sim.tx_hook = [&](const TxEvent &e) {
		if (e.parsed && e.node == 0 && e.h.type == ME_PT_PACK) {
			packs++;
			flagged += (e.h.flags & ME_F_NOW) != 0;
		}
	};
	for (int round = 0; round < 2; round++) {
		ASSERT_EQ(w.submit(c, 0, Op::WRITE, 16, ME_RW_MORE), 0);
		ASSERT_EQ(w.submit(c, 0, Op::NOTIFY, 16, ME_RW_MORE), 0);
		ASSERT_EQ(w.submit(c, 0, Op::WRITE, 16, round ? 0 : ME_RW_ACK_NOW), 0);
		ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 100000000ull));
	}
	EXPECT_EQ(packs, 2);
	EXPECT_EQ(flagged, 1);
	w.check();
}

// NOW is a write's, notify's or pack's, on its last packet: anywhere
// else the packet is malformed.
TEST(Carry, now_flag__only_on_a_last_write_notify_or_pack)
{
	me_hdr h{};
	h.version = ME_WIRE_VERSION;
	h.src_node = 1;
	h.dst_node = 2;
	h.src_conn = 1;
	h.dst_conn = 1;
	h.src_inc = 1;
	h.dst_inc = 1;
	h.cookie = 5;
	h.d.seq = 10;
	h.d.region = 1;
	h.d.key = 0x1234;
	auto parse = [&](uint32_t type, uint16_t flags, uint32_t pay) {
		h.type = type;
		h.flags = flags;
		h.d.msg_len = pay;
		std::vector<uint8_t> b(ME_HDR_SEQ + pay);
		h.payload_len = pay;
		me_wire_build(b.data(), &h);
		me_hdr out{};
		return me_wire_parse(b.data(), (uint32_t)b.size(), &out);
	};
	EXPECT_EQ(parse(ME_PT_WRITE, ME_F_LAST | ME_F_ACKREQ | ME_F_NOW, 32), 0);
	EXPECT_EQ(parse(ME_PT_NOTIFY, ME_F_LAST | ME_F_NOW, 32), 0);
	EXPECT_EQ(parse(ME_PT_WRITE, ME_F_ACKREQ | ME_F_NOW, 32), ME_EWIRE_FIELD);
	EXPECT_EQ(parse(ME_PT_READ_RESP, ME_F_LAST | ME_F_NOW, 32), ME_EWIRE_FIELD);
	EXPECT_EQ(parse(ME_PT_STATUS, ME_F_LAST | ME_F_NOW, 0), ME_EWIRE_FIELD);
	EXPECT_EQ(parse(ME_PT_WRITE, ME_F_LAST, 32), 0);
}
