package jfr

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/codec/jsonl"
	"github.com/tracebridge/tracebridge/internal/jfrtest"
	"github.com/tracebridge/tracebridge/internal/record"
)

var update = flag.Bool("update", false, "record testdata/small.jfr again with the JDK and rewrite the golden files")

const smallFile = "testdata/small.jfr"

// small returns the committed recording (regenerated with -update).
func small(t testing.TB) []byte {
	t.Helper()
	if *update {
		updateOnce.Do(func() { regenerate(t) })
	}
	b, err := os.ReadFile(smallFile)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var updateOnce = &onceT{}

type onceT struct{ done bool }

func (o *onceT) Do(f func()) {
	if !o.done {
		o.done = true
		f()
	}
}

// regenerate records the workload with the small settings into
// testdata/small.jfr and rewrites testdata/small.summary from jfr summary.
func regenerate(t testing.TB) {
	tools := jfrtest.Require(t)
	path, err := tools.Record(t.TempDir(), jfrtest.Options{Seconds: 2, Settings: jfrtest.Small, RunID: "small"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(smallFile, b, 0o644); err != nil {
		t.Fatal(err)
	}
	counts, _, err := tools.Summary(smallFile)
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for name, n := range counts {
		lines = append(lines, fmt.Sprintf("%s %d", name, n))
	}
	sort.Strings(lines)
	if err := os.WriteFile("testdata/small.summary", []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// decodeAll decodes every chunk of data and returns the records (cloned)
// and the stream, failing the test on any error.
func decodeAll(t testing.TB, data []byte, o Options) ([]record.Record, *Stream) {
	t.Helper()
	s := NewStream(o)
	var out []record.Record
	readChunks(s, bytes.NewReader(data), int64(len(data)), 100, func(_ int64, b *record.Batch) {
		for i := range b.Records {
			out = append(out, b.Records[i].Clone())
		}
	}, func(off int64, err error) { t.Fatalf("chunk at %d: %v", off, err) })
	return out, s
}

// readChunks reads the chunks of the size bytes of r in turn with s, n
// records a batch, as the source does: each is given every batch read
// (valid until it returns) and the offset of its chunk, fail every error.
// An error in a chunk's header ends the reading, one opening a chunk
// skips it, one reading its events goes on with the next batch.
func readChunks(s *Stream, r io.ReaderAt, size int64, n int, each func(off int64, b *record.Batch), fail func(off int64, err error)) {
	var b record.Batch
	for off := int64(0); off < size; {
		sec := io.NewSectionReader(r, off, size-off)
		h, err := ReadHeader(sec)
		if err != nil {
			fail(off, err)
			return
		}
		if c, err := s.Open(sec, off, h); err != nil {
			fail(off, err)
		} else {
			for {
				b.Reset()
				_, err := c.Next(&b, n)
				each(off, &b)
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					fail(off, err)
				}
			}
		}
		off += h.ChunkSize
	}
}

func TestSmallRecordingCounts(t *testing.T) {
	data := small(t)
	recs, s := decodeAll(t, data, Options{})
	got := map[string]int64{}
	for _, r := range recs {
		got[r.Type.Name]++
	}
	st := s.Stats()
	got["jdk.Metadata"] = st.Metadata
	got["jdk.CheckPoint"] = st.Checkpoints
	var lines []string
	for name, n := range got {
		lines = append(lines, fmt.Sprintf("%s %d", name, n))
	}
	sort.Strings(lines)
	want, err := os.ReadFile("testdata/small.summary")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), strings.Join(lines, "\n")+"\n"); diff != "" {
		t.Errorf("counts differ from jfr summary's (-jfr summary +decoded):\n%s", diff)
	}
}

// TestSmallRecordingGolden pins the record layout: the first two records of
// every type as JSON lines.
func TestSmallRecordingGolden(t *testing.T) {
	recs, _ := decodeAll(t, small(t), Options{})
	seen := map[string]int{}
	var out []byte
	for i := range recs {
		if seen[recs[i].Type.Name]++; seen[recs[i].Type.Name] <= 2 {
			out = jsonl.AppendRecord(out, &recs[i])
		}
	}
	golden := "testdata/small.golden.jsonl"
	if *update {
		if err := os.WriteFile(golden, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(out)); diff != "" {
		t.Errorf("records differ from %s (-want +got):\n%s", golden, diff)
	}
}

func TestFilterDecodesOnlySelectedTypes(t *testing.T) {
	data := small(t)
	all, _ := decodeAll(t, data, Options{})
	for _, tc := range []struct {
		patterns []string
		want     func(string) bool
	}{
		{[]string{"shop.Order"}, func(n string) bool { return n == "shop.Order" }},
		{[]string{"ExecutionSample,ThreadSleep"}, func(n string) bool { return n == "jdk.ExecutionSample" || n == "jdk.ThreadSleep" }},
		{[]string{"shop.*", "jdk.GC*"}, func(n string) bool { return strings.HasPrefix(n, "shop.") || strings.HasPrefix(n, "jdk.GC") }},
	} {
		t.Run(strings.Join(tc.patterns, " "), func(t *testing.T) {
			f, err := NewFilter(tc.patterns...)
			if err != nil {
				t.Fatal(err)
			}
			got, s := decodeAll(t, data, Options{Filter: f})
			var want []record.Record
			for _, r := range all {
				if tc.want(r.Type.Name) {
					want = append(want, r)
				}
			}
			if len(got) != len(want) || len(got) == 0 {
				t.Fatalf("%d records, want %d", len(got), len(want))
			}
			for i := range got {
				if got[i].Type.Name != want[i].Type.Name || !sameValues(&got[i], &want[i]) {
					t.Fatalf("record %d differs: %v vs %v", i, got[i], want[i])
				}
			}
			if st := s.Stats(); st.Filtered != int64(len(all)-len(want)) || st.Events != int64(len(want)) {
				t.Errorf("stats %+v", st)
			}
		})
	}
	if _, err := NewFilter("jdk.[x"); err == nil {
		t.Error("malformed glob accepted")
	}
	if f, _ := NewFilter("", " "); f != nil {
		t.Error("empty patterns make a filter")
	}
}

func sameValues(a, b *record.Record) bool {
	if a.LoggingTimestamp != b.LoggingTimestamp || len(a.Values) != len(b.Values) {
		return false
	}
	for i := range a.Values {
		if !a.Values[i].Equal(b.Values[i]) {
			return false
		}
	}
	return true
}

// TestLiveChunkIncrements reads the recording as a follower would while the
// JVM writes it: one flush at a time, each made readable by a header whose
// size, checkpoint and metadata offsets end at that flush. The records must
// equal those of reading the finished chunk at once.
func TestLiveChunkIncrements(t *testing.T) {
	data := small(t)
	whole, _ := decodeAll(t, data, Options{})
	h, err := ReadHeader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	flushes := flushPoints(t, data[:h.ChunkSize], h, false)
	if len(flushes) < 2 {
		t.Fatalf("only %d flushes in the recording", len(flushes))
	}
	for _, perStep := range []int{1, 7} {
		t.Run(fmt.Sprintf("batches of %d", perStep), func(t *testing.T) {
			got, _ := follow(t, data, h, flushes, perStep, -1)
			if len(got) != len(whole) {
				t.Fatalf("%d records, want %d", len(got), len(whole))
			}
			for i := range got {
				if !sameValues(&got[i], &whole[i]) {
					t.Fatalf("record %d differs", i)
				}
			}
		})
	}
}

// TestConstantsSeveralFlushesLate: the JVM writes some constants several
// flushes after the events that refer to them, or only when it finishes
// the chunk (the class loaders of the jdk.ClassLoaderStatistics events it
// writes when a chunk begins). The recording is read as if every
// checkpoint event ended a flush, so that the types checkpoint of a flush
// arrives flushes after the events of that flush refer to its classes and
// the chunk-end constants many flushes after the chunk-begin events. The
// follower holds such events until their constants arrive, reading on
// meanwhile: it reads the records of the finished chunk, the held ones
// later than in the file.
func TestConstantsSeveralFlushesLate(t *testing.T) {
	data := small(t)
	whole, _ := decodeAll(t, data, Options{})
	h, err := ReadHeader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	flushes := flushPoints(t, data[:h.ChunkSize], h, true)
	if n := len(flushPoints(t, data[:h.ChunkSize], h, false)); len(flushes) < 3*n {
		t.Fatalf("%d checkpoints for %d flushes", len(flushes), n)
	}
	got, held := follow(t, data, h, flushes, 5, -1)
	if held == 0 {
		t.Fatal("no event was held for its constants")
	}
	t.Logf("%d flushes, %d records, at most %d held at once", len(flushes), len(got), held)
	if diff := cmp.Diff(sortedText(whole), sortedText(got)); diff != "" {
		t.Fatalf("records (sorted) differ from the finished chunk's (-file +live):\n%s", diff)
	}
	// A reader that gives up waiting (Settle) gets the held events at once
	// and loses or repeats none when the chunk goes on.
	for _, at := range []int{0, len(flushes) / 2} {
		if got, _ := follow(t, data, h, flushes, 5, at); len(got) != len(whole) {
			t.Errorf("settled after flush %d: %d records, want %d", at, len(got), len(whole))
		}
	}
}

// sortedText returns the records as sorted text, for comparing what two
// readers read regardless of order.
func sortedText(rs []record.Record) []string {
	out := make([]string, len(rs))
	for i := range rs {
		out[i] = rs[i].Type.Name + " " + string(jsonl.AppendRecord(nil, &rs[i]))
	}
	sort.Strings(out)
	return out
}

// follow reads the chunk data as a follower would, a header update per
// flush (the last one the finished header), perStep records a call of
// Next, settling the chunk once after reading flush settle (-1: never).
// It returns the records in the order read and the most events held at
// once.
func follow(t *testing.T, data []byte, h Header, flushes []flush, perStep, settle int) ([]record.Record, int) {
	t.Helper()
	s := NewStream(Options{})
	var got []record.Record
	var b record.Batch
	var c *Chunk
	held := 0
	for i, fl := range flushes {
		live := h
		live.ChunkSize, live.CheckpointOffset, live.MetadataOffset = fl.end, fl.checkpoint, fl.metadata
		live.State = byte(1 + i%254)
		if i == len(flushes)-1 {
			live, fl.end = h, h.ChunkSize // the close adds a last checkpoint
		}
		// The chunk's bytes beyond the flush are garbage to the reader.
		view := append([]byte(nil), data[:h.ChunkSize]...)
		for j := fl.end; j < int64(len(view)); j++ {
			view[j] = 0xff
		}
		copy(view, AppendHeader(nil, live))
		hdr, err := ReadHeader(bytes.NewReader(view))
		if err != nil {
			t.Fatal(err)
		}
		if c == nil {
			c, err = s.Open(bytes.NewReader(view), 0, hdr)
		} else {
			c.src = bytes.NewReader(view)
			err = c.Update(hdr)
		}
		if err != nil {
			t.Fatalf("flush %d: %v", i, err)
		}
		for {
			b.Reset()
			_, err := c.Next(&b, perStep)
			for k := range b.Records {
				got = append(got, b.Records[k].Clone())
			}
			held = max(held, c.Held())
			if errors.Is(err, io.EOF) {
				if i == settle && c.settled != c.end {
					c.Settle()
					continue
				}
				break
			}
			if err != nil {
				t.Fatalf("flush %d: %v", i, err)
			}
		}
		if i == settle && c.Held() != 0 {
			t.Errorf("%d events held after Settle", c.Held())
		}
	}
	if !c.Done() {
		t.Error("finished chunk not done")
	}
	return got, held
}

type flush struct{ end, checkpoint, metadata int64 }

// flushPoints finds the ends of the flush segments of a chunk: each
// checkpoint event with the flush bit ends one (with every, each
// checkpoint event does).
func flushPoints(t testing.TB, chunk []byte, h Header, every bool) []flush {
	var out []flush
	var meta int64
	for off := int64(HeaderSize); off < int64(len(chunk)); {
		in := input{b: chunk[off:]}
		size := int64(in.varint())
		typ := in.varint()
		if !in.ok() || size <= 0 {
			t.Fatalf("bad event at %d", off)
		}
		if typ == 0 {
			meta = off
		}
		if typ == 1 {
			in.varint()
			in.varint()
			in.varint()
			if kind := in.u8(); (every || kind&1 != 0) && meta != 0 {
				out = append(out, flush{end: off + size, checkpoint: off, metadata: meta})
			}
		}
		off += size
	}
	return out
}

func TestHeader(t *testing.T) {
	data := small(t)
	h, err := ReadHeader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if h.Major != 2 || h.ChunkSize != int64(len(data)) || !h.Finished() || h.TicksPerSecond <= 0 {
		t.Fatalf("header %+v", h)
	}
	if got := AppendHeader(nil, h); !bytes.Equal(got, data[:HeaderSize]) {
		t.Fatalf("AppendHeader does not reproduce the header")
	}
	for _, tc := range []struct {
		name string
		edit func(h *Header, b []byte)
		want string
		is   error
	}{
		{"magic", func(_ *Header, b []byte) {
			if b != nil {
				b[0] = 'X'
			}
		}, "not a JFR chunk", nil},
		{"future version", func(h *Header, _ []byte) { h.Major = 3 }, "format version 3.", ErrUnsupportedVersion},
		{"old version", func(h *Header, _ []byte) { h.Major = 1 }, "format version 1.", ErrUnsupportedVersion},
		{"uncompressed", func(h *Header, _ []byte) { h.Flags = 0 }, "not compressed", ErrUnsupportedVersion},
		{"being written", func(h *Header, _ []byte) { h.State = StateUpdating }, "", ErrHeaderBusy},
		{"no metadata yet", func(h *Header, _ []byte) { h.State, h.MetadataOffset = 3, 0 }, "", ErrNotReady},
		{"finished without metadata", func(h *Header, _ []byte) { h.MetadataOffset = 0 }, "without metadata", nil},
		{"tiny size", func(h *Header, _ []byte) { h.ChunkSize = 10 }, "smaller than the header", nil},
		{"metadata outside", func(h *Header, _ []byte) { h.MetadataOffset = h.ChunkSize + 5 }, "metadata offset", nil},
		{"ticks", func(h *Header, _ []byte) { h.TicksPerSecond = 0 }, "ticks per second", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hh := h
			tc.edit(&hh, nil)
			b := AppendHeader(nil, hh)
			tc.edit(&hh, b)
			_, err := ReadHeader(bytes.NewReader(b))
			if err == nil || !strings.Contains(err.Error(), tc.want) || (tc.is != nil && !errors.Is(err, tc.is)) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := ReadHeader(bytes.NewReader(data[:40])); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short header: %v", err)
	}
}

// TestBadInput damages the recording in the ways the issue lists; each
// must give an error naming the offset, never a panic, and a damaged
// chunk must not keep the reader from the next one.
func TestBadInput(t *testing.T) {
	data := small(t)
	h, _ := ReadHeader(bytes.NewReader(data))
	metaAt := h.MetadataOffset
	for _, tc := range []struct {
		name string
		edit func(b []byte) []byte
		want string
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, "truncated"},
		{"corrupt metadata", func(b []byte) []byte {
			for i := metaAt + 20; i < metaAt+60; i++ {
				b[i] = 0xfe
			}
			return b
		}, "metadata"},
		{"absurd metadata size", func(b []byte) []byte {
			copy(b[metaAt:], []byte{0xff, 0xff, 0xff, 0xff, 0x7f})
			return b
		}, "metadata"},
		{"checkpoint chain", func(b []byte) []byte {
			copy(b[16:24], []byte{0, 0, 0, 0, 0, 0, 0, 70})
			return b
		}, "checkpoint"},
		{"event size zero", func(b []byte) []byte { b[HeaderSize] = 0; return b }, "bad event size"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.edit(append([]byte(nil), data...))
			errs := readAllErrors(b)
			if len(errs) == 0 {
				t.Fatal("no error")
			}
			msg := errs[0].Error()
			t.Logf("%s: %v", tc.name, errs)
			if !strings.Contains(msg, "offset ") || !strings.Contains(msg, tc.want) {
				t.Fatalf("error %q, want offset and %q", msg, tc.want)
			}
		})
	}
	// A damaged first chunk of two: the second is still read.
	two := append(append([]byte(nil), data...), data...)
	two[HeaderSize] = 0
	recs, errs := readAllRecords(two)
	if len(errs) != 1 || len(recs) == 0 {
		t.Fatalf("%d errors, %d records", len(errs), len(recs))
	}
}

// readAllRecords reads every chunk it can frame, collecting errors instead
// of stopping (as the source does).
func readAllRecords(data []byte) ([]record.Record, []error) {
	var errs []error
	var out []record.Record
	readChunks(NewStream(Options{}), bytes.NewReader(data), int64(len(data)), 64, func(_ int64, b *record.Batch) {
		for i := range b.Records {
			out = append(out, b.Records[i].Clone())
		}
	}, func(_ int64, err error) { errs = append(errs, err) })
	return out, errs
}

func readAllErrors(data []byte) []error {
	_, errs := readAllRecords(data)
	return errs
}

func TestFormatMethod(t *testing.T) {
	// Expected texts are jfr print's for the same frames.
	for _, tc := range []struct{ class, name, desc, want string }{
		{"sun.nio.fs.UnixPath", "checkNotNul", "(Ljava/lang/String;C)V", "sun.nio.fs.UnixPath.checkNotNul(String, char)"},
		{"java.lang.ClassLoader", "defineClass", "(Ljava/lang/String;[BIILjava/security/ProtectionDomain;)Ljava/lang/Class;", "java.lang.ClassLoader.defineClass(String, byte[], int, int, ProtectionDomain)"},
		{"Workload", "orders", "()V", "Workload.orders()"},
		{"A", "m", "([[JLA$B;)V", "A.m(long[][], A$B)"},
		{"A", "broken", "(L", "A.broken()"},
		{"A", "nodesc", "", "A.nodesc()"},
	} {
		if got := string(formatMethod(nil, tc.class, tc.name, tc.desc)); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.desc, got, tc.want)
		}
	}
}

