/*
 * threads.c — traces across threads, as Kieker's probes record a thread
 * started from a traced thread:
 *
 *   parent, at pthread_create:  SplitEvent(timestamp, traceId, orderIndex),
 *                               the parent trace's next orderIndex
 *   child, at its first probe:  TraceMetadata(traceId = new, threadId, ...,
 *                               parentTraceId = the parent's traceId,
 *                               parentOrderId = the SplitEvent's orderIndex),
 *                               then its events from orderIndex 0
 *   parent, at pthread_join:    JoinEvent(timestamp, traceId, orderIndex,
 *                               joinedTraceId = the child's traceId)
 *
 * and the child's InvocationRecord after its TraceMetadata, naming the
 * parent trace's invocation (which the parent records at the split if it
 * has none yet) and the SplitEvent's orderIndex.
 *
 * tb_pthread_create records the SplitEvent and starts the thread through a
 * trampoline that leaves the split point in the new thread's state
 * (trace.c's open_trace takes it when the thread's first trace opens, as
 * Kieker's TraceRegistry takes the point registered for a thread). The
 * child's trace id is drawn in the parent, so that tb_pthread_join can
 * name it; each thread remembers the ids of the last threads it created
 * for that (a small table of its own, no locks).
 *
 * Programs compiled with -finstrument-functions opt in at link time with
 * -Wl,--wrap=pthread_create,--wrap=pthread_join: the linker sends their
 * calls (and this library's, when linked statically) to the __wrap_
 * functions below. The C library's functions are therefore looked up with
 * dlsym, never called by name.
 */
#include "internal.h"

#include <dlfcn.h>
#include <stdlib.h>

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
typedef int (*join_fn)(pthread_t, void **);

static _Atomic(create_fn) real_create;
static _Atomic(join_fn) real_join;

void tb_threads_resolve(void)
{
	if (atomic_load_explicit(&real_create, memory_order_acquire) == NULL) {
		create_fn f = (create_fn)dlsym(RTLD_DEFAULT, "pthread_create");
		/* Without dlsym (a fully static program): the function itself,
		 * which is the real one unless the program wraps it. */
		atomic_store_explicit(&real_create, f ? f : pthread_create, memory_order_release);
	}
	if (atomic_load_explicit(&real_join, memory_order_acquire) == NULL) {
		join_fn f = (join_fn)dlsym(RTLD_DEFAULT, "pthread_join");
		atomic_store_explicit(&real_join, f ? f : pthread_join, memory_order_release);
	}
}

int tb_real_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	create_fn f = atomic_load_explicit(&real_create, memory_order_acquire);
	if (TB_UNLIKELY(f == NULL)) {
		tb_threads_resolve();
		f = atomic_load_explicit(&real_create, memory_order_acquire);
	}
	return f(th, attr, fn, arg);
}

int tb_real_pthread_join(pthread_t th, void **ret)
{
	join_fn f = atomic_load_explicit(&real_join, memory_order_acquire);
	if (TB_UNLIKELY(f == NULL)) {
		tb_threads_resolve();
		f = atomic_load_explicit(&real_join, memory_order_acquire);
	}
	return f(th, ret);
}

/* What the trampoline hands the new thread. */
struct spawn {
	void *(*fn)(void *);
	void *arg;
	int64_t parent;
	int64_t child;
	int64_t inv;     /* the parent trace's invocation */
	int64_t created; /* the SplitEvent's time */
	int32_t order;
};

static void *trampoline(void *p)
{
	struct spawn s = *(struct spawn *)p;
	free(p);
	struct tb_thread *t = &tb_self;
	t->pend_trace = s.parent;
	t->pend_order = s.order;
	t->pend_child = s.child;
	t->pend_inv = s.inv;
	t->pend_created = s.created;
	t->pending = 1;
	void *r = s.fn(s.arg);
	t->pending = 0;
	return r;
}

/* The children a thread created and has not joined yet: thread → the id
 * its trace has (or will have). The oldest entry gives way when full; a
 * thread joined by another thread than its creator gets no JoinEvent. */
enum { KIDS = 32 };
static __thread struct kid {
	pthread_t th;
	int64_t child;
} kids[KIDS];
static __thread unsigned kids_next;

static void remember(pthread_t th, int64_t child)
{
	for (int i = 0; i < KIDS; i++) {
		if (kids[i].child != 0 && pthread_equal(kids[i].th, th)) {
			kids[i].child = child;
			return;
		}
	}
	kids[kids_next % KIDS] = (struct kid){ th, child };
	kids_next++;
}

static int64_t recall(pthread_t th)
{
	for (int i = 0; i < KIDS; i++) {
		if (kids[i].child != 0 && pthread_equal(kids[i].th, th)) {
			int64_t c = kids[i].child;
			kids[i].child = 0;
			return c;
		}
	}
	return 0;
}

int tb_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	struct tb_thread *t = tb_enter_probe();
	if (t == NULL)
		return tb_real_pthread_create(th, attr, fn, arg);
	struct spawn *s = NULL;
	if (t->active && (s = malloc(sizeof *s)) != NULL) {
		s->fn = fn;
		s->arg = arg;
		s->parent = t->trace;
		s->child = tb_new_trace_id();
		s->inv = tb_invocation(t);
		s->order = tb_emit_point(t, TB_KIND_SPLIT, 0, &s->created);
	}
	tb_leave_probe(t);
	if (s == NULL)
		return tb_real_pthread_create(th, attr, fn, arg);
	int64_t child = s->child;
	int rc = tb_real_pthread_create(th, attr, trampoline, s);
	if (rc != 0) {
		free(s); /* the SplitEvent stays: a thread that never ran */
		return rc;
	}
	remember(*th, child);
	return 0;
}

int tb_pthread_join(pthread_t th, void **ret)
{
	int rc = tb_real_pthread_join(th, ret);
	if (rc != 0)
		return rc;
	int64_t child = recall(th);
	if (child == 0)
		return 0;
	struct tb_thread *t = tb_enter_probe();
	if (t == NULL)
		return 0;
	if (t->active)
		tb_emit_point(t, TB_KIND_JOIN, child, NULL);
	tb_leave_probe(t);
	return 0;
}

/* -Wl,--wrap=pthread_create,--wrap=pthread_join */
TB_API int __wrap_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);
TB_API int __wrap_pthread_join(pthread_t th, void **ret);

int __wrap_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	return tb_pthread_create(th, attr, fn, arg);
}

int __wrap_pthread_join(pthread_t th, void **ret)
{
	return tb_pthread_join(th, ret);
}
