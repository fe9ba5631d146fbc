/*
 * moobench.c — a MooBench-style overhead benchmark: a recursive method of
 * depth D called N times, timed as a whole. Built three ways (Makefile):
 *
 *   moobench_plain    no instrumentation (the baseline)
 *   moobench_auto     -finstrument-functions: every invocation of
 *                     monitored_method emits a Before and an After event
 *   moobench_manual   manual probes in monitored_method: "sig" uses
 *                     tb_before_sig/tb_after_sig, "str" tb_before/tb_after
 *                     with string arguments
 *
 *   moobench_X calls depth [sig|str]
 *
 * Probes are switched off with TRACEBRIDGE_ENABLED=0 ("compiled in but
 * disabled"). Prints one line:
 *
 *   moobench: calls=N depth=D ns_per_call=X ns_per_invocation=Y cpu_ns_per_call=C sum=…
 *             sent=S dropped=Z total_sent=T
 *
 * ns_per_call is wall-clock time; cpu_ns_per_call the calling thread's CPU
 * time (without the time it waited for a CPU while the writer thread and
 * the bridge ran). sent and dropped count the measured calls; total_sent
 * includes the warm-up.
 *
 * The harness itself is excluded from instrumentation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tracebridge.h"

#define NOINSTR __attribute__((no_instrument_function))

#ifdef MOOBENCH_MANUAL
static tb_sig_t sig;
static int use_strings;
#define OP "long moobench.MonitoredClass.monitoredMethod(int)"
#define CLS "moobench.MonitoredClass"
#endif

__attribute__((noinline, noclone)) long monitored_method(int depth)
{
#ifdef MOOBENCH_MANUAL
	if (use_strings)
		tb_before(OP, CLS);
	else
		tb_before_sig(sig);
#endif
	long r = 1;
	if (depth > 1) {
		r = monitored_method(depth - 1);
		__asm__ volatile("" : "+r"(r)); /* no accumulator/tail-call rewrite */
		r++;
	}
#ifdef MOOBENCH_MANUAL
	if (use_strings)
		tb_after(OP, CLS);
	else
		tb_after_sig(sig);
#endif
	return r;
}

NOINSTR static double now_ns(clockid_t clock)
{
	struct timespec ts;
	clock_gettime(clock, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

NOINSTR int main(int argc, char **argv)
{
	long calls = argc > 1 ? atol(argv[1]) : 1000000;
	int depth = argc > 2 ? atoi(argv[2]) : 10;
	if (calls < 1 || depth < 1) {
		fprintf(stderr, "usage: moobench calls depth [sig|str]\n");
		return 2;
	}
#ifdef MOOBENCH_MANUAL
	use_strings = argc > 3 && !strcmp(argv[3], "str");
	sig = tb_sig(OP, CLS);
#endif
	long sum = 0;
	long warm = calls / 10 + 1;
	for (long i = 0; i < warm; i++)
		sum += monitored_method(depth);
	tb_flush(10000);
	struct tb_stats before;
	tb_get_stats(&before);

	double t0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	for (long i = 0; i < calls; i++)
		sum += monitored_method(depth);
	double t1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);

	tb_flush(30000);
	struct tb_stats st;
	tb_get_stats(&st);
	double per_call = (t1 - t0) / (double)calls;
	printf("moobench: calls=%ld depth=%d ns_per_call=%.1f ns_per_invocation=%.2f cpu_ns_per_call=%.1f sum=%ld "
	       "sent=%llu dropped=%llu total_sent=%llu\n",
	       calls, depth, per_call, per_call / depth, (c1 - c0) / (double)calls, sum,
	       (unsigned long long)(st.sent - before.sent),
	       (unsigned long long)(st.dropped - before.dropped), (unsigned long long)st.sent);
	return 0;
}
