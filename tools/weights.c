// SPDX-License-Identifier: MIT
/*
 * haccel-ctl weights inspect|verify. Both open the checkpoint, which
 * validates every header in full; inspect then lists it, verify reads every
 * tensor through the loader into host memory and checks each against its
 * stored checksum, all of them, so that every mismatch is reported, not
 * only the first. A load that fails (a file changed or truncated, staging
 * that cannot be pinned) is an error, not a mismatch. As in doctor, the
 * human output is rendered from the same data as --json.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Header-only: haccel-ctl links only the public library. */
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "common.h"
#include "haccel.h"
#include "weights.h"

#define NAME_COL_MAX 60 /* longer names push their row out of line */

struct wopts {
	int json;
	int allow_unpinned; /* verify: staging may be unpinned, unregistered */
	uint64_t limit;     /* tensors listed; 0: all */
	const char *path;
};

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: haccel-ctl weights inspect PATH [--json] [--limit N]\n"
		"       haccel-ctl weights verify PATH [--json] [--allow-unpinned]\n"
		"\n"
		"PATH is a .safetensors file, a model.safetensors.index.json, or a\n"
		"directory holding either (the index wins).\n"
		"\n"
		"Subcommands:\n"
		"  inspect   validate every header; list files, tensors, totals by dtype\n"
		"            and metadata\n"
		"  verify    validate, then read every tensor and check each against its\n"
		"            stored XXH3-64 checksum (haccel.xxh3:<tensor> metadata);\n"
		"            every mismatch is listed\n"
		"\n"
		"Options:\n"
		"  -j, --json          machine-readable output on stdout\n"
		"  -n, --limit N       inspect: list at most N tensors (default: all)\n"
		"      --allow-unpinned\n"
		"                      verify: if the staging buffers cannot be locked or\n"
		"                      registered with io_uring (RLIMIT_MEMLOCK), read through\n"
		"                      unpinned, unregistered ones (slower; said on stderr)\n"
		"  -h, --help          print this help\n"
		"\n"
		"Exit status: 0 valid, 1 invalid or unreadable (the reason on stderr),\n"
		"2 usage error. See haccel-ctl(1).\n");
}

/* Open the checkpoint; on failure print why, also into msg (len bytes). */
static int open_checkpoint(const struct wopts *o, struct haccel_ctx **ctx,
			   struct haccel_weights **w, char *msg, size_t len)
{
	int ret;

	/* Library errors reach the user once, through haccel_last_error(). */
	ret = tool_ctx_open(-1, ctx);
	if (ret) {
		tool_err("cannot create a libhaccel context: %s", haccel_strerror(ret));
		return ret;
	}
	ret = haccel_weights_open(*ctx, o->path, 0, w);
	if (ret) {
		if (!haccel_last_error(*ctx, msg, len))
			snprintf(msg, len, "%s: %s", o->path, haccel_strerror(ret));
		tool_weights_error(o->path, msg, len);
		tool_err("%s", msg);
		haccel_close(*ctx);
		*ctx = NULL;
	}
	return ret;
}

/* The header length field of a file; -1 when it cannot be read. */
static int64_t header_bytes(const char *path)
{
	uint8_t b[8];
	uint64_t n = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	ssize_t r;

	if (fd < 0)
		return -1;
	r = pread(fd, b, sizeof(b), 0);
	close(fd);
	if (r != (ssize_t)sizeof(b))
		return -1;
	for (int i = 7; i >= 0; i--)
		n = n << 8 | b[i];
	return (int64_t)n;
}

static json_t *shape_json(const struct haccel_tensor_info *t)
{
	json_t *a = json_array();

	for (uint32_t d = 0; d < t->n_dims; d++)
		json_array_append_new(a, json_integer((json_int_t)t->shape[d]));
	return a;
}

