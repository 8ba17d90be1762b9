// SPDX-License-Identifier: MIT
/*
 * Probes for haccel-ctl doctor. Each probe fills one section of a JSON
 * report; the human output is rendered from the same report, so the two
 * never disagree. Probes never fail the command: what cannot be read is
 * reported as such.
 */
#include "config.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <linux/io_uring.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "common.h"
#include "doctor.h"
#include "driver.h"
#include "haccel.h"

static const char *sysfs_root(void)
{
	const char *r = getenv("HACCEL_SYSFS_ROOT");

	return r && *r ? r : "/sys";
}

static int read_sys(const char *rel, char *buf, size_t len)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", sysfs_root(), rel);
	return tool_read_file(path, buf, len);
}

/* --- io_uring ------------------------------------------------------------ */

static json_t *probe_io_uring(void)
{
	json_t *o = json_object();
	struct io_uring_params p;
	char buf[32];
	int fd, e = 0;

	if (tool_read_file("/proc/sys/kernel/io_uring_disabled", buf, sizeof(buf)) > 0)
		json_object_set_new(o, "sysctl_io_uring_disabled", json_integer(atoi(buf)));
	else
		json_object_set_new(o, "sysctl_io_uring_disabled", json_null());

	memset(&p, 0, sizeof(p));
	fd = (int)syscall(__NR_io_uring_setup, 2, &p);
	if (fd >= 0) {
		close(fd);
	} else {
		e = errno;
	}
	json_object_set_new(o, "allowed", json_boolean(fd >= 0));
	if (fd >= 0) {
		json_object_set_new(o, "error", json_null());
		json_object_set_new(o, "reason", json_string("io_uring_setup succeeded"));
	} else {
		const char *why;

		switch (e) {
		case ENOSYS:
			why = "kernel built without io_uring, or blocked by seccomp (ENOSYS)";
			break;
		case EPERM:
			why = "refused: kernel.io_uring_disabled or a seccomp/LSM policy (EPERM)";
			break;
		case ENOMEM:
			why = "refused for memory: RLIMIT_MEMLOCK too low on older kernels (ENOMEM)";
			break;
		default:
			why = strerror(e);
		}
		json_object_set_new(o, "error", json_string(haccel_status_name(-e)));
		json_object_set_new(o, "reason", json_string(why));
	}
	return o;
}

/* --- memlock ------------------------------------------------------------- */

static int has_cap(int bit)
{
	char buf[4096], *line;
	unsigned long long eff;

	if (tool_read_file("/proc/self/status", buf, sizeof(buf)) < 0)
		return 0;
	line = strstr(buf, "CapEff:");
	if (!line || sscanf(line + 7, "%llx", &eff) != 1)
		return 0;
	return (int)((eff >> bit) & 1);
}

static json_t *rlim_json(rlim_t v)
{
	return v == RLIM_INFINITY ? json_null() : json_integer((json_int_t)v);
}

static json_t *probe_memlock(void)
{
	json_t *o = json_object();
	struct rlimit rl;

	if (getrlimit(RLIMIT_MEMLOCK, &rl) == 0) {
		json_object_set_new(o, "soft", rlim_json(rl.rlim_cur));
		json_object_set_new(o, "hard", rlim_json(rl.rlim_max));
		json_object_set_new(o, "unlimited", json_boolean(rl.rlim_cur == RLIM_INFINITY));
	}
	json_object_set_new(o, "cap_ipc_lock", json_boolean(has_cap(14)));
	json_object_set_new(o, "cap_sys_nice", json_boolean(has_cap(23)));
	return o;
}

/* --- NUMA ---------------------------------------------------------------- */

static long long meminfo_kb(const char *text, const char *field)
{
	const char *p = strstr(text, field);
	long long kb;

	if (!p || sscanf(p + strlen(field), " %lld", &kb) != 1)
		return -1;
	return kb;
}

static int cmp_int(const void *a, const void *b)
{
	return *(const int *)a - *(const int *)b;
}

