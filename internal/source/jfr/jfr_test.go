package jfr

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	codec "github.com/tracebridge/tracebridge/internal/codec/jfr"
	"github.com/tracebridge/tracebridge/internal/jfrtest"
	"github.com/tracebridge/tracebridge/internal/record"
)

func TestMain(m *testing.M) {
	code := m.Run()
	rec.Remove()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// collector keeps what it consumes, with the time each batch arrived.
type collector struct {
	mu      sync.Mutex
	records []record.Record
	arrived []time.Time // per record
}

func (c *collector) Consume(_ context.Context, b *record.Batch) error {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range b.Records {
		c.records = append(c.records, b.Records[i].Clone())
		c.arrived = append(c.arrived, now)
	}
	return nil
}

func (c *collector) snapshot() ([]record.Record, []time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]record.Record(nil), c.records...), append([]time.Time(nil), c.arrived...)
}

func (c *collector) counts() map[string]int64 {
	recs, _ := c.snapshot()
	m := map[string]int64{}
	for _, r := range recs {
		m[r.Type.Name]++
	}
	return m
}

// ticks returns the shop.Tick sequence numbers of a run, in arrival order.
func (c *collector) ticks(run string) []int64 {
	recs, _ := c.snapshot()
	var out []int64
	for i := range recs {
		r := &recs[i]
		if r.Type.Name != "shop.Tick" {
			continue
		}
		if v, _ := r.Field("run"); v.Str() != run {
			continue
		}
		v, _ := r.Field("seq")
		out = append(out, v.Int())
	}
	return out
}

func readAll(t *testing.T, cfg Config) (*collector, *Source, []error) {
	t.Helper()
	var mu sync.Mutex
	var errs []error
	src, err := New(cfg, Settings{OnError: func(err error) {
		mu.Lock()
		errs = append(errs, err)
		mu.Unlock()
	}})
	if err != nil {
		t.Fatal(err)
	}
	var c collector
	if err := src.Run(context.Background(), &c); err != nil {
		t.Fatal(err)
	}
	return &c, src, errs
}

// rec is a three-second multi-chunk recording of the workload; TestMain
// removes it.
var rec = jfrtest.Shared{Options: jfrtest.Options{Seconds: 3, MaxChunkSize: "1M", RunID: "file"}}

func TestReadFileCountsMatchJFRSummary(t *testing.T) {
	tools, path := rec.Get(t)
	want, chunks, err := tools.Summary(path)
	if err != nil {
		t.Fatal(err)
	}
	c, src, errs := readAll(t, Config{Path: path, BatchSize: 100})
	if len(errs) > 0 {
		t.Fatalf("errors: %v", errs)
	}
	got := c.counts()
	st := src.Stats()
	got["jdk.Metadata"], got["jdk.CheckPoint"], got["jdk.Checkpoint"] = st.Metadata, st.Checkpoints, st.Checkpoints // the name changed in JDK 21
	for name, n := range want {
		if got[name] != n {
			t.Errorf("%s: %d, jfr summary says %d", name, got[name], n)
		}
	}
	for name, n := range got {
		if _, ok := want[name]; !ok && n > 0 && name != "jdk.CheckPoint" && name != "jdk.Checkpoint" {
			t.Errorf("%s: %d, jfr summary has none", name, n)
		}
	}
	if int(st.Chunks) != chunks || chunks < 2 {
		t.Errorf("%d chunks read, jfr summary says %d", st.Chunks, chunks)
	}
	if st.Records != st.Events || st.Batches < st.Records/100 {
		t.Errorf("stats %+v", st)
	}
	t.Logf("%d chunks, %d records of %d types equal jfr summary's counts", chunks, st.Records, len(want)-2)
}

func TestTypeFilter(t *testing.T) {
	_, path := rec.Get(t)
	c, src, _ := readAll(t, Config{Path: path, Types: []string{"shop.Order", "ExecutionSample"}})
	got := c.counts()
	if len(got) != 2 || got["shop.Order"] == 0 || got["jdk.ExecutionSample"] == 0 {
		t.Fatalf("counts %v", got)
	}
	if st := src.Stats(); st.Filtered == 0 || st.Events != got["shop.Order"]+got["jdk.ExecutionSample"] {
		t.Fatalf("stats %+v", st)
	}
	if _, err := New(Config{Path: path, Types: []string{"[bad"}}, Settings{}); !errors.Is(err, ErrConfig) {
		t.Fatalf("bad pattern: %v", err)
	}
}

// splitChunks writes each chunk of a recording to its own file in dir, as
// a repository holds them, named in an order unlike their start times.
func splitChunks(t *testing.T, path, dir string) []string {
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for off, i := int64(0), 0; off < int64(len(data)); i++ {
		h, err := codec.ParseHeader(data[off:])
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, fmt.Sprintf("z%02d.jfr", 99-i))
		if err := os.WriteFile(name, data[off:off+h.ChunkSize], 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
		off += h.ChunkSize
	}
	return names
}

