package logdir

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ulikunitz/xz"
)

// fixedClock returns a clock stuck at one instant, so that only the
// counter orders the files.
func fixedClock() func() time.Time {
	t := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	return func() time.Time { return t }
}

// asciiRecord returns one ASCII record line.
func asciiRecord(i int) []byte {
	return fmt.Appendf(nil, "$0;-1;record %d;\n", i)
}

// readLog discovers dir (after adding a kieker.map) and returns its data
// files' names and concatenated content.
func readLog(t *testing.T, dir string) ([]string, []byte, []Format) {
	t.Helper()
	writeFile(t, filepath.Join(dir, MapFile), "$0=kieker.common.record.misc.KiekerMetadataRecord\n")
	logs, err := Discover(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	var data []byte
	var formats []Format
	for _, d := range logs[0].DataFiles() {
		b, f := readAll(t, d)
		names = append(names, d.Name)
		data = append(data, b...)
		formats = append(formats, f)
	}
	return names, data, formats
}

func TestFilesRoundTrip(t *testing.T) {
	for _, c := range writable {
		for _, binary := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/binary=%v", c, binary), func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "log")
				f, err := NewFiles(Options{Dir: dir, Binary: binary, Compression: c, MaxEntriesInFile: 100, Now: fixedClock()})
				if err != nil {
					t.Fatal(err)
				}
				var want []byte
				for i := range 25 {
					// 10 records per write: 100 fit a file exactly.
					var rec []byte
					if binary {
						rec = sampleBinary(10)
					} else {
						for j := range 10 {
							rec = append(rec, asciiRecord(i*10+j)...)
						}
					}
					if err := f.Write(rec, 10); err != nil {
						t.Fatal(err)
					}
					want = append(want, rec...)
				}
				if err := f.Close(); err != nil {
					t.Fatal(err)
				}
				names, got, formats := readLog(t, dir)
				if !bytes.Equal(got, want) {
					t.Errorf("read back %d bytes, wrote %d", len(got), len(want))
				}
				ext := ".dat"
				if binary {
					ext = ".bin"
				}
				var wantNames []string
				for i := 1; i <= 3; i++ {
					wantNames = append(wantNames, DataFileName(fixedClock()(), i, binary, c))
				}
				if diff := cmp.Diff(wantNames, names); diff != "" {
					t.Errorf("files (-want +got):\n%s", diff)
				}
				for i, fm := range formats {
					if fm != (Format{c, !binary}) {
						t.Errorf("file %d (%s): format %v", i, ext, fm)
					}
				}
				if f.Created() != 3 || f.Current() != filepath.Join(dir, wantNames[2]) {
					t.Errorf("Created %d, Current %s", f.Created(), f.Current())
				}
			})
		}
	}
}

func TestFilesRotationByEntries(t *testing.T) {
	dir := t.TempDir()
	f, err := NewFiles(Options{Dir: dir, MaxEntriesInFile: 3, Now: fixedClock()})
	if err != nil {
		t.Fatal(err)
	}
	write := func(records int) {
		t.Helper()
		var b []byte
		for range records {
			b = append(b, asciiRecord(0)...)
		}
		if err := f.Write(b, records); err != nil {
			t.Fatal(err)
		}
	}
	if f.Room() != 3 {
		t.Errorf("Room %d before the first write", f.Room())
	}
	for range 7 {
		write(1) // files of 3, 3, 1
	}
	if f.Room() != 2 {
		t.Errorf("Room %d, want 2", f.Room())
	}
	write(2) // fills file 3
	write(3) // file 4
	write(2) // does not fit after 0 free: file 5
	write(2) // does not fit into file 5's 1 free: file 6
	if err := f.Write(nil, 4); err == nil {
		t.Error("a write of 4 records with MaxEntriesInFile 3 succeeded")
	}
	f.Close()
	counts := map[string]int{}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		counts[e.Name()] = bytes.Count(b, []byte("\n"))
		names = append(names, e.Name())
	}
	slices.SortFunc(names, CompareNames)
	var got []int
	for _, n := range names {
		got = append(got, counts[n])
	}
	if diff := cmp.Diff([]int{3, 3, 3, 3, 2, 2}, got); diff != "" {
		t.Errorf("records per file (-want +got):\n%s", diff)
	}
}

