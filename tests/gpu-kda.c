// SPDX-License-Identifier: MIT
/* GPU KDA ops (conv, gate, prep, recurrence, chunked form, gated RMSNorm) against the CPU ops, over segments and state slots. Skips with no GPU. */
#include "config.h"

#include <errno.h>
#include <stdio.h>

#include "gpu-util.h"
#include "model/cpu/ops.h"
#include "model/format.h"

/*
 * Tolerances (each comparison prints its largest error):
 *  - conv, gate, prep, gated_rmsnorm: 1e-5 relative (plus a tiny absolute
 *    term for values near 0): the same formulas, sums in another order,
 *    and the GPU's expf/log1pf within 2 ulp of the C library's. Conv tails
 *    are copies: bit-exact. gated_rmsnorm_bf16 against the CPU: that plus
 *    2^-8 relative, the rounding to bf16.
 *  - recurrence: 2e-5 absolute + 1e-5 relative, for o and the state. Both
 *    sides run the same fp32 steps; only the order of the K-sums and FMA
 *    contraction differ, and the recurrence does not amplify errors
 *    (docs/model.md, "Numerics and tolerances": the fp32 recurrence is
 *    within 1e-6 of a double one). The same for the recurrence on raw
 *    inputs against the CPU gate, prep and recurrence: its inputs then
 *    differ by a few ulps too, which the recurrence carries as it does its
 *    own rounding.
 *  - chunked: the bound of the CPU chunked form against the recurrence,
 *    1e-4 (1 + max |ref|), against both the CPU chunked op (same chunks)
 *    and the CPU recurrence. The GPU's products are split (a tf32 part
 *    and bf16 cross terms), within 1.2 2^-17 of fp32 products
 *    (docs/model.md, "The chunked form").
 */
#define TOL_ELEM 1e-5
#define TOL_REC_ABS 2e-5
#define TOL_REC_REL 1e-5
#define CHUNK_TOL 1e-4

/* ------------------------------------------------------------------------ */
/* Helpers                                                                  */

/* Host buffers of a case, freed together at its end. */
static void *hbufs[96];
static unsigned int n_hbufs;

static float *hbuf(size_t n)
{
	float *p;

	KTAP_ASSERT(n_hbufs < sizeof(hbufs) / sizeof(hbufs[0]));
	p = calloc(n ? n : 1, sizeof(float));
	KTAP_ASSERT(p != NULL);
	hbufs[n_hbufs++] = p;
	return p;
}

static void hfree_all(void)
{
	while (n_hbufs)
		free(hbufs[--n_hbufs]);
}

static float *hdup(const float *src, size_t n)
{
	float *p = hbuf(n);

	memcpy(p, src, n * sizeof(float));
	return p;
}

static float frand(float lo, float hi)
{
	return lo + (hi - lo) * (float)(ktap_rand() >> 40) * 0x1p-24f;
}

static float *rnd(size_t n, float lo, float hi)
{
	float *x = hbuf(n);

	for (size_t i = 0; i < n; i++)
		x[i] = frand(lo, hi);
	return x;
}

static double max_abs(const float *x, size_t n)
{
	double m = 0.0;

	for (size_t i = 0; i < n; i++)
		if (fabs(x[i]) > m)
			m = fabs(x[i]);
	return m;
}

static int all_finite(const float *x, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(x[i]))
			return 0;
	return 1;
}

#define SEG_MAX 80

/*
 * The segments of one launch: token offsets and state slots, uploaded.
 * Slot s goes to n_slots - 1 - 2 s (n_slots = 2 n + 1): distinct, in
 * reverse order, never adjacent, so slot arithmetic that assumed s or
 * contiguity shows.
 */
struct segs {
	uint32_t n, T, n_slots;
	uint32_t off[SEG_MAX + 1], slot[SEG_MAX];
	haccel__dptr d_off, d_slot;
};

static void segs_make(struct segs *sg, const uint32_t *lens, uint32_t n)
{
	KTAP_ASSERT(n <= SEG_MAX);
	sg->n = n;
	sg->n_slots = 2 * n + 1;
	sg->off[0] = 0;
	for (uint32_t s = 0; s < n; s++) {
		sg->off[s + 1] = sg->off[s] + lens[s];
		sg->slot[s] = sg->n_slots - 1 - 2 * s;
	}
	sg->T = sg->off[n];
	sg->d_off = gpu_up(sg->off, (n + 1) * sizeof(uint32_t));
	sg->d_slot = gpu_up(sg->slot, n * sizeof(uint32_t));
}

/* The five lengths the brief asks for, and an empty segment among them. */
static const uint32_t mixed_lens[] = { 1, 3, 64, 0, 65, 200 };
#define N_MIXED (sizeof(mixed_lens) / sizeof(mixed_lens[0]))
/* Decode-like: a token a segment but for an empty one and two longer ones
 * (T <= 2 n_seg: the convolution's one-launch path, haccel_kda_conv_seg). */
static const uint32_t short_lens[] = { 1, 1, 0, 1, 2, 1, 1, 3, 1, 1, 1, 1, 1, 1, 1, 1 };
#define N_SHORT (sizeof(short_lens) / sizeof(short_lens[0]))

/* ------------------------------------------------------------------------ */
/* Inputs of the recurrence (as tests/model-kda.c)                          */

struct kin {
	uint32_t T, H, K, V;
	float *q, *k, *v, *g, *beta;
};

enum gmode {
	G_STRONG, /* g in [-5, 0) */
	G_MIXED,  /* per channel: strong, weak, or from the softplus gate */
	G_SWITCH, /* per channel, strong for 32 tokens, then weak */
	G_MINUS5, /* g = -5 everywhere */
	G_BURST,  /* in [-5, 0), but -20 for tokens 40-47 of every 64 */
};

/* q, k through prep (normalized, q scaled by K^-1/2), beta = sigmoid. */
static struct kin make_in(uint32_t T, uint32_t H, uint32_t K, uint32_t V, enum gmode gm)
{
	struct kin in = { .T = T, .H = H, .K = K, .V = V };
	size_t nk = (size_t)T * H * K;

