// SPDX-License-Identifier: MIT
/*
 * Recurrent-state pool for the linear-attention (KDA) layers.
 *
 * A slot holds one sequence's state for every KDA layer, contiguous, so a
 * checkpoint or a swap is one copy of slot_bytes:
 *
 *   slot s = base + s * slot_bytes
 *     layer l = slot + l * layer_bytes
 *       state   fp32 [heads][dk][dv]               at state_offset (0)
 *       conv q  [conv_width-1][heads*dk] elements   at conv_q_offset
 *       conv k  [conv_width-1][heads*dk] elements   at conv_k_offset
 *       conv v  [conv_width-1][heads*dv] elements   at conv_v_offset
 *
 * Sub-blocks are 256-byte aligned, slots 4 KiB aligned. Checkpoints have the
 * slot layout and follow the slots in the same allocation. They are keyed
 * by (prefix key, token position): the KV pool's chained page key at the
 * same boundary, so a prefix hit can find both the KV pages and the state.
 * Used checkpoints sit on an LRU list (saves and restores refresh them) for
 * HACCEL_STATE_CKPT_EVICT.
 *
 * A checkpoint's id is gen * n_checkpoints + index: index is its place in
 * memory, gen a per-place generation that advances each time the place is
 * released (dropped, evicted, a failed save). An id handed out before is
 * then stale and finds nothing (-ENOENT) instead of the place's next
 * checkpoint. Generations wrap after gens = 2^32 / n_checkpoints of them
 * (ids stay uint32_t; with more than 2^31 checkpoints there is one, and
 * stale ids go undetected).
 */
#include "config.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "core/ctx.h"
#include "core/log.h"
#include "core/map.h"
#include "core/util.h"
#include "state.h"

#define NONE UINT32_MAX
#define SUB_ALIGN 256u
#define SLOT_ALIGN 4096u

struct haccel_state_pool {
	struct haccel_ctx *ctx;
	const struct haccel__mem_ops *mem;
	struct haccel_state_pool_config cfg;
	struct haccel_state_layout lay;

	void *base;
	uint64_t bytes;

	uint8_t *slot_used;
	uint32_t *slot_free;       /* stack */
	uint32_t n_slot_free;

	uint64_t *ck_key;
	uint32_t *ck_pos;
	uint8_t *ck_used;
	uint32_t *ck_gen;          /* generation of each place, < ck_gens */
	uint64_t ck_gens;          /* 2^32 / n_checkpoints: ids fit in 32 bits */
	uint32_t *ck_free;         /* stack */
	uint32_t n_ck_free;
	uint32_t *ck_prev, *ck_next; /* LRU of used checkpoints, head = oldest */
	uint32_t ck_head, ck_tail;
	struct haccel__map map;    /* mixed (key, pos) -> checkpoint */

	uint64_t saves, restores, drops, evictions;
};

void haccel_state_pool_config_init(struct haccel_state_pool_config *cfg)
{
	if (!cfg)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->size = sizeof(*cfg);
	cfg->n_layers = 1;
	cfg->n_heads = 32;
	cfg->head_dk = 128;
	cfg->head_dv = 128;
	cfg->conv_width = 4;
	cfg->conv_elem_bytes = 4;
	cfg->mem = HACCEL_MEM_HOST;
}

static inline uint64_t ck_map_key(uint64_t key, uint32_t pos)
{
	return haccel__mix64(key ^ haccel__mix64((uint64_t)pos + 0x9e3779b97f4a7c15ull));
}

/* Layer and slot layout from the dims; -EOVERFLOW on absurd sizes. */
static int compute_layout(const struct haccel_state_pool_config *c,
			  struct haccel_state_layout *l)
{
	uint64_t qk, v, t, off = 0;
	uint64_t taps = c->conv_width - 1;

