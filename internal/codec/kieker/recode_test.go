package kieker

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/record/recordtest"
)

// framesOf decodes recs sent as a single-socket TCP stream by an encoder
// of its own (so with ids of its own), keeping the frames, a byte at a
// time when split is set.
func framesOf(t *testing.T, recs []record.Record, split bool) *record.Batch {
	t.Helper()
	e := NewEncoder(EncoderOptions{Inline: true})
	var data []byte
	for i := range recs {
		var err error
		if data, err = e.Append(data, &recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	b := new(record.Batch)
	d := NewDecoder(Options{Inline: true, KeepFrames: true, Catalog: recodeCatalog})
	for pos := 0; pos < len(data); {
		end := len(data)
		if split {
			end = min(pos+7, len(data))
		}
		n, err := d.Decode(data[pos:end], b)
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 && end == len(data) {
			t.Fatalf("stuck at %d of %d", pos, len(data))
		}
		pos += n
		if n == 0 {
			// An incomplete unit: feed it with more bytes.
			for n == 0 {
				end = min(end+7, len(data))
				if n, err = d.Decode(data[pos:end], b); err != nil {
					t.Fatal(err)
				}
			}
			pos += n
		}
	}
	if !b.Frames.Valid(b.Len()) || b.Len() != len(recs) {
		t.Fatalf("%d records, %d frames, source %d", b.Len(), len(b.Frames.Ends), b.Frames.Source)
	}
	return b
}

var recodeCatalog = func() *record.Catalog {
	c := record.NewCatalog()
	for _, t := range append(record.Builtin().Types(), recordtest.ExecutionSample) {
		if err := c.Add(t); err != nil {
			panic(err)
		}
	}
	return c
}()

// TestRecoderMatchesEncoder: frames recoded into a log's registry are the
// bytes the log's Encoder writes for the decoded records, with the same
// registry entries, whatever ids the streams used, for streams
// interleaved, and with records the Recoder leaves to the Encoder (arrays)
// among them.
func TestRecoderMatchesEncoder(t *testing.T) {
	recs := benchRecords(400)
	var samples record.Batch
	recordtest.AddSample(&samples, 7, 1000, "a.B.c", "a.B.d")
	recordtest.AddSample(&samples, 7, 2000, "a.B.c")
	// Two streams: the second starts with other strings, so its ids differ.
	one := append(append([]record.Record(nil), recs[:150]...), samples.Records[0])
	one = append(one, recs[150:200]...)
	two := append([]record.Record{samples.Records[1]}, recs[250:]...)
	two = append(two, recs[:40]...)
	for _, split := range []bool{false, true} {
		b1, b2 := framesOf(t, one, split), framesOf(t, two, split)
		if b1.Frames.Source == b2.Frames.Source {
			t.Fatal("two decoders share a source")
		}
		// The log: the batches in pieces, alternating.
		var want, got []byte
		var wantMap, gotMap []Entry
		ref := NewEncoder(EncoderOptions{})
		reg := &Registry{}
		enc := NewEncoder(EncoderOptions{Registry: reg})
		rec := NewRecoder(reg)
		write := func(b *record.Batch, from, to int) {
			for i := from; i < to; i++ {
				var err error
				if want, err = ref.Append(want, &b.Records[i]); err != nil {
					t.Fatal(err)
				}
				wantMap = append(wantMap, ref.NewEntries()...)
			}
			for i := from; i < to; {
				var n int
				got, n = rec.Append(got, b.Records[i:to], &b.Frames, i)
				gotMap = append(gotMap, rec.NewEntries()...)
				i += n
				if i < to {
					var err error
					if got, err = enc.Append(got, &b.Records[i]); err != nil {
						t.Fatal(err)
					}
					gotMap = append(gotMap, enc.NewEntries()...)
					i++
				}
			}
		}
		write(b1, 0, 100)
		write(b2, 0, 77)
		write(b1, 100, b1.Len())
		write(b2, 77, b2.Len())
		if !bytes.Equal(got, want) {
			t.Errorf("split %v: recoded frames differ from the encoded records (%d and %d bytes)", split, len(got), len(want))
		}
		if diff := cmp.Diff(wantMap, gotMap); diff != "" {
			t.Errorf("split %v: registry entries (-encoder +recoder):\n%s", split, diff)
		}
	}
}

// TestFramesFollowTruncate: a record taken back takes its frame with it.
func TestFramesFollowTruncate(t *testing.T) {
	b := framesOf(t, benchRecords(20), false)
	end := b.Frames.Ends[9]
	b.Truncate(10)
	if !b.Frames.Valid(10) || len(b.Frames.Data) != end {
		t.Fatalf("after Truncate(10): %d frames, %d bytes (want 10, %d)", len(b.Frames.Ends), len(b.Frames.Data), end)
	}
	b.Frames.Drop()
	if b.Frames.Valid(10) {
		t.Fatal("frames valid after Drop")
	}
}

// TestFramesOnly: a stream decoded with FramesOnly gives batches of
// frames only for the types it names (split where the kind changes, the
// trace metadata decoded), whose frames the Recoder writes as the
// Encoder writes the records a plain decoder gives, for a stream whole,
// in pieces and a byte at a time, and with an unregistered string id the
// same error at the same offset.
func TestFramesOnly(t *testing.T) {
	recs := benchRecords(2000)
	e := NewEncoder(EncoderOptions{Inline: true})
	var data []byte
	for i := range recs {
		var err error
		if data, err = e.Append(data, &recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	// A Before event naming string id 999999, never registered.
	bad := append([]byte(nil), data...)
	before := record.Builtin().Lookup(record.BeforeOperationEvent)
	frame := make([]byte, 12+8+8+4+4+4)
	id, _ := e.reg.Lookup(before.Name)
	binary.BigEndian.PutUint32(frame, uint32(id))
	binary.BigEndian.PutUint32(frame[12+8+8+4:], 999999)
	bad = append(bad, frame...)
	for _, in := range []struct {
		name string
		data []byte
	}{{"good", data}, {"unregistered id", bad}} {
		want := feedBinary(NewDecoder(Options{Inline: true}), in.data, whole)
		if in.name != "good" && want.err == nil {
			t.Fatal("the bad stream decodes")
		}
		for _, next := range []chunker{whole, randomChunks(1, 4000), oneByte} {
			d := NewDecoder(Options{Inline: true, KeepFrames: true, FramesOnly: framesOnlyButMetadata})
			if only := checkFramesOnly(t, d, in.data, next, want); only < len(recs)/2 {
				t.Errorf("%s: %d of %d records came as frames only", in.name, only, len(recs))
			}
		}
	}
}
