/*
 * tracebridge.h — the tracebridge C monitoring client.
 *
 * Probes record Kieker trace events (TraceMetadata, BeforeOperationEvent,
 * AfterOperationEvent, AfterOperationFailedEvent) and hand them to a
 * background writer thread through a bounded ring buffer; the writer sends
 * them to a tracebridge (or any Kieker single-socket TCP reader) at
 * $TRACEBRIDGE_HOST:$TRACEBRIDGE_PORT (default 127.0.0.1:10133).
 *
 * Probes never block and never fail: when the ring is full or the bridge is
 * unreachable, records are dropped and counted (tb_dropped). Every function
 * here is safe to call from any thread, before or without tb_init (the
 * library initialises itself on first use), and after tb_shutdown (the
 * probes then drop and count).
 *
 * Strings passed to the probes are copied (interned) before the call
 * returns; the caller may free or reuse them at once.
 *
 * Tracing model (per thread): a trace starts implicitly at the first
 * tb_before on a thread that has no trace open, and ends when the number of
 * open operations returns to zero. tb_trace_start opens a trace explicitly;
 * such a trace stays open across several top-level operations until
 * tb_trace_end (or the next tb_trace_start). Order indexes count every
 * event of a trace from 0 (Before/After, and the SplitEvent and JoinEvent
 * of thread hops). A root trace has parentTraceId = its own traceId and
 * parentOrderId = -1 (Kieker's Java convention).
 *
 * Across threads: a thread started with tb_pthread_create from a thread
 * with an open trace continues it, as Kieker's probes record it: the
 * parent records a SplitEvent (its trace's next orderIndex), and the new
 * thread's first trace is a child whose TraceMetadata names the parent's
 * traceId and that orderIndex (parentTraceId, parentOrderId);
 * tb_pthread_join records a JoinEvent. Programs compiled with
 * -finstrument-functions get this without changing their code by linking
 * with -Wl,--wrap=pthread_create,--wrap=pthread_join.
 *
 * Invocation identifiers: a trace that is a task created elsewhere (the
 * first trace of a thread tb_pthread_create started, a pool's work item
 * opened with tb_trace_start_task, work done on behalf of another process
 * opened with tb_trace_start_remote) also sends a
 * tracebridge.trace.InvocationRecord naming the invocation that created it
 * and that one's next orderIndex, captured where the task was created, so
 * that the bridge hangs it under the call that created it across reused
 * threads, processes and nodes. A root trace sends its own only once it
 * creates a task or exports a header.
 *
 * See README.md for the environment variables and the automatic
 * instrumentation with gcc's -finstrument-functions.
 */
#ifndef TRACEBRIDGE_H
#define TRACEBRIDGE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TB_API __attribute__((visibility("default")))
#else
#define TB_API
#endif

/*
 * tb_init reads the configuration from the environment and starts the
 * writer thread (unless TRACEBRIDGE_ENABLED=0). It is called automatically
 * by a constructor and by the first probe; calling it again does nothing.
 * Returns 0, or -1 when the library could not allocate its buffers (probes
 * then do nothing).
 */
TB_API int tb_init(void);

/*
 * tb_shutdown sends what is buffered (waiting at most
 * TRACEBRIDGE_EXIT_TIMEOUT_MS, default 1000 ms) and stops the writer.
 * Probes called afterwards drop their records and count them. It runs
 * automatically at exit (and when a shared libtracebridge is unloaded).
 */
TB_API void tb_shutdown(void);

/*
 * tb_flush waits until every record enqueued before the call has been
 * written to the socket or dropped, at most timeout_ms milliseconds.
 * Returns 0 when done, -1 on timeout.
 */
TB_API int tb_flush(int timeout_ms);

/*
 * The global switch. Disabled probes cost one load and a branch. Trace
 * state is reset on every thread when the switch changes, so toggling in
 * the middle of an operation never leaves traces unbalanced.
 */
TB_API void tb_set_enabled(int on);
TB_API int tb_is_enabled(void);

