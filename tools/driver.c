// SPDX-License-Identifier: MIT
/*
 * haccel-ctl driver: what haccel.ko is doing on this node. status and
 * quota go through the library (haccel_driver_info(), _stats(),
 * _quota_set()), the very probe that picks the pinning provider, so the
 * tool reports what the library will do; clients reads the debugfs file
 * the driver keeps for people. doctor reports the same probe.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>

#include "common.h"
#include "driver.h"
#include "haccel.h"

#define DEBUGFS_MAGIC 0x64626720
#define MAX_NODES 1024

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: haccel-ctl driver status [--json]\n"
		"       haccel-ctl driver quota get [NODE] [--json]\n"
		"       haccel-ctl driver quota set NODE|all BYTES|unlimited [--client BYTES|unlimited] [--json]\n"
		"       haccel-ctl driver clients [--json]\n"
		"\n"
		"Subcommands:\n"
		"  status        whether haccel.ko is loaded and usable by this process: its\n"
		"                render node, its ABI version against the library's, its\n"
		"                capabilities, the pinning provider the library picks, and\n"
		"                per node the bytes pinned (node-wide and by this process)\n"
		"                and the quotas\n"
		"  quota get     each node's node-wide and per-client limits (or NODE's)\n"
		"  quota set     set NODE's node-wide limit (all: every online node) to BYTES\n"
		"                (K, M, G, T suffixes: powers of 1024); needs CAP_SYS_ADMIN\n"
		"  clients       the driver's clients (open files still charged for\n"
		"                something): pid, command, state, buffers, bytes per node,\n"
		"                from /sys/kernel/debug/haccel/clients (root, debugfs)\n"
		"\n"
		"Options:\n"
		"  -j, --json            machine-readable output on stdout\n"
		"      --client BYTES    quota set: also set the per-client limit\n"
		"                        (default: keep it)\n"
		"  -h, --help            print this help\n"
		"\n"
		"Exit status: 0 success; 1 failure, with the reason on stderr (status: the\n"
		"driver is not loaded or not usable by this process; its report is still\n"
		"printed); 2 usage error. See haccel-ctl(1).\n");
}

/* The library reports its errors through haccel_last_error(), printed here
 * once; HACCEL_LOG=info or debug shows the probe's own lines. */
static struct haccel_ctx *ctx_open(void)
{
	struct haccel_ctx *ctx;

	if (tool_ctx_open(HACCEL_LOG_ERROR, &ctx)) {
		tool_err("cannot open libhaccel");
		return NULL;
	}
	return ctx;
}

static json_t *version_json(uint32_t v)
{
	char buf[32];

	if (!v)
		return json_null();
	snprintf(buf, sizeof(buf), "%u.%u", HACCEL_DRIVER_VERSION_MAJOR(v),
		 HACCEL_DRIVER_VERSION_MINOR(v));
	return json_string(buf);
}

static json_t *limit_json(uint64_t v)
{
	return v == HACCEL_DRIVER_UNLIMITED ? json_null() : json_integer((json_int_t)v);
}

static const char *const cap_names[] = { "pin_strict_node", "prime_export", "prime_mmap",
					 "client_quota" };

static const char *provider_name(uint32_t p)
{
	return p == HACCEL_HOSTMEM_PROVIDER_DRIVER ? "driver" :
	       p == HACCEL_HOSTMEM_PROVIDER_USER ? "user" : "none";
}

