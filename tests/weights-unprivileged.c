// SPDX-License-Identifier: MIT
/* Loading as an ordinary user: a file it may not write has unknown page-cache residency (direct reads, not mincore's "all cached"), staging it may not pin or register with io_uring fails loudly unless the caller allowed the fallback, and haccel-ctl weights verify and haccel-bench stream take --allow-unpinned. */
#include "config.h"

#include <errno.h>
#include <grp.h>
#include <jansson.h>
#include <liburing.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "st-writer.h"

#define NOBODY 65534
/*
 * Below any staging the tests ask for (2 MiB and more), above what the
 * io_uring rings take. Rings and registered buffers count against the
 * limit per user, and the kernel releases a ring's share only some time
 * after it is closed, possibly after the process that made it exited: a
 * tight limit would refuse the ring itself, not the buffers.
 */
#define MEMLOCK_LIMIT (256u << 10)

static char *dir;
static char path[ST_PATH];
static struct tool_result r;

/* Odd sizes, nothing aligned; about 1.3 MiB in all. */
static struct st_tensor tensors[] = {
	ST_T("a", "U8", 0, 0, 1048576 + 3),
	ST_T("b", "BF16", 0, 0, 3, 50001),
	ST_T("c", "F32", 0, 0, 7),
};
#define N_TENSORS (sizeof(tensors) / sizeof(tensors[0]))

/* Page-cache residency of path as cachestat(2) says, or -errno. */
static double cachestat_fraction(const char *p)
{
	struct { uint64_t off, len; } range = { 0, 0 };
	struct { uint64_t nr_cache, nr_dirty, nr_writeback, nr_evicted, nr_recently_evicted; } cs;
	struct stat sb;
	int fd = open(p, O_RDONLY | O_CLOEXEC), e;
	long ret;

	if (fd < 0)
		return -errno;
	memset(&cs, 0, sizeof(cs));
	ret = syscall(451, (unsigned int)fd, &range, &cs, 0u);
	e = errno;
	KTAP_ASSERT(fstat(fd, &sb) == 0);
	close(fd);
	if (ret)
		return -e;
	return (double)cs.nr_cache / (double)((sb.st_size + 4095) / 4096);
}

/* Page-cache residency through mincore (truthful for its owner). */
static double mincore_fraction(const char *p)
{
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	struct stat sb;
	unsigned char *vec;
	uint64_t pages, res = 0;
	void *m;

	KTAP_ASSERT(fd >= 0 && fstat(fd, &sb) == 0);
	pages = ((uint64_t)sb.st_size + 4095) / 4096;
	m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_SHARED, fd, 0);
	KTAP_ASSERT(m != MAP_FAILED);
	vec = malloc(pages);
	KTAP_ASSERT(vec && mincore(m, (size_t)sb.st_size, vec) == 0);
	for (uint64_t i = 0; i < pages; i++)
		res += vec[i] & 1;
	free(vec);
	munmap(m, (size_t)sb.st_size);
	close(fd);
	return (double)res / (double)pages;
}

/*
 * The checkpoint, in a directory beside the build (a real disk, for
 * O_DIRECT) that the user nobody can read, written by this user (root:
 * owned by root, mode 0644) and dropped from the page cache.
 */