/* Manual probes: op is the operation signature, cls the class signature
 * (NULL means ""). cause describes the failure of tb_after_failed. */
TB_API void tb_before(const char *op, const char *cls);
TB_API void tb_after(const char *op, const char *cls);
TB_API void tb_after_failed(const char *op, const char *cls, const char *cause);

/*
 * Pre-interned signatures for the hottest probes: tb_sig interns op and cls
 * once (it returns 0 only if the library is unusable; the _sig probes
 * ignore 0); the _sig probes then skip hashing the strings. A signature
 * stays valid for the life of the process, and the same strings always
 * give the same signature, so threads may race to set a shared one as long
 * as the variable is atomic:
 *
 *     static _Atomic tb_sig_t sig;       // C11 <stdatomic.h>
 *     tb_sig_t s = atomic_load_explicit(&sig, memory_order_relaxed);
 *     if (!s) atomic_store_explicit(&sig, s = tb_sig("int shop.Cart.add(int)", "shop.Cart"), memory_order_relaxed);
 *     tb_before_sig(s); ... tb_after_sig(s);
 */
typedef uint64_t tb_sig_t;
TB_API tb_sig_t tb_sig(const char *op, const char *cls);
TB_API void tb_before_sig(tb_sig_t sig);
TB_API void tb_after_sig(tb_sig_t sig);
TB_API void tb_after_failed_sig(tb_sig_t sig, const char *cause);

/*
 * Explicit traces. tb_trace_start closes the calling thread's current trace
 * (if any) and opens a root trace (on a thread tb_pthread_create started
 * from a traced thread, the child of that split, if none was opened yet);
 * tb_trace_start_child opens a trace whose TraceMetadata names a parent:
 * for work handed to another thread or process, the point tb_trace_split
 * returned in the parent, or parent_order_index -1 when the split point is
 * not known (Kieker's convention). Both emit the TraceMetadata at once and
 * return the new trace id (-1 when disabled).
 */
TB_API int64_t tb_trace_start(void);
TB_API int64_t tb_trace_start_child(int64_t parent_trace_id, int32_t parent_order_index);
TB_API void tb_trace_end(void);

/*
 * tb_trace_current stores the calling thread's open trace id and the order
 * index its next event will get, and returns 1; it returns 0 (storing -1,
 * -1) when no trace is open. Either pointer may be NULL.
 */
TB_API int tb_trace_current(int64_t *trace_id, int32_t *next_order_index);

/*
 * Thread hops. tb_pthread_create is pthread_create that, called from a
 * thread with an open trace, records a SplitEvent in that trace and makes
 * the new thread's first trace its child (TraceMetadata parentTraceId =
 * the trace, parentOrderId = the SplitEvent's orderIndex); the child's
 * TraceMetadata is sent at its first probe (a thread that records nothing
 * sends nothing). Otherwise, and whatever the library's state, it is
 * pthread_create. tb_pthread_join is pthread_join that, after joining a
 * thread this thread created with tb_pthread_create, records a JoinEvent
 * (joinedTraceId = the child's trace id) in the calling thread's open
 * trace. Both return what the C library's functions return.
 *
 * Linking with -Wl,--wrap=pthread_create,--wrap=pthread_join makes every
 * pthread_create/pthread_join of the program (not those inside shared
 * libraries, such as C++'s std::thread) go through them.
 */
TB_API int tb_pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg);
TB_API int tb_pthread_join(pthread_t thread, void **retval);

/*
 * tb_trace_split records a SplitEvent in the calling thread's open trace,
 * for work handed to another thread by other means (a thread pool's queue):
 * it stores the trace id and the SplitEvent's orderIndex, which the other
 * thread passes to tb_trace_start_child, and returns 1; without an open
 * trace it records nothing, stores -1, -1 and returns 0. Either pointer may
 * be NULL. (Kieker's link only: tb_task_create and tb_trace_start_task
 * below also send the InvocationRecords.)
 */
TB_API int tb_trace_split(int64_t *trace_id, int32_t *order_index);

