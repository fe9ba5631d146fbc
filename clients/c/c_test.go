// Package cclient_test holds the end-to-end tests of the C monitoring
// client in clients/c. TestMain builds the library, the examples and the C
// unit tests with make (gcc only; the C++ and Fortran examples when g++ and
// gfortran exist); the tests run the programs against a real `tracebridge
// serve` started by internal/bridgetest (or a bare TCP listener where the
// bytes themselves are checked) and read the Kieker log back.
package cclient_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
	tbtrace "github.com/tracebridge/tracebridge/internal/trace"
)

// buildDir is make's output directory.
var buildDir string

func TestMain(m *testing.M) {
	code, err := setup(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func setup(m *testing.M) (int, error) {
	dir, err := os.MkdirTemp("", "tracebridge-cclient-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	buildDir = filepath.Join(dir, "build")
	mk := exec.Command("make", "-s", "-j2", "O="+buildDir)
	if out, err := mk.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("make in clients/c: %v\n%s", err, out)
	}
	code := bridgetest.Run(m)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			return 1, err
		}
	}
	return code, nil
}

// startBridge starts a bridge whose kieker-tcp receiver c listens on
// listen (host:port, port 0 for a free one) and returns it with its port.
func startBridge(t *testing.T, listen string) (*bridgetest.Process, string) {
	t.Helper()
	p := bridgetest.StartConfig(t, bridgetest.LogConfig(fmt.Sprintf(`{name: c, type: kieker-tcp, listen: %q}`, listen)))
	return p, p.Port("c")
}

// ---- programs ----

// program returns the path of a built program. The C++ and Fortran
// examples are built only when g++ and gfortran exist: without them the
// test is skipped, or fails when TRACEBRIDGE_REQUIRE_SERVICES=1 (CI).
func program(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(buildDir, name)
	if _, err := os.Stat(p); err != nil {
		if os.Getenv("TRACEBRIDGE_REQUIRE_SERVICES") == "1" {
			t.Fatalf("%s was not built (is its compiler, g++ or gfortran, installed?) and TRACEBRIDGE_REQUIRE_SERVICES=1", name)
		}
		t.Skipf("%s was not built (compiler missing?)", name)
	}
	return p
}

// run runs a built program with env added to a clean environment (no
// TRACEBRIDGE_/KIEKER_ variables of the caller).
func run(t *testing.T, name string, env []string, args ...string) bridgetest.Result {
	t.Helper()
	cmd := exec.Command(program(t, name), args...)
	cmd.Env = bridgetest.CleanEnv(env...)
	return bridgetest.Exec(t, cmd)
}

// summary parses the key=value pairs of the output line starting with
// prefix.
func summary(t *testing.T, out, prefix string) map[string]int64 {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		m := map[string]int64{}
		for _, f := range strings.Fields(strings.TrimPrefix(line, prefix)) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				continue
			}
			if n, err := strconv.ParseInt(v, 10, 64); err == nil {
				m[k] = n
			}
		}
		return m
	}
	t.Fatalf("no %q line in:\n%s", prefix, out)
	return nil
}

// ---- traces in a log ----

type call struct {
	Depth int
	Op    string
}

type event struct {
	kind   string // B, A or F; S or J (SplitEvent, JoinEvent: no operation)
	order  int64
	ts     int64
	op     string
	cls    string
	cause  string
	joined int64 // JoinEvent: joinedTraceId
	record int   // position in the log
}

type trace struct {
	id     int64
	meta   *record.Record
	inv    *tbtrace.Invocation // its InvocationRecord, if any
	first  int                 // log position of the first record
	events []event
}

// traceSet groups the trace records of a log by trace id.
type traceSet struct {
	byID  map[int64]*trace
	order []int64 // by first appearance
}

func tracesOf(recs []record.Record) *traceSet {
	s := &traceSet{byID: map[int64]*trace{}}
	get := func(id int64, pos int) *trace {
		tr := s.byID[id]
		if tr == nil {
			tr = &trace{id: id, first: pos}
			s.byID[id] = tr
			s.order = append(s.order, id)
		}
		return tr
	}
	for i := range recs {
		r := &recs[i]
		switch r.Type.Name {
		case record.TraceMetadata:
			get(r.Values[0].Int(), i).meta = r
		case record.BeforeOperationEvent, record.AfterOperationEvent, record.AfterOperationFailedEvent:
			e := event{order: r.Values[2].Int(), ts: r.Values[0].Int(), op: r.Values[3].Str(), cls: r.Values[4].Str(), record: i}
			switch r.Type.Name {
			case record.BeforeOperationEvent:
				e.kind = "B"
			case record.AfterOperationEvent:
				e.kind = "A"
			default:
				e.kind = "F"
				e.cause = r.Values[5].Str()
			}
			tr := get(r.Values[1].Int(), i)
			tr.events = append(tr.events, e)
		case record.SplitEvent, record.JoinEvent:
			e := event{kind: "S", order: r.Values[2].Int(), ts: r.Values[0].Int(), record: i}
			if r.Type.Name == record.JoinEvent {
				e.kind, e.joined = "J", r.Values[3].Int()
			}
			tr := get(r.Values[1].Int(), i)
			tr.events = append(tr.events, e)
		}
	}
	for _, in := range bridgetest.Invocations(recs) {
		get(in.TraceID, -1).inv = &in
	}
	return s
}

