package kiekerlog_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	sink "github.com/tracebridge/tracebridge/internal/sink/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
)

var cat = record.Builtin()

func writeLog(t testing.TB, dir string, binary bool, records int) string {
	t.Helper()
	w, err := sink.New(sink.Config{Path: dir, Binary: binary, MaxEntriesInFile: 200_000, Metadata: true})
	if err != nil {
		t.Fatal(err)
	}
	typ := cat.Lookup(record.BeforeOperationEvent)
	var b record.Batch
	for i := 0; i < records; i += 1000 {
		b.Reset()
		for j := i; j < i+1000 && j < records; j++ {
			r := b.Add(typ, record.NoTimestamp)
			r.Values[0] = record.IntValue(int64(j))
			r.Values[1] = record.IntValue(1)
			r.Values[2] = record.IntValue(int64(j))
			r.Values[3] = record.StringValue("public void some.pkg.Clazz.method(int)")
			r.Values[4] = record.StringValue("some.pkg.Clazz")
		}
		if err := w.Consume(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return w.Dir()
}

// TestMemoryDoesNotGrowWithLogSize reads a log of ~1M records and checks
// that the live heap stays at the size of a buffer and a batch.
func TestMemoryDoesNotGrowWithLogSize(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a 40 MB log")
	}
	dir := writeLog(t, t.TempDir(), true, 1_000_000)
	r, err := kiekerlog.Open(dir, kiekerlog.Options{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak uint64
	var n, batches int
	err = r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		n += b.Len()
		if batches++; batches%100 == 0 {
			runtime.ReadMemStats(&ms)
			peak = max(peak, ms.HeapAlloc)
		}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	if n != 1_000_001 {
		t.Fatalf("read %d records", n)
	}
	if grow := int64(peak) - int64(base); grow > 16<<20 {
		t.Fatalf("heap grew by %d MB reading a %d MB log", grow>>20, r.Size()>>20)
	}
	if r.Consumed() != r.Size() {
		t.Errorf("progress %d of %d bytes", r.Consumed(), r.Size())
	}
}

func TestTruncatedBinaryTail(t *testing.T) {
	dir := writeLog(t, t.TempDir(), true, 100)
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".bin") {
			p := filepath.Join(dir, e.Name())
			st, _ := os.Stat(p)
			if err := os.Truncate(p, st.Size()-7); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(skip bool) (int, error) {
		r, err := kiekerlog.Open(dir, kiekerlog.Options{Catalog: cat, SkipBad: skip})
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		err = r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
			n += b.Len()
			return nil
		}))
		return n, err
	}
	n, err := count(false)
	if err == nil || !strings.Contains(err.Error(), "ends inside a record") || !strings.Contains(err.Error(), ".bin") {
		t.Fatalf("error %v, want one naming the file and the cut record", err)
	}
	if n != 100 { // metadata + 99 whole events
		t.Fatalf("handed on %d records before the cut, want 100", n)
	}
	if n, err = count(true); err != nil || n != 100 {
		t.Fatalf("skip-bad: %d records, %v", n, err)
	}
}

func BenchmarkReadBinaryLog(b *testing.B) {
	dir := writeLog(b, b.TempDir(), true, 200_000)
	benchRead(b, dir)
}

func BenchmarkReadASCIILog(b *testing.B) {
	dir := writeLog(b, b.TempDir(), false, 200_000)
	benchRead(b, dir)
}

func benchRead(b *testing.B, dir string) {
	r, err := kiekerlog.Open(dir, kiekerlog.Options{Catalog: cat})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(r.Size())
	b.ReportAllocs()
	for b.Loop() {
		r, _ := kiekerlog.Open(dir, kiekerlog.Options{Catalog: cat})
		if err := r.Run(context.Background(), pipeline.ConsumerFunc(func(context.Context, *record.Batch) error { return nil })); err != nil {
			b.Fatal(err)
		}
	}
}
