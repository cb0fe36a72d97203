/* SPDX-License-Identifier: GPL-2.0 */
/*
 * me_types.h - the only header the portable core includes from outside.
 *
 * Under __KERNEL__ it maps onto <linux/...>; otherwise onto the C11 freestanding
 * headers plus <string.h> (memcpy/memset/memcmp only) and <errno.h> (macros
 * only).  Everything the core needs from its environment that is not a
 * platform *operation* (see me_plat.h) lives here: fixed-width types,
 * big-endian get/put helpers, 32- and 64-bit atomics, a spinlock with
 * trylock, and a 64-by-32 division helper (the kernel has no __udivdi3).
 *
 * Memory ordering: every atomic read-modify-write is fully ordered;
 * me_atomic_read() is an acquire load and me_atomic_set() a fully ordered
 * store (store-then-load patterns in window.c rely on it).  That is stronger than the hot paths strictly need, and it keeps the
 * reasoning in the rest of the core simple.
 */
#ifndef ME_TYPES_H
#define ME_TYPES_H

#ifdef __KERNEL__

#include <linux/types.h>
#include <linux/kernel.h>
#include <linux/string.h>
#include <linux/errno.h>
#include <linux/atomic.h>
#include <linux/spinlock.h>
#include <linux/compiler.h>
#include <linux/math64.h>
#include <linux/smp.h>

typedef spinlock_t me_lock_t;
typedef atomic_t me_atomic_t;
typedef atomic64_t me_atomic64_t;

static inline void me_lock_init(me_lock_t *l) { spin_lock_init(l); }
static inline bool me_trylock(me_lock_t *l) { return spin_trylock_bh(l); }
static inline void me_lock(me_lock_t *l) { spin_lock_bh(l); }
static inline void me_unlock(me_lock_t *l) { spin_unlock_bh(l); }
static inline void me_smp_mb(void) { smp_mb(); }

static inline u32 me_atomic_read(me_atomic_t *a) { return (u32)atomic_read_acquire(a); }
/* A full barrier, like the userspace seq_cst store: see window.c. */
static inline void me_atomic_set(me_atomic_t *a, u32 v) { atomic_xchg(a, (int)v); }
static inline u32 me_atomic_cmpxchg(me_atomic_t *a, u32 o, u32 n)
{
	return (u32)atomic_cmpxchg(a, (int)o, (int)n);
}
static inline u32 me_atomic_add_return(me_atomic_t *a, u32 v)
{
	return (u32)atomic_add_return((int)v, a);
}
static inline u32 me_atomic_xchg(me_atomic_t *a, u32 v) { return (u32)atomic_xchg(a, (int)v); }

static inline u64 me_atomic64_read(me_atomic64_t *a) { return (u64)atomic64_read_acquire(a); }
static inline void me_atomic64_set(me_atomic64_t *a, u64 v) { atomic64_xchg(a, (s64)v); }
static inline u64 me_atomic64_cmpxchg(me_atomic64_t *a, u64 o, u64 n)
{
	return (u64)atomic64_cmpxchg(a, (s64)o, (s64)n);
}
static inline u64 me_atomic64_add_return(me_atomic64_t *a, u64 v)
{
	return (u64)atomic64_add_return((s64)v, a);
}

/* The CPU the caller runs on: a hint only (it may move at once). */
static inline u32 me_cpu_hint(void) { return raw_smp_processor_id(); }

static inline void *me_ptr_load(void **p) { return smp_load_acquire(p); }
static inline void me_ptr_store(void **p, void *v) { smp_store_release(p, v); }

static inline u64 me_div_u64(u64 a, u32 b) { return div_u64(a, b); }
static inline u64 me_div64_u64(u64 a, u64 b) { return div64_u64(a, b); }

#else /* userspace */

#include <stdint.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>
#include <errno.h>
#ifndef __cplusplus
#include <stdatomic.h>
#endif

typedef uint8_t u8;
typedef uint16_t u16;
typedef uint32_t u32;
typedef uint64_t u64;
typedef int8_t s8;
typedef int16_t s16;
typedef int32_t s32;
typedef int64_t s64;

/*
 * C++ test code includes the public headers for types and wire helpers
 * only; the atomics below are for the C core.
 */
#ifndef __cplusplus
typedef struct { atomic_int v; } me_lock_t;
typedef struct { _Atomic u32 v; } me_atomic_t;
typedef struct { _Atomic u64 v; } me_atomic64_t;

static inline void me_lock_init(me_lock_t *l) { atomic_init(&l->v, 0); }
static inline bool me_trylock(me_lock_t *l)
{
	return atomic_load_explicit(&l->v, memory_order_relaxed) == 0 &&
	       atomic_exchange_explicit(&l->v, 1, memory_order_acquire) == 0;
}
static inline void me_lock(me_lock_t *l)
{
	while (!me_trylock(l)) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
	}
}
static inline void me_unlock(me_lock_t *l)
{
	atomic_store_explicit(&l->v, 0, memory_order_release);
}
/*
 * A full barrier between a store and a later load (the store-buffer
 * pattern).  An RMW on one shared variable rather than a fence: TSan
 * models no fences, and two such RMWs are ordered, so whichever comes
 * second sees everything before the first.
 */
