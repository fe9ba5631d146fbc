package bridgetest

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/record"
)

// PrintedPaths returns the "path OP | …@NODE" lines a program printed,
// sorted, without the prefix.
func PrintedPaths(out string) []string {
	var paths []string
	for _, line := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(line, "path "); ok {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	return paths
}

// Tasks is the run of a client's tasks example the clients' tests share:
// a pool process on node "pool-host" ran Jobs jobs a trace submitted to
// its worker threads, and a caller process on node "node-a" made Requests
// requests, each served by a callee process on node "node-a-callee". Pool
// and Calls are the two processes' output, their "path" lines the calls
// they made.
type Tasks struct {
	Jobs, Requests int
	// MaxThreads is how many pooled threads may run the jobs (at least
	// one must); 0 leaves the threads unchecked.
	MaxThreads int
	Pool       Result
	Calls      Result
}

// CheckTasksRun checks a run of a tasks example against the bridge b
// whose processes print "dropped=N" when they end: both exited 0 with
// nothing on stderr and every process, the callees too, dropped nothing.
// Then it stops b and checks its log (CheckTasks).
func CheckTasksRun(tb testing.TB, b *Process, tk Tasks) {
	tb.Helper()
	for _, r := range []Result{tk.Pool, tk.Calls} {
		if r.Code != 0 || r.Stderr != "" {
			tb.Fatalf("tasks example exited %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
		}
	}
	if n := strings.Count(tk.Pool.Stdout+tk.Calls.Stdout, "dropped=0"); n != 2+tk.Requests {
		tb.Fatalf("%d processes report nothing dropped, want %d\n%s%s", n, 2+tk.Requests, tk.Pool.Stdout, tk.Calls.Stdout)
	}
	b.Stop()
	CheckTasks(tb, b.LogDir, ReadLog(tb, b.LogDir), tk)
}

// CheckTasks fails tb unless the log in dir, whose records are recs,
// holds what the tasks example did: sound InvocationRecords, one for the
// pool's trace, each job and both sides of each request; one pool process,
// one caller and one callee per request; `tracebridge traces --json` one
// tree per trace (the pool's and one per request) with exactly the paths
// the processes printed; and the same trees when only the
// InvocationRecords link the tasks.
func CheckTasks(tb testing.TB, dir string, recs []record.Record, tk Tasks) {
	tb.Helper()
	invs := CheckInvocations(tb, recs)
	if want := 1 + tk.Jobs + 2*tk.Requests; len(invs) != want {
		tb.Errorf("%d invocation records, want %d", len(invs), want)
	}
	pids := map[string]map[int32]bool{}
	threads := map[int64]bool{}
	for _, in := range invs {
		if pids[in.Node] == nil {
			pids[in.Node] = map[int32]bool{}
		}
		pids[in.Node][in.ProcessID] = true
		if in.Node == "pool-host" && in.ParentID != -1 {
			threads[in.RunnableID] = true
		}
	}
	if len(pids["pool-host"]) != 1 || len(pids["node-a"]) != 1 || len(pids["node-a-callee"]) != tk.Requests {
		tb.Errorf("processes per node: %v, want one pool, one caller and one callee per request", pids)
	}
	if tk.MaxThreads > 0 && (len(threads) > tk.MaxThreads || len(threads) == 0) {
		tb.Errorf("jobs ran on threads %v, want at most the %d workers", threads, tk.MaxThreads)
	}

	want := append(PrintedPaths(tk.Pool.Stdout), PrintedPaths(tk.Calls.Stdout)...)
	slices.Sort(want)
	traces := Traces(tb, dir)
	if len(traces) != 1+tk.Requests {
		tb.Fatalf("traces --json printed %d traces, want %d", len(traces), 1+tk.Requests)
	}
	var got []string
	for _, tr := range traces {
		if len(tr.Broken) > 0 || tr.Roots() != 1 {
			tb.Errorf("trace %s: %d roots, broken %q", tr.TraceID, tr.Roots(), tr.Broken)
		}
		if hosts := strings.Join(tr.Hosts, ","); hosts != "pool-host" && hosts != "node-a,node-a-callee" {
			tb.Errorf("trace %s on hosts %s", tr.TraceID, hosts)
		}
		got = append(got, tr.Paths(true)...)
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		tb.Errorf("assembled trees differ from the calls made (-made +assembled):\n%s", diff)
	}

	// Pooled work linked by its InvocationRecords alone.
	alone := Assemble(WithoutMetadataLinks(recs))
	if len(alone) != 1+tk.Requests {
		tb.Fatalf("without metadata links: %d traces, want %d", len(alone), 1+tk.Requests)
	}
	got = got[:0]
	for _, tr := range alone {
		if len(tr.Broken) > 0 || len(tr.Children(-1)) != 1 {
			tb.Errorf("without metadata links: trace %s: %d roots, broken %q", tr.ID, len(tr.Children(-1)), tr.Broken)
		}
		for i := range tr.Spans {
			var ops []string
			for j := int32(i); j >= 0; j = tr.Spans[j].Parent {
				ops = append(ops, tr.Spans[j].Operation)
			}
			slices.Reverse(ops)
			got = append(got, strings.Join(ops, " | ")+"@"+tr.Spans[i].Host)
		}
	}
	slices.Sort(got)
	if diff := cmp.Diff(want, got); diff != "" {
		tb.Errorf("without metadata links (-made +assembled):\n%s", diff)
	}
}
