// SPDX-License-Identifier: GPL-2.0
// Scenario figures: goodput as a share of summed link capacity.  Printed,
// not asserted (see Documentation/simulator.md).  Run with `make figures`.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "sim.hpp"

using namespace mesim;

static double run(std::vector<double> rates, double loss, bool fail, uint32_t mtu)
{
	Sim sim(42);
	me_node_cfg ca = default_cfg(1), cb = default_cfg(2);
	ca.mtu = cb.mtu = mtu;
	ca.window = cb.window = 1024;
	ca.credit = cb.credit = 1024;
	ca.link_window = cb.link_window = 256 * 1024;
	sim.add_node(ca);
	sim.add_node(cb);
	double cap = 0;
	for (double g : rates) {
		LinkParams p;
		p.gbps = g;
		p.loss = loss;
		sim.add_link(0, 1, p);
		cap += g;
	}
	const uint32_t opsz = 1 << 20;
	const int nops = 48;
	for (int n = 0; n < 2; n++) {
		sim.add_region(n, 1, opsz, 7, ME_ACC_READ);
		sim.add_region(n, 2, opsz, 7, ME_ACC_WRITE);
	}
	me_conn *c = sim.connect(0, 1, ME_MODE_UNORDERED);
	if (!c)
		return -1;
	int done = 0, submitted = 0;
	auto submit = [&] {
		while (submitted < nops) {
			me_rw rw{};
			rw.cookie = submitted + 1;
			rw.local_region = 1;
			rw.remote_region = 2;
			rw.remote_key = 7;
			rw.len = opsz;
			if (me_conn_write(c, &rw))
				break;
			submitted++;
		}
	};
	sim.cqe_hook = [&](Node &n, const me_cqe &q) {
		if (n.idx == 0 && q.type == ME_CQE_WRITE && q.status == 0)
			done++;
	};
	uint64_t t0 = sim.now;
	submit();
	if (fail)
		sim.at(t0 + 2000000, [&] { sim.set_wire_up(0, false); });
	while (done < nops) {
		if (!sim.run([&] { return done >= nops; }, sim.now + 100000))
			submit();
		if (sim.now - t0 > 10000000000ull)
			return -1;
	}
	if (getenv("ME_FIG_STATS"))
		for (int i = 0; i < ME_ST_MAX_; i++)
			fprintf(stderr, "%d:%lu ", i, (unsigned long)me_node_stat(sim.nodes[0]->node, (me_stat)i));
	if (getenv("ME_FIG_STATS"))
		fprintf(stderr, "\n");
	double secs = (sim.now - t0) / 1e9;
	double gbps = (double)opsz * nops * 8 / secs / 1e9;
	return gbps / cap;
}

int main()
{
	struct Row { const char *name; std::vector<double> rates; };
	Row rows[] = {
		{"1 link  10G", {10}},
		{"2 links 10G+10G", {10, 10}},
		{"2 links 10G+2.5G", {10, 2.5}},
		{"4 links 4x10G", {10, 10, 10, 10}},
		{"4 links 10+10+5+2.5G", {10, 10, 5, 2.5}},
	};
	printf("Goodput / summed link capacity (1 MiB writes, MTU 9000, unordered)\n");
	printf("Ethernet framing overhead (38 B/frame) counts against goodput.\n\n");
	printf("| links                | 0%% loss | 1%% loss | 5%% loss |\n");
	printf("|----------------------|--------|--------|--------|\n");
	for (auto &r : rows) {
		printf("| %-20s |", r.name);
		for (double loss : {0.0, 0.01, 0.05})
			printf(" %5.1f%% |", 100 * run(r.rates, loss, false, 9000));
		printf("\n");
		fflush(stdout);
	}
	printf("\nLink failure (link 0 cut 2 ms into the transfer; capacity counts all links):\n\n");
	printf("| links                | goodput |\n|----------------------|--------|\n");
	printf("| 2 links 10G+10G      | %5.1f%% |\n", 100 * run({10, 10}, 0, true, 9000));
	printf("| 4 links 4x10G        | %5.1f%% |\n", 100 * run({10, 10, 10, 10}, 0, true, 9000));
	printf("\nMTU 1500 for comparison (4x10G, 0%% loss): %5.1f%%\n",
	       100 * run({10, 10, 10, 10}, 0, false, 1500));
	return 0;
}