static json_t *probe_numa(void)
{
	json_t *o = json_object(), *nodes = json_array();
	char path[512], buf[8192];
	int ids[1024], n = 0;
	struct dirent *d;
	DIR *dir;

	snprintf(path, sizeof(path), "%s/devices/system/node", sysfs_root());
	json_object_set_new(o, "sysfs_root", json_string(sysfs_root()));
	dir = opendir(path);
	if (dir) {
		while ((d = readdir(dir)) && n < 1024) {
			char *end;
			long id;

			if (strncmp(d->d_name, "node", 4))
				continue;
			id = strtol(d->d_name + 4, &end, 10);
			if (end == d->d_name + 4 || *end || id < 0)
				continue;
			ids[n++] = (int)id;
		}
		closedir(dir);
	}
	qsort(ids, (size_t)n, sizeof(ids[0]), cmp_int);
	for (int i = 0; i < n; i++) {
		json_t *node = json_object();
		char rel[128];

		json_object_set_new(node, "id", json_integer(ids[i]));
		snprintf(rel, sizeof(rel), "devices/system/node/node%d/cpulist", ids[i]);
		json_object_set_new(node, "cpus", read_sys(rel, buf, sizeof(buf)) >= 0 ?
						  json_string(buf) : json_null());
		snprintf(rel, sizeof(rel), "devices/system/node/node%d/meminfo", ids[i]);
		if (read_sys(rel, buf, sizeof(buf)) > 0) {
			long long t = meminfo_kb(buf, "MemTotal:"), f = meminfo_kb(buf, "MemFree:");
			json_object_set_new(node, "mem_total", t >= 0 ? json_integer(t * 1024) : json_null());
			json_object_set_new(node, "mem_free", f >= 0 ? json_integer(f * 1024) : json_null());
		} else {
			json_object_set_new(node, "mem_total", json_null());
			json_object_set_new(node, "mem_free", json_null());
		}
		json_array_append_new(nodes, node);
	}
	json_object_set_new(o, "nodes", nodes);
	return o;
}

/* --- huge pages ---------------------------------------------------------- */

static json_t *probe_hugepages(void)
{
	json_t *o = json_object(), *pools = json_array();
	char path[512], buf[256];
	struct dirent *d;
	DIR *dir;

	if (read_sys("kernel/mm/transparent_hugepage/enabled", buf, sizeof(buf)) > 0) {
		/* "always [madvise] never": the bracketed word is the mode. */
		char *a = strchr(buf, '['), *b = a ? strchr(a, ']') : NULL;
		if (a && b) {
			*b = '\0';
			json_object_set_new(o, "thp", json_string(a + 1));
		} else {
			json_object_set_new(o, "thp", json_string(buf));
		}
	} else {
		json_object_set_new(o, "thp", json_null());
	}
	snprintf(path, sizeof(path), "%s/kernel/mm/hugepages", sysfs_root());
	dir = opendir(path);
	if (dir) {
		while ((d = readdir(dir))) {
			unsigned long long kb;
			char rel[300];
			json_t *p;

			if (sscanf(d->d_name, "hugepages-%llukB", &kb) != 1)
				continue;
			p = json_object();
			json_object_set_new(p, "size", json_integer((json_int_t)kb * 1024));
			snprintf(rel, sizeof(rel), "kernel/mm/hugepages/%s/nr_hugepages", d->d_name);
			json_object_set_new(p, "total", read_sys(rel, buf, sizeof(buf)) > 0 ?
						       json_integer(atoll(buf)) : json_null());
			snprintf(rel, sizeof(rel), "kernel/mm/hugepages/%s/free_hugepages", d->d_name);
			json_object_set_new(p, "free", read_sys(rel, buf, sizeof(buf)) > 0 ?
						      json_integer(atoll(buf)) : json_null());
			json_array_append_new(pools, p);
		}
		closedir(dir);
	}
	json_object_set_new(o, "pools", pools);
	return o;
}

/* --- CUDA driver (presence; the GPU backend comes later) ------------------ */

