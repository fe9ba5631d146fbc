/*
 * manual.c — probes placed by hand in a small multi-threaded "shop".
 *
 *   manual [threads] [orders-per-thread] [pause-us]
 *
 * Each order is one trace (implicit: it starts at the first tb_before and
 * ends when the outermost operation returns):
 *
 *   void shop.Cart.checkout(int)                      shop.Cart
 *     int shop.Inventory.reserve(int)                 shop.Inventory
 *     boolean shop.Payment.charge(long)               shop.Payment
 *       (every 4th order fails: AfterOperationFailedEvent, "card declined")
 *
 * Then the main thread opens an explicit trace holding two top-level
 * operations; inside the second it starts an archiver thread with
 * tb_pthread_create (a SplitEvent in the report trace, the archiver's calls
 * a child trace linked to it, a JoinEvent at tb_pthread_join), and hands
 * work to a mailer thread started with plain pthread_create, which opens
 * its child trace itself from the split point tb_trace_split returned (as
 * a thread pool's worker would). At the end it prints what it produced:
 *
 *   manual: orders=N traces=T records=R sent=S dropped=D connects=C
 *
 * The daily report's signature is not ASCII: strings are sent as UTF-8
 * with their byte length.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "tracebridge.h"

static int orders = 5;
static long pause_us;

static void pause_a_little(void)
{
	if (pause_us > 0) {
		struct timespec ts = { pause_us / 1000000, (pause_us % 1000000) * 1000 };
		nanosleep(&ts, NULL);
	}
}

static int reserve(int item)
{
	tb_before("int shop.Inventory.reserve(int)", "shop.Inventory");
	int ok = item >= 0;
	tb_after("int shop.Inventory.reserve(int)", "shop.Inventory");
	return ok;
}

static int charge(long cents, int fail)
{
	/* The fast form: interned once, shared by all threads. */
	static _Atomic tb_sig_t shared;
	tb_sig_t sig = atomic_load_explicit(&shared, memory_order_relaxed);
	if (!sig)
		atomic_store_explicit(&shared, sig = tb_sig("boolean shop.Payment.charge(long)", "shop.Payment"),
		                      memory_order_relaxed);
	tb_before_sig(sig);
	if (fail) {
		tb_after_failed_sig(sig, "card declined");
		return 0;
	}
	tb_after_sig(sig);
	return cents > 0;
}

static void checkout(int order)
{
	tb_before("void shop.Cart.checkout(int)", "shop.Cart");
	reserve(order);
	charge(100 + order, order % 4 == 3);
	tb_after("void shop.Cart.checkout(int)", "shop.Cart");
}

static void *customer(void *arg)
{
	int id = (int)(long)arg;
	for (int i = 0; i < orders; i++) {
		checkout(id * 100000 + i);
		pause_a_little();
	}
	return NULL;
}

/* Started with tb_pthread_create: its first probe opens the child trace. */
static void *archiver(void *arg)
{
	(void)arg;
	tb_before("void shop.Archive.store()", "shop.Archive");
	tb_after("void shop.Archive.store()", "shop.Archive");
	return NULL;
}

struct handoff {
	int64_t trace;
	int32_t order;
};

/* Started with pthread_create: the split point comes with the work. */
static void *mailer(void *arg)
{
	struct handoff *h = arg;
	tb_trace_start_child(h->trace, h->order);
	tb_before("void shop.Mail.send()", "shop.Mail");
	tb_after("void shop.Mail.send()", "shop.Mail");
	tb_trace_end();
	return NULL;
}

int main(int argc, char **argv)
{
	int threads = argc > 1 ? atoi(argv[1]) : 4;
	if (argc > 2)
		orders = atoi(argv[2]);
	if (argc > 3)
		pause_us = atol(argv[3]);
	if (threads < 1 || threads > 256 || orders < 0) {
		fprintf(stderr, "usage: manual [threads 1-256] [orders-per-thread] [pause-us]\n");
		return 2;
	}

	pthread_t tids[256];
	for (int i = 0; i < threads; i++)
		pthread_create(&tids[i], NULL, customer, (void *)(long)i);
	for (int i = 0; i < threads; i++)
		pthread_join(tids[i], NULL);

	/* An explicit trace: two top-level operations; the second hands work
	 * to two threads, each a child trace split off inside it. */
	tb_trace_start();
	tb_before("void shop.Report.daily(Währung)", "shop.Report");
	tb_after("void shop.Report.daily(Währung)", "shop.Report");
	tb_before("void shop.Report.audit()", "shop.Report");
	pthread_t t;
	tb_pthread_create(&t, NULL, archiver, NULL); /* SplitEvent */
	tb_pthread_join(t, NULL);                    /* JoinEvent */
	struct handoff h;
	tb_trace_split(&h.trace, &h.order); /* SplitEvent */
	pthread_create(&t, NULL, mailer, &h);
	pthread_join(t, NULL);
	tb_after("void shop.Report.audit()", "shop.Report");
	tb_trace_end();

	tb_flush(5000);
	struct tb_stats st;
	tb_get_stats(&st);
	int n = threads * orders;
	/* Per order a TraceMetadata and 6 events; the report trace 8 records,
	 * the archiver's and the mailer's 3 each, and the InvocationRecords of
	 * the report trace (sent at its first tb_pthread_create) and of the
	 * archiver's (tb_trace_split links the mailer by Kieker's records only). */
	printf("manual: orders=%d traces=%d records=%d sent=%llu dropped=%llu connects=%llu\n", n, n + 3, n * 7 + 16,
	       (unsigned long long)st.sent, (unsigned long long)st.dropped, (unsigned long long)st.connects);
	return 0;
}