/* Everything inspect prints, as JSON. */
static json_t *inspect_report(const struct wopts *o, struct haccel_weights *w)
{
	uint64_t dt_tensors[HACCEL_DTYPE_COUNT] = { 0 }, dt_bytes[HACCEL_DTYPE_COUNT] = { 0 };
	json_t *r = json_object(), *files = json_array(), *tensors = json_array();
	json_t *totals = json_object(), *by_dtype = json_object();
	struct haccel_weights_info wi;
	struct haccel_tensor_info ti;
	uint32_t *per_file;
	char hex[17];

	haccel_weights_info(w, &wi);
	per_file = calloc(wi.n_files ? wi.n_files : 1, sizeof(*per_file));
	if (!per_file)
		goto oom;
	json_object_set_new(r, "path", json_string(o->path));
	for (uint32_t i = 0; i < wi.n_tensors; i++) {
		json_t *t;

		haccel_weights_tensor(w, i, &ti);
		per_file[ti.file]++;
		dt_tensors[ti.dtype]++;
		dt_bytes[ti.dtype] += ti.bytes;
		if (o->limit && i >= o->limit)
			continue;
		t = json_object();
		json_object_set_new(t, "name", json_string(ti.name));
		json_object_set_new(t, "dtype", json_string(haccel_dtype_name(ti.dtype)));
		json_object_set_new(t, "shape", shape_json(&ti));
		json_object_set_new(t, "bytes", json_integer((json_int_t)ti.bytes));
		json_object_set_new(t, "file", json_integer(ti.file));
		json_object_set_new(t, "offset", json_integer((json_int_t)ti.file_offset));
		json_object_set_new(t, "dest_offset", json_integer((json_int_t)ti.dest_offset));
		snprintf(hex, sizeof(hex), "%016" PRIx64, ti.checksum);
		json_object_set_new(t, "checksum", ti.has_checksum ? json_string(hex) : json_null());
		json_array_append_new(tensors, t);
	}
	for (uint32_t f = 0; f < wi.n_files; f++) {
		const char *path = haccel_weights_file(w, f), *k, *v;
		json_t *file = json_object(), *meta = json_object();
		int64_t hb = header_bytes(path);
		struct stat st;

		json_object_set_new(file, "path", json_string(path));
		json_object_set_new(file, "size", stat(path, &st) ? json_null() :
					  json_integer((json_int_t)st.st_size));
		json_object_set_new(file, "header_bytes", hb < 0 ? json_null() : json_integer(hb));
		json_object_set_new(file, "tensors", json_integer(per_file[f]));
		for (uint32_t m = 0; !haccel_weights_metadata(w, f, m, &k, &v); m++)
			json_object_set_new(meta, k, json_string(v));
		json_object_set_new(file, "metadata", meta);
		json_array_append_new(files, file);
	}
	json_object_set_new(r, "files", files);
	json_object_set_new(r, "tensors", tensors);
	json_object_set_new(r, "tensors_listed", json_integer((json_int_t)json_array_size(tensors)));
	for (uint32_t d = 0; d < HACCEL_DTYPE_COUNT; d++) {
		json_t *e;

		if (!dt_tensors[d])
			continue;
		e = json_object();
		json_object_set_new(e, "tensors", json_integer((json_int_t)dt_tensors[d]));
		json_object_set_new(e, "bytes", json_integer((json_int_t)dt_bytes[d]));
		json_object_set_new(by_dtype, haccel_dtype_name(d), e);
	}
	json_object_set_new(totals, "files", json_integer(wi.n_files));
	json_object_set_new(totals, "tensors", json_integer(wi.n_tensors));
	json_object_set_new(totals, "tensor_bytes", json_integer((json_int_t)wi.tensor_bytes));
	json_object_set_new(totals, "file_bytes", json_integer((json_int_t)wi.file_bytes));
	json_object_set_new(totals, "dest_bytes", json_integer((json_int_t)wi.dest_bytes));
	json_object_set_new(totals, "checksums", json_integer(wi.n_checksums));
	json_object_set_new(totals, "by_dtype", by_dtype);
	json_object_set_new(r, "totals", totals);
	free(per_file);
	return r;
oom:
	json_decref(r);
	json_decref(files);
	json_decref(tensors);
	json_decref(totals);
	json_decref(by_dtype);
	return NULL;
}

static int64_t jint(const json_t *o, const char *key)
{
	return (int64_t)json_integer_value(json_object_get(o, key));
}

