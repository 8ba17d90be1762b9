// SPDX-License-Identifier: MIT
/* DSA ops against naive formulations: rope, Hadamard, cache writes through a real KV pool, indexer top-k, sparse MLA. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/cpu/ops.h"
#include "model/format.h"
#include "pool-util.h"

#define MAX_REPORTS 20

#define CHECK(cond, fmt, ...)                                                 \
	do {                                                                  \
		if (!(cond)) {                                                \
			ktap_fail_at(__FILE__, __LINE__, "%s: " fmt, #cond,   \
				     __VA_ARGS__);                            \
			if (ktap_failures() >= MAX_REPORTS)                   \
				ktap_end();                                   \
		}                                                             \
	} while (0)

#define KV_BYTES 656
#define IK_BYTES 132

/* Uniform in [-1, 1). */
static float rnd(void)
{
	return (float)ktap_rand_below(1u << 24) * 0x1p-23f - 1.0f;
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n);

	KTAP_ASSERT(p != NULL);
	return p;
}

/* ------------------------------------------------------------------------ */
/* A sequence on a real KV pool, its pages out of order                     */

#define MAX_POS 128

struct seqmap {
	struct haccel_ctx *ctx;
	struct haccel_kv_pool *pool;
	uint32_t P;
	uint32_t seq;
	uint32_t n;                /* tokens of seq */
	const uint32_t *bt;        /* seq's block table */
	int64_t slots[MAX_POS];    /* slot of position p */
};

static void seqmap_append(struct seqmap *m, uint32_t seq, uint32_t n, int64_t *slots)
{
	static const int32_t toks[MAX_POS] = { 0 };

	KTAP_ASSERT(n <= MAX_POS);
	KTAP_ASSERT_EQ(haccel_kv_seq_append(m->pool, seq, toks, n, slots), 0);
}

/*
 * Pool of `layers` layers with the streams "kv" (656 B) and "index_k"
 * (132 B), page_tokens P. A second sequence takes every other page and is
 * freed, so the first one's later pages come back from the free list in
 * reverse: its block table is neither contiguous nor increasing.
 */
static void seqmap_init(struct seqmap *m, uint32_t P, uint32_t n, uint32_t layers)
{
	struct haccel_kv_pool_config c;
	struct haccel_kv_pool_info info;
	uint32_t other, done = 0, n_pages;
	int64_t scrap[MAX_POS];
	int increasing = 1;

	KTAP_ASSERT(n <= MAX_POS);
	memset(m, 0, sizeof(*m));
	m->ctx = test_ctx();
	m->P = P;
	haccel_kv_pool_config_init(&c);
	c.flags = HACCEL_KV_NO_PREFIX_CACHE;
	c.page_tokens = P;
	c.n_layers = layers;
	c.n_pages = 2 * (n / P + 1) + 8;
	c.max_seqs = 4;
	c.max_seq_tokens = 4 * MAX_POS;
	KTAP_ASSERT_EQ(c.streams[0].bytes_per_token, KV_BYTES);
	KTAP_ASSERT_EQ(c.streams[1].bytes_per_token, IK_BYTES);
	KTAP_ASSERT_EQ(haccel_kv_pool_create(m->ctx, &c, &m->pool), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_create(m->pool, NULL, 0, &m->seq, NULL), 0);
	KTAP_ASSERT_EQ(haccel_kv_seq_create(m->pool, NULL, 0, &other, NULL), 0);
	/* Interleave page by page for the first half... */
	while (done < n / 2) {
		uint32_t k = n / 2 - done < P ? n / 2 - done : P;

		seqmap_append(m, m->seq, k, m->slots + done);
		seqmap_append(m, other, P, scrap);
		done += k;
	}
	/* ...then free the other sequence and take the rest. */
	KTAP_ASSERT_EQ(haccel_kv_seq_free(m->pool, other), 0);
	seqmap_append(m, m->seq, n - done, m->slots + done);
	KTAP_ASSERT_EQ(haccel_kv_seq_block_table(m->pool, m->seq, &m->bt, &n_pages,
						 &m->n), 0);
	KTAP_ASSERT_EQ(m->n, n);
	for (uint32_t p = 0; p < n; p++)
		KTAP_ASSERT_EQ(m->slots[p], (int64_t)m->bt[p / P] * P + p % P);
	for (uint32_t i = 1; i < n_pages; i++)
		if (m->bt[i] <= m->bt[i - 1])
			increasing = 0;
	KTAP_ASSERT(n_pages >= 3 && !increasing);
	/* Every byte of page memory known, for valgrind and for the
	 * "nothing else written" checks. */
	KTAP_ASSERT_EQ(haccel_kv_pool_info(m->pool, &info), 0);
	for (uint32_t l = 0; l < layers; l++)
		for (uint32_t s = 0; s < 2; s++) {
			struct haccel_kv_region r;

			KTAP_ASSERT_EQ(haccel_kv_pool_region(m->pool, l, s, &r), 0);
			memset(r.base, 0x5a, r.bytes);
		}
}

static void *seqmap_region(struct seqmap *m, uint32_t layer, uint32_t stream)
{
	struct haccel_kv_region r;

	KTAP_ASSERT_EQ(haccel_kv_pool_region(m->pool, layer, stream, &r), 0);
	KTAP_ASSERT_EQ(r.bytes_per_token, stream ? IK_BYTES : KV_BYTES);
	return r.base;
}

