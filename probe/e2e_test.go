package probe

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

func TestMain(m *testing.M) {
	code := bridgetest.Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// example builds probe/example (once) and returns its path.
func example(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs programs")
	}
	return bridgetest.Build(t, "probe/example")
}

// runExample runs the example program with args.
func runExample(t *testing.T, bin string, args ...string) bridgetest.Result {
	t.Helper()
	cmd := exec.Command(bin, args...)
	cmd.Env = bridgetest.CleanEnv()
	return bridgetest.Exec(t, cmd)
}

// call is one executed call: its depth in its trace, its names and how it
// ended.
type call struct {
	Depth     int
	Class, Op string
	Outcome   string // "ok" or "failed CAUSE"
}

// trees holds the calls of every Kieker trace (one goroutine's part of a
// request), by traceId, in the order they began, and the parent of every
// child trace.
type trees struct {
	Calls   map[int64][]call
	Parents map[int64]int64
}

// executed is the example's account of what it did: the Kieker traces,
// and per request its root trace and the path of every call across
// goroutines ("OP | OP | …\tOUTCOME", sorted).
type executed struct {
	trees
	Requests map[int64]int // root traceId → request
	Paths    map[int][]string
	Forks    int
}

// parseExecuted reads the example's account of what it executed (see
// probe/example).
func parseExecuted(t *testing.T, stdout string) executed {
	t.Helper()
	ex := executed{trees: trees{Calls: map[int64][]call{}, Parents: map[int64]int64{}}, Requests: map[int64]int{}, Paths: map[int][]string{}}
	num := func(s string) int64 {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("bad number %q in the example's output", s)
		}
		return n
	}
	for _, line := range strings.Split(stdout, "\n") {
		f := strings.Split(line, "\t")
		switch {
		case f[0] == "request" && len(f) == 3:
			ex.Requests[num(f[2])] = int(num(f[1]))
		case f[0] == "call" && len(f) == 8:
			req, id, depth := int(num(f[1])), num(f[2]), int(num(f[3]))
			ex.Calls[id] = append(ex.Calls[id], call{depth, f[4], f[5], f[6]})
			ex.Paths[req] = append(ex.Paths[req], f[7]+"\t"+f[6])
		case f[0] == "fork" && len(f) == 3:
			ex.Parents[num(f[1])] = num(f[2])
			ex.Forks++
		case f[0] == "call", f[0] == "request", f[0] == "fork":
			t.Fatalf("bad line %q", line)
		}
	}
	for _, p := range ex.Paths {
		slices.Sort(p)
	}
	return ex
}

