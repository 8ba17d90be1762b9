// SPDX-License-Identifier: MIT
/*
 * haccel-bench decode --trace (see bench_trace.h): kernel records from
 * CUPTI's activity API, and the gaps between kernels inside each step.
 *
 * libcupti is dlopen()ed so that haccel-bench neither links nor needs it
 * unless --trace is asked for; the types and prototypes come from
 * <cupti_activity.h> at build time (HAVE_CUPTI). Without those headers
 * only trace_gaps() works and the rest says why not.
 *
 * CUPTI's buffer callbacks take no user pointer, so the recording state is
 * one static object, shared with CUPTI's delivery thread under its lock.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_trace.h"

static const char *kname(const struct trace_kernel *k)
{
	return k->name ? k->name : "(unnamed)";
}

/* ------------------------------------------------------------------------ */
/* Gaps inside windows                                                      */

static int cmp_start(const void *a, const void *b)
{
	const struct trace_kernel *x = *(const struct trace_kernel *const *)a;
	const struct trace_kernel *y = *(const struct trace_kernel *const *)b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return (x->end > y->end) - (x->end < y->end);
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(kname(*(const struct trace_kernel *const *)a),
		      kname(*(const struct trace_kernel *const *)b));
}

/* Longest first; ties by count, then name, so the table is stable. */
static int cmp_time(const void *a, const void *b)
{
	const struct trace_name *x = a, *y = b;

	if (x->ns != y->ns)
		return x->ns > y->ns ? -1 : 1;
	if (x->count != y->count)
		return x->count > y->count ? -1 : 1;
	return strcmp(x->name, y->name);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
	if (!n)
		return 0;
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static uint64_t kend(const struct trace_kernel *k)
{
	return k->end > k->start ? k->end : k->start;
}

int trace_gaps(const struct trace_kernel *k, size_t n, const uint64_t *win_start,
	       const uint64_t *win_end, size_t nwin, struct trace_summary *s)
{
	const struct trace_kernel **by_start = NULL, **by_name = NULL;
	struct trace_name *names = NULL;
	size_t *name_of = NULL, nnames = 0;
	double *span = NULL, *busy = NULL, *gap = NULL, *cnt = NULL;
	struct trace_gap *pairs = NULL;
	uint64_t maxdur = 0;
	int ret = -ENOMEM;

	memset(s, 0, sizeof(*s));
	by_start = malloc((n ? n : 1) * sizeof(*by_start));
	by_name = malloc((n ? n : 1) * sizeof(*by_name));
	name_of = malloc((n ? n : 1) * sizeof(*name_of));
	names = calloc(n ? n : 1, sizeof(*names));
	span = malloc((nwin ? nwin : 1) * sizeof(*span));
	busy = malloc((nwin ? nwin : 1) * sizeof(*busy));
	gap = malloc((nwin ? nwin : 1) * sizeof(*gap));
	cnt = malloc((nwin ? nwin : 1) * sizeof(*cnt));
	if (!by_start || !by_name || !name_of || !names || !span || !busy || !gap || !cnt)
		goto out;

	/* Names to small integers: by_start[i] - k indexes name_of. */
	for (size_t i = 0; i < n; i++) {
		by_start[i] = by_name[i] = &k[i];
		if (kend(&k[i]) - k[i].start > maxdur)
			maxdur = kend(&k[i]) - k[i].start;
	}
	qsort(by_name, n, sizeof(*by_name), cmp_name);
	for (size_t i = 0; i < n; i++) {
		if (!i || strcmp(kname(by_name[i]), kname(by_name[i - 1])))
			names[nnames++].name = kname(by_name[i]);
		name_of[by_name[i] - k] = nnames - 1;
	}
	qsort(by_start, n, sizeof(*by_start), cmp_start);
	if (nnames && nnames <= 512) {
		pairs = calloc(nnames * nnames, sizeof(*pairs));
		if (!pairs)
			goto out;
	}

	for (size_t w = 0; w < nwin; w++) {
		uint64_t ws = win_start[w], we = win_end[w], from, first = 0, last = 0;
		uint64_t cur_a = 0, cur_b = 0, on = 0, kernels = 0;
		const struct trace_kernel *ended = NULL;   /* the one ending at cur_b */
		size_t lo = 0, hi = n;

		if (we <= ws) {
			s->empty++;
			continue;
		}
		/* The first kernel that can reach into the window starts at most
		 * the longest kernel's length before it. */
		from = ws > maxdur ? ws - maxdur : 0;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;

			if (by_start[mid]->start < from)
				lo = mid + 1;
			else
				hi = mid;
		}
		/* The kernels' extent in the window: copies count only inside
		 * it. */
		uint64_t ks = we, ke = ws;
		for (size_t i = lo; i < n && by_start[i]->start < we; i++) {
			const struct trace_kernel *x = by_start[i];
			uint64_t e = kend(x);

			if (x->copy || (x->start < ws && e <= ws))
				continue;
			if ((x->start > ws ? x->start : ws) < ks)
				ks = x->start > ws ? x->start : ws;
			if ((e < we ? e : we) > ke)
				ke = e < we ? e : we;
		}
		for (size_t i = lo; i < n && by_start[i]->start < we; i++) {
			const struct trace_kernel *x = by_start[i];
			uint64_t e = kend(x);
			uint64_t a = x->start > ws ? x->start : ws, b = e < we ? e : we;

			/* Overlapping the window, or of no length and inside it;
			 * a copy clipped to the kernels' extent. */
			if (x->start < ws && e <= ws)
				continue;
			if (x->copy) {
				a = a > ks ? a : ks;
				b = b < ke ? b : ke;
				if (ks > ke || a > b || (a == b && e != x->start))
					continue;
			}
			if (!kernels++) {
				first = a;
				cur_a = a;
				cur_b = b;
				ended = x;
			} else if (a > cur_b) {
				on += cur_b - cur_a;
				if (pairs) {
					struct trace_gap *p = &pairs[name_of[ended - k] * nnames +
								     name_of[x - k]];

					p->ns += a - cur_b;
					p->count++;
				}
				cur_a = a;
				cur_b = b;
				ended = x;
			} else if (b > cur_b) {
				cur_b = b;
				ended = x;
			}
			if (b > last)
				last = b;
			names[name_of[x - k]].ns += b - a;
			names[name_of[x - k]].count++;
		}
		if (!kernels) {
			s->empty++;
			continue;
		}
		on += cur_b - cur_a;
		span[s->steps] = (double)(last - first);
		busy[s->steps] = (double)on;
		gap[s->steps] = (double)(last - first - on);
		cnt[s->steps] = (double)kernels;
		s->steps++;
		s->total_span_ns += last - first;
		s->total_busy_ns += on;
	}
	s->span_ns = median(span, s->steps);
	s->busy_ns = median(busy, s->steps);
	s->gap_ns = median(gap, s->steps);
	s->kernels = median(cnt, s->steps);
	if (s->total_span_ns)
		s->gap_fraction = (double)(s->total_span_ns - s->total_busy_ns) /
				  (double)s->total_span_ns;

	/* The pairs around the most idle time (before names[] is
	 * reordered: the pair table's indices are those of name_of). */
	for (size_t i = 0; pairs && i < nnames * nnames; i++) {
		size_t j;

		if (!pairs[i].ns)
			continue;
		if (s->ngaps == TRACE_GAPS && pairs[i].ns <= s->gaps[TRACE_GAPS - 1].ns)
			continue;
		j = s->ngaps < TRACE_GAPS ? s->ngaps++ : TRACE_GAPS - 1;
		while (j > 0 && s->gaps[j - 1].ns < pairs[i].ns) {
			s->gaps[j] = s->gaps[j - 1];
			j--;
		}
		s->gaps[j] = (struct trace_gap){ names[i / nnames].name, names[i % nnames].name,
						 pairs[i].ns, pairs[i].count };
	}
	/* Only names seen inside a window count. */
	size_t seen = 0;
	for (size_t i = 0; i < nnames; i++)
		if (names[i].count)
			names[seen++] = names[i];
	qsort(names, seen, sizeof(*names), cmp_time);
	s->names = seen;
	s->ntop = seen < TRACE_TOP ? seen : TRACE_TOP;
	memcpy(s->top, names, s->ntop * sizeof(*names));
	ret = 0;
out:
	free(by_start);
	free(by_name);
	free(name_of);
	free(names);
	free(span);
	free(busy);
	free(gap);
	free(cnt);
	free(pairs);
	return ret;
}

