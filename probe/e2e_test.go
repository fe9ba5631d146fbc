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

// trees holds the calls of every trace, by traceId, in the order they
// began, and the parent of every child trace.
type trees struct {
	Calls   map[int64][]call
	Parents map[int64]int64
}

// parseExecuted reads the example's account of what it executed.
func parseExecuted(t *testing.T, stdout string) trees {
	t.Helper()
	tr := trees{Calls: map[int64][]call{}, Parents: map[int64]int64{}}
	for _, line := range strings.Split(stdout, "\n") {
		switch {
		case strings.HasPrefix(line, "call "):
			// call TRACEID DEPTH CLASS OPERATION… ok|failed CAUSE; the
			// operation signatures of the example contain no " ok" or
			// " failed ".
			f := strings.SplitN(line, " ", 5)
			id, err1 := strconv.ParseInt(f[1], 10, 64)
			depth, err2 := strconv.Atoi(f[2])
			if len(f) != 5 || err1 != nil || err2 != nil {
				t.Fatalf("bad line %q", line)
			}
			op, outcome, ok := strings.Cut(f[4], " failed ")
			if ok {
				outcome = "failed " + outcome
			} else {
				op, ok = strings.CutSuffix(f[4], " ok")
				outcome = "ok"
			}
			if !ok {
				t.Fatalf("bad line %q", line)
			}
			tr.Calls[id] = append(tr.Calls[id], call{depth, f[3], op, outcome})
		case strings.HasPrefix(line, "fork "):
			var child, parent int64
			if _, err := fmt.Sscanf(line, "fork %d %d", &child, &parent); err != nil {
				t.Fatalf("bad line %q: %v", line, err)
			}
			tr.Parents[child] = parent
		}
	}
	return tr
}

// rebuild reconstructs the call trees from Kieker records: events of a
// trace in orderIndex order, nesting from Before/After. It checks that
// every After matches its Before and that timestamps do not go backwards
// within a trace and lie within [from, to].
func rebuild(t *testing.T, recs []record.Record, from, to int64) trees {
	t.Helper()
	tr := trees{Calls: map[int64][]call{}, Parents: map[int64]int64{}}
	type ev struct {
		order     int64
		ts        int64
		kind      string
		op, class string
		cause     string
	}
	events := map[int64][]ev{}
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
			default:
				t.Errorf("trace %d: parentTraceId %d, parentOrderId %d", id, parent, porder)
			}
			if _, ok := tr.Calls[id]; !ok {
				tr.Calls[id] = nil
			}
		case record.BeforeOperationEvent, record.AfterOperationEvent, record.AfterOperationFailedEvent:
			e := ev{order: num(r, "orderIndex"), ts: num(r, "timestamp"), kind: r.Type.ShortName(), op: str(r, "operationSignature"), class: str(r, "classSignature")}
			if r.Type.Name == record.AfterOperationFailedEvent {
				e.cause = str(r, "cause")
			}
			if r.LoggingTimestamp != e.ts {
				t.Errorf("logging timestamp %d, event timestamp %d", r.LoggingTimestamp, e.ts)
			}
			id := num(r, "traceId")
			events[id] = append(events[id], e)
		default:
			if r.Type.Name != record.KiekerMetadataRecord {
				t.Errorf("unexpected record %s", r.Type.Name)
			}
		}
	}
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
			if e.kind == "BeforeOperationEvent" {
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
	return tr
}

func TestExampleAgainstBridge(t *testing.T) {
	ex := example(t)
	br := bridgetest.StartConfig(t, bridgetest.LogConfig(`{name: go, type: kieker-tcp, listen: "127.0.0.1:0"}`))
	from := time.Now().UnixNano()
	res := runExample(t, ex, "-addr", br.Addr("go"), "-requests", "4", "-depth", "3")
	to := time.Now().UnixNano()
	if res.Code != 0 {
		t.Fatalf("example exited with %d\nstdout:\n%s\nstderr:\n%s", res.Code, res.Stdout, res.Stderr)
	}
	want := parseExecuted(t, res.Stdout)
	// 4 requests: Handle, 7 Searches, Check; the odd ones fork a Notify.
	if n := len(want.Calls); n != 6 {
		t.Fatalf("example executed %d traces, want 6:\n%s", n, res.Stdout)
	}
	m := regexp.MustCompile(`probe: sent=(\d+) dropped=(\d+)`).FindStringSubmatch(res.Stdout)
	if m == nil || m[2] != "0" {
		t.Fatalf("example reports %v, want nothing dropped\n%s", m, res.Stdout)
	}
	br.Stop()
	recs := bridgetest.ReadLog(t, br.LogDir)
	got := rebuild(t, recs, from, to)
	if diff := cmp.Diff(want, got); diff != "" {
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
