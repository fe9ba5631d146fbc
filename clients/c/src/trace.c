/*
 * trace.c — per-thread trace state, the probes and the library's life
 * cycle (initialisation, the global switch, shutdown at exit, fork).
 *
 * Each thread has its own state (thread-local, no locks): the open trace
 * id, the next order index, the number of open operations and, on a thread
 * tb_pthread_create started from a traced thread, the split point its
 * first trace hangs from (threads.c). A probe
 * reads the global switch, fills a record and pushes it into the ring.
 *
 * Invocation identifiers (tracebridge.trace.InvocationRecord): a trace
 * that is a task created elsewhere — the first trace of a thread
 * tb_pthread_create started, a pool's work item (tb_task_create,
 * tb_trace_start_task), work done on behalf of another process
 * (tb_trace_start_remote) — enqueues its InvocationRecord after its
 * TraceMetadata, naming the invocation that created it and that one's
 * next orderIndex then. A root trace gets an invocation id, and enqueues
 * its own record (parent -1), only when it first creates a task or
 * exports a header (tb_invocation, tb_invocation_header), so that a trace
 * that hands nothing on costs nothing more; its creation time is then.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

__thread struct tb_thread tb_self __attribute__((tls_model("initial-exec")));
_Atomic uint32_t tb_switch;
struct tb_counters tb_count;

static pthread_mutex_t init_mu = PTHREAD_MUTEX_INITIALIZER;
static _Atomic int init_done;
static int init_failed;
static _Atomic int closed;
static int want_on;              /* the switch position last asked for */
static uint32_t switch_changes;  /* never reset: epochs stay unique */
static tb_str_t session_h, host_h;
static uint64_t id_base;
static _Atomic uint64_t id_next;
static _Atomic int64_t inv_next;  /* invocation ids, from 1 */
int32_t tb_pid;

int64_t tb_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* seed_ids mixes the process id, two clocks, an address (ASLR) and, when
 * the kernel has it, randomness into the base of this process' trace ids. */
