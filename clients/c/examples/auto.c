/*
 * auto.c — automatic instrumentation: compiled with -finstrument-functions
 * and linked with libtracebridge.a, every function entry and exit becomes
 * a Before/After event, named from the executable's symbol table (static
 * functions included, no -rdynamic needed).
 *
 *   auto [rounds]
 *
 * The program prints the call tree it runs, one line per call:
 *
 *   call <depth> <function>
 *
 * (from its own bookkeeping, which is excluded from instrumentation with
 * no_instrument_function), then "auto: calls=N sent=S dropped=D".
 */
#include <stdio.h>
#include <stdlib.h>

#include "tracebridge.h"

#define NOINSTR __attribute__((no_instrument_function))

static int depth_now;
static int calls;

NOINSTR static void enter(const char *name)
{
	printf("call %d %s\n", depth_now++, name);
	calls++;
}

NOINSTR static void leave(void)
{
	depth_now--;
}

/* static: only in .symtab */
static int leaf(int x)
{
	enter("leaf");
	leave();
	return x + 1;
}

static long fib(int n)
{
	enter("fib");
	long r = n < 2 ? leaf(n) - 1 : fib(n - 1) + fib(n - 2);
	leave();
	return r;
}

/* global */
long tree(int depth, int fanout)
{
	enter("tree");
	long s = 1;
	if (depth > 0) {
		for (int i = 0; i < fanout; i++)
			s += tree(depth - 1, fanout);
	} else {
		s += leaf(depth);
	}
	leave();
	return s;
}

long compute(int round)
{
	enter("compute");
	long r = fib(4 + round) + tree(2, 2 + round);
	leave();
	return r;
}

int main(int argc, char **argv)
{
	enter("main");
	int rounds = argc > 1 ? atoi(argv[1]) : 2;
	long sum = 0;
	for (int i = 0; i < rounds; i++)
		sum += compute(i);
	tb_flush(5000);
	struct tb_stats st;
	tb_get_stats(&st);
	printf("auto: calls=%d sum=%ld sent=%llu dropped=%llu\n", calls, sum, (unsigned long long)st.sent,
	       (unsigned long long)st.dropped);
	leave();
	return 0;
}
