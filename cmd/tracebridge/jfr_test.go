package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/flame"
	"github.com/tracebridge/tracebridge/internal/jfrtest"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	srclog "github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/stage/profile"
	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// jfrRec is a three-second recording of the Java workload with the
// profile settings, cut into 1 MB chunks (several chunks, rotations),
// shared by the tests of this file; TestMain removes it.
var jfrRec = jfrtest.Shared{Options: jfrtest.Options{Seconds: 3, MaxChunkSize: "1M", RunID: "cmd"}}

// fullCounts counts the JSON lines by full type name.
func fullCounts(t *testing.T, jsonLines string) map[string]int64 {
	t.Helper()
	counts := map[string]int64{}
	sc := bufio.NewScanner(strings.NewReader(jsonLines))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r jsonRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("invalid JSON line %q: %v", sc.Text(), err)
		}
		counts[r.Type]++
	}
	return counts
}

// summaryEvents is jfr summary's counts without the metadata and
// checkpoint records, which are not events.
func summaryEvents(t *testing.T, tools jfrtest.Tools, path string) (map[string]int64, int) {
	t.Helper()
	want, chunks, err := tools.Summary(path)
	if err != nil {
		t.Fatal(err)
	}
	delete(want, "jdk.Metadata")
	delete(want, "jdk.CheckPoint")
	delete(want, "jdk.Checkpoint")
	return want, chunks
}

// TestCatAndConvertJFR: cat prints every event of a recording (counts per
// type equal jfr summary's); --type decodes only the selected types; a
// repository directory of the same chunks prints the same; convert writes
// a Kieker log that cat reads back without the recording or -L (the types
// are described beside kieker.map) with exactly the same records, in the
// binary and the ASCII format.
func TestCatAndConvertJFR(t *testing.T) {
	tools, rec := jfrRec.Get(t)
	want, chunks := summaryEvents(t, tools, rec)
	whole := ok(t, "cat", "--json", rec)
	got := fullCounts(t, whole.stdout)
	if diff := cmp.Diff(want, got); diff != "" || chunks < 2 {
		t.Fatalf("cat counts (-jfr summary +cat), %d chunks:\n%s", chunks, diff)
	}
	var total int64
	for _, n := range got {
		total += n
	}
	t.Logf("cat: %d events of %d types in %d chunks equal jfr summary", total, len(got), chunks)

	text := ok(t, "cat", rec)
	if n := int64(strings.Count(text.stdout, "\n")); n != total {
		t.Errorf("text output has %d lines, want %d", n, total)
	}
	sel := fullCounts(t, ok(t, "cat", "--json", "--type", "shop.Order,ExecutionSample", rec).stdout)
	if diff := cmp.Diff(map[string]int64{"shop.Order": want["shop.Order"], "jdk.ExecutionSample": want["jdk.ExecutionSample"]}, sel); diff != "" {
		t.Errorf("--type (-want +got):\n%s", diff)
	}

	// The same chunks as a JVM repository.
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	jvm := filepath.Join(root, "2026_01_02_03_04_05_4242")
	os.Mkdir(jvm, 0o755)
	splitRecording(t, data, jvm)
	if r := ok(t, "cat", "--json", root); r.stdout != whole.stdout {
		t.Errorf("cat of the repository differs from cat of the recording")
	}

	for _, to := range []string{"", "ascii"} {
		args := []string{"convert", rec, t.TempDir()}
		if to != "" {
			args = []string{"convert", "--to", to, "--compress", "gzip", rec, t.TempDir()}
		}
		r := ok(t, args...)
		logDir := strings.TrimSpace(r.stdout)
		irls, _ := filepath.Glob(filepath.Join(logDir, "*.irl"))
		if len(irls) < 2 {
			t.Errorf("%s: IRL files %v", logDir, irls)
		}
		back := ok(t, "cat", "--json", logDir)
		if strings.Contains(back.stderr, "not in the catalogue") {
			t.Errorf("%s: %s", logDir, back.stderr)
		}
		_, rest, _ := strings.Cut(back.stdout, "\n") // the KiekerMetadataRecord first
		if to == "" {
			// A Kieker log has no null string: JFR's null is written as
			// the empty string, as Kieker writes a null string.
			if rest != nullStrings.ReplaceAllString(nullStrings.ReplaceAllString(whole.stdout, `$1""$2`), `$1""$2`) {
				t.Errorf("binary log: cat differs from the recording's cat (null strings as empty)")
			}
			if !strings.Contains(whole.stdout, `"customer":null`) || !strings.Contains(rest, `"customer":""`) {
				t.Errorf("the recording's null customers: not null in cat, or not empty in the log")
			}
		} else {
			// ASCII reproduces Kieker's text escaping: compare counts.
			if diff := cmp.Diff(got, fullCounts(t, rest)); diff != "" {
				t.Errorf("ASCII log counts (-recording +log):\n%s", diff)
			}
		}
		if !strings.Contains(r.stderr, fmt.Sprintf("converted %d events (%d chunks)", total, chunks)) {
			t.Errorf("convert said %q", r.stderr)
		}
	}
}

