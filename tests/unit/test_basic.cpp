// SPDX-License-Identifier: GPL-2.0
// End-to-end basics over the simulator: handshake, write, read, notify.
#include "harness.hpp"

using namespace mesim;

TEST(Basic, handshake__both_sides_up)
{
	Sim sim(1);
	setup_pair(sim, 2, LinkParams{}, default_cfg(1), default_cfg(2));
	uint32_t pid = 0;
	me_conn *c = sim.connect(0, 1, ME_MODE_UNORDERED, &pid);
	ASSERT_NE(c, nullptr);
	EXPECT_EQ(me_conn_state(c), ME_CS_ESTABLISHED);
	me_conn *p = me_conn_get(sim.nodes[1]->node, pid);
	ASSERT_NE(p, nullptr);
	EXPECT_EQ(me_conn_state(p), ME_CS_ESTABLISHED);
	EXPECT_EQ(me_conn_peer(p), 1u);
}

class BasicSizes : public ::testing::TestWithParam<uint32_t> {};

TEST_P(BasicSizes, write_read_notify__land_exactly_once)
{
	for (uint32_t mode : {ME_MODE_UNORDERED, ME_MODE_ORDERED}) {
		Sim sim(7 + GetParam());
		setup_pair(sim, 2, LinkParams{}, default_cfg(1), default_cfg(2));
		uint32_t pid = 0;
		me_conn *c = sim.connect(0, 1, mode, &pid);
		ASSERT_NE(c, nullptr);
		me_conn *p = me_conn_get(sim.nodes[1]->node, pid);
		Workload w(sim, 1);
		ASSERT_EQ(w.submit(c, 0, Op::WRITE, GetParam()), 0);
		ASSERT_EQ(w.submit(c, 0, Op::READ, GetParam()), 0);
		ASSERT_EQ(w.submit(c, 0, Op::NOTIFY, GetParam()), 0);
		ASSERT_EQ(w.submit(p, 1, Op::WRITE, GetParam()), 0);
		ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 100000000));
		sim.run_for(1000000);
		w.check();
		EXPECT_EQ(sim.credit_violations, 0u);
		// Every write and notify packet was checked and placed in one
		// call (the host has mr_place): node 1 took a write and a
		// notify, node 0 a write.
		EXPECT_GE(sim.nodes[1]->mr_places, 2u);
		EXPECT_GE(sim.nodes[0]->mr_places, 1u);
	}
}

// A write of several packets ends once at its target's host (msg_end, how
// the kernel gathers a send), after every byte of it went through
// mr_place; one of a single packet does not; and what the host answers is
// what the writer hears.
TEST(Basic, msg_end__once_per_message_of_packets_and_its_answer_told)
{
	for (uint32_t mode : {ME_MODE_UNORDERED, ME_MODE_ORDERED}) {
		Sim sim(31);
		setup_pair(sim, 2, LinkParams{}, default_cfg(1), default_cfg(2));
		uint32_t pid = 0;
		me_conn *c = sim.connect(0, 1, mode, &pid);
		ASSERT_NE(c, nullptr);
		Workload w(sim, 1);
		ASSERT_EQ(w.submit(c, 0, Op::WRITE, 100), 0);
		ASSERT_EQ(w.submit(c, 0, Op::NOTIFY, 100000), 0);
		ASSERT_EQ(w.submit(c, 0, Op::WRITE, 20000), 0);
		ASSERT_TRUE(sim.run([&] { return w.all_done(); }, sim.now + 100000000));
		w.check();
		const auto &ends = sim.nodes[1]->msg_ends;
		ASSERT_EQ(ends.size(), 2u) << "mode " << mode;
		for (const auto &e : ends) {
			EXPECT_EQ(e.conn, pid);
			EXPECT_EQ(e.region, kDst);
			EXPECT_EQ(e.placed, e.len);
			EXPECT_EQ(e.err, 0);
		}
		EXPECT_EQ(ends[0].len + ends[1].len, 120000u);
		EXPECT_NE(ends[0].msg_id, ends[1].msg_id);
		EXPECT_TRUE(sim.nodes[0]->msg_ends.empty());

		sim.nodes[1]->msg_end_ret = -ENOBUFS;
		Workload refused(sim, 2);
		ASSERT_EQ(refused.submit(c, 0, Op::WRITE, 20000), 0);
		ASSERT_TRUE(sim.run([&] { return refused.all_done(); }, sim.now + 100000000));
		EXPECT_EQ(refused.ops.begin()->second.status, -ENOBUFS) << "mode " << mode;
		EXPECT_EQ(ends.size(), 3u);
	}
}

INSTANTIATE_TEST_SUITE_P(Sizes, BasicSizes,
			 ::testing::Values(0u, 1u, 4095u, 4096u, 4097u, 8924u,
					   8925u, 100000u, 1000003u));