/*
 * Tasks for a thread pool (work created on one thread, run on another that
 * the pool reuses). tb_task_create, on the creating thread inside the call
 * that submits the work, records a SplitEvent in its open trace and fills
 * *task with the creating trace, its invocation and the SplitEvent's
 * orderIndex; it returns 1, or 0 (task->trace -1) without an open trace.
 * Hand the struct (a plain value, copy it freely) with the work.
 * tb_trace_start_task, on the thread that runs the work, opens an explicit
 * trace for it (as tb_trace_start_child, ended by tb_trace_end) that also
 * sends the task's InvocationRecord; for a task made without a trace it
 * opens a root trace. It returns the trace id (-1 when disabled).
 *
 *     // submitting thread                  // pool worker
 *     struct tb_task tk;                    tb_trace_start_task(&job->tk);
 *     tb_task_create(&tk);                  run(job);
 *     enqueue(job_with(tk));                tb_trace_end();
 */
struct tb_task {
	int64_t trace;      /* the creating trace (-1: none) */
	int64_t invocation; /* its invocation id */
	int64_t created;    /* when, ns since the epoch */
	int32_t order;      /* the SplitEvent's orderIndex */
	int32_t pid;        /* the creating process */
};
TB_API int tb_task_create(struct tb_task *task);
TB_API int64_t tb_trace_start_task(const struct tb_task *task);

/*
 * Across processes. tb_invocation_header writes the identifier of the call
 * open on the calling thread, for a request to another process, into buf
 * (n bytes, NUL-terminated; TB_INVOCATION_HEADER_MAX always suffices) and
 * returns its length; it returns 0 (buf "") without an open trace, with the
 * probes off, with TRACEBRIDGE_INVOCATIONS=0 (no InvocationRecords: for a
 * reader that knows only Kieker's records) or when buf is too small. The
 * header is
 *
 *     tb1-NODE-PID-INVOCATION-ORDER
 *
 * "tb1"; the node (TRACEBRIDGE_HOSTNAME, else gethostname) with '%', '-'
 * and every byte outside printable ASCII written %XX (upper-case hex; any
 * %XX is decoded); the process id, the trace's invocation id and its next
 * orderIndex, unsigned decimal. It records the trace's InvocationRecord if
 * it has none yet (no SplitEvent). Carry it in a header of the request
 * ("Tracebridge-Invocation" by convention, as the Go and Python clients).
 *
 * tb_trace_start_remote, in the process that serves the request, opens an
 * explicit trace (ended by tb_trace_end) for the work done on the caller's
 * behalf: a root for Kieker (its TraceMetadata names no parent) that sends
 * an InvocationRecord naming the caller's invocation and orderIndex, by
 * which the bridge hangs it under the caller's call. A header that does not
 * parse (or NULL) opens a plain root trace. It returns the trace id (-1
 * when disabled).
 */
#define TB_INVOCATION_HEADER_MAX 832
TB_API size_t tb_invocation_header(char *buf, size_t n);
TB_API int64_t tb_trace_start_remote(const char *header);

/* tb_dropped returns the number of records dropped so far (ring full,
 * bridge unreachable or connection lost, after tb_shutdown). */
TB_API uint64_t tb_dropped(void);

/* Counters, all since the start of the process (or of a forked child). */
struct tb_stats {
	uint64_t enqueued;          /* records put into the ring */
	uint64_t sent;              /* records fully written to a connection */
	uint64_t dropped;           /* the sum of the four below */
	uint64_t dropped_full;      /* ring full */
	uint64_t dropped_unsent;    /* bridge unreachable or connection lost */
	uint64_t dropped_closed;    /* probe after tb_shutdown */
	uint64_t dropped_reentrant; /* probe inside a probe (signal handler) */
	uint64_t unbalanced;        /* after without an open before: ignored */
	uint64_t string_overflow;   /* strings replaced: string table full */
	uint64_t connects;          /* successful connections */
	uint64_t connect_failures;  /* failed connection attempts */
};
TB_API void tb_get_stats(struct tb_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* TRACEBRIDGE_H */