static json_t *probe_cuda(void)
{
	json_t *o = json_object(), *gpus = json_array();
	int (*cu_init)(unsigned int);
	int (*cu_count)(int *);
	int (*cu_version)(int *);
	int (*cu_get)(int *, int);
	int (*cu_name)(char *, int, int);
	int (*cu_bus)(char *, int, int);
	int (*cu_errname)(int, const char **);
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	int count = 0, ver = 0, r;

	json_object_set_new(o, "library", json_string("libcuda.so.1"));
	json_object_set_new(o, "driver", json_boolean(h != NULL));
	if (!h) {
		const char *e = dlerror();
		json_object_set_new(o, "error", json_string(e ? e : "not found"));
		json_object_set_new(o, "gpus", gpus);
		return o;
	}
	*(void **)&cu_init = dlsym(h, "cuInit");
	*(void **)&cu_count = dlsym(h, "cuDeviceGetCount");
	*(void **)&cu_version = dlsym(h, "cuDriverGetVersion");
	*(void **)&cu_get = dlsym(h, "cuDeviceGet");
	*(void **)&cu_name = dlsym(h, "cuDeviceGetName");
	*(void **)&cu_bus = dlsym(h, "cuDeviceGetPCIBusId");
	*(void **)&cu_errname = dlsym(h, "cuGetErrorName");
	if (!cu_init || !cu_count || !cu_version || !cu_get || !cu_name || !cu_bus) {
		json_object_set_new(o, "error", json_string("libcuda.so.1 lacks basic entry points"));
		goto out;
	}
	if (cu_version(&ver) == 0)
		json_object_set_new(o, "driver_version", json_integer(ver));
	r = cu_init(0);
	if (r == 0)
		r = cu_count(&count);
	if (r) {
		const char *name = NULL;
		if (cu_errname)
			cu_errname(r, &name);
		json_object_set_new(o, "error", json_string(name ? name : "cuInit failed"));
		goto out;
	}
	json_object_set_new(o, "error", json_null());
	for (int i = 0; i < count; i++) {
		json_t *g = json_object();
		char name[256] = "", bus[64] = "";
		int dev;

		if (cu_get(&dev, i) == 0) {
			cu_name(name, sizeof(name), dev);
			cu_bus(bus, sizeof(bus), dev);
		}
		json_object_set_new(g, "index", json_integer(i));
		json_object_set_new(g, "name", json_string(name));
		json_object_set_new(g, "pci_bus_id", json_string(bus));
		json_array_append_new(gpus, g);
	}
out:
	json_object_set_new(o, "gpus", gpus);
	dlclose(h);
	return o;
}

/* --- NCCL ------------------------------------------------------------------ */

static json_t *probe_nccl(void)
{
	struct haccel_nccl_info info;
	struct haccel_ctx *ctx;
	json_t *o = json_object();

	if (haccel_open(NULL, &ctx)) {
		json_object_set_new(o, "error", json_string("cannot open libhaccel"));
		return o;
	}
	if (haccel_nccl_info(ctx, &info) == 0) {
		json_object_set_new(o, "version", json_integer(info.version));
		json_object_set_new(o, "path", json_string(info.path));
	} else {
		json_object_set_new(o, "version", json_null());
		json_object_set_new(o, "error", json_string(info.reason));
	}
	haccel_close(ctx);
	return o;
}

/* --- haccel.ko ------------------------------------------------------------ */

/*
 * Where modprobe would find haccel.ko for the running kernel: its line in
 * <modules root>/<release>/modules.dep (DKMS installs to updates/dkms/),
 * or NULL when it is not installed. HACCEL_MODULES_ROOT (default
 * /lib/modules) lets tests point at a fixture tree.
 */
static json_t *driver_installed(void)
{
	const char *root = getenv("HACCEL_MODULES_ROOT");
	char path[512], line[1024];
	struct utsname u;
	json_t *found = json_null();
	FILE *f;

	if (uname(&u))
		return found;
	snprintf(path, sizeof(path), "%s/%s/modules.dep", root && *root ? root : "/lib/modules",
		 u.release);
	f = fopen(path, "re");
	if (!f)
		return found;
	while (fgets(line, sizeof(line), f)) {
		char *colon = strchr(line, ':'), *base;

		if (!colon)
			continue;
		*colon = '\0';
		base = strrchr(line, '/');
		base = base ? base + 1 : line;
		if (!strncmp(base, "haccel.ko", 9)) {
			json_decref(found);
			found = json_string(line);
			break;
		}
	}
	fclose(f);
	return found;
}

/*
 * The library's own probe (tools/driver.c, the one `haccel-ctl driver
 * status` prints and that picks the pinning provider), plus whether the
 * module is installed for the running kernel when it is not loaded.
 */