static void seqmap_fini(struct seqmap *m)
{
	KV_CHECK(m->pool);
	haccel_kv_pool_destroy(m->pool);
	haccel_close(m->ctx);
}

/* ------------------------------------------------------------------------ */
/* Rope                                                                     */

#define R_DIM 64
#define R_VEC 80    /* the rope part is the first R_DIM values */
#define R_NVEC 3
#define R_TOK (R_NVEC * R_VEC + 7)

static int pair_of(int layout, uint32_t i, uint32_t *ib)
{
	*ib = layout == HACCEL__ROPE_INTERLEAVED ? 2 * i + 1 : i + R_DIM / 2;
	return layout == HACCEL__ROPE_INTERLEAVED ? (int)(2 * i) : (int)i;
}

/* Swap the two members of every pair: rope of the swapped vector by +pos,
 * swapped back, is rope by -pos. */
static void swap_pairs(float *x, uint32_t T, int layout)
{
	for (uint32_t t = 0; t < T; t++)
		for (uint32_t v = 0; v < R_NVEC; v++)
			for (uint32_t i = 0; i < R_DIM / 2; i++) {
				float *xv = x + t * R_TOK + v * R_VEC;
				uint32_t ib;
				int ia = pair_of(layout, i, &ib);
				float tmp = xv[ia];

				xv[ia] = xv[ib];
				xv[ib] = tmp;
			}
}

static void t_rope_vs_rotation(void)
{
	static const uint32_t pos[] = { 0, 1, 2, 7, 100, 4095, 65537 };
	enum { T = sizeof(pos) / sizeof(pos[0]) };
	const float theta = 10000.0f;
	float *x = xmalloc(T * R_TOK * sizeof(float));
	float *y = xmalloc(T * R_TOK * sizeof(float));

	for (int layout = 0; layout < 2; layout++) {
		for (uint32_t i = 0; i < T * R_TOK; i++)
			x[i] = y[i] = rnd();
		haccel__cpu_rope(y, T, R_NVEC, R_TOK, R_VEC, R_DIM, pos, theta, layout);
		for (uint32_t t = 0; t < T; t++)
			for (uint32_t v = 0; v < R_NVEC; v++) {
				const float *xv = x + t * R_TOK + v * R_VEC;
				const float *yv = y + t * R_TOK + v * R_VEC;

				for (uint32_t i = 0; i < R_DIM / 2; i++) {
					/* The documented fp32 angle, rotated in
					 * double. */
					float inv = 1.0f / powf(theta, (float)(2 * i) / (float)R_DIM);
					double ang = (double)((float)pos[t] * inv);
					/* The mathematical angle, in double. */
					double exact = pos[t] * pow(theta, -2.0 * i / R_DIM);
					uint32_t ib;
					int ia = pair_of(layout, i, &ib);
					double a = xv[ia], b = xv[ib];
					double ra = a * cos(ang) - b * sin(ang);
					double rb = a * sin(ang) + b * cos(ang);

					CHECK(fabs(yv[ia] - ra) <= 1e-6 && fabs(yv[ib] - rb) <= 1e-6,
					      "layout %d pos %u pair %u", layout, pos[t], i);
					if (pos[t] <= 100) {
						ra = a * cos(exact) - b * sin(exact);
						rb = a * sin(exact) + b * cos(exact);
						CHECK(fabs(yv[ia] - ra) <= 1e-5 &&
							      fabs(yv[ib] - rb) <= 1e-5,
						      "layout %d pos %u pair %u (exact angle)",
						      layout, pos[t], i);
					}
					if (pos[t] == 0)
						CHECK(yv[ia] == xv[ia] && yv[ib] == xv[ib],
						      "pos 0 pair %u", i);
				}
				/* Past dim and between vectors: untouched. */
				for (uint32_t i = R_DIM; i < R_VEC; i++)
					CHECK(yv[i] == xv[i], "tail %u", i);
			}
		for (uint32_t t = 0; t < T; t++)
			for (uint32_t i = R_NVEC * R_VEC; i < R_TOK; i++)
				CHECK(y[t * R_TOK + i] == x[t * R_TOK + i], "gap %u", i);
	}
	/* Layouts differ: pair 0 is (0, 32) in one and (0, 1) in the other. */
	for (uint32_t i = 0; i < R_TOK; i++)
		x[i] = y[i] = 0.0f;
	x[1] = y[1] = 1.0f;
	haccel__cpu_rope(x, 1, 1, R_TOK, R_VEC, R_DIM, pos + 1, theta, HACCEL__ROPE_NEOX);
	haccel__cpu_rope(y, 1, 1, R_TOK, R_VEC, R_DIM, pos + 1, theta,
			 HACCEL__ROPE_INTERLEAVED);
	KTAP_EXPECT(x[33] != 0.0f && x[0] == 0.0f); /* (1, 33) turned by pair 1 */
	KTAP_EXPECT(y[0] != 0.0f && y[33] == 0.0f); /* (0, 1) turned by pair 0 */
	free(x);
	free(y);
}