	in.q = rnd(nk, -1.0f, 1.0f);
	in.k = rnd(nk, -1.0f, 1.0f);
	in.beta = rnd((size_t)T * H, -4.0f, 4.0f);
	haccel__cpu_kda_prep(in.q, in.k, in.beta, T, H, K);
	in.v = rnd((size_t)T * H * V, -1.0f, 1.0f);
	in.g = hbuf(nk);
	for (size_t i = 0; i < nk; i++) {
		uint32_t c = (uint32_t)(i % K), t = (uint32_t)(i / K / H);

		switch (gm) {
		case G_STRONG:
			in.g[i] = frand(-5.0f, 0.0f);
			break;
		case G_MIXED:
			in.g[i] = c % 3 == 0 ? frand(-5.0f, 0.0f) :
				  c % 3 == 1 ? frand(-1e-3f, 0.0f) : frand(-8.0f, 8.0f);
			break;
		case G_SWITCH:
			in.g[i] = (t + c) % 64 < 32 ? frand(-5.0f, -4.0f) : frand(-1e-3f, 0.0f);
			break;
		case G_MINUS5:
			in.g[i] = -5.0f;
			break;
		case G_BURST:
			in.g[i] = t % 64 / 8 == 5 ? -20.0f : frand(-5.0f, 0.0f);
			break;
		}
	}
	if (gm == G_MIXED) {
		float *A_log = rnd(H, -1.0f, 1.0f), *bias = rnd((size_t)H * K, -2.0f, 2.0f);
		float *gg = hbuf(nk);

		haccel__cpu_kda_gate(gg, in.g, T, H, K, A_log, bias, HACCEL__KDA_GATE_SOFTPLUS, 0.0f);
		for (size_t i = 0; i < nk; i++)
			if (i % K % 3 == 2)
				in.g[i] = gg[i];
	}
	return in;
}

struct kin_dev {
	haccel__dptr q, k, v, g, beta, o;
};

static struct kin_dev upload_in(const struct kin *in)
{
	size_t nk = (size_t)in->T * in->H * in->K * 4, nv = (size_t)in->T * in->H * in->V * 4;
	struct kin_dev d = {
		.q = gpu_up(in->q, nk),
		.k = gpu_up(in->k, nk),
		.v = gpu_up(in->v, nv),
		.g = gpu_up(in->g, nk),
		.beta = gpu_up(in->beta, (size_t)in->T * in->H * 4),
		.o = gpu_alloc(nv),
	};
	return d;
}

/*
 * The state pool: n_slots slots of slot_floats, each the state [H][K][V]
 * then 16 floats of padding that no op may touch. Filled with values in
 * [-1, 1].
 */
static size_t slot_floats(const struct kin *in)
{
	return (size_t)in->H * in->K * in->V + 16;
}

/*
 * The CPU ops segment by segment, each on its slot's state: the
 * recurrence (C = 0) or the chunked form with chunks of C.
 */
static void ref_segments(float *pool, const struct segs *sg, const struct kin *in, float *o,
			 uint32_t C)
{
	uint32_t H = in->H, K = in->K, V = in->V;
	float *scr = C ? hbuf(haccel__cpu_kda_chunked_scratch(C, K, V)) : NULL;

	for (uint32_t s = 0; s < sg->n; s++) {
		uint32_t t0 = sg->off[s], n = sg->off[s + 1] - t0;
		float *S = pool + sg->slot[s] * slot_floats(in);
		size_t ak = (size_t)t0 * H * K, av = (size_t)t0 * H * V;

		if (C)
			haccel__cpu_kda_chunked(S, in->q + ak, in->k + ak, in->v + av, in->g + ak,
						in->beta + (size_t)t0 * H, o + av, n, H, K, V, C,
						scr);
		else
			haccel__cpu_kda_recurrent(S, in->q + ak, in->k + ak, in->v + av,
						  in->g + ak, in->beta + (size_t)t0 * H, o + av, n,
						  H, K, V);
	}
}

/* Run the GPU recurrence (chunked = 0) or chunked form over the segments
 * on a device copy of pool; o and pool come back. */
static void gpu_segments(struct haccel__gpu *g, float *pool, const struct segs *sg,
			 const struct kin *in, const struct kin_dev *d, float *o, int chunked)
{
	uint32_t T = in->T, H = in->H, K = in->K, V = in->V;
	size_t pool_bytes = sg->n_slots * slot_floats(in) * 4, stride = slot_floats(in) * 4;
	haccel__dptr dpool = gpu_up(pool, pool_bytes);

	if (chunked) {
		size_t scr_bytes = haccel__cuda_kda_chunked_scratch(T, H, K, V, sg->n);
		/* A canary past the stated size shows the op keeps within it. */
		uint32_t canary = 0xdeadbeef, back;
		haccel__dptr scr = gpu_alloc(scr_bytes + 16);

		KTAP_ASSERT(g->cu->MemcpyHtoDAsync(scr + scr_bytes, &canary, 4, g->stream) == 0);
		KTAP_ASSERT(g->cu->StreamSynchronize(g->stream) == 0);
		KTAP_ASSERT_EQ(haccel__cuda_kda_chunked(g, NULL, d->q, d->k, d->v, d->g, d->beta,
							d->o, T, H, K, V, sg->n, sg->d_off,
							sg->d_slot, dpool, stride, scr),
			       0);
		gpu_down(&back, scr + scr_bytes, 4);
		KTAP_EXPECT_EQ(back, canary);
	} else {
		KTAP_ASSERT_EQ(haccel__cuda_kda_recurrent(g, NULL, d->q, d->k, d->v, d->g, d->beta,
							  d->o, T, H, K, V, sg->n, sg->d_off,
							  sg->d_slot, dpool, stride),
			       0);
	}
	gpu_down(o, d->o, (size_t)T * H * V * 4);
	gpu_down(pool, dpool, pool_bytes);
}

/* Compare o and the whole pool (padding and untouched slots included). */
static void expect_rec(const char *what, const float *o, const float *o_ref, const float *pool,
		       const float *pool_ref, size_t no, size_t npool)
{
	char buf[96];

	snprintf(buf, sizeof(buf), "%s o", what);
	KTAP_EXPECT(gpu_close_enough(buf, o, o_ref, no, TOL_REC_ABS, TOL_REC_REL));
	snprintf(buf, sizeof(buf), "%s S", what);
	KTAP_EXPECT(gpu_close_enough(buf, pool, pool_ref, npool, TOL_REC_ABS, TOL_REC_REL));
}

static void expect_chunk(const char *what, const float *o, const float *o_ref,
			 const float *pool, const float *pool_ref, size_t no, size_t npool)
{
	char buf[96];

	KTAP_EXPECT(all_finite(o, no) && all_finite(pool, npool));
	/* The bound scales with max |ref|: a reference with an infinity
	 * would make it infinite (and max_abs skips NaN), so such a
	 * reference fails here, named, before any comparison. */
	if (!all_finite(o_ref, no) || !all_finite(pool_ref, npool)) {
		ktap_fail_at(__FILE__, __LINE__, "%s: reference not finite (o %s, S %s)", what,
			     all_finite(o_ref, no) ? "finite" : "NaN/inf",
			     all_finite(pool_ref, npool) ? "finite" : "NaN/inf");
		return;
	}
	snprintf(buf, sizeof(buf), "%s o", what);
	KTAP_EXPECT(gpu_close_enough(buf, o, o_ref, no, CHUNK_TOL * (1.0 + max_abs(o_ref, no)),
				     0.0));
	snprintf(buf, sizeof(buf), "%s S", what);
	KTAP_EXPECT(gpu_close_enough(buf, pool, pool_ref, npool,
				     CHUNK_TOL * (1.0 + max_abs(pool_ref, npool)), 0.0));
}

