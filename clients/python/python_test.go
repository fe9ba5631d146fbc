// Package pyclient_test holds the Go tests of the Python monitoring client
// in clients/python: the golden encoding stream the Python unit tests
// compare against (written by tracebridge's own Kieker encoder), a run of
// those unit tests, and end-to-end runs of examples/bookstore.py against a
// real `tracebridge serve` whose Kieker log is read back and compared with
// the call tree the example says it executed.
package pyclient_test

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/trace"
)

var update = flag.Bool("update", false, "rewrite tests/testdata/golden.bin")

func TestMain(m *testing.M) { os.Exit(bridgetest.Run(m)) }

// ---- golden stream ----

// TestGolden encodes tests/testdata/golden.json with tracebridge's Kieker
// encoder (single-socket mode) and compares the bytes with golden.bin, the
// stream the Python unit tests expect their encoder to produce. -update
// rewrites golden.bin.
func TestGolden(t *testing.T) {
	bridgetest.CheckGolden(t, filepath.Join("tests", "testdata", "golden.json"), filepath.Join("tests", "testdata", "golden.bin"), *update)
}

// TestUnittest runs the Python client's unit tests.
func TestUnittest(t *testing.T) {
	py := bridgetest.Installed(t, "python3")
	cmd := exec.Command(py, "-m", "unittest", "discover", "-s", "tests", "-t", ".")
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python3 -m unittest: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	t.Logf("%s", lines[len(lines)-1])
}

// ---- end to end ----

// TestBookstore runs the example against a real bridge and compares the
// logged traces with the ones the example reports.
func TestBookstore(t *testing.T) {
	py := bridgetest.Installed(t, "python3")
	br := bridgetest.StartConfig(t, bridgetest.LogConfig(`{name: py, type: kieker-tcp, listen: "127.0.0.1:0"}`))
	r, ex := runExample(t, py, br.Port("py"), "3")
	br.Stop()
	if r.Code != 0 {
		t.Fatalf("bookstore.py exited %d\n%s", r.Code, r.Stderr)
	}
	recs := bridgetest.ReadLog(t, br.LogDir)
	trees, threads := traces(t, recs)
	if diff := cmp.Diff(slices.Sorted(slices.Values(ex.Expect)), slices.Sorted(slices.Values(trees))); diff != "" {
		t.Fatalf("logged traces differ from the executed ones (-executed +logged):\n%s", diff)
	}
	if len(ex.Expect) != 12 {
		t.Errorf("the example reported %d traces, want 12", len(ex.Expect))
	}
	// Failed calls carry their exception; the worker thread has its own id.
	var causes []string
	for _, r := range recs {
		if r.Type.Name == record.AfterOperationFailedEvent {
			causes = append(causes, r.Values[5].Str())
		}
	}
	if len(causes) != 9 || !strings.HasPrefix(causes[0], "KeyError('9-999-99999-9')") {
		t.Errorf("causes %q", causes)
	}
	if threads < 2 {
		t.Errorf("traces came from %d threads, want the main thread and the workers", threads)
	}
	if stats := ex.Stats[0]; stats["sent"] != float64(len(recs)-1) || stats["dropped"] != 0.0 {
		t.Errorf("stats %v with %d records logged", stats, len(recs)-1)
	}
	if r.Stderr != "" {
		t.Errorf("stderr: %s", r.Stderr)
	}
}

// TestBookstoreWithoutBridge: nothing listens; the example still exits 0,
// promptly, and reports what it dropped.
func TestBookstoreWithoutBridge(t *testing.T) {
	py := bridgetest.Installed(t, "python3")
	port := servicetest.FreePort(t)
	r, ex := runExample(t, py, fmt.Sprint(port), "2")
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	if r.Elapsed > 20*time.Second {
		t.Errorf("took %v", r.Elapsed)
	}
	stats := ex.Stats[0]
	rec := stats["recorded"].(float64)
	if rec != 96 || stats["dropped"] != rec || stats["sent"] != 0.0 {
		t.Errorf("stats %v", stats)
	}
	if !strings.Contains(r.Stderr, "tracebridge: 96 of 96 records dropped") {
		t.Errorf("no drop report on stderr: %q", r.Stderr)
	}
	t.Logf("exited in %v: %s", r.Elapsed.Round(time.Millisecond), strings.TrimSpace(r.Stderr))
}

