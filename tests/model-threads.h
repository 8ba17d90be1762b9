/* SPDX-License-Identifier: MIT */
/*
 * Two models of one context driven from two threads at once (each model by
 * its own thread), against the same steps run one model after the other on
 * two more models of the context: every step's logits within 1e-5 of their
 * range (the same kernels on the same inputs: the bits are expected), all
 * finite. Each model prefills three prompts of a tiny-vocabulary (256)
 * model, then decodes 24 steps: batches of 3 and, every fourth step, of
 * the first sequence alone (on the GPU, the buckets of 4 and of 1: each
 * thread captures two graphs while the other steps). Used by model-run
 * (CPU) and gpu-model (CUDA).
 */
#ifndef HACCEL_TESTS_MODEL_THREADS_H
#define HACCEL_TESTS_MODEL_THREADS_H

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "haccel.h"
#include "ktap.h"

#define MT_SEQS 3
#define MT_STEPS 24
#define MT_V 256

struct mt_job {
	struct haccel_model *m;
	uint32_t salt;
	float *out; /* [MT_STEPS][MT_SEQS][MT_V] */
	pthread_barrier_t *go;
	int ret;
};

static inline int32_t mt_tok(uint32_t i, uint32_t salt)
{
	return (int32_t)((i * 131u + salt * 7919u + (i * i) % 17u) % MT_V);
}

static inline int mt_steps(struct haccel_model *m, uint32_t salt, float *out)
{
	uint32_t s[MT_SEQS], pos[MT_SEQS];
	int32_t t[MT_SEQS][64];
	struct haccel_step_item it[MT_SEQS];
	int ret;

	for (uint32_t q = 0; q < MT_SEQS; q++) {
		ret = haccel_model_seq_create(m, &s[q]);
		if (ret)
			return ret;
		for (uint32_t i = 0; i < 64; i++)
			t[q][i] = mt_tok(i, salt * 10 + q);
		pos[q] = 9 + 7 * q;
		it[0] = (struct haccel_step_item){ s[q], pos[q], t[q], NULL };
		ret = haccel_model_step(m, it, 1);
		if (ret)
			return ret;
	}
	for (uint32_t k = 0; k < MT_STEPS; k++) {
		uint32_t n = k % 4 == 3 ? 1 : MT_SEQS;

		for (uint32_t q = 0; q < n; q++)
			it[q] = (struct haccel_step_item){ s[q], 1, &t[q][pos[q]],
							   out + ((size_t)k * MT_SEQS + q) * MT_V };
		ret = haccel_model_step(m, it, n);
		if (ret)
			return ret;
		for (uint32_t q = 0; q < n; q++)
			pos[q]++;
	}
	for (uint32_t q = 0; q < MT_SEQS; q++) {
		ret = haccel_model_seq_free(m, s[q]);
		if (ret)
			return ret;
	}
	return 0;
}

static inline void *mt_worker(void *arg)
{
	struct mt_job *j = arg;

	pthread_barrier_wait(j->go);
	j->ret = mt_steps(j->m, j->salt, j->out);
	return NULL;
}

/* ref[i] and m[i]: four models of ctx over the same weights (up to 64
 * tokens a sequence, MT_SEQS sequences or more, steps of 23 tokens or
 * more). ref runs first, one after the other; then m, a thread each. */
static inline void mt_check(struct haccel_ctx *ctx, struct haccel_model *ref[2],
			    struct haccel_model *m[2])
{
	const size_t per = (size_t)MT_STEPS * MT_SEQS * MT_V;
	struct mt_job job[2];
	pthread_barrier_t go;
	pthread_t th[2];
	float *want[2], *got[2];
	char err[1024];

	for (int i = 0; i < 2; i++) {
		want[i] = calloc(per, 4);
		got[i] = calloc(per, 4);
		KTAP_ASSERT(want[i] && got[i]);
		KTAP_ASSERT_EQ(mt_steps(ref[i], (uint32_t)i + 1, want[i]), 0);
	}
	KTAP_ASSERT_EQ(pthread_barrier_init(&go, NULL, 2), 0);
	for (int i = 0; i < 2; i++) {
		job[i] = (struct mt_job){ .m = m[i], .salt = (uint32_t)i + 1, .out = got[i], .go = &go };
		KTAP_ASSERT_EQ(pthread_create(&th[i], NULL, mt_worker, &job[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&go);
	for (int i = 0; i < 2; i++) {
		if (job[i].ret) {
			haccel_last_error(ctx, err, sizeof(err));
			ktap_diag("thread %d: %d (%s)", i, job[i].ret, err);
		}
		KTAP_EXPECT_EQ(job[i].ret, 0);
	}

	double worst = 0;
	uint32_t nonfinite = 0, rows = 0;
	size_t same = 0;

	for (int i = 0; i < 2; i++)
		for (size_t r = 0; r < (size_t)MT_STEPS * MT_SEQS; r++) {
			const float *g = got[i] + r * MT_V, *w = want[i] + r * MT_V;
			double scale = 0, e = 0;

			/* fmax drops NaN: non-finite logits are counted apart. */
			for (uint32_t v = 0; v < MT_V; v++) {
				if (!isfinite(g[v]) || !isfinite(w[v])) {
					nonfinite++;
					continue;
				}
				scale = fmax(scale, fabs(w[v]));
				e = fmax(e, fabs((double)g[v] - w[v]));
			}
			if (scale > 0)
				rows++;
			same += !memcmp(g, w, MT_V * 4);
			worst = fmax(worst, e / (scale > 0 ? scale : 1));
		}
	ktap_diag("two threads: %u rows with logits, %zu of %zu identical, worst max|diff|/max|logit| %.3g (tol 1e-5), %u non-finite",
		  rows, same, (size_t)2 * MT_STEPS * MT_SEQS, worst, nonfinite);
	/* Each thread: 18 steps of 3 rows and 6 of 1 (the rest stay 0). */
	KTAP_EXPECT_EQ(rows, 2 * (18 * MT_SEQS + 6));
	KTAP_EXPECT_EQ(nonfinite, 0);
	KTAP_EXPECT(worst <= 1e-5);
	for (int i = 0; i < 2; i++) {
		free(want[i]);
		free(got[i]);
	}
}

#endif /* HACCEL_TESTS_MODEL_THREADS_H */