static void print_shape(char *buf, size_t len, const json_t *shape)
{
	size_t i, o = 0;
	json_t *d;

	o += (size_t)snprintf(buf + o, len - o, "[");
	json_array_foreach(shape, i, d)
		if (o < len)
			o += (size_t)snprintf(buf + o, len - o, "%s%" PRId64,
					      i ? ", " : "", (int64_t)json_integer_value(d));
	if (o < len)
		snprintf(buf + o, len - o, "]");
}

static void inspect_print(const json_t *r)
{
	const json_t *files = json_object_get(r, "files");
	const json_t *tensors = json_object_get(r, "tensors");
	const json_t *totals = json_object_get(r, "totals");
	const json_t *f, *t, *v;
	char b1[32], b2[32], sh[400];
	size_t i, name_w = 4, shape_w = 5;
	int64_t n_listed, n_all, checksum_keys;
	const char *k;

	n_all = jint(totals, "tensors");
	n_listed = (int64_t)json_array_size(tensors);
	printf("checkpoint %s: %" PRId64 " file%s, %" PRId64 " tensor%s, %s of tensors, %s on disk\n",
	       json_string_value(json_object_get(r, "path")), jint(totals, "files"),
	       jint(totals, "files") == 1 ? "" : "s", n_all, n_all == 1 ? "" : "s",
	       tool_bytes((uint64_t)jint(totals, "tensor_bytes"), b1, sizeof(b1)),
	       tool_bytes((uint64_t)jint(totals, "file_bytes"), b2, sizeof(b2)));

	printf("\nfiles:\n  %4s  %10s  %10s  %8s  %s\n", "#", "size", "header", "tensors", "path");
	json_array_foreach(files, i, f)
		printf("  %4zu  %10s  %10s  %8" PRId64 "  %s\n", i,
		       tool_bytes((uint64_t)jint(f, "size"), b1, sizeof(b1)),
		       tool_bytes((uint64_t)jint(f, "header_bytes"), b2, sizeof(b2)),
		       jint(f, "tensors"), json_string_value(json_object_get(f, "path")));

	json_array_foreach(tensors, i, t) {
		size_t n = strlen(json_string_value(json_object_get(t, "name")));

		print_shape(sh, sizeof(sh), json_object_get(t, "shape"));
		if (n > name_w)
			name_w = n < NAME_COL_MAX ? n : NAME_COL_MAX;
		if (strlen(sh) > shape_w)
			shape_w = strlen(sh) < 32 ? strlen(sh) : 32;
	}
	printf("\ntensors:\n  %-*s  %-7s  %-*s  %10s  %4s  %12s  %s\n", (int)name_w, "name",
	       "dtype", (int)shape_w, "shape", "bytes", "file", "offset", "checksum");
	json_array_foreach(tensors, i, t) {
		v = json_object_get(t, "checksum");
		print_shape(sh, sizeof(sh), json_object_get(t, "shape"));
		printf("  %-*s  %-7s  %-*s  %10s  %4" PRId64 "  %12" PRId64 "  %s\n", (int)name_w,
		       json_string_value(json_object_get(t, "name")),
		       json_string_value(json_object_get(t, "dtype")), (int)shape_w, sh,
		       tool_bytes((uint64_t)jint(t, "bytes"), b1, sizeof(b1)), jint(t, "file"),
		       jint(t, "offset"), json_is_string(v) ? json_string_value(v) : "-");
	}
	if (n_listed < n_all)
		printf("  ... %" PRId64 " more (--limit 0 lists all)\n", n_all - n_listed);

	printf("\ntotals: %" PRId64 " tensor%s, %s, %" PRId64 " with a stored checksum; host load destination %s\n",
	       n_all, n_all == 1 ? "" : "s",
	       tool_bytes((uint64_t)jint(totals, "tensor_bytes"), b1, sizeof(b1)),
	       jint(totals, "checksums"),
	       tool_bytes((uint64_t)jint(totals, "dest_bytes"), b2, sizeof(b2)));
	json_object_foreach((json_t *)json_object_get(totals, "by_dtype"), k, v)
		printf("  %-8s %8" PRId64 " tensor%s  %10s\n", k, jint(v, "tensors"),
		       jint(v, "tensors") == 1 ? " " : "s",
		       tool_bytes((uint64_t)jint(v, "bytes"), b1, sizeof(b1)));

	/* Checksum entries would bury the rest: counted, not listed. */
	json_array_foreach(files, i, f) {
		const json_t *meta = json_object_get(f, "metadata");

		if (!json_object_size(meta))
			continue;
		checksum_keys = 0;
		printf("\nmetadata of file %zu:\n", i);
		json_object_foreach((json_t *)meta, k, v) {
			if (!strncmp(k, HACCEL_CHECKSUM_PREFIX, strlen(HACCEL_CHECKSUM_PREFIX)))
				checksum_keys++;
			else
				printf("  %s = %s\n", k, json_string_value(v));
		}
		if (checksum_keys)
			printf("  (%" PRId64 " %s<tensor> checksum entries)\n", checksum_keys,
			       HACCEL_CHECKSUM_PREFIX);
	}
}