// TestThreads runs examples/threads.py (threads, a thread pool, asyncio
// tasks and asyncio.to_thread inside each request) against a real bridge
// and runs the log through the bridge's trace assembler: one unbroken
// trace per request, whose call tree across threads and tasks is the one
// the example says it executed.
func TestThreads(t *testing.T) {
	py := bridgetest.Installed(t, "python3")
	br := bridgetest.StartConfig(t, bridgetest.LogConfig(`{name: py, type: kieker-tcp, listen: "127.0.0.1:0"}`))
	const requests = 3
	cmd := exec.Command(py, filepath.Join("examples", "threads.py"), fmt.Sprint(requests))
	cmd.Env = append(os.Environ(), "TRACEBRIDGE_HOST=127.0.0.1", "TRACEBRIDGE_PORT="+br.Port("py"), "PYTHONDONTWRITEBYTECODE=1")
	r := bridgetest.Exec(t, cmd)
	br.Stop()
	if r.Code != 0 || r.Stderr != "" {
		t.Fatalf("threads.py exited %d\n%s", r.Code, r.Stderr)
	}
	ex := bridgetest.ParseAccount(t, r)
	want := map[int][]string{} // request → "PATH\tOUTCOME", sorted
	calls := 0
	for _, line := range strings.Split(r.Stdout, "\n") {
		f := strings.Split(line, "\t")
		if f[0] != "call" {
			continue
		}
		req, err := strconv.Atoi(f[1])
		if len(f) != 4 || err != nil {
			t.Fatalf("bad line %q", line)
		}
		want[req] = append(want[req], f[2]+"\t"+f[3])
		calls++
	}
	recs := bridgetest.ReadLog(t, br.LogDir)
	if stats := ex.Stats[0]; stats["sent"] != float64(len(recs)-1) || stats["dropped"] != 0.0 {
		t.Errorf("stats %v with %d records logged", stats, len(recs)-1)
	}
	// Every SplitEvent has its child trace: per request two threads,
	// three work items, two tasks and two to_thread calls (and, before
	// Python 3.11, asyncio.run's main task).
	splits, children := 0, 0
	for _, r := range recs {
		switch {
		case r.Type.Name == record.SplitEvent:
			splits++
		case r.Type.Name == record.TraceMetadata && r.Values[4].Int() != r.Values[0].Int():
			children++
		}
	}
	if splits != children || children < requests*9 {
		t.Errorf("%d SplitEvents and %d child traces in the log, want as many, at least %d", splits, children, requests*9)
	}
	_ = bridgetest.CallTrees(t, recs) // every Kieker trace sound on its own
	// Every split's children have InvocationRecords naming invocations in the log.
	if invs := bridgetest.CheckInvocations(t, recs); len(invs) < children {
		t.Errorf("%d InvocationRecords for %d child traces", len(invs), children)
	}

	var assembled []*trace.Trace
	a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Emit: func(tr *trace.Trace) { assembled = append(assembled, tr) }})
	for i := range recs {
		a.Add(&recs[i], nil)
	}
	a.Flush()
	if len(assembled) != requests {
		t.Fatalf("the assembler built %d traces from %d requests", len(assembled), requests)
	}
	// The requests ran one after the other: their traces in start order.
	sort.Slice(assembled, func(i, j int) bool { return assembled[i].Start() < assembled[j].Start() })
	spans := 0
	for i, tr := range assembled {
		req := i + 1
		if len(tr.Broken) > 0 {
			t.Errorf("request %d: trace broken: %q", req, tr.Broken)
		}
		if roots := tr.Children(-1); len(roots) != 1 {
			t.Errorf("request %d: %d root spans, want 1", req, len(roots))
		}
		var got []string
		for j := range tr.Spans {
			var ops []string
			for k := int32(j); k >= 0; k = tr.Spans[k].Parent {
				ops = append([]string{tr.Spans[k].Operation}, ops...)
			}
			outcome := "ok"
			if tr.Spans[j].Error {
				outcome = "failed"
			}
			got = append(got, strings.Join(ops, " | ")+"\t"+outcome)
		}
		spans += len(got)
		sort.Strings(got)
		w := slices.Sorted(slices.Values(want[req]))
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("request %d: assembled tree differs from the calls executed (-executed +assembled):\n%s", req, diff)
		}
	}
	if spans != calls {
		t.Errorf("%d spans assembled, the example made %d calls", spans, calls)
	}
}

