package tcp

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// chunkReader returns data in pieces whose sizes next chooses, then EOF.
type chunkReader struct {
	data []byte
	next func() int
}

func (r *chunkReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := len(p)
	if r.next != nil {
		n = min(n, r.next())
	}
	n = copy(p, r.data[:min(n, len(r.data))])
	r.data = r.data[n:]
	return n, nil
}

// streamResult is what a connection's stream produced.
type streamResult struct {
	Records []string
	Kind    endKind
	Err     string
	Offset  int64
	Dropped int
}

// runStream feeds data through a connection's decode loop, cut into reads
// by next (nil: as much as the buffer takes).
func runStream(t *testing.T, dec Decoder, bufSize int, data []byte, next func() int) (streamResult, []record.Record) {
	t.Helper()
	var res streamResult
	var recs []record.Record
	s := &stream{
		rd:      &chunkReader{data: data, next: next},
		dec:     dec,
		bufSize: bufSize,
		handOn: func(b *record.Batch) (*record.Batch, error) {
			for i := range b.Records {
				recs = append(recs, b.Records[i].Clone())
				res.Records = append(res.Records, recString(&b.Records[i]))
			}
			b.Reset()
			return b, nil
		},
	}
	end := s.run()
	if end.kind == endPanic {
		t.Fatalf("decoder panicked: %v", end.err)
	}
	res.Kind, res.Offset, res.Dropped = end.kind, end.offset, end.dropped
	if end.err != nil {
		res.Err = end.err.Error()
	}
	if end.kind == endEOF && res.Offset != int64(len(data)) {
		t.Fatalf("clean end at offset %d of %d", res.Offset, len(data))
	}
	return res, recs
}

// checkChunking runs data whole, one byte at a time and in random pieces
// and fails unless all give the same records and the same end.
func checkChunking(t *testing.T, newDec func() Decoder, data []byte, seed uint64) (streamResult, []record.Record) {
	t.Helper()
	const buf = 16 // small, so that units straddle reads and the buffer grows
	whole, recs := runStream(t, newDec(), buf, data, nil)
	one, _ := runStream(t, newDec(), buf, data, func() int { return 1 })
	if diff := cmp.Diff(whole, one); diff != "" {
		t.Fatalf("one byte at a time differs from whole input (-whole +bytes):\n%s", diff)
	}
	rng := rand.New(rand.NewPCG(seed, 3))
	random, _ := runStream(t, newDec(), buf, data, func() int { return 1 + rng.IntN(40) })
	if diff := cmp.Diff(whole, random); diff != "" {
		t.Fatalf("random pieces differ from whole input (-whole +pieces):\n%s", diff)
	}
	return whole, recs
}

// fuzzSeeds adds every file of the corpus directory dir.
func fuzzSeeds(f *testing.F, dir string, keep func(name string) bool) {
	d := testcorpus.Path(f, dir)
	entries, err := os.ReadDir(d)
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if !keep(e.Name()) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(d, e.Name()))
		if err != nil {
			f.Fatal(err)
		}
		// The head of each stream: registry entries and the first
		// records. Whole streams are tested in TestKiekerStreams; small
		// seeds keep the fuzzer fast.
		f.Add(data[:min(len(data), 600)], uint64(len(data)))
	}
}

// FuzzKiekerStream: a single-socket Kieker stream through a connection's
// decode loop — no panic, the same records and end however the bytes
// arrive, and an encode→decode round trip of what decoded cleanly.
func FuzzKiekerStream(f *testing.F) {
	opts := kieker.Options{MaxStringLen: 200, MaxArrayLen: 8}
	newDec := KiekerDecoder(opts)
	fuzzSeeds(f, "kieker-streams", func(name string) bool { return strings.HasSuffix(name, ".bin") && !strings.HasPrefix(name, "perl") })
	f.Add([]byte{}, uint64(0))
	f.Add(kieker.AppendRegistryEntry(nil, 0, strings.Repeat("x", 201), true), uint64(2))
	f.Add(binary.BigEndian.AppendUint32(nil, 0xffffffff), uint64(3))
	f.Add(kieker.AppendRegistryEntry(nil, 0, "kieker.common.record.misc.EmptyRecord", true), uint64(4))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		res, recs := checkChunking(t, newDec, data, seed)
		if len(recs) == 0 {
			return
		}
		enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
		var out []byte
		for i := range recs {
			var err error
			if out, err = enc.Append(out, &recs[i]); err != nil {
				t.Fatalf("record %d does not encode: %v", i, err)
			}
		}
		back, _ := checkChunking(t, newDec, out, seed)
		if back.Kind != endEOF {
			t.Fatalf("re-encoded records end with %v: %s", back.Kind, back.Err)
		}
		if diff := cmp.Diff(res.Records, back.Records); diff != "" {
			t.Fatalf("round trip (-decoded +re-decoded):\n%s", diff)
		}
	})
}

