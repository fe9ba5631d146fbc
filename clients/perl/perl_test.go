// Package perlclient_test holds the Go tests of the Perl monitoring client
// in clients/perl: the golden encoding stream the Perl unit tests compare
// against (written by tracebridge's own Kieker encoder), a run of those
// unit tests (prove), and end-to-end runs of examples/bookstore.pl against
// a real `tracebridge serve` — as Kieker binary over TCP, and as KDB text
// over STOMP through RabbitMQ into a stomp-client receiver — whose Kieker
// log is read back and compared with the call tree the example says it
// executed.
package perlclient_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"

	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	srclog "github.com/tracebridge/tracebridge/internal/source/kiekerlog"
)

var update = flag.Bool("update", false, "rewrite t/testdata/golden.bin")

var tbBinary string // the tracebridge binary, built once

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "tracebridge-perlclient-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tbBinary = filepath.Join(dir, "tracebridge")
	build := exec.Command(goTool(), "build", "-o", tbBinary, "github.com/tracebridge/tracebridge/cmd/tracebridge")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building tracebridge: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// goTool finds the go command: $GOROOT/bin/go, then the PATH, then the
// usual install location.
func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		if p := filepath.Join(root, "bin", "go"); fileExists(p) {
			return p
		}
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "/usr/local/go/bin/go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// perl returns the interpreter, skipping the test when there is none
// (failing it when TRACEBRIDGE_REQUIRE_SERVICES is set).
func perl(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("perl")
	if err != nil {
		p = "/usr/bin/perl"
	}
	servicetest.RequireBinary(t, p, "perl")
	return p
}

// requireNetStomp skips the test when Net::Stomp is missing, unless
// TRACEBRIDGE_REQUIRE_SERVICES is set.
func requireNetStomp(t *testing.T, perl string) {
	t.Helper()
	out, err := exec.Command(perl, "-MNet::Stomp", "-e", "1").CombinedOutput()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("Net::Stomp (Debian package libnet-stomp-perl) is not installed: %s", bytes.TrimSpace(out))
	if os.Getenv("TRACEBRIDGE_REQUIRE_SERVICES") != "" {
		t.Fatal(msg + "; TRACEBRIDGE_REQUIRE_SERVICES is set")
	}
	t.Skip(msg)
}

// ---- golden stream ----