/* ------------------------------------------------------------------------ */
/* Convolution                                                              */

/* Segments of 1, 3, 64, 0, 65, 200 tokens (the convolution, then the
 * tails' launch), then the short segments of short_lens (one launch), with
 * their own tails in scattered slots, against the CPU op per segment;
 * widths 4, 3, 8 and 1. */
static void t_conv_segments(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t Ws[] = { 4, 3, 8, 1 }, Cs[] = { 300, 40, 72, 33 };
	struct segs sg;

	for (unsigned int i = 0; i < 8; i++) {
		if (i % 4 == 0)
			segs_make(&sg, i ? short_lens : mixed_lens, i ? N_SHORT : N_MIXED);
		uint32_t W = Ws[i % 4], C = Cs[i % 4], T = sg.T, P = W - 1;
		/* A slot: the tail, then room the op must not touch. */
		size_t slot = (size_t)(W > 1 ? P : 1) * C + 8;
		float *in = rnd((size_t)T * C, -3.0f, 3.0f), *w = rnd((size_t)C * W, -1.0f, 1.0f);
		float *tails = rnd(sg.n_slots * slot, -3.0f, 3.0f);
		float *tails_ref = hdup(tails, sg.n_slots * slot);
		float *want = hbuf((size_t)T * C), *got = hbuf((size_t)T * C);
		haccel__dptr din = gpu_up(in, (size_t)T * C * 4), dw = gpu_up(w, (size_t)C * W * 4);
		haccel__dptr dt = gpu_up(tails, sg.n_slots * slot * 4);
		haccel__dptr dout = gpu_alloc((size_t)T * C * 4);

		for (uint32_t s = 0; s < sg.n; s++)
			haccel__cpu_kda_conv(want + (size_t)sg.off[s] * C, in + (size_t)sg.off[s] * C,
					     sg.off[s + 1] - sg.off[s], C, w, W,
					     tails_ref + sg.slot[s] * slot);
		KTAP_ASSERT_EQ(haccel__cuda_kda_conv(g, NULL, dout, din, T, C, dw, W, sg.n, sg.d_off,
						     sg.d_slot, dt, slot * 4),
			       0);
		gpu_down(got, dout, (size_t)T * C * 4);
		gpu_down(tails, dt, sg.n_slots * slot * 4);
		ktap_diag("W=%u C=%u, %u tokens in %u segments", W, C, T, sg.n);
		KTAP_EXPECT(gpu_close_enough("conv", got, want, (size_t)T * C, 1e-6, TOL_ELEM));
		KTAP_EXPECT(memcmp(tails, tails_ref, sg.n_slots * slot * 4) == 0);
	}
	hfree_all();
	gpu_close();
}

/* The first of n floats where a and b differ, as a diagnostic. */
static void first_diff(const char *what, const float *a, const float *b, size_t n)
{
	size_t k = 0, m = 0;

	for (size_t i = 0; i < n; i++)
		if (memcmp(&a[i], &b[i], 4)) {
			if (!m++)
				k = i;
		}
	if (m)
		ktap_diag("%s: %zu of %zu differ, the first at %zu: %.9g against %.9g", what, m, n,
			  k, (double)a[k], (double)b[k]);
}

/* Three convolutions (a layer's q, k, v) in one launch, over the segments
 * of t_conv_segments: each against the CPU op; then with the tails listed
 * in reverse (not equally spaced in order: one launch each), the same
 * bits. */
static void conv_n_on(struct haccel__gpu *g, const uint32_t *lens, uint32_t nl)
{
	const uint32_t W = 4, C = 300, P = W - 1, NG = 3;
	struct segs sg;

	segs_make(&sg, lens, nl);
	uint32_t T = sg.T;
	size_t slot = (size_t)P * C + 8, tc = (size_t)T * C, wc = (size_t)C * W;
	size_t ts = sg.n_slots * slot; /* floats of one convolution's tails */
	float *in = rnd(NG * tc, -3.0f, 3.0f), *w = rnd(NG * wc, -1.0f, 1.0f);
	float *tails = rnd(NG * ts, -3.0f, 3.0f), *tails_ref = hdup(tails, NG * ts);
	float *want = hbuf(NG * tc), *got = hbuf(NG * tc), *got2 = hbuf(NG * tc);
	float *tails2 = hbuf(NG * ts);
	haccel__dptr din = gpu_up(in, NG * tc * 4), dw = gpu_up(w, NG * wc * 4);
	haccel__dptr dt = gpu_up(tails, NG * ts * 4), dout = gpu_alloc(NG * tc * 4);
	haccel__dptr o[3], x[3], wt[3], tl[3];

	for (uint32_t k = 0; k < NG; k++) {
		for (uint32_t s = 0; s < sg.n; s++)
			haccel__cpu_kda_conv(want + k * tc + (size_t)sg.off[s] * C,
					     in + k * tc + (size_t)sg.off[s] * C,
					     sg.off[s + 1] - sg.off[s], C, w + k * wc, W,
					     tails_ref + k * ts + sg.slot[s] * slot);
		o[k] = dout + k * tc * 4;
		x[k] = din + k * tc * 4;
		wt[k] = dw + k * wc * 4;
		tl[k] = dt + k * ts * 4;
	}
	KTAP_ASSERT_EQ(haccel__cuda_kda_conv_n(g, NULL, NG, o, x, wt, tl, T, C, W, sg.n, sg.d_off,
					       sg.d_slot, slot * 4),
		       0);
	gpu_down(got, dout, NG * tc * 4);
	gpu_down(tails2, dt, NG * ts * 4);
	KTAP_EXPECT(gpu_close_enough("conv x3", got, want, NG * tc, 1e-6, TOL_ELEM));
	KTAP_EXPECT(memcmp(tails2, tails_ref, NG * ts * 4) == 0);

	/* The lists reversed: one launch each, from the same inputs. */
	haccel__dptr dt2 = gpu_up(tails, NG * ts * 4), o2[3], x2[3], w2[3], t2[3];
	for (uint32_t k = 0; k < NG; k++) {
		o2[k] = o[NG - 1 - k];
		x2[k] = x[NG - 1 - k];
		w2[k] = wt[NG - 1 - k];
		t2[k] = dt2 + (NG - 1 - k) * ts * 4;
	}
	KTAP_ASSERT_EQ(haccel__cuda_kda_conv_n(g, NULL, NG, o2, x2, w2, t2, T, C, W, sg.n, sg.d_off,
					       sg.d_slot, slot * 4),
		       0);
	gpu_down(got2, dout, NG * tc * 4);
	gpu_down(tails2, dt2, NG * ts * 4);
	first_diff("conv x3 reversed: o", got2, got, NG * tc);
	first_diff("conv x3 reversed: tails", tails2, tails_ref, NG * ts);
	KTAP_EXPECT(memcmp(got2, got, NG * tc * 4) == 0);
	KTAP_EXPECT(memcmp(tails2, tails_ref, NG * ts * 4) == 0);
}

