package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/daemon"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

func countByType(recs []record.Record) map[string]int {
	m := map[string]int{}
	for _, r := range recs {
		m[r.Type.ShortName()]++
	}
	return m
}

var catalog = record.Builtin()

// addEvent adds Before event i of a trace to b: timestamp 1000+i,
// orderIndex i, operation void op<i%10>() of class a.B.
func addEvent(b *record.Batch, loggingTimestamp, trace int64, i int) *record.Record {
	r := b.Add(catalog.Lookup(record.BeforeOperationEvent), loggingTimestamp)
	r.Values[0] = record.IntValue(int64(1000 + i))
	r.Values[1] = record.IntValue(trace)
	r.Values[2] = record.IntValue(int64(i))
	r.Values[3] = record.StringValue(fmt.Sprintf("void op%d()", i%10))
	r.Values[4] = record.StringValue("a.B")
	return r
}

// kdbEvents encodes n Before events of one trace in the KDB binary dialect
// (default mapping id 1), orderIndex from..from+n.
func kdbEvents(t testing.TB, trace int64, from, n int) []byte {
	var b record.Batch
	var out []byte
	for i := from; i < from+n; i++ {
		b.Reset()
		r := addEvent(&b, record.NoTimestamp, trace, i)
		var err error
		if out, err = kdb.AppendBinary(out, 1, r); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// kiekerEvents encodes the same in Kieker's single-socket protocol.
func kiekerEvents(t testing.TB, trace int64, n int) []byte {
	enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
	var b record.Batch
	var out []byte
	for i := 0; i < n; i++ {
		b.Reset()
		r := addEvent(&b, int64(i), trace, i)
		var err error
		if out, err = enc.Append(out, r); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func send(t testing.TB, addr string, data []byte) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return
	}
	defer c.Close()
	if _, err := c.Write(data); err != nil {
		t.Error(err)
	}
}

// tracesIn groups the generated Before events (class a.B) by traceId and
// checks each trace's orderIndex runs 0..n-1 without gaps.
func tracesIn(t *testing.T, recs []record.Record) map[int64]int {
	t.Helper()
	traces := map[int64]int{}
	for _, r := range recs {
		if r.Type.Name != record.BeforeOperationEvent || r.Values[4].Str() != "a.B" {
			continue
		}
		tr, oi := r.Values[1].Int(), r.Values[2].Int()
		if oi != int64(traces[tr]) {
			t.Fatalf("trace %d: orderIndex %d after %d records", tr, oi, traces[tr])
		}
		traces[tr]++
	}
	return traces
}

const twoReceivers = `
flush_interval: 100ms
receivers:
  - {name: kdb, type: tcp-server, listen: "127.0.0.1:0"}
  - {name: kieker, type: kieker-tcp, listen: "127.0.0.1:0"}
  - {name: dual, type: kieker-tcp-dual, listen: "127.0.0.1:0", registry_listen: "127.0.0.1:0"}
sinks:
  - {type: kieker-log, path: logs}
`

// TestServeEveryDialectAndSIGTERM sends records with each dialect from
// several concurrent clients, stops the bridge with SIGTERM and reads the
// log back.
func TestServeEveryDialectAndSIGTERM(t *testing.T) {
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, twoReceivers), "-s")
	var wg sync.WaitGroup
	for c := 0; c < 6; c++ {
		wg.Add(2)
		go func() { defer wg.Done(); send(t, p.Receivers["kdb"], kdbEvents(t, int64(c), 0, 3000)) }()
		go func() { defer wg.Done(); send(t, p.Receivers["kieker"], kiekerEvents(t, int64(100+c), 3000)) }()
	}
	wg.Wait()
	// Every stream captured from a real writer, whole.
	for _, name := range []string{"java-tcp.bin", "java-tcp-lts.bin", "python-tcp.bin", "c-tcp.bin", "c-gccprof-tcp.bin", "c-basic-example.bin"} {
		b, err := os.ReadFile(testcorpus.Path(t, "kieker-streams", name))
		if err != nil {
			t.Fatal(err)
		}
		send(t, p.Receivers["kieker"], b)
	}
	p.Stop()
	recs := bridgetest.ReadLogSkipBad(t, p.LogDir)
	traces := tracesIn(t, recs)
	for c := int64(0); c < 6; c++ {
		if traces[c] != 3000 || traces[100+c] != 3000 {
			t.Errorf("client %d: %d KDB and %d Kieker records, want 3000 each", c, traces[c], traces[100+c])
		}
	}
	counts := countByType(recs)
	// 36000 generated + the captured streams' Before events (186+186+175+150+16+12).
	if counts["BeforeOperationEvent"] != 36000+725 || counts["CPUUtilizationRecord"] != 1 || counts["TraceMetadata"] != 25+25+1+1 {
		t.Errorf("counts %v", counts)
	}
	if !strings.Contains(p.Stdout(), "ns per record") {
		t.Errorf("-s printed no statistics:\n%s", p.Stdout())
	}
}