// TestFilesCounterPast999: with one timestamp, the counter alone orders the
// files, and file 1000 comes after file 999.
func TestFilesCounterPast999(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "log")
	f, err := NewFiles(Options{Dir: dir, MaxEntriesInFile: 1, Now: fixedClock()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1002 {
		if err := f.Write(asciiRecord(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	names, data, _ := readLog(t, dir)
	if len(names) != 1002 || names[998] != DataFileName(fixedClock()(), 999, false, None) || names[999] != DataFileName(fixedClock()(), 1000, false, None) {
		t.Fatalf("%d files, 999th %s, 1000th %s", len(names), names[998], names[999])
	}
	var want []byte
	for i := range 1002 {
		want = append(want, asciiRecord(i)...)
	}
	if !bytes.Equal(data, want) {
		t.Error("records out of order")
	}
}

func listFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.SortFunc(names, CompareNames)
	return names
}

func TestFilesMaxLogFiles(t *testing.T) {
	dir := t.TempDir()
	f, err := NewFiles(Options{Dir: dir, MaxEntriesInFile: 1, MaxLogFiles: 2, Now: fixedClock()})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := f.Write(asciiRecord(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()
	now := fixedClock()()
	want := []string{DataFileName(now, 4, false, None), DataFileName(now, 5, false, None)}
	if diff := cmp.Diff(want, listFiles(t, dir)); diff != "" {
		t.Errorf("files kept (-want +got):\n%s", diff)
	}
}

func TestFilesMaxLogSize(t *testing.T) {
	dir := t.TempDir()
	// Entries would allow everything in one file; size rotates.
	f, err := NewFiles(Options{Dir: dir, MaxEntriesInFile: -1, MaxLogSize: 1, Now: fixedClock()})
	if err != nil {
		t.Fatal(err)
	}
	chunk := bytes.Repeat([]byte("$0;-1;x\n"), 400<<10/8) // 400 KiB, 51200 records
	for range 6 {
		if err := f.Write(chunk, 51200); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// A file is rotated once it holds ≥ 1 MiB: 3 chunks (1200 KiB) each.
	got := listFiles(t, dir)
	now := fixedClock()()
	want := []string{DataFileName(now, 1, false, None), DataFileName(now, 2, false, None)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("files (-want +got):\n%s", diff)
	}
	for _, name := range got {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != 3*int64(len(chunk)) {
			t.Errorf("%s holds %d bytes, want 3 chunks", name, st.Size())
		}
	}

	// With MaxLogFiles the oldest rotated files go; nothing is deleted
	// for size alone.
	f2, _ := NewFiles(Options{Dir: t.TempDir(), MaxEntriesInFile: -1, MaxLogSize: 1, MaxLogFiles: 1, Now: fixedClock()})
	for range 6 {
		f2.Write(chunk, 51200)
	}
	f2.Close()
	if got := listFiles(t, f2.opt.Dir); len(got) != 1 || got[0] != DataFileName(now, 2, false, None) {
		t.Errorf("files kept: %v", got)
	}
}

// TestFilesFlushCrash: after Flush, a copy of the file taken without Close
// (as after kill -9) decodes to everything flushed. gzip and xz files are
// then complete (members or streams that other decoders read whole too);
// deflate and zip files, and xz files flushed again within xzSealInterval,
// read as truncated after the flushed bytes.
func TestFilesFlushCrash(t *testing.T) {
	for _, c := range writable {
		for _, binary := range []bool{false, true} {
			for _, step := range []time.Duration{time.Second, 0} {
				if step == 0 && c != XZ {
					continue // only xz looks at the clock
				}
				t.Run(fmt.Sprintf("%v/binary=%v/flush every %v", c, binary, step), func(t *testing.T) {
					testFlushCrash(t, c, binary, step)
				})
			}
		}
	}
}

// stepClock returns a clock that moves on by step at every reading.
func stepClock(step time.Duration) func() time.Time {
	t := time.Date(2026, 1, 2, 3, 4, 5, 6e6, time.UTC)
	return func() time.Time {
		t = t.Add(step)
		return t
	}
}

func testFlushCrash(t *testing.T, c Compression, binary bool, step time.Duration) {
	dir := t.TempDir()
	f, err := NewFiles(Options{Dir: dir, Binary: binary, Compression: c, Now: stepClock(step)})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	complete := c == None || c == Gzip || c == XZ && step >= xzSealInterval
	var want []byte
	for round := range 3 {
		var rec []byte
		if binary {
			rec = sampleBinary(50 + round)
		} else {
			rec = sampleASCII(50 + round)
		}
		if err := f.Write(rec, 50); err != nil {
			t.Fatal(err)
		}
		want = append(want, rec...)
		if err := f.Flush(); err != nil {
			t.Fatal(err)
		}
		snapshot, err := os.ReadFile(f.Current())
		if err != nil {
			t.Fatal(err)
		}
		s := NewStream(bytes.NewReader(snapshot), filepath.Base(f.Current()), Limits{})
		got, err := io.ReadAll(s)
		if !bytes.Equal(got, want) {
			t.Fatalf("round %d: read %d bytes of %d flushed (error %v)", round, len(got), len(want), err)
		}
		if s.Format != (Format{c, !binary}) {
			t.Errorf("format %v", s.Format)
		}
		switch {
		case complete && err != nil:
			t.Errorf("round %d: flushed %v file: %v, want it complete", round, c, err)
		case !complete && !errors.Is(err, ErrTruncated):
			t.Errorf("round %d: unfinished %v file: %v, want ErrTruncated", round, c, err)
		}
		if complete && c != None {
			// Other decoders read it whole too.
			if got, err := otherDecoder(t, c, snapshot); err != nil || !bytes.Equal(got, want) {
				t.Errorf("round %d: another %v decoder reads %d bytes of %d: %v", round, c, len(got), len(want), err)
			}
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	closed := mustRead(t, f.Current())
	got, _, err := decodeBytes(t, "closed", closed)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("after Close: %d bytes of %d, %v", len(got), len(want), err)
	}
	if c == Gzip || c == XZ {
		if got, err := otherDecoder(t, c, closed); err != nil || !bytes.Equal(got, want) {
			t.Errorf("after Close, another %v decoder reads %d bytes of %d: %v", c, len(got), len(want), err)
		}
	}
}

// otherDecoder decodes gzip with the standard library and xz with
// ulikunitz/xz's reader (not this package's).
func otherDecoder(t *testing.T, c Compression, data []byte) ([]byte, error) {
	t.Helper()
	var r io.Reader
	var err error
	switch c {
	case Gzip:
		r, err = gzip.NewReader(bytes.NewReader(data))
	case XZ:
		r, err = xz.NewReader(bytes.NewReader(data))
	default:
		t.Fatalf("no other decoder for %v", c)
	}
	if err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestFilesClose(t *testing.T) {
	dir := t.TempDir()
	f, err := NewFiles(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("Close without writes: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("%d files without a write", len(entries))
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := f.Write([]byte("$0;1\n"), 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Write after Close: %v", err)
	}
	if err := f.Flush(); !errors.Is(err, ErrClosed) {
		t.Errorf("Flush after Close: %v", err)
	}
	if _, err := NewFiles(Options{Dir: dir, Compression: BZip2}); !errors.Is(err, ErrUnsupported) {
		t.Errorf("bzip2: %v", err)
	}
	// A name clash (two writers in one directory, one millisecond) is an
	// error, never an overwrite.
	a, _ := NewFiles(Options{Dir: dir, Now: fixedClock()})
	b, _ := NewFiles(Options{Dir: dir, Now: fixedClock()})
	if err := a.Write([]byte("$0;1\n"), 1); err != nil {
		t.Fatal(err)
	}
	if err := b.Write([]byte("$0;2\n"), 1); !errors.Is(err, os.ErrExist) {
		t.Errorf("clash: %v", err)
	}
	a.Close()
	b.Close()
}
