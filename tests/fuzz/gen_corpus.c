// SPDX-License-Identifier: GPL-2.0
/*
 * gen_corpus.c - writes the seed corpus of the fuzzers (make fuzz-corpus).
 *
 * fuzz_wire: one valid packet of every type, built with me_wire_build().
 * fuzz_rx: small programs in the record format of fuzz_rx.cpp that settle
 * the traffic, ack and nack the write in flight, deliver data and reads.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kernel/core/wire.h"

static void put(const char *dir, const char *name, const u8 *p, size_t len)
{
	char path[4096];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (!f || fwrite(p, 1, len, f) != len || fclose(f)) {
		perror(path);
		exit(1);
	}
}

/* Every seed is from node 2 to node 1, these incarnations. */
static void seed_nodes(struct me_hdr *h)
{
	h->version = ME_WIRE_VERSION;
	h->src_node = 2;
	h->dst_node = 1;
	h->src_inc = 0x22;
	h->dst_inc = 0x11;
}

static void wire_pkt(const char *dir, const char *name, struct me_hdr *h,
		     u16 pay)
{
	u8 buf[ME_HDR_MAX + 64];
	struct me_hdr chk;
	u32 len;

	seed_nodes(h);
	h->payload_len = pay;
	len = me_wire_build(buf, h);
	memset(buf + len, 0x41, pay);
	len += pay;
	if (me_wire_parse(buf, len, &chk)) {
		fprintf(stderr, "gen_corpus: %s does not parse\n", name);
		exit(1);
	}
	put(dir, name, buf, len);
}

/* A PACK of a write and a notify of 8 bytes each. */
static void pack_pkt(const char *dir)
{
	u8 buf[ME_HDR_MAX + 2 * (ME_PACK_ENT + 8)];
	struct me_pack_ent e;
	struct me_hdr h, chk;
	u32 len, i;

	memset(&h, 0, sizeof(h));
	seed_nodes(&h);
	h.type = ME_PT_PACK;
	h.flags = ME_F_LAST | ME_F_ACKREQ;
	h.src_conn = 1;
	h.dst_conn = 1;
	h.cookie = 0xfedcba9876543210ull;
	h.d.seq = 1001;
	h.d.msg_len = 2;
	h.payload_len = 2 * (ME_PACK_ENT + 8);
	len = me_wire_build(buf, &h);
	for (i = 0; i < 2; i++) {
		memset(&e, 0, sizeof(e));
		e.type = i ? ME_PT_NOTIFY : ME_PT_WRITE;
		e.len = 8;
		e.op_id = i;
		e.region = 1;
		e.imm = i ? 7 : 0;
		e.key = 0x1234;
		e.addr = 64 * i;
		len += me_wire_pack_put(buf + len, &e);
		memset(buf + len, 0x41, 8);
		len += 8;
	}
	if (me_wire_parse(buf, len, &chk)) {
		fprintf(stderr, "gen_corpus: pack does not parse\n");
		exit(1);
	}
	put(dir, "pack", buf, len);
}

/* An ack carrying a notify of 8 bytes (wire 9). */
static void carry_pkt(const char *dir)
{
	u8 buf[ME_HDR_ACK + ME_HDR_SEQ + 8];
	struct me_hdr h, chk;
	u32 len;

	memset(&h, 0, sizeof(h));
	seed_nodes(&h);
	h.src_conn = 1;
	h.dst_conn = 1;
	h.cookie = 0xfedcba9876543210ull;
	h.type = ME_PT_ACK;
	h.flags = ME_F_CARRY;
	h.a.cum = 1000;
	h.a.right = 1016;
	len = me_wire_build(buf, &h);
	memset(&h.a, 0, sizeof(h.a));
	h.type = ME_PT_NOTIFY;
	h.flags = ME_F_LAST | ME_F_ACKREQ;
	h.src_conn = 2;
	h.dst_conn = 2;
	h.d.seq = 1000;
	h.d.msg_len = 8;
	h.d.region = 1;
	h.d.imm = 7;
	h.d.key = 0x1234;
	h.payload_len = 8;
	len += me_wire_build(buf + len, &h);
	memset(buf + len, 0x41, 8);
	len += 8;
	if (me_wire_parse(buf, len, &chk) || me_wire_parse(buf + ME_HDR_ACK, len - ME_HDR_ACK, &chk)) {
		fprintf(stderr, "gen_corpus: carry does not parse\n");
		exit(1);
	}
	put(dir, "carry", buf, len);
}