static json_t *probe_driver(void)
{
	json_t *o = driver_probe_json();

	if (!o)
		o = json_object();
	json_object_set_new(o, "installed", driver_installed());
	return o;
}

json_t *doctor_probe(void)
{
	json_t *r = json_object();
	struct utsname u;

	if (!r)
		return NULL;
	json_object_set_new(r, "haccel_version", json_string(haccel_version_string()));
	if (uname(&u) == 0) {
		json_t *k = json_object();
		json_object_set_new(k, "release", json_string(u.release));
		json_object_set_new(k, "machine", json_string(u.machine));
		json_object_set_new(r, "kernel", k);
	}
	json_object_set_new(r, "cpus_online", json_integer(sysconf(_SC_NPROCESSORS_ONLN)));
	json_object_set_new(r, "io_uring", probe_io_uring());
	json_object_set_new(r, "memlock", probe_memlock());
	json_object_set_new(r, "numa", probe_numa());
	json_object_set_new(r, "hugepages", probe_hugepages());
	json_object_set_new(r, "cuda", probe_cuda());
	json_object_set_new(r, "nccl", probe_nccl());
	json_object_set_new(r, "driver", probe_driver());
	return r;
}

/* --- human output --------------------------------------------------------- */

static const char *str_or(const json_t *v, const char *dflt)
{
	return json_is_string(v) ? json_string_value(v) : dflt;
}

static void line(const char *what, const char *state, const char *detail)
{
	printf("  %-10s %-8s %s\n", what, state, detail);
}