static void t_conv_n(void)
{
	struct haccel__gpu *g = gpu_open();

	conv_n_on(g, mixed_lens, N_MIXED);
	conv_n_on(g, short_lens, N_SHORT);
	hfree_all();
	gpu_close();
}

/* One sequence through calls of 2 (fewer than W - 1), 1, 70 and 127
 * tokens equals one CPU call: outputs and tail. */
static void t_conv_split(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t pieces[] = { 2, 1, 70, 127 };
	const uint32_t C = 96, W = 4, T = 200, P = W - 1, zero = 0;
	float *in = rnd((size_t)T * C, -3.0f, 3.0f), *w = rnd((size_t)C * W, -1.0f, 1.0f);
	float *tail = rnd((size_t)P * C, -3.0f, 3.0f), *tail_ref = hdup(tail, (size_t)P * C);
	float *want = hbuf((size_t)T * C), *got = hbuf((size_t)T * C);
	haccel__dptr din = gpu_up(in, (size_t)T * C * 4), dw = gpu_up(w, (size_t)C * W * 4);
	haccel__dptr dt = gpu_up(tail, (size_t)P * C * 4), dout = gpu_alloc((size_t)T * C * 4);
	haccel__dptr dslot = gpu_up(&zero, 4);

	haccel__cpu_kda_conv(want, in, T, C, w, W, tail_ref);
	for (uint32_t p = 0, t = 0; p < 4; t += pieces[p++]) {
		uint32_t off[2] = { 0, pieces[p] };
		haccel__dptr doff = gpu_up(off, sizeof(off));

		KTAP_ASSERT_EQ(haccel__cuda_kda_conv(g, NULL, dout + (size_t)t * C * 4,
						     din + (size_t)t * C * 4, pieces[p], C, dw, W,
						     1, doff, dslot, dt, 0),
			       0);
	}
	gpu_down(got, dout, (size_t)T * C * 4);
	gpu_down(tail, dt, (size_t)P * C * 4);
	KTAP_EXPECT(gpu_close_enough("conv split", got, want, (size_t)T * C, 1e-6, TOL_ELEM));
	KTAP_EXPECT(memcmp(tail, tail_ref, (size_t)P * C * 4) == 0);
	hfree_all();
	gpu_close();
}

/* ------------------------------------------------------------------------ */
/* Gate, prep, gated RMSNorm                                                */

static void t_gate(void)
{
	struct haccel__gpu *g = gpu_open();
	const uint32_t T = 9, H = 3, K = 128;
	const size_t n = (size_t)T * H * K;
	float *raw = rnd(n, -12.0f, 28.0f), *A_log = rnd(H, -2.0f, 2.0f);
	float *bias = rnd((size_t)H * K, -3.0f, 3.0f), *want = hbuf(n), *got = hbuf(n);

	/* Huge values: the linear branch, and sigmoid saturating. */
	raw[5] = 1e30f, raw[6] = -1e30f, raw[7] = 1e4f;
	haccel__dptr draw = gpu_up(raw, n * 4), dA = gpu_up(A_log, H * 4);
	haccel__dptr db = gpu_up(bias, (size_t)H * K * 4), dg = gpu_alloc(n * 4);
	for (int form = 0; form < 2; form++) {
		float lb = -5.0f;

		haccel__cpu_kda_gate(want, raw, T, H, K, A_log, bias, form, lb);
		KTAP_ASSERT_EQ(haccel__cuda_kda_gate(g, NULL, dg, draw, T, H, K, dA, db, form, lb), 0);
		gpu_down(got, dg, n * 4);
		KTAP_EXPECT(gpu_close_enough(form ? "gate lower bound" : "gate softplus", got, want,
					     n, 1e-30, TOL_ELEM));
	}
	/* In place (g aliases g_raw). */
	KTAP_ASSERT_EQ(haccel__cuda_kda_gate(g, NULL, draw, draw, T, H, K, dA, db, 0, 0.0f), 0);
	haccel__cpu_kda_gate(want, raw, T, H, K, A_log, bias, 0, 0.0f);
	gpu_down(got, draw, n * 4);
	KTAP_EXPECT(gpu_close_enough("gate in place", got, want, n, 1e-30, TOL_ELEM));
	hfree_all();
	gpu_close();
}

static void t_prep(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t Ks[] = { 128, 72 };

	for (unsigned int i = 0; i < 2; i++) {
		const uint32_t T = 11, H = 5, K = Ks[i];
		const size_t n = (size_t)T * H * K;
		float *q = rnd(n, -3.0f, 3.0f), *k = rnd(n, -0.5f, 0.5f);
		float *beta = rnd((size_t)T * H, -6.0f, 6.0f);

		/* An all-zero row stays zero. */
		memset(q + K, 0, K * 4);
		memset(k + K, 0, K * 4);
		haccel__dptr dq = gpu_up(q, n * 4), dk = gpu_up(k, n * 4);
		haccel__dptr db = gpu_up(beta, (size_t)T * H * 4);
		float *gq = hbuf(n), *gk = hbuf(n), *gb = hbuf((size_t)T * H);

		haccel__cpu_kda_prep(q, k, beta, T, H, K);
		KTAP_ASSERT_EQ(haccel__cuda_kda_prep(g, NULL, dq, dk, db, T, H, K), 0);
		gpu_down(gq, dq, n * 4);
		gpu_down(gk, dk, n * 4);
		gpu_down(gb, db, (size_t)T * H * 4);
		KTAP_EXPECT(gpu_close_enough("prep q", gq, q, n, 1e-9, TOL_ELEM));
		KTAP_EXPECT(gpu_close_enough("prep k", gk, k, n, 1e-9, TOL_ELEM));
		KTAP_EXPECT(gpu_close_enough("prep beta", gb, beta, (size_t)T * H, 0.0, TOL_ELEM));
	}
	hfree_all();
	gpu_close();
}

