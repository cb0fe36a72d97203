// SPDX-License-Identifier: GPL-2.0
// Two-node workloads over the simulator with exact-once / placement checks.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <set>

#include "sim.hpp"

namespace mesim {

inline uint8_t pattern(uint32_t region, uint64_t off, uint64_t seed)
{
	uint64_t x = (off + 1) * 0x9e3779b97f4a7c15ull ^ (seed + region * 77);
	return (uint8_t)(x >> 29) | 1;	// never 0, so zero means "untouched"
}

inline void fill_pattern(Region &r, uint32_t id, uint64_t seed)
{
	for (size_t i = 0; i < r.mem.size(); i++)
		r.mem[i] = pattern(id, i, seed);
}

// Region ids used by the workloads.
constexpr uint32_t kSrc = 1;	// pattern-filled source, readable remotely
constexpr uint32_t kDst = 2;	// zero-filled destination, writable remotely
constexpr uint32_t kRd = 3;	// zero-filled destination of local reads
constexpr uint32_t kKey = 0xabcd;

inline uint32_t dst_region(int kind_is_read) { return kind_is_read ? kRd : kDst; }

struct Op {
	enum Kind { WRITE, NOTIFY, READ } kind;
	int from;
	me_rw rw;
	int completions = 0;
	int32_t status = 1;
	int notifies = 0;
};

// A workload: ops from both nodes into disjoint, ascending chunks of the
// other node's kDst, each checked when (and every time) it completes.
struct Workload {
	Sim &sim;
	std::map<uint64_t, Op> ops;	// cookie -> op
	std::map<uint32_t, uint64_t> imm_to_cookie;
	uint64_t next_cookie = 1;
	uint64_t dst_next[2][2] = {{0, 0}, {0, 0}};	// [node][read?] next offset
	int bad = 0;			// checks that failed inside hooks
	uint64_t seed;

	Workload(Sim &s, uint64_t sd) : sim(s), seed(sd)
	{
		sim.cqe_hook = [this](Node &n, const me_cqe &q) { on_cqe(n, q); };
	}

	bool in_place(const Op &op)
	{
		int tgt = op.kind == Op::READ ? op.from : 1 - op.from;
		int src = op.kind == Op::READ ? 1 - op.from : op.from;
		uint64_t toff = op.kind == Op::READ ? op.rw.local_off : op.rw.remote_off;
		uint64_t soff = op.kind == Op::READ ? op.rw.remote_off : op.rw.local_off;
		Region &t = sim.nodes[tgt]->regions[dst_region(op.kind == Op::READ)];
		Region &s = sim.nodes[src]->regions[kSrc];
		return memcmp(t.mem.data() + toff, s.mem.data() + soff, op.rw.len) == 0;
	}

	void on_cqe(Node &n, const me_cqe &q)
	{
		if (q.type == ME_CQE_NOTIFY) {
			auto it = imm_to_cookie.find(q.imm);
			if (it == imm_to_cookie.end()) { bad++; return; }
			Op &op = ops[it->second];
			op.notifies++;
			if (n.idx != 1 - op.from || !in_place(op))
				bad++;
			return;
		}
		if (q.type != ME_CQE_WRITE && q.type != ME_CQE_READ)
			return;
		auto it = ops.find(q.cookie);
		if (it == ops.end()) { bad++; return; }
		Op &op = it->second;
		op.completions++;
		op.status = q.status;
		if (n.idx != op.from)
			bad++;
		if (q.status == 0 && !in_place(op))
			bad++;	// completion before the data were in place
	}