void trace_result_free(struct trace_result *r)
{
	free(r->k);
	memset(r, 0, sizeof(*r));
}

#ifdef HAVE_CUPTI
/* ------------------------------------------------------------------------ */
/* Recording through CUPTI                                                  */

#include <dlfcn.h>
#include <pthread.h>
#include <sys/stat.h>

#include <cupti_activity.h>

/* A decode step of the small preset is about 630 kernels, a record 216
 * bytes: one buffer holds some 15 steps, and trace_drain() hands buffers
 * back long before the pool is empty. */
#define POOL_BUFS 16
#define BUF_BYTES (2u << 20)
#define FIRST_KERNELS 16384

static struct {
	pthread_mutex_t lock;  /* the fields after "under lock:" */
	/* Set by trace_load() under lock, then only read; registered and
	 * the calls into CUPTI belong to the thread that traces. */
	int status;            /* trace_load(): 1 not tried, then 0 or -errno */
	char why[768];         /* room for a dlerror() and the names tried */
	void *lib;
	__typeof__(&cuptiActivityRegisterCallbacks) RegisterCallbacks;
	__typeof__(&cuptiActivityEnable) Enable;
	__typeof__(&cuptiActivityDisable) Disable;
	__typeof__(&cuptiActivityFlushAll) FlushAll;
	__typeof__(&cuptiActivityGetNextRecord) GetNextRecord;
	__typeof__(&cuptiGetTimestamp) GetTimestamp;
	__typeof__(&cuptiGetResultString) GetResultString;  /* optional */
	bool registered;       /* the callbacks, once a process */
	/* under lock: */
	uint8_t *pool;         /* POOL_BUFS buffers of BUF_BYTES, kept for the process */
	bool lent[POOL_BUFS];  /* with CUPTI */
	unsigned int free_bufs;
	bool collecting;       /* between trace_start() and trace_stop() */
	bool nomem;            /* a record was lost: k could not grow */
	struct trace_kernel *k;
	size_t n, cap;
	uint64_t refused;
} tr = { .lock = PTHREAD_MUTEX_INITIALIZER, .status = 1 };