/* The probe of ctx as JSON; *status gets haccel_driver_info()'s status. */
static json_t *probe_json(struct haccel_ctx *ctx, int *status)
{
	struct haccel_hostmem_provider_stats ps = { .size = sizeof(ps) };
	struct haccel_driver_info i = { .size = sizeof(i) };
	json_t *o = json_object(), *u = json_object(), *caps = json_array();
	int ret = haccel_driver_info(ctx, &i);

	if (status)
		*status = ret;
	json_object_set_new(o, "loaded", json_boolean(i.loaded));
	json_object_set_new(o, "usable", json_boolean(i.usable));
	json_object_set_new(o, "status", json_string(haccel_status_name(ret)));
	json_object_set_new(o, "render_node", i.render_node[0] ? json_string(i.render_node) :
								 json_null());
	json_object_set_new(u, "driver", version_json(i.uapi_version));
	json_object_set_new(u, "driver_min", version_json(i.uapi_min_version));
	json_object_set_new(u, "library", version_json(i.lib_uapi_version));
	json_object_set_new(u, "compatible", i.uapi_version ? json_boolean(i.compatible) :
							      json_null());
	json_object_set_new(o, "uapi", u);
	for (size_t b = 0; b < sizeof(cap_names) / sizeof(cap_names[0]); b++)
		if (i.caps & (1ull << b))
			json_array_append_new(caps, json_string(cap_names[b]));
	json_object_set_new(o, "caps", caps);
	json_object_set_new(o, "caps_mask", json_integer((json_int_t)i.caps));
	json_object_set_new(o, "num_nodes", i.usable ? json_integer(i.num_nodes) : json_null());
	json_object_set_new(o, "page_size", i.usable ? json_integer((json_int_t)i.page_size) :
						       json_null());
	json_object_set_new(o, "max_pin_bytes", i.usable ? json_integer((json_int_t)i.max_pin_bytes) :
							   json_null());
	haccel_hostmem_provider_stats(ctx, &ps);
	json_object_set_new(o, "provider", json_string(provider_name(ps.provider)));
	json_object_set_new(o, "reason", i.reason[0] ? json_string(i.reason) : json_null());
	return o;
}

json_t *driver_probe_json(void)
{
	struct haccel_ctx *ctx = ctx_open();
	json_t *o;

	if (!ctx)
		return NULL;
	o = probe_json(ctx, NULL);
	haccel_close(ctx);
	return o;
}

/* --- status ---------------------------------------------------------------- */

static json_t *nodes_json(const struct haccel_driver_node *n, uint32_t count)
{
	json_t *a = json_array();

	for (uint32_t k = 0; k < count; k++) {
		json_t *o = json_object();

		json_object_set_new(o, "node", json_integer(n[k].node));
		json_object_set_new(o, "online", json_boolean(n[k].online));
		json_object_set_new(o, "pinned_bytes", json_integer((json_int_t)n[k].pinned_bytes));
		json_object_set_new(o, "process_bytes", json_integer((json_int_t)n[k].client_bytes));
		json_object_set_new(o, "node_limit", n[k].online ? limit_json(n[k].node_limit) :
								   json_null());
		json_object_set_new(o, "client_limit", n[k].online ? limit_json(n[k].client_limit) :
								     json_null());
		json_array_append_new(a, o);
	}
	return a;
}

static const char *limit_text(uint64_t v, char *buf, size_t len)
{
	if (v == HACCEL_DRIVER_UNLIMITED)
		return "unlimited";
	return tool_bytes(v, buf, len);
}

/* The driver's nodes, or NULL with the failure printed. */
static struct haccel_driver_node *nodes_get(struct haccel_ctx *ctx, struct haccel_driver_stats *st,
					    uint32_t *count)
{
	struct haccel_driver_node *n = calloc(MAX_NODES, sizeof(*n));
	char err[1024];
	int ret;

	if (!n) {
		tool_err("out of memory");
		return NULL;
	}
	st->size = sizeof(*st);
	ret = haccel_driver_stats(ctx, st, n, MAX_NODES);
	if (ret < 0) {
		haccel_last_error(ctx, err, sizeof(err));
		tool_err("%s", err);
		free(n);
		return NULL;
	}
	*count = (uint32_t)ret < MAX_NODES ? (uint32_t)ret : MAX_NODES;
	return n;
}

/* The reason with its opening words cut when it starts with them (the line
 * has said so already); "?" for none. */
static const char *after(const char *reason, const char *opening)
{
	size_t n = strlen(opening);

	if (!reason)
		return "?";
	return strncmp(reason, opening, n) || !reason[n] ? reason : reason + n;
}