/* A compare-and-swap of 8 bytes (wire 11): its payload is not all 0x41. */
static void atomic_pkt(const char *dir, const struct me_hdr *base)
{
	struct me_atomic_req a = { .lregion = 1, .laddr = 64, .operand = 9, .compare = 7 };
	u8 buf[ME_HDR_MAX + ME_ATOMIC_PAY];
	struct me_hdr h = *base, chk;
	u32 len;

	h.type = ME_PT_ATOMIC;
	h.flags = ME_F_LAST | ME_F_ACKREQ;
	h.d.msg_len = 8;
	h.d.imm = ME_AOP_CSWAP;
	h.d.addr = 16;
	h.payload_len = ME_ATOMIC_PAY;
	len = me_wire_build(buf, &h);
	me_wire_atomic_put(buf + len, &a);
	len += ME_ATOMIC_PAY;
	if (me_wire_parse(buf, len, &chk)) {
		fprintf(stderr, "gen_corpus: atomic does not parse\n");
		exit(1);
	}
	put(dir, "atomic", buf, len);
}

static void gen_wire(const char *dir)
{
	struct me_hdr h;

	memset(&h, 0, sizeof(h));
	h.type = ME_PT_HELLO;
	h.h.link = 0;
	wire_pkt(dir, "hello", &h, 8);

	memset(&h, 0, sizeof(h));
	h.type = ME_PT_KEEPALIVE;
	h.flags = ME_F_REPLY;
	h.h.stamp = 0x1000;
	h.h.echo = 0x0800;
	h.h.hold = 20;
	wire_pkt(dir, "keepalive", &h, 0);
	h.flags = 0;	/* wire 14: a beacon, answered by nobody */
	wire_pkt(dir, "keepalive_beacon", &h, 0);
	h.flags = ME_F_ASK;	/* a probe, answered at once */
	h.h.echo = 0;
	h.h.hold = 0;
	wire_pkt(dir, "keepalive_probe", &h, 0);

	memset(&h, 0, sizeof(h));
	h.type = ME_PT_CONNECT;
	h.src_conn = 1;
	h.c.isn = 1000;
	h.c.credit = 16;
	h.c.window = 16;
	h.c.ops = 16;
	h.c.cookie = 0x0123456789abcdefull;
	h.c.port = 40001;
	wire_pkt(dir, "connect", &h, 0);
	h.type = ME_PT_ACCEPT;
	h.dst_conn = 1;
	h.cookie = 0xfedcba9876543210ull;
	wire_pkt(dir, "accept", &h, 0);
	/* A shared connection (mode 2) is opened to no port. */
	h.type = ME_PT_CONNECT;
	h.dst_conn = 0;
	h.cookie = 0;
	h.c.mode = 2;
	h.c.port = 0;
	wire_pkt(dir, "connect_shared", &h, 0);
	h.flags = ME_F_FRESH;	/* wire 13: its sender holds none of ours */
	wire_pkt(dir, "connect_fresh", &h, 0);
	h.flags = 0;

	memset(&h, 0, sizeof(h));
	h.type = ME_PT_ACK;
	h.src_conn = 1;
	h.dst_conn = 1;
	h.cookie = 0xfedcba9876543210ull;
	h.a.cum = 1000;
	h.a.right = 1016;
	wire_pkt(dir, "ack", &h, 0);
	h.flags = ME_F_FILL;	/* wire 16: fill packets, the receiver copies */
	wire_pkt(dir, "ack_fill", &h, 0);
	h.flags = 0;
	h.type = ME_PT_NACK;
	h.a.sack[0] = 0x60;
	wire_pkt(dir, "nack", &h, 0);

	memset(&h, 0, sizeof(h));
	h.type = ME_PT_WRITE;
	h.flags = ME_F_LAST | ME_F_ACKREQ;
	h.src_conn = 1;
	h.dst_conn = 1;
	h.cookie = 0xfedcba9876543210ull;
	h.d.seq = 1000;
	h.d.msg_len = 32;
	h.d.region = 1;
	h.d.key = 0x1234;
	wire_pkt(dir, "write", &h, 32);
	h.type = ME_PT_NOTIFY;
	h.d.imm = 7;
	wire_pkt(dir, "notify", &h, 32);
	h.flags |= ME_F_NOW;	/* wire 18: its sender waits, ack at once */
	wire_pkt(dir, "notify_now", &h, 32);
	h.flags &= ~ME_F_NOW;
	h.type = ME_PT_READ_RESP;
	wire_pkt(dir, "read_resp", &h, 32);
	h.type = ME_PT_READ_REQ;
	h.flags = ME_F_LAST;
	wire_pkt(dir, "read_req", &h, ME_READ_REQ_PAY);
	atomic_pkt(dir, &h);
	h.type = ME_PT_STATUS;
	h.d.msg_len = 0;
	h.d.imm = 13;
	wire_pkt(dir, "status", &h, 0);
	h.type = ME_PT_CLOSE;
	h.d.imm = 0;
	wire_pkt(dir, "close", &h, 0);
	pack_pkt(dir);
	carry_pkt(dir);

	memset(&h, 0, sizeof(h));
	h.type = ME_PT_ABORT;
	h.src_conn = 1;
	h.dst_conn = 1;
	h.cookie = 0xfedcba9876543210ull;
	h.x.status = 110;
	wire_pkt(dir, "abort", &h, 0);
	h.src_conn = 0;		/* a refusal of CONNECT 1 */
	h.cookie = 0x0123456789abcdefull;
	h.x.status = ECONNREFUSED;
	wire_pkt(dir, "refusal", &h, 0);
}

