// SPDX-License-Identifier: MIT
/* haccel-ctl driver status, quota get/set and clients against the loaded haccel.ko, with and without --json; quota set refused for an unprivileged user; clients when debugfs is not mounted or not readable; doctor agrees with status. */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "haccel.h"
#include "test-util.h"
#include "driver-util.h"

#define MIB (1ull << 20)
#define NOBODY 65534

static struct tool_result r;

/* Run haccel-ctl with the NULL-terminated arguments, as uid (or as we are
 * when uid is 0); keeps stdout and stderr like tool_run. */
static void ctl_as(uid_t uid, ...)
{
	const char *tool = getenv("HACCEL_CTL");
	const char *argv[32];
	va_list ap;

	if (!tool && getenv("HACCEL_VM_GUEST")) {
		ktap_fail_at(__FILE__, __LINE__, "HACCEL_CTL not set in the guest");
		ktap_end();
	}
	if (!tool)
		ktap_skip("HACCEL_CTL not set");
	va_start(ap, uid);
	tool_argv(argv, tool, ap);
	va_end(ap);
	tool_run_argv(&r, argv, uid);
	if (r.status == 126)
		ktap_fail_at(__FILE__, __LINE__, "cannot become uid %u", (unsigned int)uid);
}

#define ctl(...) ctl_as(0, __VA_ARGS__)

static json_t *parse(void)
{
	json_error_t e;
	json_t *j = json_loads(r.out, 0, &e);

	if (!j)
		ktap_fail_at(__FILE__, __LINE__, "not JSON (%s): %.300s", e.text, r.out);
	return j;
}

#define EXPECT_OUT(s)                                                         \
	do {                                                                  \
		if (!strstr(r.out, s))                                        \
			ktap_fail_at(__FILE__, __LINE__, "stdout lacks \"%s\": %s", s, r.out); \
	} while (0)
#define EXPECT_ERR(s)                                                         \
	do {                                                                  \
		if (!strstr(r.err, s))                                        \
			ktap_fail_at(__FILE__, __LINE__, "stderr lacks \"%s\": %s", s, r.err); \
	} while (0)

static long long jint(const json_t *o, const char *k)
{
	return json_integer_value(json_object_get(o, k));
}

static const char *jstr(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	return s ? s : "";
}

static struct hd_quotas saved;
static int saved_fd = -1;

static void restore_quotas(void)
{
	if (saved_fd >= 0)
		hd_quotas_restore(saved_fd, &saved);
	saved_fd = -1;
}

static void save_quotas(int fd)
{
	hd_quotas_save(fd, &saved);
	saved_fd = fd;
	atexit(restore_quotas);
}

