// SPDX-License-Identifier: MIT
/*
 * config.json: strict parsing (jansson), validation, presets, writing.
 * Field names follow Hugging Face configs where one exists; the KDA, DSA
 * and attention-residual settings sit in sub-objects. docs/model.md lists
 * every field.
 */
#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/ctx.h"
#include "cpu/ops.h"
#include "model/model_config.h"

#define FAIL(...) haccel__fail(ctx, -EBADMSG, __VA_ARGS__)

/* ------------------------------------------------------------------------ */
/* Presets                                                                  */

static void kda_defaults(struct haccel__kda_config *k, uint32_t heads, uint32_t dim,
			 uint32_t rank)
{
	k->num_heads = heads;
	k->head_k_dim = dim;
	k->head_v_dim = dim;
	k->conv_size = 4;
	k->gate_form = HACCEL__KDA_GATE_SOFTPLUS;
	k->gate_lower_bound = -5.0f;
	k->gate_rank = rank;
	k->output_gate_low_rank = true;
	k->output_gate_rank = rank;
}

static void dsa_defaults(struct haccel__dsa_config *d, uint32_t heads, uint32_t q_lora,
			 uint32_t nope, uint32_t rope, uint32_t v, uint32_t ih,
			 uint32_t topk)
{
	d->num_heads = heads;
	d->q_lora_rank = q_lora;
	d->kv_lora_rank = 512;
	d->qk_nope_head_dim = nope;
	d->qk_rope_head_dim = rope;
	d->v_head_dim = v;
	d->rope_theta = 10000.0f;
	d->rope_layout = HACCEL__ROPE_INTERLEAVED;
	d->index_n_heads = ih;
	d->index_head_dim = 128;
	d->index_rope_dim = 64;
	d->index_rope_layout = HACCEL__ROPE_NEOX;
	d->index_topk = topk;
}

/* dsa at every `every`-th layer (index % every == every - 1), except those
 * at or after `kda_tail` (the trailing KDA layers). */
static void pattern(struct haccel__model_config *c, uint32_t every, uint32_t kda_tail)
{
	c->n_kda = c->n_dsa = 0;
	for (uint32_t i = 0; i < c->num_layers; i++) {
		bool dsa = i % every == every - 1 && i < kda_tail;

		c->layer_type[i] = dsa ? HACCEL__LAYER_DSA : HACCEL__LAYER_KDA;
		if (dsa)
			c->n_dsa++;
		else
			c->n_kda++;
	}
}