// TestTasks runs examples/tasks.py against a real bridge: jobs a trace
// submits to a ThreadPoolExecutor with one worker thread, started before
// the trace and reused for every job, and requests a process serves on
// behalf of a caller in another process on another node
// (invocation_header, continue_from). `tracebridge traces --json`
// assembles the log into one tree per trace, every job under the submit
// call that created it and every callee's calls under the caller's call,
// on the two nodes; the pooled jobs stay under their submit calls when
// only the InvocationRecords link them.
func TestTasks(t *testing.T) {
	py := bridgetest.Installed(t, "python3")
	br := bridgetest.StartConfig(t, bridgetest.LogConfig(`{name: py, type: kieker-tcp, listen: "127.0.0.1:0"}`))
	const jobs, requests = 4, 2
	tasks := func(args ...string) bridgetest.Result {
		cmd := exec.Command(py, append([]string{filepath.Join("examples", "tasks.py")}, args...)...)
		cmd.Env = append(bridgetest.CleanEnv(), "TRACEBRIDGE_HOST=127.0.0.1", "TRACEBRIDGE_PORT="+br.Port("py"), "PYTHONDONTWRITEBYTECODE=1")
		r := bridgetest.Exec(t, cmd)
		if r.Code != 0 || r.Stderr != "" {
			t.Fatalf("tasks.py %v exited %d\n%s%s", args, r.Code, r.Stdout, r.Stderr)
		}
		return r
	}
	pool := tasks("pool", fmt.Sprint(jobs), "--node", "pool-host")
	calls := tasks("caller", fmt.Sprint(requests), "--node", "node-a")
	br.Stop()
	recs := bridgetest.ReadLog(t, br.LogDir)
	var sent float64
	for _, r := range []bridgetest.Result{pool, calls} {
		for _, st := range bridgetest.ParseAccount(t, r).Stats {
			if st["dropped"] != 0.0 {
				t.Errorf("stats %v", st)
			}
			sent += st["sent"].(float64)
		}
	}
	if sent != float64(len(recs)-1) {
		t.Errorf("the processes sent %v records, the log holds %d", sent, len(recs)-1)
	}
	bridgetest.CheckTasks(t, br.LogDir, recs, bridgetest.Tasks{
		Jobs: jobs, Requests: requests, MaxThreads: 1, Pool: pool, Calls: calls,
	})
}