static void t_rope_inverse_and_norm(void)
{
	enum { T = 16 };
	uint32_t pos[T];
	float *x = xmalloc(T * R_TOK * sizeof(float));
	float *y = xmalloc(T * R_TOK * sizeof(float));

	for (uint32_t t = 0; t < T; t++)
		pos[t] = (uint32_t)ktap_rand_below(t < 8 ? 64 : 200000);
	for (int layout = 0; layout < 2; layout++) {
		for (uint32_t i = 0; i < T * R_TOK; i++)
			x[i] = y[i] = rnd();
		haccel__cpu_rope(y, T, R_NVEC, R_TOK, R_VEC, R_DIM, pos, 50000.0f, layout);
		for (uint32_t t = 0; t < T; t++)
			for (uint32_t v = 0; v < R_NVEC; v++) {
				const float *xv = x + t * R_TOK + v * R_VEC;
				const float *yv = y + t * R_TOK + v * R_VEC;
				double nx = 0, ny = 0;

				for (uint32_t i = 0; i < R_DIM / 2; i++) {
					uint32_t ib;
					int ia = pair_of(layout, i, &ib);
					double px = hypot(xv[ia], xv[ib]);
					double py = hypot(yv[ia], yv[ib]);

					CHECK(fabs(px - py) <= 1e-6 * (px + 1e-30) + 1e-7,
					      "pair norm %u", i);
					nx += px * px;
					ny += py * py;
				}
				CHECK(fabs(sqrt(nx) - sqrt(ny)) <= 1e-6 * sqrt(nx),
				      "norm t %u v %u", t, v);
			}
		/* By pos, then by -pos: the identity. */
		swap_pairs(y, T, layout);
		haccel__cpu_rope(y, T, R_NVEC, R_TOK, R_VEC, R_DIM, pos, 50000.0f, layout);
		swap_pairs(y, T, layout);
		for (uint32_t i = 0; i < T * R_TOK; i++)
			CHECK(fabsf(x[i] - y[i]) <= 1e-5f, "restore %u: %g vs %g", i, x[i], y[i]);
	}
	free(x);
	free(y);
}

/* ------------------------------------------------------------------------ */
/* Hadamard                                                                 */

static int popcount_parity(uint32_t v)
{
	return __builtin_popcount(v) & 1;
}

static void t_hadamard_vs_matrix(void)
{
	enum { N = 6 };
	float x[N * 128], y[N * 128], z[N * 128], b[N * 128];
	const double r = 1.0 / sqrt(128.0);

	for (int i = 0; i < N * 128; i++)
		x[i] = y[i] = rnd();
	/* Vector 5 is a unit vector: its image is exactly a column. */
	for (int i = 0; i < 128; i++)
		x[5 * 128 + i] = y[5 * 128 + i] = i == 37 ? 1.0f : 0.0f;
	haccel__cpu_hadamard128(y, N);
	for (int v = 0; v < N; v++)
		for (uint32_t i = 0; i < 128; i++) {
			double want = 0;

			for (uint32_t j = 0; j < 128; j++)
				want += (popcount_parity(i & j) ? -1.0 : 1.0) * x[v * 128 + j];
			want *= r;
			CHECK(fabs(y[v * 128 + i] - want) <= 1e-6, "v %d i %u: %g vs %g", v,
			      i, y[v * 128 + i], want);
		}
	for (uint32_t i = 0; i < 128; i++)
		CHECK(y[5 * 128 + i] == (popcount_parity(i & 37) ? -0x1.6a09e6p-4f :
								   0x1.6a09e6p-4f),
		      "column 37 row %u", i);

	/* H applied twice is the identity. */
	memcpy(z, y, sizeof(z));
	haccel__cpu_hadamard128(z, N);
	for (int i = 0; i < N * 128; i++)
		CHECK(fabsf(z[i] - x[i]) <= 1e-6f, "twice %d: %g vs %g", i, z[i], x[i]);

	/* The documented butterfly order, bit for bit. */
	memcpy(b, x, sizeof(b));
	for (int v = 0; v < N; v++) {
		float *bv = b + v * 128;

		for (uint32_t h = 1; h < 128; h *= 2)
			for (uint32_t j = 0; j < 128; j++)
				if (!(j & h)) {
					float p = bv[j], q = bv[j + h];

					bv[j] = p + q;
					bv[j + h] = p - q;
				}
		for (int j = 0; j < 128; j++)
			bv[j] *= (float)(1.0 / sqrt(128.0));
	}
	KTAP_EXPECT(memcmp(b, y, sizeof(b)) == 0);
}

/* ------------------------------------------------------------------------ */
/* Cache writes                                                             */