static void setup(int need_root, const char *tool_env)
{
	struct st_spec s = { .tensors = tensors, .n = N_TENSORS };
	double left;
	int fd;

	if (need_root && geteuid() != 0)
		ktap_skip("needs root, to become another user with setresuid()");
	if (tool_env && !getenv(tool_env))
		ktap_skip("%s not set: run through make check", tool_env);
	dir = strdup("./haccel-unpriv-XXXXXX");
	KTAP_ASSERT(dir && mkdtemp(dir));
	KTAP_ASSERT(chmod(dir, 0755) == 0);
	st_pack(tensors, N_TENSORS);
	st_write(st_join(path, dir, "model.safetensors"), &s);
	KTAP_ASSERT(chmod(path, 0644) == 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	KTAP_ASSERT(fd >= 0);
	KTAP_ASSERT(fsync(fd) == 0);
	KTAP_ASSERT(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
	close(fd);
	left = mincore_fraction(path);
	if (left > 0.1) {
		KTAP_EXPECT_EQ(test_rmtree(dir), 0);
		ktap_skip("the file stays in the page cache (%.0f%%) after POSIX_FADV_DONTNEED", 100 * left);
	}
}

static void cleanup(void)
{
	st_rmtree(dir);
}

/*
 * Run fn in a child that is an ordinary user: nobody when this is root
 * (as_nobody; root's CAP_IPC_LOCK would ignore any limit), with
 * RLIMIT_MEMLOCK at MEMLOCK_LIMIT when limit. Returns the child's KTAP exit code;
 * its checks print their own failures.
 */
static int in_child(void (*fn)(void), int as_nobody, int limit)
{
	int status;
	pid_t pid;

	fflush(stdout);
	pid = fork();
	KTAP_ASSERT(pid >= 0);
	if (pid == 0) {
		if (as_nobody && geteuid() == 0) {
			if (setgroups(0, NULL) || setresgid(NOBODY, NOBODY, NOBODY) ||
			    setresuid(NOBODY, NOBODY, NOBODY))
				ktap_skip("cannot become user %d: %s", NOBODY, strerror(errno));
			/* A changed uid makes the process undumpable, and
			 * LeakSanitizer could not inspect it at exit. */
			prctl(PR_SET_DUMPABLE, 1);
		}
		if (limit) {
			struct rlimit rl = { MEMLOCK_LIMIT, MEMLOCK_LIMIT };

			KTAP_ASSERT(setrlimit(RLIMIT_MEMLOCK, &rl) == 0);
		}
		fn();
		ktap_end();
	}
	KTAP_ASSERT(waitpid(pid, &status, 0) == pid);
	if (!WIFEXITED(status)) {
		ktap_fail_at(__FILE__, __LINE__, "the child ended by signal %d", WTERMSIG(status));
		return KTAP_EXIT_FAIL;
	}
	if (WEXITSTATUS(status) == KTAP_EXIT_FAIL)
		ktap_fail_at(__FILE__, __LINE__, "the checks in the child failed (above)");
	return WEXITSTATUS(status);
}

/* The child's result is the case's: a skip there (its reason already sent
 * to the harness) is a skip here, after cleaning up. */
static void finish(int child)
{
	cleanup();
	if (child == KTAP_EXIT_SKIP) {
		fflush(stdout);
		exit(KTAP_EXIT_SKIP);
	}
}

static struct haccel_load_stats st;

/* Load the checkpoint into host memory; returns the status, checks the
 * bytes on success. */
static int load(struct haccel_weights *w, uint32_t flags, uint32_t hostmem_flags,
		uint32_t chunk)
{
	struct haccel_weights_info info;
	struct haccel_load_params p;
	struct haccel_host_sink sink;
	uint8_t *dest;
	int ret;

	haccel_weights_info(w, &info);
	dest = calloc(1, info.dest_bytes);
	KTAP_ASSERT(dest != NULL);
	haccel_load_params_init(&p);
	p.flags = flags;
	p.hostmem_flags = hostmem_flags;
	p.queue_depth = 1; /* two staging buffers */
	p.chunk_bytes = chunk;
	p.threads = 2;
	haccel_host_sink_init(&sink, dest, info.dest_bytes);
	memset(&st, 0, sizeof(st));
	ret = haccel_load(w, &p, &sink.sink, &st);
	for (uint32_t i = 0; !ret && i < info.n_tensors; i++) {
		struct haccel_tensor_info t;

		haccel_weights_tensor(w, i, &t);
		for (uint64_t k = 0; k < t.bytes; k++)
			if (dest[t.dest_offset + k] != st_data_byte(tensors[i].begin + k)) {
				ktap_fail_at(__FILE__, __LINE__, "tensor %s byte %llu wrong", t.name,
					     (unsigned long long)k);
				break;
			}
	}
	free(dest);
	return ret;
}

/* As nobody: cachestat refused (or missing) and mincore lying, the cold
 * file must still be read direct, and the log says why at info level. */
static void child_residency(void)
{
	struct log_cap lc;
	struct haccel_ctx *ctx = cap_ctx(&lc);
	struct haccel_weights *w = ST_OPEN(ctx, path);
	double cs = cachestat_fraction(path);

	ktap_diag("as user %d: cachestat %s, mincore says %.0f%% cached", (int)geteuid(),
		  cs < 0 ? strerror((int)-cs) : "works", 100 * mincore_fraction(path));
	KTAP_ASSERT_EQ(load(w, 0, 0, 64 << 10), 0);
	KTAP_EXPECT_EQ(st.direct, 1);
	if (cs < 0)
		KTAP_EXPECT_EQ(cap_count(&lc, HACCEL_LOG_INFO, "residency unknown"), 1);
	haccel_weights_close(w);
	haccel_close(ctx);
}

static void t_residency_unknown_means_direct(void)
{
	setup(1, NULL);
	finish(in_child(child_residency, 1, 0));
}

/*
 * Wait until this user may make an io_uring ring under the limit again:
 * rings of its earlier processes (the cases before) still count until the
 * kernel has torn them down.
 */
static void wait_for_ring(void)
{
	struct io_uring ring;
	int ret = 0;

	for (int i = 0; i < 60; i++) {
		ret = io_uring_queue_init(1, &ring, 0);
		if (ret == 0) {
			io_uring_queue_exit(&ring);
			return;
		}
		if (ret != -ENOMEM)
			break;
		usleep(50000);
	}
	ktap_skip("io_uring refused here (%s): nothing to register", strerror(-ret));
}

static void child_registration(void)
{
	struct log_cap lc;
	struct haccel_ctx *ctx = cap_ctx(&lc);
	struct haccel_weights *w = ST_OPEN(ctx, path);
	struct haccel_hostmem_stats hs0, hs1;
	char err[1024];
	int ret;

	wait_for_ring();

	/* Not allowed to fall back: the lock fails, and says what to do. */
	ret = load(w, HACCEL_LOAD_DIRECT, 0, 1 << 20);
	haccel_last_error(ctx, err, sizeof(err));
	ktap_diag("%s", err);
	KTAP_EXPECT_EQ(ret, -EPERM);
	KTAP_EXPECT(strstr(err, "staging buffers") && strstr(err, "cannot lock"));
	KTAP_EXPECT(strstr(err, "HACCEL_HOSTMEM_ALLOW_UNPINNED") != NULL);

	/* Unpinned allowed, registration refused: an error that names it. */
	haccel_hostmem_stats(ctx, &hs0);
	lc.n = 0;
	ret = load(w, HACCEL_LOAD_DIRECT, HACCEL_HOSTMEM_ALLOW_UNPINNED, 1 << 20);
	haccel_hostmem_stats(ctx, &hs1);
	haccel_last_error(ctx, err, sizeof(err));
	if (st.io_path != HACCEL_IO_URING)
		ktap_skip("io_uring refused here (%s): nothing to register", st.fallback_reason);
	if (!st.direct)
		ktap_skip("no O_DIRECT on this filesystem: no staging to register");
	if (!ret && hs1.io_uring_registrations > hs0.io_uring_registrations)
		ktap_skip("io_uring registered 2 MiB under a 256 KiB RLIMIT_MEMLOCK (CAP_IPC_LOCK?)");
	ktap_diag("%s", err);
	KTAP_EXPECT_EQ(ret, -ENOMEM);
	KTAP_EXPECT(strstr(err, "io_uring buffer registration") != NULL);
	KTAP_EXPECT(strstr(err, strerror(ENOMEM)) && strstr(err, "RLIMIT_MEMLOCK"));
	KTAP_EXPECT(strstr(err, "HACCEL_LOAD_ALLOW_UNREGISTERED") != NULL);
	KTAP_EXPECT_EQ(st.staging_unpinned, 1);
	KTAP_EXPECT_EQ(st.staging_unregistered, 0);
	KTAP_EXPECT_EQ(cap_count(&lc, HACCEL_LOG_WARN, "continuing unpinned"), 1);

	/* Both allowed: the load works, logs each fallback once, counts both. */
	lc.n = 0;
	KTAP_EXPECT_EQ(load(w, HACCEL_LOAD_DIRECT | HACCEL_LOAD_ALLOW_UNREGISTERED,
			    HACCEL_HOSTMEM_ALLOW_UNPINNED, 1 << 20), 0);
	KTAP_EXPECT_EQ(st.direct, 1);
	KTAP_EXPECT_EQ(st.staging_unpinned, 1);
	KTAP_EXPECT_EQ(st.staging_unregistered, 1);
	KTAP_EXPECT_EQ(cap_count(&lc, HACCEL_LOG_WARN, "without fixed buffers"), 1);
	KTAP_EXPECT_EQ(cap_count(&lc, HACCEL_LOG_WARN, "io_uring buffer registration"), 1);
	haccel_weights_close(w);
	haccel_close(ctx);
}

static void t_registration_refused_is_loud(void)
{
	setup(0, NULL);
	finish(in_child(child_registration, 1, 1));
}

static void child_verify(void)
{
	json_t *j;
	json_error_t e;

	tool_run(&r, "HACCEL_CTL", "weights", "verify", path, NULL);
	ktap_diag("exit %d, stderr: %.600s", r.status, r.err);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "cannot lock") != NULL);
	KTAP_EXPECT(strstr(r.err, "--allow-unpinned") != NULL);

	tool_run(&r, "HACCEL_CTL", "weights", "verify", path, "--allow-unpinned", NULL);
	ktap_diag("exit %d, stdout: %.300s", r.status, r.out);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "3 tensors read") && strstr(r.out, "staging unpinned"));
	KTAP_EXPECT(strstr(r.err, "continuing unpinned") != NULL); /* the warning */

	tool_run(&r, "HACCEL_CTL", "--json", "weights", "verify", path, "--allow-unpinned", NULL);
	KTAP_EXPECT_EQ(r.status, 0);
	j = json_loads(r.out, 0, &e);
	KTAP_ASSERT(j != NULL);
	KTAP_EXPECT(json_is_true(json_object_get(j, "ok")));
	KTAP_EXPECT(json_is_true(json_object_get(j, "staging_unpinned")));
	KTAP_EXPECT(json_is_true(json_object_get(j, "direct")));
	json_decref(j);
}