	memset(l, 0, sizeof(*l));
	if (!haccel__mul_u64(c->n_heads, c->head_dk, &qk) ||
	    !haccel__mul_u64(c->n_heads, c->head_dv, &v) ||
	    !haccel__mul_u64(qk, c->head_dv, &t) || !haccel__mul_u64(t, 4, &t))
		return -EOVERFLOW;
	l->state_offset = 0;
	l->state_bytes = t;
	off = t;
#define SUB(field_off, field_bytes, dim)                                       \
	do {                                                                   \
		if (!haccel__align_u64(off, SUB_ALIGN, &off) ||                \
		    !haccel__mul_u64(taps * (dim), c->conv_elem_bytes, &t))    \
			return -EOVERFLOW;                                     \
		l->field_off = off;                                            \
		l->field_bytes = t;                                            \
		if (!haccel__add_u64(off, t, &off))                            \
			return -EOVERFLOW;                                     \
	} while (0)
	SUB(conv_q_offset, conv_q_bytes, qk);
	SUB(conv_k_offset, conv_k_bytes, qk);
	SUB(conv_v_offset, conv_v_bytes, v);
#undef SUB
	if (!haccel__align_u64(off, SUB_ALIGN, &l->layer_bytes) ||
	    !haccel__mul_u64(l->layer_bytes, c->n_layers, &t) ||
	    !haccel__align_u64(t, SLOT_ALIGN, &l->slot_bytes))
		return -EOVERFLOW;
	return 0;
}

static int validate_config(struct haccel_ctx *ctx,
			   const struct haccel_state_pool_config *c)
{
	if (c->flags || c->reserved) {
		haccel__err(ctx, "state pool: unknown flags 0x%x or non-zero reserved field",
			    c->flags);
		return -EINVAL;
	}
	if (!c->n_layers || !c->n_heads || !c->head_dk || !c->head_dv ||
	    c->conv_width < 1 || c->conv_width > 64 ||
	    (c->conv_elem_bytes != 2 && c->conv_elem_bytes != 4)) {
		haccel__err(ctx, "state pool: n_layers, n_heads, head_dk, head_dv must be > 0, conv_width 1..64, conv_elem_bytes 2 or 4");
		return -EINVAL;
	}
	if (c->n_checkpoints >= NONE || c->n_slots >= NONE)
		return -EINVAL;
	if (!haccel__mem_ops_get(c->mem)) {
		haccel__err(ctx, "state pool: unknown memory kind %u", c->mem);
		return -EINVAL;
	}
	return 0;
}

/* Free the host bookkeeping arrays (NULL ones too). */
static void free_meta(struct haccel_state_pool *p)
{
	free(p->ck_next);
	free(p->ck_prev);
	free(p->ck_free);
	free(p->ck_gen);
	free(p->ck_used);
	free(p->ck_pos);
	free(p->ck_key);
	free(p->slot_free);
	free(p->slot_used);
}

int haccel_state_pool_create(struct haccel_ctx *ctx,
			     const struct haccel_state_pool_config *cfg,
			     struct haccel_state_pool **out)
{
	struct haccel_state_pool_config c;
	struct haccel_state_pool *p;
	struct haccel_state_layout l;
	uint64_t n_slots, total;
	int ret;

	if (!ctx || !cfg || !out)
		return -EINVAL;
	*out = NULL;
	haccel_state_pool_config_init(&c);
	ret = haccel__config_copy(&c, sizeof(c), cfg, sizeof(c));
	if (ret) {
		haccel__err(ctx, "state pool: config size %u not supported", cfg->size);
		return ret;
	}
	ret = validate_config(ctx, &c);
	if (ret)
		return ret;
	ret = compute_layout(&c, &l);
	if (ret) {
		haccel__err(ctx, "state pool: slot size overflows");
		return ret;
	}
	n_slots = c.n_slots;
	if (!n_slots) {
		uint64_t ck;

		if (!haccel__mul_u64(c.n_checkpoints, l.slot_bytes, &ck) ||
		    c.budget_bytes < ck + l.slot_bytes) {
			haccel__err(ctx, "state pool: budget of %llu bytes holds no slot of %llu bytes beside %u checkpoints",
				    (unsigned long long)c.budget_bytes,
				    (unsigned long long)l.slot_bytes, c.n_checkpoints);
			return -EINVAL;
		}
		n_slots = (c.budget_bytes - ck) / l.slot_bytes;
		if (n_slots >= NONE)
			n_slots = NONE - 1;
	}
	if (!haccel__mul_u64(n_slots + c.n_checkpoints, l.slot_bytes, &total))
		return -EOVERFLOW;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->ctx = ctx;
	p->cfg = c;
	p->mem = haccel__mem_ops_get(c.mem);
	p->lay = l;
	p->lay.n_slots = (uint32_t)n_slots;
	p->lay.n_checkpoints = c.n_checkpoints;
	p->bytes = total;

