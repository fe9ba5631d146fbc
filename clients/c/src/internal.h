/*
 * internal.h — shared declarations of the library's parts:
 *
 *   config.c   environment → struct tb_config
 *   strtab.c   the process-wide string table (interning, handles)
 *   encode.c   Kieker binary encoding (pure functions)
 *   ring.c     the bounded multi-producer ring buffer
 *   writer.c   the writer thread: connection, registry, encoding, sending
 *   trace.c    per-thread trace state, the probes, lifecycle, fork
 *   threads.c  thread hops: tb_pthread_create/join, SplitEvent, JoinEvent
 *   header.c   invocation headers: format and parse (pure functions)
 *   symbols.c  code address → operation/class signature, with a cache
 *   cyg.c      gcc's -finstrument-functions hooks
 *
 * Concurrency: probes run on any thread and touch only their thread-local
 * state, the ring (lock-free) and the string table / symbol cache (lock-free
 * reads, a mutex for inserts). The writer thread alone owns the socket, the
 * per-connection registry and the output buffer. No mutex of the library is
 * ever held while another is taken, or while calling into the dynamic
 * loader.
 */
#ifndef TB_INTERNAL_H
#define TB_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>

#include "tracebridge.h"

#define TB_HIDDEN __attribute__((visibility("hidden")))
#define TB_NOINSTR __attribute__((no_instrument_function))
#define TB_LIKELY(x) __builtin_expect(!!(x), 1)
#define TB_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* ---- configuration (config.c) ---- */

struct tb_config {
	char host[256];
	char port[16];
	int enabled;
	uint32_t ring_size;        /* records, a power of two */
	int flush_ms;              /* writer idle wake-up */
	int connect_timeout_ms;
	int reconnect_min_ms;
	int reconnect_max_ms;
	int exit_timeout_ms;
	uint32_t max_strings;      /* distinct strings in the string table */
	uint32_t max_string_len;   /* bytes; longer strings are cut */
	int logging_timestamp;     /* 1: set the header timestamp, 0: -1 */
	int invocations;           /* 0: no InvocationRecords (a Kieker-only reader) */
	int quiet;                 /* no stderr notes */
	char hostname[256];        /* TraceMetadata.hostname */
	char session[256];         /* TraceMetadata.sessionId */
	char exclude[4096];        /* comma-separated fnmatch patterns */
};

/* Limits of the configuration values. */
#define TB_RING_MIN 1024u
#define TB_RING_MAX (1u << 24)
#define TB_RING_DEFAULT 65536u
#define TB_STRINGS_MIN 64u
#define TB_STRINGS_MAX (1u << 24)
#define TB_STRINGS_DEFAULT 65536u
#define TB_STRING_LEN_MIN 16u
#define TB_STRING_LEN_MAX 65536u
#define TB_STRING_LEN_DEFAULT 16384u

TB_HIDDEN extern struct tb_config tb_cfg;
/* tb_config_load fills tb_cfg from the environment; notes about invalid
 * values are written to stderr unless quiet. */
TB_HIDDEN void tb_config_load(void);
/* tb_note writes one "tracebridge: ..." line to stderr unless quiet. */
TB_HIDDEN void tb_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- counters ---- */

struct tb_counters {
	_Atomic uint64_t sent;
	_Atomic uint64_t dropped_full;
	_Atomic uint64_t dropped_unsent;
	_Atomic uint64_t dropped_closed;
	_Atomic uint64_t dropped_reentrant;
	_Atomic uint64_t unbalanced;
	_Atomic uint64_t string_overflow;
	_Atomic uint64_t connects;
	_Atomic uint64_t connect_failures;
};
TB_HIDDEN extern struct tb_counters tb_count;

static inline void tb_inc(_Atomic uint64_t *c, uint64_t n)
{
	atomic_fetch_add_explicit(c, n, memory_order_relaxed);
}

/* ---- string table (strtab.c) ---- */

/* A string handle indexes the process-wide string table. Handles are
 * never reused; the strings live until the process ends. */
typedef uint32_t tb_str_t;

struct tb_string {
	uint32_t hash;
	uint32_t len;
	char bytes[]; /* len bytes, then a NUL */
};

/* Handles interned at initialisation, in this order. */
enum {
	TB_STR_EMPTY = 0,     /* "" */
	TB_STR_OVERFLOW,      /* "<too many strings>" */
	TB_STR_TRACE_META,    /* the record class names */
	TB_STR_BEFORE,
	TB_STR_AFTER,
	TB_STR_AFTER_FAILED,
	TB_STR_SPLIT,         /* the concurrency events */
	TB_STR_JOIN,
	TB_STR_INVOCATION,    /* tracebridge.trace.InvocationRecord */
	TB_STR_FIXED_COUNT
};