static void t_verify_allow_unpinned(void)
{
	setup(0, "HACCEL_CTL");
	finish(in_child(child_verify, 1, 1));
}

static void child_bench(void)
{
	json_t *j, *cold, *left;
	json_error_t e;

	tool_run(&r, "HACCEL_BENCH", "--json", "stream", path, "--cold", "--repeat", "1",
		 "--ceiling", "1,64K", "--probe-seconds", "0.05", NULL);
	ktap_diag("exit %d, stderr: %.600s", r.status, r.err);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "cannot lock") && strstr(r.err, "--allow-unpinned"));

	tool_run(&r, "HACCEL_BENCH", "--json", "stream", path, "--cold", "--repeat", "1",
		 "--ceiling", "1,64K", "--probe-seconds", "0.05", "--allow-unpinned", NULL);
	ktap_diag("exit %d, stderr: %.600s", r.status, r.err);
	KTAP_ASSERT_EQ(r.status, 0);
	j = json_loads(r.out, 0, &e);
	KTAP_ASSERT(j != NULL);
	cold = json_object_get(j, "cold");
	KTAP_EXPECT(json_is_true(json_object_get(cold, "staging_unpinned")));
	KTAP_EXPECT(json_is_true(json_object_get(cold, "direct")));
	/* As another user, residency is unknown (null) or truly measured:
	 * never mincore's "everything is cached". */
	left = json_object_get(cold, "cached_after_drop");
	ktap_diag("cached_after_drop: %s", json_is_null(left) ? "null" : "a number");
	KTAP_EXPECT(json_is_null(left) || json_real_value(left) < 0.5);
	json_decref(j);
}