	ret = -ENOMEM;
	p->slot_used = calloc(n_slots, 1);
	p->slot_free = calloc(n_slots, sizeof(uint32_t));
	p->ck_key = calloc(c.n_checkpoints + 1, sizeof(uint64_t));
	p->ck_pos = calloc(c.n_checkpoints + 1, sizeof(uint32_t));
	p->ck_used = calloc(c.n_checkpoints + 1, 1);
	p->ck_gen = calloc(c.n_checkpoints + 1, sizeof(uint32_t));
	p->ck_free = calloc(c.n_checkpoints + 1, sizeof(uint32_t));
	p->ck_prev = calloc(c.n_checkpoints + 1, sizeof(uint32_t));
	p->ck_next = calloc(c.n_checkpoints + 1, sizeof(uint32_t));
	if (!p->slot_used || !p->slot_free || !p->ck_key || !p->ck_pos ||
	    !p->ck_used || !p->ck_gen || !p->ck_free || !p->ck_prev || !p->ck_next)
		goto err_meta;
	if (c.n_checkpoints && haccel__map_init(&p->map, c.n_checkpoints))
		goto err_meta;
	ret = p->mem->alloc(ctx, total, &p->base);
	if (ret) {
		haccel__err(ctx, "state pool: cannot allocate %llu bytes of %s memory for %llu slots + %u checkpoints",
			    (unsigned long long)total, p->mem->name,
			    (unsigned long long)n_slots, c.n_checkpoints);
		goto err_map;
	}
	p->lay.slots_base = p->base;
	p->lay.ckpt_base = (char *)p->base + n_slots * l.slot_bytes;

	for (uint32_t i = 0; i < n_slots; i++)
		p->slot_free[i] = (uint32_t)n_slots - 1 - i;
	p->n_slot_free = (uint32_t)n_slots;
	for (uint32_t i = 0; i < c.n_checkpoints; i++) {
		p->ck_free[i] = c.n_checkpoints - 1 - i;
		p->ck_prev[i] = p->ck_next[i] = NONE;
	}
	p->n_ck_free = c.n_checkpoints;
	p->ck_gens = c.n_checkpoints ? ((uint64_t)1 << 32) / c.n_checkpoints : 1;
	p->ck_head = p->ck_tail = NONE;

	haccel__info(ctx, "state pool: %llu slots + %u checkpoints of %.2f MiB (%u layers x %u heads x %ux%u), %s memory",
		     (unsigned long long)n_slots, c.n_checkpoints,
		     (double)l.slot_bytes / (1 << 20), c.n_layers, c.n_heads,
		     c.head_dk, c.head_dv, p->mem->name);
	*out = p;
	return 0;

err_map:
	if (c.n_checkpoints)
		haccel__map_fini(&p->map);
err_meta:
	free_meta(p);
	free(p);
	return ret;
}

void haccel_state_pool_destroy(struct haccel_state_pool *p)
{
	if (!p)
		return;
	p->mem->free(p->ctx, p->base, p->bytes);
	if (p->cfg.n_checkpoints)
		haccel__map_fini(&p->map);
	free_meta(p);
	free(p);
}

int haccel_state_pool_layout(const struct haccel_state_pool *p,
			     struct haccel_state_layout *out)
{
	if (!p || !out)
		return -EINVAL;
	*out = p->lay;
	return 0;
}