int haccel__config_preset(const char *name, struct haccel__model_config *c)
{
	memset(c, 0, sizeof(*c));
	c->rms_norm_eps = 1e-6f;
	c->eos_token_id = -1;
	c->attn_res = true;
	if (!strcmp(name, "tiny")) {
		/* Tests: every layer type twice, a byte vocabulary, and a top-k
		 * that drops tokens beyond 8 of context. */
		c->vocab_size = 256;
		c->hidden_size = 64;
		c->intermediate_size = 128;
		c->num_layers = 4;
		pattern(c, 2, 4);
		c->max_position_embeddings = 4096;
		c->attn_res_block_size = 2;
		kda_defaults(&c->kda, 2, 32, 16);
		dsa_defaults(&c->dsa, 2, 32, 16, 64, 16, 2, 8);
	} else if (!strcmp(name, "small")) {
		/* About 1B parameters, 3 KDA : 1 DSA, for GPU end to end. */
		c->vocab_size = 32000;
		c->hidden_size = 2048;
		c->intermediate_size = 5632;
		c->num_layers = 16;
		pattern(c, 4, 16);
		c->max_position_embeddings = 131072;
		c->attn_res_block_size = 8;
		kda_defaults(&c->kda, 16, 128, 128);
		dsa_defaults(&c->dsa, 16, 768, 128, 64, 128, 16, 2048);
	} else if (!strcmp(name, "kimi-linear-48b-a3b")) {
		/* Shapes of Kimi-Linear-48B-A3B's attention (27 layers, MLA at
		 * 3, 7, ..., 23 and 26); the MoE is stood in for by a dense MLP
		 * of the active width. For kernel benchmarks: no weights. Which
		 * values follow its config.json and which map its MLA onto the
		 * DSA layer (q LoRA, indexer, rope): docs/model.md, "Presets". */
		c->rms_norm_eps = 1e-5f;
		c->vocab_size = 163840;
		c->hidden_size = 2304;
		c->intermediate_size = 9216;
		c->num_layers = 27;
		pattern(c, 4, 27);
		c->layer_type[26] = HACCEL__LAYER_DSA;
		c->n_dsa++;
		c->n_kda--;
		c->max_position_embeddings = 1048576;
		c->attn_res_block_size = 6;
		c->shape_only = true;
		kda_defaults(&c->kda, 32, 128, 128);
		dsa_defaults(&c->dsa, 32, 1536, 128, 64, 128, 32, 2048);
	} else if (!strcmp(name, "glm-5.3-flash")) {
		/* Shapes of GLM-5.3-Flash's text trunk (45 layers, DSA at 3, 7,
		 * ..., 43, NoPE MLA with 256-wide heads, lower-bound KDA gate);
		 * a dense MLP stands in for the MoE. No weights. */
		c->vocab_size = 154880;
		c->hidden_size = 4096;
		c->intermediate_size = 12288;
		c->num_layers = 45;
		pattern(c, 4, 44);
		c->max_position_embeddings = 1048576;
		c->attn_res_block_size = 10;
		c->shape_only = true;
		kda_defaults(&c->kda, 64, 128, 128);
		c->kda.gate_form = HACCEL__KDA_GATE_LOWER_BOUND;
		dsa_defaults(&c->dsa, 64, 1536, 256, 0, 256, 32, 2048);
	} else {
		return -ENOENT;
	}
	snprintf(c->preset, sizeof(c->preset), "%s", name);
	return 0;
}

const char *haccel_model_preset_name(uint32_t i)
{
	static const char *const names[] = { "tiny", "small", "kimi-linear-48b-a3b",
					     "glm-5.3-flash" };

	return i < sizeof(names) / sizeof(names[0]) ? names[i] : NULL;
}

/* ------------------------------------------------------------------------ */
/* Parsing                                                                  */

struct field {
	const char *name;
	int kind;          /* 'u' uint32, 'f' float, 'b' bool, 'i' int32 or null */
	size_t off;
	double min, max;
	bool required;
};

#define U(obj, fld, lo, hi) { #fld, 'u', offsetof(obj, fld), lo, hi, true }
#define F(obj, fld, lo, hi) { #fld, 'f', offsetof(obj, fld), lo, hi, true }

/*
 * Read the fields f[0..n) of object o into dst. Keys neither in f nor in
 * extra (NULL-terminated: keys the caller reads itself) are rejected.
 */
static int get_fields(struct haccel_ctx *ctx, const char *label, const char *where,
		      json_t *o, void *dst, const struct field *f, size_t n,
		      const char *const *extra)
{
	for (size_t i = 0; i < n; i++) {
		json_t *v = json_object_get(o, f[i].name);
		char *p = (char *)dst + f[i].off;

		if (!v) {
			if (f[i].required)
				return FAIL("%s: %s%s is missing", label, where, f[i].name);
			continue;
		}
		if (f[i].kind == 'b') {
			if (!json_is_boolean(v))
				return FAIL("%s: %s%s must be true or false", label, where, f[i].name);
			*(bool *)p = json_is_true(v);
			continue;
		}
		if (f[i].kind == 'i' && json_is_null(v)) {
			*(int32_t *)p = -1;
			continue;
		}
		if (!json_is_number(v) || (f[i].kind != 'f' && !json_is_integer(v)))
			return FAIL("%s: %s%s must be %s", label, where, f[i].name,
				    f[i].kind == 'f' ? "a number" : "an integer");
		double d = json_number_value(v);
		if (!(d >= f[i].min && d <= f[i].max))
			return FAIL("%s: %s%s = %g is outside [%g, %g]", label, where,
				    f[i].name, d, f[i].min, f[i].max);
		if (f[i].kind == 'u')
			*(uint32_t *)p = (uint32_t)json_integer_value(v);
		else if (f[i].kind == 'i')
			*(int32_t *)p = (int32_t)json_integer_value(v);
		else
			*(float *)p = (float)d;
	}
	/* Strict: a field we do not know is an error, never ignored. */
	const char *key;
	json_t *val;
	json_object_foreach(o, key, val) {
		bool known = false;

		for (size_t i = 0; i < n && !known; i++)
			known = !strcmp(key, f[i].name);
		for (size_t i = 0; extra && extra[i] && !known; i++)
			known = !strcmp(key, extra[i]);
		if (!known)
			return FAIL("%s: unknown field %s%s", label, where, key);
	}
	return 0;
}

