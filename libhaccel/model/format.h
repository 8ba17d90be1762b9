/* SPDX-License-Identifier: MIT */
/*
 * Number formats and cache record layouts, bit for bit (docs/model.md,
 * "Formats"). Every backend produces these exact bytes from the same fp32
 * inputs; the conversions are tested exhaustively over all codes and around
 * every rounding boundary.
 *
 *  - FP8 E4M3 ("E4M3FN"): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no
 *    infinities; 0x7F / 0xFF are NaN; largest finite 448, smallest normal
 *    2^-6, smallest subnormal 2^-9. fp32 -> E4M3 rounds to nearest, ties to
 *    even, and saturates: any finite value beyond 448 (after rounding)
 *    becomes +-448; +-inf become +-448; NaN becomes 0x7F with its sign.
 *  - bf16: the top 16 bits of fp32 after round to nearest, ties to even;
 *    NaN stays NaN (quiet bit set).
 *  - Power-of-two scales: for a block with largest magnitude amax (|amax|
 *    is used), the exponent e is the smallest integer with 2^e >= amax /
 *    448, the quotient taken exactly (from the bits, not with log2 nor an
 *    fp32 division, which differs at one subnormal quotient), clamped to
 *    [-127, 127]; e = 0 when amax is 0 or not finite. Values are divided by
 *    2^e (exact) and converted.
 *  - E8M0: one byte holding e + 127.
 *
 * Records:
 *  - KV token (528 + 2 * dr bytes): bytes [0, 512) the 512 latent values as
 *    E4M3 in 4 tiles of 128, each tile divided by its scale; [512, 528) the
 *    4 tile scales 2^e as little-endian fp32; [528, 528 + 2 dr) the dr rope
 *    values as little-endian bf16 (dr = 64: 656 bytes; dr = 0: 528).
 *  - Index key (132 bytes): [0, 128) the 128 values as E4M3 in 4 blocks of
 *    32, each divided by its block's scale; [128, 132) the 4 E8M0 scales.
 */
#ifndef HACCEL_MODEL_FORMAT_H
#define HACCEL_MODEL_FORMAT_H

#include <stdint.h>

#define HACCEL__FP8_MAX 448.0f
#define HACCEL__FP8_NAN 0x7f

uint8_t haccel__fp8_from_float(float x);
float haccel__fp8_to_float(uint8_t code);

uint16_t haccel__bf16_from_float(float x);
float haccel__bf16_to_float(uint16_t bits);

/* The exponent e of the power-of-two scale for a block whose largest
 * magnitude is amax (see above). */
int haccel__scale_exp(float amax);

/* Largest finite magnitude of n values (NaN and inf ignored; 0 if none). */
float haccel__amax(const float *x, uint32_t n);

/* Bytes of a KV token record for a rope part of dr values. */
static inline uint32_t haccel__kv_token_bytes(uint32_t dr)
{
	return 512 + 16 + 2 * dr;
}

void haccel__kv_token_pack(uint8_t *rec, const float *latent, const float *k_pe,
			   uint32_t dr);
/* Dequantize: latent[i] = fp8(code) * scale of its tile; k_pe from bf16
 * (k_pe may be NULL when dr is 0). */
void haccel__kv_token_unpack(const uint8_t *rec, float *latent, float *k_pe,
			     uint32_t dr);

#define HACCEL__INDEX_K_BYTES 132

/* MXFP8 for n values (n a multiple of 32): codes[n], scales[n / 32]. */
void haccel__mxfp8_pack(uint8_t *codes, uint8_t *scales, const float *x,
			uint32_t n);
void haccel__mxfp8_unpack(float *x, const uint8_t *codes,
			  const uint8_t *scales, uint32_t n);

/* The 132-byte index-key record of 128 values, and back. */
void haccel__index_k_pack(uint8_t *rec, const float *x);
void haccel__index_k_unpack(const uint8_t *rec, float *x);

#endif /* HACCEL_MODEL_FORMAT_H */