static void t_bench_as_ordinary_user(void)
{
	setup(0, "HACCEL_BENCH");
	finish(in_child(child_bench, 1, 1));
}

/* haccel-run on a cold checkpoint as an ordinary user: the model open
 * fails naming the staging and the option; with --allow-unpinned it runs. */
static char model_dir[ST_PATH + 8];

static void child_run(void)
{
	tool_run(&r, "HACCEL_RUN", model_dir, "--prompt", "hi", "--max-new", "2", "--device",
		 "cpu", NULL);
	ktap_diag("exit %d, stderr: %.600s", r.status, r.err);
	KTAP_EXPECT_EQ(r.status, 1);
	KTAP_EXPECT(strstr(r.err, "--allow-unpinned") != NULL);
	tool_run(&r, "HACCEL_RUN", model_dir, "--prompt", "hi", "--max-new", "2", "--device",
		 "cpu", "--allow-unpinned", "--json", NULL);
	ktap_diag("exit %d, stderr: %.300s", r.status, r.err);
	KTAP_EXPECT_EQ(r.status, 0);
	KTAP_EXPECT(strstr(r.out, "\"direct\": true") != NULL);
}

static void t_run_as_ordinary_user(void)
{
	int fd;

	if (!getenv("HACCEL_RUN") || !getenv("HACCEL_CTL"))
		ktap_skip("HACCEL_RUN or HACCEL_CTL not set: run through make check");
	dir = strdup("./haccel-unpriv-XXXXXX");
	KTAP_ASSERT(dir && mkdtemp(dir));
	KTAP_ASSERT(chmod(dir, 0755) == 0);
	snprintf(model_dir, sizeof(model_dir), "%s/tiny", dir);
	tool_run(&r, "HACCEL_CTL", "model", "init", "--preset", "tiny", "--out", model_dir, NULL);
	KTAP_ASSERT_EQ(r.status, 0);
	KTAP_ASSERT(chmod(model_dir, 0755) == 0);
	st_join(path, model_dir, "model.safetensors");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	KTAP_ASSERT(fd >= 0);
	KTAP_ASSERT(fsync(fd) == 0);
	KTAP_ASSERT(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) == 0);
	close(fd);
	finish(in_child(child_run, 1, 1));
}

static const struct ktap_case cases[] = {
	KTAP_CASE(t_residency_unknown_means_direct),
	KTAP_CASE(t_registration_refused_is_loud),
	KTAP_CASE(t_verify_allow_unpinned),
	KTAP_CASE(t_bench_as_ordinary_user),
	KTAP_CASE(t_run_as_ordinary_user),
};

int main(int argc, char **argv)
{
	return KTAP_MAIN(argc, argv, cases);
}