static int get_enum(struct haccel_ctx *ctx, const char *label, const char *where,
		    json_t *o, const char *name, const char *const *values,
		    uint32_t n, uint32_t *out)
{
	json_t *v = json_object_get(o, name);

	if (!v)
		return FAIL("%s: %s%s is missing", label, where, name);
	for (uint32_t i = 0; json_is_string(v) && i < n; i++)
		if (!strcmp(json_string_value(v), values[i])) {
			*out = i;
			return 0;
		}
	return FAIL("%s: %s%s must be one of \"%s\", \"%s\"", label, where, name,
		    values[0], values[1]);
}

static int validate(struct haccel_ctx *ctx, const char *label,
		    const struct haccel__model_config *c)
{
	const struct haccel__kda_config *k = &c->kda;
	const struct haccel__dsa_config *d = &c->dsa;

	if (c->n_dsa) {
		if (d->kv_lora_rank != 512)
			return FAIL("%s: dsa.kv_lora_rank must be 512 (the KV cache format holds 4 tiles of 128)", label);
		if (d->qk_rope_head_dim != 0 && d->qk_rope_head_dim != 64)
			return FAIL("%s: dsa.qk_rope_head_dim must be 64 or 0 (no rotary part)", label);
		if (d->index_head_dim != 128)
			return FAIL("%s: dsa.index_head_dim must be 128 (the Hadamard size and index-key format)", label);
		if (d->index_rope_dim > d->index_head_dim || d->index_rope_dim % 2)
			return FAIL("%s: dsa.index_rope_dim must be even and at most index_head_dim", label);
	}
	if (c->n_kda && k->gate_form == HACCEL__KDA_GATE_LOWER_BOUND && !(k->gate_lower_bound < 0))
		return FAIL("%s: kda.gate_lower_bound must be negative", label);
	if (c->attn_res && c->attn_res_block_size == 0)
		return FAIL("%s: attn_res.block_size must be at least 1", label);
	if (c->attn_res && haccel__config_n_blocks(c) + 1 > 64)
		return FAIL("%s: attn_res gives %u blocks; at most 63 (raise block_size)", label,
			    haccel__config_n_blocks(c));
	if (c->eos_token_id >= (int64_t)c->vocab_size)
		return FAIL("%s: eos_token_id %d is not below vocab_size %u", label,
			    c->eos_token_id, c->vocab_size);
	return 0;
}