static void print_status(const json_t *o)
{
	const json_t *u = json_object_get(o, "uapi"), *v;
	const char *reason = json_string_value(json_object_get(o, "reason"));
	const char *prov = json_string_value(json_object_get(o, "provider"));

	if (json_is_true(json_object_get(o, "usable")))
		printf("haccel.ko      loaded, render node %s, usable\n",
		       json_string_value(json_object_get(o, "render_node")));
	else if (json_is_true(json_object_get(o, "loaded")))
		printf("haccel.ko      loaded, not usable by this process: %s\n",
		       after(reason, "haccel.ko is loaded, but "));
	else if (reason && !strncmp(reason, "haccel.ko is not loaded", 23))
		/* "not loaded (no /sys/module/haccel)", not said twice */
		printf("haccel.ko      not loaded%s\n", reason + 23);
	else
		printf("haccel.ko      not loaded: %s\n", reason ? reason : "?");
	v = json_object_get(u, "driver");
	if (json_is_string(v))
		printf("ABI            driver %s (serves userspace from %s), library %s: %s\n",
		       json_string_value(v), json_string_value(json_object_get(u, "driver_min")),
		       json_string_value(json_object_get(u, "library")),
		       json_is_true(json_object_get(u, "compatible")) ? "compatible" : "incompatible");
	else
		printf("ABI            library %s\n", json_string_value(json_object_get(u, "library")));
	v = json_object_get(o, "caps");
	if (json_is_true(json_object_get(o, "usable"))) {
		printf("capabilities  ");
		for (size_t i = 0; i < json_array_size(v); i++)
			printf(" %s", json_string_value(json_array_get(v, i)));
		printf("%s\n", json_array_size(v) ? "" : " none");
	}
	if (!strcmp(prov, "driver"))
		printf("pinning        through haccel.ko (provider driver): node-wide quotas apply\n");
	else if (!strcmp(prov, "user"))
		printf("pinning        with mlock (provider user): RLIMIT_MEMLOCK applies, no node-wide quotas\n");
	else
		printf("pinning        none: HACCEL_HOSTMEM_PROVIDER=driver and the driver cannot be used, so allocations fail\n");
}

static int cmd_status(int json)
{
	struct haccel_ctx *ctx = ctx_open();
	struct haccel_driver_node *n = NULL;
	struct haccel_driver_stats st;
	uint32_t count = 0;
	char b[4][32];
	int status, rc;
	json_t *o;

	if (!ctx)
		return EXIT_FAIL;
	o = probe_json(ctx, &status);
	if (status == 0) {
		n = nodes_get(ctx, &st, &count);
		if (!n) {
			json_decref(o);
			haccel_close(ctx);
			return EXIT_FAIL;
		}
		json_object_set_new(o, "pinned_bytes", json_integer((json_int_t)st.pinned_bytes));
		json_object_set_new(o, "process_bytes", json_integer((json_int_t)st.client_bytes));
		json_object_set_new(o, "buffers", json_integer((json_int_t)st.buffers));
		json_object_set_new(o, "process_buffers", json_integer((json_int_t)st.client_buffers));
		json_object_set_new(o, "nodes", nodes_json(n, count));
	} else {
		json_object_set_new(o, "nodes", json_array());
	}
	rc = status ? EXIT_FAIL : EXIT_OK;
	if (status) {
		const char *why = json_string_value(json_object_get(o, "reason"));

		/* "haccel.ko is not loaded (...)" says it whole. */
		if (why && !strncmp(why, "haccel.ko ", 10))
			tool_err("%s", why);
		else
			tool_err("haccel.ko cannot be used by this process: %s", why ? why : "?");
	}
	if (json) {
		if (tool_print_json(o))
			rc = EXIT_FAIL;
	} else {
		print_status(o);
		json_decref(o);
		if (status == 0) {
			printf("pinned         %s in %llu buffers, all clients (this process: %s in %llu)\n",
			       tool_bytes(st.pinned_bytes, b[0], sizeof(b[0])),
			       (unsigned long long)st.buffers,
			       tool_bytes(st.client_bytes, b[1], sizeof(b[1])),
			       (unsigned long long)st.client_buffers);
			printf("%4s %-7s %14s %14s %14s %14s\n", "node", "online", "pinned", "this process",
			       "node limit", "client limit");
			for (uint32_t k = 0; k < count; k++) {
				if (!n[k].online) {
					printf("%4u %-7s %14s %14s %14s %14s\n", n[k].node, "no", "-", "-", "-", "-");
					continue;
				}
				printf("%4u %-7s %14s %14s %14s %14s\n", n[k].node, "yes",
				       tool_bytes(n[k].pinned_bytes, b[0], sizeof(b[0])),
				       tool_bytes(n[k].client_bytes, b[1], sizeof(b[1])),
				       limit_text(n[k].node_limit, b[2], sizeof(b[2])),
				       limit_text(n[k].client_limit, b[3], sizeof(b[3])));
			}
		}
	}
	free(n);
	haccel_close(ctx);
	return rc;
}

/* --- quota ------------------------------------------------------------------- */