func TestReadRepositoryDirectoryInStartOrder(t *testing.T) {
	_, path := rec.Get(t)
	whole, _, _ := readAll(t, Config{Path: path})
	root := t.TempDir()
	jvmDir := filepath.Join(root, "2026_01_02_03_04_05_4242")
	os.Mkdir(jvmDir, 0o755)
	names := splitChunks(t, path, jvmDir)
	for _, p := range []string{root, jvmDir} {
		c, src, errs := readAll(t, Config{Path: p})
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		a, _ := whole.snapshot()
		b, _ := c.snapshot()
		if len(a) != len(b) {
			t.Fatalf("%s: %d records, the file has %d", p, len(b), len(a))
		}
		for i := range a {
			if !a[i].Equal(&b[i]) {
				t.Fatalf("%s: record %d differs", p, i)
			}
		}
		if st := src.Stats(); st.Files != int64(len(names)) {
			t.Errorf("files %d, want %d", st.Files, len(names))
		}
	}
}

// TestDamagedRepository: bad chunk files are reported with their name,
// offset and reason, and the good ones are still read.
func TestDamagedRepository(t *testing.T) {
	_, path := rec.Get(t)
	dir := t.TempDir()
	names := splitChunks(t, path, dir)
	good := map[string]bool{}
	for _, n := range names {
		good[n] = true
	}
	first, _ := os.ReadFile(names[0])
	second, _ := os.ReadFile(names[1])
	// The second chunk truncated; garbage; a tiny file; a future version.
	os.WriteFile(names[1], second[:len(second)/2], 0o644)
	delete(good, names[1])
	os.WriteFile(filepath.Join(dir, "garbage.jfr"), []byte(strings.Repeat("not a chunk ", 20)), 0o644)
	os.WriteFile(filepath.Join(dir, "tiny.jfr"), []byte("FLR\x00"), 0o644)
	future := append([]byte(nil), first...)
	future[5] = 3
	os.WriteFile(filepath.Join(dir, "future.jfr"), future, 0o644)
	// A chunk whose metadata is corrupt.
	h, _ := codec.ParseHeader(first)
	meta := append([]byte(nil), first...)
	for i := h.MetadataOffset + 30; i < h.MetadataOffset+80; i++ {
		meta[i] = 0xfe
	}
	meta[32]++ // another start time
	os.WriteFile(filepath.Join(dir, "meta.jfr"), meta, 0o644)

	c, src, errs := readAll(t, Config{Path: dir})
	var msgs []string
	for _, e := range errs {
		msgs = append(msgs, e.Error())
	}
	sort.Strings(msgs)
	all := strings.Join(msgs, "\n")
	t.Logf("errors:\n%s", all)
	for _, want := range []string{
		names[1] + ": chunk at offset 0 is truncated",
		"garbage.jfr: offset 0: not a JFR chunk",
		"future.jfr: offset 4: format version 3.1",
		"meta.jfr: offset ",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("no error containing %q", want)
		}
	}
	if len(errs) != 4 {
		t.Errorf("%d errors, want 4", len(errs))
	}
	// Every good chunk was read.
	var want int64
	for n := range good {
		cc, _, _ := readAll(t, Config{Path: n})
		want += int64(len(cc.records))
	}
	if got := int64(len(c.records)); got != want || src.Stats().Errors != 4 {
		t.Errorf("%d records, want %d from the good chunks; stats %+v", got, want, src.Stats())
	}
}

func TestMissingPath(t *testing.T) {
	src, err := New(Config{Path: filepath.Join(t.TempDir(), "none")}, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Run(context.Background(), &collector{}); err == nil {
		t.Fatal("no error for a missing path")
	}
	if _, err := New(Config{}, Settings{}); !errors.Is(err, ErrConfig) {
		t.Fatal("empty path accepted")
	}
}

// TestDamagedChunkInFile: a recording whose first chunk has corrupt
// metadata is still read from its second chunk on.
func TestDamagedChunkInFile(t *testing.T) {
	_, path := rec.Get(t)
	dir := t.TempDir()
	names := splitChunks(t, path, dir)
	data, _ := os.ReadFile(path)
	h, _ := codec.ParseHeader(data)
	for i := h.MetadataOffset + 30; i < h.MetadataOffset+80; i++ {
		data[i] = 0xfe
	}
	bad := filepath.Join(dir, "bad.rec")
	os.WriteFile(bad, data, 0o644)
	c, _, errs := readAll(t, Config{Path: bad})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "bad.rec: offset ") {
		t.Fatalf("errors %v", errs)
	}
	var want int
	for _, n := range names[1:] {
		cc, _, _ := readAll(t, Config{Path: n})
		want += len(cc.records)
	}
	if len(c.records) != want || want == 0 {
		t.Fatalf("%d records, want %d from the chunks after the damaged one", len(c.records), want)
	}
}