// TestInvocationEncoding encodes InvocationRecords with the Python encoder
// and decodes them with tracebridge's Kieker decoder and catalogue.
func TestInvocationEncoding(t *testing.T) {
	py := bridgetest.Installed(t, "python3")
	const script = `
import sys
from tracebridge import kieker
items = [(kieker.INV, 1000, 9, 4242, 'node-b', 77, 8, 4141, 'nöde-a', 5, 42),
         (kieker.INV, 2000, 10, 4242, 'node-b', 78, -1, 0, '', -1, 43)]
buf = bytearray()
assert kieker.append_records(buf, kieker.Registry(), items, logging_timestamps=True) == 2
sys.stdout.buffer.write(buf)
`
	r := bridgetest.Exec(t, exec.Command(py, "-c", script))
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s", r.Code, r.Stderr)
	}
	dec := kieker.NewDecoder(kieker.Options{Inline: true, Catalog: trace.Types()})
	var b record.Batch
	if n, err := dec.Decode([]byte(r.Stdout), &b); err != nil || n != len(r.Stdout) {
		t.Fatalf("decoded %d of %d bytes: %v", n, len(r.Stdout), err)
	}
	got := bridgetest.Invocations(b.Records)
	want := []trace.Invocation{
		{ID: 9, ProcessID: 4242, Node: "node-b", RunnableID: 77, CreationTime: 1000, ParentID: 8, ParentProcessID: 4141, ParentNode: "nöde-a", ParentOrderID: 5, TraceID: 42},
		{ID: 10, ProcessID: 4242, Node: "node-b", RunnableID: 78, CreationTime: 2000, ParentID: -1, ParentOrderID: -1, TraceID: 43},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(b.Records) != 2 || b.Records[0].LoggingTimestamp != 1000 || b.Records[1].LoggingTimestamp != 2000 {
		t.Errorf("logging timestamps: %+v", b.Records)
	}
}

// runExample runs examples/bookstore.py against 127.0.0.1:port.
func runExample(t *testing.T, py, port string, args ...string) (bridgetest.Result, bridgetest.Account) {
	t.Helper()
	cmd := exec.Command(py, append([]string{filepath.Join("examples", "bookstore.py")}, args...)...)
	cmd.Env = append(os.Environ(), "TRACEBRIDGE_HOST=127.0.0.1", "TRACEBRIDGE_PORT="+port, "PYTHONDONTWRITEBYTECODE=1")
	r := bridgetest.Exec(t, cmd)
	return r, bridgetest.ParseAccount(t, r)
}

// traces returns the call tree of every trace in the log and the number of
// distinct TraceMetadata.threadId values; every trace must be a root.
func traces(t *testing.T, recs []record.Record) ([]string, int) {
	t.Helper()
	threads := map[int64]bool{}
	for _, r := range recs {
		if r.Type.Name != record.TraceMetadata {
			continue
		}
		threads[r.Values[1].Int()] = true
		if r.Values[4].Int() != r.Values[0].Int() || r.Values[5].Int() != -1 {
			t.Errorf("trace %d: parent %d/%d, want a root trace", r.Values[0].Int(), r.Values[4].Int(), r.Values[5].Int())
		}
	}
	return bridgetest.CallTrees(t, recs), len(threads)
}

// ---- encoder round trip ----

const encodeScript = `
import json, sys
from tracebridge import kieker
kinds = {'TraceMetadata': kieker.META, 'BeforeOperationEvent': kieker.BEFORE,
         'AfterOperationEvent': kieker.AFTER, 'AfterOperationFailedEvent': kieker.FAILED}
items = []
for r in json.load(open(sys.argv[1], encoding='utf-8')):
    k = kinds[r['type']]
    if k == kieker.META:
        items.append((k, -1, r['traceId'], r['threadId'], r['sessionId'], r['hostname'], r['parentTraceId'], r['parentOrderId']))
    else:
        it = (k, r['timestamp'], r['traceId'], r['orderIndex'], r['operationSignature'], r['classSignature'])
        items.append(it + ((r['cause'],) if k == kieker.FAILED else ()))
buf = bytearray()
reg = kieker.Registry()
for i in range(0, len(items), 97):
    assert kieker.append_records(buf, reg, items[i:i + 97]) == len(items[i:i + 97])
sys.stdout.buffer.write(buf)
`

// TestEncoderRoundTrip encodes random records with the Python encoder and
// decodes them with tracebridge's Kieker decoder (in random pieces).
func TestEncoderRoundTrip(t *testing.T) {
	py := bridgetest.Installed(t, "python3")
	bridgetest.EncoderRoundTrip(t, 3000, func(in string) []byte {
		r := bridgetest.Exec(t, exec.Command(py, "-c", encodeScript, in))
		if r.Code != 0 {
			t.Fatalf("encoding: exit %d\n%s", r.Code, r.Stderr)
		}
		return []byte(r.Stdout)
	})
}