static void t_cache_writes_pool(void)
{
	enum { S = 23, DR = 64 };
	struct seqmap m;
	float *lat = xmalloc(S * 512 * sizeof(float));
	float *pe = xmalloc(S * DR * sizeof(float));
	float *ik = xmalloc(S * 128 * sizeof(float));
	int64_t slots[S + 1];
	uint8_t rec[KV_BYTES];

	seqmap_init(&m, 4, S, 2);
	for (int i = 0; i < S * 512; i++)
		lat[i] = rnd() * 3.0f;
	for (int i = 0; i < S * DR; i++)
		pe[i] = rnd();
	for (int i = 0; i < S * 128; i++)
		ik[i] = rnd() * 0.5f;
	/* Token order scrambled, and a padding token (slot -1) in the middle
	 * that must write nothing. */
	for (int t = 0; t < S; t++)
		slots[t] = m.slots[(t * 7) % S];
	slots[S] = -1;
	{
		float *lat2 = xmalloc((S + 1) * 512 * sizeof(float));
		float *pe2 = xmalloc((S + 1) * DR * sizeof(float));
		float *ik2 = xmalloc((S + 1) * 128 * sizeof(float));
		int64_t sl2[S + 1];

		/* Put the padding token at index 11. */
		for (int t = 0, u = 0; t <= S; t++) {
			int src = t == 11 ? S : u++;

			sl2[t] = slots[src];
			memcpy(lat2 + t * 512, src == S ? lat : lat + src * 512, 512 * 4);
			memcpy(pe2 + t * DR, src == S ? pe : pe + src * DR, DR * 4);
			memcpy(ik2 + t * 128, src == S ? ik : ik + src * 128, 128 * 4);
		}
		haccel__cpu_mla_kv_write(seqmap_region(&m, 1, 0), sl2, lat2, pe2, S + 1, DR);
		haccel__cpu_index_k_write(seqmap_region(&m, 1, 1), sl2, ik2, S + 1);
		free(lat2);
		free(pe2);
		free(ik2);
	}

	for (uint32_t layer = 0; layer < 2; layer++)
		for (uint32_t stream = 0; stream < 2; stream++) {
			struct haccel_kv_region r;
			const uint8_t *base;
			uint64_t n_slots;

			KTAP_ASSERT_EQ(haccel_kv_pool_region(m.pool, layer, stream, &r), 0);
			base = r.base;
			n_slots = r.bytes / r.bytes_per_token;
			for (uint64_t s = 0; s < n_slots; s++) {
				const uint8_t *got = base + s * r.bytes_per_token;
				int t = -1;

				for (int k = 0; k < S && layer == 1; k++)
					if (slots[k] == (int64_t)s)
						t = k;
				if (t < 0) {
					for (uint32_t i = 0; i < r.bytes_per_token; i++)
						CHECK(got[i] == 0x5a, "layer %u stream %u slot %llu byte %u",
						      layer, stream, (unsigned long long)s, i);
					continue;
				}
				if (stream == 0)
					haccel__kv_token_pack(rec, lat + t * 512, pe + t * DR, DR);
				else
					haccel__index_k_pack(rec, ik + t * 128);
				CHECK(memcmp(got, rec, r.bytes_per_token) == 0,
				      "stream %u token %d at slot %llu", stream, t,
				      (unsigned long long)s);
			}
		}
	seqmap_fini(&m);

	/* Negative slots write nothing, not even just before the region:
	 * one guard record in front of a region of three. */
	for (uint32_t stream = 0; stream < 2; stream++) {
		uint32_t bytes = stream ? IK_BYTES : KV_BYTES;
		uint8_t *buf = xmalloc(4 * bytes);
		int64_t sl[3] = { -1, 1, -5 };

		memset(buf, 0x5a, 4 * bytes);
		if (stream)
			haccel__cpu_index_k_write(buf + bytes, sl, ik, 3);
		else
			haccel__cpu_mla_kv_write(buf + bytes, sl, lat, pe, 3, DR);
		if (stream)
			haccel__index_k_pack(rec, ik + 128);
		else
			haccel__kv_token_pack(rec, lat + 512, pe + DR, DR);
		KTAP_EXPECT(memcmp(buf + 2 * bytes, rec, bytes) == 0);
		for (uint32_t i = 0; i < 4 * bytes; i++)
			if (i < 2 * bytes || i >= 3 * bytes)
				CHECK(buf[i] == 0x5a, "stream %u byte %u", stream, i);
		free(buf);
	}
	free(lat);
	free(pe);
	free(ik);
}

/* ------------------------------------------------------------------------ */
/* Indexer                                                                  */

#define IH 4

/* Index keys of positions 0..S-1 written through the block table, and the
 * dequantized copy the naive scorer reads by position. */
static void write_keys(struct seqmap *m, const float *ik, float *kdeq, uint32_t S)
{
	uint8_t rec[IK_BYTES];

	haccel__cpu_index_k_write(seqmap_region(m, 0, 1), m->slots, ik, S);
	for (uint32_t s = 0; s < S; s++) {
		haccel__index_k_pack(rec, ik + s * 128);
		haccel__index_k_unpack(rec, kdeq + s * 128);
	}
}

static const float *cmp_score;

/* Score descending, NaN last, ties to the smaller position. */
static int cmp_pos(const void *pa, const void *pb)
{
	int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
	float sa = cmp_score[a], sb = cmp_score[b];

	if (isnan(sa) != isnan(sb))
		return isnan(sa) ? 1 : -1;
	if (!isnan(sa) && sa != sb)
		return sa > sb ? -1 : 1;
	return a < b ? -1 : a > b;
}

static int cmp_int(const void *pa, const void *pb)
{
	int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;

	return a < b ? -1 : a > b;
}

/*
 * The naive indexer for one token: the score of every position 0..pos by
 * the formula (q through MXFP8 and back, dot and head sums in index order),
 * a full sort, the first min(topk, pos + 1), then those in ascending
 * position (the op's output order). Returns the count; counts equal
 * adjacent scores of the sorted list in *ties.
 */