/* With --json, a failure is a JSON object on stdout too: what failed
 * (stage) and why, as on stderr. */
static void print_failure_json(const struct wopts *o, const char *stage, const char *msg)
{
	json_t *r = json_object();

	json_object_set_new(r, "path", json_string(o->path));
	json_object_set_new(r, "ok", json_false());
	json_object_set_new(r, "stage", json_string(stage));
	json_object_set_new(r, "error", json_string(msg));
	tool_print_json(r);
}

static int cmd_inspect(const struct wopts *o)
{
	struct haccel_weights *w = NULL;
	struct haccel_ctx *ctx = NULL;
	char msg[1024];
	json_t *r;

	if (open_checkpoint(o, &ctx, &w, msg, sizeof(msg))) {
		if (o->json)
			print_failure_json(o, "open", msg);
		return EXIT_FAIL;
	}
	r = inspect_report(o, w);
	haccel_weights_close(w);
	haccel_close(ctx);
	if (!r) {
		tool_err("out of memory");
		if (o->json)
			print_failure_json(o, "inspect", "out of memory");
		return EXIT_FAIL;
	}
	if (o->json)
		return tool_print_json(r) ? EXIT_FAIL : EXIT_OK;
	inspect_print(r);
	json_decref(r);
	return EXIT_OK;
}

/* Hashing the loaded tensors, several threads taking the next tensor. */
struct check_job {
	struct haccel_weights *w;
	const char *base;         /* the host-layout destination */
	uint32_t n;
	atomic_uint next;
	uint64_t *got;            /* per tensor: XXH3-64 of what was read */
};

static void *check_worker(void *arg)
{
	struct check_job *j = arg;
	struct haccel_tensor_info ti;

	for (uint32_t i; (i = atomic_fetch_add(&j->next, 1)) < j->n;) {
		haccel_weights_tensor(j->w, i, &ti);
		if (ti.has_checksum)
			j->got[i] = XXH3_64bits(j->base + ti.dest_offset, ti.bytes);
	}
	return NULL;
}

/* Hash every tensor with a stored checksum into got[]. */
static void hash_tensors(struct haccel_weights *w, const void *base, uint32_t n, uint64_t *got)
{
	struct check_job j = { .w = w, .base = base, .n = n, .got = got };
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	uint32_t want = cpus > 8 ? 8 : cpus > 1 ? (uint32_t)cpus : 1, started = 0;
	pthread_t th[8];

	atomic_init(&j.next, 0);
	/* This thread hashes too; a helper that fails to start is no loss. */
	for (uint32_t i = 1; i < want; i++)
		if (!pthread_create(&th[started], NULL, check_worker, &j))
			started++;
	check_worker(&j);
	for (uint32_t i = 0; i < started; i++)
		pthread_join(th[i], NULL);
}

