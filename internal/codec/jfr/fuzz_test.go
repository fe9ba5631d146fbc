package jfr

import (
	"bytes"
	"os"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
)

// fuzzLimits keep a fuzzed input from asking for much memory.
var fuzzLimits = Limits{MaxEventSize: 1 << 20, MaxStringLen: 1 << 16, MaxArrayLen: 4096, MaxPoolBytes: 8 << 20, MaxCheckpoints: 4096, MaxMetadataSize: 1 << 20}

func seedRecording(f *testing.F) []byte {
	data, err := os.ReadFile(smallFile)
	if err != nil {
		f.Fatal(err)
	}
	return data
}

// decodeWindow reads every chunk it can frame with the given read window
// and returns the records and how many errors were reported.
func decodeWindow(data []byte, window int) ([]record.Record, int) {
	s := NewStream(Options{Limits: fuzzLimits})
	s.lim.ReadBufferSize = window
	var out []record.Record
	errs := 0
	readChunks(s, bytes.NewReader(data), int64(len(data)), 50, func(_ int64, b *record.Batch) {
		for i := range b.Records {
			out = append(out, b.Records[i].Clone())
		}
	}, func(int64, error) { errs++ })
	return out, errs
}

// FuzzChunk feeds whole files to the chunk reader: it must not panic, and
// the records must not depend on how the bytes are read (a window of 16
// bytes, refilled for nearly every event, or of 1 MiB).
func FuzzChunk(f *testing.F) {
	data := seedRecording(f)
	f.Add(data)
	f.Add(data[:len(data)/2])
	f.Add(data[:HeaderSize+100])
	f.Fuzz(func(t *testing.T, data []byte) {
		big, errsBig := decodeWindow(data, 1<<20)
		small, errsSmall := decodeWindow(data, 16)
		if len(big) != len(small) || errsBig != errsSmall {
			t.Fatalf("window 1 MiB: %d records, %d errors; window 16: %d records, %d errors", len(big), errsBig, len(small), errsSmall)
		}
		for i := range big {
			if !sameValues(&big[i], &small[i]) {
				t.Fatalf("record %d differs between windows", i)
			}
		}
	})
}

func metadataEvent(f *testing.F, data []byte) []byte {
	h, err := ReadHeader(bytes.NewReader(data))
	if err != nil {
		f.Fatal(err)
	}
	ev, err := readEvent(bytes.NewReader(data), 0, h.MetadataOffset, h.ChunkSize, 1<<24, nil, "metadata")
	if err != nil {
		f.Fatal(err)
	}
	return ev
}

// FuzzMetadata feeds metadata events to the parser: no panic, and what it
// accepts has every field's class resolved.
func FuzzMetadata(f *testing.F) {
	ev := metadataEvent(f, seedRecording(f))
	f.Add(ev)
	f.Add(ev[:len(ev)/3])
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseMetadata(b, 0)
		if err != nil {
			return
		}
		for _, c := range m.Classes {
			for _, fl := range c.Fields {
				if fl.Class == nil {
					t.Fatalf("%s.%s has no class", c.Name, fl.Name)
				}
			}
		}
		// Every event type compiles.
		cp := newCompiler(m)
		for _, c := range m.Classes {
			if c.IsEvent() {
				cp.class(c, MaxDepth)
			}
		}
	})
}

// FuzzEvent decodes arbitrary event bodies with the metadata and constant
// pools of the committed recording: the first byte picks the event type.
func FuzzEvent(f *testing.F) {
	data := seedRecording(f)
	s := NewStream(Options{Limits: fuzzLimits})
	h, err := ReadHeader(bytes.NewReader(data))
	if err != nil {
		f.Fatal(err)
	}
	c, err := s.Open(bytes.NewReader(data), 0, h)
	if err != nil {
		f.Fatal(err)
	}
	var events []*Class
	for _, cl := range s.meta.Classes {
		if cl.IsEvent() {
			events = append(events, cl)
		}
	}
	index := map[int64]int{}
	for i, cl := range events {
		index[cl.ID] = i
	}
	// Seeds: the recording's own events, each prefixed with its type's
	// index.
	for off := int64(HeaderSize); off < h.ChunkSize; {
		in := input{b: data[off:h.ChunkSize]}
		size := int64(in.varint())
		typ := in.i64()
		if i, ok := index[typ]; ok && i < 256 {
			f.Add(append([]byte{byte(i)}, data[off+int64(in.pos):off+size]...))
		}
		off += size
	}
	var b record.Batch
	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) == 0 {
			return
		}
		et := s.events.lookup(s, events[int(body[0])%len(events)].ID)
		if et == nil || et.lay == nil {
			return
		}
		d := s.dec
		d.cur, d.ps = c.pools, c.pools
		var in input
		in.reset(body[1:])
		b.Reset()
		r := b.Add(et.typ, record.NoTimestamp)
		et.lay.read(d, &in, r.Values)
		if d.nest != 0 {
			t.Fatalf("nesting count %d after an event", d.nest)
		}
		for i, fl := range et.typ.Fields {
			if fl.Array != (r.Values[i].List() != nil) && r.Values[i].List() != nil {
				t.Fatalf("field %s: array value in a scalar field", fl.Name)
			}
		}
	})
}