/* NODE: a decimal node id, or "all" (-1) when allowed. */
static int parse_node(const char *s, int all_ok, int32_t *node)
{
	uint64_t v;

	if (all_ok && !strcmp(s, "all")) {
		*node = HACCEL_NODE_ANY;
		return 0;
	}
	if (tool_parse_u64(s, 0, MAX_NODES - 1, &v) || (s[0] == '0' && s[1]))
		return -EINVAL;
	*node = (int32_t)v;
	return 0;
}

static int parse_limit(const char *s, uint64_t *v)
{
	if (!strcmp(s, "unlimited")) {
		*v = HACCEL_DRIVER_UNLIMITED;
		return 0;
	}
	return tool_parse_size(s, v);
}

static void print_quota(const struct haccel_driver_node *n)
{
	char b[3][32];

	if (!n->online) {
		printf("node %u: offline, no quota\n", n->node);
		return;
	}
	printf("node %u: node-wide limit %s, client limit %s, %s pinned\n", n->node,
	       limit_text(n->node_limit, b[0], sizeof(b[0])),
	       limit_text(n->client_limit, b[1], sizeof(b[1])),
	       tool_bytes(n->pinned_bytes, b[2], sizeof(b[2])));
}

/* Print the nodes selected (node, or every one for HACCEL_NODE_ANY). */
static int report_quotas(const struct haccel_driver_node *n, uint32_t count, int32_t node,
			 int json)
{
	if (node != HACCEL_NODE_ANY && (uint32_t)node >= count) {
		tool_err("no node %d: haccel.ko counts nodes 0 to %u", node, count - 1);
		return EXIT_FAIL;
	}
	if (json) {
		json_t *o = json_object();

		json_object_set_new(o, "nodes", node == HACCEL_NODE_ANY ? nodes_json(n, count) :
									  nodes_json(n + node, 1));
		return tool_print_json(o) ? EXIT_FAIL : EXIT_OK;
	}
	for (uint32_t k = 0; k < count; k++)
		if (node == HACCEL_NODE_ANY || (uint32_t)node == k)
			print_quota(&n[k]);
	return EXIT_OK;
}

static int cmd_quota_get(int32_t node, int json)
{
	struct haccel_ctx *ctx = ctx_open();
	struct haccel_driver_node *n;
	struct haccel_driver_stats st;
	uint32_t count;
	int rc = EXIT_FAIL;

	if (!ctx)
		return EXIT_FAIL;
	n = nodes_get(ctx, &st, &count);
	if (n)
		rc = report_quotas(n, count, node, json);
	free(n);
	haccel_close(ctx);
	return rc;
}

static int cmd_quota_set(int32_t node, uint64_t limit, int set_client, uint64_t client, int json)
{
	struct haccel_ctx *ctx = ctx_open();
	struct haccel_driver_node *n;
	struct haccel_driver_stats st;
	char err[1024];
	uint32_t count;
	int rc = EXIT_FAIL;

	if (!ctx)
		return EXIT_FAIL;
	n = nodes_get(ctx, &st, &count);
	if (!n)
		goto out;
	if (node != HACCEL_NODE_ANY && ((uint32_t)node >= count || !n[node].online)) {
		tool_err("cannot set the quota of node %d: it is not online (haccel.ko counts nodes 0 to %u)",
			 node, count - 1);
		goto out;
	}
	/* One node at a time, so that each keeps its own client limit. */
	for (uint32_t k = 0; k < count; k++) {
		if (!n[k].online || (node != HACCEL_NODE_ANY && (uint32_t)node != k))
			continue;
		if (haccel_driver_quota_set(ctx, (int32_t)k, limit,
					    set_client ? client : n[k].client_limit)) {
			haccel_last_error(ctx, err, sizeof(err));
			tool_err("%s", err);
			goto out;
		}
	}
	free(n);
	n = nodes_get(ctx, &st, &count);
	if (n)
		rc = report_quotas(n, count, node, json);
out:
	free(n);
	haccel_close(ctx);
	return rc;
}

/* --- clients ----------------------------------------------------------------- */

static int split(char *line, char **tok, int max)
{
	int n = 0;

	for (char *s = strtok(line, " \t\n"); s && n < max; s = strtok(NULL, " \t\n"))
		tok[n++] = s;
	return n;
}

/*
 * Parse the driver's table: a header "pid command state bos node0 ...",
 * then one line per client. The command may hold spaces: the fields are
 * taken from both ends.
 */