func TestServeDualSocket(t *testing.T) {
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, twoReceivers))
	addrs := strings.Fields(strings.NewReplacer("(registry", "", ")", "").Replace(p.Receivers["dual"]))
	_ = addrs
	// The dual receiver's line is "ADDR (registry ADDR)"; find both.
	out := p.Stdout()
	m := regexp.MustCompile(`receiver dual \(kieker-tcp-dual\) listening on (\S+) \(registry (\S+)\)`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no dual addresses in:\n%s", out)
	}
	typ := catalog.Lookup(record.BeforeOperationEvent)
	enc := kieker.NewEncoder(kieker.EncoderOptions{})
	var frames, entries []byte
	var b record.Batch
	for i := 0; i < 500; i++ {
		b.Reset()
		r := b.Add(typ, 1)
		r.Values[1] = record.IntValue(7)
		r.Values[2] = record.IntValue(int64(i))
		r.Values[3] = record.StringValue(fmt.Sprintf("op%d", i%3))
		r.Values[4] = record.StringValue("a.B")
		frames, _ = enc.Append(frames, r)
		for _, e := range enc.NewEntries() {
			entries = kieker.AppendRegistryEntry(entries, e.ID, e.Value, false)
		}
	}
	// Records first, registry a little later: the receiver waits for it.
	recDone := make(chan struct{})
	go func() { send(t, m[1], frames); close(recDone) }()
	time.Sleep(200 * time.Millisecond)
	send(t, m[2], entries)
	<-recDone
	time.Sleep(300 * time.Millisecond)
	p.Stop()
	if got := tracesIn(t, bridgetest.ReadLogSkipBad(t, p.LogDir))[7]; got != 500 {
		t.Fatalf("%d records through the dual-socket receiver, want 500; stderr:\n%s", got, p.Stderr())
	}
}

