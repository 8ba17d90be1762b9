// SPDX-License-Identifier: MIT
/*
 * haccel_model_init(): a preset's config.json and a checkpoint of seeded
 * random weights. The generator uses no libm for its normals (a sum of 12
 * uniforms from xorshift64*, Irwin-Hall), so the same seed gives the same
 * bytes on every machine; each tensor draws from its own stream, seeded by
 * the seed and its index, so adding a tensor does not shift the others.
 * The header is written first with placeholder checksums of the final
 * length and rewritten once every tensor's XXH3-64 is known: one pass over
 * the data, however large the model.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/ctx.h"
#include "core/util.h"
#include "model/model_config.h"
#include "model/format.h"
#include "model/tensors.h"

struct rng {
	uint64_t s;
};

static uint64_t rng_next(struct rng *r)
{
	uint64_t x = r->s;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	r->s = x;
	return x * 0x2545f4914f6cdd1dull;
}

/* Uniform in [0, 1), 53 bits. */
static double rng_uniform(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

/* Approximately N(0, 1): exact IEEE arithmetic only, the same everywhere. */
static double rng_normal(struct rng *r)
{
	double s = 0;

	for (int i = 0; i < 12; i++)
		s += rng_uniform(r);
	return s - 6.0;
}

static float draw(struct rng *r, const struct haccel__tensor_spec *s)
{
	switch (s->init) {
	case HACCEL__INIT_ONES:
		return 1.0f;
	case HACCEL__INIT_ZEROS:
		return 0.0f;
	case HACCEL__INIT_A_LOG:
		return (float)log(1.0 + 15.0 * rng_uniform(r));
	case HACCEL__INIT_DT_BIAS: {
		double dt = exp(log(1e-3) + rng_uniform(r) * (log(1e-1) - log(1e-3)));
		/* softplus^-1(dt), as fla initialises dt_bias */
		return (float)(dt + log(-expm1(-dt)));
	}
	default:
		return (float)(rng_normal(r) * s->std);
	}
}

static int write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* The safetensors header for the tensors, with checksums (or placeholders). */
static char *header_json(const struct haccel__tensor_spec *t, uint32_t n,
			 const uint64_t *sums)
{
	json_t *h = json_object(), *meta = json_object();
	uint64_t off = 0;
	char hex[17], key[128];
	char *s;

	for (uint32_t i = 0; i < n; i++) {
		snprintf(hex, sizeof(hex), "%016llx", (unsigned long long)(sums ? sums[i] : 0));
		snprintf(key, sizeof(key), "%s%s", HACCEL_CHECKSUM_PREFIX, t[i].name);
		json_object_set_new(meta, key, json_string(hex));
	}
	json_object_set_new(meta, "format", json_string("pt"));
	json_object_set_new(h, "__metadata__", meta);
	for (uint32_t i = 0; i < n; i++) {
		uint64_t bytes = haccel__spec_elems(&t[i]) * (t[i].dtype == HACCEL_DTYPE_BF16 ? 2 : 4);
		json_t *e = json_object();

		json_object_set_new(e, "dtype", json_string(haccel_dtype_name(t[i].dtype)));
		json_object_set_new(e, "shape", t[i].n_dims == 1 ?
				    json_pack("[I]", (json_int_t)t[i].shape[0]) :
				    json_pack("[II]", (json_int_t)t[i].shape[0], (json_int_t)t[i].shape[1]));
		json_object_set_new(e, "data_offsets", json_pack("[II]", (json_int_t)off,
								 (json_int_t)(off + bytes)));
		json_object_set_new(h, t[i].name, e);
		off += bytes;
	}
	s = json_dumps(h, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(h);
	return s;
}

static int write_weights(struct haccel_ctx *ctx, const char *path,
			 const struct haccel__tensor_spec *t, uint32_t n, uint64_t seed)
{
	uint64_t *sums = calloc(n + 1, sizeof(*sums));
	char *hdr = header_json(t, n, NULL), *final = NULL;
	uint8_t *buf = malloc(1 << 20), len8[8];
	size_t used = 0;
	uint64_t hlen;
	int fd = -1, ret = -ENOMEM;

	if (!sums || !hdr || !buf)
		goto out;
	hlen = strlen(hdr);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = haccel__fail(ctx, -errno, "model init: %s: %s", path, strerror(errno));
		goto out;
	}
	for (int i = 0; i < 8; i++)
		len8[i] = (uint8_t)(hlen >> (8 * i));
	ret = write_all(fd, len8, 8);
	if (!ret)
		ret = write_all(fd, hdr, hlen);
	for (uint32_t i = 0; !ret && i < n; i++) {
		struct rng r = { haccel__mix64(seed ^ haccel__mix64(i + 1)) | 1 };
		uint64_t elems = haccel__spec_elems(&t[i]);
		uint32_t esz = t[i].dtype == HACCEL_DTYPE_BF16 ? 2 : 4;
		XXH3_state_t *xs = XXH3_createState();

		if (!xs) {
			ret = -ENOMEM;
			break;
		}
		XXH3_64bits_reset(xs);
		for (uint64_t e = 0; e < elems && !ret; e++) {
			float v = draw(&r, &t[i]);

			if (esz == 2) {
				uint16_t b = haccel__bf16_from_float(v);
				buf[used++] = (uint8_t)b;
				buf[used++] = (uint8_t)(b >> 8);
			} else {
				uint32_t u;
				memcpy(&u, &v, 4);
				for (int k = 0; k < 4; k++)
					buf[used++] = (uint8_t)(u >> (8 * k));
			}
			if (used > (1 << 20) - 8) {
				XXH3_64bits_update(xs, buf, used);
				ret = write_all(fd, buf, used);
				used = 0;
			}
		}
		if (!ret && used) {
			XXH3_64bits_update(xs, buf, used);
			ret = write_all(fd, buf, used);
			used = 0;
		}
		sums[i] = XXH3_64bits_digest(xs);
		XXH3_freeState(xs);
	}
	if (ret) {
		ret = haccel__fail(ctx, ret, "model init: writing %s: %s", path, strerror(-ret));
		goto out;
	}
	/* Same length as the placeholders: rewrite the header in place. */
	final = header_json(t, n, sums);
	if (!final || strlen(final) != hlen) {
		ret = haccel__fail(ctx, -EIO, "model init: header length changed");
		goto out;
	}
	if (pwrite(fd, final, hlen, 8) != (ssize_t)hlen || fsync(fd)) {
		ret = haccel__fail(ctx, -errno, "model init: %s: %s", path, strerror(errno));
		goto out;
	}
	ret = 0;
out:
	if (fd >= 0)
		close(fd);
	if (ret && fd >= 0)
		unlink(path);
	free(final);
	free(hdr);
	free(buf);
	free(sums);
	return ret;
}

static int write_text(struct haccel_ctx *ctx, const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644), ret;

	if (fd < 0)
		return haccel__fail(ctx, -errno, "model init: %s: %s", path, strerror(errno));
	ret = write_all(fd, text, strlen(text));
	if (!ret)
		ret = write_all(fd, "\n", 1);
	if (close(fd) && !ret)
		ret = -errno;
	if (ret)
		return haccel__fail(ctx, ret, "model init: writing %s: %s", path, strerror(-ret));
	return 0;
}