static const char *cupti_str(CUptiResult res)
{
	const char *s = NULL;

	if (tr.GetResultString && tr.GetResultString(res, &s) == CUPTI_SUCCESS && s)
		return s;
	return "unknown CUPTI error";
}

static void CUPTIAPI buf_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
	pthread_mutex_lock(&tr.lock);
	*buf = NULL;
	*size = 0;
	*max_records = 0;
	for (unsigned int i = 0; tr.pool && i < POOL_BUFS; i++)
		if (!tr.lent[i]) {
			tr.lent[i] = true;
			tr.free_bufs--;
			*buf = tr.pool + (size_t)i * BUF_BYTES;
			*size = BUF_BYTES;
			break;
		}
	/* Declined: CUPTI drops records until a buffer comes back. */
	if (!*buf)
		tr.refused++;
	pthread_mutex_unlock(&tr.lock);
}

static void CUPTIAPI buf_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
				   size_t valid)
{
	CUpti_Activity *rec = NULL;

	pthread_mutex_lock(&tr.lock);
	while (valid && tr.GetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
		/* Of the CUDA 13 record, only the fields that every version
		 * since Kernel4 keeps at the same offsets are read. */
		const CUpti_ActivityKernel10 *kr = (const CUpti_ActivityKernel10 *)rec;
		uint64_t t0, t1;
		const char *name;

		if (!tr.collecting)
			continue;
		/* Copies and memsets of the step (graph nodes or not) are
		 * device work too: recorded under a name of their own, so that
		 * they count as busy and show in the table, not as gaps. */
		if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
			t0 = kr->start, t1 = kr->end, name = kr->name;
		} else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
			const CUpti_ActivityMemcpy6 *c = (const CUpti_ActivityMemcpy6 *)rec;

			t0 = c->start, t1 = c->end;
			name = c->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD ? "(copy host to device)" :
			       c->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? "(copy device to host)" :
			       c->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ? "(copy device to device)" :
										  "(copy)";
		} else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
			const CUpti_ActivityMemset4 *ms = (const CUpti_ActivityMemset4 *)rec;

			t0 = ms->start, t1 = ms->end, name = "(memset)";
		} else {
			continue;
		}
		/* Both 0: CUPTI could not time this record. */
		if (!t0 && !t1)
			continue;
		if (tr.n == tr.cap) {
			size_t cap = tr.cap ? tr.cap * 2 : FIRST_KERNELS;
			struct trace_kernel *k = realloc(tr.k, cap * sizeof(*k));

			if (!k) {
				tr.nomem = true;
				continue;
			}
			tr.k = k;
			tr.cap = cap;
		}
		tr.k[tr.n++] = (struct trace_kernel){ t0, t1, name,
						      rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL };
	}
	if (tr.pool && buf >= tr.pool && buf < tr.pool + (size_t)POOL_BUFS * BUF_BYTES) {
		size_t i = (size_t)(buf - tr.pool) / BUF_BYTES;

		if (tr.lent[i]) {
			tr.lent[i] = false;
			tr.free_bufs++;
		}
	}
	pthread_mutex_unlock(&tr.lock);
}