// TestServeBadClientsAmongGood: a malformed stream, an unknown type id and
// a client that disconnects mid-record close only their own connection.
func TestServeBadClientsAmongGood(t *testing.T) {
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, twoReceivers))
	good := kdbEvents(t, 1, 0, 2000)
	var wg sync.WaitGroup
	for c := 0; c < 4; c++ {
		wg.Add(1)
		go func() { defer wg.Done(); send(t, p.Receivers["kdb"], kdbEvents(t, int64(10+c), 0, 2000)) }()
	}
	// 50 good records, then an unknown type id.
	bad := append(kdbEvents(t, 2, 0, 50), 0, 0, 0, 99, 1, 2, 3)
	send(t, p.Receivers["kdb"], bad)
	// 30 good records, then a string length far over the limit.
	huge := append(kdbEvents(t, 3, 0, 30), 0, 0, 0, 1)
	huge = binary.BigEndian.AppendUint64(huge, 1)
	huge = binary.BigEndian.AppendUint64(huge, 1)
	huge = binary.BigEndian.AppendUint32(huge, 0)
	huge = binary.BigEndian.AppendUint32(huge, 0x7fffffff)
	send(t, p.Receivers["kdb"], huge)
	// 20 good records and half of one, then the client hangs up.
	cut := kdbEvents(t, 4, 0, 21)
	send(t, p.Receivers["kdb"], cut[:len(cut)-9])
	// Kieker's own writer breaks non-ASCII strings.
	uni, _ := os.ReadFile(testcorpus.Path(t, "kieker-streams", "java-tcp-unicode.bin"))
	send(t, p.Receivers["kieker"], uni)
	wg.Wait()
	send(t, p.Receivers["kdb"], good)
	time.Sleep(200 * time.Millisecond)
	p.Stop()

	traces := tracesIn(t, bridgetest.ReadLogSkipBad(t, p.LogDir))
	want := map[int64]int{1: 2000, 2: 50, 3: 30, 4: 20, 10: 2000, 11: 2000, 12: 2000, 13: 2000}
	for tr, n := range want {
		if traces[tr] != n {
			t.Errorf("trace %d: %d records, want %d", tr, traces[tr], n)
		}
	}
	logs := p.Stderr()
	for _, want := range []string{"unknown type id 99", "over the limit", "inside a record", "UTF-16", "peer=127.0.0.1:", "offset="} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
}

// TestServeKillAfterFlush: after kill -9, every record written before the
// last periodic flush reads back.
func TestServeKillAfterFlush(t *testing.T) {
	for _, format := range []string{"binary", "ascii"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			cfg := strings.Replace(twoReceivers, "path: logs", "path: logs, format: "+format+", compression: gzip", 1)
			p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, cfg))
			send(t, p.Receivers["kdb"], kdbEvents(t, 5, 0, 5000))
			time.Sleep(600 * time.Millisecond) // several 100ms flushes
			p.Kill()
			if got := tracesIn(t, bridgetest.ReadLogSkipBad(t, p.LogDir))[5]; got != 5000 {
				t.Fatalf("%d of 5000 records after kill -9", got)
			}
		})
	}
}

// TestServeSingleServerEnds: tcp-single-server ends the bridge when its one
// connection closes.
func TestServeSingleServerEnds(t *testing.T) {
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-t", "tcp-single-server", "-p", "0", "--data-dir", "logs")
	send(t, p.Receivers["tcp-single-server"], kdbEvents(t, 9, 0, 700))
	p.Wait(0)
	if got := tracesIn(t, bridgetest.ReadLogSkipBad(t, p.LogDir))[9]; got != 700 {
		t.Fatalf("%d records", got)
	}
}

// TestServeClientAgainstRestartingServer: -t tcp-client --respawn keeps
// reconnecting to a record provider that restarts.
func TestServeClientAgainstRestartingServer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().(*net.TCPAddr)
	serveOnce := func(ln net.Listener, data []byte) {
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
			return
		}
		c.Write(data)
		c.Close()
	}
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-t", "tcp-client", "-h", "127.0.0.1", "-p", fmt.Sprint(addr.Port), "--respawn", "--data-dir", "logs")
	serveOnce(ln, kdbEvents(t, 20, 0, 1000))
	ln.Close()
	time.Sleep(300 * time.Millisecond) // the provider is down; the bridge retries
	ln, err = net.Listen("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serveOnce(ln, kdbEvents(t, 20, 1000, 1000))
	time.Sleep(300 * time.Millisecond)
	p.Stop()
	if got := tracesIn(t, bridgetest.ReadLogSkipBad(t, p.LogDir))[20]; got != 2000 {
		t.Fatalf("%d of 2000 records across the provider's restart", got)
	}
}

