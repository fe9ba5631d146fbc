/*
 * threads.c — one trace across threads: compiled with
 * -finstrument-functions and linked with
 * -Wl,--wrap=pthread_create,--wrap=pthread_join, its pthread_create and
 * pthread_join calls go through tb_pthread_create/tb_pthread_join, so a
 * thread started inside a traced call continues the trace: the starting
 * thread records a SplitEvent, the new thread's calls form a child trace
 * linked to it, and the join records a JoinEvent. No probe is in the code.
 *
 *   threads [requests] [workers] [depth]
 *
 * main handles the requests; handle starts `workers` threads that search
 * recursively (search, depth levels of two calls each) and joins them,
 * then starts a notify thread that starts an audit thread of its own.
 * With main instrumented the whole run is ONE trace (main → handle →
 * worker → search …, notify → audit); with TRACEBRIDGE_EXCLUDE=main each
 * handle is the root of a trace of its own.
 *
 * The program keeps its own account of the calls (excluded from
 * instrumentation with no_instrument_function): one line per call,
 *
 *   call PATH
 *
 * where PATH is the functions from main down to the call, across threads,
 * joined by "/", then "threads: calls=N threads=T sent=S dropped=D".
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tracebridge.h"

#define NOINSTR __attribute__((no_instrument_function))

/* ---- the account: the path of open calls, per thread ---- */

enum { PATH_MAX_LEN = 1024 };
static __thread char path[PATH_MAX_LEN];
static __thread size_t path_len;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int calls, threads_started;

NOINSTR static size_t enter(const char *name)
{
	size_t old = path_len;
	int n = snprintf(path + path_len, sizeof path - path_len, "%s%s", path_len ? "/" : "", name);
	if (n > 0 && (size_t)n < sizeof path - path_len)
		path_len += (size_t)n;
	pthread_mutex_lock(&mu);
	printf("call %s\n", path);
	calls++;
	pthread_mutex_unlock(&mu);
	return old;
}

NOINSTR static void leave(size_t old)
{
	path_len = old;
	path[old] = 0;
}

/* A thread's start: the path of the call that started it. */
struct start {
	char from[PATH_MAX_LEN];
	int depth;
};

NOINSTR static void adopt(const struct start *s)
{
	snprintf(path, sizeof path, "%s", s->from);
	path_len = strlen(path);
}

NOINSTR static void spawn(pthread_t *t, void *(*fn)(void *), struct start *s, int depth)
{
	snprintf(s->from, sizeof s->from, "%s", path);
	s->depth = depth;
	pthread_mutex_lock(&mu);
	threads_started++;
	pthread_mutex_unlock(&mu);
	if (pthread_create(t, NULL, fn, s) != 0) {
		perror("pthread_create");
		exit(1);
	}
}

/* ---- the instrumented program ---- */

static int depth_of_search = 3;

static long search(int depth)
{
	size_t at = enter("search");
	long n = 1;
	if (depth > 1)
		n += search(depth - 1) + search(depth - 1);
	leave(at);
	return n;
}

static void *worker(void *arg)
{
	struct start *s = arg;
	adopt(s);
	size_t at = enter("worker");
	search(s->depth);
	leave(at);
	return NULL;
}

static void *audit(void *arg)
{
	adopt(arg);
	size_t at = enter("audit");
	leave(at);
	return NULL;
}

static void *notify(void *arg)
{
	adopt(arg);
	size_t at = enter("notify");
	pthread_t t;
	struct start s;
	spawn(&t, audit, &s, 0);
	pthread_join(t, NULL);
	leave(at);
	return NULL;
}

static void handle(int workers)
{
	size_t at = enter("handle");
	pthread_t ts[64];
	struct start ss[64];
	for (int i = 0; i < workers; i++)
		spawn(&ts[i], worker, &ss[i], depth_of_search);
	for (int i = 0; i < workers; i++)
		pthread_join(ts[i], NULL);
	pthread_t t;
	struct start s;
	spawn(&t, notify, &s, 0);
	pthread_join(t, NULL);
	leave(at);
}

int main(int argc, char **argv)
{
	size_t at = enter("main");
	int requests = argc > 1 ? atoi(argv[1]) : 2;
	int workers = argc > 2 ? atoi(argv[2]) : 2;
	if (argc > 3)
		depth_of_search = atoi(argv[3]);
	if (requests < 0 || workers < 0 || workers > 64 || depth_of_search < 1 || depth_of_search > 12) {
		fprintf(stderr, "usage: threads [requests] [workers 0-64] [depth 1-12]\n");
		return 2;
	}
	for (int i = 0; i < requests; i++)
		handle(workers);
	leave(at);
	tb_flush(5000);
	struct tb_stats st;
	tb_get_stats(&st);
	printf("threads: calls=%d threads=%d sent=%llu dropped=%llu\n", calls, threads_started,
	       (unsigned long long)st.sent, (unsigned long long)st.dropped);
	return 0;
}