static int cmd_verify(const struct wopts *o)
{
	struct haccel_load_params p;
	struct haccel_load_stats st;
	struct haccel_weights_info wi;
	struct haccel_tensor_info ti;
	struct haccel_host_sink hs;
	struct haccel_weights *w = NULL;
	struct haccel_ctx *ctx = NULL;
	char msg[1200] = "", b1[32], hex[2][17];
	uint32_t matched = 0, without = 0, mismatches = 0;
	uint64_t t0, ns, *got = NULL;
	json_t *r, *list;
	void *buf;
	int ret;

	if (open_checkpoint(o, &ctx, &w, msg, sizeof(msg))) {
		if (o->json)
			print_failure_json(o, "open", msg);
		return EXIT_FAIL;
	}
	haccel_weights_info(w, &wi);
	/* One destination for the whole checkpoint, as the host sink lays it
	 * out; pages are only touched as the loader fills them. */
	buf = malloc(wi.dest_bytes ? wi.dest_bytes : 1);
	got = calloc(wi.n_tensors ? wi.n_tensors : 1, sizeof(*got));
	if (!buf || !got) {
		snprintf(msg, sizeof(msg), "cannot allocate %s for the load",
			 tool_bytes(wi.dest_bytes, b1, sizeof(b1)));
		tool_err("%s", msg);
		if (o->json)
			print_failure_json(o, "load", msg);
		free(buf);
		free(got);
		haccel_weights_close(w);
		haccel_close(ctx);
		return EXIT_FAIL;
	}
	haccel_host_sink_init(&hs, buf, wi.dest_bytes);
	haccel_load_params_init(&p);
	/* The checksums are checked here, after the load, so that a mismatch
	 * does not stop it: every tensor is checked and each one reported. */
	if (!o->json)
		p.flags |= HACCEL_LOAD_PROGRESS;
	if (o->allow_unpinned) {
		p.hostmem_flags |= HACCEL_HOSTMEM_ALLOW_UNPINNED;
		p.flags |= HACCEL_LOAD_ALLOW_UNREGISTERED;
	}
	memset(&st, 0, sizeof(st));
	t0 = tool_now_ns();
	ret = haccel_load(w, &p, &hs.sink, &st);
	if (ret) {
		if (!haccel_last_error(ctx, msg, sizeof(msg)))
			snprintf(msg, sizeof(msg), "load failed: %s", haccel_strerror(ret));
		tool_unpinned_hint(msg, sizeof(msg), o->allow_unpinned, "reads");
	} else {
		hash_tensors(w, buf, wi.n_tensors, got);
	}
	ns = tool_now_ns() - t0;

	list = json_array();
	for (uint32_t i = 0; !ret && i < wi.n_tensors; i++) {
		haccel_weights_tensor(w, i, &ti);
		if (!ti.has_checksum) {
			without++;
		} else if (got[i] == ti.checksum) {
			matched++;
		} else {
			json_t *m = json_object();

			mismatches++;
			snprintf(hex[0], sizeof(hex[0]), "%016" PRIx64, ti.checksum);
			snprintf(hex[1], sizeof(hex[1]), "%016" PRIx64, got[i]);
			json_object_set_new(m, "name", json_string(ti.name));
			json_object_set_new(m, "file", json_string(haccel_weights_file(w, ti.file)));
			json_object_set_new(m, "stored", json_string(hex[0]));
			json_object_set_new(m, "read", json_string(hex[1]));
			json_array_append_new(list, m);
		}
	}
	if (!ret && mismatches)
		snprintf(msg, sizeof(msg), "%u of %u tensors with a stored checksum do not match it",
			 mismatches, matched + mismatches);

	r = json_object();
	json_object_set_new(r, "path", json_string(o->path));
	json_object_set_new(r, "ok", json_boolean(!ret && !mismatches));
	if (ret)
		json_object_set_new(r, "stage", json_string("load"));
	json_object_set_new(r, "tensors", json_integer(wi.n_tensors));
	json_object_set_new(r, "verified", json_integer(matched));
	json_object_set_new(r, "without_checksum", json_integer(without));
	/* Only tensors read in full are judged: after a load error, none. */
	json_object_set_new(r, "mismatches", json_integer(mismatches));
	json_object_set_new(r, "mismatched", list);
	json_object_set_new(r, "tensor_bytes", json_integer((json_int_t)st.tensor_bytes));
	json_object_set_new(r, "read_bytes", json_integer((json_int_t)st.read_bytes));
	json_object_set_new(r, "seconds", json_real((double)ns / 1e9));
	json_object_set_new(r, "io_path", json_string(st.io_path == HACCEL_IO_PREAD ? "pread" : "io_uring"));
	json_object_set_new(r, "direct", json_boolean(st.direct));
	json_object_set_new(r, "fallback_reason", json_string(st.fallback_reason));
	json_object_set_new(r, "staging_unpinned", json_boolean(st.staging_unpinned));
	json_object_set_new(r, "staging_unregistered", json_boolean(st.staging_unregistered));
	json_object_set_new(r, "error", ret || mismatches ? json_string(msg) : json_null());

	if (ret || mismatches)
		tool_err("verify failed: %s", msg);
	for (size_t i = 0; i < json_array_size(list); i++) {
		json_t *m = json_array_get(list, i);

		tool_err("  %s: tensor \"%s\": checksum mismatch: stored %s, read %s",
			 json_string_value(json_object_get(m, "file")),
			 json_string_value(json_object_get(m, "name")),
			 json_string_value(json_object_get(m, "stored")),
			 json_string_value(json_object_get(m, "read")));
	}
	if (o->json) {
		if (tool_print_json(r))
			ret = -EIO;
	} else {
		if (!ret && !mismatches)
			printf("%s: %u tensors read, %u match their stored checksum, %u have none; %s in %.2f s (%s, %s%s%s)\n",
			       o->path, wi.n_tensors, matched, without,
			       tool_bytes(st.tensor_bytes, b1, sizeof(b1)), (double)ns / 1e9,
			       st.io_path == HACCEL_IO_PREAD ? "pread" : "io_uring",
			       st.direct ? "O_DIRECT" : "buffered",
			       st.staging_unpinned ? ", staging unpinned" : "",
			       st.staging_unregistered ? ", staging not registered with io_uring" : "");
		json_decref(r);
	}
	free(got);
	free(buf);
	haccel_weights_close(w);
	haccel_close(ctx);
	return ret || mismatches ? EXIT_FAIL : EXIT_OK;
}

