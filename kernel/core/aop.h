/* SPDX-License-Identifier: GPL-2.0 */
/*
 * aop.h - remote atomic operations (wire 11): what each one does to the
 * value it finds.  The target's host applies it atomically to 4 or 8
 * aligned bytes of a region (me_plat_ops.mr_atomic) and answers with the
 * value it found; the numbers are the wire's and the ABI's (ME_ATOMIC_*).
 */
#ifndef ME_AOP_H
#define ME_AOP_H

#include "me_types.h"

enum me_aop {
	ME_AOP_ADD = 1,		/* old + operand (wraps) */
	ME_AOP_AND,		/* old & operand */
	ME_AOP_OR,		/* old | operand */
	ME_AOP_XOR,		/* old ^ operand */
	ME_AOP_SWAP,		/* operand */
	ME_AOP_CSWAP,		/* operand if old == compare, else old */
	ME_AOP_SMIN,		/* the smaller, as signed integers */
	ME_AOP_SMAX,		/* the larger, as signed integers */
	ME_AOP_UMIN,		/* the smaller, as unsigned integers */
	ME_AOP_UMAX,		/* the larger, as unsigned integers */
	ME_AOP_READ,		/* old: nothing changes (read access only) */
	ME_AOP_MAX_
};

/*
 * The value an operation leaves where it found old, for operands of
 * size 4 or 8 bytes (4: every value and the result in the low 32 bits).
 */
static inline u64 me_aop_apply(u32 aop, u32 size, u64 old, u64 operand, u64 compare)
{
	u64 mask = size == 4 ? 0xffffffffull : ~0ull;
	u64 sign = size == 4 ? 0x80000000ull : 0x8000000000000000ull;
	u64 v;

	old &= mask;
	operand &= mask;
	switch (aop) {
	case ME_AOP_ADD:
		v = old + operand;
		break;
	case ME_AOP_AND:
		v = old & operand;
		break;
	case ME_AOP_OR:
		v = old | operand;
		break;
	case ME_AOP_XOR:
		v = old ^ operand;
		break;
	case ME_AOP_SWAP:
		v = operand;
		break;
	case ME_AOP_CSWAP:
		v = old == (compare & mask) ? operand : old;
		break;
	case ME_AOP_SMIN:	/* flipping the sign bit orders signed as unsigned */
		v = (old ^ sign) < (operand ^ sign) ? old : operand;
		break;
	case ME_AOP_SMAX:
		v = (old ^ sign) > (operand ^ sign) ? old : operand;
		break;
	case ME_AOP_UMIN:
		v = old < operand ? old : operand;
		break;
	case ME_AOP_UMAX:
		v = old > operand ? old : operand;
		break;
	default:		/* ME_AOP_READ */
		v = old;
		break;
	}
	return v & mask;
}

/* The region access an operation needs (ME_ACC_*, me_plat.h). */
#define ME_AOP_ACCESS(aop)	((aop) == ME_AOP_READ ? ME_ACC_READ : ME_ACC_READ | ME_ACC_WRITE)

#endif /* ME_AOP_H */