// rebuild reconstructs the call trees of every Kieker trace from the
// records: events of a trace in orderIndex order (SplitEvents and
// JoinEvents take order indexes too), nesting from Before/After. It checks
// that every After matches its Before, that timestamps do not go backwards
// within a trace and lie within [from, to], that a child trace's
// parentOrderId is a SplitEvent of its parent, that every JoinEvent
// names a child of its trace, and that the InvocationRecords say what the
// TraceMetadata say: every child trace's invocation names its parent
// trace's invocation and the SplitEvent's orderIndex.
func rebuild(t *testing.T, recs []record.Record, from, to int64) trees {
	t.Helper()
	tr := trees{Calls: map[int64][]call{}, Parents: map[int64]int64{}}
	type ev struct {
		order     int64
		ts        int64
		kind      string
		op, class string
		cause     string
		joined    int64
	}
	events := map[int64][]ev{}
	porders := map[int64]int64{}
	str := func(r *record.Record, f string) string { v, _ := r.Field(f); return v.Str() }
	num := func(r *record.Record, f string) int64 { v, _ := r.Field(f); return v.Int() }
	for i := range recs {
		r := &recs[i]
		switch r.Type.Name {
		case record.TraceMetadata:
			id, parent, porder := num(r, "traceId"), num(r, "parentTraceId"), num(r, "parentOrderId")
			if host := str(r, "hostname"); host == "" {
				t.Errorf("trace %d: empty hostname", id)
			}
			if s := str(r, "sessionId"); s != DefaultSessionID {
				t.Errorf("trace %d: sessionId %q, want %q", id, s, DefaultSessionID)
			}
			switch {
			case parent == id && porder == -1: // a root, as Kieker's Java probes write it
			case parent != id && porder >= 0:
				tr.Parents[id] = parent
				porders[id] = porder
			default:
				t.Errorf("trace %d: parentTraceId %d, parentOrderId %d", id, parent, porder)
			}
			if _, ok := tr.Calls[id]; !ok {
				tr.Calls[id] = nil
			}
		case record.BeforeOperationEvent, record.AfterOperationEvent, record.AfterOperationFailedEvent, record.SplitEvent, record.JoinEvent:
			e := ev{order: num(r, "orderIndex"), ts: num(r, "timestamp"), kind: r.Type.ShortName(), op: str(r, "operationSignature"), class: str(r, "classSignature")}
			switch r.Type.Name {
			case record.AfterOperationFailedEvent:
				e.cause = str(r, "cause")
			case record.JoinEvent:
				e.joined = num(r, "joinedTraceId")
			}
			if r.LoggingTimestamp != e.ts {
				t.Errorf("logging timestamp %d, event timestamp %d", r.LoggingTimestamp, e.ts)
			}
			id := num(r, "traceId")
			events[id] = append(events[id], e)
		case trace.InvocationTypeName:
		default:
			if r.Type.Name != record.KiekerMetadataRecord {
				t.Errorf("unexpected record %s", r.Type.Name)
			}
		}
	}
	invs := invocations(recs)
	invOf := map[int64]trace.Invocation{} // by traceId
	pids := map[int32]bool{}
	for _, in := range invs {
		invOf[in.TraceID] = in
		pids[in.ProcessID] = true
		if in.CreationTime < from || in.CreationTime > to {
			t.Errorf("invocation %+v: created outside [%d, %d]", in, from, to)
		}
	}
	if len(pids) > 1 {
		t.Errorf("invocations of one process name %d process ids", len(pids))
	}
	for id, p := range tr.Parents {
		in, pin := invOf[id], invOf[p]
		if in.TraceID != id || pin.TraceID != p || in.ParentID != pin.ID || int64(in.ParentOrderID) != porders[id] {
			t.Errorf("trace %d (parent %d at %d): invocation %+v, parent's %+v", id, p, porders[id], in, pin)
		}
	}
	splits := map[[2]int64]bool{} // traceId, orderIndex of every SplitEvent
	joins := map[int64][]int64{}  // traceId → joined traces
	for id, evs := range events {
		if _, ok := tr.Calls[id]; !ok {
			t.Errorf("trace %d has events but no TraceMetadata", id)
		}
		slices.SortFunc(evs, func(a, b ev) int { return int(a.order - b.order) })
		var stack []int
		var calls []call
		last := from
		for i, e := range evs {
			if e.order != int64(i) {
				t.Errorf("trace %d: orderIndex %d at position %d", id, e.order, i)
			}
			if e.ts < last || e.ts > to {
				t.Errorf("trace %d: event %d at %d, outside [%d, %d] or before the one before", id, e.order, e.ts, last, to)
			}
			last = e.ts
			switch e.kind {
			case "SplitEvent":
				splits[[2]int64{id, e.order}] = true
				continue
			case "JoinEvent":
				joins[id] = append(joins[id], e.joined)
				continue
			case "BeforeOperationEvent":
				stack = append(stack, len(calls))
				calls = append(calls, call{Depth: len(stack) - 1, Class: e.class, Op: e.op})
				continue
			}
			if len(stack) == 0 {
				t.Fatalf("trace %d: %s %s without a Before", id, e.kind, e.op)
			}
			c := &calls[stack[len(stack)-1]]
			stack = stack[:len(stack)-1]
			if c.Op != e.op || c.Class != e.class {
				t.Errorf("trace %d: %s of %s ends %s", id, e.kind, e.op, c.Op)
			}
			c.Outcome = "ok"
			if e.kind == "AfterOperationFailedEvent" {
				c.Outcome = "failed " + e.cause
			}
		}
		if len(stack) != 0 {
			t.Errorf("trace %d: %d calls never ended", id, len(stack))
		}
		tr.Calls[id] = calls
	}
	for id, p := range tr.Parents {
		if !splits[[2]int64{p, porders[id]}] {
			t.Errorf("trace %d: parent %d has no SplitEvent at orderIndex %d", id, p, porders[id])
		}
	}
	for id, joined := range joins {
		for _, j := range joined {
			if tr.Parents[j] != id {
				t.Errorf("trace %d joins trace %d, not its child", id, j)
			}
		}
	}
	return tr
}

// paths returns the path of every span of t from its root ("OP | OP |
// …\tOUTCOME"), sorted, and the number of split events on its spans.
func paths(t *trace.Trace) ([]string, int) {
	var out []string
	splits := 0
	for i := range t.Spans {
		s := &t.Spans[i]
		var ops []string
		for j := int32(i); j >= 0; j = t.Spans[j].Parent {
			ops = append(ops, t.Spans[j].Operation)
		}
		slices.Reverse(ops)
		outcome := "ok"
		if s.Error {
			outcome = "failed " + s.StatusMessage
		}
		out = append(out, strings.Join(ops, " | ")+"\t"+outcome)
		for _, e := range s.Events {
			if e.Name == "split" {
				splits++
			}
		}
	}
	slices.Sort(out)
	return out, splits
}