static void seed_ids(void)
{
	uint64_t r = 0;
	if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
		r = 0;
	struct timespec mono;
	clock_gettime(CLOCK_MONOTONIC, &mono);
	r ^= (uint64_t)getpid() << 40;
	r ^= (uint64_t)tb_now_ns() * 0x9e3779b97f4a7c15ull;
	r ^= ((uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec) * 0xbf58476d1ce4e5b9ull;
	r ^= (uint64_t)(uintptr_t)&r;
	id_base = r;
	atomic_store(&id_next, 0);
	atomic_store(&inv_next, 0);
	tb_pid = (int32_t)getpid();
}

/* new_trace_id: a bijection of base + counter, so ids never repeat within
 * a process and collide across processes only by chance (2^-63 per pair). */
int64_t tb_new_trace_id(void)
{
	return (int64_t)tb_mix63(id_base + atomic_fetch_add_explicit(&id_next, 1, memory_order_relaxed));
}

/* set_switch publishes a new switch value (caller holds init_mu). */
static void set_switch(int on)
{
	uint32_t low = (on ? TB_SWITCH_ON : 0u) | (atomic_load(&closed) ? TB_SWITCH_CLOSED : 0u);
	uint32_t v;
	do
		v = (++switch_changes << 2) | low;
	while (v == 0 || v < 4);
	atomic_store_explicit(&tb_switch, v, memory_order_release);
}

static void atfork_prepare(void);
static void atfork_parent(void);
static void atfork_child(void);

int tb_init(void)
{
	pthread_mutex_lock(&init_mu);
	if (!init_done && !init_failed) {
		tb_config_load();
		want_on = tb_cfg.enabled;
		if (tb_strtab_init(tb_cfg.max_strings, tb_cfg.max_string_len) != 0 ||
		    tb_ring_init(tb_cfg.ring_size) != 0 || tb_symbols_init() != 0) {
			init_failed = 1;
			tb_note("cannot allocate buffers; monitoring is off");
		} else {
			session_h = tb_intern(tb_cfg.session);
			host_h = tb_intern(tb_cfg.hostname);
			seed_ids();
			pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
			init_done = 1;
		}
	}
	if (init_failed) {
		pthread_mutex_unlock(&init_mu);
		return -1;
	}
	if (atomic_load(&tb_switch) == 0 && !atomic_load(&closed)) {
		int on = want_on;
		if (on && tb_writer_start() != 0)
			on = 0;
		set_switch(on);
	}
	pthread_mutex_unlock(&init_mu);
	return 0;
}

__attribute__((constructor)) static void tb_ctor(void)
{
	tb_threads_resolve();
	tb_init();
}

__attribute__((destructor)) static void tb_dtor(void)
{
	tb_shutdown();
}

void tb_shutdown(void)
{
	pthread_mutex_lock(&init_mu);
	if (atomic_load(&closed) || !init_done) {
		atomic_store(&closed, 1);
		pthread_mutex_unlock(&init_mu);
		return;
	}
	atomic_store(&closed, 1);
	set_switch(0);
	int timeout = tb_cfg.exit_timeout_ms;
	pthread_mutex_unlock(&init_mu);
	tb_writer_stop(timeout);
}

void tb_set_enabled(int on)
{
	if (tb_init() != 0)
		return;
	pthread_mutex_lock(&init_mu);
	want_on = on != 0;
	if (!atomic_load(&closed)) {
		if (want_on && !tb_writer_running() && tb_writer_start() != 0)
			want_on = 0;
		set_switch(want_on);
	}
	pthread_mutex_unlock(&init_mu);
}

int tb_is_enabled(void)
{
	return atomic_load_explicit(&tb_switch, memory_order_acquire) & 1;
}

struct tb_thread *tb_enter_probe_slow(void)
{
	struct tb_thread *t = &tb_self;
	uint32_t sw = atomic_load_explicit(&tb_switch, memory_order_acquire);
	if (t->busy) {
		if (sw & 1)
			tb_inc(&tb_count.dropped_reentrant, 1);
		return NULL;
	}
	if (sw == 0) {
		t->busy = 1; /* no probes from inside initialisation */
		tb_init();
		t->busy = 0;
		sw = atomic_load_explicit(&tb_switch, memory_order_acquire);
	}
	if (!(sw & 1)) {
		if (atomic_load_explicit(&closed, memory_order_relaxed))
			tb_inc(&tb_count.dropped_closed, 1);
		return NULL;
	}
	if (t->epoch != sw) {
		/* The switch changed since this thread's last event: whatever
		 * trace it had is over. */
		t->epoch = sw;
		t->active = 0;
		t->explicit_ = 0;
		t->depth = 0;
	}
	t->busy = 1;
	return t;
}

static inline void push(const struct tb_rec *r)
{
	if (TB_UNLIKELY(tb_ring_push(r) != 0))
		tb_inc(&tb_count.dropped_full, 1);
}

/* The invocation a task was created by: its id (0: none), process, node
 * and next orderIndex then, and the creation time. */
struct origin {
	int64_t inv;
	int64_t created;
	int32_t pid;
	int32_t order;
	tb_str_t node;
};

/* push_inv enqueues the InvocationRecord of t's open trace, invocation
 * t->inv, created by o (NULL or o->inv 0: a root) at created. */
static void push_inv(struct tb_thread *t, const struct origin *o, int64_t created)
{
	int has = o != NULL && o->inv > 0;
	struct tb_rec r = {
		.kind = TB_KIND_INV,
		.flags = tb_cfg.logging_timestamp ? TB_REC_LTS : 0,
		.order = has ? o->order : -1,
		.time = created,
		.trace = t->trace,
		.lts = t->inv,
		.parent = has ? o->inv : -1,
		.s1 = host_h,
		.s2 = has ? o->node : TB_STR_EMPTY,
		.s3 = has ? (tb_str_t)o->pid : 0,
		.aux = (int32_t)t->tid,
	};
	push(&r);
}

static int64_t new_inv(void)
{
	return atomic_fetch_add_explicit(&inv_next, 1, memory_order_relaxed) + 1;
}

int64_t tb_invocation(struct tb_thread *t)
{
	if (!tb_cfg.invocations)
		return 0;
	if (t->inv == 0 || t->inv_trace != t->trace) {
		t->inv = new_inv();
		t->inv_trace = t->trace;
		push_inv(t, NULL, tb_now_ns());
	}
	return t->inv;
}

/* open_trace opens a trace on t and enqueues its TraceMetadata. A root
 * trace names itself as parent with parentOrderId -1, as Kieker's Java
 * TraceRegistry does; but on a thread started by tb_pthread_create from a
 * traced thread, the first trace is the child split off there (Kieker's
 * TraceRegistry takes the split point registered for the thread). A child
 * names its parent's trace id and the orderIndex of the parent's
 * SplitEvent (-1 when the split point is not known). A trace that is a
 * task (the thread's split, or o: a work item, a remote caller's request)
 * enqueues its InvocationRecord after the TraceMetadata. */
static void open_trace(struct tb_thread *t, int explicit_, int64_t parent, int32_t parent_order, int root,
                       const struct origin *o)
{
	struct origin pend;
	if (t->tid == 0)
		t->tid = (int64_t)syscall(SYS_gettid);
	if (o != NULL)
		t->pending = 0; /* the thread's first trace is this task */
	if (t->pending) {
		t->pending = 0;
		if (root) {
			root = 0;
			parent = t->pend_trace;
			parent_order = t->pend_order;
			t->trace = t->pend_child;
			pend = (struct origin){ .inv = t->pend_inv, .created = t->pend_created, .pid = tb_pid,
			                        .order = t->pend_order, .node = host_h };
			o = &pend;
		} else {
			t->trace = tb_new_trace_id();
		}
	} else {
		t->trace = tb_new_trace_id();
	}
	t->order = 0;
	t->depth = 0;
	t->active = 1;
	t->explicit_ = (uint8_t)explicit_;
	struct tb_rec r = {
		.kind = TB_KIND_META,
		.order = root ? -1 : parent_order,
		.time = t->tid,
		.trace = t->trace,
		.lts = tb_cfg.logging_timestamp ? tb_now_ns() : -1,
		.parent = root ? t->trace : parent,
		.s1 = session_h,
		.s2 = host_h,
	};
	push(&r);
	if (o != NULL && o->inv > 0) {
		t->inv = new_inv();
		t->inv_trace = t->trace;
		push_inv(t, o, o->created);
	}
}

/* event returns t's next event of kind at time now: the next orderIndex of
 * its trace, the logging timestamp if configured; strings and parent 0. */
static inline struct tb_rec event(struct tb_thread *t, uint8_t kind, int64_t now)
{
	struct tb_rec r = {
		.kind = kind,
		.order = t->order++,
		.time = now,
		.trace = t->trace,
		.lts = tb_cfg.logging_timestamp ? now : -1,
	};
	return r;
}

void tb_emit_before(struct tb_thread *t, tb_str_t op, tb_str_t cls)
{
	if (!t->active)
		open_trace(t, 0, 0, 0, 1, NULL);
	struct tb_rec r = event(t, TB_KIND_BEFORE, tb_now_ns());
	r.s1 = op;
	r.s2 = cls;
	push(&r);
	t->depth++;
}

void tb_emit_after(struct tb_thread *t, tb_str_t op, tb_str_t cls, int failed, tb_str_t cause)
{
	if (t->depth <= 0) {
		tb_inc(&tb_count.unbalanced, 1);
		return;
	}
	struct tb_rec r = event(t, failed ? TB_KIND_FAILED : TB_KIND_AFTER, tb_now_ns());
	r.s1 = op;
	r.s2 = cls;
	r.s3 = cause;
	push(&r);
	if (--t->depth == 0 && !t->explicit_)
		t->active = 0;
}

int32_t tb_emit_point(struct tb_thread *t, uint8_t kind, int64_t joined, int64_t *when)
{
	struct tb_rec r = event(t, kind, tb_now_ns());
	r.parent = joined;
	push(&r);
	if (when != NULL)
		*when = r.time;
	return r.order;
}

/* ---- public probes ---- */

void tb_before(const char *op, const char *cls)
{
	struct tb_thread *t = tb_enter_probe();
	if (t == NULL)
		return;
	tb_emit_before(t, tb_intern(op), tb_intern(cls));
	tb_leave_probe(t);
}

void tb_after(const char *op, const char *cls)
{
	struct tb_thread *t = tb_enter_probe();
	if (t == NULL)
		return;
	if (t->depth > 0)
		tb_emit_after(t, tb_intern(op), tb_intern(cls), 0, 0);
	else
		tb_inc(&tb_count.unbalanced, 1);
	tb_leave_probe(t);
}

void tb_after_failed(const char *op, const char *cls, const char *cause)
{
	struct tb_thread *t = tb_enter_probe();
	if (t == NULL)
		return;
	if (t->depth > 0)
		tb_emit_after(t, tb_intern(op), tb_intern(cls), 1, tb_intern(cause));
	else
		tb_inc(&tb_count.unbalanced, 1);
	tb_leave_probe(t);
}

tb_sig_t tb_sig(const char *op, const char *cls)
{
	if (atomic_load(&tb_switch) == 0 && tb_init() != 0)
		return 0;
	if (!init_done)
		return 0;
	uint64_t o = tb_intern(op), c = tb_intern(cls);
	return ((o + 1) << 32) | c;
}

void tb_before_sig(tb_sig_t sig)
{
	if (sig == 0)
		return;
	struct tb_thread *t = tb_enter_probe();
	if (t == NULL)
		return;
	tb_emit_before(t, (tb_str_t)((sig >> 32) - 1), (tb_str_t)sig);
	tb_leave_probe(t);
}

void tb_after_sig(tb_sig_t sig)
{
	if (sig == 0)
		return;
	struct tb_thread *t = tb_enter_probe();
	if (t == NULL)
		return;
	tb_emit_after(t, (tb_str_t)((sig >> 32) - 1), (tb_str_t)sig, 0, 0);
	tb_leave_probe(t);
}

void tb_after_failed_sig(tb_sig_t sig, const char *cause)
{
	if (sig == 0)
		return;
	struct tb_thread *t = tb_enter_probe();
	if (t == NULL)
		return;
	if (t->depth > 0)
		tb_emit_after(t, (tb_str_t)((sig >> 32) - 1), (tb_str_t)sig, 1, tb_intern(cause));
	else
		tb_inc(&tb_count.unbalanced, 1);
	tb_leave_probe(t);
}

/* ---- explicit traces ---- */

static int64_t start(int root, int64_t parent, int32_t parent_order, const struct origin *o)
{
	struct tb_thread *t = tb_enter_probe();
	if (t == NULL)
		return -1;
	open_trace(t, 1, parent, parent_order, root, o);
	int64_t id = t->trace;
	tb_leave_probe(t);
	return id;
}

int64_t tb_trace_start(void)
{
	return start(1, 0, 0, NULL);
}

int64_t tb_trace_start_child(int64_t parent_trace_id, int32_t parent_order_index)
{
	return start(0, parent_trace_id, parent_order_index, NULL);
}

/* ---- tasks and invocation headers ---- */

int tb_task_create(struct tb_task *task)
{
	int64_t id = -1, inv = -1, when = -1;
	int32_t order = -1;
	struct tb_thread *t = tb_enter_probe();
	if (t != NULL) {
		if (t->active) {
			id = t->trace;
			inv = tb_invocation(t);
			order = tb_emit_point(t, TB_KIND_SPLIT, 0, &when);
		}
		tb_leave_probe(t);
	}
	if (task != NULL) {
		task->trace = id;
		task->invocation = inv;
		task->created = when;
		task->order = order;
		task->pid = tb_pid;
	}
	return id != -1;
}

int64_t tb_trace_start_task(const struct tb_task *task)
{
	if (task == NULL || task->trace == -1 || task->pid != tb_pid)
		return start(1, 0, 0, NULL);
	if (task->invocation <= 0) /* TRACEBRIDGE_INVOCATIONS=0: Kieker's link only */
		return start(0, task->trace, task->order, NULL);
	struct origin o = { .inv = task->invocation, .created = task->created, .pid = task->pid,
	                    .order = task->order, .node = host_h };
	return start(0, task->trace, task->order, &o);
}

int64_t tb_trace_start_remote(const char *header)
{
	struct tb_header h;
	if (!tb_cfg.invocations || !tb_parse_header(header, &h))
		return start(1, 0, 0, NULL);
	struct origin o = { .inv = h.inv, .created = tb_now_ns(), .pid = h.pid, .order = h.order,
	                    .node = tb_intern_n(h.node, h.node_len) };
	return start(1, 0, 0, &o);
}

size_t tb_invocation_header(char *buf, size_t n)
{
	size_t len = 0;
	if (buf != NULL && n > 0)
		buf[0] = '\0';
	struct tb_thread *t = tb_enter_probe();
	if (t == NULL)
		return 0;
	if (t->active && buf != NULL && n > 0 && tb_cfg.invocations) {
		const struct tb_string *node = tb_string(host_h);
		if (node->len <= TB_HEADER_NODE_MAX) {
			int64_t inv = tb_invocation(t);
			len = tb_format_header(buf, n, node->bytes, node->len, tb_pid, inv, t->order);
		}
	}
	tb_leave_probe(t);
	return len;
}

void tb_trace_end(void)
{
	struct tb_thread *t = &tb_self;
	if (t->busy)
		return;
	t->active = 0;
	t->explicit_ = 0;
	t->depth = 0;
}

int tb_trace_split(int64_t *trace_id, int32_t *order_index)
{
	int64_t id = -1;
	int32_t order = -1;
	struct tb_thread *t = tb_enter_probe();
	if (t != NULL) {
		if (t->active) {
			id = t->trace;
			order = tb_emit_point(t, TB_KIND_SPLIT, 0, NULL);
		}
		tb_leave_probe(t);
	}
	if (trace_id)
		*trace_id = id;
	if (order_index)
		*order_index = order;
	return id != -1;
}

int tb_trace_current(int64_t *trace_id, int32_t *next_order_index)
{
	struct tb_thread *t = &tb_self;
	uint32_t sw = atomic_load_explicit(&tb_switch, memory_order_acquire);
	int open = (sw & 1) && t->epoch == sw && t->active;
	if (trace_id)
		*trace_id = open ? t->trace : -1;
	if (next_order_index)
		*next_order_index = open ? t->order : -1;
	return open;
}

/* ---- flushing and counters ---- */

int tb_flush(int timeout_ms)
{
	if (!init_done || !tb_writer_running())
		return 0;
	uint64_t target = atomic_load_explicit(&tb_ring.head, memory_order_acquire);
	struct timespec start_ts, now;
	clock_gettime(CLOCK_MONOTONIC, &start_ts);
	for (;;) {
		if (tb_writer_flushed() >= target)
			return 0;
		if (!tb_writer_running())
			return -1;
		tb_writer_kick();
		clock_gettime(CLOCK_MONOTONIC, &now);
		int64_t el = (int64_t)(now.tv_sec - start_ts.tv_sec) * 1000 + (now.tv_nsec - start_ts.tv_nsec) / 1000000;
		if (el >= timeout_ms)
			return -1;
		struct timespec d = { 0, 1000000 };
		nanosleep(&d, NULL);
	}
}

static uint64_t get(_Atomic uint64_t *c)
{
	return atomic_load_explicit(c, memory_order_relaxed);
}

uint64_t tb_dropped(void)
{
	return get(&tb_count.dropped_full) + get(&tb_count.dropped_unsent) + get(&tb_count.dropped_closed) +
	       get(&tb_count.dropped_reentrant);
}

void tb_get_stats(struct tb_stats *s)
{
	if (s == NULL)
		return;
	memset(s, 0, sizeof *s);
	s->enqueued = init_done ? atomic_load(&tb_ring.head) : 0;
	s->sent = get(&tb_count.sent);
	s->dropped_full = get(&tb_count.dropped_full);
	s->dropped_unsent = get(&tb_count.dropped_unsent);
	s->dropped_closed = get(&tb_count.dropped_closed);
	s->dropped_reentrant = get(&tb_count.dropped_reentrant);
	s->dropped = s->dropped_full + s->dropped_unsent + s->dropped_closed + s->dropped_reentrant;
	s->unbalanced = get(&tb_count.unbalanced);
	s->string_overflow = get(&tb_count.string_overflow);
	s->connects = get(&tb_count.connects);
	s->connect_failures = get(&tb_count.connect_failures);
}

/* ---- fork ---- */

static void atfork_prepare(void)
{
	pthread_mutex_lock(&init_mu);
	tb_symbols_atfork_prepare();
	tb_strtab_atfork_prepare();
	tb_writer_atfork_prepare();
}

static void atfork_parent(void)
{
	tb_writer_atfork_parent();
	tb_strtab_atfork_parent();
	tb_symbols_atfork_parent();
	pthread_mutex_unlock(&init_mu);
}

/* In the child only the forking thread exists: new trace ids, an empty
 * ring, zero counters, and the writer (with a new connection) restarts on
 * the next probe. The forking thread's open trace is closed; the Afters of
 * operations it had entered in the parent are ignored. */
static void atfork_child(void)
{
	tb_writer_atfork_child();
	tb_strtab_atfork_child();
	tb_symbols_atfork_child();
	pthread_mutex_init(&init_mu, NULL);
	tb_ring_reset();
	_Atomic uint64_t *cs[] = {
		&tb_count.sent, &tb_count.dropped_full, &tb_count.dropped_unsent, &tb_count.dropped_closed,
		&tb_count.dropped_reentrant, &tb_count.unbalanced, &tb_count.string_overflow,
		&tb_count.connects, &tb_count.connect_failures,
	};
	for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++)
		atomic_store(cs[i], 0);
	seed_ids();
	struct tb_thread *t = &tb_self;
	t->active = 0;
	t->explicit_ = 0;
	t->depth = 0;
	t->pending = 0;
	t->tid = 0;
	t->epoch = 0;
	t->inv = 0;
	if (!atomic_load(&closed))
		atomic_store(&tb_switch, 0);
}