// TestDecodeSteadyStateDoesNotAllocate: once a chunk's constants are
// decoded and its strings interned, decoding its events into a reused
// batch allocates nothing.
func TestDecodeSteadyStateDoesNotAllocate(t *testing.T) {
	data := small(t)
	h, err := ReadHeader(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	s := NewStream(Options{})
	c, err := s.Open(bytes.NewReader(data), 0, h)
	if err != nil {
		t.Fatal(err)
	}
	var b record.Batch
	events := 0
	decode := func() {
		c.pos = HeaderSize
		events = 0
		for {
			b.Reset()
			n, err := c.Next(&b, 256)
			events += n
			if err != nil {
				break
			}
		}
	}
	decode()
	if allocs := testing.AllocsPerRun(5, decode); allocs > 0 {
		t.Fatalf("%v allocations decoding %d events again", allocs, events)
	}
}

// TestMissingConstants: references to constants the chunk does not define
// become zero values, are counted, and are no error.
func TestMissingConstants(t *testing.T) {
	data := small(t)
	whole, _ := decodeAll(t, data, Options{})
	h, _ := ReadHeader(bytes.NewReader(data))
	s := NewStream(Options{})
	c, err := s.Open(bytes.NewReader(data), 0, h)
	if err != nil {
		t.Fatal(err)
	}
	// Forget every stack trace and thread, as if the pools were lost.
	for _, name := range []string{"jdk.types.StackTrace", "java.lang.Thread"} {
		delete(c.pools.entries, s.meta.ClassByName(name).ID)
	}
	var got []record.Record
	var b record.Batch
	for {
		b.Reset()
		_, err := c.Next(&b, 100)
		for i := range b.Records {
			got = append(got, b.Records[i].Clone())
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(whole) {
		t.Fatalf("%d records, want %d", len(got), len(whole))
	}
	for i := range got {
		r := &got[i]
		if v, ok := r.Field("stackTrace"); ok && v.List() != nil {
			t.Fatalf("%s has a stack trace", r.Type.Name)
		}
		if v, ok := r.Field("eventThread"); ok && v.Str() != "" {
			t.Fatalf("%s has a thread", r.Type.Name)
		}
	}
	if st := s.Stats(); st.Unresolved == 0 || st.BadEvents != 0 {
		t.Fatalf("stats %+v", st)
	}
}