int haccel__config_parse(struct haccel_ctx *ctx, const char *label, const char *text,
			 struct haccel__model_config *out)
{
	static const char *const gate_forms[] = { "softplus", "lower_bound" };
	static const char *const og_forms[] = { "full_rank", "low_rank" };
	static const char *const layouts[] = { "neox", "interleaved" };
	static const char *const types[] = { "kda", "dsa" };
#define MC struct haccel__model_config
#define KC struct haccel__kda_config
#define DC struct haccel__dsa_config
	static const char *const top_extra[] = { "architectures", "model_type", "layer_types",
						 "kda", "dsa", "attn_res", "haccel", NULL };
	static const char *const kda_extra[] = { "gate_form", "output_gate", NULL };
	static const char *const dsa_extra[] = { "rope_layout", "index_rope_layout", NULL };
	const struct field top[] = {
		U(MC, vocab_size, 1, 1 << 24), U(MC, hidden_size, 1, 65536),
		U(MC, intermediate_size, 1, 1 << 20),
		{ "num_hidden_layers", 'u', offsetof(MC, num_layers), 1, HACCEL__MAX_LAYERS, true },
		F(MC, rms_norm_eps, 1e-12, 1e-2),
		{ "tie_word_embeddings", 'b', offsetof(MC, tie_word_embeddings), 0, 0, true },
		U(MC, max_position_embeddings, 1, 1u << 31),
		{ "eos_token_id", 'i', offsetof(MC, eos_token_id), -1, 1 << 24, false },
	};
	struct haccel__model_config c;
	json_error_t e;
	json_t *j, *v, *o;
	int ret;

	memset(&c, 0, sizeof(c));
	c.eos_token_id = -1;
	j = json_loads(text, JSON_REJECT_DUPLICATES, &e);
	if (!j)
		return FAIL("%s: not valid JSON at line %d: %s", label, e.line, e.text);
	if (!json_is_object(j)) {
		json_decref(j);
		return FAIL("%s: not a JSON object", label);
	}
	ret = get_fields(ctx, label, "", j, &c, top, 8, top_extra);
	if (ret)
		goto out;

	v = json_object_get(j, "model_type");
	if (!json_is_string(v) || strcmp(json_string_value(v), "haccel_hybrid")) {
		ret = FAIL("%s: model_type must be \"haccel_hybrid\"", label);
		goto out;
	}
	v = json_object_get(j, "layer_types");
	if (!json_is_array(v) || json_array_size(v) != c.num_layers) {
		ret = FAIL("%s: layer_types must list num_hidden_layers (%u) entries", label,
			   c.num_layers);
		goto out;
	}
	for (uint32_t i = 0; i < c.num_layers; i++) {
		json_t *t = json_array_get(v, i);
		uint32_t ty = 2;

		for (uint32_t k = 0; json_is_string(t) && k < 2; k++)
			if (!strcmp(json_string_value(t), types[k]))
				ty = k;
		if (ty == 2) {
			ret = FAIL("%s: layer_types[%u] must be \"kda\" or \"dsa\"", label, i);
			goto out;
		}
		c.layer_type[i] = (uint8_t)ty;
		if (ty == HACCEL__LAYER_KDA)
			c.n_kda++;
		else
			c.n_dsa++;
	}

	o = json_object_get(j, "kda");
	if (c.n_kda) {
		/* gate_lower_bound and output_gate_rank belong to one form each:
		 * optional (type- and range-checked when given), required and
		 * validated below when their form is chosen. */
		const struct field kf[] = {
			U(KC, num_heads, 1, 1024), U(KC, head_k_dim, 1, 1024),
			U(KC, head_v_dim, 1, 1024), U(KC, conv_size, 1, 64),
			{ "gate_lower_bound", 'f', offsetof(KC, gate_lower_bound), -1e6, 1e6, false },
			U(KC, gate_rank, 1, 65536),
			{ "output_gate_rank", 'u', offsetof(KC, output_gate_rank), 0, 65536, false },
		};
		uint32_t og;

		if (!json_is_object(o)) {
			ret = FAIL("%s: layer_types has kda layers but kda is not an object", label);
			goto out;
		}
		ret = get_fields(ctx, label, "kda.", o, &c.kda, kf, 7, kda_extra);
		if (!ret)
			ret = get_enum(ctx, label, "kda.", o, "gate_form", gate_forms, 2, &c.kda.gate_form);
		if (!ret)
			ret = get_enum(ctx, label, "kda.", o, "output_gate", og_forms, 2, &og);
		if (ret)
			goto out;
		c.kda.output_gate_low_rank = og == 1;
		if (c.kda.gate_form == HACCEL__KDA_GATE_LOWER_BOUND &&
		    !json_object_get(o, "gate_lower_bound")) {
			ret = FAIL("%s: kda.gate_lower_bound is missing (gate_form \"lower_bound\" needs it)",
				   label);
			goto out;
		}
		if (c.kda.output_gate_low_rank && !json_object_get(o, "output_gate_rank")) {
			ret = FAIL("%s: kda.output_gate_rank is missing (output_gate \"low_rank\" needs it)",
				   label);
			goto out;
		}
		if (c.kda.output_gate_low_rank && !c.kda.output_gate_rank) {
			ret = FAIL("%s: kda.output_gate_rank must be at least 1 for a low-rank output gate", label);
			goto out;
		}
	} else if (o) {
		ret = FAIL("%s: kda is given but no layer is kda", label);
		goto out;
	}