// nullStrings matches a JSON null value in `cat --json` lines (only
// null strings are null there).
var nullStrings = regexp.MustCompile(`([:\[,])null([,\]}])`)

// splitRecording writes each chunk of a recording to its own file in dir.
func splitRecording(t *testing.T, data []byte, dir string) {
	t.Helper()
	for off, i := 0, 0; off < len(data); i++ {
		size := be64(data[off+8:])
		if size < 68 || off+int(size) > len(data) {
			t.Fatal("bad chunk size")
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("2026_01_02_03_04_%02d.jfr", i)), data[off:off+int(size)], 0o644); err != nil {
			t.Fatal(err)
		}
		off += int(size)
	}
}

func be64(b []byte) uint64 {
	var v uint64
	for _, c := range b[:8] {
		v = v<<8 | uint64(c)
	}
	return v
}

// TestDamagedJFR: a recording cut in its second chunk, and a repository
// with a garbage chunk file: cat and convert report the file, the offset
// and the reason, go on, print or write every readable event, and exit
// with 1.
func TestDamagedJFR(t *testing.T) {
	tools, rec := jfrRec.Get(t)
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	first := int(be64(data[8:]))
	cut := filepath.Join(t.TempDir(), "cut.jfr")
	os.WriteFile(cut, data[:first+(len(data)-first)/3], 0o644)
	firstOnly := filepath.Join(t.TempDir(), "first.jfr")
	os.WriteFile(firstOnly, data[:first], 0o644)
	want, _ := summaryEvents(t, tools, firstOnly)

	r := tb(t, "cat", "--json", cut)
	if r.code != exitData {
		t.Fatalf("exit %d, want %d; stderr:\n%s", r.code, exitData, r.stderr)
	}
	for _, s := range []string{"skipped: jfr " + cut + ": chunk at offset " + strconv.Itoa(first) + " is truncated", "1 damaged chunks or events skipped"} {
		if !strings.Contains(r.stderr, s) {
			t.Errorf("stderr lacks %q:\n%s", s, r.stderr)
		}
	}
	if diff := cmp.Diff(want, fullCounts(t, r.stdout)); diff != "" {
		t.Errorf("the first chunk's events (-jfr summary +cat):\n%s", diff)
	}

	out := t.TempDir()
	r = tb(t, "convert", cut, out)
	if r.code != exitData || !strings.Contains(r.stderr, "is truncated") {
		t.Fatalf("convert: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	back := ok(t, "cat", "--json", strings.TrimSpace(r.stdout))
	_, rest, _ := strings.Cut(back.stdout, "\n")
	if diff := cmp.Diff(want, fullCounts(t, rest)); diff != "" {
		t.Errorf("converted events (-jfr summary of the first chunk +log):\n%s", diff)
	}

	repo := t.TempDir()
	splitRecording(t, data[:first], repo)
	os.WriteFile(filepath.Join(repo, "garbage.jfr"), []byte("FLR\x00"+strings.Repeat("x", 100)), 0o644)
	r = tb(t, "cat", "--json", repo)
	if r.code != exitData || !strings.Contains(r.stderr, "garbage.jfr: offset ") {
		t.Errorf("repository: exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if diff := cmp.Diff(want, fullCounts(t, r.stdout)); diff != "" {
		t.Errorf("repository events (-want +got):\n%s", diff)
	}
}

// TestAnalyzeFlame: folded stacks and SVG flame graphs of a recording's
// execution samples, in all and per thread; the samples add up to jfr
// summary's count.
func TestAnalyzeFlame(t *testing.T) {
	tools, rec := jfrRec.Get(t)
	want, _ := summaryEvents(t, tools, rec)
	dir := t.TempDir()
	prefix := filepath.Join(dir, "cpu")
	r := ok(t, "analyze", "--flame", "--per-thread", "-o", prefix, rec)
	files := strings.Fields(r.stdout)
	if len(files) < 4 || files[0] != prefix+".folded" || files[1] != prefix+".svg" {
		t.Fatalf("files %v", files)
	}
	f, err := os.Open(prefix + ".folded")
	if err != nil {
		t.Fatal(err)
	}
	all, err := flame.ReadFolded(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	if all.Total() != want["jdk.ExecutionSample"] {
		t.Errorf("%d samples in the folded stacks, jfr summary has %d", all.Total(), want["jdk.ExecutionSample"])
	}
	var perThread int64
	// A thread of the workload's own has a profile (which of them the
	// sampler caught depends on how busy the machine was: the contender
	// mostly waits on its lock).
	worker := false
	for _, name := range files[2:] {
		if strings.HasSuffix(name, ".folded") {
			f, _ := os.Open(name)
			s, err := flame.ReadFolded(f)
			f.Close()
			if err != nil {
				t.Fatal(err)
			}
			perThread += s.Total()
			for _, w := range []string{"contender", "allocator", "thrower", "net-"} {
				worker = worker || strings.Contains(name, "cpu-"+w)
			}
		}
	}
	if perThread != all.Total() || !worker {
		t.Errorf("per-thread profiles hold %d samples (want %d); a workload thread among %v: %v", perThread, all.Total(), files, worker)
	}
	svg, err := os.ReadFile(prefix + ".svg")
	if err != nil || !strings.HasPrefix(string(svg), "<?xml") || !strings.Contains(string(svg), "Workload.") {
		t.Errorf("SVG %.200s: %v", svg, err)
	}
	if r := ok(t, "analyze", "--flame", "-o", "-", "--every", "1s", rec); !strings.Contains(r.stdout, "java.lang.Thread.run()") {
		t.Errorf("folded on stdout: %.300s", r.stdout)
	}
	if r := tb(t, "analyze", "--flame", "--type", "jdk.NoSuchEvent", "-o", prefix, rec); r.code != exitData || !strings.Contains(r.stderr, "no samples") {
		t.Errorf("no samples: exit %d, %s", r.code, r.stderr)
	}
	if r := tb(t, "analyze", "--flame", "--per-thread", "--per-host", rec); r.code != exitUsage {
		t.Errorf("--per-thread --per-host: exit %d", r.code)
	}
}

// logTicks reads a Kieker log being written and returns the shop.Tick
// sequence numbers of a run with their event times (epoch ns).
func logTicks(t *testing.T, dir, run string) map[int64]int64 {
	t.Helper()
	out := map[int64]int64{}
	r, err := srclog.Open(dir, srclog.Options{SkipBad: true})
	if err != nil {
		return out // not there yet
	}
	r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		for i := range b.Records {
			rec := &b.Records[i]
			if rec.Type.Name != "shop.Tick" {
				continue
			}
			if v, _ := rec.Field("run"); v.Str() != run {
				continue
			}
			seq, _ := rec.Field("seq")
			out[seq.Int()] = rec.LoggingTimestamp
		}
		return nil
	}))
	return out
}

// TestServeFollowsJVMRepository runs `tracebridge serve` with a jfr
// receiver on a repository that does not exist yet, then a JVM that
// writes there: its events reach the Kieker log while it runs (the delay
// from the JVM's flush to the record in the log is measured); the JVM is
// killed with SIGKILL and a second one started, and the receiver goes on
// with it. cat then reads the log back without the recordings or -L (the
// JFR types are described beside kieker.map): the second JVM's orders are
// all there, as many as jfr summary counts in its recording.
func TestServeFollowsJVMRepository(t *testing.T) {
	tools := jfrtest.Require(t)
	cp, err := tools.Compile()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	root := filepath.Join(work, "repository") // created by the JVM
	yaml := fmt.Sprintf("flush_interval: 100ms\nreceivers:\n  - {name: jvms, type: jfr, repository: %q, host: shop-host, stale_after: 2s}\nsinks:\n  - {type: kieker-log, path: logs}\n", root)
	p := bridgetest.Start(t, work, "-c", bridgetest.WriteConfig(t, work, yaml), "--no-store")
	if !strings.Contains(p.Stdout(), "receiver jvms (jfr) following the JFR repository "+root) {
		t.Errorf("stdout:\n%s", p.Stdout())
	}
	time.Sleep(300 * time.Millisecond) // the receiver waits for the repository

	watch := jfrtest.WatchFlushes(root)
	a, err := tools.Start(cp, jfrtest.Options{Seconds: 60, RunID: "A", Repository: root, Settings: jfrtest.Small})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Kill()
	// Note when each of A's ticks first shows in the log.
	seen := map[int64]time.Time{}
	var times map[int64]int64
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < 6 && time.Now().Before(deadline) {
		times = logTicks(t, p.LogDir, "A")
		now := time.Now()
		for seq := range times {
			if _, ok := seen[seq]; !ok {
				seen[seq] = now
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	flushes := watch.Close()
	if len(seen) < 6 {
		t.Fatalf("%d of A's ticks in the log within 60 s; stderr:\n%s", len(seen), p.Stderr())
	}
	// The delay of each tick: from the first flush after the event to
	// the record in the log (tick 0 is left out: the JVM was starting).
	var delays []time.Duration
	bySeq := map[int64]time.Duration{}
	for seq, at := range seen {
		if seq == 0 {
			continue
		}
		ev := time.Unix(0, times[seq])
		for _, f := range flushes {
			if f.After(ev) {
				if d := at.Sub(f); d >= 0 {
					delays = append(delays, d)
					bySeq[seq] = d.Round(time.Millisecond)
				}
				break
			}
		}
	}
	slices.Sort(delays)
	t.Logf("delay per tick: %v", bySeq)
	if len(delays) < 3 {
		t.Fatalf("delays %v (flushes %d)", delays, len(flushes))
	}
	t.Logf("flush → record in the Kieker log: median %v, max %v over %d ticks (poll 100ms, flush_interval 100ms, test polls every 20ms)",
		delays[len(delays)/2].Round(time.Millisecond), delays[len(delays)-1].Round(time.Millisecond), len(delays))
	// A latency, not a guarantee (a loaded machine delays the polls):
	// only a receiver that stalls fails here.
	if delays[len(delays)/2] > 10*time.Second {
		t.Errorf("median delay %v: the receiver stalls", delays[len(delays)/2])
	}

	// Kill A, start B (which writes its recording at exit): the receiver
	// gives A's last chunk up and reads B from its beginning.
	a.Kill()
	bRec := filepath.Join(work, "b.jfr")
	b, err := tools.Start(cp, jfrtest.Options{Seconds: 4, RunID: "B", Repository: root, Settings: jfrtest.Small, Filename: bRec})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(90 * time.Second); err != nil {
		t.Fatal(err)
	}
	want, _, err := tools.Summary(bRec)
	if err != nil {
		t.Fatal(err)
	}
	countB := func(stdout string) map[string]int64 {
		n := map[string]int64{}
		sc := bufio.NewScanner(strings.NewReader(stdout))
		sc.Buffer(nil, 16<<20)
		for sc.Scan() {
			var r struct {
				Type   string
				Fields struct{ Run string }
			}
			json.Unmarshal(sc.Bytes(), &r)
			if r.Fields.Run == "B" {
				n[r.Type]++
			}
		}
		return n
	}
	deadline = time.Now().Add(30 * time.Second)
	for len(logTicks(t, p.LogDir, "B")) < int(want["shop.Tick"]) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	p.Stop()

	r := ok(t, "cat", "--json", p.LogDir)
	if strings.Contains(r.stderr, "not in the catalogue") {
		t.Errorf("cat could not read every type: %s", r.stderr)
	}
	got := countB(r.stdout)
	for _, typ := range []string{"shop.Order", "shop.Tick"} {
		if got[typ] != want[typ] || want[typ] == 0 {
			t.Errorf("B's %s: %d in the log, jfr summary of its recording: %d", typ, got[typ], want[typ])
		}
	}
	ticksA := logTicks(t, p.LogDir, "A")
	for seq := int64(0); seq < int64(len(ticksA)); seq++ {
		if _, ok := ticksA[seq]; !ok {
			t.Errorf("A's tick %d missing (ticks %v)", seq, ticksA)
		}
	}
	all := fullCounts(t, r.stdout)
	if all["jdk.ExecutionSample"] == 0 || all["jdk.JavaMonitorEnter"] == 0 {
		t.Errorf("counts %v", all)
	}
	if !strings.Contains(p.Stderr(), "giving up a chunk its JVM stopped writing") {
		t.Errorf("A's last chunk was not given up; stderr:\n%s", p.Stderr())
	}
	t.Logf("log: %d records; A: %d ticks before the kill; B: %d orders, %d ticks = jfr summary", len(strings.Split(r.stdout, "\n"))-1, len(ticksA), got["shop.Order"], got["shop.Tick"])
}

// TestServeJFRFlags: serve -t jfr --repository DIR [-h HOST] builds a jfr
// receiver; the flags' mistakes are usage errors.
func TestServeJFRFlags(t *testing.T) {
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-t", "jfr", "--repository", filepath.Join(dir, "repo"), "-h", "box", "--data-dir", "data")
	if !strings.Contains(p.Stdout(), "receiver jfr (jfr) following the JFR repository "+filepath.Join(dir, "repo")) {
		t.Errorf("stdout:\n%s", p.Stdout())
	}
	p.Stop()
	for _, args := range [][]string{
		{"serve", "-t", "jfr"},
		{"serve", "--repository", dir},
		{"serve", "-t", "kieker-tcp", "-p", "0", "--repository", dir},
		{"serve", "-t", "otlp-http", "-p", "0", "--repository", dir},
		{"serve", "-t", "jfr", "--repository", dir, "-p", "1"},
	} {
		if r := tb(t, args...); r.code != exitUsage {
			t.Errorf("%v: exit %d, want %d; stderr:\n%s", args, r.code, exitUsage, r.stderr)
		}
	}
}

// TestServeSamplesOnOTLPSpans: the real serve binary with a jfr receiver
// following a running JVM and an OTLP/HTTP receiver. A span posted as an
// OpenTelemetry agent on that JVM would post it (host.name = the jfr
// receiver's host, thread.id = a worker's Java thread id, a time window
// in which the worker ran) is stored with the execution samples taken on
// that thread during it (the profile stage serve adds for the jfr
// receiver). The host's flame graph of the last minutes is served by the
// HTTP API.
func TestServeSamplesOnOTLPSpans(t *testing.T) {
	tools := jfrtest.Require(t)
	cp, err := tools.Compile()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	root := filepath.Join(work, "repository")
	yaml := fmt.Sprintf("flush_interval: 100ms\nreceivers:\n  - {name: jvms, type: jfr, repository: %q, host: shop-1}\n  - {name: otlp, type: otlp-http, listen: \"127.0.0.1:0\"}\nsinks:\n  - {type: kieker-log, path: logs}\n  - {type: store, path: store}\n", root)
	p := bridgetest.Start(t, work, "-c", bridgetest.WriteConfig(t, work, yaml), "--http", "127.0.0.1:0")
	// (Runs until the test ends: the samples come slowly when the
	// machine is busy.)
	jvm, err := tools.Start(cp, jfrtest.Options{Seconds: 300, RunID: "otlp", Repository: root, Settings: jfrtest.Small})
	if err != nil {
		t.Fatal(err)
	}
	defer jvm.Kill()

	// The worker's Java thread id and its samples, from the Kieker log.
	var tid int64 = -1
	var sampleTimes []int64
	readSamples := func() {
		sampleTimes = sampleTimes[:0]
		r, err := srclog.Open(p.LogDir, srclog.Options{SkipBad: true})
		if err != nil {
			return
		}
		r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
			for i := range b.Records {
				rec := &b.Records[i]
				if rec.Type.Name != "jdk.ExecutionSample" {
					continue
				}
				name, _ := rec.Field("sampledThread")
				id, _ := rec.Field("sampledThread.javaThreadId")
				if tid < 0 && name.Str() == "contender-a-0" {
					tid = id.Int()
				}
				if id.Int() == tid {
					sampleTimes = append(sampleTimes, rec.LoggingTimestamp)
				}
			}
			return nil
		}))
	}
	deadline := time.Now().Add(180 * time.Second)
	for len(sampleTimes) < 10 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		readSamples()
	}
	if len(sampleTimes) < 10 {
		t.Fatalf("%d samples of the worker in the log; stderr:\n%s", len(sampleTimes), p.Stderr())
	}
	// A span over the samples seen so far that the stage still holds: it
	// drops a thread's samples profile.DefaultRetain (2 min) behind the
	// newest, and on a busy machine ten samples may take longer than
	// that to come (a CI run saw a span over 2m7s with its first two
	// samples dropped).
	end := sampleTimes[len(sampleTimes)-1] + 1
	start := max(sampleTimes[0]-1, end-int64(profile.DefaultRetain*3/4))
	want := 0
	for _, ts := range sampleTimes {
		if ts >= start && ts <= end {
			want++
		}
	}
	body := fmt.Sprintf(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"shop"}},{"key":"host.name","value":{"stringValue":"shop-1"}}]},