TB_HIDDEN int tb_strtab_init(uint32_t max_strings, uint32_t max_len);
/* tb_intern returns the handle of s (NULL: ""), cut to max_len bytes at a
 * UTF-8 boundary. When the table is full it returns TB_STR_OVERFLOW. */
TB_HIDDEN tb_str_t tb_intern(const char *s);
TB_HIDDEN tb_str_t tb_intern_n(const char *s, size_t len);
TB_HIDDEN const struct tb_string *tb_string(tb_str_t h);
TB_HIDDEN uint32_t tb_strtab_capacity(void);
TB_HIDDEN uint32_t tb_strtab_len(void);
/* tb_utf8_cut returns the largest n <= max such that s[:n] does not end
 * inside a UTF-8 sequence (s has len bytes). */
TB_HIDDEN size_t tb_utf8_cut(const char *s, size_t len, size_t max);
TB_HIDDEN void tb_strtab_atfork_prepare(void);
TB_HIDDEN void tb_strtab_atfork_parent(void);
TB_HIDDEN void tb_strtab_atfork_child(void);

/* ---- encoding (encode.c) ---- */

/* Kieker's binary encoding is big-endian; these work on any host. */
static inline uint8_t *tb_put32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 24);
	p[1] = (uint8_t)(v >> 16);
	p[2] = (uint8_t)(v >> 8);
	p[3] = (uint8_t)v;
	return p + 4;
}

static inline uint8_t *tb_put64(uint8_t *p, uint64_t v)
{
	return tb_put32(tb_put32(p, (uint32_t)(v >> 32)), (uint32_t)v);
}

/* Record kinds in the ring. */
enum tb_kind {
	TB_KIND_META = 1,   /* TraceMetadata */
	TB_KIND_BEFORE,     /* BeforeOperationEvent */
	TB_KIND_AFTER,      /* AfterOperationEvent */
	TB_KIND_FAILED,     /* AfterOperationFailedEvent */
	TB_KIND_SPLIT,      /* SplitEvent */
	TB_KIND_JOIN,       /* JoinEvent */
	TB_KIND_INV         /* tracebridge.trace.InvocationRecord */
};

/* One record as probes enqueue it: numbers and string handles. An
 * InvocationRecord (INV) uses the fields as noted; its processId is the
 * process's (tb_pid) when it is encoded. */
struct tb_rec {
	uint8_t kind;
	uint8_t flags;     /* INV: TB_REC_LTS */
	int32_t order;     /* orderIndex; parentOrderId for META and INV */
	int64_t time;      /* timestamp; threadId for META; creationTime for INV */
	int64_t trace;     /* traceId */
	int64_t lts;       /* logging timestamp; invocationId for INV */
	int64_t parent;    /* parentTraceId (META), joinedTraceId (JOIN), parentInvocationId (INV) */
	tb_str_t s1, s2, s3; /* op, cls, cause; session, hostname for META;
	                        nodeId, parentNodeId, parentProcessId for INV */
	int32_t aux;       /* INV: runnableId (the running thread's id) */
};
/* INV's logging timestamp is its creation time (else -1). */
#define TB_REC_LTS 1u

/* The process id in InvocationRecords (set at start and in a forked child). */
TB_HIDDEN extern int32_t tb_pid;

/* The size of a record's frame without registry entries. */
TB_HIDDEN size_t tb_frame_size(uint8_t kind);
/* tb_append_frame writes the frame of r with class id cls and the string
 * ids ids[0..2] (as many as the kind has) at p; returns the end. */
TB_HIDDEN uint8_t *tb_append_frame(uint8_t *p, const struct tb_rec *r, int32_t cls, const int32_t ids[3]);
/* tb_append_entry writes a registry entry: int32 -1 | int32 id | int32 len | bytes. */
TB_HIDDEN uint8_t *tb_append_entry(uint8_t *p, int32_t id, const char *s, uint32_t len);
/* tb_rec_strings lists the string handles a record uses, class name first;
 * returns how many. */
TB_HIDDEN int tb_rec_strings(const struct tb_rec *r, tb_str_t out[4]);

/* ---- ring (ring.c) ---- */

struct tb_slot {
	_Atomic uint64_t seq;
	struct tb_rec rec;
} __attribute__((aligned(64)));
_Static_assert(sizeof(struct tb_slot) == 64, "a ring slot is one cache line");

