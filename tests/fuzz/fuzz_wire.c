// SPDX-License-Identifier: GPL-2.0
/*
 * fuzz_wire.c - libFuzzer target for the wire parser (wire.c).
 *
 * Feeds arbitrary bytes to me_wire_parse() and checks what the parser
 * promises for every packet it accepts: a known version and type, the
 * header length of that type, a payload that fits in the buffer, only known
 * flags, the per-type field ranges, and that rebuilding the parsed header
 * with me_wire_build() gives back exactly the bytes that were accepted (all
 * reserved fields are checked to be zero, so the encoding is canonical).
 * Rejected buffers must return one of the ME_EWIRE_* codes.  ASan catches
 * any read beyond the buffer: libFuzzer hands over an exactly sized copy.
 */
#include <stdio.h>
#include <stdlib.h>

#include "kernel/core/wire.h"

#define CHECK(cond)							\
	do {								\
		if (!(cond)) {						\
			fprintf(stderr, "fuzz_wire: %s:%d: %s\n",	\
				__FILE__, __LINE__, #cond);		\
			abort();					\
		}							\
	} while (0)

static void check_accepted(const u8 *buf, u32 len, const struct me_hdr *h)
{
	u8 out[ME_HDR_MAX];
	u16 want = me_wire_hdr_len(h->type);
	u32 hl;

	CHECK(h->version == ME_WIRE_VERSION);
	CHECK(want != 0);
	CHECK(h->hdr_len == want);
	CHECK(want <= ME_HDR_MAX);
	CHECK((u32)h->hdr_len + h->payload_len <= len);
	CHECK(h->payload == buf + h->hdr_len);
	CHECK(!(h->flags & ~ME_F_KNOWN));
	/* Only an ack carries a packet, with room for its header at least. */
	if (h->flags & ME_F_CARRY)
		CHECK(h->type == ME_PT_ACK && len >= ME_HDR_ACK + ME_HDR_COMMON);
	if (h->flags & ME_F_ASK)
		CHECK(h->type == ME_PT_KEEPALIVE);
	CHECK(h->src_node && h->src_node != ME_NODE_BCAST);
	CHECK(h->src_inc && h->dst_node);

	/* The receiver's cookie on every connection frame, none elsewhere. */
	if (h->type == ME_PT_HELLO || h->type == ME_PT_KEEPALIVE ||
	    h->type == ME_PT_CONNECT)
		CHECK(!h->cookie);
	else
		CHECK(h->cookie);

	switch (h->type) {
	case ME_PT_HELLO:
		CHECK(h->payload_len <= ME_HELLO_NAME);
		break;
	case ME_PT_KEEPALIVE:
		CHECK(!h->payload_len && h->dst_node != ME_NODE_BCAST);
		/* Stamped; a hold or a reply needs an echo; ASK or REPLY. */
		CHECK(h->h.stamp);
		CHECK(h->h.echo || (!h->h.hold && !(h->flags & ME_F_REPLY)));
		CHECK(!(h->flags & ME_F_REPLY) || !(h->flags & ME_F_ASK));
		break;
	case ME_PT_CONNECT:
	case ME_PT_ACCEPT:
		CHECK(!h->payload_len && h->src_conn);
		CHECK(h->c.window >= ME_WIN_MIN && h->c.window <= ME_WIN_MAX);
		CHECK(!(h->c.window & (h->c.window - 1)));
		CHECK(h->c.credit && h->c.credit <= h->c.window);
		/* Unordered, ordered, or shared (wire 10): to no port. */
		CHECK(h->c.mode <= 2 && (h->c.mode != 2 || !h->c.port));
		CHECK(h->c.ops && h->c.ops <= ME_OPS_MAX);
		CHECK(h->dst_node != ME_NODE_BCAST);
		CHECK(h->c.cookie);
		CHECK(h->c.port <= ME_WIRE_PORT_MAX);
		if (h->type == ME_PT_ACCEPT)
			CHECK(h->dst_conn && h->dst_inc);
		break;
	case ME_PT_ABORT:
		CHECK(!h->payload_len);
		CHECK(h->x.status && h->x.status <= ME_MAX_ERRNO);
		/* A refusal (no source connection) of a CONNECT: three reasons. */
		if (!h->src_conn)
			CHECK(h->x.status == ECONNREFUSED || h->x.status == ENOSPC ||
			      h->x.status == EEXIST);
		break;
	case ME_PT_ACK:
	case ME_PT_NACK:
		CHECK(!h->payload_len);
		CHECK(me_seq_le(h->a.cum, h->a.right));
		CHECK(h->a.right - h->a.cum <= ME_WIN_MAX);
		break;
	default:
		CHECK(me_pt_sequenced(h->type));
		CHECK(h->d.msg_len <= ME_MAX_MSG);
		CHECK(h->d.addr + h->d.msg_len >= h->d.addr);
		if (h->type == ME_PT_WRITE || h->type == ME_PT_NOTIFY ||
		    h->type == ME_PT_READ_RESP) {
			CHECK((u64)h->d.msg_off + h->payload_len <=
			      h->d.msg_len);
			CHECK(h->payload_len || !h->d.msg_len);
			if (h->flags & ME_F_LAST)
				CHECK(h->d.msg_off + h->payload_len ==
				      h->d.msg_len);
		} else if (h->type == ME_PT_READ_REQ) {
			CHECK(h->payload_len == ME_READ_REQ_PAY);
			CHECK(!h->d.msg_off);
		} else if (h->type == ME_PT_ATOMIC) {
			struct me_atomic_req a;

			CHECK(h->payload_len == ME_ATOMIC_PAY && !h->d.msg_off);
			CHECK(h->d.msg_len == 4 || h->d.msg_len == 8);
			CHECK(h->d.imm >= ME_AOP_ADD && h->d.imm < ME_AOP_MAX_);
			me_wire_atomic_get(h->payload, &a);
			CHECK(h->d.msg_len == 8 || !(a.operand >> 32 || a.compare >> 32));
			CHECK(h->d.imm == ME_AOP_CSWAP || !a.compare);
		} else if (h->type == ME_PT_STATUS) {
			CHECK(!h->payload_len && !h->d.msg_len);
			CHECK(h->d.imm <= ME_MAX_ERRNO);
		} else if (h->type == ME_PT_PACK) {
			const u8 *p = h->payload;
			u32 rem = h->payload_len, i;
			struct me_pack_ent e;

			CHECK(h->d.msg_len >= 2 && h->d.msg_len <= ME_PACK_MAX);
			CHECK(h->flags & ME_F_LAST);
			/* Exactly msg_len well-formed entries fill the payload. */
			for (i = 0; i < h->d.msg_len; i++) {
				int n = me_wire_pack_next(p, rem, &e);

				CHECK(n >= ME_PACK_ENT && (u32)n <= rem);
				CHECK(e.type == ME_PT_WRITE || e.type == ME_PT_NOTIFY);
				CHECK(e.addr + e.len >= e.addr);
				p += n;
				rem -= (u32)n;
			}
			CHECK(!rem);
		} else {
			CHECK(!h->payload_len && !h->d.msg_len);
		}
		break;
	}
	if (h->type != ME_PT_HELLO && h->type != ME_PT_KEEPALIVE &&
	    h->type != ME_PT_CONNECT && h->type != ME_PT_ACCEPT)
		CHECK((h->src_conn || h->type == ME_PT_ABORT) && h->dst_conn && h->dst_inc &&
		      h->dst_node != ME_NODE_BCAST);

	/* The accepted encoding is canonical: rebuilding gives it back. */
	hl = me_wire_build(out, h);
	CHECK(hl == h->hdr_len);
	CHECK(!memcmp(out, buf, hl));
}

int LLVMFuzzerTestOneInput(const u8 *data, size_t size);

int LLVMFuzzerTestOneInput(const u8 *data, size_t size)
{
	struct me_hdr h, h2;
	u32 len = size > 0xffffffffu ? 0xffffffffu : (u32)size;
	int ret, ret2;

	memset(&h, 0xa5, sizeof(h));
	ret = me_wire_parse(data, len, &h);
	if (ret) {
		CHECK(ret == ME_EWIRE_SHORT || ret == ME_EWIRE_VERSION ||
		      ret == ME_EWIRE_TYPE || ret == ME_EWIRE_FIELD);
		if (len >= ME_HDR_COMMON && data[0] == ME_WIRE_VERSION &&
		    me_wire_hdr_len(data[1]))
			CHECK(ret != ME_EWIRE_VERSION && ret != ME_EWIRE_TYPE);
		return 0;
	}
	check_accepted(data, len, &h);

	/* Deterministic, and independent of what the struct held before. */
	memset(&h2, 0x5a, sizeof(h2));
	ret2 = me_wire_parse(data, len, &h2);
	CHECK(ret2 == 0);
	CHECK(h2.type == h.type && h2.payload_len == h.payload_len &&
	      h2.dst_conn == h.dst_conn && h2.payload == h.payload);

	/* The packet an ack carries is parsed as one of its own. */
	if (h.flags & ME_F_CARRY) {
		memset(&h2, 0x5a, sizeof(h2));
		if (!me_wire_parse(data + ME_HDR_ACK, len - ME_HDR_ACK, &h2))
			check_accepted(data + ME_HDR_ACK, len - ME_HDR_ACK, &h2);
	}
	return 0;
}