func TestServeExitCodes(t *testing.T) {
	dir := t.TempDir()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	badMap := filepath.Join(dir, "bad.map")
	writeFile(t, badMap, "1=no.such.Record\n")
	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	closedPort := closed.Addr().(*net.TCPAddr).Port
	closed.Close()
	for _, tc := range []struct {
		args []string
		code int // exitUsage: a usage error
	}{
		{[]string{"-t", "tcp-server", "-p", "0", "-m", badMap}, exitMapping},
		{[]string{"-c", bridgetest.WriteConfig(t, dir, "receivers: [{type: nope}]\n")}, exitConfig},
		{[]string{"-t", "tcp-server", "-p", fmt.Sprint(busy.Addr().(*net.TCPAddr).Port)}, exitComm},
		{[]string{"-t", "tcp-client", "-h", "127.0.0.1", "-p", fmt.Sprint(closedPort)}, exitComm},
		{[]string{"-t", "tcp-server"}, exitUsage},
		{[]string{"-t", "carrier-pigeon", "-p", "1"}, exitUsage},
		{[]string{"--no-such-flag"}, exitUsage},
		{[]string{"-t", "tcp-server", "-p", "99999"}, exitUsage},
	} {
		cmd := exec.Command(bridgetest.Binary(t), append([]string{"serve", "--data-dir", filepath.Join(dir, "logs")}, tc.args...)...)
		cmd.Dir = dir
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != tc.code {
			t.Errorf("serve %v: exit %d, want %d\n%s", tc.args, code, tc.code, out)
		}
	}
}