// TestExampleAgainstBridge runs the example against a real bridge and
// checks the bridge's log twice: every Kieker trace (one goroutine's part
// of a request) against the example's account, and the traces the
// bridge's assembler builds from it: one per request, whole, with every
// goroutine's calls under the call that started the goroutine.
func TestExampleAgainstBridge(t *testing.T) {
	ex := example(t)
	br := bridgetest.StartConfig(t, bridgetest.LogConfig(`{name: go, type: kieker-tcp, listen: "127.0.0.1:0"}`))
	from := time.Now().UnixNano()
	const requests, shelves, depth = 4, 2, 3
	res := runExample(t, ex, "-addr", br.Addr("go"), "-requests", fmt.Sprint(requests), "-shelves", fmt.Sprint(shelves), "-depth", fmt.Sprint(depth))
	to := time.Now().UnixNano()
	if res.Code != 0 {
		t.Fatalf("example exited with %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	want := parseExecuted(t, res.Stdout)
	// Per request: Handle and a Search goroutine per shelf; the odd ones
	// a Notify goroutine and its Record goroutine.
	if n, w := len(want.Calls), requests*(1+shelves)+requests/2*2; n != w {
		t.Fatalf("example executed %d traces, want %d:\n%s", n, w, res.Stdout)
	}
	m := regexp.MustCompile(`probe: sent=(\d+) dropped=(\d+)`).FindStringSubmatch(res.Stdout)
	if m == nil || m[2] != "0" {
		t.Fatalf("example reports %v, want nothing dropped\n%s", m, res.Stdout)
	}
	br.Stop()
	recs := bridgetest.ReadLog(t, br.LogDir)
	got := rebuild(t, recs, from, to)
	if diff := cmp.Diff(want.trees, got); diff != "" {
		t.Errorf("call trees in the log differ from the executed ones (-executed +log):\n%s", diff)
	}
	sent, _ := strconv.Atoi(m[1])
	if n := len(recs) - 1; n != sent { // the log's KiekerMetadataRecord
		t.Errorf("log holds %d records, the example sent %d", n, sent)
	}
	failed := 0
	for _, calls := range got.Calls {
		for _, c := range calls {
			if strings.HasPrefix(c.Outcome, "failed ") {
				failed++
			}
		}
	}
	if failed != 4 { // Handle and Check of requests 2 and 4
		t.Errorf("%d failed calls in the log, want 4", failed)
	}

	// The assembled traces: one per request, each one tree.
	assembled := bridgetest.Assemble(recs)
	if len(assembled) != requests {
		t.Errorf("the assembler built %d traces from %d requests", len(assembled), requests)
	}
	splits := 0
	for _, tr := range assembled {
		id, _ := tr.ID.Kieker()
		req, ok := want.Requests[id]
		if !ok {
			t.Errorf("assembled trace %s is not a request's root trace", tr.ID)
			continue
		}
		if len(tr.Broken) > 0 {
			t.Errorf("request %d: trace broken: %q", req, tr.Broken)
		}
		if roots := tr.Children(-1); len(roots) != 1 {
			t.Errorf("request %d: %d root spans, want 1", req, len(roots))
		}
		p, n := paths(tr)
		splits += n
		if diff := cmp.Diff(want.Paths[req], p); diff != "" {
			t.Errorf("request %d: assembled tree differs from the calls executed (-executed +assembled):\n%s", req, diff)
		}
	}
	if splits != want.Forks {
		t.Errorf("%d split events on the assembled spans, the example forked %d goroutines", splits, want.Forks)
	}
}

func TestExampleWithoutBridge(t *testing.T) {
	res := runExample(t, example(t), "-addr", unusedAddr(t), "-requests", "3")
	if res.Code != 0 {
		t.Fatalf("example exited with %d\nstderr:\n%s", res.Code, res.Stderr)
	}
	if res.Elapsed > 10*time.Second {
		t.Errorf("example took %v without a bridge", res.Elapsed)
	}
	m := regexp.MustCompile(`probe: sent=(\d+) dropped=(\d+)`).FindStringSubmatch(res.Stdout)
	if m == nil || m[1] != "0" || m[2] == "0" {
		t.Fatalf("example reports %v, want nothing sent and drops\n%s", m, res.Stdout)
	}
	if !strings.Contains(res.Stderr, "records dropped") {
		t.Errorf("stderr does not report the drops:\n%s", res.Stderr)
	}
}

// TestTasksAgainstBridge runs probe/example/tasks against a real bridge:
// jobs a trace submits to a pooled goroutine (started before the trace,
// reused for every job) and requests a process serves on behalf of a
// caller in another process, on another node, with the caller's
// invocation header. `tracebridge traces --json` assembles the log into
// one tree per trace, every job under the Submit call that created it and
// every callee's calls under the caller's Call; the pooled jobs stay under
// their Submit call when only the InvocationRecords link them.
func TestTasksAgainstBridge(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs programs")
	}
	bin := bridgetest.Build(t, "probe/example/tasks")
	br := bridgetest.StartConfig(t, bridgetest.LogConfig(`{name: go, type: kieker-tcp, listen: "127.0.0.1:0"}`))
	const jobs, requests = 3, 2
	pool := runExample(t, bin, "-mode", "pool", "-jobs", fmt.Sprint(jobs), "-addr", br.Addr("go"), "-node", "pool-host")
	calls := runExample(t, bin, "-mode", "caller", "-requests", fmt.Sprint(requests), "-addr", br.Addr("go"), "-node", "node-a")
	bridgetest.CheckTasksRun(t, br, bridgetest.Tasks{
		Jobs: jobs, Requests: requests, Pool: pool, Calls: calls,
	})
}