// TestGolden encodes t/testdata/golden.json with tracebridge's Kieker
// encoder (single-socket mode) and compares the bytes with golden.bin, the
// stream the Perl unit tests expect their encoder to produce. -update
// rewrites golden.bin.
func TestGolden(t *testing.T) {
	spec, err := os.ReadFile(filepath.Join("t", "testdata", "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.UseNumber()
	var recs []map[string]any
	if err := dec.Decode(&recs); err != nil {
		t.Fatal(err)
	}
	cat := record.Builtin()
	enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
	var out []byte
	var b record.Batch
	for i, m := range recs {
		typ := cat.Lookup(record.Prefix + "flow.trace." + map[string]string{
			"TraceMetadata":             "TraceMetadata",
			"BeforeOperationEvent":      "operation.BeforeOperationEvent",
			"AfterOperationEvent":       "operation.AfterOperationEvent",
			"AfterOperationFailedEvent": "operation.AfterOperationFailedEvent",
		}[m["type"].(string)])
		if typ == nil {
			t.Fatalf("record %d: unknown type %v", i, m["type"])
		}
		b.Reset()
		r := b.Add(typ, record.NoTimestamp)
		for j, f := range typ.Fields {
			v, ok := m[f.Name]
			if !ok {
				t.Fatalf("record %d: no field %s", i, f.Name)
			}
			if f.Kind == record.String {
				r.Values[j] = record.StringValue(v.(string))
				continue
			}
			n, err := v.(json.Number).Int64()
			if err != nil {
				t.Fatalf("record %d: field %s: %v", i, f.Name, err)
			}
			r.Values[j] = record.IntValue(n)
		}
		if out, err = enc.Append(out, r); err != nil {
			t.Fatal(err)
		}
	}
	golden := filepath.Join("t", "testdata", "golden.bin")
	if *update {
		if err := os.WriteFile(golden, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, want) {
		t.Fatalf("golden.bin is stale: run go test ./clients/perl -run TestGolden -update\n got %x\nwant %x", out, want)
	}
}

// TestProve runs the Perl client's unit tests (t/*.t) with prove, or with
// perl when prove is missing.
func TestProve(t *testing.T) {
	pl := perl(t)
	files, err := filepath.Glob(filepath.Join("t", "*.t"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no tests in t/: %v", err)
	}
	if prove, err := exec.LookPath("prove"); err == nil {
		out, err := exec.Command(prove, append([]string{"-l"}, files...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("prove: %v\n%s", err, out)
		}
		t.Logf("%s", lastLine(out))
		return
	}
	for _, f := range files {
		out, err := exec.Command(pl, "-Ilib", f).CombinedOutput()
		if err != nil || bytes.Contains(out, []byte("\nnot ok")) {
			t.Errorf("%s: %v\n%s", f, err, out)
		}
	}
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// ---- end to end ----

// TestBookstoreTCP runs the example over Kieker TCP against a real bridge.
func TestBookstoreTCP(t *testing.T) {
	pl := perl(t)
	br := startBridge(t, `{name: perl, type: kieker-tcp, listen: "127.0.0.1:0"}`)
	ex := runExample(t, pl, "tcp", "TRACEBRIDGE_HOST=127.0.0.1", "TRACEBRIDGE_PORT="+br.port)
	br.stop()
	checkBookstore(t, ex, readLog(t, br.logDir), false)
}

// TestBookstoreSTOMP runs the example over STOMP through RabbitMQ into a
// stomp-client receiver with the Perl probes' mapping.
func TestBookstoreSTOMP(t *testing.T) {
	pl := perl(t)
	requireNetStomp(t, pl)
	servicetest.Require(t, servicetest.RabbitSTOMP, "RabbitMQ STOMP")
	dest := fmt.Sprintf("/queue/tracebridge-perl-%d", rand.Int64())
	servicetest.DeleteQueueAfter(t, dest)
	mapping, err := filepath.Abs(filepath.Join("examples", "kieker-perl.map"))
	if err != nil {
		t.Fatal(err)
	}
	br := startBridge(t, fmt.Sprintf(`{name: perl, type: stomp-client, url: "stomp://guest:guest@%s", destination: %q, mapping: %q}`,
		servicetest.RabbitSTOMP, dest, mapping))
	ex := runExample(t, pl, "stomp", "TRACEBRIDGE_HOST=127.0.0.1", "TRACEBRIDGE_PORT=61613",
		"TRACEBRIDGE_DESTINATION="+dest, "TRACEBRIDGE_LOGIN=guest", "TRACEBRIDGE_PASSCODE=guest")
	want := 0
	for _, s := range ex.stats {
		want += int(s["sent"].(float64))
	}
	// The broker delivers asynchronously: wait until the bridge logged all.
	deadline := time.Now().Add(20 * time.Second)
	for len(readLogSoFar(t, br.logDir)) < want+1 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	br.stop()
	checkBookstore(t, ex, readLog(t, br.logDir), true)
}

// checkBookstore compares the log with the example's own account (2
// rounds: 3 traces in the parent and 1 in a forked child per round).
func checkBookstore(t *testing.T, ex example, recs []record.Record, eprintsRoot bool) {
	t.Helper()
	if ex.code != 0 {
		t.Fatalf("bookstore.pl exited %d\n%s", ex.code, ex.stderr)
	}
	got := traces(t, recs, eprintsRoot)
	if diff := cmp.Diff(sorted(ex.expect), sorted(got.trees)); diff != "" {
		t.Fatalf("logged traces differ from the executed ones (-executed +logged):\n%s", diff)
	}
	if len(ex.expect) != 8 {
		t.Errorf("the example reported %d traces, want 8", len(ex.expect))
	}
	var causes []string
	for _, r := range recs {
		if r.Type.Name == record.AfterOperationFailedEvent {
			causes = append(causes, r.Values[5].Str())
		}
	}
	sort.Strings(causes)
	want := []string{"card declined: 60 over the limit 50", "card declined: 60 over the limit 50",
		"card declined: 60 over the limit 50", "card declined: 60 over the limit 50",
		"no such book: 9-999-99999-9", "no such book: 9-999-99999-9"}
	if diff := cmp.Diff(want, causes); diff != "" {
		t.Errorf("causes (-want +got):\n%s", diff)
	}
	sent, dropped := 0.0, 0.0
	for _, s := range ex.stats {
		sent += s["sent"].(float64)
		dropped += s["dropped"].(float64)
	}
	if int(sent) != len(recs)-1 || dropped != 0 || len(ex.stats) != 3 {
		t.Errorf("stats %v with %d records logged", ex.stats, len(recs)-1)
	}
	if ex.stderr != "" {
		t.Errorf("stderr: %s", ex.stderr)
	}
}

// TestBookstoreWithoutBridge: nothing listens; the example still exits 0,
// promptly, and reports what it dropped, with either transport.
func TestBookstoreWithoutBridge(t *testing.T) {
	pl := perl(t)
	for _, transport := range []string{"tcp", "stomp"} {
		t.Run(transport, func(t *testing.T) {
			if transport == "stomp" {
				requireNetStomp(t, pl)
			}
			port := servicetest.FreePort(t)
			start := time.Now()
			ex := runExample(t, pl, transport, "TRACEBRIDGE_HOST=127.0.0.1", fmt.Sprintf("TRACEBRIDGE_PORT=%d", port))
			took := time.Since(start)
			if ex.code != 0 {
				t.Fatalf("exit %d\n%s", ex.code, ex.stderr)
			}
			if took > 20*time.Second {
				t.Errorf("took %v", took)
			}
			recorded, dropped := 0.0, 0.0
			for _, s := range ex.stats {
				recorded += s["recorded"].(float64)
				dropped += s["dropped"].(float64)
			}
			if recorded != 96 || dropped != 96 {
				t.Errorf("stats %v", ex.stats)
			}
			if !strings.Contains(ex.stderr, "tracebridge: 78 of 78 records dropped") || !strings.Contains(ex.stderr, "tracebridge: 9 of 9 records dropped") {
				t.Errorf("no drop reports on stderr: %q", ex.stderr)
			}
			t.Logf("exited in %v", took.Round(time.Millisecond))
		})
	}
}

type example struct {
	code   int
	expect []string
	stats  []map[string]any // one per process
	stderr string
}

func runExample(t *testing.T, pl, transport string, env ...string) example {
	t.Helper()
	cmd := exec.Command(pl, filepath.Join("examples", "bookstore.pl"), "--transport", transport, "2")
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	ex := example{stderr: stderr.String()}
	if ee, ok := err.(*exec.ExitError); ok {
		ex.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(stdout.String(), "\n") {
		switch {
		case strings.HasPrefix(line, "expect "):
			ex.expect = append(ex.expect, strings.TrimPrefix(line, "expect "))
		case strings.HasPrefix(line, "stats "):
			var s map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "stats ")), &s); err != nil {
				t.Fatalf("stats line %q: %v", line, err)
			}
			ex.stats = append(ex.stats, s)
		}
	}
	if len(ex.stats) == 0 {
		t.Fatalf("no stats line\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	return ex
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	sort.Strings(s)
	return s
}

// logged is what the Kieker log says about the traces.
type logged struct {
	trees []string // per trace: ">op <op !op …" in orderIndex order
}

// traces rebuilds each trace's call tree from the log: every trace has one
// TraceMetadata (a root: parent = itself/-1 over TCP, 0/0 as the EPrints
// probes wrote it over STOMP), its events' orderIndex run 0..n-1, and every
// After or Failed event closes the innermost open Before of the same
// operation.
func traces(t *testing.T, recs []record.Record, eprintsRoot bool) logged {
	t.Helper()
	type ev struct {
		order int64
		s     string
	}
	events := map[int64][]ev{}
	meta := map[int64]int{}
	for _, r := range recs {
		switch r.Type.Name {
		case record.TraceMetadata:
			tr := r.Values[0].Int()
			meta[tr]++
			wantParent, wantOrder := tr, int64(-1)
			if eprintsRoot {
				wantParent, wantOrder = 0, 0
			}
			if r.Values[4].Int() != wantParent || r.Values[5].Int() != wantOrder {
				t.Errorf("trace %d: parent %d/%d, want %d/%d", tr, r.Values[4].Int(), r.Values[5].Int(), wantParent, wantOrder)
			}
		case record.BeforeOperationEvent, record.AfterOperationEvent, record.AfterOperationFailedEvent:
			sym := map[string]string{record.BeforeOperationEvent: ">", record.AfterOperationEvent: "<", record.AfterOperationFailedEvent: "!"}[r.Type.Name]
			tr := r.Values[1].Int()
			events[tr] = append(events[tr], ev{r.Values[2].Int(), sym + r.Values[3].Str()})
		}
	}
	var out logged
	for tr, evs := range events {
		if meta[tr] != 1 {
			t.Errorf("trace %d has %d TraceMetadata records", tr, meta[tr])
		}
		sort.Slice(evs, func(i, j int) bool { return evs[i].order < evs[j].order })
		var parts, stack []string
		for i, e := range evs {
			if e.order != int64(i) {
				t.Errorf("trace %d: event %d has orderIndex %d", tr, i, e.order)
			}
			op := e.s[1:]
			if e.s[0] == '>' {
				stack = append(stack, op)
			} else if len(stack) == 0 || stack[len(stack)-1] != op {
				t.Errorf("trace %d: %s closes %v", tr, e.s, stack)
			} else {
				stack = stack[:len(stack)-1]
			}
			parts = append(parts, e.s)
		}
		if len(stack) != 0 {
			t.Errorf("trace %d: calls left open: %v", tr, stack)
		}
		out.trees = append(out.trees, strings.Join(parts, " "))
	}
	return out
}

// ---- the bridge ----

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type bridge struct {
	t      *testing.T
	cmd    *exec.Cmd
	port   string
	logDir string
	stderr *syncBuffer
	done   chan struct{}
}

var (
	listenLine = regexp.MustCompile(`receiver perl \(\S+\) (?:listening on|consuming from) (\S+)`)
	sinkLine   = regexp.MustCompile(`sink \S+ \(kieker-log\) writing to (\S+)`)
)

// startBridge runs `tracebridge serve` with one receiver (named perl, a
// YAML flow mapping) and a Kieker log sink, and waits until it is ready.
func startBridge(t *testing.T, receiver string) *bridge {
	t.Helper()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "tracebridge.yaml")
	yaml := "flush_interval: 100ms\nreceivers:\n  - " + receiver + "\nsinks:\n  - {type: kieker-log, path: logs}\n"
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	b := &bridge{t: t, stderr: &syncBuffer{}, done: make(chan struct{})}
	b.cmd = exec.Command(tbBinary, "serve", "-c", cfg)
	b.cmd.Dir = dir
	b.cmd.Stderr = b.stderr
	out, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if m := listenLine.FindStringSubmatch(line); m != nil {
				if i := strings.LastIndexByte(m[1], ':'); i >= 0 {
					b.port = m[1][i+1:]
				}
			}
			if m := sinkLine.FindStringSubmatch(line); m != nil {
				b.logDir = filepath.Join(dir, m[1])
			}
			if line == "tracebridge: ready" {
				close(ready)
			}
		}
		io.Copy(io.Discard, out)
		b.cmd.Wait()
		close(b.done)
	}()
	t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			b.cmd.Process.Kill()
			<-b.done
		}
	})
	select {
	case <-ready:
	case <-b.done:
		t.Fatalf("bridge exited early:\n%s", b.stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatalf("bridge not ready:\n%s", b.stderr.String())
	}
	if b.logDir == "" {
		t.Fatalf("bridge printed no log directory:\n%s", b.stderr.String())
	}
	return b
}

// stop sends SIGTERM and waits for a clean exit.
func (b *bridge) stop() {
	b.t.Helper()
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
	case <-time.After(60 * time.Second):
		b.t.Fatalf("bridge did not stop:\n%s", b.stderr.String())
	}
	if code := b.cmd.ProcessState.ExitCode(); code != 0 {
		b.t.Fatalf("bridge exited %d:\n%s", code, b.stderr.String())
	}
}