// session returns the traces whose TraceMetadata has the session id, in
// the order they appear in the log.
func (s *traceSet) session(id string) []*trace {
	var out []*trace
	for _, tid := range s.order {
		tr := s.byID[tid]
		if tr.meta != nil && tr.meta.Values[2].Str() == id {
			out = append(out, tr)
		}
	}
	return out
}

// check verifies one trace: order indexes 0..n-1 (SplitEvents and
// JoinEvents take theirs), Before/After balanced with matching signatures,
// timestamps plausible nanoseconds in [from, to] and not decreasing. It
// returns the calls (depth, op) in order and the class signature of each
// operation.
func check(t *testing.T, tr *trace, from, to time.Time) ([]call, map[string]string) {
	t.Helper()
	if tr.meta == nil {
		t.Errorf("trace %d has no TraceMetadata", tr.id)
	}
	ev := append([]event(nil), tr.events...)
	sort.Slice(ev, func(i, j int) bool { return ev[i].order < ev[j].order })
	var calls []call
	classes := map[string]string{}
	var stack []string
	prev := int64(0)
	for i, e := range ev {
		if e.order != int64(i) {
			t.Errorf("trace %d: event %d has orderIndex %d", tr.id, i, e.order)
			return nil, nil
		}
		if e.ts < from.UnixNano() || e.ts > to.UnixNano() {
			t.Errorf("trace %d: timestamp %d is not a nanosecond time in [%d, %d]", tr.id, e.ts, from.UnixNano(), to.UnixNano())
		}
		if e.ts < prev {
			t.Errorf("trace %d: timestamp goes back at orderIndex %d", tr.id, e.order)
		}
		prev = e.ts
		switch e.kind {
		case "S", "J":
		case "B":
			calls = append(calls, call{len(stack), e.op})
			classes[e.op] = e.cls
			stack = append(stack, e.op)
		default:
			if len(stack) == 0 || stack[len(stack)-1] != e.op {
				t.Errorf("trace %d: After %q at orderIndex %d does not match the open operations %v", tr.id, e.op, e.order, stack)
				return nil, nil
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) != 0 {
		t.Errorf("trace %d: operations never returned: %v", tr.id, stack)
	}
	return calls, classes
}

// printedCalls parses the "call <depth> <name>" lines a program prints.
func printedCalls(t *testing.T, out string) []call {
	t.Helper()
	var calls []call
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(line, "call ")
		if !ok {
			continue
		}
		d, name, _ := strings.Cut(rest, " ")
		n, err := strconv.Atoi(d)
		if err != nil {
			t.Fatalf("bad line %q", line)
		}
		calls = append(calls, call{n, name})
	}
	return calls
}

// ---- tests ----

// TestUnit runs the C unit tests (encoding, strings, ring, ids, symbols).
func TestUnit(t *testing.T) {
	r := run(t, "unit", nil)
	if r.Code != 0 || !strings.Contains(r.Stdout, "unit: ok") {
		t.Fatalf("unit tests failed (exit %d):\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// TestManual runs the manual-probe example, linked statically and against
// the shared library, and checks every trace in the log.
func TestManual(t *testing.T) {
	b, port := startBridge(t, "127.0.0.1:0")
	from := time.Now().Add(-time.Second)
	type runInfo struct {
		name, session   string
		threads, orders int
	}
	runs := []runInfo{{"manual", "manual-static", 4, 25}, {"manual_shared", "manual-shared", 2, 10}}
	sums := map[string]map[string]int64{}
	for _, ri := range runs {
		r := run(t, ri.name, []string{"TRACEBRIDGE_PORT=" + port, "TRACEBRIDGE_SESSION=" + ri.session},
			strconv.Itoa(ri.threads), strconv.Itoa(ri.orders))
		if r.Code != 0 {
			t.Fatalf("%s exited %d:\n%s%s", ri.name, r.Code, r.Stdout, r.Stderr)
		}
		sums[ri.name] = summary(t, r.Stdout, "manual: ")
	}
	b.Stop()
	to := time.Now().Add(time.Second)
	set := tracesOf(bridgetest.ReadLog(t, b.LogDir))
	ids := map[int64]bool{}
	for _, ri := range runs {
		t.Run(ri.name, func(t *testing.T) {
			s := sums[ri.name]
			orders := ri.threads * ri.orders
			if s["orders"] != int64(orders) || s["sent"] != s["records"] || s["dropped"] != 0 || s["connects"] != 1 {
				t.Errorf("summary %v: want %d orders, all %d records sent, none dropped, one connection", s, orders, s["records"])
			}
			traces := set.session(ri.session)
			if len(traces) != int(s["traces"]) {
				t.Fatalf("%d traces in the log, the program made %d", len(traces), s["traces"])
			}
			var records, failed int
			threads := map[int64]bool{}
			var report, archive, mail *trace
			for _, tr := range traces {
				if ids[tr.id] {
					t.Errorf("trace id %d used twice", tr.id)
				}
				ids[tr.id] = true
				records += 1 + len(tr.events)
				if tr.inv != nil {
					records++
				}
				calls, _ := check(t, tr, from, to)
				threads[tr.meta.Values[1].Int()] = true
				for _, e := range tr.events {
					if e.kind == "F" {
						failed++
						if e.cause != "card declined" || e.op != "boolean shop.Payment.charge(long)" {
							t.Errorf("failed event %+v", e)
						}
					}
				}
				switch {
				case len(calls) > 0 && calls[0].Op == "void shop.Cart.checkout(int)":
					want := []call{{0, "void shop.Cart.checkout(int)"}, {1, "int shop.Inventory.reserve(int)"}, {1, "boolean shop.Payment.charge(long)"}}
					if diff := cmp.Diff(want, calls); diff != "" {
						t.Errorf("order trace (-want +got):\n%s", diff)
					}
				case len(calls) > 0 && calls[0].Op == "void shop.Report.daily(Währung)":
					report = tr
					want := []call{{0, "void shop.Report.daily(Währung)"}, {0, "void shop.Report.audit()"}}
					if diff := cmp.Diff(want, calls); diff != "" {
						t.Errorf("explicit trace (-want +got):\n%s", diff)
					}
				case len(calls) == 1 && calls[0].Op == "void shop.Archive.store()":
					archive = tr
				case len(calls) == 1 && calls[0].Op == "void shop.Mail.send()":
					mail = tr
				default:
					t.Errorf("unexpected trace %v", calls)
				}
			}
			if int64(records) != s["records"] {
				t.Errorf("%d records in the log, the program made %d", records, s["records"])
			}
			// orders i with i%4 == 3 fail: orders/4 per thread, rounded down.
			if want := ri.threads * (ri.orders / 4); failed != want {
				t.Errorf("%d failed events, want %d", failed, want)
			}
			if len(threads) != ri.threads+3 {
				t.Errorf("%d thread ids, want %d customers + main + archiver + mailer", len(threads), ri.threads)
			}
			if report == nil || archive == nil || mail == nil {
				t.Fatal("explicit or child trace missing")
			}
			for _, tr := range traces {
				if tr == archive || tr == mail {
					continue
				}
				if p, po := tr.meta.Values[4].Int(), tr.meta.Values[5].Int(); p != tr.id || po != -1 {
					t.Errorf("root trace %d: parentTraceId %d parentOrderId %d, want itself and -1", tr.id, p, po)
				}
			}
			// The report trace: daily (0, 1), audit's Before (2), the
			// archiver's SplitEvent (3) and JoinEvent (4), the mailer's
			// SplitEvent (5), audit's After (6). The children name the
			// report trace and their SplitEvent.
			var kinds []string
			evs := append([]event(nil), report.events...)
			sort.Slice(evs, func(i, j int) bool { return evs[i].order < evs[j].order })
			for _, e := range evs {
				kinds = append(kinds, fmt.Sprintf("%s%d", e.kind, e.order))
				if e.kind == "J" && e.joined != archive.id {
					t.Errorf("JoinEvent names trace %d, want the archiver's %d", e.joined, archive.id)
				}
			}
			if diff := cmp.Diff([]string{"B0", "A1", "B2", "S3", "J4", "S5", "A6"}, kinds); diff != "" {
				t.Errorf("report trace events (-want +got):\n%s", diff)
			}
			if p, po := archive.meta.Values[4].Int(), archive.meta.Values[5].Int(); p != report.id || po != 3 {
				t.Errorf("archiver's trace: parent %d/%d, want %d/3", p, po, report.id)
			}
			if p, po := mail.meta.Values[4].Int(), mail.meta.Values[5].Int(); p != report.id || po != 5 {
				t.Errorf("mailer's trace: parent %d/%d, want %d/5", p, po, report.id)
			}
			// InvocationRecords: the report trace's (a root, sent at its
			// first tb_pthread_create) and the archiver's naming it at
			// the SplitEvent; the mailer's (tb_trace_split) has none.
			if ri, ai := report.inv, archive.inv; ri == nil || ai == nil || mail.inv != nil ||
				ri.ParentID != -1 || ai.ParentID != ri.ID || ai.ParentOrderID != 3 || ai.ParentNode != ri.Node ||
				ai.ParentProcessID != ri.ProcessID || ai.ProcessID != ri.ProcessID || ai.RunnableID != archive.meta.Values[1].Int() {
				t.Errorf("invocations: report %+v, archiver %+v, mailer %+v", ri, ai, mail.inv)
			}
			if h := report.meta.Values[3].Str(); h == "" {
				t.Errorf("empty hostname")
			}
			if sid := report.meta.Values[2].Str(); sid != ri.session {
				t.Errorf("session %q", sid)
			}
		})
	}
}

// TestAutomatic runs the -finstrument-functions examples and compares the
// call tree each prints with the traces in the log: names resolved from
// the symbol tables (static functions, PIE and non-PIE executables, C++
// demangling, Fortran modules), class signatures, exclusion.
func TestAutomatic(t *testing.T) {
	b, port := startBridge(t, "127.0.0.1:0")
	from := time.Now().Add(-time.Second)
	type example struct {
		name, program string
		args, env     []string
		exclude       string // the excluded function, if any
		classes       map[string]string
	}
	examples := []example{
		{name: "auto", program: "auto", args: []string{"2"}, classes: map[string]string{"fib": "auto", "leaf": "auto", "main": "auto"}},
		{name: "auto_nopie", program: "auto_nopie", args: []string{"1"}, classes: map[string]string{"tree": "auto_nopie", "leaf": "auto_nopie"}},
		{name: "auto_exclude_main", program: "auto", args: []string{"2"}, env: []string{"TRACEBRIDGE_EXCLUDE=main,nothing*"}, exclude: "main"},
		{name: "auto_cpp", program: "auto_cpp", classes: map[string]string{
			"geo::Square::area() const": "geo::Square", "int geo::twice<int>(int)": "geo", "Tree::depth(int)": "Tree",
			"risky(int)": "auto_cpp", "main": "auto_cpp", "geo::Shape::Shape(int)": "geo::Shape",
		}},
		{name: "auto_fortran", program: "auto_fortran", classes: map[string]string{"shapes::fact": "shapes", "shapes::area": "shapes", "walk_": "auto_fortran"}},
	}
	outs := map[string]bridgetest.Result{}
	for _, ex := range examples {
		if _, err := os.Stat(filepath.Join(buildDir, ex.program)); err != nil {
			continue // skipped below
		}
		env := append([]string{"TRACEBRIDGE_PORT=" + port, "TRACEBRIDGE_SESSION=" + ex.name}, ex.env...)
		r := run(t, ex.program, env, ex.args...)
		if r.Code != 0 {
			t.Fatalf("%s exited %d:\n%s%s", ex.name, r.Code, r.Stdout, r.Stderr)
		}
		outs[ex.name] = r
	}
	b.Stop()
	to := time.Now().Add(time.Second)
	set := tracesOf(bridgetest.ReadLog(t, b.LogDir))
	for _, ex := range examples {
		t.Run(ex.name, func(t *testing.T) {
			program(t, ex.program)
			r := outs[ex.name]
			want := printedCalls(t, r.Stdout)
			if ex.exclude != "" {
				var kept []call
				for _, c := range want {
					if c.Op != ex.exclude {
						kept = append(kept, call{c.Depth - 1, c.Op})
					}
				}
				want = kept
			}
			traces := set.session(ex.name)
			var got []call
			classes := map[string]string{}
			for _, tr := range traces {
				c, cl := check(t, tr, from, to)
				got = append(got, c...)
				for k, v := range cl {
					classes[k] = v
				}
			}
			if len(want) == 0 {
				t.Fatalf("the program printed no calls:\n%s", r.Stdout)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("call tree in the log differs from the one the program ran (-want +got):\n%s", diff)
			}
			for op, cls := range ex.classes {
				if classes[op] != cls {
					t.Errorf("class signature of %q: %q, want %q", op, classes[op], cls)
				}
			}
			if ex.exclude != "" && len(traces) < 2 {
				t.Errorf("with main excluded each top-level call is its own trace: %d traces", len(traces))
			}
			if ex.exclude == "" && len(traces) != 1 {
				t.Errorf("%d traces, want 1 rooted in main", len(traces))
			}
			for _, c := range got {
				if strings.HasPrefix(c.Op, "0x") {
					t.Errorf("unresolved address %s", c.Op)
				}
			}
		})
	}
}

// TestThreads runs the thread-hop example (compiled with
// -finstrument-functions, linked with --wrap=pthread_create and
// --wrap=pthread_join, statically and against the shared library) and
// runs the log through the bridge's trace assembler: with main
// instrumented the whole run is ONE trace, with main excluded one trace
// per request; either way every thread's calls hang under the call that
// started the thread, as the program's own account says, and no trace is
// broken.
func TestThreads(t *testing.T) {
	b, port := startBridge(t, "127.0.0.1:0")
	const requests, workers, depth = 3, 3, 3
	type runInfo struct {
		name, program string
		env           []string
		traces        int
	}
	runs := []runInfo{
		{"threads", "threads", nil, 1},
		{"threads_shared", "threads_shared", nil, 1},
		{"threads_exclude_main", "threads", []string{"TRACEBRIDGE_EXCLUDE=main"}, requests},
	}
	outs := map[string]bridgetest.Result{}
	for _, ri := range runs {
		env := append([]string{"TRACEBRIDGE_PORT=" + port, "TRACEBRIDGE_SESSION=" + ri.name}, ri.env...)
		r := run(t, ri.program, env, strconv.Itoa(requests), strconv.Itoa(workers), strconv.Itoa(depth))
		if r.Code != 0 {
			t.Fatalf("%s exited %d:\n%s%s", ri.name, r.Code, r.Stdout, r.Stderr)
		}
		outs[ri.name] = r
	}
	b.Stop()
	recs := bridgetest.ReadLog(t, b.LogDir)
	bridgetest.CheckInvocations(t, recs)
	set := tracesOf(recs)
	var assembled []*tbtrace.Trace
	a := tbtrace.NewAssembler(tbtrace.Options{Clock: tbtrace.RecordClock, Emit: func(tr *tbtrace.Trace) { assembled = append(assembled, tr) }})
	for i := range recs {
		a.Add(&recs[i], nil)
	}
	a.Flush()
	for _, ri := range runs {
		t.Run(ri.name, func(t *testing.T) {
			r := outs[ri.name]
			s := summary(t, r.Stdout, "threads: ")
			if s["dropped"] != 0 {
				t.Errorf("summary %v: records dropped", s)
			}
			// Per request: workers worker threads, a notify thread and its
			// audit thread.
			if want := int64(requests * (workers + 2)); s["threads"] != want {
				t.Errorf("the program started %d threads, want %d", s["threads"], want)
			}
			excluded := ri.env != nil // main
			var want []string
			for _, line := range strings.Split(r.Stdout, "\n") {
				if p, ok := strings.CutPrefix(line, "call "); ok {
					if excluded {
						if p == "main" {
							continue
						}
						p = strings.TrimPrefix(p, "main/")
					}
					want = append(want, p)
				}
			}
			sort.Strings(want)
			if n := s["calls"]; excluded && int64(len(want)) != n-1 || !excluded && int64(len(want)) != n {
				t.Fatalf("%d calls printed, summary %v", len(want), s)
			}
			// The Kieker traces: one per thread (and per request with main
			// excluded), each sound, the children's parents SplitEvents.
			children := 0
			splits := map[[2]int64]bool{}
			traces := set.session(ri.name)
			for _, tr := range traces {
				for _, e := range tr.events {
					if e.kind == "S" {
						splits[[2]int64{tr.id, e.order}] = true
					}
				}
			}
			for _, tr := range traces {
				check(t, tr, time.Unix(0, 0), time.Now().Add(time.Hour))
				if p, po := tr.meta.Values[4].Int(), tr.meta.Values[5].Int(); p != tr.id {
					children++
					if !splits[[2]int64{p, po}] {
						t.Errorf("trace %d: parent %d has no SplitEvent at orderIndex %d", tr.id, p, po)
					}
				}
			}
			if int64(children) != s["threads"] {
				t.Errorf("%d child traces in the log, the program started %d threads", children, s["threads"])
			}
			// Every child trace's InvocationRecord names its parent
			// trace's invocation and the SplitEvent.
			for _, tr := range traces {
				p, po := tr.meta.Values[4].Int(), tr.meta.Values[5].Int()
				if p == tr.id {
					continue
				}
				pt := set.byID[p]
				if tr.inv == nil || pt == nil || pt.inv == nil || tr.inv.ParentID != pt.inv.ID || int64(tr.inv.ParentOrderID) != po {
					t.Errorf("trace %d (parent %d at %d): invocation %+v, parent's %+v", tr.id, p, po, tr.inv, pt.inv)
				}
			}
			// The assembled traces.
			var mine []*tbtrace.Trace
			for _, tr := range assembled {
				if len(tr.Spans) > 0 && tr.Spans[0].Session == ri.name {
					mine = append(mine, tr)
				}
			}
			if len(mine) != ri.traces {
				t.Errorf("the assembler built %d traces, want %d", len(mine), ri.traces)
			}
			var got []string
			nsplits := 0
			for _, tr := range mine {
				if len(tr.Broken) > 0 {
					t.Errorf("trace %s broken: %q", tr.ID, tr.Broken)
				}
				if roots := tr.Children(-1); len(roots) != 1 {
					t.Errorf("trace %s has %d root spans, want 1", tr.ID, len(roots))
				}
				for i := range tr.Spans {
					var ops []string
					for j := int32(i); j >= 0; j = tr.Spans[j].Parent {
						ops = append(ops, tr.Spans[j].Operation)
					}
					for l, r := 0, len(ops)-1; l < r; l, r = l+1, r-1 {
						ops[l], ops[r] = ops[r], ops[l]
					}
					got = append(got, strings.Join(ops, "/"))
					for _, e := range tr.Spans[i].Events {
						if e.Name == "split" {
							nsplits++
						}
					}
				}
			}
			sort.Strings(got)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("assembled call tree differs from the one the program ran (-ran +assembled):\n%s", diff)
			}
			if int64(nsplits) != s["threads"] {
				t.Errorf("%d split events on the assembled spans, %d threads started", nsplits, s["threads"])
			}
		})
	}
}

// TestPool runs examples/pool.c against a real bridge: jobs a trace
// submits to a thread pool (threads started before the trace, reused for
// every job; tb_task_create, tb_trace_start_task) and requests a process
// serves on behalf of a caller in another process on another node
// (tb_invocation_header, tb_trace_start_remote). `tracebridge traces
// --json` assembles the log into one tree per trace, every job under the
// submit call that created it and every callee's calls under the caller's
// call, on the two nodes; the pooled jobs stay under their submit calls
// when only the InvocationRecords link them.
func TestPool(t *testing.T) {
	b, port := startBridge(t, "127.0.0.1:0")
	const workers, jobs, requests = 2, 5, 2
	env := []string{"TRACEBRIDGE_PORT=" + port}
	pool := run(t, "pool", append(env, "TRACEBRIDGE_HOSTNAME=pool-host"), "pool", strconv.Itoa(workers), strconv.Itoa(jobs))
	calls := run(t, "pool", append(env, "TRACEBRIDGE_HOSTNAME=node-a"), "caller", strconv.Itoa(requests))
	bridgetest.CheckTasksRun(t, b, bridgetest.Tasks{
		Jobs: jobs, Requests: requests, MaxThreads: workers, Pool: pool, Calls: calls,
	})
}

// TestPoolWithoutInvocations: with TRACEBRIDGE_INVOCATIONS=0 the pool's
// jobs are linked by Kieker's records alone (tb_trace_start_task's
// TraceMetadata names the submit call's SplitEvent) and no
// InvocationRecord is sent.
func TestPoolWithoutInvocations(t *testing.T) {
	b, port := startBridge(t, "127.0.0.1:0")
	r := run(t, "pool", []string{"TRACEBRIDGE_PORT=" + port, "TRACEBRIDGE_HOSTNAME=pool-host", "TRACEBRIDGE_INVOCATIONS=0"}, "pool", "2", "3")
	if r.Code != 0 || r.Stderr != "" || !strings.Contains(r.Stdout, "dropped=0") {
		t.Fatalf("pool exited %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	b.Stop()
	recs := bridgetest.ReadLog(t, b.LogDir)
	if invs := bridgetest.Invocations(recs); len(invs) != 0 {
		t.Errorf("%d InvocationRecords sent with TRACEBRIDGE_INVOCATIONS=0", len(invs))
	}
	traces := bridgetest.Traces(t, b.LogDir)
	if len(traces) != 1 || len(traces[0].Broken) > 0 {
		t.Fatalf("%d traces: %+v", len(traces), traces)
	}
	if diff := cmp.Diff(bridgetest.PrintedPaths(r.Stdout), traces[0].Paths(true)); diff != "" {
		t.Errorf("(-made +assembled):\n%s", diff)
	}
}

// TestFork: a forked child monitors with its own connection and trace ids.
func TestFork(t *testing.T) {
	b, port := startBridge(t, "127.0.0.1:0")
	r := run(t, "fork", []string{"TRACEBRIDGE_PORT=" + port, "TRACEBRIDGE_SESSION=fork"})
	if r.Code != 0 {
		t.Fatalf("fork exited %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	parent := summary(t, r.Stdout, "fork parent: ")
	child := summary(t, r.Stdout, "fork child: ")
	b.Stop()
	if parent["sent"] != 9 || parent["dropped"] != 0 || child["sent"] != 9 || child["dropped"] != 0 || child["unbalanced"] != 1 {
		t.Fatalf("parent %v child %v", parent, child)
	}
	traces := tracesOf(bridgetest.ReadLog(t, b.LogDir)).session("fork")
	if len(traces) != 4 {
		t.Fatalf("%d traces, want 1 of the parent and 3 of the child", len(traces))
	}
	pids := map[int64]int{}
	for _, tr := range traces {
		check(t, tr, time.Now().Add(-time.Minute), time.Now().Add(time.Minute))
		pids[tr.meta.Values[1].Int()]++
	}
	if len(pids) != 2 {
		t.Errorf("thread ids %v: want the parent's and the child's", pids)
	}
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ln.Close()
	return port
}

// TestNoBridge: with nothing listening the programs run normally, finish
// promptly and report every record dropped.
func TestNoBridge(t *testing.T) {
	port := closedPort(t)
	for _, tc := range []struct {
		program, prefix string
		args            []string
		quiet           bool
	}{
		{"manual", "manual: ", []string{"2", "50"}, false},
		{"manual", "manual: ", []string{"1", "5"}, true},
		{"auto", "auto: ", []string{"2"}, false},
	} {
		t.Run(fmt.Sprintf("%s-quiet=%v", tc.program, tc.quiet), func(t *testing.T) {
			env := []string{"TRACEBRIDGE_PORT=" + port}
			if tc.quiet {
				env = append(env, "TRACEBRIDGE_QUIET=1")
			}
			r := run(t, tc.program, env, tc.args...)
			if r.Code != 0 {
				t.Fatalf("exit %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			if r.Elapsed > 10*time.Second {
				t.Errorf("took %v", r.Elapsed)
			}
			s := summary(t, r.Stdout, tc.prefix)
			if s["sent"] != 0 || s["dropped"] == 0 {
				t.Errorf("summary %v: want nothing sent, records dropped", s)
			}
			if tc.program == "manual" && s["dropped"] != s["records"] {
				t.Errorf("dropped %d of %d records", s["dropped"], s["records"])
			}
			note := "cannot connect to 127.0.0.1:" + port
			if got := strings.Count(r.Stderr, note); tc.quiet && r.Stderr != "" || !tc.quiet && got != 1 {
				t.Errorf("stderr (quiet=%v) should hold the note once or be empty:\n%s", tc.quiet, r.Stderr)
			}
		})
	}
	// Kieker's variables are honoured too.
	r := run(t, "manual", []string{"KIEKER_HOSTNAME=127.0.0.1", "KIEKER_PORT=" + port}, "1", "1")
	if !strings.Contains(r.Stderr, "cannot connect to 127.0.0.1:"+port) {
		t.Errorf("KIEKER_PORT ignored:\n%s", r.Stderr)
	}
}

// TestDisabled: TRACEBRIDGE_ENABLED=0 makes no connection at all.
func TestDisabled(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
			accepted <- struct{}{}
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	r := run(t, "auto", []string{"TRACEBRIDGE_PORT=" + port, "TRACEBRIDGE_ENABLED=0"}, "1")
	s := summary(t, r.Stdout, "auto: ")
	if r.Code != 0 || s["sent"] != 0 || s["dropped"] != 0 || r.Stderr != "" {
		t.Fatalf("exit %d, summary %v, stderr %q", r.Code, s, r.Stderr)
	}
	select {
	case <-accepted:
		t.Fatal("a disabled client connected")
	case <-time.After(100 * time.Millisecond):
	}
}

// TestBridgeKilledMidRun: the bridge dies (kill -9) while a program sends;
// the program keeps running, counts what it dropped, reconnects to a new
// bridge on the same port with a fresh string registry, and finishes.
func TestBridgeKilledMidRun(t *testing.T) {
	first, port := startBridge(t, "127.0.0.1:0")
	path := program(t, "manual")
	cmd := exec.Command(path, "2", "2500", "600")
	cmd.Env = append(os.Environ(), "TRACEBRIDGE_PORT="+port, "TRACEBRIDGE_SESSION=killed", "TRACEBRIDGE_RECONNECT_MAX_MS=200")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- cmd.Wait() }()
	time.Sleep(400 * time.Millisecond)
	first.Kill()
	time.Sleep(400 * time.Millisecond)
	second, _ := startBridge(t, "127.0.0.1:"+port)
	select {
	case err := <-waited:
		if err != nil {
			t.Fatalf("program failed after the bridge was killed: %v\n%s%s", err, out.String(), errb.String())
		}
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("program hangs after the bridge was killed")
	}
	second.Stop()
	s := summary(t, out.String(), "manual: ")
	if s["dropped"] == 0 || s["sent"] == 0 || s["connects"] < 2 {
		t.Fatalf("summary %v: want records sent and dropped over two connections", s)
	}
	if !strings.Contains(errb.String(), "lost") {
		t.Errorf("no note about the lost connection:\n%s", errb.String())
	}
	// The second bridge decoded a fresh, well-formed stream: every trace
	// that starts there is complete.
	set := tracesOf(bridgetest.ReadLog(t, second.LogDir))
	complete := 0
	for _, id := range set.order {
		tr := set.byID[id]
		if tr.meta == nil {
			continue // began before the reconnection
		}
		check(t, tr, time.Now().Add(-time.Minute), time.Now().Add(time.Minute))
		complete++
	}
	if complete == 0 {
		t.Fatal("no complete trace reached the second bridge")
	}
	t.Logf("sent %d, dropped %d, %d complete traces after reconnecting", s["sent"], s["dropped"], complete)
}

// capture accepts connections on a bare listener and keeps the bytes of
// each; with cut > 0 the first connection is closed after that many bytes.
type capture struct {
	ln    net.Listener
	mu    sync.Mutex
	conns [][]byte
	wg    sync.WaitGroup
}

func newCapture(t *testing.T, cut int) *capture {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &capture{ln: ln}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		for i := 0; ; i++ {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			var buf bytes.Buffer
			if i == 0 && cut > 0 {
				io.CopyN(&buf, conn, int64(cut))
			} else {
				io.Copy(&buf, conn)
			}
			conn.Close()
			c.mu.Lock()
			c.conns = append(c.conns, buf.Bytes())
			c.mu.Unlock()
		}
	}()
	t.Cleanup(c.close)
	return c
}

func (c *capture) port() string {
	_, p, _ := net.SplitHostPort(c.ln.Addr().String())
	return p
}

func (c *capture) close() {
	c.ln.Close()
	c.wg.Wait()
}

// frameSizes are the frame lengths (after the class id) of the record
// types the client sends.
var frameSizes = map[string]int{
	record.TraceMetadata:             8 + 8 + 8 + 4 + 4 + 8 + 4,
	record.BeforeOperationEvent:      8 + 8 + 8 + 4 + 4 + 4,
	record.AfterOperationEvent:       8 + 8 + 8 + 4 + 4 + 4,
	record.AfterOperationFailedEvent: 8 + 8 + 8 + 4 + 4 + 4 + 4,
	record.SplitEvent:                8 + 8 + 8 + 4,
	record.JoinEvent:                 8 + 8 + 8 + 4 + 8,
	tbtrace.InvocationTypeName:       8 + 8 + 4 + 4 + 8 + 8 + 8 + 4 + 4 + 4 + 8,
}

// walkStream checks the framing of one connection's bytes: registry
// entries carry ids 0, 1, 2, … in order, each before its first use, with
// the UTF-8 byte length; frames are whole. It returns the strings and the
// number of frames.
func walkStream(t *testing.T, b []byte) ([]string, int) {
	t.Helper()
	var strs []string
	frames := 0
	be := binary.BigEndian
	for off := 0; off < len(b); {
		if len(b)-off < 4 {
			t.Fatalf("offset %d: %d trailing bytes", off, len(b)-off)
		}
		cid := int32(be.Uint32(b[off:]))
		if cid == -1 {
			id, n := int32(be.Uint32(b[off+4:])), int(be.Uint32(b[off+8:]))
			if int(id) != len(strs) {
				t.Fatalf("offset %d: registry id %d, want %d (ids from 0, in order)", off, id, len(strs))
			}
			strs = append(strs, string(b[off+12:off+12+n]))
			off += 12 + n
			continue
		}
		if int(cid) >= len(strs) {
			t.Fatalf("offset %d: class id %d used before its registry entry", off, cid)
		}
		size, ok := frameSizes[strs[cid]]
		if !ok {
			t.Fatalf("offset %d: unexpected class %q", off, strs[cid])
		}
		if len(b)-off < 4+size {
			return strs, frames // cut inside the last frame (the cut connection)
		}
		off += 4 + size
		frames++
	}
	return strs, frames
}

// TestStreamBytes checks the bytes on the wire: Kieker's single-socket
// protocol, registry ids from 0 per connection, byte lengths for non-ASCII
// strings, and a fresh registry on the connection that follows a lost one;
// the bridge's own decoder reads each connection on its own.
func TestStreamBytes(t *testing.T) {
	c := newCapture(t, 2000)
	r := run(t, "manual", []string{"TRACEBRIDGE_PORT=" + c.port(), "TRACEBRIDGE_RECONNECT_MIN_MS=20"}, "1", "400", "500")
	if r.Code != 0 {
		t.Fatalf("exit %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	c.close()
	s := summary(t, r.Stdout, "manual: ")
	if len(c.conns) != 2 || s["connects"] != 2 {
		t.Fatalf("%d connections captured, client counted %d", len(c.conns), s["connects"])
	}
	total := 0
	for i, b := range c.conns {
		strs, frames := walkStream(t, b)
		if len(strs) == 0 || !strings.HasPrefix(strs[0], "kieker.common.record.") {
			t.Fatalf("connection %d: the first entry is %q, want a class name", i, strs)
		}
		if i == 1 {
			if !contains(strs, "void shop.Report.daily(Währung)") {
				t.Errorf("connection %d lacks the non-ASCII signature: %q", i, strs)
			}
			dec := kieker.NewDecoder(kieker.Options{Inline: true, Catalog: tbtrace.Types()})
			var bt record.Batch
			n, err := dec.Decode(b, &bt)
			if err != nil || n != len(b) {
				t.Fatalf("connection %d: decoded %d of %d bytes: %v", i, n, len(b), err)
			}
			if len(bt.Records) != frames {
				t.Errorf("connection %d: decoder found %d records, framing %d", i, len(bt.Records), frames)
			}
		}
		total += frames
	}
	if total == 0 {
		t.Error("no frames captured")
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestELFFuzz runs the sanitizer-built mutation fuzzer of the ELF
// symbol-table reader over a few of the built binaries (a PIE executable
// with .symtab, a shared object, a C++ executable). TB_ELFFUZZ_ITERATIONS
// runs it longer (the default keeps CI short).
func TestELFFuzz(t *testing.T) {
	iterations := "500"
	if v := os.Getenv("TB_ELFFUZZ_ITERATIONS"); v != "" {
		iterations = v
	}
	for i, seed := range []string{"unit", "libtracebridge.so", "auto_nopie"} {
		t.Run(seed, func(t *testing.T) {
			r := run(t, "elffuzz", []string{"TRACEBRIDGE_ENABLED=0"}, filepath.Join(buildDir, seed), iterations, strconv.Itoa(1000+i))
			if r.Code != 0 || !strings.Contains(r.Stdout, "elffuzz: ") {
				t.Fatalf("exit %d:\n%s%s", r.Code, r.Stdout, r.Stderr)
			}
			t.Log(strings.TrimSpace(r.Stdout))
		})
	}
}
