package logwrite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/logdir"
	"github.com/tracebridge/tracebridge/internal/logwrite"
	"github.com/tracebridge/tracebridge/internal/record"
	source "github.com/tracebridge/tracebridge/internal/source/kiekerlog"
)

var cat = record.Builtin()

// events returns a batch of n Before events with distinct signatures every
// 7 records (so binary logs keep registering new strings).
func events(from, n int) *record.Batch {
	typ := cat.Lookup(record.BeforeOperationEvent)
	b := &record.Batch{}
	for i := from; i < from+n; i++ {
		r := b.Add(typ, record.NoTimestamp)
		r.Values[0] = record.IntValue(int64(1000 + i))
		r.Values[1] = record.IntValue(42)
		r.Values[2] = record.IntValue(int64(i))
		r.Values[3] = record.StringValue(fmt.Sprintf("void op%d()", i/7))
		r.Values[4] = record.StringValue("a.B")
	}
	return b
}

// readAll reads a log directory back with the source reader.
func readAll(t *testing.T, dir string, skipBad bool) []record.Record {
	t.Helper()
	return bridgetest.ReadLogWith(t, dir, source.Options{Catalog: cat, SkipBad: skipBad})
}

func TestFlushWithoutCloseIsReadable(t *testing.T) {
	for _, binary := range []bool{false, true} {
		for _, comp := range []logdir.Compression{logdir.None, logdir.Deflate, logdir.Gzip, logdir.Zip, logdir.XZ} {
			t.Run(fmt.Sprintf("binary=%v/%v", binary, comp), func(t *testing.T) {
				w, err := logwrite.New(logwrite.Config{Path: t.TempDir(), Binary: binary, Compression: comp, MaxEntriesInFile: 300, Metadata: true})
				if err != nil {
					t.Fatal(err)
				}
				ctx := context.Background()
				for i := 0; i < 10; i++ {
					if err := w.Consume(ctx, events(i*100, 100)); err != nil {
						t.Fatal(err)
					}
				}
				if err := w.Flush(); err != nil {
					t.Fatal(err)
				}
				// Copy the directory as a crash would leave it: no Close.
				snap := filepath.Join(t.TempDir(), filepath.Base(w.Dir()))
				copyDir(t, w.Dir(), snap)
				got := readAll(t, snap, true) // a compressed tail not yet finished reads as truncated
				if len(got) != 1001 {
					t.Fatalf("read %d records after Flush, want 1001 (metadata + 1000)", len(got))
				}
				for i, r := range got[1:] {
					if r.Values[2].Int() != int64(i) {
						t.Fatalf("record %d has orderIndex %d", i, r.Values[2].Int())
					}
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				if err := w.Close(); err != nil {
					t.Fatalf("second Close: %v", err)
				}
				if got := readAll(t, w.Dir(), false); len(got) != 1001 {
					t.Fatalf("read %d records after Close", len(got))
				}
			})
		}
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(to, 0o755); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestRotationAndMetadata(t *testing.T) {
	now := time.Date(2026, 11, 22, 3, 4, 5, 6_000_000, time.UTC)
	w, err := logwrite.New(logwrite.Config{
		Path: t.TempDir(), MaxEntriesInFile: 250, Metadata: true,
		Hostname: "lab", ControllerName: "BRIDGE", SetLoggingTimestamp: true,
		Now: func() time.Time { return now },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Consume(context.Background(), events(0, 1000)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(filepath.Base(w.Dir()), "kieker-20261122-030405-") || !strings.HasSuffix(w.Dir(), "-UTC-lab-BRIDGE") {
		t.Errorf("directory name %s", filepath.Base(w.Dir()))
	}
	entries, _ := os.ReadDir(w.Dir())
	var data []string
	for _, e := range entries {
		if e.Name() != "kieker.map" {
			data = append(data, e.Name())
		}
	}
	// 1001 records, 250 per file.
	if len(data) != 5 || data[0] != "kieker-20261122-030405006-UTC-001.dat" || data[4] != "kieker-20261122-030405006-UTC-005.dat" {
		t.Errorf("data files %v", data)
	}
	got := readAll(t, w.Dir(), false)
	if len(got) != 1001 {
		t.Fatalf("%d records", len(got))
	}
	meta := got[0]
	if meta.Type.Name != record.KiekerMetadataRecord || meta.Values[1].Str() != "BRIDGE" || meta.Values[2].Str() != "lab" || meta.Values[6].Str() != "NANOSECONDS" {
		t.Errorf("metadata record %+v", meta.Values)
	}
	if got[1].LoggingTimestamp != now.UnixNano() {
		t.Errorf("logging timestamp %d, want %d", got[1].LoggingTimestamp, now.UnixNano())
	}
	m, _ := os.ReadFile(filepath.Join(w.Dir(), "kieker.map"))
	if string(m) != "$0=kieker.common.record.misc.KiekerMetadataRecord\n$1=kieker.common.record.flow.trace.operation.BeforeOperationEvent\n" {
		t.Errorf("ASCII kieker.map lists more than class names:\n%s", m)
	}
}

func TestMaxLogFilesDeletesOldest(t *testing.T) {
	w, err := logwrite.New(logwrite.Config{Path: t.TempDir(), Binary: true, MaxEntriesInFile: 100, MaxLogFiles: 3})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ {
		if err := w.Consume(context.Background(), events(i*100, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, w.Dir(), false)
	if len(got) != 300 || got[0].Values[2].Int() != 700 {
		t.Fatalf("kept %d records starting at %d, want the newest 300 from 700", len(got), got[0].Values[2].Int())
	}
}

func TestConsumeAfterClose(t *testing.T) {
	w, err := logwrite.New(logwrite.Config{Path: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if err := w.Consume(context.Background(), events(0, 1)); err == nil {
		t.Fatal("Consume after Close succeeded")
	}
}

func BenchmarkWriteBinary(b *testing.B) {
	batch := events(0, 1024)
	w, err := logwrite.New(logwrite.Config{Path: b.TempDir(), Binary: true, MaxEntriesInFile: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer w.Close()
	b.ReportAllocs()
	b.SetBytes(1024 * 40)
	for b.Loop() {
		if err := w.Consume(context.Background(), batch); err != nil {
			b.Fatal(err)
		}
	}
}

// TestUntrustedNamesStayInsidePath: host and controller names come from
// input (a log's metadata record) and must not escape the output directory.
func TestUntrustedNamesStayInsidePath(t *testing.T) {
	base := t.TempDir()
	out := filepath.Join(base, "out")
	w, err := logwrite.New(logwrite.Config{Path: out, Hostname: "h/../../escaped", ControllerName: ".."})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if filepath.Dir(w.Dir()) != out {
		t.Fatalf("log directory %s is not inside %s", w.Dir(), out)
	}
	if strings.Contains(filepath.Base(w.Dir()), "/") {
		t.Fatal("name has a separator")
	}
	// A second writer in the same instant gets its own directory.
	w2, err := logwrite.New(logwrite.Config{Path: out, Hostname: "h/../../escaped", ControllerName: "..", Now: func() time.Time { return time.Unix(0, 5) }})
	if err != nil {
		t.Fatal(err)
	}
	w3, err := logwrite.New(logwrite.Config{Path: out, Hostname: "h/../../escaped", ControllerName: "..", Now: func() time.Time { return time.Unix(0, 5) }})
	if err != nil {
		t.Fatal(err)
	}
	if w2.Dir() == w3.Dir() {
		t.Fatal("two writers share a directory")
	}
	w2.Close()
	w3.Close()
}

// TestRegistryLimitStartsNewLog: distinct strings beyond the registry limit
// continue in a new log directory; every record stays readable.
func TestRegistryLimitStartsNewLog(t *testing.T) {
	base := t.TempDir()
	w, err := logwrite.New(logwrite.Config{Path: base, Binary: true, MaxRegistryEntries: 60, Metadata: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 10; i++ { // 1000 records, a new signature every 7
		if err := w.Consume(context.Background(), events(i*100, 100)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.Rollovers() < 2 {
		t.Fatalf("%d rollovers", w.Rollovers())
	}
	got := readAll(t, base, false)
	n := 0
	for _, r := range got {
		if r.Type.Name == record.BeforeOperationEvent {
			if r.Values[2].Int() != int64(n) {
				t.Fatalf("record %d out of order", n)
			}
			n++
		}
	}
	if n != 1000 {
		t.Fatalf("%d records across the logs, want 1000", n)
	}
	dirs, _ := os.ReadDir(base)
	for _, d := range dirs {
		m, _ := os.ReadFile(filepath.Join(base, d.Name(), "kieker.map"))
		if lines := strings.Count(string(m), "\n"); lines > 60 {
			t.Errorf("%s: kieker.map has %d entries, over the limit", d.Name(), lines)
		}
	}
}