void doctor_print(const json_t *r)
{
	const json_t *s, *v;
	char d[512], b1[32], b2[32];

	printf("haccel %s node report\n", str_or(json_object_get(r, "haccel_version"), "?"));
	s = json_object_get(r, "kernel");
	snprintf(d, sizeof(d), "Linux %s (%s), %lld CPUs online",
		 str_or(json_object_get(s, "release"), "?"),
		 str_or(json_object_get(s, "machine"), "?"),
		 (long long)json_integer_value(json_object_get(r, "cpus_online")));
	line("system", "", d);

	s = json_object_get(r, "io_uring");
	v = json_object_get(s, "sysctl_io_uring_disabled");
	snprintf(d, sizeof(d), "%s%s%s", str_or(json_object_get(s, "reason"), ""),
		 json_is_integer(v) ? "; kernel.io_uring_disabled=" : "",
		 json_is_integer(v) ? (json_integer_value(v) ? (json_integer_value(v) == 1 ? "1" : "2") : "0") : "");
	line("io_uring", json_is_true(json_object_get(s, "allowed")) ? "ok" : "refused", d);

	s = json_object_get(r, "memlock");
	if (json_is_true(json_object_get(s, "unlimited")))
		snprintf(d, sizeof(d), "RLIMIT_MEMLOCK unlimited");
	else
		snprintf(d, sizeof(d), "RLIMIT_MEMLOCK %s (hard %s)",
			 tool_bytes((uint64_t)json_integer_value(json_object_get(s, "soft")), b1, sizeof(b1)),
			 json_is_null(json_object_get(s, "hard")) ? "unlimited" :
			 tool_bytes((uint64_t)json_integer_value(json_object_get(s, "hard")), b2, sizeof(b2)));
	snprintf(d + strlen(d), sizeof(d) - strlen(d), "; CAP_IPC_LOCK %s, CAP_SYS_NICE %s",
		 json_is_true(json_object_get(s, "cap_ipc_lock")) ? "yes" : "no",
		 json_is_true(json_object_get(s, "cap_sys_nice")) ? "yes" : "no");
	line("memlock", json_is_true(json_object_get(s, "unlimited")) ||
			json_is_true(json_object_get(s, "cap_ipc_lock")) ? "ok" : "limited", d);

	s = json_object_get(json_object_get(r, "numa"), "nodes");
	if (!json_array_size(s))
		line("numa", "unknown", "no nodes under sysfs devices/system/node");
	for (size_t i = 0; i < json_array_size(s); i++) {
		const json_t *n = json_array_get(s, i);
		snprintf(d, sizeof(d), "node %lld: CPUs %s, %s total, %s free",
			 (long long)json_integer_value(json_object_get(n, "id")),
			 str_or(json_object_get(n, "cpus"), "?"),
			 tool_bytes((uint64_t)json_integer_value(json_object_get(n, "mem_total")), b1, sizeof(b1)),
			 tool_bytes((uint64_t)json_integer_value(json_object_get(n, "mem_free")), b2, sizeof(b2)));
		line(i ? "" : "numa", i ? "" : "ok", d);
	}

	s = json_object_get(r, "hugepages");
	snprintf(d, sizeof(d), "THP %s", str_or(json_object_get(s, "thp"), "unavailable"));
	v = json_object_get(s, "pools");
	for (size_t i = 0; i < json_array_size(v); i++) {
		const json_t *p = json_array_get(v, i);
		snprintf(d + strlen(d), sizeof(d) - strlen(d), "; %s pages: %lld reserved, %lld free",
			 tool_bytes((uint64_t)json_integer_value(json_object_get(p, "size")), b1, sizeof(b1)),
			 (long long)json_integer_value(json_object_get(p, "total")),
			 (long long)json_integer_value(json_object_get(p, "free")));
	}
	line("hugepages", "", d);

	s = json_object_get(r, "cuda");
	if (!json_is_true(json_object_get(s, "driver"))) {
		line("cuda", "absent", "no libcuda.so.1: CPU backend only");
	} else {
		v = json_object_get(s, "gpus");
		if (!json_is_null(json_object_get(s, "error")))
			snprintf(d, sizeof(d), "driver %lld present, no usable GPU (%s)",
				 (long long)json_integer_value(json_object_get(s, "driver_version")),
				 str_or(json_object_get(s, "error"), "?"));
		else
			snprintf(d, sizeof(d), "driver %lld, %zu GPU(s)",
				 (long long)json_integer_value(json_object_get(s, "driver_version")),
				 json_array_size(v));
		line("cuda", json_array_size(v) ? "ok" : "no GPU", d);
		for (size_t i = 0; i < json_array_size(v); i++) {
			const json_t *g = json_array_get(v, i);
			snprintf(d, sizeof(d), "GPU %lld: %s at %s",
				 (long long)json_integer_value(json_object_get(g, "index")),
				 str_or(json_object_get(g, "name"), "?"),
				 str_or(json_object_get(g, "pci_bus_id"), "?"));
			line("", "", d);
		}
	}

	s = json_object_get(r, "nccl");
	if (json_is_integer(json_object_get(s, "version"))) {
		long long nv = json_integer_value(json_object_get(s, "version"));
		snprintf(d, sizeof(d), "NCCL %lld.%lld.%lld at %s", nv / 10000, nv / 100 % 100, nv % 100,
			 str_or(json_object_get(s, "path"), "?"));
		line("nccl", "ok", d);
	} else {
		line("nccl", "absent", str_or(json_object_get(s, "error"), "?"));
	}

	s = json_object_get(r, "driver");
	v = json_object_get(s, "uapi");
	if (json_is_true(json_object_get(s, "usable")))
		snprintf(d, sizeof(d), "haccel.ko loaded, render node %s, ABI %s (library %s): pinned memory is brokered node-wide",
			 str_or(json_object_get(s, "render_node"), "?"),
			 str_or(json_object_get(v, "driver"), "?"),
			 str_or(json_object_get(v, "library"), "?"));
	else if (json_is_true(json_object_get(s, "loaded")))
		snprintf(d, sizeof(d), "haccel.ko loaded, render node %s, not usable: %s",
			 str_or(json_object_get(s, "render_node"), "not found"),
			 str_or(json_object_get(s, "reason"), "?"));
	else if (json_is_string(json_object_get(s, "installed")))
		snprintf(d, sizeof(d), "haccel.ko installed (%s) but not loaded (modprobe haccel): pinned memory is managed per process",
			 json_string_value(json_object_get(s, "installed")));
	else
		snprintf(d, sizeof(d), "haccel.ko not installed: pinned memory is managed per process");
	line("driver", json_is_true(json_object_get(s, "usable")) ? "ok" :
		       json_is_true(json_object_get(s, "loaded")) ? "unusable" :
		       json_is_string(json_object_get(s, "installed")) ? "installed" : "absent", d);
}
