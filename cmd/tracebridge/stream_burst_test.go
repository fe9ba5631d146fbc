package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/servicetest"
)

// Sizes of the burst test (issue 28).
const (
	burstRecords = 1_000_000
	burstConns   = 2
	burstPerConn = burstRecords / burstConns
	burstTrace   = 100 // events per trace
)

// burstEvents encodes connection c's events in Kieker's single-socket
// protocol: event i is orderIndex i%burstTrace of trace
// c*10^7 + i/burstTrace, so a reader can tell which event of which
// connection it has (and whether they come in order).
func burstEvents(t testing.TB, c int) []byte {
	enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
	var b record.Batch
	out := make([]byte, 0, burstPerConn*64)
	for i := range burstPerConn {
		b.Reset()
		r := b.Add(catalog.Lookup(record.BeforeOperationEvent), record.NoTimestamp)
		r.Values[0] = record.IntValue(int64(1000 + i))
		r.Values[1] = record.IntValue(int64(c*10_000_000 + i/burstTrace))
		r.Values[2] = record.IntValue(int64(i % burstTrace))
		r.Values[3] = record.StringValue("void op()")
		r.Values[4] = record.StringValue("a.B")
		var err error
		if out, err = enc.Append(out, r); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// orderCheck follows `tail --json` lines: it counts the records and
// checks that each connection's events come in the order they were sent.
type orderCheck struct {
	n    int
	next [burstConns]int // the next event expected of each connection
	bad  []string        // the first problems
}

func (o *orderCheck) line(l []byte) {
	trace, ok1 := intAfter(l, `"traceId":`)
	idx, ok2 := intAfter(l, `"orderIndex":`)
	if !ok1 || !ok2 {
		return // metadata
	}
	c := trace / 10_000_000
	o.n++
	if c < 0 || c >= burstConns {
		o.problem("record of no connection: %s", l)
		return
	}
	i := (trace%10_000_000)*burstTrace + idx
	if i != o.next[c] {
		o.problem("connection %d: event %d after %d", c, i, o.next[c]-1)
	}
	o.next[c] = i + 1
}

// intAfter parses the digits after key in l (no regexp: two million
// lines under the race detector).
func intAfter(l []byte, key string) (int, bool) {
	i := bytes.Index(l, []byte(key))
	if i < 0 {
		return 0, false
	}
	n, digits := 0, 0
	for _, c := range l[i+len(key):] {
		if c < '0' || c > '9' {
			break
		}
		n = n*10 + int(c-'0')
		digits++
	}
	return n, digits > 0
}

func (o *orderCheck) problem(format string, args ...any) {
	if len(o.bad) < 10 {
		o.bad = append(o.bad, fmt.Sprintf(format, args...))
	}
}

// TestStreamBurstStoppedSubscriber is issue 28's proof on the real
// binary: 1,000,000 Kieker records in a burst on 2 connections, a
// `tracebridge tail` following live stopped (SIGSTOP) during the burst
// and resumed once the bridge has taken everything. The stream is
// best-effort and must lose nothing at this rate: tail prints all
// 1,000,000, each connection's in order, with no gap notice, and the log
// holds the same. `tail --count N` from the start and `dump` agree on
// what the repository holds.
func TestStreamBurstStoppedSubscriber(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000,000 records through the real binary")
	}
	data := make([][]byte, burstConns)
	for c := range data {
		data[c] = burstEvents(t, c)
	}
	dir := t.TempDir()
	cfg := bridgetest.WriteConfig(t, dir, `
metrics: "127.0.0.1:0"
receivers: [{name: kieker, type: kieker-tcp, listen: "127.0.0.1:0"}]
sinks: [{name: log, type: kieker-log, path: logs, format: binary}]
stream: {listen: "127.0.0.1:0"}
`)
	p := bridgetest.Start(t, dir, "-c", cfg)
	defer p.Stop()
	url := streamURL(t, p)
	metric := func(name, sink string) int {
		t.Helper()
		v, _, err := benchkit.Metric(p.Metrics, name, `sink="`+sink+`"`)
		if err != nil {
			t.Fatal(err)
		}
		return int(v)
	}

	// The subscriber: the real tail, live, a separate process.
	cmd := exec.Command(bridgetest.Binary(t), "tail", url, "--json", "--metadata", "--count", strconv.Itoa(burstRecords))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var check orderCheck
	var lines atomic.Int64 // lines read: the first is the metadata
	read := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			check.line(sc.Bytes())
			lines.Add(1)
		}
		read <- sc.Err()
	}()
	stopped := false
	defer func() {
		if stopped {
			cmd.Process.Signal(syscall.SIGCONT)
		}
		cmd.Process.Kill()
	}()
	waitUntil(t, 30*time.Second, "tail's first metadata line", func() bool { return lines.Load() > 0 })

	// The burst, on 2 connections at once.
	var wg sync.WaitGroup
	for c := range burstConns {
		conn, err := net.Dial("tcp", p.Addr("kieker"))
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer conn.Close()
			if _, err := conn.Write(data[c]); err != nil {
				t.Error(err)
			}
		})
	}
	// Stopped during the burst: as soon as it printed a record.
	waitUntil(t, 60*time.Second, "tail's first record", func() bool { return lines.Load() > 1 })
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped = true
	during := metric("tracebridge_sink_records_total", "log")
	wg.Wait()
	// Resumed once the bridge has taken the whole burst into the log
	// and the stream.
	waitUntil(t, 120*time.Second, "the log and the stream taking every record", func() bool {
		return metric("tracebridge_sink_records_total", "log") == burstRecords &&
			metric("tracebridge_sink_records_total", "stream")+metric("tracebridge_sink_overflow_records_total", "stream") == burstRecords
	})
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	t.Logf("tail stopped with %d of %d records in the log", during, burstRecords)
	// Its output ends when it exits (--count); Wait only after reading
	// all of it (exec closes the pipe).
	select {
	case err := <-read:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(180 * time.Second):
		t.Fatalf("tail did not get %d records in 3 minutes after it was resumed: %d lines; stderr:\n%s", burstRecords, lines.Load(), stderr.String())
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("tail: %v; stderr:\n%s", err, stderr.String())
	}
	if n := metric("tracebridge_sink_overflow_records_total", "stream"); n != 0 {
		t.Errorf("the engine dropped %d records of the stream", n)
	}
	if check.n != burstRecords {
		t.Errorf("tail printed %d records, want %d", check.n, burstRecords)
	}
	for c, n := range check.next {
		if n != burstPerConn {
			t.Errorf("connection %d: the last event tail printed is %d, want %d", c, n-1, burstPerConn-1)
		}
	}
	for _, b := range check.bad {
		t.Error(b)
	}
	if stderr.Len() > 0 {
		t.Errorf("tail wrote to stderr (a gap notice where nothing was lost?):\n%s", stderr.String())
	}
	if n := countLog(t, p.LogDir); n != burstRecords {
		t.Errorf("the log holds %d records, want %d", n, burstRecords)
	}

	// tail --count N from the start and dump agree with the log.
	tailed := filepath.Join(dir, "tail.jsonl")
	f, err := os.Create(tailed)
	if err != nil {
		t.Fatal(err)
	}
	again := exec.Command(bridgetest.Binary(t), "tail", url, "--since", "1h", "--count", strconv.Itoa(burstRecords), "--json")
	var againErr bytes.Buffer
	again.Stdout, again.Stderr = f, &againErr
	timer := time.AfterFunc(3*time.Minute, func() { again.Process.Kill() })
	err = again.Run()
	timer.Stop()
	f.Close()
	if err != nil {
		t.Fatalf("tail --since 1h --count %d: %v: %s", burstRecords, err, againErr.String())
	}
	var from orderCheck
	f, err = os.Open(tailed)
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		from.line(sc.Bytes())
	}
	f.Close()
	if from.n != burstRecords || len(from.bad) > 0 {
		t.Errorf("tail --since 1h --count %d printed %d records (problems: %q)", burstRecords, from.n, from.bad)
	}
	out2 := filepath.Join(dir, "dump")
	ok(t, "dump", url, "--since", "all", "--format", "kieker-binary", out2)
	if n := countLog(t, out2); n != burstRecords {
		t.Errorf("dump wrote %d records, want %d", n, burstRecords)
	}
}

// countLog counts the records (not the KiekerMetadataRecords) of the
// Kieker log in dir.
func countLog(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := benchkit.ReadLog(context.Background(), dir, pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		for i := range b.Records {
			if b.Records[i].Type.Name != record.KiekerMetadataRecord {
				n++
			}
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitUntil polls cond until it holds or the deadline passes.
func waitUntil(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	servicetest.WaitFor(t, limit, what, cond)
}
