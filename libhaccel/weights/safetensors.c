// SPDX-License-Identifier: MIT
/*
 * Strict safetensors parser: one file's header (haccel__st_parse), and
 * haccel_weights_open() over a file, an index of shards, or a directory.
 *
 * File layout: an 8-byte little-endian header length N, N bytes of JSON
 * (an object, padded at the end with spaces), then the data buffer. The
 * rules follow the reference implementation (the Rust safetensors crate)
 * and are stricter where it is lax: a tensor entry has exactly the keys
 * dtype, shape and data_offsets; keys are unique; the header starts with
 * '{' and ends with '}' plus spaces; __metadata__ values are strings.
 * Sorted by (begin, end), the tensors tile the data buffer exactly: the
 * first begins at 0, each begins where the previous one ended, and the last
 * ends at the end of the file. The empty name is accepted, as the reference
 * accepts it. Every rejection names the file, the tensor and the rule.
 *
 * Opening reads headers only, never tensor data: the loader (stream.c)
 * reads the data later and checks the file is still the one opened.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/ctx.h"
#include "core/log.h"
#include "core/util.h"
#include "weights.h"

#define LEN_BYTES 8u              /* the header length field */
#define DEST_ALIGN 4096u          /* each file's data in a host destination */
#define INDEX_NAME "model.safetensors.index.json"
#define SINGLE_NAME "model.safetensors"
#define SUFFIX ".safetensors"
#define QNAME_MAX 96              /* bytes of a name quoted in a message */
#define QBUF (QNAME_MAX * 4 + 8)  /* worst case: every byte escaped, "..." */
#define SHAPE_BUF (HACCEL_MAX_DIMS * 22 + 4)

static const struct {
	const char *name;
	uint32_t bits;
} dtypes[HACCEL_DTYPE_COUNT] = {
	[HACCEL_DTYPE_BOOL] = { "BOOL", 8 },
	[HACCEL_DTYPE_U8] = { "U8", 8 },
	[HACCEL_DTYPE_I8] = { "I8", 8 },
	[HACCEL_DTYPE_F8_E4M3] = { "F8_E4M3", 8 },
	[HACCEL_DTYPE_F8_E5M2] = { "F8_E5M2", 8 },
	[HACCEL_DTYPE_F8_E8M0] = { "F8_E8M0", 8 },
	[HACCEL_DTYPE_I16] = { "I16", 16 },
	[HACCEL_DTYPE_U16] = { "U16", 16 },
	[HACCEL_DTYPE_F16] = { "F16", 16 },
	[HACCEL_DTYPE_BF16] = { "BF16", 16 },
	[HACCEL_DTYPE_I32] = { "I32", 32 },
	[HACCEL_DTYPE_U32] = { "U32", 32 },
	[HACCEL_DTYPE_F32] = { "F32", 32 },
	[HACCEL_DTYPE_I64] = { "I64", 64 },
	[HACCEL_DTYPE_U64] = { "U64", 64 },
	[HACCEL_DTYPE_F64] = { "F64", 64 },
	[HACCEL_DTYPE_C64] = { "C64", 64 },
	[HACCEL_DTYPE_F4] = { "F4", 4 },
	[HACCEL_DTYPE_F6_E2M3] = { "F6_E2M3", 6 },
	[HACCEL_DTYPE_F6_E3M2] = { "F6_E3M2", 6 },
	[HACCEL_DTYPE_F8_E4M3FNUZ] = { "F8_E4M3FNUZ", 8 },
	[HACCEL_DTYPE_F8_E5M2FNUZ] = { "F8_E5M2FNUZ", 8 },
};

const char *haccel_dtype_name(uint32_t dtype)
{
	return dtype < HACCEL_DTYPE_COUNT ? dtypes[dtype].name : NULL;
}

uint32_t haccel_dtype_bits(uint32_t dtype)
{
	return dtype < HACCEL_DTYPE_COUNT ? dtypes[dtype].bits : 0;
}

static uint32_t dtype_lookup(const char *s)
{
	for (uint32_t i = 0; i < HACCEL_DTYPE_COUNT; i++)
		if (!strcmp(s, dtypes[i].name))
			return i;
	return HACCEL_DTYPE_COUNT;
}

/* ------------------------------------------------------------------------ */
/* Message helpers                                                          */

/*
 * Quote a name for a message: names come from the file, so control bytes,
 * quotes and backslashes are escaped and a long name is cut (at a UTF-8
 * character boundary) so the rule after it still fits in the message.
 */