// FuzzKDBStream: the KDB binary dialect through a connection's decode loop.
func FuzzKDBStream(f *testing.F) {
	m, err := kdb.DefaultMapping(catalog)
	if err != nil {
		f.Fatal(err)
	}
	opts := kdb.Options{MaxStringLen: 200, MaxArrayLen: 8, MaxRecordSize: 512}
	newDec := KDBDecoder(m, opts)
	// Small seeds: the fuzzer minimizes what it finds in time quadratic in
	// the input's length.
	good := kdbRecords(f, m, 1, 0, 3)
	f.Add(good, uint64(1))
	f.Add(good[:len(good)-3], uint64(2))
	f.Add(append(append([]byte{}, good[:90]...), 0xde, 0xad, 0xbe, 0xef), uint64(3))
	f.Add([]byte{}, uint64(4))
	// Real records: the captured Java stream re-encoded as KDB.
	java, _, _ := decodeKieker(f, corpus(f, "kieker-streams", "java-tcp.bin"))
	var fromJava []byte
	for i := range java[:6] {
		if id, ok := m.ID(java[i].Type); ok {
			if out, err := kdb.AppendBinary(fromJava, id, &java[i]); err == nil {
				fromJava = out
			}
		}
	}
	f.Add(fromJava, uint64(5))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		res, recs := checkChunking(t, newDec, data, seed)
		if len(recs) == 0 {
			return
		}
		enc := kdb.NewEncoder(m, opts)
		var out []byte
		for i := range recs {
			next, err := enc.AppendBinary(out, &recs[i])
			if err != nil {
				return // a value the encoder refuses (the decoder is lenient)
			}
			out = next
		}
		back, _ := checkChunking(t, newDec, out, seed)
		if back.Kind != endEOF {
			t.Fatalf("re-encoded records end with %v: %s", back.Kind, back.Err)
		}
		if diff := cmp.Diff(res.Records, back.Records); diff != "" {
			t.Fatalf("round trip (-decoded +re-decoded):\n%s", diff)
		}
	})
}

// FuzzDualStream: a Dual records stream decoded against a registry stream
// delivered first; the registry decoder runs through the same loop.
func FuzzDualStream(f *testing.F) {
	// A short trace with short strings: the fuzzer minimizes what it finds
	// in time quadratic in the input's length, so seeds stay small.
	var b record.Batch
	tm := b.Add(catalog.Lookup(record.TraceMetadata), record.NoTimestamp)
	tm.Values[0], tm.Values[2], tm.Values[3] = record.IntValue(1), record.StringValue("s"), record.StringValue("h")
	for _, name := range []string{record.BeforeOperationEvent, record.AfterOperationEvent} {
		r := b.Add(catalog.Lookup(name), 5)
		r.Values[1], r.Values[3], r.Values[4] = record.IntValue(1), record.StringValue("op()"), record.StringValue("C")
	}
	enc := kieker.NewEncoder(kieker.EncoderOptions{})
	var frames, entries []byte
	for i := range b.Records {
		frames, _ = enc.Append(frames, &b.Records[i])
		for _, en := range enc.NewEntries() {
			entries = kieker.AppendRegistryEntry(entries, en.ID, en.Value, false)
		}
	}
	f.Add(entries, frames, uint64(1))
	f.Add(entries[:len(entries)/2], frames, uint64(2))
	f.Add([]byte{}, frames[:30], uint64(3))
	opts := kieker.Options{Catalog: catalog, MaxStringLen: 200, MaxArrayLen: 8}
	f.Fuzz(func(t *testing.T, entries, frames []byte, seed uint64) {
		var regs []*dualRegistry
		newReg := func() Decoder {
			r := newDualRegistry(opts)
			regs = append(regs, r)
			return r.entries()
		}
		checkChunking(t, newReg, entries, seed)
		tables := make([]map[int32]string, len(regs))
		for i, r := range regs {
			tables[i] = map[int32]string{}
			for id, s := range r.strs.All() {
				tables[i][id] = s
			}
		}
		for i := range tables[1:] {
			if diff := cmp.Diff(tables[0], tables[i+1]); diff != "" {
				t.Fatalf("registries differ by how the entries arrived (-whole +pieces):\n%s", diff)
			}
		}
		// RegistryWait is 0 in this loop: a frame whose string is missing
		// fails at once, as nothing can change the registry meanwhile.
		reg := regs[0]
		checkChunking(t, func() Decoder { return reg.records() }, frames, seed)
	})
}