"scopeSpans":[{"scope":{"name":"test"},"spans":[{"traceId":"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"POST /checkout","kind":2,
"startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[{"key":"thread.id","value":{"intValue":"%d"}}]}]}]}]}`, start, end, tid)
	resp, err := http.Post("http://"+p.Addr("otlp")+"/v1/traces", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("OTLP/HTTP: %s", resp.Status)
	}
	// The trace is stored once its window (2 s) has closed.
	base := httpURL(t, p)
	waitUntil(t, 120*time.Second, "the trace stored", func() bool {
		code, _ := apiGet(t, "GET", base+"/api/v1/traces/5b8efff798038103d269b633813fc60c", "", "")
		return code == 200
	})

	// The host's flame graph over the HTTP API (what the web UI's
	// profile tab draws) holds the worker's stacks; another host has none.
	code, b := apiGet(t, "GET", base+"/api/v1/profiles/flame?host=shop-1&since=15m&format=folded", "", "")
	if code != 200 || !strings.Contains(string(b), "Workload.contend()") {
		t.Errorf("the host's flame graph: %d %.500s", code, b)
	}
	if code, b := apiGet(t, "GET", base+"/api/v1/profiles/flame?host=nobody", "", ""); code != 404 || !strings.Contains(string(b), "no samples of host nobody") {
		t.Errorf("another host's flame graph: %d %s", code, b)
	}
	p.Stop()

	st, err := store.Open(filepath.Join(work, "store"), store.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	id, _ := trace.ParseID("5b8efff798038103d269b633813fc60c")
	tr, err := st.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	sp := tr.Spans[0]
	samples, _ := sp.Attr("profile.samples")
	folded, _ := sp.Attr("profile.folded")
	events := 0
	for _, ev := range sp.Events {
		if ev.Name == "profile.sample" {
			events++
		}
	}
	if samples.Value != strconv.Itoa(want) || !strings.Contains(folded.Value, "Workload.contend()") || events != min(want, 100) {
		t.Errorf("span thread %s: %s samples (want %d), %d events, folded:\n%s", sp.Thread, samples.Value, want, events, folded.Value)
	}
	t.Logf("stored span on thread %d over %v: %s samples, folded:\n%s", tid, time.Duration(end-start).Round(time.Millisecond), samples.Value, folded.Value)
}

// TestServeReportsDamagedChunks: a repository holding a garbage chunk file
// and a truncated one beside good chunks: serve logs each with its file,
// offset and reason, and writes the events of the good chunks.
func TestServeReportsDamagedChunks(t *testing.T) {
	tools, rec := jfrRec.Get(t)
	data, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	first := int(be64(data[8:]))
	firstOnly := filepath.Join(t.TempDir(), "first.jfr")
	os.WriteFile(firstOnly, data[:first], 0o644)
	want, _ := summaryEvents(t, tools, firstOnly)
	var total int64
	for _, n := range want {
		total += n
	}
	work := t.TempDir()
	jvm := filepath.Join(work, "repository", "2026_01_02_03_04_05_1")
	os.MkdirAll(jvm, 0o755)
	splitRecording(t, data[:first], jvm)
	os.WriteFile(filepath.Join(jvm, "garbage.jfr"), []byte(strings.Repeat("not a chunk ", 20)), 0o644)
	second := int(be64(data[first+8:]))
	os.WriteFile(filepath.Join(jvm, "2026_01_02_03_04_59.jfr"), data[first:first+second/2], 0o644)
	yaml := fmt.Sprintf("flush_interval: 100ms\nreceivers:\n  - {name: jvms, type: jfr, repository: %q, start: beginning}\nsinks:\n  - {type: kieker-log, path: logs}\n", filepath.Join(work, "repository"))
	p := bridgetest.Start(t, work, "-c", bridgetest.WriteConfig(t, work, yaml), "--no-store")
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) && !(strings.Contains(p.Stderr(), "garbage.jfr") && strings.Contains(p.Stderr(), "is truncated")) {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	p.Stop()
	for _, s := range []string{"garbage.jfr: offset 0: not a JFR chunk", "2026_01_02_03_04_59.jfr: chunk at offset 0 is truncated"} {
		if !strings.Contains(p.Stderr(), s) {
			t.Errorf("stderr lacks %q:\n%s", s, p.Stderr())
		}
	}
	r := ok(t, "cat", "--json", p.LogDir)
	_, rest, _ := strings.Cut(r.stdout, "\n")
	if diff := cmp.Diff(want, fullCounts(t, rest)); diff != "" {
		t.Errorf("events of the good chunk (-jfr summary +log):\n%s", diff)
	}
}
