package kiekerlog_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/logdir"
	"github.com/tracebridge/tracebridge/internal/logwrite"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
)

var cat = record.Builtin()

// addEvents adds BeforeOperationEvents from to to-1 of trace 1 to b.
func addEvents(b *record.Batch, from, to int) {
	typ := cat.Lookup(record.BeforeOperationEvent)
	for j := from; j < to; j++ {
		r := b.Add(typ, record.NoTimestamp)
		r.Values[0] = record.IntValue(int64(j))
		r.Values[1] = record.IntValue(1)
		r.Values[2] = record.IntValue(int64(j))
		r.Values[3] = record.StringValue("public void some.pkg.Clazz.method(int)")
		r.Values[4] = record.StringValue("some.pkg.Clazz")
	}
}

func writeLog(t testing.TB, dir string, binary bool, records int) string {
	t.Helper()
	cfg := logwrite.Config{Path: dir, Binary: binary, MaxEntriesInFile: 200_000, Metadata: true}
	return bridgetest.WriteEventLog(t, cfg, records, func(j int) (int64, int64) { return 1, int64(j) })
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

// cutLog writes records events (and the metadata record) with the given
// format and compression, perFile records per data file, and cuts the
// data file with index cut (negative: from the end) by bytes bytes.
func cutLog(t *testing.T, binary bool, comp logdir.Compression, records, perFile, cut, bytes int) (dir, cutFile string) {
	t.Helper()
	base := t.TempDir()
	w, err := logwrite.New(logwrite.Config{Path: base, Binary: binary, Compression: comp, MaxEntriesInFile: perFile, Metadata: true})
	if err != nil {
		t.Fatal(err)
	}
	var b record.Batch
	addEvents(&b, 0, records)
	if err := w.Consume(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dir = w.Dir()
	logs, err := logdir.Discover(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := logs[0].DataFiles()
	if cut < 0 {
		cut += len(files)
	}
	cutFile = files[cut].Path
	st, err := os.Stat(cutFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(cutFile, st.Size()-int64(bytes)); err != nil {
		t.Fatal(err)
	}
	return dir, cutFile
}

// TestCutEnd: a log whose last data file ends early (as a killed writer
// leaves it) reads every complete record and reports the cut once, naming
// the file and the offset, without an error; the same cut in a data file
// before the last is an error (or, with SkipBad, a skip).
func TestCutEnd(t *testing.T) {
	for _, tc := range []struct {
		name   string
		binary bool
		comp   logdir.Compression
		bytes  int
		// undetectable: a cut line in the middle of a log still decodes
		// (Kieker's readers accept a last line without a line end), and
		// at the end of the last file it is a record, since it parses.
		undetectable bool
	}{
		{"binary", true, logdir.None, 7, false},
		{"ascii", false, logdir.None, 20, false}, // into the previous field: the cut line does not decode
		{"ascii cut in the last field", false, logdir.None, 7, true},
		{"gzip/binary", true, logdir.Gzip, 200, false},
		{"xz/binary", true, logdir.XZ, 200, false},
		{"xz/ascii", false, logdir.XZ, 200, false},
		{"deflate/ascii", false, logdir.Deflate, 200, false},
		{"zip/binary", true, logdir.Zip, 200, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			read := func(dir string, skip bool) (n int, cuts []error, st kiekerlog.Stats, err error) {
				r, err := kiekerlog.Open(dir, kiekerlog.Options{Catalog: cat, SkipBad: skip, OnCutEnd: func(err error) { cuts = append(cuts, err) }})
				if err != nil {
					t.Fatal(err)
				}
				err = r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
					n += b.Len()
					return nil
				}))
				return n, cuts, r.Stats(), err
			}

			// The last of three files (1000 events and the metadata
			// record, 400 a file) is cut.
			dir, file := cutLog(t, tc.binary, tc.comp, 1000, 400, -1, tc.bytes)
			n, cuts, st, err := read(dir, false)
			if err != nil {
				t.Fatalf("last file cut: %v, want no error", err)
			}
			if tc.undetectable {
				if n != 1001 || len(cuts) != 0 {
					t.Fatalf("last file cut in the last field: %d records, cut ends %v; want 1001 records, none", n, cuts)
				}
				return
			}
			if n < 800 || n >= 1001 {
				t.Errorf("last file cut: %d records, want the first two files' 800 and those of the third before the cut", n)
			}
			if len(cuts) != 1 || st.CutEnds != 1 || st.Skipped != 0 {
				t.Fatalf("last file cut: reported %v (stats %+v), want one cut end", cuts, st)
			}
			if msg := cuts[0].Error(); !strings.Contains(msg, filepath.Base(file)) || !strings.Contains(msg, "offset") {
				t.Errorf("report %q does not name the file and the offset", msg)
			}

			// The first file is cut: malformed data in the middle of the log.
			dir, file = cutLog(t, tc.binary, tc.comp, 1000, 400, 0, tc.bytes)
			if _, cuts, _, err := read(dir, false); err == nil || len(cuts) != 0 || !strings.Contains(err.Error(), filepath.Base(file)) {
				t.Fatalf("first file cut: error %v, cut ends %v; want an error naming %s", err, cuts, filepath.Base(file))
			}
			if n, cuts, st, err := read(dir, true); err != nil || len(cuts) != 0 || st.Skipped == 0 || n < 600 {
				t.Fatalf("first file cut, skip-bad: %d records, %v, cut ends %v, stats %+v", n, err, cuts, st)
			}
		})
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

// TestRunStopsWhenCancelled: a cancelled context stops Run within one read
// buffer, even when every buffer fills a batch (the consumer never sees
// the context, as a log writer does not).
func TestRunStopsWhenCancelled(t *testing.T) {
	dir := writeLog(t, t.TempDir(), true, 200_000)
	r, err := kiekerlog.Open(dir, kiekerlog.Options{Catalog: cat})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var before, after int
	err = r.Run(ctx, pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		if ctx.Err() != nil {
			after += b.Len()
		} else {
			before += b.Len()
			cancel()
		}
		return nil
	}))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v, want context.Canceled", err)
	}
	// A 256 KiB read buffer holds about 6500 of these 40-byte records.
	if after > 10_000 {
		t.Errorf("%d records handed on after the cancel (%d before)", after, before)
	}
}