struct tb_ring {
	struct tb_slot *slots;
	uint64_t mask;
	char pad0[64 - sizeof(void *) - sizeof(uint64_t)];
	_Atomic uint64_t head; /* next position producers claim */
	char pad1[64 - sizeof(uint64_t)];
	_Atomic uint64_t tail; /* next position the writer reads */
	char pad2[64 - sizeof(uint64_t)];
};
TB_HIDDEN extern struct tb_ring tb_ring;

TB_HIDDEN int tb_ring_init(uint32_t size);
TB_HIDDEN void tb_ring_reset(void);
/* tb_ring_pop copies the oldest published record to out; 0 when empty.
 * Writer thread only. */
TB_HIDDEN int tb_ring_pop(struct tb_rec *out);

/* tb_writer_kick wakes the writer if it sleeps (writer.c). */
TB_HIDDEN void tb_writer_kick(void);

/* tb_ring_push enqueues r; returns 0, or -1 when the ring is full. Never
 * blocks. Wakes the writer every quarter of the ring. */
static inline int tb_ring_push(const struct tb_rec *r)
{
	struct tb_ring *q = &tb_ring;
	uint64_t pos = atomic_load_explicit(&q->head, memory_order_relaxed);
	struct tb_slot *s;
	for (;;) {
		s = &q->slots[pos & q->mask];
		uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
		int64_t dif = (int64_t)(seq - pos);
		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(&q->head, &pos, pos + 1,
			                                          memory_order_relaxed, memory_order_relaxed))
				break;
		} else if (dif < 0) {
			return -1;
		} else {
			pos = atomic_load_explicit(&q->head, memory_order_relaxed);
		}
	}
	s->rec = *r;
	atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
	if (TB_UNLIKELY((pos & (q->mask >> 2)) == 0))
		tb_writer_kick();
	return 0;
}

/* ---- writer (writer.c) ---- */

TB_HIDDEN int tb_writer_start(void);
/* tb_writer_stop asks the writer to send what is left and waits at most
 * timeout_ms for it. */
TB_HIDDEN void tb_writer_stop(int timeout_ms);
TB_HIDDEN int tb_writer_running(void);
/* tb_writer_flushed returns the ring position up to which every record has
 * been sent or dropped. */
TB_HIDDEN uint64_t tb_writer_flushed(void);
TB_HIDDEN void tb_writer_atfork_prepare(void);
TB_HIDDEN void tb_writer_atfork_parent(void);
TB_HIDDEN void tb_writer_atfork_child(void);

/* ---- probes (trace.c) ---- */

struct tb_thread {
	uint32_t epoch;    /* the switch value this state belongs to */
	int32_t depth;     /* open operations */
	int32_t order;     /* next order index */
	uint8_t active;    /* a trace is open */
	uint8_t explicit_; /* opened by tb_trace_start: ends with tb_trace_end */
	uint8_t busy;      /* inside a probe (or the writer thread) */
	uint8_t pending;   /* started by tb_pthread_create from a traced thread:
	                      the next trace is the child split off there */
	int32_t pend_order; /* the split point: parent's SplitEvent orderIndex, */
	int64_t pend_trace; /* parent's traceId, */
	int64_t pend_child; /* and the id the child trace gets, */
	int64_t pend_inv;   /* the parent's invocation id (0: none), */
	int64_t pend_created; /* and when the thread was created */
	int64_t trace;
	int64_t tid;
	int64_t inv;       /* the invocation id of trace inv_trace (0: none yet) */
	int64_t inv_trace;
};

TB_HIDDEN extern __thread struct tb_thread tb_self __attribute__((tls_model("initial-exec")));
/* The global switch: bit 0 = probes on, bit 1 = shut down; the rest
 * counts changes (so each value is an epoch). 0 means not initialised. */
TB_HIDDEN extern _Atomic uint32_t tb_switch;
#define TB_SWITCH_ON 1u
#define TB_SWITCH_CLOSED 2u

/* tb_enter_probe returns the calling thread's state when probes are on and
 * the thread is not already inside a probe (marking it busy), else NULL. */
TB_HIDDEN struct tb_thread *tb_enter_probe_slow(void);
static inline struct tb_thread *tb_enter_probe(void)
{
	struct tb_thread *t = &tb_self;
	uint32_t sw = atomic_load_explicit(&tb_switch, memory_order_acquire);
	if (TB_LIKELY(sw & TB_SWITCH_ON)) {
		if (TB_LIKELY(t->epoch == sw && !t->busy)) {
			t->busy = 1;
			return t;
		}
	} else if (TB_LIKELY(sw != 0 && !(sw & TB_SWITCH_CLOSED))) {
		return NULL; /* switched off */
	}
	return tb_enter_probe_slow();
}

static inline void tb_leave_probe(struct tb_thread *t)
{
	t->busy = 0;
}