static json_t *parse_clients(FILE *f, const char *path, char *err, size_t len)
{
	char line[16384], *tok[MAX_NODES + 8];
	json_t *a = json_array();
	int n_nodes = -1, n;

	if (!fgets(line, sizeof(line), f) || (n = split(line, tok, MAX_NODES + 8)) < 4 ||
	    strcmp(tok[0], "pid") || strcmp(tok[1], "command")) {
		snprintf(err, len, "%s does not start with the driver's header (pid command state bos node0 ...)",
			 path);
		json_decref(a);
		return NULL;
	}
	n_nodes = n - 4;
	while (fgets(line, sizeof(line), f)) {
		json_t *c, *nb;
		uint64_t total = 0, v;
		char cmd[256] = "";

		n = split(line, tok, MAX_NODES + 8);
		if (!n)
			continue;
		if (n < 4 + n_nodes) {
			snprintf(err, len, "%s: a client line has %d fields, want at least %d", path, n,
				 4 + n_nodes);
			json_decref(a);
			return NULL;
		}
		c = json_object();
		nb = json_array();
		if (tool_parse_u64(tok[0], 0, INT32_MAX, &v)) {
			snprintf(err, len, "%s: bad pid '%s'", path, tok[0]);
			json_decref(c);
			json_decref(nb);
			json_decref(a);
			return NULL;
		}
		json_object_set_new(c, "pid", json_integer((json_int_t)v));
		for (int k = 1; k < n - 2 - n_nodes; k++)
			snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), "%s%s", k > 1 ? " " : "",
				 tok[k]);
		json_object_set_new(c, "command", json_string(cmd));
		json_object_set_new(c, "state", json_string(tok[n - 2 - n_nodes]));
		v = strtoull(tok[n - 1 - n_nodes], NULL, 10);
		json_object_set_new(c, "buffers", json_integer((json_int_t)v));
		for (int k = 0; k < n_nodes; k++) {
			v = strtoull(tok[n - n_nodes + k], NULL, 10);
			total += v;
			json_array_append_new(nb, json_integer((json_int_t)v));
		}
		json_object_set_new(c, "bytes", json_integer((json_int_t)total));
		json_object_set_new(c, "node_bytes", nb);
		json_array_append_new(a, c);
	}
	return a;
}

/* Why the clients file is not there: the driver, or debugfs. */
static void clients_missing(const char *root, const char *path, char *err, size_t len)
{
	struct haccel_driver_info i = { .size = sizeof(i) };
	struct haccel_ctx *ctx = ctx_open();
	char dir[620];
	struct statfs sf;

	if (ctx) {
		haccel_driver_info(ctx, &i);
		haccel_close(ctx);
	}
	snprintf(dir, sizeof(dir), "%s/kernel/debug", root);
	if (ctx && !i.loaded)
		snprintf(err, len, "%s: it has no clients to list", i.reason);
	else if (statfs(dir, &sf) || sf.f_type != DEBUGFS_MAGIC)
		snprintf(err, len,
			 "debugfs is not mounted at %s, so %s cannot be read (mount -t debugfs none %s)",
			 dir, path, dir);
	else
		snprintf(err, len,
			 "debugfs is mounted at %s but has no haccel/clients: haccel.ko was built without debugfs, or its directory failed to appear (see dmesg)",
			 dir);
}

static int cmd_clients(int json)
{
	const char *root = getenv("HACCEL_SYSFS_ROOT");
	char path[600], err[2048], b[32];
	json_t *a, *o;
	FILE *f;

	if (!root || !*root)
		root = "/sys";
	snprintf(path, sizeof(path), "%s/kernel/debug/haccel/clients", root);
	f = fopen(path, "re");
	if (!f) {
		int e = errno;

		if (e == ENOENT)
			clients_missing(root, path, err, sizeof(err));
		else if (e == EACCES || e == EPERM)
			snprintf(err, sizeof(err),
				 "cannot read %s (%s): debugfs is readable by root only; run as root",
				 path, strerror(e));
		else
			snprintf(err, sizeof(err), "cannot read %s: %s", path, strerror(e));
		tool_err("%s", err);
		return EXIT_FAIL;
	}
	a = parse_clients(f, path, err, sizeof(err));
	fclose(f);
	if (!a) {
		tool_err("%s", err);
		return EXIT_FAIL;
	}
	if (json) {
		o = json_object();
		json_object_set_new(o, "source", json_string(path));
		json_object_set_new(o, "clients", a);
		return tool_print_json(o) ? EXIT_FAIL : EXIT_OK;
	}
	printf("%8s %-16s %-6s %8s %14s  %s\n", "pid", "command", "state", "buffers", "pinned",
	       "bytes per node");
	for (size_t i = 0; i < json_array_size(a); i++) {
		const json_t *c = json_array_get(a, i), *nb = json_object_get(c, "node_bytes");

		printf("%8lld %-16s %-6s %8lld %14s ",
		       (long long)json_integer_value(json_object_get(c, "pid")),
		       json_string_value(json_object_get(c, "command")),
		       json_string_value(json_object_get(c, "state")),
		       (long long)json_integer_value(json_object_get(c, "buffers")),
		       tool_bytes((uint64_t)json_integer_value(json_object_get(c, "bytes")), b,
				  sizeof(b)));
		for (size_t k = 0; k < json_array_size(nb); k++)
			printf(" %lld", (long long)json_integer_value(json_array_get(nb, k)));
		printf("\n");
	}
	if (!json_array_size(a))
		printf("(no clients)\n");
	json_decref(a);
	return EXIT_OK;
}