	o = json_object_get(j, "dsa");
	if (c.n_dsa) {
		const struct field df[] = {
			U(DC, num_heads, 1, 1024), U(DC, q_lora_rank, 1, 65536),
			U(DC, kv_lora_rank, 1, 65536), U(DC, qk_nope_head_dim, 1, 1024),
			U(DC, qk_rope_head_dim, 0, 1024), U(DC, v_head_dim, 1, 1024),
			F(DC, rope_theta, 1, 1e12), U(DC, index_n_heads, 1, 1024),
			U(DC, index_head_dim, 1, 1024), U(DC, index_rope_dim, 0, 1024),
			U(DC, index_topk, 1, 1u << 24),
		};

		if (!json_is_object(o)) {
			ret = FAIL("%s: layer_types has dsa layers but dsa is not an object", label);
			goto out;
		}
		ret = get_fields(ctx, label, "dsa.", o, &c.dsa, df, 11, dsa_extra);
		if (!ret)
			ret = get_enum(ctx, label, "dsa.", o, "rope_layout", layouts, 2, &c.dsa.rope_layout);
		if (!ret)
			ret = get_enum(ctx, label, "dsa.", o, "index_rope_layout", layouts, 2,
				       &c.dsa.index_rope_layout);
		if (ret)
			goto out;
	} else if (o) {
		ret = FAIL("%s: dsa is given but no layer is dsa", label);
		goto out;
	}

	o = json_object_get(j, "attn_res");
	if (o) {
		const struct field af[] = {
			{ "enabled", 'b', offsetof(MC, attn_res), 0, 0, true },
			{ "block_size", 'u', offsetof(MC, attn_res_block_size), 1, 1024, false },
		};

		if (!json_is_object(o)) {
			ret = FAIL("%s: attn_res must be an object", label);
			goto out;
		}
		ret = get_fields(ctx, label, "attn_res.", o, &c, af, 2, NULL);
		if (ret)
			goto out;
		if (c.attn_res && !json_object_get(o, "block_size")) {
			ret = FAIL("%s: attn_res.block_size is missing", label);
			goto out;
		}
	}
	o = json_object_get(j, "haccel");
	if (o) {
		json_t *p = json_object_get(o, "preset"), *s = json_object_get(o, "shape_only");

		if (!json_is_object(o) || (p && !json_is_string(p)) || (s && !json_is_boolean(s))) {
			ret = FAIL("%s: haccel must be an object with a string preset and a boolean shape_only", label);
			goto out;
		}
		if (p)
			snprintf(c.preset, sizeof(c.preset), "%s", json_string_value(p));
		c.shape_only = json_is_true(s);
	}
	ret = validate(ctx, label, &c);
	if (!ret)
		*out = c;
out:
	json_decref(j);
	return ret;
#undef MC
#undef KC
#undef DC
}