int weights_main(int argc, char **argv)
{
	enum { O_ALLOW_UNPINNED = 256 };
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "limit", required_argument, NULL, 'n' },
		{ "allow-unpinned", no_argument, NULL, O_ALLOW_UNPINNED },
		{ NULL, 0, NULL, 0 },
	};
	struct wopts o = { 0 };
	const char *sub;
	int help = 0, limit_set = 0, c, rc;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "jhn:", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			o.json = 1;
			break;
		case 'h':
			help = 1;
			break;
		case 'n':
			if (tool_parse_u64(optarg, 0, UINT32_MAX, &o.limit)) {
				tool_err("bad value '%s' for --limit (a count; 0 lists all)", optarg);
				return EXIT_USAGE;
			}
			limit_set = 1;
			break;
		case O_ALLOW_UNPINNED:
			o.allow_unpinned = 1;
			break;
		default:
			tool_option_error("weights", argv, opts);
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	sub = tool_subcommand(argc, argv, "weights", "inspect or verify", help, usage, &rc);
	if (!sub)
		return rc;
	if (strcmp(sub, "inspect") && strcmp(sub, "verify")) {
		tool_err("weights: unknown subcommand '%s' (inspect or verify)", sub);
		return EXIT_USAGE;
	}
	if (optind >= argc) {
		tool_err("weights %s: missing PATH (a .safetensors file, an index or a directory)", sub);
		return EXIT_USAGE;
	}
	o.path = argv[optind++];
	if (optind < argc) {
		tool_err("unexpected argument '%s' (see haccel-ctl weights --help)", argv[optind]);
		return EXIT_USAGE;
	}
	if (!strcmp(sub, "inspect")) {
		if (o.allow_unpinned) {
			tool_err("weights inspect: --allow-unpinned applies to verify only");
			return EXIT_USAGE;
		}
		return cmd_inspect(&o);
	}
	if (limit_set) {
		tool_err("weights verify: --limit applies to inspect only");
		return EXIT_USAGE;
	}
	return cmd_verify(&o);
}
