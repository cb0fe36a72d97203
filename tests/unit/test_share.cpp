// SPDX-License-Identifier: GPL-2.0
// Connections to one peer share its paths' windows.  A connection whose
// packets are in flight is woken by its own acks and would take every
// byte of window they free; one that found the window full must get its
// turn on the next ack of any connection, not only on the next timer
// tick, or it starves (seen between two guests: the operations of the
// connections opened second took 5-10 s under load, the others 1-2 s).
#include "harness.hpp"

using namespace mesim;

namespace {

constexpr uint32_t kLen = 64 * 1024;

struct Pair {
	Sim sim;
	Workload w;
	me_conn *a = nullptr, *b = nullptr;
	std::set<uint64_t> of_a, of_b;

	explicit Pair(uint64_t seed) : sim(seed), w(sim, seed)
	{
		LinkParams lp;
		lp.gbps = 1;
		lp.delay_ns = 200000;
		setup_pair(sim, 1, lp, module_cfg(1), module_cfg(2), 32 << 20);
		a = sim.connect(0, 1, ME_MODE_UNORDERED);
		b = sim.connect(0, 1, ME_MODE_UNORDERED);
	}

	size_t pending(const std::set<uint64_t> &mine) const
	{
		size_t n = 0;
		for (uint64_t k : mine)
			n += w.ops.at(k).completions == 0;
		return n;
	}

	// Tops up conn c to 16 writes of kLen posted.
	void keep(me_conn *c, std::set<uint64_t> &mine)
	{
		while (pending(mine) < 16) {
			uint64_t k = w.next_cookie;
			ASSERT_EQ(w.submit(c, 0, Op::WRITE, kLen), 0);
			mine.insert(k);
		}
	}

	uint64_t done_bytes(const std::set<uint64_t> &mine) const
	{
		uint64_t b = 0;
		for (uint64_t k : mine)
			if (w.ops.at(k).completions)
				b += w.ops.at(k).rw.len;
		return b;
	}
};

}  // namespace

TEST(Share, a_connection_that_starts_second_gets_half_the_path)
{
	Pair p(7);
	ASSERT_TRUE(p.a && p.b);
	// a alone for 20 ms: its window grows and stays full.
	for (int i = 0; i < 200; i++) {
		p.keep(p.a, p.of_a);
		p.sim.run_for(100000);
	}
	uint64_t a0 = p.done_bytes(p.of_a);
	for (int i = 0; i < 400; i++) {
		p.keep(p.a, p.of_a);
		p.keep(p.b, p.of_b);
		p.sim.run_for(100000);
	}
	double da = double(p.done_bytes(p.of_a) - a0), db = double(p.done_bytes(p.of_b));
	std::printf("40 ms together: a %.1f MB, b %.1f MB\n", da / 1e6, db / 1e6);
	ASSERT_GT(da + db, 0);
	EXPECT_GT(db / (da + db), 0.35) << "b's share of the bytes";
	EXPECT_GT(da / (da + db), 0.35) << "a's share of the bytes";
}
