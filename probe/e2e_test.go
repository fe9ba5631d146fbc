package probe

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"go/build"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	srclog "github.com/tracebridge/tracebridge/internal/source/kiekerlog"
)

// binDir holds the programs the end-to-end tests build (once, on first
// use): the tracebridge binary and probe/example.
var (
	binDir    string
	buildOnce sync.Once
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// programs builds tracebridge and probe/example and returns their paths.
func programs(t *testing.T) (bridge, example string) {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs programs")
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "probe-e2e-")
		if buildErr != nil {
			return
		}
		for _, p := range []string{"cmd/tracebridge", "probe/example"} {
			out := filepath.Join(binDir, filepath.Base(p))
			cmd := exec.Command(goTool(), "build", "-o", out, "github.com/tracebridge/tracebridge/"+p)
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("go build %s: %v\n%s", p, err, b)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return filepath.Join(binDir, "tracebridge"), filepath.Join(binDir, "example")
}

// goTool finds the go command: on PATH, else in the GOROOT this test was
// built with.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(build.Default.GOROOT, "bin", "go")
}

// bridgeProc is a running `tracebridge serve` with one kieker-tcp
// receiver and a Kieker log sink.
type bridgeProc struct {
	t      *testing.T
	cmd    *exec.Cmd
	addr   string
	logDir string
	stderr *lockedBuffer
	done   chan struct{}
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var (
	listenLine = regexp.MustCompile(`receiver go \(kieker-tcp\) listening on (\S+)`)
	sinkLine   = regexp.MustCompile(`sink \S+ \(kieker-log\) writing to (\S+)`)
)

// startBridge runs bin serve with a kieker-tcp receiver on a free loopback
// port and waits until it is ready (see cmd/tracebridge/serve_test.go).
func startBridge(t *testing.T, bin string) *bridgeProc {
	t.Helper()
	dir := t.TempDir()
	cfg := "flush_interval: 100ms\nreceivers:\n  - {name: go, type: kieker-tcp, listen: \"127.0.0.1:0\"}\nsinks:\n  - {type: kieker-log, path: logs}\n"
	cfgPath := filepath.Join(dir, "tracebridge.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &bridgeProc{t: t, stderr: &lockedBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, "serve", "-c", cfgPath)
	p.cmd.Dir = dir
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		signalled := false
		for sc.Scan() {
			line := sc.Text()
			if m := listenLine.FindStringSubmatch(line); m != nil {
				p.addr = m[1]
			}
			if m := sinkLine.FindStringSubmatch(line); m != nil {
				p.logDir = filepath.Join(dir, m[1])
			}
			if !signalled && line == "tracebridge: ready" {
				signalled = true
				close(ready)
			}
		}
		io.Copy(io.Discard, out)
		if !signalled {
			close(ready)
		}
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	select {
	case <-ready:
	case <-time.After(30 * time.Second):
		t.Fatalf("bridge did not start; stderr:\n%s", p.stderr)
	}
	if p.addr == "" || p.logDir == "" {
		t.Fatalf("bridge printed no address or log directory; stderr:\n%s", p.stderr)
	}
	return p
}

// stop sends SIGTERM and expects a clean exit (which flushes the log).
func (p *bridgeProc) stop() {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		p.t.Fatalf("bridge did not exit; stderr:\n%s", p.stderr)
	}
	if code := p.cmd.ProcessState.ExitCode(); code != 0 {
		p.t.Fatalf("bridge exited with %d; stderr:\n%s", code, p.stderr)
	}
}

// records reads the bridge's log.
func (p *bridgeProc) records() []record.Record {
	p.t.Helper()
	r, err := srclog.Open(p.logDir, srclog.Options{})
	if err != nil {
		p.t.Fatal(err)
	}
	var out []record.Record
	err = r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		for i := range b.Records {
			out = append(out, b.Records[i].Clone())
		}
		return nil
	}))
	if err != nil {
		p.t.Fatalf("reading the log: %v", err)
	}
	return out
}

type runResult struct {
	stdout, stderr string
	code           int
	elapsed        time.Duration
}

// runExample runs the example program with args.
func runExample(t *testing.T, bin string, args ...string) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TRACEBRIDGE_") && !strings.HasPrefix(kv, "KIEKER_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	err := cmd.Run()
	res := runResult{out.String(), errb.String(), 0, time.Since(start)}
	if ee, ok := err.(*exec.ExitError); ok {
		res.code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %s: %v", bin, err)
	}
	return res
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
	bridgeBin, example := programs(t)
	br := startBridge(t, bridgeBin)
	from := time.Now().UnixNano()
	res := runExample(t, example, "-addr", br.addr, "-requests", "4", "-depth", "3")
	to := time.Now().UnixNano()
	if res.code != 0 {
		t.Fatalf("example exited with %d\nstdout:\n%s\nstderr:\n%s", res.code, res.stdout, res.stderr)
	}
	want := parseExecuted(t, res.stdout)
	// 4 requests: Handle, 7 Searches, Check; the odd ones fork a Notify.
	if n := len(want.Calls); n != 6 {
		t.Fatalf("example executed %d traces, want 6:\n%s", n, res.stdout)
	}
	m := regexp.MustCompile(`probe: sent=(\d+) dropped=(\d+)`).FindStringSubmatch(res.stdout)
	if m == nil || m[2] != "0" {
		t.Fatalf("example reports %v, want nothing dropped\n%s", m, res.stdout)
	}
	br.stop()
	recs := br.records()
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
	_, example := programs(t)
	res := runExample(t, example, "-addr", unusedAddr(t), "-requests", "3")
	if res.code != 0 {
		t.Fatalf("example exited with %d\nstderr:\n%s", res.code, res.stderr)
	}
	if res.elapsed > 10*time.Second {
		t.Errorf("example took %v without a bridge", res.elapsed)
	}
	m := regexp.MustCompile(`probe: sent=(\d+) dropped=(\d+)`).FindStringSubmatch(res.stdout)
	if m == nil || m[1] != "0" || m[2] == "0" {
		t.Fatalf("example reports %v, want nothing sent and drops\n%s", m, res.stdout)
	}
	if !strings.Contains(res.stderr, "records dropped") {
		t.Errorf("stderr does not report the drops:\n%s", res.stderr)
	}
}
