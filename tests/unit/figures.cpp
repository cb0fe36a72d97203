// SPDX-License-Identifier: GPL-2.0
// Scenario figures: goodput as a share of summed link capacity.  Printed,
// not asserted (see Documentation/simulator.md).  Run with `make figures`.
//
// Usage: me_figures [-v] [-s seed] [rates loss [fail]]
//   no scenario: print the whole table (the one in simulator.md);
//   rates loss [fail]: one run, e.g. `me_figures -v 10,10,10,10 0.01 1`
//   (rates in Gbit/s, comma separated; loss as a fraction; fail=1 cuts link
//   0 two milliseconds into the transfer);
//   -v: after each run print the sender's and receiver's counters
//   (me_node_stat) and the payload bytes carried per link, to stderr.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sim.hpp"

using namespace mesim;

static bool verbose;
static uint64_t seed = 42;

static const char *const stat_names[ME_ST_MAX_] = {
	"rx_pkts", "rx_short", "rx_version", "rx_type", "rx_field", "rx_notme",
	"rx_stale", "rx_dup", "rx_window", "rx_closed", "rx_nores", "rx_badack",
	"rx_badop", "tx_data", "tx_rtx_loss", "tx_rtx_rto", "tx_rtx_fail",
	"tx_ack", "tx_nack", "tx_fail", "rto_fired", "link_down", "link_up",
	"credit_stall", "conn_refused", "key_rejected", "conn_aborted", "rx_hello_held",
	"peer_restart", "rx_cookie", "peer_abort", "peer_table_full", "peer_evicted",
	"peer_forgotten", "rx_addr", "path_stalled", "path_told_down", "rtx_spurious",
	"tx_packs", "tx_packed", "ack_held", "ack_carried", "ack_hold_expired",
	"cc_loss_queue", "cc_loss_random", "shared_lost", "timer_late",
	"cc_queue_delay", "cc_queue_burst", "cc_queue_full", "cc_cut_loss", "cc_cut_delay",
	"cc_cut_rto", "cc_reset", "cc_undo", "cc_calm", "ack_now", "cc_idle",
};
static_assert(sizeof(stat_names) / sizeof(stat_names[0]) == ME_ST_MAX_ &&
	      ME_ST_CC_IDLE == ME_ST_MAX_ - 1, "a name for every counter");

static void dump(Sim &sim, int done, int nops)
{
	fprintf(stderr, "  %d/%d writes done at %.3f ms\n", done, nops, sim.now / 1e6);
	for (int n = 0; n < 2; n++) {
		fprintf(stderr, "  node %d:", n);
		for (int i = 0; i < ME_ST_MAX_; i++) {
			uint64_t v = me_node_stat(sim.nodes[n]->node, (me_stat)i);
			if (v)
				fprintf(stderr, " %s=%llu", stat_names[i], (unsigned long long)v);
		}
		fprintf(stderr, "\n");
	}
	fprintf(stderr, "  payload MB per link (0->1):");
	for (auto &w : sim.wires)
		fprintf(stderr, " %.1f", w.bytes[0] / 1e6);
	fprintf(stderr, "\n");
}

static double run(std::vector<double> rates, double loss, bool fail, uint32_t mtu)
{
	Sim sim(seed);
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
		if (sim.now - t0 > 10000000000ull) {
			if (verbose)
				dump(sim, done, nops);
			return -1;
		}
	}
	if (verbose)
		dump(sim, done, nops);
	double secs = (sim.now - t0) / 1e9;
	double gbps = (double)opsz * nops * 8 / secs / 1e9;
	return gbps / cap;
}

static std::string pct(double v)
{
	char b[16];
	if (v < 0)
		return "failed";
	snprintf(b, sizeof(b), "%5.1f%%", 100 * v);
	return b;
}

int main(int argc, char **argv)
{
	int a = 1;
	for (; a < argc && argv[a][0] == '-'; a++) {
		if (!strcmp(argv[a], "-v"))
			verbose = true;
		else if (!strcmp(argv[a], "-s") && a + 1 < argc)
			seed = strtoull(argv[++a], nullptr, 0);
		else {
			fprintf(stderr, "usage: %s [-v] [-s seed] [rates loss [fail]]\n", argv[0]);
			return 2;
		}
	}
	if (a < argc) {
		std::vector<double> rates;
		for (char *p = argv[a]; *p; ) {
			rates.push_back(strtod(p, &p));
			if (*p == ',')
				p++;
			else if (*p)
				return 2;
		}
		double loss = a + 1 < argc ? atof(argv[a + 1]) : 0;
		bool fail = a + 2 < argc && atoi(argv[a + 2]);
		printf("%s\n", pct(run(rates, loss, fail, 9000)).c_str());
		return 0;
	}

	struct Row { const char *name; std::vector<double> rates; };
	Row rows[] = {
		{"1 link  10G", {10}},
		{"2 links 10G+10G", {10, 10}},
		{"2 links 10G+2.5G", {10, 2.5}},
		{"3 links 3x10G", {10, 10, 10}},
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
			printf(" %s |", pct(run(r.rates, loss, false, 9000)).c_str());
		printf("\n");
		fflush(stdout);
	}
	printf("\nLink failure (link 0 cut 2 ms into the transfer; capacity counts all links):\n\n");
	printf("| links                | goodput |\n|----------------------|--------|\n");
	printf("| 2 links 10G+10G      | %s |\n", pct(run({10, 10}, 0, true, 9000)).c_str());
	printf("| 4 links 4x10G        | %s |\n", pct(run({10, 10, 10, 10}, 0, true, 9000)).c_str());
	printf("\nMTU 1500 for comparison (4x10G, 0%% loss): %s\n",
	       pct(run({10, 10, 10, 10}, 0, false, 1500)).c_str());
	return 0;
}