static uint32_t naive_topk(int32_t *out, const float *q, const float *w, uint32_t pos,
			   const float *kdeq, uint32_t topk, unsigned int *ties)
{
	float score[MAX_POS], qd[IH][128];
	int32_t order[MAX_POS];
	uint32_t n = pos + 1, k = n < topk ? n : topk;

	for (uint32_t h = 0; h < IH; h++) {
		uint8_t codes[128], scales[4];

		haccel__mxfp8_pack(codes, scales, q + h * 128, 128);
		haccel__mxfp8_unpack(qd[h], codes, scales, 128);
	}
	for (uint32_t s = 0; s < n; s++) {
		float acc = 0.0f;

		for (uint32_t h = 0; h < IH; h++) {
			float dot = 0.0f;

			for (uint32_t i = 0; i < 128; i++)
				dot += qd[h][i] * kdeq[s * 128 + i];
			acc += w[h] * (dot > 0.0f ? dot : 0.0f);
		}
		score[s] = acc;
		order[s] = (int32_t)s;
	}
	cmp_score = score;
	qsort(order, n, sizeof(order[0]), cmp_pos);
	for (uint32_t j = 0; j < k; j++) {
		out[j] = order[j];
		if (j && (score[order[j]] == score[order[j - 1]] ||
			  (isnan(score[order[j]]) && isnan(score[order[j - 1]]))))
			(*ties)++;
	}
	qsort(out, k, sizeof(out[0]), cmp_int);
	return k;
}

/* Run the op and the naive version on T tokens; compare lists exactly. */
static unsigned int check_indexer(struct seqmap *m, const float *q, const float *w,
				  const uint32_t *pos, uint32_t T, const float *kdeq,
				  uint32_t topk)
{
	uint32_t pos_max = 0, *n_sel = xmalloc(T * sizeof(uint32_t));
	int32_t *sel = xmalloc((size_t)T * topk * sizeof(int32_t)), want[MAX_POS];
	unsigned int ties = 0;
	float *scratch;

	for (uint32_t t = 0; t < T; t++)
		pos_max = pos[t] > pos_max ? pos[t] : pos_max;
	/* Exactly the stated size: ASan and valgrind hold the op to it. */
	scratch = xmalloc((pos_max + 1) * sizeof(float));
	haccel__cpu_indexer_topk(sel, n_sel, q, w, T, IH, pos, seqmap_region(m, 0, 1),
				 m->bt, m->P, topk, scratch);
	for (uint32_t t = 0; t < T; t++) {
		uint32_t k = naive_topk(want, q + t * IH * 128, w + t * IH, pos[t], kdeq,
					topk, &ties);

		CHECK(n_sel[t] == k, "token %u: n_sel %u, want %u", t, n_sel[t], k);
		for (uint32_t j = 0; j < topk; j++)
			CHECK(sel[t * topk + j] == (j < k ? want[j] : -1),
			      "token %u (pos %u) rank %u: %d, want %d", t, pos[t], j,
			      sel[t * topk + j], j < k ? want[j] : -1);
	}
	free(scratch);
	free(sel);
	free(n_sel);
	return ties;
}

static void fill_queries(float *q, float *w, uint32_t T)
{
	for (uint32_t i = 0; i < T * IH * 128; i++)
		q[i] = rnd();
	for (uint32_t i = 0; i < T * IH; i++)
		w[i] = rnd() * 0.5f + 0.25f; /* mostly positive, some negative */
}

static void t_indexer_vs_naive(void)
{
	enum { S = 37, T = 12 };
	/* Query tokens anywhere in the sequence: a prefill chunk's tail, a
	 * decode step, and positions below topk. */
	static const uint32_t pos[T] = { 36, 35, 34, 33, 20, 9, 8, 7, 3, 1, 0, 36 };
	struct seqmap m;
	float *ik = xmalloc(S * 128 * sizeof(float));
	float *kdeq = xmalloc(S * 128 * sizeof(float));
	float *q = xmalloc(T * IH * 128 * sizeof(float));
	float w[T * IH];

	seqmap_init(&m, 4, S, 1);
	for (uint32_t i = 0; i < S * 128; i++)
		ik[i] = rnd() * (i % 128 < 32 ? 4.0f : 0.25f); /* blocks differ */
	write_keys(&m, ik, kdeq, S);
	fill_queries(q, w, T);
	/* T > topk, and positions both above and below it. */
	check_indexer(&m, q, w, pos, T, kdeq, 8);
	/* topk above every count: all positions selected, in score order. */
	check_indexer(&m, q, w, pos, T, kdeq, 64);
	/* topk exactly pos + 1 for the last token, and 1. */
	check_indexer(&m, q, w, pos, T, kdeq, 37);
	check_indexer(&m, q, w, pos, T, kdeq, 1);
	seqmap_fini(&m);
	free(ik);
	free(kdeq);
	free(q);
}

/* Equal scores on purpose: positions repeat five keys, so scores repeat
 * with period 5 and topk cuts through groups of equal scores; one head
 * pattern makes every dot negative for some keys (score exactly 0). */