int haccel_state_pool_stats(const struct haccel_state_pool *p,
			    struct haccel_state_stats *out)
{
	if (!p || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->slots_total = p->lay.n_slots;
	out->slots_free = p->n_slot_free;
	out->slots_used = p->lay.n_slots - p->n_slot_free;
	out->ckpts_total = p->lay.n_checkpoints;
	out->ckpts_free = p->n_ck_free;
	out->ckpts_used = p->lay.n_checkpoints - p->n_ck_free;
	out->slot_bytes = p->lay.slot_bytes;
	out->bytes_total = p->bytes;
	out->saves = p->saves;
	out->restores = p->restores;
	out->drops = p->drops;
	out->ckpt_evictions = p->evictions;
	return 0;
}

static inline void *slot_ptr(const struct haccel_state_pool *p, uint32_t s)
{
	return (char *)p->lay.slots_base + (uint64_t)s * p->lay.slot_bytes;
}

static inline void *ck_ptr(const struct haccel_state_pool *p, uint32_t c)
{
	return (char *)p->lay.ckpt_base + (uint64_t)c * p->lay.slot_bytes;
}

int haccel_state_slot_alloc(struct haccel_state_pool *p, uint32_t flags,
			    uint32_t *slot)
{
	uint32_t s;

	if (!p || !slot || (flags & ~HACCEL_STATE_SLOT_NOZERO))
		return -EINVAL;
	if (!p->n_slot_free)
		return -ENOMEM;
	s = p->slot_free[p->n_slot_free - 1];
	if (!(flags & HACCEL_STATE_SLOT_NOZERO)) {
		/* A new sequence starts from the zero state. */
		int ret = p->mem->zero(p->ctx, slot_ptr(p, s), p->lay.slot_bytes);
		if (ret)
			return ret;
	}
	p->n_slot_free--;
	p->slot_used[s] = 1;
	*slot = s;
	return 0;
}

static int slot_check(const struct haccel_state_pool *p, uint32_t s)
{
	if (!p || s >= p->lay.n_slots)
		return -EINVAL;
	return p->slot_used[s] ? 0 : -ENOENT;
}

int haccel_state_slot_free(struct haccel_state_pool *p, uint32_t s)
{
	int ret = slot_check(p, s);

	if (ret)
		return ret;
	p->slot_used[s] = 0;
	p->slot_free[p->n_slot_free++] = s;
	return 0;
}

static int slots_swap(struct haccel_state_pool *p, const uint32_t *slots, uint32_t n, char *host,
		      uint64_t host_bytes, int to_host)
{
	struct haccel__mem_copy c[256];
	uint64_t sb;
	int ret = 0;

	if (!p || (n && (!slots || !host)))
		return -EINVAL;
	sb = p->lay.slot_bytes;
	if (host_bytes / sb < n)
		return haccel__fail(p->ctx, -EINVAL, "state swap: %u slots need %llu host bytes, %llu given",
				    n, (unsigned long long)(n * sb), (unsigned long long)host_bytes);
	/* Swap-in marks each slot it has checked (slot_used's bit 1): a slot
	 * listed twice would hold whichever copy landed last, so it is
	 * refused; the marks go before it returns. */
	uint32_t i;

	for (i = 0; !ret && i < n; i++)
		if (slot_check(p, slots[i]))
			ret = haccel__fail(p->ctx, -EINVAL, "state swap: slot %u is not in use",
					   slots[i]);
		else if (!to_host && (p->slot_used[slots[i]] & 2))
			ret = haccel__fail(p->ctx, -EINVAL,
					   "state swap in: slot %u is listed twice: it would hold either copy",
					   slots[i]);
		else if (!to_host)
			p->slot_used[slots[i]] |= 2;
	/* (a refused entry, maybe out of range, was not marked) */
	if (!to_host)
		for (uint32_t j = 0; j < (ret ? i - 1 : i); j++)
			p->slot_used[slots[j]] &= 1;
	if (ret)
		return ret;
	for (i = 0; !ret && i < n; i += 256) {
		uint32_t k = n - i < 256 ? n - i : 256;

		for (uint32_t j = 0; j < k; j++) {
			char *h = host + (uint64_t)(i + j) * sb;
			c[j] = to_host ? (struct haccel__mem_copy){ h, slot_ptr(p, slots[i + j]), sb } :
					 (struct haccel__mem_copy){ slot_ptr(p, slots[i + j]), h, sb };
		}
		ret = p->mem->swap(p->ctx, c, k, to_host);
	}
	return ret;
}

int haccel_state_slots_swap_out(struct haccel_state_pool *p, const uint32_t *slots, uint32_t n,
				void *host, uint64_t host_bytes)
{
	return slots_swap(p, slots, n, host, host_bytes, 1);
}

int haccel_state_slots_swap_in(struct haccel_state_pool *p, const uint32_t *slots, uint32_t n,
			       const void *host, uint64_t host_bytes)
{
	return slots_swap(p, slots, n, (char *)(uintptr_t)host, host_bytes, 0);
}

/* ------------------------------------------------------------------------ */
/* Checkpoints                                                              */

static void ck_lru_remove(struct haccel_state_pool *p, uint32_t c)
{
	uint32_t pr = p->ck_prev[c], nx = p->ck_next[c];

	if (pr != NONE)
		p->ck_next[pr] = nx;
	else
		p->ck_head = nx;
	if (nx != NONE)
		p->ck_prev[nx] = pr;
	else
		p->ck_tail = pr;
	p->ck_prev[c] = p->ck_next[c] = NONE;
}

static void ck_lru_push(struct haccel_state_pool *p, uint32_t c)
{
	p->ck_prev[c] = p->ck_tail;
	p->ck_next[c] = NONE;
	if (p->ck_tail != NONE)
		p->ck_next[p->ck_tail] = c;
	else
		p->ck_head = c;
	p->ck_tail = c;
}

static uint32_t ck_lookup(const struct haccel_state_pool *p, uint64_t key,
			  uint32_t pos)
{
	uint64_t mk, cur;
	uint32_t c;

	if (!p->lay.n_checkpoints)
		return NONE;
	mk = ck_map_key(key, pos);
	cur = haccel__map_home(&p->map, mk);
	while ((c = haccel__map_next(&p->map, mk, &cur)) != HACCEL__MAP_EMPTY)
		if (p->ck_key[c] == key && p->ck_pos[c] == pos)
			return c;
	return NONE;
}

/* The id of the checkpoint at place c: < 2^32 since ck_gen[c] < ck_gens. */
static inline uint32_t ck_id(const struct haccel_state_pool *p, uint32_t c)
{
	return (uint32_t)((uint64_t)p->ck_gen[c] * p->lay.n_checkpoints + c);
}

/* Forget checkpoint c and return it to the free stack; its id goes stale. */
static void ck_release(struct haccel_state_pool *p, uint32_t c)
{
	(void)haccel__map_remove(&p->map, ck_map_key(p->ck_key[c], p->ck_pos[c]), c);
	ck_lru_remove(p, c);
	p->ck_used[c] = 0;
	p->ck_gen[c] = (uint64_t)p->ck_gen[c] + 1 == p->ck_gens ? 0 : p->ck_gen[c] + 1;
	p->ck_free[p->n_ck_free++] = c;
}

int haccel_state_ckpt_save(struct haccel_state_pool *p, uint32_t slot,
			   uint64_t key, uint32_t pos, uint32_t flags,
			   uint32_t *ckpt)
{
	struct haccel__mem_copy cp;
	uint32_t c;
	int ret = slot_check(p, slot);

	if (ret)
		return ret;
	if (!ckpt || (flags & ~HACCEL_STATE_CKPT_EVICT))
		return -EINVAL;
	c = ck_lookup(p, key, pos);
	if (c != NONE) {
		ck_lru_remove(p, c);
	} else {
		if (!p->n_ck_free) {
			if (!(flags & HACCEL_STATE_CKPT_EVICT) || p->ck_head == NONE)
				return -ENOMEM;
			ck_release(p, p->ck_head);
			p->evictions++;
		}
		c = p->ck_free[--p->n_ck_free];
		p->ck_key[c] = key;
		p->ck_pos[c] = pos;
		p->ck_used[c] = 1;
		(void)haccel__map_insert(&p->map, ck_map_key(key, pos), c);
	}
	ck_lru_push(p, c);
	cp = (struct haccel__mem_copy){ ck_ptr(p, c), slot_ptr(p, slot),
					p->lay.slot_bytes };
	ret = p->mem->copy(p->ctx, &cp, 1);
	if (ret) {
		/* Half-written state must never be restored. */
		ck_release(p, c);
		return ret;
	}
	p->saves++;
	*ckpt = ck_id(p, c);
	return 0;
}

int haccel_state_ckpt_find(struct haccel_state_pool *p, uint64_t key,
			   uint32_t pos, uint32_t *ckpt)
{
	uint32_t c;

	if (!p || !ckpt)
		return -EINVAL;
	c = ck_lookup(p, key, pos);
	if (c == NONE)
		return -ENOENT;
	*ckpt = ck_id(p, c);
	return 0;
}

/*
 * The place of the live checkpoint whose id is id. -EINVAL: no pool, no
 * checkpoints, or an id beyond every generation (one this pool never gives
 * out); -ENOENT: its place is free or has moved on to a later generation.
 */
static int ck_check(const struct haccel_state_pool *p, uint32_t id, uint32_t *c)
{
	uint32_t n, gen;

	if (!p || !p->lay.n_checkpoints)
		return -EINVAL;
	n = p->lay.n_checkpoints;
	gen = id / n;
	if (gen >= p->ck_gens)
		return -EINVAL;
	*c = id % n;
	return p->ck_used[*c] && p->ck_gen[*c] == gen ? 0 : -ENOENT;
}

int haccel_state_ckpt_restore(struct haccel_state_pool *p, uint32_t ckpt,
			      uint32_t slot)
{
	struct haccel__mem_copy cp;
	uint32_t c = 0;
	int ret = ck_check(p, ckpt, &c);

	if (ret)
		return ret;
	ret = slot_check(p, slot);
	if (ret)
		return ret;
	cp = (struct haccel__mem_copy){ slot_ptr(p, slot), ck_ptr(p, c),
					p->lay.slot_bytes };
	ret = p->mem->copy(p->ctx, &cp, 1);
	if (ret)
		return ret;
	ck_lru_remove(p, c);
	ck_lru_push(p, c);
	p->restores++;
	return 0;
}

int haccel_state_ckpt_drop(struct haccel_state_pool *p, uint32_t ckpt)
{
	uint32_t c = 0;
	int ret = ck_check(p, ckpt, &c);

	if (ret)
		return ret;
	ck_release(p, c);
	p->drops++;
	return 0;
}

/* ------------------------------------------------------------------------ */
/* Invariants                                                               */

#define FAIL(...)                                    \
	do {                                         \
		snprintf(why, why_len, __VA_ARGS__); \
		ret = -EBADMSG;                      \
		goto out;                            \
	} while (0)

int haccel__state_pool_check(const struct haccel_state_pool *p, char *why,
			     size_t why_len)
{
	uint32_t ns = p->lay.n_slots, nc = p->lay.n_checkpoints;
	uint8_t *seen = calloc((ns > nc ? ns : nc) + 1, 1);
	uint32_t used = 0, lru = 0, prev = NONE;
	int ret = 0;

	if (!seen) {
		snprintf(why, why_len, "out of memory");
		return -ENOMEM;
	}
	if (p->n_slot_free > ns)
		FAIL("slot free stack holds %u of %u", p->n_slot_free, ns);
	for (uint32_t i = 0; i < p->n_slot_free; i++) {
		uint32_t s = p->slot_free[i];

		if (s >= ns || seen[s] || p->slot_used[s])
			FAIL("slot free stack entry %u: slot %u repeated, out of range or in use", i, s);
		seen[s] = 1;
	}
	for (uint32_t s = 0; s < ns; s++) {
		if (p->slot_used[s] > 1 || (!p->slot_used[s] && !seen[s]))
			FAIL("slot %u neither used nor free", s);
		used += p->slot_used[s];
	}
	if (used + p->n_slot_free != ns)
		FAIL("slots: %u used + %u free != %u", used, p->n_slot_free, ns);

	memset(seen, 0, (ns > nc ? ns : nc) + 1);
	if (p->n_ck_free > nc)
		FAIL("checkpoint free stack holds %u of %u", p->n_ck_free, nc);
	for (uint32_t i = 0; i < p->n_ck_free; i++) {
		uint32_t c = p->ck_free[i];

		if (c >= nc || seen[c] || p->ck_used[c])
			FAIL("checkpoint free stack entry %u: %u repeated, out of range or in use", i, c);
		seen[c] = 1;
	}
	for (uint32_t c = p->ck_head, k = 0; c != NONE; c = p->ck_next[c], k++) {
		if (c >= nc || seen[c] || !p->ck_used[c] || k > nc)
			FAIL("checkpoint LRU broken at %u", c);
		if (p->ck_prev[c] != prev)
			FAIL("checkpoint %u: prev %u, expected %u", c, p->ck_prev[c], prev);
		if (ck_lookup(p, p->ck_key[c], p->ck_pos[c]) != c)
			FAIL("checkpoint %u not found under its key", c);
		seen[c] = 2;
		prev = c;
		lru++;
	}
	if (prev != p->ck_tail)
		FAIL("checkpoint LRU tail %u, list ends at %u", p->ck_tail, prev);
	if (lru + p->n_ck_free != nc)
		FAIL("checkpoints: %u used + %u free != %u", lru, p->n_ck_free, nc);
	for (uint32_t c = 0; c < nc; c++)
		if (p->ck_gen[c] >= p->ck_gens)
			FAIL("checkpoint %u: generation %u of %llu", c, p->ck_gen[c],
			     (unsigned long long)p->ck_gens);
	if (nc && (haccel__map_check(&p->map) || p->map.count != lru))
		FAIL("checkpoint table: %u entries for %u checkpoints", p->map.count, lru);
out:
	free(seen);
	return ret;
}