	// Queue an op (flags: ME_RW_*); returns the submit result.
	int submit(me_conn *c, int from, Op::Kind kind, uint32_t len, uint32_t flags = 0)
	{
		Op op;
		op.kind = kind;
		op.from = from;
		memset(&op.rw, 0, sizeof(op.rw));
		op.rw.flags = flags;
		op.rw.cookie = next_cookie;
		op.rw.len = len;
		op.rw.remote_key = kKey;
		uint64_t srcsz = sim.nodes[0]->regions[kSrc].mem.size();
		uint64_t soff = sim.rng.below(srcsz - len + 1);
		int tnode = kind == Op::READ ? from : 1 - from;
		int rd = kind == Op::READ;
		uint64_t doff = dst_next[tnode][rd] + sim.rng.below(64);
		if (doff + len > sim.nodes[tnode]->regions[dst_region(rd)].mem.size())
			return -ENOSPC;
		dst_next[tnode][rd] = doff + len;
		if (kind == Op::READ) {
			op.rw.remote_region = kSrc;
			op.rw.remote_off = soff;
			op.rw.local_region = kRd;
			op.rw.local_off = doff;
		} else {
			op.rw.local_region = kSrc;
			op.rw.local_off = soff;
			op.rw.remote_region = kDst;
			op.rw.remote_off = doff;
			op.rw.imm = (uint32_t)next_cookie * 2654435761u;
		}
		int r = kind == Op::READ ? me_conn_read(c, &op.rw) :
			kind == Op::NOTIFY ? me_conn_notify(c, &op.rw) :
			me_conn_write(c, &op.rw);
		if (r == 0) {
			if (kind == Op::NOTIFY)
				imm_to_cookie[op.rw.imm] = next_cookie;
			ops[next_cookie++] = op;
		} else {
			dst_next[tnode][rd] = doff;	// give the space back
		}
		return r;
	}

	// Ops not completed yet.
	size_t pending() const
	{
		size_t n = 0;
		for (const auto &[k, op] : ops)
			n += op.completions == 0;
		return n;
	}

	bool all_done() const
	{
		for (auto &[k, op] : ops)
			if (op.completions == 0)
				return false;
		return true;
	}

	// Every op exactly once, successful, every written byte exactly once.
	void check(bool expect_ok = true)
	{
		EXPECT_EQ(bad, 0);
		for (auto &[k, op] : ops) {
			EXPECT_EQ(op.completions, 1) << "cookie " << k;
			if (expect_ok) {
				EXPECT_EQ(op.status, 0) << "cookie " << k;
			}
			if (op.kind == Op::NOTIFY && op.status == 0) {
				EXPECT_EQ(op.notifies, 1) << "cookie " << k;
			}
		}
		for (int n = 0; n < 4; n++) {
			Region &d = sim.nodes[n / 2]->regions[dst_region(n & 1)];
			std::vector<uint8_t> want(d.mem.size(), 0);
			std::vector<uint8_t> maybe(d.mem.size(), 0);
			for (auto &[k, op] : ops) {
				int tgt = op.kind == Op::READ ? op.from : 1 - op.from;
				if (tgt != n / 2 || (op.kind == Op::READ) != (n & 1))
					continue;
				uint64_t off = op.kind == Op::READ ? op.rw.local_off :
					       op.rw.remote_off;
				// A failed op may have landed partly, never twice.
				for (uint32_t i = 0; i < op.rw.len; i++)
					(op.status ? maybe : want)[off + i]++;
			}
			size_t wrong = 0;
			for (size_t i = 0; i < want.size(); i++)
				if (d.wcount[i] != want[i] &&
				    !(maybe[i] && d.wcount[i] <= maybe[i]))
					wrong++;
			EXPECT_EQ(wrong, 0u) << "node " << n << ": bytes not written exactly once";
		}
	}
};

inline void setup_pair(Sim &sim, int links, const LinkParams &p,
		       me_node_cfg ca, me_node_cfg cb, size_t mem = 4 << 20)
{
	sim.add_node(ca);
	sim.add_node(cb);
	for (int i = 0; i < links; i++)
		sim.add_link(0, 1, p);
	for (int n = 0; n < 2; n++) {
		sim.add_region(n, kSrc, mem, kKey, ME_ACC_READ);
		fill_pattern(sim.nodes[n]->regions[kSrc], kSrc, 1000 + n);
		sim.add_region(n, kDst, mem, kKey, ME_ACC_WRITE);
		sim.add_region(n, kRd, mem, kKey, ME_ACC_WRITE);
	}
}

}  // namespace mesim