static void t_indexer_ties(void)
{
	enum { S = 61, T = 6 };
	static const uint32_t pos[T] = { 60, 59, 31, 12, 4, 60 };
	struct seqmap m;
	float *ik = xmalloc(S * 128 * sizeof(float));
	float *kdeq = xmalloc(S * 128 * sizeof(float));
	float *q = xmalloc(T * IH * 128 * sizeof(float));
	float w[T * IH];
	unsigned int ties = 0;

	seqmap_init(&m, 16, S, 1);
	for (uint32_t i = 0; i < 5 * 128; i++)
		ik[i] = rnd();
	/* Key 4 is minus key 3: for q along key 3 its dots are negative. */
	for (uint32_t i = 0; i < 128; i++)
		ik[4 * 128 + i] = -ik[3 * 128 + i];
	for (uint32_t s = 5; s < S; s++)
		memcpy(ik + s * 128, ik + (s % 5) * 128, 128 * sizeof(float));
	write_keys(&m, ik, kdeq, S);
	fill_queries(q, w, T);
	for (uint32_t h = 0; h < IH; h++)
		memcpy(q + (T - 1) * IH * 128 + h * 128, ik + 3 * 128, 128 * sizeof(float));
	for (uint32_t k = 1; k <= 26; k += 5)
		ties += check_indexer(&m, q, w, pos, T, kdeq, k);
	ties += check_indexer(&m, q, w, pos, T, kdeq, 64);
	ktap_diag("%u adjacent equal scores in the selections", ties);
	KTAP_EXPECT(ties > 100);
	seqmap_fini(&m);
	free(ik);
	free(kdeq);
	free(q);
}

/* NaN scores rank below everything and tie by position; inf is a number. */
static void t_indexer_nan_scores(void)
{
	enum { S = 20, T = 2 };
	static const uint32_t pos[T] = { 19, 19 };
	struct seqmap m;
	float *ik = xmalloc(S * 128 * sizeof(float));
	float *kdeq = xmalloc(S * 128 * sizeof(float));
	float *q = xmalloc(T * IH * 128 * sizeof(float));
	float w[T * IH], scratch[S];
	int32_t sel[T * S];
	uint32_t n_sel[T];
	int seen_inf = 0;

	seqmap_init(&m, 4, S, 1);
	for (uint32_t i = 0; i < S * 128; i++)
		ik[i] = rnd();
	write_keys(&m, ik, kdeq, S);
	fill_queries(q, w, T);
	/* Token 0: a NaN weight makes every score NaN: positions in order.
	 * Token 1: weight inf on head 0 and 0 elsewhere: inf where the dot
	 * is positive, inf * 0 = NaN where it is not. */
	w[2] = NAN;
	w[4] = INFINITY;
	w[5] = w[6] = w[7] = 0.0f;
	check_indexer(&m, q, w, pos, T, kdeq, S);
	check_indexer(&m, q, w, pos, T, kdeq, 5);
	haccel__cpu_indexer_topk(sel, n_sel, q, w, T, IH, pos, seqmap_region(&m, 0, 1),
				 m.bt, m.P, S, scratch);
	for (uint32_t j = 0; j < S; j++)
		CHECK(sel[j] == (int32_t)j, "all NaN: rank %u is %d", j, sel[j]);
	/* Token 1: the infs rank first, then the NaNs by position. With
	 * topk = the count of infs the list is exactly the infs; one more
	 * adds the first NaN position. */
	{
		float sc[S];
		int32_t want[S], first_nan = -1;
		uint32_t one = 19;

		/* Recompute token 1's scores to classify the positions. */
		for (uint32_t s = 0; s < S; s++) {
			uint8_t codes[128], scales[4];
			float qd[128], dot = 0.0f;

			haccel__mxfp8_pack(codes, scales, q + IH * 128, 128);
			haccel__mxfp8_unpack(qd, codes, scales, 128);
			for (uint32_t i = 0; i < 128; i++)
				dot += qd[i] * kdeq[s * 128 + i];
			sc[s] = dot > 0.0f ? INFINITY : NAN;
			if (!isnan(sc[s]))
				want[seen_inf++] = (int32_t)s;
			else if (first_nan < 0)
				first_nan = (int32_t)s;
		}
		for (uint32_t extra = 0; extra < 2 && seen_inf > 0 && seen_inf < S; extra++) {
			uint32_t kk = (uint32_t)seen_inf + extra, got = 0;
			int32_t exp[S];

			memcpy(exp, want, (size_t)seen_inf * sizeof(exp[0]));
			exp[seen_inf] = first_nan;
			qsort(exp, kk, sizeof(exp[0]), cmp_int);
			haccel__cpu_indexer_topk(sel, n_sel, q + IH * 128, w + IH, 1, IH, &one,
						 seqmap_region(&m, 0, 1), m.bt, m.P, kk, scratch);
			CHECK(n_sel[0] == kk, "topk %u: n_sel %u", kk, n_sel[0]);
			for (uint32_t i = 0; i < kk; i++)
				got += sel[i] == exp[i];
			CHECK(got == kk, "topk %u: %u of the positions as expected", kk, got);
		}
	}
	KTAP_EXPECT(seen_inf > 0 && seen_inf < S);
	seqmap_fini(&m);
	free(ik);
	free(kdeq);
	free(q);
}

/* ------------------------------------------------------------------------ */
/* Sparse MLA                                                               */

#define MH 3
#define MAX_SEL 64

struct kvset {
	uint32_t S, dr;
	float *cdeq;  /* [S][512] dequantized latent by position */
	float *pdeq;  /* [S][dr] */
};

/* Write S random KV entries through the block table; keep the
 * dequantized copy by position. */