/* dlopen path, keeping the first failure's dlerror() in first. */
static void *try_open(const char *path, char *first, size_t n)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	if (!h && !first[0]) {
		const char *e = dlerror();

		snprintf(first, n, "%s", e ? e : "dlopen failed");
	}
	return h;
}

static int load(void)
{
	static const char *const names[] = {
		"libcupti.so.13",
		"libcupti.so",
		"/usr/local/cuda/lib64/libcupti.so.13",
		"/usr/local/cuda/extras/CUPTI/lib64/libcupti.so.13",
	};
	const char *env = getenv("HACCEL_CUPTI_LIB");
	char first[400] = "", path[4200];
	struct stat st;

	if (env && *env) {
		/* The user's choice only: a fallback would hide a wrong path. */
		if (stat(env, &st) == 0 && S_ISDIR(st.st_mode)) {
			snprintf(path, sizeof(path), "%s/libcupti.so.13", env);
			tr.lib = try_open(path, first, sizeof(first));
			snprintf(path, sizeof(path), "%s/libcupti.so", env);
			if (!tr.lib)
				tr.lib = try_open(path, first, sizeof(first));
		} else {
			tr.lib = try_open(env, first, sizeof(first));
		}
		if (!tr.lib) {
			snprintf(tr.why, sizeof(tr.why), "cannot load libcupti from HACCEL_CUPTI_LIB=%s: %s",
				 env, first);
			return -ENOENT;
		}
	} else {
		for (size_t i = 0; !tr.lib && i < sizeof(names) / sizeof(names[0]); i++)
			tr.lib = try_open(names[i], first, sizeof(first));
		if (!tr.lib) {
			snprintf(tr.why, sizeof(tr.why),
				 "cannot load libcupti.so.13 (nor libcupti.so, nor from /usr/local/cuda/lib64 or extras/CUPTI/lib64): %s; set HACCEL_CUPTI_LIB to its path",
				 first);
			return -ENOENT;
		}
	}
#define SYM(field, name)                                                                \
	if (!(*(void **)&tr.field = dlsym(tr.lib, name))) {                             \
		snprintf(tr.why, sizeof(tr.why), "libcupti lacks %s: too old?", name); \
		return -ENOEXEC;                                                        \
	}
	SYM(RegisterCallbacks, "cuptiActivityRegisterCallbacks");
	SYM(Enable, "cuptiActivityEnable");
	SYM(Disable, "cuptiActivityDisable");
	SYM(FlushAll, "cuptiActivityFlushAll");
	SYM(GetNextRecord, "cuptiActivityGetNextRecord");
	SYM(GetTimestamp, "cuptiGetTimestamp");
#undef SYM
	*(void **)&tr.GetResultString = dlsym(tr.lib, "cuptiGetResultString");
	return 0;
}

int trace_load(char *err, size_t n)
{
	int ret;

	pthread_mutex_lock(&tr.lock);
	if (tr.status == 1)
		tr.status = load();
	ret = tr.status;
	pthread_mutex_unlock(&tr.lock);
	if (ret)
		snprintf(err, n, "%s", tr.why);
	return ret;
}