int haccel__config_load(struct haccel_ctx *ctx, const char *dir,
			struct haccel__model_config *out)
{
	char path[4096];
	FILE *f;
	long n;
	char *text;
	int ret;

	snprintf(path, sizeof(path), "%s/config.json", dir);
	f = fopen(path, "re");
	if (!f)
		return haccel__fail(ctx, -errno, "%s: %s", path, strerror(errno));
	if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || n > (1 << 20) ||
	    fseek(f, 0, SEEK_SET)) {
		fclose(f);
		return haccel__fail(ctx, -EBADMSG, "%s: unreadable or larger than 1 MiB", path);
	}
	text = malloc((size_t)n + 1);
	if (!text) {
		fclose(f);
		return -ENOMEM;
	}
	if (fread(text, 1, (size_t)n, f) != (size_t)n) {
		free(text);
		fclose(f);
		return haccel__fail(ctx, -EIO, "%s: read error", path);
	}
	fclose(f);
	text[n] = '\0';
	ret = haccel__config_parse(ctx, path, text, out);
	free(text);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* Writing                                                                  */

/* The double nearest the shortest decimal that reads back as f, so 1e-6f
 * is written "1e-06", not "9.99999997e-07". */
static json_t *real_of_float(float f)
{
	char buf[32];

	for (int p = 1; p <= 9; p++) {
		snprintf(buf, sizeof(buf), "%.*g", p, (double)f);
		if ((float)strtod(buf, NULL) == f)
			break;
	}
	return json_real(strtod(buf, NULL));
}

char *haccel__config_dump(const struct haccel__model_config *c)
{
	static const char *const layouts[] = { "neox", "interleaved" };
	json_t *j = json_object(), *lt = json_array(), *k, *d, *a, *h;
	char *s;

	json_object_set_new(j, "architectures", json_pack("[s]", "HaccelHybridForCausalLM"));
	json_object_set_new(j, "model_type", json_string("haccel_hybrid"));
	json_object_set_new(j, "vocab_size", json_integer(c->vocab_size));
	json_object_set_new(j, "hidden_size", json_integer(c->hidden_size));
	json_object_set_new(j, "intermediate_size", json_integer(c->intermediate_size));
	json_object_set_new(j, "num_hidden_layers", json_integer(c->num_layers));
	for (uint32_t i = 0; i < c->num_layers; i++)
		json_array_append_new(lt, json_string(c->layer_type[i] == HACCEL__LAYER_DSA ? "dsa" : "kda"));
	json_object_set_new(j, "layer_types", lt);
	json_object_set_new(j, "rms_norm_eps", real_of_float(c->rms_norm_eps));
	json_object_set_new(j, "tie_word_embeddings", json_boolean(c->tie_word_embeddings));
	json_object_set_new(j, "max_position_embeddings", json_integer(c->max_position_embeddings));
	json_object_set_new(j, "eos_token_id", c->eos_token_id < 0 ? json_null() :
						 json_integer(c->eos_token_id));
	if (c->n_kda) {
		k = json_object();
		json_object_set_new(k, "num_heads", json_integer(c->kda.num_heads));
		json_object_set_new(k, "head_k_dim", json_integer(c->kda.head_k_dim));
		json_object_set_new(k, "head_v_dim", json_integer(c->kda.head_v_dim));
		json_object_set_new(k, "conv_size", json_integer(c->kda.conv_size));
		json_object_set_new(k, "gate_form", json_string(c->kda.gate_form ? "lower_bound" : "softplus"));
		json_object_set_new(k, "gate_lower_bound", real_of_float(c->kda.gate_lower_bound));
		json_object_set_new(k, "gate_rank", json_integer(c->kda.gate_rank));
		json_object_set_new(k, "output_gate", json_string(c->kda.output_gate_low_rank ?
								  "low_rank" : "full_rank"));
		json_object_set_new(k, "output_gate_rank", json_integer(c->kda.output_gate_rank));
		json_object_set_new(j, "kda", k);
	}
	if (c->n_dsa) {
		d = json_object();
		json_object_set_new(d, "num_heads", json_integer(c->dsa.num_heads));
		json_object_set_new(d, "q_lora_rank", json_integer(c->dsa.q_lora_rank));
		json_object_set_new(d, "kv_lora_rank", json_integer(c->dsa.kv_lora_rank));
		json_object_set_new(d, "qk_nope_head_dim", json_integer(c->dsa.qk_nope_head_dim));
		json_object_set_new(d, "qk_rope_head_dim", json_integer(c->dsa.qk_rope_head_dim));
		json_object_set_new(d, "v_head_dim", json_integer(c->dsa.v_head_dim));
		json_object_set_new(d, "rope_theta", real_of_float(c->dsa.rope_theta));
		json_object_set_new(d, "rope_layout", json_string(layouts[c->dsa.rope_layout]));
		json_object_set_new(d, "index_n_heads", json_integer(c->dsa.index_n_heads));
		json_object_set_new(d, "index_head_dim", json_integer(c->dsa.index_head_dim));
		json_object_set_new(d, "index_rope_dim", json_integer(c->dsa.index_rope_dim));
		json_object_set_new(d, "index_rope_layout", json_string(layouts[c->dsa.index_rope_layout]));
		json_object_set_new(d, "index_topk", json_integer(c->dsa.index_topk));
		json_object_set_new(j, "dsa", d);
	}
	a = json_object();
	json_object_set_new(a, "enabled", json_boolean(c->attn_res));
	if (c->attn_res)
		json_object_set_new(a, "block_size", json_integer(c->attn_res_block_size));
	json_object_set_new(j, "attn_res", a);
	h = json_object();
	if (c->preset[0])
		json_object_set_new(h, "preset", json_string(c->preset));
	json_object_set_new(h, "shape_only", json_boolean(c->shape_only));
	json_object_set_new(j, "haccel", h);
	s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
	json_decref(j);
	return s;
}