static void t_gated_rmsnorm(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t Vs[] = { 128, 40 };

	for (unsigned int i = 0; i < 2; i++) {
		const uint32_t T = 7, H = 4, V = Vs[i];
		const size_t n = (size_t)T * H * V;
		float *o = rnd(n, -2.0f, 2.0f), *gate = rnd(n, -6.0f, 6.0f);
		float *w = rnd(V, 0.5f, 1.5f), *got = hbuf(n);
		haccel__dptr dout = gpu_up(o, n * 4), dg = gpu_up(gate, n * 4);
		haccel__dptr dw = gpu_up(w, V * 4);

		haccel__dptr dyb = gpu_alloc(n * 2), dref = gpu_alloc(n * 2);

		/* The bf16 form first: it must leave o as it is. */
		KTAP_ASSERT_EQ(haccel__cuda_gated_rmsnorm_bf16(g, NULL, dyb, dout, dg, dw, T, H, V,
							       1e-5f), 0);
		haccel__cpu_gated_rmsnorm(o, gate, w, T, H, V, 1e-5f);
		KTAP_ASSERT_EQ(haccel__cuda_gated_rmsnorm(g, NULL, dout, dg, dw, T, H, V, 1e-5f), 0);
		gpu_down(got, dout, n * 4);
		KTAP_EXPECT(gpu_close_enough("gated_rmsnorm", got, o, n, 1e-7, TOL_ELEM));
		/* and give the bits of the norm then to_bf16 */
		KTAP_ASSERT_EQ(haccel__cuda_to_bf16(g, NULL, dref, dout, n), 0);
		KTAP_EXPECT(gpu_same(dyb, dref, n * 2));
		/* and, on its own, within 1e-7 + (1e-5 + 2^-8) |want| of the
		 * CPU's norm (o by now): 1e-7 + 1e-5 |want| for the fp32 norm
		 * (as above), 2^-8 for the rounding to nearest (half a bf16
		 * step is at most 2^-8 of the value). The reference is finite,
		 * so a NaN or an infinity counts as off. */
		{
			uint16_t *yb = (uint16_t *)hbuf((n + 1) / 2);
			float *yf = hbuf(n);

			gpu_down(yb, dyb, n * 2);
			for (size_t j = 0; j < n; j++)
				yf[j] = haccel__bf16_to_float(yb[j]);
			KTAP_EXPECT(all_finite(o, n));
			KTAP_EXPECT(gpu_close_enough("gated_rmsnorm_bf16 vs CPU", yf, o, n, 1e-7,
						     TOL_ELEM + 0x1p-8));
		}
	}
	hfree_all();
	gpu_close();
}

/* ------------------------------------------------------------------------ */
/* The recurrence                                                           */

/* Segments of 1, 3, 64, 0, 65, 200 tokens in one launch, each on its own
 * slot, against the CPU recurrence per segment: outputs and every slot.
 * K = V = 128, then K = 64 with V = 96 (a partial column tile) and
 * K = 256 with V = 32 (the largest K). */
static void t_recurrent_segments(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t dims[][3] = { { 3, 128, 128 }, { 2, 64, 96 }, { 2, 256, 32 } };
	struct segs sg;

	segs_make(&sg, mixed_lens, N_MIXED);
	for (unsigned int i = 0; i < 3; i++) {
		struct kin in = make_in(sg.T, dims[i][0], dims[i][1], dims[i][2],
					i == 1 ? G_MIXED : G_STRONG);
		struct kin_dev d = upload_in(&in);
		size_t np = sg.n_slots * slot_floats(&in), no = (size_t)sg.T * in.H * in.V;
		float *pool0 = rnd(np, -1.0f, 1.0f), *pool_ref = hdup(pool0, np);
		float *o_ref = hbuf(no);

		ref_segments(pool_ref, &sg, &in, o_ref, 0);
		/* Both column tiles (K = 256 has only the narrow one). */
		for (int tile = 32; tile <= 64; tile += 32) {
			float *pool = hdup(pool0, np), *o = hbuf(no);
			char what[64];

			g->kda_tile = tile;
			gpu_segments(g, pool, &sg, &in, &d, o, 0);
			snprintf(what, sizeof(what), "recurrent H=%u K=%u V=%u, tile %d", in.H, in.K,
				 in.V, tile);
			expect_rec(what, o, o_ref, pool, pool_ref, no, np);
		}
	}
	g->kda_tile = 0;
	hfree_all();
	gpu_close();
}

/* Decode: 64 sequences of one token, H = 8 heads of 128 x 128, two steps
 * (the second reads what the first wrote), with each column tile (the
 * library picks one by the grid; HACCEL_KDA_TILE does for a process). */
static void t_recurrent_decode(void)
{
	struct haccel__gpu *g = gpu_open();
	const uint32_t B = 64, H = 8, K = 128, V = 128;
	uint32_t lens[64];
	struct segs sg;

	for (uint32_t s = 0; s < B; s++)
		lens[s] = 1;
	segs_make(&sg, lens, B);
	for (int tile = 32; tile <= 64; tile += 32) {
		struct kin in0 = make_in(B, H, K, V, G_MIXED);
		size_t np = sg.n_slots * slot_floats(&in0), no = (size_t)B * H * V;
		float *pool = rnd(np, -1.0f, 1.0f), *pool_ref = hdup(pool, np);
		float *o = hbuf(no), *o_ref = hbuf(no);

		g->kda_tile = tile;
		for (int step = 0; step < 2; step++) {
			struct kin in = step ? make_in(B, H, K, V, G_STRONG) : in0;
			struct kin_dev d = upload_in(&in);
			char what[48];

			ref_segments(pool_ref, &sg, &in, o_ref, 0);
			gpu_segments(g, pool, &sg, &in, &d, o, 0);
			snprintf(what, sizeof(what), "decode step %d, tile %d", step + 1, tile);
			expect_rec(what, o, o_ref, pool, pool_ref, no, np);
		}
	}
	g->kda_tile = 0;
	hfree_all();
	gpu_close();
}

/*
 * The recurrence on raw inputs (haccel__cuda_kda_recurrent_raw: the gate,
 * the norms and the sigmoid formed inside) against the gate, prep and
 * recurrence kernels run in turn on the same inputs: o and every slot the
 * same bits, and the raw inputs left as they were. Both gate forms, the
 * three kernel sizes (K = 128, 64 with a partial column tile, 256), the
 * mixed segments and a decode-like batch of one-token segments, with each
 * column tile.
 */