static void write_kv(struct kvset *kv, void *region, const int64_t *slots,
		     uint32_t S, uint32_t dr)
{
	float *lat = xmalloc(S * 512 * sizeof(float));
	float *pe = xmalloc((S * dr + 1) * sizeof(float));
	uint8_t rec[KV_BYTES];

	kv->S = S;
	kv->dr = dr;
	kv->cdeq = xmalloc(S * 512 * sizeof(float));
	kv->pdeq = xmalloc((S * dr + 1) * sizeof(float));
	for (uint32_t i = 0; i < S * 512; i++)
		lat[i] = rnd() * 2.0f;
	for (uint32_t i = 0; i < S * dr; i++)
		pe[i] = rnd();
	haccel__cpu_mla_kv_write(region, slots, lat, pe, S, dr);
	for (uint32_t s = 0; s < S; s++) {
		haccel__kv_token_pack(rec, lat + s * 512, pe + s * dr, dr);
		haccel__kv_token_unpack(rec, kv->cdeq + s * 512, kv->pdeq + s * dr, dr);
	}
	free(lat);
	free(pe);
}

static void kvset_free(struct kvset *kv)
{
	free(kv->cdeq);
	free(kv->pdeq);
}

/* Softmax attention over the listed positions, in double. */
static void naive_attend(double *o, const float *ql, const float *qp,
			 const struct kvset *kv, const int32_t *sel, uint32_t n,
			 float scale)
{
	double l[MAX_POS], m = -INFINITY, z = 0;

	for (uint32_t j = 0; j < n; j++) {
		const float *c = kv->cdeq + sel[j] * 512, *p = kv->pdeq + sel[j] * kv->dr;
		double d = 0;

		for (int i = 0; i < 512; i++)
			d += (double)ql[i] * c[i];
		for (uint32_t r = 0; r < kv->dr; r++)
			d += (double)qp[r] * p[r];
		l[j] = d * scale;
		m = fmax(m, l[j]);
	}
	for (uint32_t j = 0; j < n; j++)
		z += (l[j] = exp(l[j] - m));
	for (int i = 0; i < 512; i++)
		o[i] = 0;
	for (uint32_t j = 0; j < n; j++)
		for (int i = 0; i < 512; i++)
			o[i] += l[j] / z * kv->cdeq[sel[j] * 512 + i];
}

/* Run sparse MLA on the selections and compare every head with the
 * naive attention: max |o - ref| <= 1e-5 max |ref|. */
static void check_mla(const struct kvset *kv, const void *region, const uint32_t *bt,
		      uint32_t P, const float *ql, const float *qp, uint32_t T,
		      const int32_t *sel, const uint32_t *n_sel, uint32_t topk, float scale)
{
	float *o = xmalloc((size_t)T * MH * 512 * sizeof(float));
	float *scratch = xmalloc(topk * sizeof(float));
	double ref[512], worst = 0;

	haccel__cpu_sparse_mla(o, ql, qp, T, MH, kv->dr, sel, n_sel, topk, region, bt, P,
			       scale, scratch);
	for (uint32_t t = 0; t < T; t++)
		for (uint32_t h = 0; h < MH; h++) {
			const float *oh = o + (t * MH + h) * 512;
			double err = 0, big = 0;

			naive_attend(ref, ql + (t * MH + h) * 512, qp + (t * MH + h) * kv->dr,
				     kv, sel + t * topk, n_sel[t], scale);
			for (int i = 0; i < 512; i++) {
				err = fmax(err, fabs(oh[i] - ref[i]));
				big = fmax(big, fabs(ref[i]));
			}
			if (n_sel[t] == 0)
				CHECK(err == 0, "token %u: no selection gives zeros", t);
			else
				CHECK(err <= 1e-5 * big, "token %u head %u: error %g of %g", t,
				      h, err, big);
			if (big > 0)
				worst = fmax(worst, err / big);
		}
	ktap_diag("sparse MLA: worst relative error %.3g", worst);
	free(o);
	free(scratch);
}

static void fill_q(float *ql, float *qp, uint32_t T, uint32_t dr)
{
	for (uint32_t i = 0; i < T * MH * 512; i++)
		ql[i] = rnd();
	for (uint32_t i = 0; i < T * MH * dr; i++)
		qp[i] = rnd() * 2.0f;
}

static void t_sparse_mla_vs_naive(void)
{
	enum { S = 45, T = 5, TOPK = 16, DR = 64 };
	static const uint32_t pos[T] = { 44, 30, 15, 3, 44 };
	struct seqmap m;
	struct kvset kv;
	float *ql = xmalloc(T * MH * 512 * sizeof(float));
	float *qp = xmalloc(T * MH * DR * sizeof(float));
	int32_t sel[T * TOPK];
	uint32_t n_sel[T];

	seqmap_init(&m, 4, S, 1);
	write_kv(&kv, seqmap_region(&m, 0, 0), m.slots, S, DR);
	fill_q(ql, qp, T, DR);
	/* Random distinct positions <= pos[t], in random order; the last
	 * token selects nothing. */
	for (uint32_t t = 0; t < T; t++) {
		uint32_t n = pos[t] + 1 < TOPK ? pos[t] + 1 : TOPK;
		int32_t all[MAX_POS];

		for (uint32_t s = 0; s <= pos[t]; s++)
			all[s] = (int32_t)s;
		for (uint32_t s = pos[t]; s > 0; s--) {
			uint32_t r = (uint32_t)ktap_rand_below(s + 1);
			int32_t tmp = all[s];

			all[s] = all[r];
			all[r] = tmp;
		}
		n_sel[t] = t == T - 1 ? 0 : n;
		for (uint32_t j = 0; j < TOPK; j++)
			sel[t * TOPK + j] = j < n ? all[j] : -1;
	}
	check_mla(&kv, seqmap_region(&m, 0, 0), m.bt, m.P, ql, qp, T, sel, n_sel, TOPK,
		  0.0721688f);
	/* A sharper softmax (large scale) and a flat one. */
	check_mla(&kv, seqmap_region(&m, 0, 0), m.bt, m.P, ql, qp, T, sel, n_sel, TOPK, 0.25f);
	check_mla(&kv, seqmap_region(&m, 0, 0), m.bt, m.P, ql, qp, T, sel, n_sel, TOPK, 1e-3f);
	kvset_free(&kv);
	seqmap_fini(&m);
	free(ql);
	free(qp);
}