// readLog reads every record of a Kieker log directory.
func readLog(t *testing.T, dir string) []record.Record {
	t.Helper()
	return readLogOpts(t, dir, srclog.Options{})
}

// readLogSoFar reads a log the bridge is still writing (a record cut at
// the end of a file is skipped).
func readLogSoFar(t *testing.T, dir string) []record.Record {
	t.Helper()
	return readLogOpts(t, dir, srclog.Options{SkipBad: true})
}

func readLogOpts(t *testing.T, dir string, o srclog.Options) []record.Record {
	t.Helper()
	r, err := srclog.Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	var out []record.Record
	err = r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		for i := range b.Records {
			out = append(out, b.Records[i].Clone())
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ---- encoder round trip ----

// randomSpec returns n random TraceMetadata/Before/After/Failed records as
// maps of field name to int64 or string ("type" is the short class name),
// with strings drawn to exercise UTF-8 lengths, KDB-special characters and
// registry reuse, and integers across their whole range.
func randomSpec(rng *rand.Rand, n int) []map[string]any {
	pool := []string{"", "a", "op", "ü", "书", "🐍", "a;b", `back\slash`, "line\nbreak", "<no-session-id>",
		"x.y.Z.method", strings.Repeat("é", 3000)}
	str := func() string {
		if rng.IntN(4) == 0 {
			return fmt.Sprintf("s%d-%s", rng.IntN(50), pool[rng.IntN(len(pool))])
		}
		return pool[rng.IntN(len(pool))]
	}
	i64 := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return []int64{0, -1, 1, -1 << 63, 1<<63 - 1}[rng.IntN(5)]
		case 1:
			return rng.Int64N(1000)
		}
		return int64(rng.Uint64())
	}
	i32 := func() int64 { return int64(int32(rng.Uint32())) }
	out := make([]map[string]any, n)
	for i := range out {
		switch k := rng.IntN(4); k {
		case 0:
			out[i] = map[string]any{"type": "TraceMetadata", "traceId": i64(), "threadId": i64(), "sessionId": str(),
				"hostname": str(), "parentTraceId": i64(), "parentOrderId": i32()}
		default:
			m := map[string]any{"type": []string{"", "BeforeOperationEvent", "AfterOperationEvent", "AfterOperationFailedEvent"}[k],
				"timestamp": i64(), "traceId": i64(), "orderIndex": i32(), "operationSignature": str(), "classSignature": str()}
			if k == 3 {
				m["cause"] = str()
			}
			out[i] = m
		}
	}
	return out
}

