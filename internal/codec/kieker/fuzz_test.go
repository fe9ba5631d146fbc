package kieker

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// Fuzz limits keep single inputs cheap.
const (
	fuzzMaxArray  = 1000
	fuzzMaxString = 1 << 16
)

// fuzzTable is the file-mode string table of FuzzBinaryDecode: Kieker
// 2.0's binary log map plus a few types with every kind and arrays.
func fuzzTable(tb testing.TB) *Strings {
	s := NewStrings(0)
	f, err := os.Open(filepath.Join(logDir(tb, "kieker-2.0-binary-event-trace"), "kieker.map"))
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if err := ReadMap(f, s, 0); err != nil {
		tb.Fatal(err)
	}
	for id, name := range map[int32]string{
		22: allKinds.Name,
		23: record.Prefix + "remotecontrol.UpdateParameterEvent",
		24: record.OperationExecutionRecord,
		25: "kieker.foo.Unknown",
	} {
		if err := s.Set(id, name); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

func copyStrings(s *Strings) *Strings {
	c := NewStrings(s.max)
	for id, v := range s.All() {
		_ = c.Set(id, v)
	}
	return c
}

func FuzzBinaryDecode(f *testing.F) {
	cat := testCatalog(f)
	table := fuzzTable(f)

	// Seeds: real logs (file mode), real TCP streams (inline, with and
	// without JavaCharCount), their truncations, and generated records.
	for _, name := range []string{"kieker-2.0-binary-event-trace", "kieker-1.13-binary-callobject", "kieker-1.10-binary-event-trace"} {
		for _, piece := range seedPieces(readFile(f, dataFile(f, logDir(f, name), ".bin"))) {
			f.Add(piece, uint8(0), uint64(1))
			f.Add(piece, uint8(3), uint64(2))
		}
	}
	streams, _ := filepath.Glob(testcorpus.Path(f, "kieker-streams", "*-tcp*.bin"))
	streams = append(streams, testcorpus.Path(f, "kieker-streams", "c-basic-example.bin"))
	for i, p := range streams {
		for _, piece := range seedPieces(readFile(f, p)) {
			f.Add(piece, uint8(1), uint64(i))
			f.Add(piece, uint8(2), uint64(i))
		}
	}
	e := NewEncoder(EncoderOptions{Inline: true})
	var gen []byte
	recs := genRecords(cat, 3, false)
	for i := range recs {
		gen, _ = e.Append(gen, &recs[i])
	}
	f.Add(gen, uint8(1), uint64(5))
	f.Add(cat2(be32(-1), be32(0), be32(3), []byte("ab\xc3")), uint8(1), uint64(0))
	f.Add(cat2(be32(-1), be32(0), be32(2), []byte("ü-")), uint8(2), uint64(0))
	f.Add(cat2(be32(23), make([]byte, 8), be32(1), be32(1), be32(2), be32(1), be32(1)), uint8(0), uint64(0))
	f.Add([]byte{}, uint8(0), uint64(0))

	f.Fuzz(func(t *testing.T, data []byte, mode uint8, seed uint64) {
		newDecoderWith := func(only func(*record.Type) bool) *Decoder {
			o := Options{Catalog: cat, MaxArrayLen: fuzzMaxArray, MaxStringLen: fuzzMaxString, MaxRegistryEntries: 1 << 16,
				KeepFrames: only != nil, FramesOnly: only}
			switch mode % 4 {
			case 0:
				o.Strings = copyStrings(table)
			case 1:
				o.Inline = true
			case 2:
				o.Inline, o.JavaCharCount = true, true
			case 3:
				o.Strings, o.DualSocket = copyStrings(table), true
			}
			return NewDecoder(o)
		}
		newDecoder := func() *Decoder { return newDecoderWith(nil) }
		want := feedBinary(newDecoder(), data, whole)
		for _, next := range chunkings(data, seed) {
			got := feedBinary(newDecoder(), data, next)
			if diff := cmp.Diff(recStrings(want.recs), recStrings(got.recs)); diff != "" {
				t.Fatalf("records differ from whole input (-whole +chunked):\n%s", diff)
			}
			if want.errString() != got.errString() || want.off != got.off || want.pending != got.pending {
				t.Fatalf("chunked: %q at %d (pending %v); whole: %q at %d (pending %v)",
					got.errString(), got.off, got.pending, want.errString(), want.off, want.pending)
			}
		}
		if want.err != nil {
			var e *Error
			if !errors.As(want.err, &e) || e.Offset != want.off {
				t.Fatalf("error %v is not at the decoder's offset %d", want.err, want.off)
			}
		}
		// Encode what was decoded and decode it again.
		enc := NewEncoder(EncoderOptions{Inline: true})
		var stream []byte
		for i := range want.recs {
			var err error
			if stream, err = enc.Append(stream, &want.recs[i]); err != nil {
				t.Fatal(err)
			}
		}
		back := feedBinary(NewDecoder(Options{Catalog: cat, Inline: true, MaxArrayLen: fuzzMaxArray, MaxStringLen: fuzzMaxString}), stream, whole)
		if back.err != nil {
			t.Fatalf("re-encoded records: %v", back.err)
		}
		if diff := cmp.Diff(recStrings(want.recs), recStrings(back.recs)); diff != "" {
			t.Fatalf("round trip (-decoded +re-decoded):\n%s", diff)
		}
		checkRecode(t, newDecoder, data)
		for _, next := range []chunker{whole, randomChunks(seed, 13)} {
			checkFramesOnly(t, newDecoderWith(framesOnlyButMetadata), data, next, want)
		}
	})
}

// framesOnlyButMetadata keeps every type as frames only but the trace
// metadata, so that streams mix the two kinds of batch.
func framesOnlyButMetadata(t *record.Type) bool { return t.Name != record.TraceMetadata }

// checkFramesOnly feeds data to d (Options.FramesOnly) in chunks as the
// TCP receiver does (a batch handed on after every Decode that filled it,
// Decode called again while it consumed bytes and filled a batch) and
// writes the batches into a log as the log writer does: the bytes and
// registry entries must be the Encoder's for the records a plain decoder
// gave (want), and the error and offset the same.
func checkFramesOnly(t *testing.T, d *Decoder, data []byte, next chunker, want result) (only int) {
	t.Helper()
	reg := &Registry{}
	enc := NewEncoder(EncoderOptions{Registry: reg})
	rec := NewRecoder(reg)
	var got []byte
	var gotMap []Entry
	var b record.Batch
	var buf []byte
	var err error
	for i := 0; err == nil; {
		if i < len(data) {
			n := min(next(), len(data)-i)
			buf = append(buf, data[i:i+n]...)
			i += n
		}
		for {
			var n int
			n, err = d.Decode(buf, &b)
			k := b.Len()
			switch {
			case b.Frames.Only():
				if len(b.Records) > 0 || len(b.Frames.Ends) != k || b.Frames.Strings == nil {
					t.Fatalf("a batch of frames only with %d records, %d frames, %d types", len(b.Records), len(b.Frames.Ends), k)
				}
				if err := checkCounts(&b.Frames); err != nil {
					t.Fatal(err)
				}
				only += k
				var aerr error
				if got, aerr = rec.AppendOnly(got, &b.Frames, 0, k); aerr != nil {
					t.Fatal(aerr)
				}
				gotMap = append(gotMap, rec.NewEntries()...)
			case k > 0:
				if !b.Frames.Valid(k) {
					t.Fatalf("%d records, %d frames", k, len(b.Frames.Ends))
				}
				for j := 0; j < k; {
					var c int
					got, c = rec.Append(got, b.Records[j:], &b.Frames, j)
					gotMap = append(gotMap, rec.NewEntries()...)
					if j += c; j < k {
						got, _ = enc.Append(got, &b.Records[j])
						gotMap = append(gotMap, enc.NewEntries()...)
						j++
					}
				}
			}
			b.Reset()
			buf = append(buf[:0], buf[n:]...)
			if err != nil || n == 0 || k == 0 || len(buf) == 0 {
				break
			}
		}
		if i >= len(data) {
			break
		}
	}
	ref := NewEncoder(EncoderOptions{})
	var wantLog []byte
	var wantMap []Entry
	for i := range want.recs {
		wantLog, _ = ref.Append(wantLog, &want.recs[i])
		wantMap = append(wantMap, ref.NewEntries()...)
	}
	if !bytes.Equal(got, wantLog) {
		t.Fatalf("frames only: the log differs from the encoded records (%d and %d bytes, %d records as frames only)", len(got), len(wantLog), only)
	}
	if diff := cmp.Diff(wantMap, gotMap); diff != "" {
		t.Fatalf("frames only: registry entries (-encoder +recoder):\n%s", diff)
	}
	if errString(err) != want.errString() || d.Offset() != want.off {
		t.Fatalf("frames only: %q at %d; plain: %q at %d", errString(err), d.Offset(), want.errString(), want.off)
	}
	return only
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

// checkRecode decodes data whole keeping the frames and checks that the
// Recoder (with the Encoder for what it leaves) writes what the Encoder
// writes for the decoded records.
func checkRecode(t *testing.T, newDecoder func() *Decoder, data []byte) {
	d := newDecoder()
	d.source = sources.Add(1)
	var b record.Batch
	d.Decode(data, &b)
	if b.Len() > 0 && !b.Frames.Valid(b.Len()) {
		t.Fatalf("%d records, %d frames", b.Len(), len(b.Frames.Ends))
	}
	ref := NewEncoder(EncoderOptions{})
	reg := &Registry{}
	enc := NewEncoder(EncoderOptions{Registry: reg})
	rec := NewRecoder(reg)
	var want, got []byte
	for i := range b.Records {
		want, _ = ref.Append(want, &b.Records[i])
	}
	for i := 0; i < b.Len(); {
		var n int
		got, n = rec.Append(got, b.Records[i:], &b.Frames, i)
		if i += n; i < b.Len() {
			got, _ = enc.Append(got, &b.Records[i])
			i++
		}
	}
	if !bytes.Equal(want, got) {
		t.Fatalf("recoded frames differ from the encoded records (%d and %d bytes)", len(got), len(want))
	}
}

func cat2(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// Fuzz inputs longer than fuzzOneByteMax are fed in random chunks only:
// feeding them one byte at a time would make every execution slow.
const fuzzOneByteMax = 4096

// seedPieces cuts a real file into seeds the fuzzer can work with: its
// start and a piece from the middle.
func seedPieces(data []byte) [][]byte {
	const size = 1024
	if len(data) <= size {
		return [][]byte{data}
	}
	mid := min(len(data)/2, len(data)-size)
	return [][]byte{data[:size], data[mid : mid+size]}
}

func chunkings(data []byte, seed uint64) []chunker {
	if len(data) > fuzzOneByteMax {
		return []chunker{randomChunks(seed, 13), randomChunks(seed+1, 97)}
	}
	return []chunker{oneByte, randomChunks(seed, 13)}
}

func FuzzRegistryDecode(f *testing.F) {
	// Seeds: the registry entries of the real TCP streams, re-written
	// without markers as the dual-socket writers send them.
	streams, _ := filepath.Glob(testcorpus.Path(f, "kieker-streams", "*-tcp*.bin"))
	for i, p := range streams {
		d := NewDecoder(Options{Inline: true, JavaCharCount: strings.Contains(p, "unicode")})
		feedBinary(d, readFile(f, p), whole)
		var reg []byte
		for id, s := range d.Strings().All() {
			reg = AppendRegistryEntry(reg, id, s, false)
		}
		for _, piece := range seedPieces(reg) {
			f.Add(piece, false, uint64(i))
			f.Add(piece, true, uint64(i))
		}
	}
	f.Add(cat2(be32(3), be32(2), []byte("ü😀")), true, uint64(0))
	f.Add(cat2(be32(3), be32(-2)), false, uint64(0))
	f.Add(cat2(be32(3), be32(1), []byte("a"), be32(3), be32(1), []byte("b")), false, uint64(0))

	f.Fuzz(func(t *testing.T, data []byte, javaCount bool, seed uint64) {
		run := func(next chunker) (map[int32]string, string, int64) {
			s := NewStrings(1 << 16)
			rd := NewRegistryDecoder(s, Options{MaxStringLen: fuzzMaxString, JavaCharCount: javaCount})
			var buf []byte
			errStr := "<nil>"
			for i := 0; ; {
				if i < len(data) {
					n := min(next(), len(data)-i)
					buf = append(buf, data[i:i+n]...)
					i += n
				}
				m, err := rd.Decode(buf)
				if m > 0 {
					buf = append(buf[:0], buf[m:]...)
				}
				if err != nil {
					errStr = err.Error()
					break
				}
				if i >= len(data) {
					break
				}
			}
			return tableOf(s), errStr, rd.Offset()
		}
		want, wantErr, wantOff := run(whole)
		for _, next := range chunkings(data, seed) {
			got, gotErr, gotOff := run(next)
			if diff := cmp.Diff(want, got); diff != "" || gotErr != wantErr || gotOff != wantOff {
				t.Fatalf("chunked: %s at %d, whole: %s at %d; table (-whole +chunked):\n%s", gotErr, gotOff, wantErr, wantOff, diff)
			}
		}
		var reg []byte
		for id, s := range want {
			reg = AppendRegistryEntry(reg, id, s, false)
		}
		s := NewStrings(1 << 16)
		if _, err := NewRegistryDecoder(s, Options{MaxStringLen: fuzzMaxString}).Decode(reg); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, tableOf(s)); diff != "" {
			t.Fatalf("round trip (-decoded +re-decoded):\n%s", diff)
		}
	})
}

// fuzzTextTable maps the type ids of Kieker 2.0's ASCII log (0–4) and a few
// more types.
func fuzzTextTable(tb testing.TB) *Strings {
	s := NewStrings(0)
	for id, name := range map[int32]string{
		0:  record.KiekerMetadataRecord,
		1:  record.ApplicationTraceMetadata,
		2:  record.BeforeOperationEvent,
		3:  record.AfterOperationEvent,
		4:  record.AfterOperationFailedEvent,
		10: allKinds.Name,
		11: record.Prefix + "remotecontrol.UpdateParameterEvent",
		12: record.OperationExecutionRecord,
		13: "kieker.tpmon.monitoringRecord.executions.KiekerExecutionRecord",
		14: record.Prefix + "misc.EmptyRecord",
		15: record.Prefix + "system.DiskUsageRecord",
		16: record.CPUUtilizationRecord,
		17: "kieker.foo.Unknown",
	} {
		if err := s.Set(id, name); err != nil {
			tb.Fatal(err)
		}
	}
	return s
}

// textLossless reports whether writing r and reading it back must give r:
// strings that need escaping and chars that cannot stand in a line change.
func textLossless(r *record.Record) bool {
	ok := func(k record.Kind, v record.Value) bool {
		switch k {
		case record.String:
			return string(appendTextString(nil, v.Str(), false)) == v.Str()
		case record.Char:
			c := uint16(v.Int())
			return c != '\n' && c != '\r' && (c < 0xD800 || c > 0xDFFF)
		}
		return true
	}
	for i, f := range r.Type.Fields {
		if l := r.Values[i].List(); f.Array && l != nil {
			for _, it := range l.Items {
				if !ok(f.Kind, it) {
					return false
				}
			}
		} else if !ok(f.Kind, r.Values[i]) {
			return false
		}
	}
	return true
}

func FuzzTextDecode(f *testing.F) {
	cat := testCatalog(f)
	table := fuzzTextTable(f)
	ids := map[string]int32{}
	for id, name := range table.All() {
		if t := cat.Lookup(name); t != nil {
			if _, seen := ids[t.Name]; !seen || name == t.Name {
				ids[t.Name] = id
			}
		}
	}
	for _, name := range []string{"kieker-2.0-ascii-event-trace", "kieker-1.15-ascii-applicationtracemetadata-teastore",
		"kieker-1.14-ascii-system-metrics", "kieker-1.10-ascii-event-trace", "kieker-1.8-ascii-operationexecution"} {
		for _, piece := range seedPieces(readFile(f, dataFile(f, logDir(f, name), ".dat"))) {
			f.Add(piece, uint64(len(piece)))
		}
	}
	for _, s := range []string{
		"$10;9;true;-128;-32768;;;2147483647;-9223372036854775808;1.5f;-1.0E-4;s\\;x;2;true;FALSE;1;127;1;-1;3;a;\\;ü;1;5;1;6;1;NaN;2;Infinity;-0.0;2;x;;z\n",
		"$11;1;p;n;3;a;b;c\r\n$14;3\n\n$12;1;7;op;sess;1;2;3;host;4;5\n$13;1;op;sess;1;2;3;host;4;5",
		"$15;1;2;h;C:\\\\;0.0;16384.0;1.0;-1.0;2472576.0;35.5\n",
		"$17;1\n$99;1\n$x\n$1;1;2;3;a\\",
	} {
		f.Add([]byte(s), uint64(3))
	}

	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		newDecoder := func() *TextDecoder {
			return NewTextDecoder(TextOptions{Catalog: cat, Strings: table, MaxArrayLen: fuzzMaxArray, MaxLineLen: 1 << 16})
		}
		want := feedText(newDecoder(), data, whole)
		for _, next := range chunkings(data, seed) {
			got := feedText(newDecoder(), data, next)
			if diff := cmp.Diff(recStrings(want.recs), recStrings(got.recs)); diff != "" {
				t.Fatalf("records differ from whole input (-whole +chunked):\n%s", diff)
			}
			if want.errString() != got.errString() {
				t.Fatalf("chunked: %q; whole: %q", got.errString(), want.errString())
			}
		}
		// Write what was read and read it again.
		var kept []record.Record
		var text []byte
		for i := range want.recs {
			r := &want.recs[i]
			if !textLossless(r) {
				continue
			}
			kept = append(kept, *r)
			text = AppendLine(text, ids[r.Type.Name], r)
		}
		back := feedText(newDecoder(), text, whole)
		if back.err != nil {
			t.Fatalf("re-written records: %v\n%q", back.err, text)
		}
		if diff := cmp.Diff(recStrings(canonicalNaN(kept)), recStrings(canonicalNaN(back.recs))); diff != "" {
			t.Fatalf("round trip (-read +re-read):\n%s", diff)
		}
	})
}

func FuzzMap(f *testing.F) {
	maps, _ := filepath.Glob(testcorpus.Path(f, "kieker-logs", "*", "*", "kieker.map"))
	more, _ := filepath.Glob(testcorpus.Path(f, "kieker-logs", "*", "*", "*", "kieker.map"))
	for _, p := range append(maps, more...) {
		f.Add(readFile(f, p))
	}
	f.Add([]byte("0=a\r\n\r\n$2=b=c\n+3=\\\\\\n\\r\\x\\"))
	f.Add([]byte("\xEF\xBB\xBF$-5=x\n$5=y\n$5=z\n"))
	f.Add([]byte("$1\n"))

	f.Fuzz(func(t *testing.T, data []byte) {
		read := func(oneByte bool) (map[int32]string, string) {
			s := NewStrings(1 << 16)
			r := iotestReader(string(data), oneByte)
			err := ReadMap(r, s, 1<<16)
			if err != nil {
				return tableOf(s), err.Error()
			}
			return tableOf(s), "<nil>"
		}
		want, wantErr := read(false)
		got, gotErr := read(true)
		if diff := cmp.Diff(want, got); diff != "" || wantErr != gotErr {
			t.Fatalf("one-byte reader: %s; whole: %s; table (-whole +one-byte):\n%s", gotErr, wantErr, diff)
		}
		var out []byte
		for id, s := range want {
			out = AppendMapEntry(out, id, s)
		}
		s := NewStrings(1 << 16)
		if err := ReadMap(iotest.HalfReader(bytes.NewReader(out)), s, math.MaxInt32); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, tableOf(s)); diff != "" {
			t.Fatalf("round trip (-read +re-read):\n%s", diff)
		}
	})
}

// checkCounts says how the tally of a batch of frames only (Counts)
// differs from its frames' types, counted in the order first seen.
func checkCounts(f *record.Frames) error {
	var want []record.TypeCount
next:
	for _, t := range f.Types {
		for i := range want {
			if want[i].Type == t {
				want[i].N++
				continue next
			}
		}
		want = append(want, record.TypeCount{Type: t, N: 1})
	}
	if len(want) != len(f.Counts) {
		return fmt.Errorf("a batch of frames only counts %d types, its frames have %d", len(f.Counts), len(want))
	}
	for i := range want {
		if want[i] != f.Counts[i] {
			return fmt.Errorf("a batch of frames only counts %d frames of %s, its frames have %d of %s", f.Counts[i].N, f.Counts[i].Type.Name, want[i].N, want[i].Type.Name)
		}
	}
	return nil
}