static void gen_rx(const char *dir)
{
	/* mode, then records: see LLVMFuzzerTestOneInput in fuzz_rx.cpp. */
	static const u8 settle[] = { 0, 7, 3 };
	static const u8 ack_all[] = { 0, 1, 0, 0, 0, 0, 0, 0, 7, 1 };
	static const u8 nack[] = {
		1, 3, 2, 1, 0x81, 1, 0, 2, 0, 0, 0x40,	/* deliver, drop #2 */
		1, 1, 0, 0, 2, 0xfe, 0x10, 0x40, 0x00,	/* nack, sack */
		4, 10, 7, 2,
	};
	static const u8 write_in[] = {
		0, 1, 2, 2, ME_F_LAST, 0, 0, 0, 0, 0, 1, 1, 0, 16, 0, 0,
		0, 32, 0, 0,
		'f', 'u', 'z', 'z', 'f', 'u', 'z', 'z', 'f', 'u', 'z', 'z',
		'f', 'u', 'z', 'z', 'f', 'u', 'z', 'z', 'f', 'u', 'z', 'z',
		'f', 'u', 'z', 'z', 'f', 'u', 'z', 'z',
		7, 2,
	};
	static const u8 read_close[] = {
		0, 7, 2, 5, 2, 0, 0, 0, 1, 1, 0, 64, 0x02, 0x00, 0,
		7, 3, 6, 7, 3, 4, 0x85, 7, 3,
	};
	static const u8 timeout[] = { 1, 4, 0x80, 0x84, 40, 0x84, 200, 7, 3 };

	put(dir, "settle", settle, sizeof(settle));
	put(dir, "ack_all", ack_all, sizeof(ack_all));
	put(dir, "nack", nack, sizeof(nack));
	put(dir, "write_in", write_in, sizeof(write_in));
	put(dir, "read_close", read_close, sizeof(read_close));
	put(dir, "timeout", timeout, sizeof(timeout));
}

int main(int argc, char **argv)
{
	char path[4096];

	if (argc != 2) {
		fprintf(stderr, "usage: gen_corpus CORPUS_DIR\n");
		return 2;
	}
	snprintf(path, sizeof(path), "%s/fuzz_wire", argv[1]);
	gen_wire(path);
	snprintf(path, sizeof(path), "%s/fuzz_rx", argv[1]);
	gen_rx(path);
	return 0;
}