TB_HIDDEN void tb_emit_before(struct tb_thread *t, tb_str_t op, tb_str_t cls);
/* tb_real_pthread_create and tb_real_pthread_join call the C library's
 * functions, also in programs linked with -Wl,--wrap=pthread_create (whose
 * references to pthread_create, the library's included, then lead to
 * __wrap_pthread_create): they are looked up with dlsym. threads.c. */
TB_HIDDEN int tb_real_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg);
TB_HIDDEN int tb_real_pthread_join(pthread_t th, void **ret);
/* tb_threads_resolve looks the real functions up (the constructor calls it
 * before any lock of the library is taken). */
TB_HIDDEN void tb_threads_resolve(void);
TB_HIDDEN int64_t tb_new_trace_id(void);
/* tb_emit_point records a SplitEvent (kind TB_KIND_SPLIT) or a JoinEvent
 * naming joined in t's open trace and returns its orderIndex; when is set
 * to its timestamp unless NULL. */
TB_HIDDEN int32_t tb_emit_point(struct tb_thread *t, uint8_t kind, int64_t joined, int64_t *when);
/* tb_invocation returns the invocation id of t's open trace, giving the
 * trace one (and enqueueing its InvocationRecord, a root's: no parent)
 * when it has none yet. */
TB_HIDDEN int64_t tb_invocation(struct tb_thread *t);
TB_HIDDEN void tb_emit_after(struct tb_thread *t, tb_str_t op, tb_str_t cls, int failed, tb_str_t cause);
TB_HIDDEN int64_t tb_now_ns(void);

/* ---- invocation headers (header.c) ---- */

/* A parsed invocation header: tb1-NODE-PID-INVOCATION-ORDER. */
#define TB_HEADER_NODE_MAX 255
struct tb_header {
	char node[TB_HEADER_NODE_MAX + 1]; /* NUL-terminated (may hold NULs: node_len) */
	size_t node_len;
	int32_t pid;
	int64_t inv;
	int32_t order;
};
/* tb_format_header writes the header of an invocation to buf (n bytes,
 * NUL-terminated); returns its length, or 0 when it does not fit or the
 * node is longer than TB_HEADER_NODE_MAX. */
TB_HIDDEN size_t tb_format_header(char *buf, size_t n, const char *node, size_t node_len, int32_t pid, int64_t inv,
                                  int32_t order);
/* tb_parse_header parses s; returns 1, or 0 when s is not a header. */
TB_HIDDEN int tb_parse_header(const char *s, struct tb_header *h);

/* ---- symbols (symbols.c) ---- */

/* A resolved code address: op and cls handles, or excluded. */
#define TB_SYM_EXCLUDED UINT64_MAX
TB_HIDDEN int tb_symbols_init(void);
/* tb_symbol returns (op << 32 | cls) for the function at fn, or
 * TB_SYM_EXCLUDED. */
TB_HIDDEN uint64_t tb_symbol(void *fn);
TB_HIDDEN void tb_symbols_atfork_prepare(void);
TB_HIDDEN void tb_symbols_atfork_parent(void);
TB_HIDDEN void tb_symbols_atfork_child(void);

/* Pure helpers of symbols.c, exposed for the unit tests. */
/* tb_cxx_split finds the scope of a demangled C++ name ("ns::C::f(int)
 * const" → "ns::C") and its name without parameters ("ns::C::f"); returns
 * the scope length (0: none) and stores where the name starts and ends. */
TB_HIDDEN size_t tb_cxx_split(const char *name, size_t *name_start, size_t *name_end);
/* tb_fortran_split recognises gfortran's module procedures
 * "__mod_MOD_proc"; returns 1 and the module and procedure spans. */
TB_HIDDEN int tb_fortran_split(const char *sym, size_t *mod_start, size_t *mod_len, size_t *proc_start);
/* tb_elf_lookup resolves off in the ELF file at path without caching
 * anything (for the ELF fuzz test). */
TB_HIDDEN int tb_elf_lookup(const char *path, uintptr_t off, char *out, size_t cap);
/* tb_excluded reports whether name matches one of the comma-separated
 * fnmatch patterns. */
TB_HIDDEN int tb_excluded(const char *patterns, const char *name);

/* ---- trace ids ---- */

/* tb_mix63 is a bijection on [0, 2^63). */
static inline uint64_t tb_mix63(uint64_t x)
{
	const uint64_t m = (1ull << 63) - 1;
	x &= m;
	x ^= x >> 31;
	x = (x * 0x7fb5d329728ea185ull) & m;
	x ^= x >> 27;
	x = (x * 0x81dadef4bc2dd44dull) & m;
	x ^= x >> 33;
	return x;
}

#endif /* TB_INTERNAL_H */
