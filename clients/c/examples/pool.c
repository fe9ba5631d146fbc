/*
 * pool.c — invocation identifiers: work handed to a thread pool whose
 * threads outlive every trace, and work another process does on behalf of
 * a call, end up in the caller's call tree.
 *
 *   pool pool [workers] [jobs]    a trace submits jobs to a pool of threads
 *   pool caller [requests]        each request runs this program again as
 *                                 a callee, passing the invocation header
 *
 * In pool mode, the workers are started before any trace (plain
 * pthread_create) and take jobs from a queue; the trace
 * (pool.Dispatcher.run) submits each job inside pool.Dispatcher.submit,
 * where tb_task_create records the split and the creating invocation; the
 * worker runs the job in the trace tb_trace_start_task opens
 * (pool.Worker.work → pool.Worker.step) and ends it with tb_trace_end.
 *
 * In caller mode, each request is a trace rpc.Client.call that exports
 * tb_invocation_header and runs `pool callee PATH` (another process, with
 * TRACEBRIDGE_HOSTNAME set to this node's name plus "-callee" and the
 * header in TRACEBRIDGE_INVOCATION); the callee opens its trace with
 * tb_trace_start_remote and runs rpc.Server.handle → rpc.Server.lookup.
 *
 * Every process prints the path of each call it makes across threads and
 * processes ("path OP | OP | ...@NODE") and a summary line
 * ("pool: sent=S dropped=D").
 */
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tracebridge.h"

extern char **environ;

#define OP_RUN "void pool.Dispatcher.run()"
#define OP_SUBMIT "void pool.Dispatcher.submit(int)"
#define OP_WORK "void pool.Worker.work(int)"
#define OP_STEP "void pool.Worker.step()"
#define OP_CALL "int rpc.Client.call(int)"
#define OP_HANDLE "void rpc.Server.handle()"
#define OP_LOOKUP "void rpc.Server.lookup()"

static char node[256];
static pthread_mutex_t out_mu = PTHREAD_MUTEX_INITIALIZER;

/* path prints "path PREFIX | OP@NODE" and stores PREFIX | OP in out. */
static void path(char *out, size_t n, const char *prefix, const char *op)
{
	char p[1024];
	snprintf(p, sizeof p, "%s%s%s", prefix, *prefix ? " | " : "", op);
	pthread_mutex_lock(&out_mu);
	printf("path %s@%s\n", p, node);
	fflush(stdout);
	pthread_mutex_unlock(&out_mu);
	if (out != NULL)
		snprintf(out, n, "%s", p);
}

/* ---- the pool ---- */

struct job {
	int n;
	struct tb_task task; /* made where the job was created */
	char path[1024];     /* the submit call's, for the account */
	struct job *next;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t more = PTHREAD_COND_INITIALIZER, finished = PTHREAD_COND_INITIALIZER;
static struct job *head, **tail = &head;
static int done, closing;

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&mu);
		while (head == NULL && !closing)
			pthread_cond_wait(&more, &mu);
		struct job *j = head;
		if (j == NULL) {
			pthread_mutex_unlock(&mu);
			return NULL;
		}
		head = j->next;
		if (head == NULL)
			tail = &head;
		pthread_mutex_unlock(&mu);

		tb_trace_start_task(&j->task);
		char p[1024];
		tb_before(OP_WORK, "pool.Worker");
		path(p, sizeof p, j->path, OP_WORK);
		tb_before(OP_STEP, "pool.Worker");
		path(NULL, 0, p, OP_STEP);
		tb_after(OP_STEP, "pool.Worker");
		tb_after(OP_WORK, "pool.Worker");
		tb_trace_end();
		free(j);

		pthread_mutex_lock(&mu);
		done++;
		pthread_cond_broadcast(&finished);
		pthread_mutex_unlock(&mu);
	}
}

static int run_pool(int workers, int jobs)
{
	pthread_t th[64];
	for (int i = 0; i < workers; i++)
		pthread_create(&th[i], NULL, worker, NULL);
	char run[1024];
	tb_before(OP_RUN, "pool.Dispatcher");
	path(run, sizeof run, "", OP_RUN);
	for (int i = 0; i < jobs; i++) {
		struct job *j = calloc(1, sizeof *j);
		if (j == NULL)
			return 1;
		j->n = i;
		tb_before(OP_SUBMIT, "pool.Dispatcher");
		path(j->path, sizeof j->path, run, OP_SUBMIT);
		tb_task_create(&j->task); /* the job's parent: this call */
		pthread_mutex_lock(&mu);
		*tail = j;
		tail = &j->next;
		pthread_cond_signal(&more);
		pthread_mutex_unlock(&mu);
		tb_after(OP_SUBMIT, "pool.Dispatcher");
	}
	pthread_mutex_lock(&mu);
	while (done < jobs)
		pthread_cond_wait(&finished, &mu);
	closing = 1;
	pthread_cond_broadcast(&more);
	pthread_mutex_unlock(&mu);
	tb_after(OP_RUN, "pool.Dispatcher");
	for (int i = 0; i < workers; i++)
		pthread_join(th[i], NULL);
	return 0;
}