/* --- arguments --------------------------------------------------------------- */

int driver_main(int argc, char **argv)
{
	enum { O_CLIENT = 256 };
	static const struct option opts[] = {
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ "client", required_argument, NULL, O_CLIENT },
		{ NULL, 0, NULL, 0 },
	};
	const char *sub, *client_arg = NULL;
	uint64_t limit, client = 0;
	int json = 0, help = 0, c, rc;
	int32_t node = HACCEL_NODE_ANY;

	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "jh", opts, NULL)) != -1) {
		switch (c) {
		case 'j':
			json = 1;
			break;
		case 'h':
			help = 1;
			break;
		case O_CLIENT:
			client_arg = optarg;
			break;
		default:
			tool_option_error("driver", argv, opts);
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	sub = tool_subcommand(argc, argv, "driver", "status, quota or clients", help, usage, &rc);
	if (!sub)
		return rc;
	if (client_arg && strcmp(sub, "quota")) {
		tool_err("driver %s: --client applies to quota set only", sub);
		return EXIT_USAGE;
	}
	if (!strcmp(sub, "status") || !strcmp(sub, "clients")) {
		if (optind < argc) {
			tool_err("unexpected argument '%s' (see haccel-ctl driver --help)", argv[optind]);
			return EXIT_USAGE;
		}
		return !strcmp(sub, "status") ? cmd_status(json) : cmd_clients(json);
	}
	if (strcmp(sub, "quota")) {
		tool_err("driver: unknown subcommand '%s' (status, quota or clients)", sub);
		return EXIT_USAGE;
	}
	if (optind >= argc || (strcmp(argv[optind], "get") && strcmp(argv[optind], "set"))) {
		tool_err("driver quota: missing or unknown action%s%s%s (get or set)",
			 optind < argc ? " '" : "", optind < argc ? argv[optind] : "",
			 optind < argc ? "'" : "");
		return EXIT_USAGE;
	}
	if (!strcmp(argv[optind++], "get")) {
		if (client_arg) {
			tool_err("driver quota get: --client applies to quota set only");
			return EXIT_USAGE;
		}
		if (optind < argc && parse_node(argv[optind++], 0, &node)) {
			tool_err("driver quota get: bad NODE '%s' (a node id)", argv[optind - 1]);
			return EXIT_USAGE;
		}
		if (optind < argc) {
			tool_err("unexpected argument '%s' (see haccel-ctl driver --help)", argv[optind]);
			return EXIT_USAGE;
		}
		return cmd_quota_get(node, json);
	}
	if (argc - optind != 2) {
		tool_err("driver quota set: want NODE and BYTES (haccel-ctl driver quota set 0 64G)");
		return EXIT_USAGE;
	}
	if (parse_node(argv[optind], 1, &node)) {
		tool_err("driver quota set: bad NODE '%s' (a node id, or all)", argv[optind]);
		return EXIT_USAGE;
	}
	if (parse_limit(argv[optind + 1], &limit)) {
		tool_err("driver quota set: bad BYTES '%s' (bytes with an optional K, M, G or T suffix, or unlimited)",
			 argv[optind + 1]);
		return EXIT_USAGE;
	}
	if (client_arg && parse_limit(client_arg, &client)) {
		tool_err("driver quota set: bad value '%s' for --client (bytes with an optional K, M, G or T suffix, or unlimited)",
			 client_arg);
		return EXIT_USAGE;
	}
	return cmd_quota_set(node, limit, client_arg != NULL, client, json);
}