/* ------------------------------------------------------------------------ */
/* Size                                                                     */

uint64_t haccel__config_params(const struct haccel__model_config *c)
{
	const struct haccel__kda_config *k = &c->kda;
	const struct haccel__dsa_config *d = &c->dsa;
	uint64_t D = c->hidden_size, n = 0;
	uint64_t kd = (uint64_t)k->num_heads * k->head_k_dim, vd = (uint64_t)k->num_heads * k->head_v_dim;

	n += (uint64_t)c->vocab_size * D * (c->tie_word_embeddings ? 1 : 2) + D;
	for (uint32_t i = 0; i < c->num_layers; i++) {
		n += 2 * D + 3 * D * c->intermediate_size;
		if (c->layer_type[i] == HACCEL__LAYER_KDA) {
			n += D * (2 * kd + vd) + (2 * kd + vd) * k->conv_size;
			n += D * k->gate_rank + k->gate_rank * kd + D * k->num_heads;
			n += k->num_heads + kd + k->head_v_dim + vd * D;
			n += k->output_gate_low_rank ?
				     D * k->output_gate_rank + k->output_gate_rank * vd + vd :
				     D * vd;
		} else {
			uint64_t qh = d->qk_nope_head_dim + d->qk_rope_head_dim;

			n += D * d->q_lora_rank + d->q_lora_rank + d->q_lora_rank * d->num_heads * qh;
			n += D * (d->kv_lora_rank + d->qk_rope_head_dim) + d->kv_lora_rank;
			n += (uint64_t)d->kv_lora_rank * d->num_heads * (d->qk_nope_head_dim + d->v_head_dim);
			n += (uint64_t)d->num_heads * d->v_head_dim * D;
			n += (uint64_t)d->q_lora_rank * d->index_n_heads * d->index_head_dim;
			n += D * d->index_head_dim + 2 * d->index_head_dim + D * d->index_n_heads;
		}
		if (c->attn_res)
			n += 4 * D;
	}
	if (c->attn_res)
		n += 2 * D;
	return n;
}