static void t_recurrent_raw(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t dims[][3] = { { 3, 128, 128 }, { 2, 64, 96 }, { 2, 256, 32 } };
	uint32_t ones[40];
	struct segs sgs[2];

	for (uint32_t s = 0; s < 40; s++)
		ones[s] = 1;
	segs_make(&sgs[0], mixed_lens, N_MIXED);
	segs_make(&sgs[1], ones, 40);
	for (unsigned int c = 0; c < 12; c++) {
		const struct segs *sg = &sgs[c % 2];
		int tile = c < 6 ? 32 : 64;
		unsigned int mark = gpu_n_bufs;
		uint32_t H = dims[c % 6 / 2][0], K = dims[c % 6 / 2][1], V = dims[c % 6 / 2][2];
		uint32_t T = sg->T;
		int form = (int)(c % 2);
		float lb = -5.0f;
		/* The CPU reference's inputs; the pool's slots are those of
		 * ref_segments (the state, then its padding). */
		struct kin in = { .T = T, .H = H, .K = K, .V = V };
		size_t nk = (size_t)T * H * K, nv = (size_t)T * H * V, nb = (size_t)T * H;
		size_t slot = slot_floats(&in), np = sg->n_slots * slot, stride = slot * 4;
		float *q = rnd(nk, -3.0f, 3.0f), *k = rnd(nk, -0.5f, 0.5f), *v = rnd(nv, -1, 1);
		float *gr = rnd(nk, -8.0f, 3.0f), *beta = rnd(nb, -6.0f, 6.0f);
		float *A_log = rnd(H, -2.0f, 1.0f), *bias = rnd((size_t)H * K, -1.0f, 1.0f);
		float *pool = rnd(np, -1.0f, 1.0f);
		haccel__dptr dq = gpu_up(q, nk * 4), dk = gpu_up(k, nk * 4), dv = gpu_up(v, nv * 4);
		haccel__dptr dg = gpu_up(gr, nk * 4), db = gpu_up(beta, nb * 4);
		haccel__dptr dA = gpu_up(A_log, H * 4), dbias = gpu_up(bias, (size_t)H * K * 4);
		haccel__dptr pq = gpu_up(q, nk * 4), pk = gpu_up(k, nk * 4), pg = gpu_alloc(nk * 4);
		haccel__dptr pb = gpu_up(beta, nb * 4);
		haccel__dptr oa = gpu_alloc(nv * 4), ob = gpu_alloc(nv * 4);
		haccel__dptr poola = gpu_up(pool, np * 4), poolb = gpu_up(pool, np * 4);
		haccel__dptr raw[4] = { dq, dk, dg, db };
		const float *host[4] = { q, k, gr, beta };
		const size_t rn[4] = { nk, nk, nk, nb };
		bool kept = true;

		g->kda_tile = tile;
		ktap_diag("recurrent on raw inputs: H=%u K=%u V=%u, %u segments, gate form %d, tile %d",
			  H, K, V, sg->n, form, tile);
		KTAP_ASSERT_EQ(haccel__cuda_kda_gate(g, NULL, pg, dg, T, H, K, dA, dbias, form, lb),
			       0);
		KTAP_ASSERT_EQ(haccel__cuda_kda_prep(g, NULL, pq, pk, pb, T, H, K), 0);
		KTAP_ASSERT_EQ(haccel__cuda_kda_recurrent(g, NULL, pq, pk, dv, pg, pb, oa, T, H, K,
							  V, sg->n, sg->d_off, sg->d_slot, poola,
							  stride),
			       0);
		KTAP_ASSERT_EQ(haccel__cuda_kda_recurrent_raw(g, NULL, dq, dk, dv, dg, db, ob, T, H,
							      K, V, sg->n, sg->d_off, sg->d_slot,
							      poolb, stride, dA, dbias, form, lb),
			       0);
		KTAP_EXPECT(gpu_same(oa, ob, nv * 4));
		KTAP_EXPECT(gpu_same(poola, poolb, np * 4));
		/* And the fused kernel against the CPU directly: the CPU gate
		 * (log space, as the recurrence takes it) and prep on copies,
		 * then the recurrence segment by segment on a copy of the
		 * pool, as t_recurrent_segments; its tolerances. The inputs
		 * the recurrence sees differ from the CPU's by the gate's and
		 * prep's rounding (a few ulps), which the recurrence does not
		 * amplify (see the tolerances at the top). */
		{
			float *pool_ref = hdup(pool, np), *o_ref = hbuf(nv);
			float *pool_got = hbuf(np), *o_got = hbuf(nv);
			char what[96];

			in.q = hdup(q, nk);
			in.k = hdup(k, nk);
			in.beta = hdup(beta, nb);
			in.v = v;
			in.g = hbuf(nk);
			haccel__cpu_kda_gate(in.g, gr, T, H, K, A_log, bias, form, lb);
			haccel__cpu_kda_prep(in.q, in.k, in.beta, T, H, K);
			ref_segments(pool_ref, sg, &in, o_ref, 0);
			gpu_down(o_got, ob, nv * 4);
			gpu_down(pool_got, poolb, np * 4);
			snprintf(what, sizeof(what), "recurrent raw H=%u K=%u V=%u, form %d, tile %d", H,
				 K, V, form, tile);
			expect_rec(what, o_got, o_ref, pool_got, pool_ref, nv, np);
		}
		for (int i = 0; i < 4; i++) {
			float *back = hbuf(rn[i]);

			gpu_down(back, raw[i], rn[i] * 4);
			if (memcmp(back, host[i], rn[i] * 4))
				kept = false;
		}
		KTAP_EXPECT(kept);
		/* (the segments' buffers stay: they were made before) */
		gpu_free_to(mark);
		hfree_all();
	}
	g->kda_tile = 0;
	gpu_close();
}

/* ------------------------------------------------------------------------ */
/* The chunked form                                                         */

/* One configuration over the mixed segments: against the CPU chunked op
 * (same chunks) and the CPU recurrence. */
static void chunked_vs_cpu(struct haccel__gpu *g, const struct segs *sg, uint32_t H, uint32_t K,
			   uint32_t V, enum gmode gm, const char *name)
{
	struct kin in = make_in(sg->T, H, K, V, gm);
	struct kin_dev d = upload_in(&in);
	size_t np = sg->n_slots * slot_floats(&in), no = (size_t)sg->T * H * V;
	float *pool = rnd(np, -1.0f, 1.0f);
	float *pool_c = hdup(pool, np), *pool_r = hdup(pool, np);
	float *o = hbuf(no), *o_c = hbuf(no), *o_r = hbuf(no);
	char what[96];

	ref_segments(pool_c, sg, &in, o_c, 64);
	ref_segments(pool_r, sg, &in, o_r, 0);
	gpu_segments(g, pool, sg, &in, &d, o, 1);
	snprintf(what, sizeof(what), "chunked %s H=%u K=%u V=%u vs CPU chunked", name, H, K, V);
	expect_chunk(what, o, o_c, pool, pool_c, no, np);
	snprintf(what, sizeof(what), "chunked %s H=%u K=%u V=%u vs CPU recurrent", name, H, K, V);
	expect_chunk(what, o, o_r, pool, pool_r, no, np);
}

static void t_chunked_segments(void)
{
	struct haccel__gpu *g = gpu_open();
	struct segs sg;

	segs_make(&sg, mixed_lens, N_MIXED);
	chunked_vs_cpu(g, &sg, 2, 128, 128, G_STRONG, "strong");
	chunked_vs_cpu(g, &sg, 2, 128, 128, G_MIXED, "mixed");
	chunked_vs_cpu(g, &sg, 3, 64, 96, G_MIXED, "mixed");
	hfree_all();
	gpu_close();
}