/* ---- across processes ---- */

/* spawn_callee runs this program as the callee with the header and the
 * callee's node name in its environment, and waits for it. */
static int spawn_callee(const char *header, const char *prefix)
{
	size_t n = 0;
	while (environ[n] != NULL)
		n++;
	char **env = calloc(n + 3, sizeof *env);
	if (env == NULL)
		return -1;
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (strncmp(environ[i], "TRACEBRIDGE_HOSTNAME=", 21) != 0 && strncmp(environ[i], "TRACEBRIDGE_INVOCATION=", 23) != 0)
			env[k++] = environ[i];
	}
	char host[300], inv[TB_INVOCATION_HEADER_MAX + 32];
	snprintf(host, sizeof host, "TRACEBRIDGE_HOSTNAME=%s-callee", node);
	snprintf(inv, sizeof inv, "TRACEBRIDGE_INVOCATION=%s", header);
	env[k++] = host;
	env[k++] = inv;
	char *argv[] = { "pool", "callee", (char *)prefix, NULL };
	pid_t pid;
	fflush(stdout);
	int rc = posix_spawn(&pid, "/proc/self/exe", NULL, NULL, argv, env);
	free(env);
	if (rc != 0)
		return -1;
	int status;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return -1;
	return 0;
}

static int run_caller(int requests)
{
	for (int i = 0; i < requests; i++) {
		char p[1024], header[TB_INVOCATION_HEADER_MAX];
		tb_before(OP_CALL, "rpc.Client");
		path(p, sizeof p, "", OP_CALL);
		if (tb_invocation_header(header, sizeof header) == 0) {
			fprintf(stderr, "pool: no invocation header\n");
			return 1;
		}
		if (spawn_callee(header, p) != 0) {
			fprintf(stderr, "pool: the callee failed\n");
			return 1;
		}
		tb_after(OP_CALL, "rpc.Client");
	}
	return 0;
}

static int run_callee(const char *prefix)
{
	char p[1024];
	tb_trace_start_remote(getenv("TRACEBRIDGE_INVOCATION"));
	tb_before(OP_HANDLE, "rpc.Server");
	path(p, sizeof p, prefix, OP_HANDLE);
	tb_before(OP_LOOKUP, "rpc.Server");
	path(NULL, 0, p, OP_LOOKUP);
	tb_after(OP_LOOKUP, "rpc.Server");
	tb_after(OP_HANDLE, "rpc.Server");
	tb_trace_end();
	return 0;
}

int main(int argc, char **argv)
{
	const char *h = getenv("TRACEBRIDGE_HOSTNAME");
	if (h != NULL && *h)
		snprintf(node, sizeof node, "%s", h);
	else if (gethostname(node, sizeof node - 1) != 0)
		snprintf(node, sizeof node, "<default-host>");
	const char *mode = argc > 1 ? argv[1] : "pool";
	int rc;
	if (!strcmp(mode, "pool")) {
		int workers = argc > 2 ? atoi(argv[2]) : 2, jobs = argc > 3 ? atoi(argv[3]) : 4;
		if (workers < 1 || workers > 64 || jobs < 0) {
			fprintf(stderr, "usage: pool pool [workers 1-64] [jobs]\n");
			return 2;
		}
		rc = run_pool(workers, jobs);
	} else if (!strcmp(mode, "caller")) {
		rc = run_caller(argc > 2 ? atoi(argv[2]) : 2);
	} else if (!strcmp(mode, "callee") && argc > 2) {
		rc = run_callee(argv[2]);
	} else {
		fprintf(stderr, "usage: pool pool|caller|callee ...\n");
		return 2;
	}
	tb_flush(5000);
	struct tb_stats st;
	tb_get_stats(&st);
	printf("pool: sent=%llu dropped=%llu\n", (unsigned long long)st.sent, (unsigned long long)st.dropped);
	return rc;
}