static void status_text_and_json(void)
{
	int fd = hd_open();
	unsigned int n = hd_num_nodes(fd);
	char *mem = hd_alloc(MIB, 0);
	struct drm_haccel_quota q;
	struct hd_stats st;
	json_t *j, *nodes, *caps;
	uint32_t h;

	KTAP_ASSERT_EQ(hd_pin(fd, mem, MIB, 0, 0, &h), 0);
	ctl("driver", "status", NULL);
	ktap_diag("%s", r.out);
	KTAP_EXPECT_EQ(r.status, 0);
	EXPECT_OUT("haccel.ko      loaded, render node /dev/dri/renderD");
	EXPECT_OUT("driver 1.0 (serves userspace from 1.0), library 1.0: compatible");
	EXPECT_OUT("pin_strict_node prime_export prime_mmap client_quota");
	EXPECT_OUT("through haccel.ko (provider driver)");
	EXPECT_OUT("node online");
	KTAP_EXPECT_EQ(r.err[0], '\0');

	hd_stats(fd, &st);
	ctl("--json", "driver", "status", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	j = parse();
	KTAP_ASSERT(j);
	KTAP_EXPECT(json_is_true(json_object_get(j, "loaded")));
	KTAP_EXPECT(json_is_true(json_object_get(j, "usable")));
	KTAP_EXPECT(!strncmp(jstr(j, "render_node"), "/dev/dri/renderD", 16));
	KTAP_EXPECT(!strcmp(jstr(json_object_get(j, "uapi"), "driver"), "1.0"));
	KTAP_EXPECT(!strcmp(jstr(json_object_get(j, "uapi"), "library"), "1.0"));
	KTAP_EXPECT(json_is_true(json_object_get(json_object_get(j, "uapi"), "compatible")));
	caps = json_object_get(j, "caps");
	KTAP_EXPECT_EQ(json_array_size(caps), 4);
	KTAP_EXPECT_EQ(jint(j, "caps_mask"), hd_param(fd, HACCEL_PARAM_CAPS));
	KTAP_EXPECT(!strcmp(jstr(j, "provider"), "driver"));
	KTAP_EXPECT(json_is_null(json_object_get(j, "reason")));
	KTAP_EXPECT_EQ(jint(j, "pinned_bytes"), st.s.node_total);
	KTAP_EXPECT_EQ(jint(j, "process_bytes"), 0);
	KTAP_EXPECT_EQ(jint(j, "buffers"), st.s.node_bos);
	nodes = json_object_get(j, "nodes");
	KTAP_ASSERT_EQ(json_array_size(nodes), n);
	for (unsigned int k = 0; k < n; k++) {
		json_t *o = json_array_get(nodes, k);

		KTAP_EXPECT_EQ(jint(o, "node"), k);
		KTAP_EXPECT_EQ(jint(o, "pinned_bytes"), st.node[k]);
		KTAP_ASSERT_EQ(hd_quota_get(fd, k, &q), 0);
		KTAP_EXPECT(json_is_true(json_object_get(o, "online")));
		KTAP_EXPECT_EQ(jint(o, "node_limit"), q.node_limit);
		KTAP_EXPECT_EQ(jint(o, "client_limit"), q.client_limit);
	}
	KTAP_EXPECT(jint(json_array_get(nodes, 0), "pinned_bytes") >= (long long)MIB);
	json_decref(j);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
}

static void quota_get_and_set(void)
{
	int fd = hd_open();
	unsigned int n = hd_num_nodes(fd);
	struct drm_haccel_quota q0, q;
	json_t *j;
	char bad[16];

	save_quotas(fd);
	KTAP_ASSERT_EQ(hd_quota_get(fd, 0, &q0), 0);
	ctl("driver", "quota", "get", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	EXPECT_OUT("node 0: node-wide limit ");
	if (n > 1)
		EXPECT_OUT("node 1: node-wide limit ");
	ctl("driver", "quota", "get", "0", "--json", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	j = parse();
	KTAP_ASSERT(j);
	KTAP_ASSERT_EQ(json_array_size(json_object_get(j, "nodes")), 1);
	KTAP_EXPECT_EQ(jint(json_array_get(json_object_get(j, "nodes"), 0), "node_limit"),
		       q0.node_limit);
	json_decref(j);

	/* Set the node-wide limit; the client limit stays. */
	ctl("driver", "quota", "set", "0", "64M", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	EXPECT_OUT("node 0: node-wide limit 64.0 MiB");
	KTAP_ASSERT_EQ(hd_quota_get(fd, 0, &q), 0);
	KTAP_EXPECT_EQ(q.node_limit, 64 * MIB);
	KTAP_EXPECT_EQ(q.client_limit, q0.client_limit);

	ctl("--json", "driver", "quota", "set", "0", "unlimited", "--client", "32M", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	j = parse();
	KTAP_ASSERT(j);
	KTAP_EXPECT(json_is_null(json_object_get(json_array_get(json_object_get(j, "nodes"), 0),
						 "node_limit")));
	KTAP_EXPECT_EQ(jint(json_array_get(json_object_get(j, "nodes"), 0), "client_limit"), 32 * MIB);
	json_decref(j);
	KTAP_ASSERT_EQ(hd_quota_get(fd, 0, &q), 0);
	KTAP_EXPECT_EQ(q.node_limit, HACCEL_QUOTA_UNLIMITED);
	KTAP_EXPECT_EQ(q.client_limit, 32 * MIB);

	ctl("driver", "quota", "set", "all", "100M", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	for (unsigned int k = 0; k < n; k++) {
		KTAP_ASSERT_EQ(hd_quota_get(fd, k, &q), 0);
		KTAP_EXPECT_EQ(q.node_limit, 100 * MIB);
	}
	snprintf(bad, sizeof(bad), "%u", n + 3);
	ctl("driver", "quota", "set", bad, "1G", NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	EXPECT_ERR("not online");
	ctl("driver", "quota", "get", bad, NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	ctl("driver", "quota", "set", "0", "lots", NULL);
	KTAP_EXPECT_EQ(r.status, 2);
	restore_quotas();
}

/* The file mode of the render node, changed and restored. */
static char node_path[64];
static mode_t node_mode;

static void restore_mode(void)
{
	if (node_path[0])
		chmod(node_path, node_mode);
}

static void quota_set_unprivileged(void)
{
	int fd = hd_open();
	struct haccel_driver_info di = { .size = sizeof(di) };
	struct haccel_ctx *ctx = hl_ctx();
	struct drm_haccel_quota q0, q;
	struct stat sb;

	KTAP_ASSERT_EQ(haccel_driver_info(ctx, &di), 0);
	haccel_close(ctx);
	KTAP_ASSERT_EQ(stat(di.render_node, &sb), 0);
	KTAP_ASSERT_EQ(hd_quota_get(fd, 0, &q0), 0);

	/* devtmpfs makes the node 0600 root: nobody cannot even open it. */
	KTAP_ASSERT_EQ(chmod(di.render_node, 0600), 0);
	snprintf(node_path, sizeof(node_path), "%s", di.render_node);
	node_mode = sb.st_mode & 07777;
	atexit(restore_mode);
	ctl_as(NOBODY, "driver", "quota", "set", "0", "1G", NULL);
	ktap_diag("as nobody, node 0600: %s", r.err);
	KTAP_EXPECT_EQ(r.status, 1);
	EXPECT_ERR("Permission denied");
	EXPECT_ERR("group render");
	ctl_as(NOBODY, "driver", "status", NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	EXPECT_OUT("loaded, not usable by this process");
	EXPECT_OUT("with mlock (provider user)");

	/* Open to everyone (as a render group would be): reading works,
	 * changing needs CAP_SYS_ADMIN. */
	KTAP_ASSERT_EQ(chmod(di.render_node, 0666), 0);
	ctl_as(NOBODY, "driver", "quota", "get", "0", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	EXPECT_OUT("node 0: node-wide limit");
	ctl_as(NOBODY, "driver", "quota", "set", "0", "1G", NULL);
	ktap_diag("as nobody, node 0666: %s", r.err);
	KTAP_EXPECT_EQ(r.status, 1);
	EXPECT_ERR("needs CAP_SYS_ADMIN");
	ctl_as(NOBODY, "--json", "driver", "quota", "set", "0", "1G", NULL);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT_EQ(r.out[0], '\0');
	KTAP_ASSERT_EQ(hd_quota_get(fd, 0, &q), 0);
	KTAP_EXPECT_EQ(q.node_limit, q0.node_limit);
	KTAP_EXPECT_EQ(q.client_limit, q0.client_limit);
	/* debugfs is root's only. */
	ctl_as(NOBODY, "driver", "clients", NULL);
	ktap_diag("as nobody: %s", r.err);
	KTAP_EXPECT_EQ(r.status, 1);
	EXPECT_ERR("debugfs is readable by root only");
	restore_mode();
	node_path[0] = '\0';
}

static void clients_text_and_json(void)
{
	int fd = hd_open();
	char *mem = hd_alloc(2 * MIB, -1), pid[16];
	json_t *j, *a, *me = NULL;
	uint32_t h;

	KTAP_ASSERT_EQ(hd_pin(fd, mem, 2 * MIB, HACCEL_DRM_NODE_ANY, 0, &h), 0);
	snprintf(pid, sizeof(pid), "%d", (int)getpid());
	ctl("driver", "clients", NULL);
	ktap_diag("%s", r.out);
	KTAP_EXPECT_EQ(r.status, 0);
	EXPECT_OUT("command");
	EXPECT_OUT(pid);
	EXPECT_OUT("driver-lib-ctl");
	ctl("driver", "clients", "--json", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	j = parse();
	KTAP_ASSERT(j);
	KTAP_EXPECT(!strcmp(jstr(j, "source"), "/sys/kernel/debug/haccel/clients"));
	a = json_object_get(j, "clients");
	for (size_t i = 0; i < json_array_size(a); i++)
		if (jint(json_array_get(a, i), "pid") == getpid())
			me = json_array_get(a, i);
	KTAP_ASSERT(me != NULL);
	KTAP_EXPECT(!strcmp(jstr(me, "command"), "driver-lib-ctl"));
	KTAP_EXPECT(!strcmp(jstr(me, "state"), "open"));
	KTAP_EXPECT_EQ(jint(me, "buffers"), 1);
	KTAP_EXPECT_EQ(jint(me, "bytes"), 2 * MIB);
	KTAP_EXPECT_EQ(json_array_size(json_object_get(me, "node_bytes")), hd_num_nodes(fd));
	json_decref(j);
	KTAP_EXPECT_EQ(hd_close_handle(fd, h), 0);
}

static void remount_debugfs(void)
{
	mount("debugfs", "/sys/kernel/debug", "debugfs", 0, NULL);
}

static void clients_without_debugfs(void)
{
	close(hd_open());
	if (umount2("/sys/kernel/debug", 0))
		ktap_skip("cannot unmount debugfs: %s", strerror(errno));
	atexit(remount_debugfs);
	ctl("driver", "clients", NULL);
	ktap_diag("%s", r.err);
	KTAP_EXPECT_EQ(r.status, 1);
	EXPECT_ERR("debugfs is not mounted at /sys/kernel/debug");
	EXPECT_ERR("mount -t debugfs");
	KTAP_ASSERT_EQ(mount("debugfs", "/sys/kernel/debug", "debugfs", 0, NULL), 0);
	ctl("driver", "clients", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
}

/* doctor reports the same probe as status. */
static void doctor_agrees_with_status(void)
{
	json_t *s, *d, *dd;
	const char *keys[] = { "loaded", "usable", "render_node", "uapi", "caps", "provider",
			       "reason" };

	close(hd_open());
	ctl("--json", "driver", "status", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	s = parse();
	ctl("--json", "doctor", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	d = parse();
	KTAP_ASSERT(s && d);
	dd = json_object_get(d, "driver");
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		if (!json_equal(json_object_get(s, keys[k]), json_object_get(dd, keys[k])))
			ktap_fail_at(__FILE__, __LINE__, "doctor and status differ on %s", keys[k]);
	ctl("doctor", NULL);
	EXPECT_OUT("haccel.ko loaded, render node /dev/dri/renderD");
	EXPECT_OUT("ABI 1.0 (library 1.0)");
	json_decref(s);
	json_decref(d);
}

static const struct ktap_case cases[] = {
	KTAP_CASE(status_text_and_json),
	KTAP_CASE(quota_get_and_set),
	KTAP_CASE(quota_set_unprivileged),
	KTAP_CASE(clients_text_and_json),
	KTAP_CASE(clients_without_debugfs),
	KTAP_CASE(doctor_agrees_with_status),
};

int main(int argc, char **argv)
{
	unsetenv("HACCEL_HOSTMEM_PROVIDER");
	return KTAP_MAIN(argc, argv, cases);
}