static const char *qname(char *buf, size_t len, const char *s)
{
	size_t o = 0, i = 0;

	buf[o++] = '"';
	for (; s[i] && i < QNAME_MAX && o + 8 < len; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c == 0x7f)
			o += (size_t)snprintf(buf + o, len - o, "\\x%02x", c);
		else if (c == '"' || c == '\\')
			o += (size_t)snprintf(buf + o, len - o, "\\%c", c);
		else
			buf[o++] = (char)c;
	}
	if (s[i]) {
		/* Cut mid-character: drop the partial UTF-8 sequence. */
		if (((unsigned char)s[i] & 0xc0) == 0x80) {
			while (o > 1 && ((unsigned char)buf[o - 1] & 0xc0) == 0x80)
				o--;
			if (o > 1 && (unsigned char)buf[o - 1] >= 0xc0)
				o--;
		}
		buf[o++] = '.';
		buf[o++] = '.';
		buf[o++] = '.';
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

static const char *fmt_shape(char *buf, size_t len, const uint64_t *shape,
			     uint32_t n)
{
	size_t o = 0;

	o += (size_t)snprintf(buf + o, len - o, "[");
	for (uint32_t i = 0; i < n && o < len; i++)
		o += (size_t)snprintf(buf + o, len - o, "%s%llu", i ? ", " : "",
				      (unsigned long long)shape[i]);
	if (o < len)
		snprintf(buf + o, len - o, "]");
	return buf;
}

static const char *json_kind(const json_t *v)
{
	switch (json_typeof(v)) {
	case JSON_OBJECT:
		return "an object";
	case JSON_ARRAY:
		return "an array";
	case JSON_STRING:
		return "a string";
	case JSON_INTEGER:
		return "an integer";
	case JSON_REAL:
		return "a real number";
	case JSON_TRUE:
	case JSON_FALSE:
		return "a boolean";
	default:
		return "null";
	}
}

static bool json_u64(const json_t *v, uint64_t *out)
{
	json_int_t i;

	if (!json_is_integer(v))
		return false;
	i = json_integer_value(v);
	if (i < 0)
		return false;
	*out = (uint64_t)i;
	return true;
}

/* ------------------------------------------------------------------------ */
/* One header                                                               */

struct st_parse {
	struct haccel_ctx *ctx;
	const char *label;
	uint64_t data_bytes;
};

#define ST_FAIL(p, fmt, ...) \
	haccel__fail((p)->ctx, -EBADMSG, "%s: " fmt, (p)->label, ##__VA_ARGS__)

static int parse_tensor(const struct st_parse *p, const char *name,
			json_t *val, struct haccel__tensor *t)
{
	char qn[QBUF], qk[QBUF], sh[SHAPE_BUF];
	json_t *dt = NULL, *shape = NULL, *offs = NULL, *v;
	uint64_t elems = 1, bits, bytes;
	const char *key, *dtname;
	size_t i;

	qname(qn, sizeof(qn), name);
	if (!json_is_object(val))
		return ST_FAIL(p, "tensor %s: entry is %s, not an object with dtype, shape and data_offsets",
			       qn, json_kind(val));
	json_object_foreach(val, key, v) {
		if (!strcmp(key, "dtype"))
			dt = v;
		else if (!strcmp(key, "shape"))
			shape = v;
		else if (!strcmp(key, "data_offsets"))
			offs = v;
		else
			return ST_FAIL(p, "tensor %s: unknown key %s (a tensor has exactly dtype, shape and data_offsets)",
				       qn, qname(qk, sizeof(qk), key));
	}
	if (!dt || !shape || !offs)
		return ST_FAIL(p, "tensor %s: missing \"%s\" (a tensor has exactly dtype, shape and data_offsets)",
			       qn, !dt ? "dtype" : !shape ? "shape" : "data_offsets");

	if (!json_is_string(dt))
		return ST_FAIL(p, "tensor %s: dtype is %s, not a string", qn,
			       json_kind(dt));
	t->dtype = dtype_lookup(json_string_value(dt));
	if (t->dtype >= HACCEL_DTYPE_COUNT)
		return ST_FAIL(p, "tensor %s: unknown dtype %s (known: BOOL U8 I8 F8_E4M3 F8_E5M2 F8_E8M0 I16 U16 F16 BF16 I32 U32 F32 I64 U64 F64 C64 F4 F6_E2M3 F6_E3M2 F8_E4M3FNUZ F8_E5M2FNUZ)",
			       qn, qname(qk, sizeof(qk), json_string_value(dt)));
	dtname = dtypes[t->dtype].name;

	if (!json_is_array(shape))
		return ST_FAIL(p, "tensor %s: shape is %s, not an array of non-negative integers",
			       qn, json_kind(shape));
	if (json_array_size(shape) > HACCEL_MAX_DIMS)
		return ST_FAIL(p, "tensor %s: shape has %zu dimensions, at most %u are supported",
			       qn, json_array_size(shape), HACCEL_MAX_DIMS);
	t->n_dims = (uint32_t)json_array_size(shape);
	json_array_foreach(shape, i, v)
		if (!json_u64(v, &t->shape[i]))
			return ST_FAIL(p, "tensor %s: shape[%zu] is %s, not a non-negative integer",
				       qn, i, json_is_integer(v) ? "negative" : json_kind(v));

	if (!json_is_array(offs) || json_array_size(offs) != 2 ||
	    !json_u64(json_array_get(offs, 0), &t->begin) ||
	    !json_u64(json_array_get(offs, 1), &t->end))
		return ST_FAIL(p, "tensor %s: data_offsets must be [begin, end], two non-negative integers",
			       qn);
	if (t->end < t->begin)
		return ST_FAIL(p, "tensor %s: data_offsets [%llu, %llu] end before they begin",
			       qn, (unsigned long long)t->begin,
			       (unsigned long long)t->end);

	fmt_shape(sh, sizeof(sh), t->shape, t->n_dims);
	/* The product as the reference computes it: left to right, so a zero
	 * dimension after a huge one never counts as an overflow. */
	for (uint32_t d = 0; d < t->n_dims; d++)
		if (!haccel__mul_u64(elems, t->shape[d], &elems))
			return ST_FAIL(p, "tensor %s: shape %s has more than 2^64 elements",
				       qn, sh);
	if (!haccel__mul_u64(elems, dtypes[t->dtype].bits, &bits))
		return ST_FAIL(p, "tensor %s: shape %s of %s is more than 2^64 bits",
			       qn, sh, dtname);
	if (bits % 8)
		return ST_FAIL(p, "tensor %s: shape %s of %s is %llu elements of %u bits, not a whole number of bytes",
			       qn, sh, dtname, (unsigned long long)elems,
			       dtypes[t->dtype].bits);
	bytes = bits / 8;
	if (bytes != t->end - t->begin)
		return ST_FAIL(p, "tensor %s: data_offsets [%llu, %llu] hold %llu bytes but shape %s of %s needs %llu",
			       qn, (unsigned long long)t->begin,
			       (unsigned long long)t->end,
			       (unsigned long long)(t->end - t->begin), sh,
			       dtname, (unsigned long long)bytes);
	if (t->end > p->data_bytes)
		return ST_FAIL(p, "tensor %s: data_offsets [%llu, %llu] run past the end of the data buffer (%llu bytes): file truncated?",
			       qn, (unsigned long long)t->begin,
			       (unsigned long long)t->end,
			       (unsigned long long)p->data_bytes);

	t->name = strdup(name);
	return t->name ? 0 : -ENOMEM;
}

static int cmp_offsets(const void *a, const void *b)
{
	const struct haccel__tensor *x = a, *y = b;

	/* Zero-size tensors sort first at a shared offset, as in the
	 * reference; names make the order total. */
	if (x->begin != y->begin)
		return x->begin < y->begin ? -1 : 1;
	if (x->end != y->end)
		return x->end < y->end ? -1 : 1;
	return strcmp(x->name, y->name);
}

/* Tensors sorted by offset must tile the data buffer: no hole, no overlap. */
static int check_layout(const struct st_parse *p, struct haccel__st_header *h)
{
	char qn[QBUF], qp[QBUF];
	const struct haccel__tensor *prev = NULL;
	uint64_t at = 0;

	qsort(h->tensors, h->n_tensors, sizeof(*h->tensors), cmp_offsets);
	for (uint32_t i = 0; i < h->n_tensors; i++) {
		const struct haccel__tensor *t = &h->tensors[i];

		if (t->begin != at) {
			qname(qn, sizeof(qn), t->name);
			if (!prev)
				return ST_FAIL(p, "tensor %s: data_offsets [%llu, %llu]: the first tensor must begin at byte 0 of the data buffer (bytes [0, %llu) belong to no tensor)",
					       qn, (unsigned long long)t->begin,
					       (unsigned long long)t->end,
					       (unsigned long long)t->begin);
			qname(qp, sizeof(qp), prev->name);
			if (t->begin > at)
				return ST_FAIL(p, "tensor %s: data_offsets [%llu, %llu] leave a hole: bytes [%llu, %llu) after tensor %s belong to no tensor",
					       qn, (unsigned long long)t->begin,
					       (unsigned long long)t->end,
					       (unsigned long long)at,
					       (unsigned long long)t->begin, qp);
			return ST_FAIL(p, "tensor %s: data_offsets [%llu, %llu] overlap tensor %s at [%llu, %llu]",
				       qn, (unsigned long long)t->begin,
				       (unsigned long long)t->end, qp,
				       (unsigned long long)prev->begin,
				       (unsigned long long)prev->end);
		}
		at = t->end;
		prev = t;
	}
	if (at != p->data_bytes) {
		if (!prev)
			return ST_FAIL(p, "no tensors, but the data buffer holds %llu bytes (trailing bytes after the header)",
				       (unsigned long long)p->data_bytes);
		return ST_FAIL(p, "tensor %s: the last tensor ends at byte %llu of the %llu-byte data buffer: %llu trailing bytes belong to no tensor",
			       qname(qn, sizeof(qn), prev->name),
			       (unsigned long long)at,
			       (unsigned long long)p->data_bytes,
			       (unsigned long long)(p->data_bytes - at));
	}
	return 0;
}

static int parse_hex64(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	size_t i;

	for (i = 0; i < 16; i++) {
		char c = s[i];

		if (c >= '0' && c <= '9')
			v = v << 4 | (uint64_t)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v = v << 4 | (uint64_t)(c - 'a' + 10);
		else
			return -1;
	}
	if (s[i])
		return -1;
	*out = v;
	return 0;
}

/* Tensor indices ordered by name, for binary search. */
static int cmp_by_name(const void *a, const void *b, void *arg)
{
	const struct haccel__tensor *t = arg;
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	int c = strcmp(t[x].name, t[y].name);

	/* Equal names (in two shards, an error) stay in file order, so the
	 * message names the files in a stable order. */
	return c ? c : (x > y) - (x < y);
}

/* Index of the tensor called name, through order (indices sorted by name);
 * -1 when absent. */
static int64_t find_sorted(const struct haccel__tensor *t, const uint32_t *order,
			   uint32_t n, const char *name)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		int c = strcmp(t[order[mid]].name, name);

		if (!c)
			return order[mid];
		if (c < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return -1;
}

/* __metadata__: string pairs in header order, checksum keys checked. */
static int parse_meta(const struct st_parse *p, json_t *meta,
		      struct haccel__st_header *h)
{
	const size_t plen = strlen(HACCEL_CHECKSUM_PREFIX);
	char qk[QBUF], qv[QBUF];
	const char *key;
	json_t *v;
	size_t n;

	if (!json_is_object(meta))
		return ST_FAIL(p, "__metadata__ is %s, not an object of strings",
			       json_kind(meta));
	n = json_object_size(meta);
	h->meta_key = calloc(n ? n : 1, sizeof(*h->meta_key));
	h->meta_val = calloc(n ? n : 1, sizeof(*h->meta_val));
	if (!h->meta_key || !h->meta_val)
		return -ENOMEM;
	/* jansson keeps insertion order, so this walks in header order. */
	json_object_foreach(meta, key, v) {
		uint64_t sum;

		if (!json_is_string(v))
			return ST_FAIL(p, "__metadata__ key %s is %s, not a string",
				       qname(qk, sizeof(qk), key), json_kind(v));
		if (!strncmp(key, HACCEL_CHECKSUM_PREFIX, plen) &&
		    parse_hex64(json_string_value(v), &sum))
			return ST_FAIL(p, "tensor %s: __metadata__ checksum %s is not 16 lowercase hex digits (%s<tensor> holds the XXH3-64 of its bytes)",
				       qname(qk, sizeof(qk), key + plen),
				       qname(qv, sizeof(qv), json_string_value(v)),
				       HACCEL_CHECKSUM_PREFIX);
		h->meta_key[h->n_meta] = strdup(key);
		h->meta_val[h->n_meta] = strdup(json_string_value(v));
		/* Counted even when a copy failed, so the free path sees both. */
		h->n_meta++;
		if (!h->meta_key[h->n_meta - 1] || !h->meta_val[h->n_meta - 1])
			return -ENOMEM;
	}
	return 0;
}

/* Attach each stored checksum to its tensor; the tensor must exist. */
static int apply_checksums(const struct st_parse *p, struct haccel__st_header *h)
{
	const size_t plen = strlen(HACCEL_CHECKSUM_PREFIX);
	uint32_t *order;
	char qn[QBUF];
	int ret = 0;

	order = malloc((h->n_tensors ? h->n_tensors : 1) * sizeof(*order));
	if (!order)
		return -ENOMEM;
	for (uint32_t i = 0; i < h->n_tensors; i++)
		order[i] = i;
	qsort_r(order, h->n_tensors, sizeof(*order), cmp_by_name, h->tensors);
	for (uint32_t m = 0; m < h->n_meta; m++) {
		const char *key = h->meta_key[m];
		int64_t t;

		if (strncmp(key, HACCEL_CHECKSUM_PREFIX, plen))
			continue;
		t = find_sorted(h->tensors, order, h->n_tensors, key + plen);
		if (t < 0) {
			ret = ST_FAIL(p, "tensor %s: __metadata__ holds a checksum for it, but the file has no such tensor",
				      qname(qn, sizeof(qn), key + plen));
			break;
		}
		parse_hex64(h->meta_val[m], &h->tensors[t].checksum);
		h->tensors[t].has_checksum = true;
	}
	free(order);
	return ret;
}

void haccel__st_header_free(struct haccel__st_header *h)
{
	if (!h)
		return;
	for (uint32_t i = 0; i < h->n_tensors; i++)
		free(h->tensors[i].name);
	free(h->tensors);
	for (uint32_t i = 0; i < h->n_meta; i++) {
		free(h->meta_key[i]);
		free(h->meta_val[i]);
	}
	free(h->meta_key);
	free(h->meta_val);
	memset(h, 0, sizeof(*h));
}

int haccel__st_parse(struct haccel_ctx *ctx, const char *label,
		     const uint8_t *buf, size_t buf_len, uint64_t file_size,
		     uint64_t *need, struct haccel__st_header *out)
{
	struct st_parse p = { .ctx = ctx, .label = label ? label : "(memory)" };
	const char *hdr, *key;
	json_t *root = NULL, *meta = NULL, *val;
	json_error_t jerr;
	uint64_t n = 0;
	size_t len, count;
	int ret;

	if (!out || (!buf && buf_len))
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (file_size < LEN_BYTES)
		return ST_FAIL(&p, "file is %llu bytes, shorter than the 8-byte header length",
			       (unsigned long long)file_size);
	if (buf_len < LEN_BYTES) {
		if (need)
			*need = LEN_BYTES;
		return -EAGAIN;
	}
	for (int i = LEN_BYTES - 1; i >= 0; i--)
		n = n << 8 | buf[i];
	if (n > HACCEL__ST_MAX_HEADER)
		return ST_FAIL(&p, "header length %llu exceeds the limit of %u bytes",
			       (unsigned long long)n, HACCEL__ST_MAX_HEADER);
	if (n > file_size - LEN_BYTES)
		return ST_FAIL(&p, "header length %llu runs past the end of the %llu-byte file",
			       (unsigned long long)n,
			       (unsigned long long)file_size);
	if (buf_len - LEN_BYTES < n) {
		if (need)
			*need = LEN_BYTES + n;
		return -EAGAIN;
	}
	out->data_start = LEN_BYTES + n;
	out->data_bytes = file_size - out->data_start;
	p.data_bytes = out->data_bytes;

	/* Writers pad the header with spaces so the data is aligned; nothing
	 * else may follow the object. */
	hdr = (const char *)buf + LEN_BYTES;
	len = (size_t)n;
	while (len && hdr[len - 1] == ' ')
		len--;
	if (!len || hdr[0] != '{')
		return ST_FAIL(&p, "header does not start with '{' (it must be one JSON object)");
	if (hdr[len - 1] != '}')
		return ST_FAIL(&p, "header does not end with '}' followed only by space padding");
	root = json_loadb(hdr, len, JSON_REJECT_DUPLICATES, &jerr);
	if (!root) {
		if (strstr(jerr.text, "duplicate object key"))
			return ST_FAIL(&p, "header repeats a key at header byte %d (%s): tensor names and keys must be unique",
				       jerr.position, jerr.text);
		return ST_FAIL(&p, "header is not valid UTF-8 JSON at header byte %d: %s",
			       jerr.position, jerr.text);
	}
	if (!json_is_object(root)) {
		ret = ST_FAIL(&p, "header is %s, not a JSON object", json_kind(root));
		goto err;
	}

	count = json_object_size(root);
	out->tensors = calloc(count ? count : 1, sizeof(*out->tensors));
	if (!out->tensors) {
		ret = -ENOMEM;
		goto err;
	}
	json_object_foreach(root, key, val) {
		if (!strcmp(key, "__metadata__")) {
			meta = val;
			continue;
		}
		/* The name is set last: a rejected entry owns nothing. */
		ret = parse_tensor(&p, key, val, &out->tensors[out->n_tensors]);
		if (ret)
			goto err;
		out->n_tensors++;
	}
	if (meta) {
		ret = parse_meta(&p, meta, out);
		if (ret)
			goto err;
	}
	ret = check_layout(&p, out);
	if (ret)
		goto err;
	ret = apply_checksums(&p, out);
	if (ret)
		goto err;
	json_decref(root);
	return 0;

err:
	json_decref(root);
	haccel__st_header_free(out);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* Files                                                                    */

static int read_full(struct haccel_ctx *ctx, int fd, const char *path,
		     uint8_t *buf, uint64_t len, uint64_t off)
{
	uint64_t got = 0;

	while (got < len) {
		ssize_t r = pread(fd, buf + got, len - got, (off_t)(off + got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return haccel__fail(ctx, -EIO, "%s: read at byte %llu failed: %s",
					    path, (unsigned long long)(off + got),
					    strerror(errno));
		if (r == 0)
			return haccel__fail(ctx, -EIO, "%s: file ended at byte %llu while reading its header (was it changed while being opened?)",
					    path, (unsigned long long)(off + got));
		got += (uint64_t)r;
	}
	return 0;
}

static int open_error(struct haccel_ctx *ctx, const char *path, int err)
{
	if (err == ENOENT || err == ENOTDIR)
		return haccel__fail(ctx, -ENOENT, "%s: no such file", path);
	return haccel__fail(ctx, -err, "%s: cannot open: %s", path, strerror(err));
}

/*
 * Read and parse one file's header: the length first, then exactly the
 * header, whose size the parser checked against the limit and the file
 * size before anything is allocated for it.
 */
static int read_header(struct haccel_ctx *ctx, const char *path,
		       struct haccel__wfile *f, struct haccel__st_header *h)
{
	uint8_t head[LEN_BYTES], *buf = NULL;
	uint64_t size, need = 0;
	struct stat st;
	int fd, ret;

	/* O_NONBLOCK: opening a FIFO by mistake must fail below, not hang;
	 * it changes nothing for a regular file. */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return open_error(ctx, path, errno);
	if (fstat(fd, &st)) {
		ret = haccel__fail(ctx, -EIO, "%s: fstat failed: %s", path,
				   strerror(errno));
		goto out_close;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = haccel__fail(ctx, -EINVAL, "%s: not a regular file", path);
		goto out_close;
	}
	size = (uint64_t)st.st_size;
	ret = read_full(ctx, fd, path, head, size < LEN_BYTES ? size : LEN_BYTES, 0);
	if (ret)
		goto out_close;
	ret = haccel__st_parse(ctx, path, head, size < LEN_BYTES ? size : LEN_BYTES,
			       size, &need, h);
	if (ret == -EAGAIN) {
		buf = malloc(need);
		if (!buf) {
			ret = -ENOMEM;
			goto out_close;
		}
		memcpy(buf, head, LEN_BYTES);
		ret = read_full(ctx, fd, path, buf + LEN_BYTES, need - LEN_BYTES,
				LEN_BYTES);
		if (ret)
			goto out_free;
		ret = haccel__st_parse(ctx, path, buf, need, size, NULL, h);
	}
	if (ret)
		goto out_free;
	f->path = strdup(path);
	if (!f->path) {
		haccel__st_header_free(h);
		ret = -ENOMEM;
		goto out_free;
	}
	f->size = size;
	f->mtime = st.st_mtim;
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->data_start = h->data_start;
	f->data_bytes = h->data_bytes;
out_free:
	free(buf);
out_close:
	close(fd);
	return ret;
}

/* ------------------------------------------------------------------------ */
/* The checkpoint                                                           */

void haccel_weights_close(struct haccel_weights *w)
{
	if (!w)
		return;
	for (uint32_t i = 0; i < w->n_tensors; i++)
		free(w->tensors[i].name);
	free(w->tensors);
	for (uint32_t f = 0; f < w->n_files; f++) {
		struct haccel__wfile *file = &w->files[f];

		for (uint32_t m = 0; m < file->n_meta; m++) {
			free(file->meta_key[m]);
			free(file->meta_val[m]);
		}
		free(file->meta_key);
		free(file->meta_val);
		free(file->path);
	}
	free(w->files);
	free(w->by_name);
	free(w);
}

/*
 * Move the parsed headers (w->n_files of them, files already filled) into
 * w: tensors by (file, begin), the name index, totals and each file's place
 * in a host destination. A name may appear in one file only.
 */
static int assemble(struct haccel_ctx *ctx, struct haccel_weights *w,
		    struct haccel__st_header *hdrs)
{
	char qn[QBUF];
	uint64_t total = 0, base = 0, end;

	for (uint32_t f = 0; f < w->n_files; f++)
		total += hdrs[f].n_tensors;
	if (total > UINT32_MAX)
		return haccel__fail(ctx, -EBADMSG, "%s: %llu tensors in all, more than 2^32 - 1",
				    w->files[0].path, (unsigned long long)total);
	w->tensors = calloc(total ? total : 1, sizeof(*w->tensors));
	w->by_name = malloc((total ? total : 1) * sizeof(*w->by_name));
	if (!w->tensors || !w->by_name)
		return -ENOMEM;
	for (uint32_t f = 0; f < w->n_files; f++) {
		struct haccel__wfile *file = &w->files[f];
		struct haccel__st_header *h = &hdrs[f];

		file->first_tensor = w->n_tensors;
		file->n_tensors = h->n_tensors;
		for (uint32_t i = 0; i < h->n_tensors; i++) {
			struct haccel__tensor *t = &w->tensors[w->n_tensors];

			*t = h->tensors[i];
			t->file = f;
			w->tensor_bytes += t->end - t->begin;
			w->n_checksums += t->has_checksum;
			w->by_name[w->n_tensors] = w->n_tensors;
			w->n_tensors++;
		}
		/* The names now belong to w. */
		h->n_tensors = 0;
		file->meta_key = h->meta_key;
		file->meta_val = h->meta_val;
		file->n_meta = h->n_meta;
		h->meta_key = h->meta_val = NULL;
		h->n_meta = 0;

		/* Files' data one after another, each at a 4 KiB boundary so a
		 * direct read can land in place. */
		file->dest_base = base;
		if (!haccel__add_u64(base, file->data_bytes, &end) ||
		    !haccel__align_u64(end, DEST_ALIGN, &base))
			return haccel__fail(ctx, -EBADMSG, "%s: checkpoint larger than 2^64 bytes",
					    file->path);
		w->dest_bytes = end;
	}
	qsort_r(w->by_name, w->n_tensors, sizeof(*w->by_name), cmp_by_name,
		w->tensors);
	for (uint32_t i = 1; i < w->n_tensors; i++) {
		const struct haccel__tensor *a = &w->tensors[w->by_name[i - 1]];
		const struct haccel__tensor *b = &w->tensors[w->by_name[i]];

		if (!strcmp(a->name, b->name))
			return haccel__fail(ctx, -EBADMSG, "tensor %s is in both %s and %s: a name may appear in one shard only",
					    qname(qn, sizeof(qn), a->name),
					    w->files[a->file].path,
					    w->files[b->file].path);
	}
	return 0;
}

static char *join(const char *dir, size_t dir_len, const char *name)
{
	char *s;

	if (asprintf(&s, "%.*s%s%s", (int)dir_len, dir,
		     dir_len && dir[dir_len - 1] != '/' ? "/" : "", name) < 0)
		return NULL;
	return s;
}

static bool is_regular(const char *path)
{
	struct stat st;

	return !stat(path, &st) && S_ISREG(st.st_mode);
}

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n > m && !strcmp(s + n - m, suffix);
}

/* A directory: its index, else model.safetensors, else its only *.safetensors. */
static int resolve_dir(struct haccel_ctx *ctx, const char *dir, char **file,
		       bool *is_index)
{
	size_t dlen = strlen(dir);
	char *path = NULL, *only = NULL;
	struct dirent *de;
	unsigned int n = 0;
	DIR *d;

	path = join(dir, dlen, INDEX_NAME);
	if (!path)
		return -ENOMEM;
	if (is_regular(path)) {
		*file = path;
		*is_index = true;
		return 0;
	}
	free(path);
	path = join(dir, dlen, SINGLE_NAME);
	if (!path)
		return -ENOMEM;
	if (is_regular(path)) {
		*file = path;
		*is_index = false;
		return 0;
	}
	free(path);

	d = opendir(dir);
	if (!d)
		return open_error(ctx, dir, errno);
	while ((de = readdir(d))) {
		if (!has_suffix(de->d_name, SUFFIX))
			continue;
		path = join(dir, dlen, de->d_name);
		if (!path) {
			free(only);
			closedir(d);
			return -ENOMEM;
		}
		if (!is_regular(path)) {
			free(path);
			continue;
		}
		n++;
		free(only);
		only = path;
	}
	closedir(d);
	if (n == 1) {
		*file = only;
		*is_index = false;
		return 0;
	}
	free(only);
	if (!n)
		return haccel__fail(ctx, -ENOENT, "%s: no %s, %s or other *%s file in this directory",
				    dir, INDEX_NAME, SINGLE_NAME, SUFFIX);
	return haccel__fail(ctx, -EINVAL, "%s: %u *%s files but no %s: open the index or one file",
			    dir, n, SUFFIX, INDEX_NAME);
}

static int open_single(struct haccel_ctx *ctx, struct haccel_weights *w,
		       const char *path)
{
	struct haccel__st_header h;
	int ret;

	w->files = calloc(1, sizeof(*w->files));
	if (!w->files)
		return -ENOMEM;
	ret = read_header(ctx, path, &w->files[0], &h);
	if (ret)
		return ret;
	w->n_files = 1;
	ret = assemble(ctx, w, &h);
	haccel__st_header_free(&h);
	return ret;
}

/* Read the index file whole; it is JSON of at most the header limit. */
static int load_index_json(struct haccel_ctx *ctx, const char *path, json_t **out)
{
	json_error_t jerr;
	uint8_t *buf = NULL;
	struct stat st;
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return open_error(ctx, path, errno);
	if (fstat(fd, &st)) {
		ret = haccel__fail(ctx, -EIO, "%s: fstat failed: %s", path,
				   strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		ret = haccel__fail(ctx, -EINVAL, "%s: not a regular file", path);
		goto out;
	}
	if ((uint64_t)st.st_size > HACCEL__ST_MAX_HEADER) {
		ret = haccel__fail(ctx, -EBADMSG, "%s: index is %llu bytes, more than the limit of %u",
				   path, (unsigned long long)st.st_size,
				   HACCEL__ST_MAX_HEADER);
		goto out;
	}
	buf = malloc(st.st_size ? (size_t)st.st_size : 1);
	if (!buf) {
		ret = -ENOMEM;
		goto out;
	}
	ret = read_full(ctx, fd, path, buf, (uint64_t)st.st_size, 0);
	if (ret)
		goto out;
	*out = json_loadb((const char *)buf, (size_t)st.st_size,
			  JSON_REJECT_DUPLICATES, &jerr);
	if (!*out)
		ret = haccel__fail(ctx, -EBADMSG, "%s: index is not valid JSON at line %d, column %d: %s",
				   path, jerr.line, jerr.column, jerr.text);
out:
	free(buf);
	close(fd);
	return ret;
}

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The index's weight_map against the shards as parsed: the same tensors,
 * each in the shard the map names. */
static int check_weight_map(struct haccel_ctx *ctx, const struct haccel_weights *w,
			    const char *path, json_t *map, const char **shards)
{
	char qn[QBUF], qs[QBUF];
	const char *key;
	json_t *v;

	json_object_foreach(map, key, v) {
		uint32_t i;

		if (haccel_weights_find(w, key, &i))
			return haccel__fail(ctx, -EBADMSG, "%s: weight_map puts tensor %s in %s, but that shard has no such tensor",
					    path, qname(qn, sizeof(qn), key),
					    qname(qs, sizeof(qs), json_string_value(v)));
	}
	for (uint32_t i = 0; i < w->n_tensors; i++) {
		const struct haccel__tensor *t = &w->tensors[i];
		const char *in;

		v = json_object_get(map, t->name);
		if (!v)
			return haccel__fail(ctx, -EBADMSG, "%s: tensor %s of %s is not in the weight_map",
					    path, qname(qn, sizeof(qn), t->name),
					    w->files[t->file].path);
		in = json_string_value(v);
		if (strcmp(in, shards[t->file]))
			return haccel__fail(ctx, -EBADMSG, "%s: tensor %s is in %s, but the weight_map puts it in %s",
					    path, qname(qn, sizeof(qn), t->name),
					    w->files[t->file].path,
					    qname(qs, sizeof(qs), in));
	}
	return 0;
}

static int open_index(struct haccel_ctx *ctx, struct haccel_weights *w,
		      const char *path)
{
	struct haccel__st_header *hdrs = NULL;
	const char **names = NULL, *key, *slash;
	json_t *root = NULL, *map = NULL, *v;
	char qn[QBUF], qs[QBUF], *shard;
	size_t n = 0, n_files = 0, dlen;
	int ret;

	ret = load_index_json(ctx, path, &root);
	if (ret)
		return ret;
	if (!json_is_object(root)) {
		ret = haccel__fail(ctx, -EBADMSG, "%s: index is %s, not a JSON object",
				   path, json_kind(root));
		goto out;
	}
	json_object_foreach(root, key, v) {
		if (!strcmp(key, "weight_map"))
			map = v;
		else if (strcmp(key, "metadata")) {
			ret = haccel__fail(ctx, -EBADMSG, "%s: unknown key %s in the index (allowed: metadata, weight_map)",
					   path, qname(qn, sizeof(qn), key));
			goto out;
		}
	}
	if (!map || !json_is_object(map) || !json_object_size(map)) {
		ret = haccel__fail(ctx, -EBADMSG, "%s: index needs a non-empty \"weight_map\" object of tensor name -> shard file",
				   path);
		goto out;
	}

	names = malloc(json_object_size(map) * sizeof(*names));
	if (!names) {
		ret = -ENOMEM;
		goto out;
	}
	json_object_foreach(map, key, v) {
		const char *s = json_string_value(v);

		/* Shards live next to the index: a path could reach any file. */
		if (!s || !*s || strchr(s, '/') || !strcmp(s, ".") || !strcmp(s, "..")) {
			ret = haccel__fail(ctx, -EBADMSG, "%s: tensor %s: weight_map entry %s is not a plain file name next to the index",
					   path, qname(qn, sizeof(qn), key),
					   s ? qname(qs, sizeof(qs), s) : json_kind(v));
			goto out;
		}
		names[n++] = s;
	}
	qsort(names, n, sizeof(*names), cmp_str);
	for (size_t i = 0; i < n; i++)
		if (!n_files || strcmp(names[n_files - 1], names[i]))
			names[n_files++] = names[i];

	hdrs = calloc(n_files, sizeof(*hdrs));
	w->files = calloc(n_files, sizeof(*w->files));
	if (!hdrs || !w->files) {
		ret = -ENOMEM;
		goto out;
	}
	slash = strrchr(path, '/');
	dlen = slash ? (size_t)(slash - path) + 1 : 0;
	for (size_t f = 0; f < n_files; f++) {
		shard = join(path, dlen, names[f]);
		if (!shard) {
			ret = -ENOMEM;
			goto out;
		}
		ret = read_header(ctx, shard, &w->files[f], &hdrs[f]);
		free(shard);
		if (ret)
			goto out;
		w->n_files++;
	}
	ret = assemble(ctx, w, hdrs);
	if (ret)
		goto out;
	ret = check_weight_map(ctx, w, path, map, names);
out:
	if (hdrs)
		for (size_t f = 0; f < n_files; f++)
			haccel__st_header_free(&hdrs[f]);
	free(hdrs);
	free(names);
	json_decref(root);
	return ret;
}

int haccel_weights_open(struct haccel_ctx *ctx, const char *path,
			uint32_t flags, struct haccel_weights **out)
{
	struct haccel_weights *w;
	char *file = NULL;
	bool is_index = false;
	struct stat st;
	int ret;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!ctx || !path || !*path)
		return haccel__fail(ctx, -EINVAL, "weights: no context or path given");
	if (flags)
		return haccel__fail(ctx, -EINVAL, "weights: unknown flags 0x%x", flags);

	if (stat(path, &st))
		return open_error(ctx, path, errno);
	if (S_ISDIR(st.st_mode)) {
		ret = resolve_dir(ctx, path, &file, &is_index);
		if (ret)
			return ret;
	} else {
		file = strdup(path);
		if (!file)
			return -ENOMEM;
		is_index = has_suffix(path, ".json");
	}

	w = calloc(1, sizeof(*w));
	if (!w) {
		ret = -ENOMEM;
		goto err_file;
	}
	w->ctx = ctx;
	ret = is_index ? open_index(ctx, w, file) : open_single(ctx, w, file);
	if (ret)
		goto err_weights;
	haccel__dbg(ctx, "%s: %u files, %u tensors, %llu bytes", file, w->n_files,
		    w->n_tensors, (unsigned long long)w->tensor_bytes);
	free(file);
	*out = w;
	return 0;

err_weights:
	haccel_weights_close(w);
err_file:
	free(file);
	return ret;
}

int haccel_weights_info(const struct haccel_weights *w,
			struct haccel_weights_info *out)
{
	if (!w || !out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->n_files = w->n_files;
	out->n_tensors = w->n_tensors;
	out->tensor_bytes = w->tensor_bytes;
	for (uint32_t f = 0; f < w->n_files; f++)
		out->file_bytes += w->files[f].size;
	out->dest_bytes = w->dest_bytes;
	out->n_checksums = w->n_checksums;
	return 0;
}

int haccel_weights_tensor(const struct haccel_weights *w, uint32_t i,
			  struct haccel_tensor_info *out)
{
	const struct haccel__tensor *t;

	if (!w || !out)
		return -EINVAL;
	if (i >= w->n_tensors)
		return -ERANGE;
	t = &w->tensors[i];
	memset(out, 0, sizeof(*out));
	out->name = t->name;
	out->dtype = t->dtype;
	out->n_dims = t->n_dims;
	memcpy(out->shape, t->shape, sizeof(out->shape));
	out->file = t->file;
	out->file_offset = w->files[t->file].data_start + t->begin;
	out->bytes = t->end - t->begin;
	out->dest_offset = haccel__tensor_dest(w, t);
	out->checksum = t->checksum;
	out->has_checksum = t->has_checksum;
	return 0;
}

int haccel_weights_find(const struct haccel_weights *w, const char *name,
			uint32_t *index)
{
	int64_t i;

	if (!w || !name || !index)
		return -EINVAL;
	i = find_sorted(w->tensors, w->by_name, w->n_tensors, name);
	if (i < 0)
		return -ENOENT;
	*index = (uint32_t)i;
	return 0;
}

const char *haccel_weights_file(const struct haccel_weights *w, uint32_t i)
{
	return w && i < w->n_files ? w->files[i].path : NULL;
}

int haccel_weights_metadata(const struct haccel_weights *w, uint32_t file,
			    uint32_t i, const char **key, const char **value)
{
	const struct haccel__wfile *f;

	if (!w || file >= w->n_files)
		return -EINVAL;
	f = &w->files[file];
	if (i >= f->n_meta)
		return -ERANGE;
	if (key)
		*key = f->meta_key[i];
	if (value)
		*value = f->meta_val[i];
	return 0;
}