/* The adversarial gates for the prefix sums, g = -5 everywhere (a
 * chunk's total decay e^-320 is 0 in fp32: ratios would be 0/0), and
 * bursts of -20 that put one diagonal block of each chunk past KDA_SPAN
 * (elementwise) while the other three factor (tensor cores). */
static void t_chunked_hard_gates(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t lens[] = { 200, 64, 130 };
	struct segs sg;

	segs_make(&sg, lens, 3);
	chunked_vs_cpu(g, &sg, 2, 128, 128, G_SWITCH, "switching");
	chunked_vs_cpu(g, &sg, 2, 128, 128, G_MINUS5, "g=-5");
	chunked_vs_cpu(g, &sg, 2, 128, 128, G_BURST, "bursts");
	hfree_all();
	gpu_close();
}

/* The largest K and V (the most shared memory), a small K, and K = 128
 * (its own pass 2) with a last V tile of 4 columns. */
static void t_chunked_sizes(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t lens[] = { 70, 1, 129 };
	struct segs sg;

	segs_make(&sg, lens, 3);
	chunked_vs_cpu(g, &sg, 1, 256, 256, G_MIXED, "mixed");
	chunked_vs_cpu(g, &sg, 2, 16, 4, G_STRONG, "strong");
	chunked_vs_cpu(g, &sg, 2, 128, 36, G_MIXED, "mixed"); /* a part V tile, K = 128 */
	hfree_all();
	gpu_close();
}

/* x cut to tf32 (the kernels' hi), and rounded to bf16 (to nearest even,
 * the cache format's rounding) */
static float wg_hi(float x)
{
	uint32_t u;

	memcpy(&u, &x, 4);
	u &= 0xffffe000u;
	memcpy(&x, &u, 4);
	return x;
}

static float wg_bf16(float x)
{
	return haccel__bf16_to_float(haccel__bf16_from_float(x));
}

/* Element (m, n) of part `part` of A B (see t_wg_matmul) in double; the
 * sum of its terms' magnitudes in *mag. */
static double wg_ref(const float *a, const float *b, uint32_t K, uint32_t NV, uint32_t ta,
		     uint32_t m, uint32_t n, uint32_t part, double *mag)
{
	double ref = 0.0;

	*mag = 0.0;
	for (uint32_t k = 0; k < K; k++) {
		float x = ta ? a[(size_t)k * 64 + m] : a[(size_t)m * K + k];
		float y = b[(size_t)k * NV + n];
		float xh = wg_hi(x), yh = wg_hi(y);
		double v = part == 1 ? (double)xh * yh :
			   part == 2 ? (double)wg_bf16(x) * wg_bf16(y - yh) +
					       (double)wg_bf16(x - xh) * wg_bf16(y) :
				       (double)x * y;

		ref += v, *mag += fabs(v);
	}
	return ref;
}

/* One shape of t_wg_matmul, its three parts. */
static void wg_matmul_case(struct haccel__gpu *g, uint32_t K, uint32_t NV, uint32_t ta)
{
	static const char *const what[] = { "split product", "tf32 hi hi", "bf16 cross terms" };
	float *a = rnd((size_t)64 * K, -1.0f, 1.0f), *b = rnd((size_t)K * NV, -1.0f, 1.0f);
	float *c = hbuf((size_t)64 * NV);

	for (size_t i = 0; i < (size_t)64 * K; i += 7)
		a[i] *= (i & 8) ? 1024.0f : 1.0f / 1024.0f;
	for (size_t i = 0; i < (size_t)K * NV; i += 5)
		b[i] *= (i & 4) ? 1024.0f : 1.0f / 1024.0f;
	haccel__dptr da = gpu_up(a, (size_t)64 * K * 4), db = gpu_up(b, (size_t)K * NV * 4);
	haccel__dptr dc = gpu_alloc((size_t)64 * NV * 4);

	for (uint32_t part = 0; part < 3; part++) {
		double worst = 0.0;
		int bad = 0;

		KTAP_ASSERT_EQ(haccel__cuda_kda_wg_matmul(g, NULL, dc, da, db, K, NV, ta, part), 0);
		gpu_down(c, dc, (size_t)64 * NV * 4);
		for (uint32_t m = 0; m < 64; m++)
			for (uint32_t n = 0; n < NV; n++) {
				double mag, ref = wg_ref(a, b, K, NV, ta, m, n, part, &mag);
				double e = fabs(c[m * NV + n] - ref) / (mag > 0.0 ? mag : 1.0);

				worst = e > worst ? e : worst;
				bad += !(e <= 0x1p-15);
			}
		ktap_diag("wg matmul K=%u NV=%u %s, %s: worst %.3g of its terms' sum (bound %.3g)",
			  K, NV, ta ? "A^T" : "A", what[part], worst, 0x1p-15);
		KTAP_EXPECT_EQ(bad, 0);
	}
}

/* The warpgroup product of pass 2 on its own (the B operand's split
 * layout, the A fragments' order), each of its parts against its exact
 * value in double: the tf32 products of the high parts, the bf16 cross
 * terms x lo' + lo x', and their sum against the fp32 product, each
 * element within 2^-15 of the sum of its terms' magnitudes (the parts'
 * products are exact in fp32, so what is left is the tensor cores' fp32
 * sums; a split product is within 1.2 2^-17 of x y, and without its cross
 * terms it would be about 2^-10 off). 32 and 64 columns, K 64 and 128, A
 * as rows or stored transposed, entries over 2^+-10. */
static void t_wg_matmul(void)
{
	struct haccel__gpu *g = gpu_open();

	for (uint32_t K = 64; K <= 128; K += 64)
		for (uint32_t NV = 32; NV <= 64; NV += 32)
			for (uint32_t ta = 0; ta < 2; ta++)
				wg_matmul_case(g, K, NV, ta);
	KTAP_EXPECT_EQ(haccel__cuda_kda_wg_matmul(g, NULL, 0, 0, 0, 96, 32, 0, 0), -EINVAL);
	KTAP_EXPECT_EQ(haccel__cuda_kda_wg_matmul(g, NULL, 0, 0, 0, 64, 48, 0, 0), -EINVAL);
	KTAP_EXPECT_EQ(haccel__cuda_kda_wg_matmul(g, NULL, 0, 0, 0, 64, 32, 0, 3), -EINVAL);
	hfree_all();
	gpu_close();
}

/* Each kernel of pass 2 for K = 128 (the library picks one by the grid;
 * HACCEL_KDA_PASS2 does for a process): mma.sync, and the warpgroup MMA
 * with 32 and 64 columns of V a block, each with a part last tile. */