/*
 * The indexer with topk above every count selects every position; sparse
 * MLA over that selection is dense attention over the whole prefix. Also
 * for dr = 0 (no rope part: 528-byte records) on a plain buffer.
 */
static void t_sparse_all_is_dense(void)
{
	enum { S = 40, T = 4, TOPK = MAX_SEL, DR = 64 };
	static const uint32_t pos[T] = { 39, 38, 17, 0 };
	struct seqmap m;
	struct kvset kv;
	float *ql = xmalloc(T * MH * 512 * sizeof(float));
	float *qp = xmalloc(T * MH * DR * sizeof(float));
	float *q = xmalloc(T * IH * 128 * sizeof(float));
	float *ik = xmalloc(S * 128 * sizeof(float));
	float *o = xmalloc(T * MH * 512 * sizeof(float));
	float w[T * IH], scratch[TOPK];
	int32_t sel[T * TOPK], dense[T * TOPK];
	uint32_t n_sel[T];

	seqmap_init(&m, 8, S, 1);
	write_kv(&kv, seqmap_region(&m, 0, 0), m.slots, S, DR);
	for (uint32_t i = 0; i < S * 128; i++)
		ik[i] = rnd();
	haccel__cpu_index_k_write(seqmap_region(&m, 0, 1), m.slots, ik, S);
	fill_queries(q, w, T);
	fill_q(ql, qp, T, DR);
	haccel__cpu_indexer_topk(sel, n_sel, q, w, T, IH, pos, seqmap_region(&m, 0, 1),
				 m.bt, m.P, TOPK, scratch);
	for (uint32_t t = 0; t < T; t++) {
		KTAP_ASSERT_EQ(n_sel[t], pos[t] + 1);
		for (uint32_t j = 0; j < TOPK; j++)
			dense[t * TOPK + j] = j <= pos[t] ? (int32_t)j : -1;
	}
	/* Against dense attention over 0..pos[t] in position order. */
	haccel__cpu_sparse_mla(o, ql, qp, T, MH, DR, sel, n_sel, TOPK,
			       seqmap_region(&m, 0, 0), m.bt, m.P, 0.1f, scratch);
	for (uint32_t t = 0; t < T; t++)
		for (uint32_t h = 0; h < MH; h++) {
			double ref[512], err = 0, big = 0;

			naive_attend(ref, ql + (t * MH + h) * 512, qp + (t * MH + h) * DR,
				     &kv, dense + t * TOPK, pos[t] + 1, 0.1f);
			for (int i = 0; i < 512; i++) {
				err = fmax(err, fabs(o[(t * MH + h) * 512 + i] - ref[i]));
				big = fmax(big, fabs(ref[i]));
			}
			CHECK(err <= 1e-5 * big, "token %u head %u: %g of %g", t, h, err, big);
		}
	/* The same positions in position order: only the summation order
	 * differs. */
	check_mla(&kv, seqmap_region(&m, 0, 0), m.bt, m.P, ql, qp, T, dense, n_sel, TOPK,
		  0.1f);
	kvset_free(&kv);
	seqmap_fini(&m);

	/* dr = 0 on a plain region, block table reversed. */
	{
		enum { P0 = 4, PAGES = S / P0 };
		uint32_t bt[PAGES];
		int64_t slots[S];
		uint8_t *region = xmalloc((size_t)PAGES * P0 * 528);

		for (uint32_t i = 0; i < PAGES; i++)
			bt[i] = PAGES - 1 - i;
		for (uint32_t p = 0; p < S; p++)
			slots[p] = (int64_t)bt[p / P0] * P0 + p % P0;
		write_kv(&kv, region, slots, S, 0);
		check_mla(&kv, region, bt, P0, ql, qp, T, dense, n_sel, TOPK, 0.1f);
		kvset_free(&kv);
		free(region);
	}
	free(ql);
	free(qp);
	free(q);
	free(ik);
	free(o);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_rope_vs_rotation),
	KTAP_CASE(t_rope_inverse_and_norm),
	KTAP_CASE(t_hadamard_vs_matrix),
	KTAP_CASE(t_cache_writes_pool),
	KTAP_CASE(t_indexer_vs_naive),
	KTAP_CASE(t_indexer_ties),
	KTAP_CASE(t_indexer_nan_scores),
	KTAP_CASE(t_sparse_mla_vs_naive),
	KTAP_CASE(t_sparse_all_is_dense),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
