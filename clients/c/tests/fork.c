/*
 * fork.c — monitoring across fork(): the child gets its own writer thread,
 * connection, string registry and trace ids; the trace the parent had open
 * is closed in the child (its After there is ignored and counted as
 * unbalanced).
 *
 * Prints "fork parent: sent=S dropped=D" and "fork child: sent=S
 * dropped=D unbalanced=U".
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tracebridge.h"

int main(void)
{
	tb_before("void parent.run()", "parent");
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		tb_after("void parent.run()", "parent"); /* entered in the parent: ignored */
		for (int i = 0; i < 3; i++) {
			tb_before("void child.work()", "child");
			tb_after("void child.work()", "child");
		}
		tb_flush(5000);
		struct tb_stats st;
		tb_get_stats(&st);
		printf("fork child: sent=%llu dropped=%llu unbalanced=%llu\n", (unsigned long long)st.sent,
		       (unsigned long long)st.dropped, (unsigned long long)st.unbalanced);
		return 0;
	}
	for (int i = 0; i < 3; i++) {
		tb_before("void parent.work()", "parent");
		tb_after("void parent.work()", "parent");
	}
	tb_after("void parent.run()", "parent");
	int status;
	waitpid(pid, &status, 0);
	tb_flush(5000);
	struct tb_stats st;
	tb_get_stats(&st);
	printf("fork parent: sent=%llu dropped=%llu\n", (unsigned long long)st.sent, (unsigned long long)st.dropped);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