static inline void me_smp_mb(void)
{
	static _Atomic u32 me_mb_var;

	atomic_fetch_add_explicit(&me_mb_var, 0, memory_order_seq_cst);
}

static inline u32 me_atomic_read(me_atomic_t *a) { return atomic_load(&a->v); }
static inline void me_atomic_set(me_atomic_t *a, u32 v) { atomic_store(&a->v, v); }
static inline u32 me_atomic_cmpxchg(me_atomic_t *a, u32 o, u32 n)
{
	atomic_compare_exchange_strong(&a->v, &o, n);
	return o;
}
static inline u32 me_atomic_add_return(me_atomic_t *a, u32 v)
{
	return atomic_fetch_add(&a->v, v) + v;
}
static inline u32 me_atomic_xchg(me_atomic_t *a, u32 v) { return atomic_exchange(&a->v, v); }

static inline u64 me_atomic64_read(me_atomic64_t *a) { return atomic_load(&a->v); }
static inline void me_atomic64_set(me_atomic64_t *a, u64 v) { atomic_store(&a->v, v); }
static inline u64 me_atomic64_cmpxchg(me_atomic64_t *a, u64 o, u64 n)
{
	atomic_compare_exchange_strong(&a->v, &o, n);
	return o;
}
static inline u64 me_atomic64_add_return(me_atomic64_t *a, u64 v)
{
	return atomic_fetch_add(&a->v, v) + v;
}

/*
 * Stands for the CPU (me_cpu_hint() in the kernel): each thread numbered
 * in the order it first asks (in each file that asks: the numbers are
 * the file's own), so that up to ME_STAT_SHARDS threads count into lines
 * of their own.
 */
static inline u32 me_cpu_hint(void)
{
	static _Atomic u32 next;
	static _Thread_local u32 mine;

	if (!mine)
		mine = atomic_fetch_add_explicit(&next, 1, memory_order_relaxed) + 1;
	return mine - 1;
}

static inline void *me_ptr_load(void **p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}
static inline void me_ptr_store(void **p, void *v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

#endif /* !__cplusplus */

static inline u64 me_div_u64(u64 a, u32 b) { return a / b; }
static inline u64 me_div64_u64(u64 a, u64 b) { return a / b; }

#endif /* __KERNEL__ */

/* Sequence arithmetic modulo 2^32 (RFC 1982 style). */
static inline bool me_seq_lt(u32 a, u32 b) { return (s32)(a - b) < 0; }
static inline bool me_seq_le(u32 a, u32 b) { return (s32)(a - b) <= 0; }

/*
 * Time from `then` to `now`, 0 if `then` is later: a timestamp another
 * thread stored after this one read the clock must not wrap into an age
 * of centuries (which once declared busy links and peers dead).
 */
static inline u64 me_elapsed(u64 now, u64 then) { return now > then ? now - then : 0; }

static inline u32 me_min_u32(u32 a, u32 b) { return a < b ? a : b; }
static inline u32 me_max_u32(u32 a, u32 b) { return a > b ? a : b; }
static inline u64 me_min_u64(u64 a, u64 b) { return a < b ? a : b; }
static inline u64 me_max_u64(u64 a, u64 b) { return a > b ? a : b; }

/* Big-endian accessors: byte-wise, so alignment never matters. */
static inline void me_put_be16(u8 *p, u16 v) { p[0] = v >> 8; p[1] = v; }
static inline void me_put_be32(u8 *p, u32 v)
{
	p[0] = v >> 24; p[1] = v >> 16; p[2] = v >> 8; p[3] = v;
}
static inline void me_put_be64(u8 *p, u64 v)
{
	me_put_be32(p, (u32)(v >> 32));
	me_put_be32(p + 4, (u32)v);
}
static inline u16 me_get_be16(const u8 *p) { return (u16)(p[0] << 8 | p[1]); }
static inline u32 me_get_be32(const u8 *p)
{
	return (u32)p[0] << 24 | (u32)p[1] << 16 | (u32)p[2] << 8 | p[3];
}
static inline u64 me_get_be64(const u8 *p)
{
	return (u64)me_get_be32(p) << 32 | me_get_be32(p + 4);
}

#if defined(__KERNEL__) || !defined(__cplusplus)
/* Atomic max under sequence order; returns true if it raised the value. */
static inline bool me_atomic_seq_max(me_atomic_t *a, u32 v)
{
	u32 cur = me_atomic_read(a);

	while (me_seq_lt(cur, v)) {
		u32 old = me_atomic_cmpxchg(a, cur, v);

		if (old == cur)
			return true;
		cur = old;
	}
	return false;
}
#endif

#endif /* ME_TYPES_H */