int haccel_model_init(struct haccel_ctx *ctx, const char *preset, const char *dir,
		      uint64_t seed, uint32_t flags)
{
	struct haccel__model_config c;

	if (!ctx || !preset || !dir || (flags & ~HACCEL_MODEL_INIT_FORCE))
		return -EINVAL;
	if (haccel__config_preset(preset, &c)) {
		char names[256] = "";
		for (uint32_t i = 0; haccel_model_preset_name(i); i++)
			snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s",
				 i ? ", " : "", haccel_model_preset_name(i));
		return haccel__fail(ctx, -ENOENT, "model init: no preset \"%s\" (presets: %s)",
				    preset, names);
	}
	return haccel__model_write(ctx, &c, dir, seed, flags);
}

/* mkdir -p: dir and every missing directory above it (0755). 0 or -errno. */
static int mkdir_parents(const char *dir)
{
	char p[4096];
	size_t n = strlen(dir);

	if (n >= sizeof(p))
		return -ENAMETOOLONG;
	memcpy(p, dir, n + 1);
	for (size_t i = 1; i <= n; i++) {
		if (p[i] != '/' && p[i] != '\0')
			continue;
		if (p[i - 1] == '/')
			continue;
		char c = p[i];

		p[i] = '\0';
		if (mkdir(p, 0755) && errno != EEXIST)
			return -errno;
		p[i] = c;
	}
	struct stat st;

	if (stat(dir, &st))
		return -errno;
	return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

int haccel__model_write(struct haccel_ctx *ctx, const struct haccel__model_config *cfg,
			const char *dir, uint64_t seed, uint32_t flags)
{
	struct haccel__model_config c = *cfg;
	struct haccel__tensor_spec *t = NULL;
	char cfg_path[4096], st_path[4096], tmp[4200];
	char *text;
	int n, ret;

	if (snprintf(cfg_path, sizeof(cfg_path), "%s/config.json", dir) >= (int)sizeof(cfg_path) ||
	    snprintf(st_path, sizeof(st_path), "%s/model.safetensors", dir) >= (int)sizeof(st_path))
		return haccel__fail(ctx, -EINVAL, "model init: directory name too long");
	ret = mkdir_parents(dir);
	if (ret)
		return haccel__fail(ctx, ret, "model init: cannot create %s: %s", dir, strerror(-ret));
	if (!(flags & HACCEL_MODEL_INIT_FORCE) &&
	    (access(cfg_path, F_OK) == 0 || access(st_path, F_OK) == 0))
		return haccel__fail(ctx, -EEXIST, "model init: %s already holds a model (HACCEL_MODEL_INIT_FORCE overwrites it)", dir);

	if (!c.shape_only) {
		n = haccel__model_tensors(&c, NULL, NULL, 0);
		t = calloc((size_t)n, sizeof(*t));
		if (!t)
			return -ENOMEM;
		haccel__model_tensors(&c, NULL, t, (uint32_t)n);
		/* Write beside, rename into place: a crash never leaves a
		 * half-written checkpoint under the real name. */
		snprintf(tmp, sizeof(tmp), "%s.tmp", st_path);
		ret = write_weights(ctx, tmp, t, (uint32_t)n, seed);
		free(t);
		if (ret)
			return ret;
		if (rename(tmp, st_path)) {
			unlink(tmp);
			return haccel__fail(ctx, -errno, "model init: %s: %s", st_path, strerror(errno));
		}
	}
	text = haccel__config_dump(&c);
	if (!text)
		return -ENOMEM;
	snprintf(tmp, sizeof(tmp), "%s.tmp", cfg_path);
	ret = write_text(ctx, tmp, text);
	free(text);
	if (!ret && rename(tmp, cfg_path))
		ret = haccel__fail(ctx, -errno, "model init: %s: %s", cfg_path, strerror(errno));
	if (ret)
		unlink(tmp);
	return ret;
}