// decodeKieker decodes a single-socket stream with tracebridge's decoder,
// whole and in random pieces, into maps like randomSpec's.
func decodeKieker(t *testing.T, data []byte, rng *rand.Rand) []map[string]any {
	t.Helper()
	var out []map[string]any
	var b record.Batch
	d := kieker.NewDecoder(kieker.Options{Inline: true})
	var pending []byte
	for len(data) > 0 || len(pending) > 0 {
		k := min(len(data), 1+rng.IntN(4096))
		pending = append(pending, data[:k]...)
		data = data[k:]
		n, err := d.Decode(pending, &b)
		if err != nil {
			t.Fatalf("decoding: %v", err)
		}
		pending = append(pending[:0], pending[n:]...)
		if k == 0 && n == 0 {
			t.Fatalf("%d bytes left over", len(pending))
		}
	}
	for _, r := range b.Records {
		m := map[string]any{"type": r.Type.ShortName()}
		for i, f := range r.Type.Fields {
			if f.Kind == record.String {
				m[f.Name] = r.Values[i].Str()
			} else {
				m[f.Name] = r.Values[i].Int()
			}
		}
		if r.LoggingTimestamp != record.NoTimestamp {
			t.Errorf("logging timestamp %d", r.LoggingTimestamp)
		}
		out = append(out, m)
	}
	return out
}