static void t_chunked_pass2(void)
{
	struct haccel__gpu *g = gpu_open();
	static const uint32_t lens[] = { 200, 64, 1, 130 };
	static const int pick[] = { 1, 32, 64 };
	static const char *const name[] = { "mma", "wg32", "wg64" };
	int keep = g->kda_pass2;
	struct segs sg;

	segs_make(&sg, lens, 4);
	for (int i = 0; i < 3; i++) {
		char what[32];

		g->kda_pass2 = pick[i];
		snprintf(what, sizeof(what), "%s mixed", name[i]);
		chunked_vs_cpu(g, &sg, 2, 128, 128, G_MIXED, what);
		snprintf(what, sizeof(what), "%s bursts", name[i]);
		chunked_vs_cpu(g, &sg, 3, 128, 100, G_BURST, what);
	}
	g->kda_pass2 = keep;
	hfree_all();
	gpu_close();
}

/* One sequence of 200 tokens as calls of 70 and 130 (chunks restart at
 * each call; the state carries over) against one CPU recurrent call. */
static void t_chunked_split(void)
{
	struct haccel__gpu *g = gpu_open();
	const uint32_t T = 200, H = 2, K = 128, V = 128, T1 = 70;
	struct kin in = make_in(T, H, K, V, G_MIXED);
	struct kin_dev d = upload_in(&in);
	size_t ns = (size_t)H * K * V, no = (size_t)T * H * V;
	float *S = rnd(ns, -1.0f, 1.0f), *S_ref = hdup(S, ns), *o = hbuf(no), *o_ref = hbuf(no);
	uint32_t off1[2] = { 0, T1 }, off2[2] = { 0, T - T1 }, slot = 0;
	haccel__dptr doff1 = gpu_up(off1, 8), doff2 = gpu_up(off2, 8), dslot = gpu_up(&slot, 4);
	haccel__dptr dS = gpu_up(S, ns * 4);
	haccel__dptr scr = gpu_alloc(haccel__cuda_kda_chunked_scratch(T, H, K, V, 1));
	size_t ak = (size_t)T1 * H * K * 4, av = (size_t)T1 * H * V * 4;

	haccel__cpu_kda_recurrent(S_ref, in.q, in.k, in.v, in.g, in.beta, o_ref, T, H, K, V);
	KTAP_ASSERT_EQ(haccel__cuda_kda_chunked(g, NULL, d.q, d.k, d.v, d.g, d.beta, d.o, T1, H, K,
						V, 1, doff1, dslot, dS, 0, scr),
		       0);
	KTAP_ASSERT_EQ(haccel__cuda_kda_chunked(g, NULL, d.q + ak, d.k + ak, d.v + av, d.g + ak,
						d.beta + (size_t)T1 * H * 4, d.o + av, T - T1, H,
						K, V, 1, doff2, dslot, dS, 0, scr),
		       0);
	gpu_down(o, d.o, no * 4);
	gpu_down(S, dS, ns * 4);
	expect_chunk("chunked split 70 + 130", o, o_ref, S, S_ref, no, ns);
	hfree_all();
	gpu_close();
}

/* ------------------------------------------------------------------------ */
/* Arguments                                                                */

/* Sizes past the kernels' limits and misaligned state are refused before
 * anything is launched; empty work is a successful no-op. */
static void t_bad_args(void)
{
	struct haccel__gpu *g = gpu_open();
	uint32_t off[2] = { 0, 1 }, slot = 0;
	haccel__dptr doff = gpu_up(off, 8), dslot = gpu_up(&slot, 4);
	haccel__dptr buf = gpu_alloc(1 << 22), b16 = buf + 16;

#define REC(K, V, base, stride)                                                               \
	haccel__cuda_kda_recurrent(g, NULL, buf, buf, b16, buf, buf, b16, 1, 1, K, V, 1, doff,  \
				   dslot, base, stride)
#define CHK(K, V, base, stride, scr)                                                          \
	haccel__cuda_kda_chunked(g, NULL, buf, buf, buf, buf, buf, b16, 1, 1, K, V, 1, doff,    \
				 dslot, base, stride, scr)
	KTAP_EXPECT_EQ(REC(257, 128, buf, 0), -EINVAL);
	KTAP_EXPECT_EQ(REC(0, 128, buf, 0), -EINVAL);
	KTAP_EXPECT_EQ(REC(128, 126, buf, 0), -EINVAL);
	KTAP_EXPECT_EQ(REC(128, 128, buf + 4, 0), -EINVAL);
	KTAP_EXPECT_EQ(REC(128, 128, buf, 8), -EINVAL);
	KTAP_EXPECT_EQ(CHK(272, 128, buf, 0, b16), -EINVAL);
	KTAP_EXPECT_EQ(CHK(24, 128, buf, 0, b16), -EINVAL);
	KTAP_EXPECT_EQ(CHK(128, 260, buf, 0, b16), -EINVAL);
	KTAP_EXPECT_EQ(CHK(128, 126, buf, 0, b16), -EINVAL);
	KTAP_EXPECT_EQ(CHK(128, 128, buf, 0, b16 + 4), -EINVAL);
	KTAP_EXPECT_EQ(CHK(128, 128, buf, 0, 0), -EINVAL);
	KTAP_EXPECT_EQ(haccel__cuda_kda_conv(g, NULL, buf, buf, 1, 8, buf, 9, 1, doff, dslot, buf,
					     0),
		       -EINVAL);
	/* Nothing to do: 0, and nothing launched. */
	KTAP_EXPECT_EQ(haccel__cuda_kda_recurrent(g, NULL, buf, buf, b16, buf, buf, b16, 0, 1, 128,
						  128, 1, doff, dslot, buf, 0),
		       0);
	KTAP_EXPECT_EQ(haccel__cuda_kda_conv(g, NULL, buf, buf, 1, 8, buf, 0, 1, doff, dslot, buf,
					     0),
		       0);
	gpu_sync();
#undef REC
#undef CHK
	gpu_close();
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_conv_segments),
	KTAP_CASE(t_conv_n),
	KTAP_CASE(t_conv_split),
	KTAP_CASE(t_gate),
	KTAP_CASE(t_prep),
	KTAP_CASE(t_gated_rmsnorm),
	KTAP_CASE(t_recurrent_segments),
	KTAP_CASE(t_recurrent_decode),
	KTAP_CASE(t_recurrent_raw),
	KTAP_CASE(t_chunked_segments),
	KTAP_CASE(t_chunked_hard_gates),
	KTAP_CASE(t_chunked_sizes),
	KTAP_CASE(t_wg_matmul),
	KTAP_CASE(t_chunked_pass2),
	KTAP_CASE(t_chunked_split),
	KTAP_CASE(t_bad_args),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
