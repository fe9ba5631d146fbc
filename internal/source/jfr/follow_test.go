package jfr

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	codec "github.com/tracebridge/tracebridge/internal/codec/jfr"
	"github.com/tracebridge/tracebridge/internal/codec/jsonl"
	"github.com/tracebridge/tracebridge/internal/jfrtest"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// runSource makes a source of cfg and runs it into out on a goroutine;
// the function it returns stops it and fails t if Run returned an error.
func runSource(t testing.TB, cfg Config, out pipeline.Consumer) (*Source, func()) {
	t.Helper()
	src, err := New(cfg, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- src.Run(ctx, out) }()
	return src, func() {
		t.Helper()
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func waitTicks(t *testing.T, c *collector, run string, n int, timeout time.Duration) []int64 {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ticks := c.ticks(run)
		if len(ticks) >= n {
			return ticks
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s: %d ticks within %v, want %d", run, len(ticks), timeout, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestFollowLiveRepository follows the repository of running JVMs: the
// repository does not exist when the source starts; events arrive while
// the JVM runs; a JVM killed with SIGKILL and a new one started on the
// same repository do not stop the follower; a JVM that exits normally
// (deleting its directory) has its last events read.
func TestFollowLiveRepository(t *testing.T) {
	tools := jfrtest.Require(t)
	cp, err := tools.Compile()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Join(t.TempDir(), "repository")
	var errsMu sync.Mutex
	var errs []error
	src, err := New(Config{Path: root, Follow: true, PollInterval: 100 * time.Millisecond, StaleAfter: 2 * time.Second},
		Settings{OnError: func(err error) { errsMu.Lock(); errs = append(errs, err); errsMu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	var c collector
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- src.Run(ctx, &c) }()
	defer func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	time.Sleep(300 * time.Millisecond) // the source waits for the repository

	watch := jfrtest.WatchFlushes(root)
	// Runs until it is killed (120 s at most).
	a, err := tools.Start(cp, jfrtest.Options{Seconds: 120, RunID: "A", Repository: root})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Kill()
	ticks := waitTicks(t, &c, "A", 3, 60*time.Second)
	if !a.Running() {
		t.Fatal("JVM A exited before its events arrived")
	}
	t.Logf("JVM A running, ticks read: %v", ticks)

	// SIGKILL: the directory stays with a chunk that never finishes.
	a.Kill()
	// B runs until Finish (a normal exit), however long a loaded machine
	// takes to read its first ticks: they are read while it runs.
	b, err := tools.Start(cp, jfrtest.Options{Seconds: 120, UntilFinish: true, RunID: "B", Repository: root})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Kill()
	waitTicks(t, &c, "B", 4, 60*time.Second)
	if !b.Running() {
		t.Fatal("JVM B exited before its events arrived")
	}
	if err := b.Finish(); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	// B's last tick is in the chunk finished at exit, whose directory the
	// JVM deletes. B printed each tick after committing its event.
	var printed []int64
	for len(b.Ticks()) > 0 {
		printed = append(printed, int64(<-b.Ticks()))
	}
	if len(printed) < 3 {
		t.Fatalf("JVM B printed ticks %v", printed)
	}
	got := waitTicks(t, &c, "B", len(printed), 30*time.Second)
	if !slices.Equal(got, printed) {
		t.Errorf("ticks of B read %v, B printed %v", got, printed)
	}
	// A's directory is given up once it is stale and its process gone,
	// and not read again although it stays.
	deadline := time.Now().Add(30 * time.Second)
	for src.Stats().JVMs > 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if n := src.Stats().JVMs; n != 0 {
		t.Errorf("%d JVM directories still followed", n)
	}
	time.Sleep(3 * time.Second) // longer than StaleAfter
	ticksA := c.ticks("A")
	for i := 1; i < len(ticksA); i++ {
		if ticksA[i] != ticksA[i-1]+1 {
			t.Fatalf("ticks of the killed JVM A read %v: a gap or a repetition", ticksA)
		}
	}
	flushes := watch.Close()

	// Delay from a flush (the header update the watcher saw) to the first
	// batch that arrived after it.
	_, arrived := c.snapshot()
	var delays []time.Duration
	for _, f := range flushes {
		i := sort.Search(len(arrived), func(i int) bool { return !arrived[i].Before(f) })
		if i < len(arrived) {
			delays = append(delays, arrived[i].Sub(f))
		}
	}
	if len(delays) < 5 {
		t.Fatalf("only %d flushes measured", len(delays))
	}
	slices.Sort(delays)
	median, p90, worst := delays[len(delays)/2], delays[len(delays)*9/10], delays[len(delays)-1]
	t.Logf("flush → record delay over %d flushes: median %v, p90 %v, max %v (poll interval 100 ms)", len(delays), median, p90, worst)
	// A latency, not a guarantee (a loaded machine delays the poll):
	// only a follower that stalls fails here.
	if median > 10*time.Second {
		t.Errorf("median delay %v: the follower stalls", median)
	}
	st := src.Stats()
	t.Logf("stats: %+v", st)
	errsMu.Lock()
	defer errsMu.Unlock()
	for _, e := range errs {
		t.Errorf("error: %v", e)
	}
	if st.BadEvents != 0 {
		t.Errorf("%d bad events", st.BadEvents)
	}
}

// TestStartNewestSkipsExistingData: with StartNewest the follower reads
// only what the JVM writes after it started; with StartBeginning it reads
// the beginning too.
func TestStartNewestSkipsExistingData(t *testing.T) {
	tools := jfrtest.Require(t)
	cp, err := tools.Compile()
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	j, err := tools.Start(cp, jfrtest.Options{Seconds: 30, RunID: "N", Repository: root})
	if err != nil {
		t.Fatal(err)
	}
	defer j.Kill()
	// Wait until tick 2 was flushed (the JVM flushes every second).
	for n := 0; n < 3; n++ {
		select {
		case <-j.Ticks():
		case <-time.After(30 * time.Second):
			t.Fatal("no ticks from the JVM")
		}
	}
	time.Sleep(1500 * time.Millisecond)
	follow := func(start Start) *collector {
		var c collector
		_, stop := runSource(t, Config{Path: root, Follow: true, Start: start, PollInterval: 50 * time.Millisecond}, &c)
		waitTicks(t, &c, "N", 1, 30*time.Second)
		stop()
		return &c
	}
	newest := follow(StartNewest).ticks("N")
	beginning := follow(StartBeginning).ticks("N")
	if newest[0] < 3 {
		t.Errorf("StartNewest read tick %d, written before it started", newest[0])
	}
	if beginning[0] != 0 {
		t.Errorf("StartBeginning began at tick %d", beginning[0])
	}
	t.Logf("first tick read: newest %d, beginning %d", newest[0], beginning[0])
	_ = strings.Contains
}

// TestFollowEqualsRecording: what the follower reads while the JVM writes
// equals what a reader of the recording the JVM leaves at exit reads, with
// chunk rotations and with one chunk of several flushes (the class loaders
// of the jdk.ClassLoaderStatistics events written when it begins are
// defined only when it ends, and no previous chunk defines them).
func TestFollowEqualsRecording(t *testing.T) {
	tools := jfrtest.Require(t)
	cp, err := tools.Compile()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		oneChunk bool
	}{{"rotations", false}, {"one chunk", true}} {
		t.Run(tc.name, func(t *testing.T) { followEqualsRecording(t, tools, cp, tc.oneChunk) })
	}
}

func followEqualsRecording(t *testing.T, tools jfrtest.Tools, cp string, oneChunk bool) {
	dir := t.TempDir()
	root := filepath.Join(dir, "repository")
	var live collector
	src, stop := runSource(t, Config{Path: root, Follow: true, Start: StartBeginning, PollInterval: 20 * time.Millisecond}, &live)
	file := filepath.Join(dir, "out.jfr")
	j, err := tools.Start(cp, jfrtest.Options{Seconds: 4, RunID: "E", Repository: root, Filename: file, OneChunk: oneChunk})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Wait(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for src.Stats().JVMs > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	stop()
	whole, fsrc, errs := readAll(t, Config{Path: file})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	a, _ := whole.snapshot()
	b, _ := live.snapshot()
	t.Logf("file: %d records, stats %+v", len(a), fsrc.Stats().Stats)
	t.Logf("live: %d records, stats %+v", len(b), src.Stats().Stats)
	// The follower reads an event whose constants the JVM writes in a
	// later flush (or at the chunk's end) once they are there, after the
	// events that follow it: the same records, in another order.
	onlyFile, onlyLive := difference(sortedText(a), sortedText(b))
	for i := 0; i < min(5, len(onlyFile)); i++ {
		t.Errorf("file only: %s", onlyFile[i])
	}
	for i := 0; i < min(5, len(onlyLive)); i++ {
		t.Errorf("live only: %s", onlyLive[i])
	}
	if len(onlyFile)+len(onlyLive) > 0 || len(a) != len(b) {
		t.Fatalf("follower read %d records, the recording has %d; %d of the file's and %d of the follower's have no equal in the other", len(b), len(a), len(onlyFile), len(onlyLive))
	}
}

// sortedText renders each record (its type and values as JSON), sorted.
func sortedText(rs []record.Record) []string {
	out := make([]string, len(rs))
	for i := range rs {
		out[i] = rs[i].Type.Name + " " + strings.TrimSpace(string(jsonl.AppendRecord(nil, &rs[i])))
	}
	sort.Strings(out)
	return out
}

// difference returns what only a and what only b hold (both sorted),
// counting repeats.
func difference(a, b []string) (onlyA, onlyB []string) {
	for len(a) > 0 || len(b) > 0 {
		switch {
		case len(b) == 0 || (len(a) > 0 && a[0] < b[0]):
			onlyA, a = append(onlyA, a[0]), a[1:]
		case len(a) == 0 || b[0] < a[0]:
			onlyB, b = append(onlyB, b[0]), b[1:]
		default:
			a, b = a[1:], b[1:]
		}
	}
	return onlyA, onlyB
}

// TestChunkOfExitedJVMIsRead: a JVM that exits deletes its directory; a
// chunk file listed before that is still read (the source holds it open).
// Synthetic: two copies of the committed recording, the first live.
func TestChunkOfExitedJVMIsRead(t *testing.T) {
	data, err := os.ReadFile("../../codec/jfr/testdata/small.jfr")
	if err != nil {
		t.Fatal(err)
	}
	whole, _, _ := readAll(t, Config{Path: "../../codec/jfr/testdata/small.jfr"})
	n := len(whole.records)
	root := t.TempDir()
	dir := filepath.Join(root, "2026_01_02_03_04_05_999999")
	os.Mkdir(dir, 0o755)
	live := append([]byte(nil), data...)
	live[64] = 7 // a live chunk's generation
	first := filepath.Join(dir, "2026_01_02_03_04_05.jfr")
	os.WriteFile(first, live, 0o644)
	second := append([]byte(nil), data...)
	h, _ := codec.ParseHeader(second)
	h.StartNanos += 1e9
	copy(second, codec.AppendHeader(nil, h))
	os.WriteFile(filepath.Join(dir, "2026_01_02_03_04_06.jfr"), second, 0o644)
	w, err := os.OpenFile(first, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()

	var c collector
	src, stop := runSource(t, Config{Path: root, Follow: true, Start: StartBeginning, PollInterval: 10 * time.Millisecond}, &c)
	deadline := time.Now().Add(10 * time.Second)
	for {
		recs, _ := c.snapshot()
		if len(recs) >= n {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records of the live chunk, want %d", len(recs), n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // several polls: the second file is listed
	// The JVM exits: it finishes its chunk and deletes its directory.
	if _, err := w.WriteAt([]byte{0}, 64); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(dir)
	for src.Stats().JVMs > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if recs, _ := c.snapshot(); len(recs) != 2*n {
		t.Fatalf("%d records, want %d (both chunks)", len(recs), 2*n)
	}
}