const encodeScript = `
use strict; use warnings; use JSON::PP (); use TraceBridge::Kieker qw(:all);
open(my $f, '<:raw', $ARGV[0]) or die $!;
my $spec = JSON::PP->new->utf8->decode(do { local $/; <$f> });
my %kind = (TraceMetadata => META, BeforeOperationEvent => BEFORE, AfterOperationEvent => AFTER, AfterOperationFailedEvent => FAILED);
my $reg = TraceBridge::Kieker->new;
my $buf = '';
for my $r (@$spec) {
	my $k = $kind{ $r->{type} };
	if ($k == META) {
		$reg->append(\$buf, $k, @{$r}{qw(traceId threadId sessionId hostname parentTraceId parentOrderId)});
	} else {
		$reg->append(\$buf, $k, @{$r}{qw(timestamp traceId orderIndex operationSignature classSignature)}, $k == FAILED ? $r->{cause} : ());
	}
}
binmode STDOUT;
print $buf;
`

// TestEncoderRoundTrip encodes random records with the Perl encoder and
// decodes them with tracebridge's Kieker decoder (in random pieces).
func TestEncoderRoundTrip(t *testing.T) {
	pl := perl(t)
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	spec := randomSpec(rng, 3000)
	js, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(t.TempDir(), "records.json")
	if err := os.WriteFile(in, js, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pl, "-Ilib", "-e", encodeScript, in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("encoding: %v\n%s", err, stderr.String())
	}
	if diff := cmp.Diff(spec, decodeKieker(t, out, rng)); diff != "" {
		t.Fatalf("round trip (-encoded +decoded):\n%s", diff)
	}
}