int trace_start(char *err, size_t n)
{
	CUptiResult res;
	int ret = trace_load(err, n);

	if (ret)
		return ret;
	pthread_mutex_lock(&tr.lock);
	if (!tr.pool) {
		tr.pool = malloc((size_t)POOL_BUFS * BUF_BYTES);
		tr.free_bufs = POOL_BUFS;
	}
	if (!tr.k) {
		tr.cap = FIRST_KERNELS;
		tr.k = malloc(tr.cap * sizeof(*tr.k));
	}
	if (!tr.pool || !tr.k) {
		pthread_mutex_unlock(&tr.lock);
		snprintf(err, n, "no memory for CUPTI's record buffers");
		return -ENOMEM;
	}
	tr.n = 0;
	tr.refused = 0;
	tr.nomem = false;
	tr.collecting = true;
	pthread_mutex_unlock(&tr.lock);
	if (!tr.registered) {
		res = tr.RegisterCallbacks(buf_requested, buf_completed);
		if (res != CUPTI_SUCCESS) {
			snprintf(err, n, "cuptiActivityRegisterCallbacks: %s (%d)", cupti_str(res), (int)res);
			ret = -EIO;
			goto fail;
		}
		tr.registered = true;
	}
	res = tr.Enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	if (res != CUPTI_SUCCESS) {
		snprintf(err, n, "cuptiActivityEnable(CONCURRENT_KERNEL): %s (%d)", cupti_str(res),
			 (int)res);
		ret = -EIO;
		goto fail;
	}
	res = tr.Enable(CUPTI_ACTIVITY_KIND_MEMCPY);
	if (res == CUPTI_SUCCESS)
		res = tr.Enable(CUPTI_ACTIVITY_KIND_MEMSET);
	if (res != CUPTI_SUCCESS) {
		snprintf(err, n, "cuptiActivityEnable(MEMCPY, MEMSET): %s (%d)", cupti_str(res),
			 (int)res);
		tr.Disable(CUPTI_ACTIVITY_KIND_MEMCPY);
		tr.Disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
		ret = -EIO;
		goto fail;
	}
	return 0;
fail:
	pthread_mutex_lock(&tr.lock);
	tr.collecting = false;
	pthread_mutex_unlock(&tr.lock);
	return ret;
}

uint64_t trace_now(void)
{
	uint64_t t = 0;

	if (!tr.GetTimestamp || tr.GetTimestamp(&t) != CUPTI_SUCCESS)
		return 0;
	return t;
}

void trace_drain(void)
{
	bool low;

	pthread_mutex_lock(&tr.lock);
	low = tr.collecting && tr.free_bufs < POOL_BUFS / 2;
	pthread_mutex_unlock(&tr.lock);
	if (low)
		tr.FlushAll(0);
}

int trace_stop(struct trace_result *r, char *err, size_t n)
{
	CUptiResult dis, fl;
	bool on;
	int ret = 0;

	memset(r, 0, sizeof(*r));
	pthread_mutex_lock(&tr.lock);
	on = tr.collecting;
	pthread_mutex_unlock(&tr.lock);
	if (!on) {
		snprintf(err, n, "kernel tracing was not started");
		return -EINVAL;
	}
	/* Disabled first: the forced flush then returns every buffer,
	 * the one being filled included, and no new record follows. */
	dis = tr.Disable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	tr.Disable(CUPTI_ACTIVITY_KIND_MEMCPY);
	tr.Disable(CUPTI_ACTIVITY_KIND_MEMSET);
	fl = tr.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	pthread_mutex_lock(&tr.lock);
	tr.collecting = false;
	if (dis != CUPTI_SUCCESS) {
		snprintf(err, n, "cuptiActivityDisable(CONCURRENT_KERNEL): %s (%d)", cupti_str(dis),
			 (int)dis);
		ret = -EIO;
	} else if (fl != CUPTI_SUCCESS) {
		snprintf(err, n, "cuptiActivityFlushAll: %s (%d)", cupti_str(fl), (int)fl);
		ret = -EIO;
	} else if (tr.nomem) {
		snprintf(err, n, "no memory for %zu kernel records", tr.n + 1);
		ret = -ENOMEM;
	} else {
		r->k = tr.k;
		r->n = tr.n;
		r->refused = tr.refused;
		tr.k = NULL;
		tr.cap = 0;
	}
	tr.n = 0;
	pthread_mutex_unlock(&tr.lock);
	return ret;
}

#else /* !HAVE_CUPTI */

#define NO_CUPTI "haccel-bench was built without CUPTI headers (cupti_activity.h)"

int trace_load(char *err, size_t n)
{
	snprintf(err, n, NO_CUPTI);
	return -ENOSYS;
}

int trace_start(char *err, size_t n)
{
	return trace_load(err, n);
}

uint64_t trace_now(void)
{
	return 0;
}

void trace_drain(void)
{
}

int trace_stop(struct trace_result *r, char *err, size_t n)
{
	memset(r, 0, sizeof(*r));
	return trace_load(err, n);
}

#endif /* HAVE_CUPTI */
