package logwrite_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/logwrite"
	"github.com/tracebridge/tracebridge/internal/record"
)

// streamBatch decodes the records of src as a single-socket Kieker TCP
// stream does, keeping the frames when keep is set.
func streamBatch(t *testing.T, src *record.Batch, keep bool) *record.Batch {
	t.Helper()
	mode := modeValues
	if keep {
		mode = modeFrames
	}
	return streamBatchAs(t, src, mode)
}

// How streamBatchAs decodes.
const (
	modeValues = "values" // values only
	modeFrames = "frames" // values and frames
	modeOnly   = "only"   // frames only (every record)
)

// streamBatchAs decodes the records of src as a single-socket Kieker TCP
// stream does, into one batch of the mode's kind.
func streamBatchAs(t *testing.T, src *record.Batch, mode string) *record.Batch {
	t.Helper()
	keep := mode != modeValues
	e := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
	var data []byte
	for i := range src.Records {
		var err error
		if data, err = e.Append(data, &src.Records[i]); err != nil {
			t.Fatal(err)
		}
	}
	b := new(record.Batch)
	o := kieker.Options{Inline: true, KeepFrames: keep}
	if mode == modeOnly {
		o.FramesOnly = func(*record.Type) bool { return true }
	}
	d := kieker.NewDecoder(o)
	if n, err := d.Decode(data, b); err != nil || n != len(data) {
		t.Fatalf("decode: %d of %d bytes, %v", n, len(data), err)
	}
	if mode == modeOnly {
		if !b.Frames.Only() || len(b.Records) != 0 || b.Len() != src.Len() {
			t.Fatalf("frames only: %v, %d records, %d in all (want %d)", b.Frames.Only(), len(b.Records), b.Len(), src.Len())
		}
		return b
	}
	if keep != b.Frames.Valid(b.Len()) {
		t.Fatalf("frames valid %v, want %v", b.Frames.Valid(b.Len()), keep)
	}
	return b
}

// logBytes returns the kieker.map and the data files of a log directory,
// concatenated in name order.
func logBytes(t *testing.T, dir string) (mapFile, data []byte) {
	t.Helper()
	mapFile, err := os.ReadFile(filepath.Join(dir, "kieker.map"))
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.bin"))
	if err != nil || len(files) == 0 {
		t.Fatalf("data files: %v %v", files, err)
	}
	for _, f := range files {
		data = append(data, readFile(t, f)...)
	}
	return mapFile, data
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFramesWriteTheEncodedLog: a batch whose frames the decoder kept,
// or a batch of frames only, makes the log the same records make without
// them (kieker.map and data
// files byte for byte, missing logging timestamps stamped, across
// rotations and two streams), and reads back as the records.
func TestFramesWriteTheEncodedLog(t *testing.T) {
	src1, src2 := events(0, 300), events(1000, 300)
	// The second stream registers its strings in another order.
	src2.Records[0], src2.Records[299] = src2.Records[299], src2.Records[0]
	for _, stamp := range []bool{false, true} {
		var dirs [3]string
		for k, mode := range []string{modeValues, modeFrames, modeOnly} {
			w, err := logwrite.New(logwrite.Config{Path: t.TempDir(), Binary: true, MaxEntriesInFile: 128, Metadata: true,
				Hostname: "h", SetLoggingTimestamp: stamp, Now: fixedNow})
			if err != nil {
				t.Fatal(err)
			}
			b1, b2 := streamBatchAs(t, src1, mode), streamBatchAs(t, src2, mode)
			for _, b := range []*record.Batch{b1, b2, b1} {
				if err := w.Consume(context.Background(), b); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			dirs[k] = w.Dir()
		}
		m1, d1 := logBytes(t, dirs[0])
		for k, mode := range []string{modeFrames, modeOnly} {
			m2, d2 := logBytes(t, dirs[k+1])
			if !bytes.Equal(m1, m2) || !bytes.Equal(d1, d2) {
				t.Fatalf("stamp %v: the log from %s differs from the encoded one (map %d/%d bytes, data %d/%d bytes)", stamp, mode, len(m2), len(m1), len(d2), len(d1))
			}
		}
		got := readAll(t, dirs[2], false)
		if len(got) != 1+900 {
			t.Fatalf("stamp %v: read %d records, want 901", stamp, len(got))
		}
		if r := got[1+300+5]; r.Values[2].Int() != src2.Records[5].Values[2].Int() || r.Values[3].Str() != src2.Records[5].Values[3].Str() {
			t.Fatalf("stamp %v: record 306 reads %v", stamp, r.Values)
		}
	}
}

func fixedNow() time.Time { return time.Unix(1_700_000_000, 5) }

// TestFramesAreCopied: the writer copies the kept frames rather than
// encoding the values (shown by a frame that says otherwise), and encodes
// the values once the frames no longer match the records.
func TestFramesAreCopied(t *testing.T) {
	for _, drop := range []bool{false, true} {
		b := streamBatch(t, events(0, 3), true)
		// Record 1's orderIndex (at 12 + 8 + 8) in its frame.
		f := b.Frames.Frame(1)
		f[12+16+3] = 99
		if drop {
			b.Frames.Drop()
		}
		w, err := logwrite.New(logwrite.Config{Path: t.TempDir(), Binary: true, Hostname: "h", Now: fixedNow})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Consume(context.Background(), b); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		got := readAll(t, w.Dir(), false)
		want := int64(99)
		if drop {
			want = 1
		}
		if len(got) != 3 || got[1].Values[2].Int() != want {
			t.Fatalf("drop %v: read %d records, record 1's orderIndex %d (want %d)", drop, len(got), got[1].Values[2].Int(), want)
		}
	}
}

// BenchmarkWriteFrames: BenchmarkWriteBinary's records from a stream
// decoded into frames only (only), with their frames kept (frames) or
// not (values).
func BenchmarkWriteFrames(b *testing.B) {
	for _, mode := range []string{modeOnly, modeFrames, modeValues} {
		b.Run(mode, func(b *testing.B) {
			t := &testing.T{}
			batch := streamBatchAs(t, events(0, 1024), mode)
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
		})
	}
}

// TestFramesOnlyRollOver: batches of frames only continue in a new log
// directory when the registry fills, as records do, each directory the
// same bytes.
func TestFramesOnlyRollOver(t *testing.T) {
	src1, src2 := events(0, 300), events(1000, 300)
	var dirs [2][]string
	for k, mode := range []string{modeValues, modeOnly} {
		w, err := logwrite.New(logwrite.Config{Path: t.TempDir(), Binary: true, MaxEntriesInFile: 100, MaxRegistryEntries: 40,
			Metadata: true, Hostname: "h", Now: fixedNow})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range []*record.Batch{streamBatchAs(t, src1, mode), streamBatchAs(t, src2, mode)} {
			if err := w.Consume(context.Background(), b); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		dirs[k] = w.Dirs()
	}
	if len(dirs[0]) < 2 || len(dirs[0]) != len(dirs[1]) {
		t.Fatalf("%d directories from records, %d from frames only (want the same, at least 2)", len(dirs[0]), len(dirs[1]))
	}
	for i := range dirs[0] {
		m1, d1 := logBytes(t, dirs[0][i])
		m2, d2 := logBytes(t, dirs[1][i])
		if !bytes.Equal(m1, m2) || !bytes.Equal(d1, d2) {
			t.Fatalf("directory %d: frames only wrote map %d/%d bytes, data %d/%d bytes", i, len(m2), len(m1), len(d2), len(d1))
		}
	}
}
