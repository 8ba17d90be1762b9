/* SPDX-License-Identifier: MIT */
/* Small helpers shared by the library: checked arithmetic, alignment. */
#ifndef HACCEL_CORE_UTIL_H
#define HACCEL_CORE_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HACCEL__ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))
#define HACCEL__LIKELY(x) __builtin_expect(!!(x), 1)
#define HACCEL__UNLIKELY(x) __builtin_expect(!!(x), 0)

/* *r = a * b; false on overflow. */
static inline bool haccel__mul_u64(uint64_t a, uint64_t b, uint64_t *r)
{
	return !__builtin_mul_overflow(a, b, r);
}

/* *r = a + b; false on overflow. */
static inline bool haccel__add_u64(uint64_t a, uint64_t b, uint64_t *r)
{
	return !__builtin_add_overflow(a, b, r);
}

/* Round v up to a multiple of align (a power of two); false on overflow. */
static inline bool haccel__align_u64(uint64_t v, uint64_t align, uint64_t *r)
{
	uint64_t t;

	if (!haccel__add_u64(v, align - 1, &t))
		return false;
	*r = t & ~(align - 1);
	return true;
}

/* Smallest power of two >= v (v >= 1, v <= 2^63). */
static inline uint64_t haccel__pow2_ceil(uint64_t v)
{
	return v <= 1 ? 1 : (uint64_t)1 << (64 - __builtin_clzll(v - 1));
}

/* Mix a 64-bit value into a well-spread hash (splitmix64 finaliser). */
static inline uint64_t haccel__mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

#endif /* HACCEL_CORE_UTIL_H */