func TestServeMetrics(t *testing.T) {
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, twoReceivers), "--metrics", "127.0.0.1:0")
	send(t, p.Receivers["kdb"], kdbEvents(t, 1, 0, 1234))
	send(t, p.Receivers["kdb"], []byte{0, 0, 0, 42})
	time.Sleep(300 * time.Millisecond)
	if p.Metrics == "" {
		t.Fatalf("no metrics address printed:\n%s", p.Stdout())
	}
	c, err := net.Dial("tcp", p.Metrics)
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(c, "GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
	body, _ := io.ReadAll(c)
	c.Close()
	for _, want := range []string{
		`tracebridge_records_received_total{receiver="kdb",type="kieker.common.record.flow.trace.operation.BeforeOperationEvent"} 1234`,
		`tracebridge_decode_errors_total{receiver="kdb"} 1`,
		`tracebridge_bytes_received_total{receiver="kdb"}`,
		`tracebridge_connections_total{receiver="kdb"} 2`,
		`tracebridge_queue_depth_batches`,
		`tracebridge_sink_batch_seconds_bucket{sink="kieker-log"`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	p.Stop()
}

func TestServeDaemon(t *testing.T) {
	dir := t.TempDir()
	r := tb(t, "serve", "-d", "-t", "tcp-server", "-p", "0", "--data-dir", filepath.Join(dir, "logs"),
		"--pid-file", filepath.Join(dir, "tb.pid"), "--log-file", filepath.Join(dir, "tb.log"))
	if r.code != 0 {
		t.Fatalf("exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	pid, err := daemon.ReadPIDFile(filepath.Join(dir, "tb.pid"))
	if err != nil {
		t.Fatal(err)
	}
	proc, _ := os.FindProcess(pid)
	if err := proc.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("daemon %d not running: %v", pid, err)
	}
	proc.Signal(syscall.SIGTERM)
	for i := 0; i < 200; i++ {
		if _, err := os.Stat(filepath.Join(dir, "tb.pid")); os.IsNotExist(err) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("daemon did not remove its PID file after SIGTERM")
}

// TestServeKDBCommandLine runs a KDB-style command line: -t -p -m -k -s -v.
func TestServeKDBCommandLine(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "mapping.txt"), "# the Perl probes' ids\n1=kieker.common.record.flow.trace.operation.BeforeOperationEvent\n2=kieker.common.record.flow.trace.operation.AfterOperationEvent\n3=kieker.common.record.flow.trace.Trace\n")
	writeFile(t, filepath.Join(dir, "kieker.monitoring.properties"), `kieker.monitoring.name=BRIDGE
kieker.monitoring.hostname=lab
kieker.monitoring.writer=kieker.monitoring.writer.filesystem.FileWriter
kieker.monitoring.writer.filesystem.FileWriter.customStoragePath=klogs
kieker.monitoring.writer.filesystem.FileWriter.logStreamHandler=kieker.monitoring.writer.filesystem.TextLogStreamHandler
kieker.monitoring.writer.filesystem.FileWriter.maxEntriesInFile=1000
kieker.monitoring.writer.filesystem.FileWriter.compression=kieker.monitoring.writer.compression.GZipCompressionFilter
`)
	p := bridgetest.Start(t, dir, "-t", "tcp-server", "-p", "0", "-m", "mapping.txt", "-L", testcorpus.Path(t, "kieker-irl", "tools", "opad"),
		"-k", "kieker.monitoring.properties", "-s", "-v", "1000")
	send(t, p.Receivers["tcp-server"], kdbEvents(t, 3, 0, 2500))
	time.Sleep(300 * time.Millisecond)
	p.Stop()
	if !strings.HasPrefix(p.LogDir, filepath.Join(dir, "klogs")) || !strings.HasSuffix(p.LogDir, "-UTC-lab-BRIDGE") {
		t.Errorf("log directory %s", p.LogDir)
	}
	files, _ := filepath.Glob(filepath.Join(p.LogDir, "*.dat.gz"))
	if len(files) != 3 { // 2501 records, 1000 per file
		t.Errorf("data files %v, want 3 gzip-compressed ASCII files", files)
	}
	if got := tracesIn(t, bridgetest.ReadLogSkipBad(t, p.LogDir))[3]; got != 2500 {
		t.Errorf("%d records", got)
	}
	out := p.Stdout()
	for _, want := range []string{"received 1000 records\nreceived 2000 records\n", "records per second"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
}

// TestServeEmbeddedDefault runs `tracebridge serve` with no arguments: the
// Kieker TCP receiver on 127.0.0.1:10133, KDB on 127.0.0.1:10144, OTLP on
// 4317 and 4318, ZICO on 8640, a log in ./tracebridge-data.
func TestServeEmbeddedDefault(t *testing.T) {
	dir := t.TempDir()
	p := bridgetest.Start(t, dir)
	if p.Receivers["kieker-tcp"] != "127.0.0.1:10133" || p.Receivers["tcp-server"] != "127.0.0.1:10144" ||
		p.Receivers["otlp-grpc"] != "127.0.0.1:4317" || p.Receivers["otlp-http"] != "127.0.0.1:4318" || p.Receivers["zico"] != "127.0.0.1:8640" {
		t.Fatalf("receivers %v; stderr:\n%s", p.Receivers, p.Stderr())
	}
	send(t, p.Receivers["kieker-tcp"], kiekerEvents(t, 1, 100))
	send(t, p.Receivers["tcp-server"], kdbEvents(t, 2, 0, 100))
	time.Sleep(200 * time.Millisecond)
	p.Stop()
	if !strings.HasPrefix(p.LogDir, filepath.Join(dir, "tracebridge-data")+"/") {
		t.Fatalf("log in %s", p.LogDir)
	}
	traces := tracesIn(t, bridgetest.ReadLogSkipBad(t, p.LogDir))
	if traces[1] != 100 || traces[2] != 100 {
		t.Fatalf("traces %v", traces)
	}
}

// TestServeStatsOverActiveTime: -s reports the time from the first record
// to the last and the rates over it, not over the idle time around them.
func TestServeStatsOverActiveTime(t *testing.T) {
	p := bridgetest.Start(t, t.TempDir(), "-t", "tcp-server", "-p", "0", "--data-dir", "logs", "-s")
	time.Sleep(time.Second) // idle before
	send(t, p.Addr("tcp-server"), kdbEvents(t, 1, 0, 2000))
	time.Sleep(1500 * time.Millisecond) // and after
	p.Stop()
	m := regexp.MustCompile(`tracebridge: (\d+) records in ([\d.]+) s active \(first to last record; run time ([\d.]+) s\), ([\d.]+) ns per record, (\d+) records per second`).FindStringSubmatch(p.Stdout())
	if m == nil {
		t.Fatalf("no statistics line:\n%s", p.Stdout())
	}
	var records, active, run, ns, rate float64
	for i, v := range []*float64{&records, &active, &run, &ns, &rate} {
		fmt.Sscan(m[i+1], v)
	}
	if records != 2000 || active > run-2 {
		t.Fatalf("%v records, %v s active of %v s: want 2000 records, the 2.5 s of idleness not counted", records, active, run)
	}
	// The rates are taken over the active time (within the rounding of
	// the printed figures).
	if want := active * 1e9 / records; ns < want-1e6/records || ns > want+1e6/records {
		t.Errorf("%v ns per record, want about %v", ns, want)
	}
	if active > 0.01 && (rate < 0.9*records/active || rate > 1.1*records/active) {
		t.Errorf("%v records per second, want about %v", rate, records/active)
	}
}

// TestServeStatsTooFewToTime: records handed on all at once have no
// active time; -s says so rather than dividing by the idle run time.
func TestServeStatsTooFewToTime(t *testing.T) {
	p := bridgetest.Start(t, t.TempDir(), "-t", "tcp-server", "-p", "0", "--data-dir", "logs", "-s")
	send(t, p.Addr("tcp-server"), kdbEvents(t, 1, 0, 3))
	p.Stop()
	if !strings.Contains(p.Stdout(), "tracebridge: 3 records, all handed on at once: too few to time (run time ") ||
		strings.Contains(p.Stdout(), "ns per record") {
		t.Fatalf("statistics:\n%s", p.Stdout())
	}
}

// TestServeCollectorTypes: -t otlp is both OTLP receivers on the SDKs'
// default ports, -t otlp-grpc, otlp-http and zico one each, -p moves one,
// --security turns the host table on; KDB's broker flags do not apply.
func TestServeCollectorTypes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string // type@listen security, …
		code int    // exitUsage: a usage error
	}{
		{[]string{"-t", "otlp"}, "otlp-grpc@127.0.0.1:4317 false, otlp-http@127.0.0.1:4318 false", 0},
		{[]string{"-t", "otlp", "--security", "-h", "0.0.0.0"}, "otlp-grpc@0.0.0.0:4317 true, otlp-http@0.0.0.0:4318 true", 0},
		{[]string{"-t", "otlp-http", "-p", "14318"}, "otlp-http@127.0.0.1:14318 false", 0},
		{[]string{"-t", "zico"}, "zico@127.0.0.1:8640 false", 0},
		{[]string{"-t", "zico", "-p", "0", "--security"}, "zico@127.0.0.1:0 true", 0},
		{[]string{"-t", "otlp", "-p", "1"}, "", exitUsage},
		{[]string{"-t", "zico", "-m", "x.map"}, "", exitUsage},
		{[]string{"-t", "tcp-server", "-p", "0", "--security"}, "", exitUsage},
	} {
		fs, f, _ := serveFlagSet(io.Discard)
		if _, err := parseArgs(fs, c.args); err != nil {
			t.Fatal(err)
		}
		cfg, err := f.config()
		if c.code != 0 {
			var ue usageError
			if !errors.As(err, &ue) {
				t.Errorf("%v: %v, want exit %d", c.args, err, c.code)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		var got []string
		for _, r := range cfg.Receivers {
			var k struct {
				Listen   string `yaml:"listen"`
				Security bool   `yaml:"security"`
			}
			if err := r.Decode(&k); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%s@%s %v", r.Type, k.Listen, k.Security))
		}
		if g := strings.Join(got, ", "); g != c.want {
			t.Errorf("%v: %s, want %s", c.args, g, c.want)
		}
	}
}
