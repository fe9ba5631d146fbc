package kieker

import (
	"bytes"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/record/recordtest"
)

// allKinds is a record type with a field of every kind, scalar and array.
var allKinds = record.MustType("test.AllKinds", append(recordtest.AllKinds(), record.Field{Name: "last", Kind: record.String})...)

// testCatalog is the built-in catalogue plus allKinds.
func testCatalog(t testing.TB) *record.Catalog {
	cat := record.Builtin()
	if err := cat.Add(allKinds); err != nil {
		t.Fatal(err)
	}
	return cat
}

var (
	genInts = map[record.Kind][]int64{
		record.Byte:  {0, 1, -1, math.MaxInt8, math.MinInt8, 42},
		record.Short: {0, 1, -1, math.MaxInt16, math.MinInt16, 1234},
		record.Int:   {0, 1, -1, math.MaxInt32, math.MinInt32, 123456},
		record.Long:  {0, 1, -1, math.MaxInt64, math.MinInt64, 1795312704163886691},
	}
	genDoubles = []float64{0, math.Copysign(0, -1), 1, -1, 0.1, 0.062, 35.5, 2472576, 1e7, 9999999.999, 1e-3, 0.000999,
		1e-4, 2e23, 4.35, 1.0 / 3, math.MaxFloat64, math.SmallestNonzeroFloat64, -math.SmallestNonzeroFloat64,
		math.Inf(1), math.Inf(-1), math.NaN(), math.Float64frombits(0x7ff8000000000001), math.Float64frombits(0xfff0000000000f00),
		123456789.123, -4.3e-322}
	genFloats = []float32{0, float32(math.Copysign(0, -1)), 1, -1, 0.1, 3.14, 1e7, 9999999, 1e-3, 1e10,
		math.MaxFloat32, math.SmallestNonzeroFloat32, float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(0x7fc00001), math.Float32frombits(0xff800f00), 16777216, 0.3}
	// Strings every encoding round-trips exactly.
	genStrings = []string{"", "a", "realclients.java.Bookstore", "ü", "日本語", "😀 emoji", `x\;y`, `C:\\`, `\\`,
		"tab\tx", "=equals=", `$0\;1\;2`, strings.Repeat("long ", 300), "<no-session-id>", "ünïcödé – 4"}
	// Strings only the binary encoding round-trips: text writes ';' as \;,
	// CR and LF as \r and \n and doubles a trailing unpaired backslash,
	// which Kieker's reader reads back with the backslashes.
	genBinaryStrings = []string{"a;b", "semi;colon;", "$0;1;2", "line\nbreak", "cr\r\n", `trail\`, `\`, ";", "\\\n"}
	genChars         = []int64{'a', ';', '\\', 'ü', '$', 0x20AC, 0, 0xFFFD}
	genBinaryChars   = []int64{'\n', '\r', 0xD800, 0xFFFF}
)

// genValue returns the n-th generated value of kind k. text restricts the
// values to those the ASCII encoding round-trips.
func genValue(k record.Kind, n int, text bool) record.Value {
	switch k {
	case record.Bool:
		return record.BoolValue(n%2 == 1)
	case record.Byte, record.Short, record.Int, record.Long:
		vs := genInts[k]
		return record.IntValue(vs[n%len(vs)])
	case record.Char:
		vs := genChars
		if !text {
			vs = append(append([]int64(nil), genChars...), genBinaryChars...)
		}
		return record.IntValue(vs[n%len(vs)])
	case record.Float:
		return record.FloatValue(genFloats[n%len(genFloats)])
	case record.Double:
		return record.DoubleValue(genDoubles[n%len(genDoubles)])
	case record.String:
		vs := genStrings
		if !text {
			vs = append(append([]string(nil), genStrings...), genBinaryStrings...)
		}
		return record.StringValue(vs[n%len(vs)])
	}
	return record.Value{}
}

// genRecords returns variants records of every type of cat.
func genRecords(cat *record.Catalog, variants int, text bool) []record.Record {
	var out []record.Record
	for _, t := range cat.Types() {
		for v := 0; v < variants; v++ {
			r := record.Record{Type: t, LoggingTimestamp: int64(v*1000 - 1), Values: make([]record.Value, len(t.Fields))}
			for i, f := range t.Fields {
				n := v*7 + i*3
				if !f.Array {
					r.Values[i] = genValue(f.Kind, n, text)
					continue
				}
				items := make([]record.Value, (v+i)%4)
				for j := range items {
					items[j] = genValue(f.Kind, n+j, text)
				}
				r.Values[i] = record.ListValue(f.Kind, items)
			}
			out = append(out, r)
		}
	}
	return out
}

func TestBuiltinTypeCount(t *testing.T) {
	if n := len(record.Builtin().Types()); n != 68 {
		t.Fatalf("%d built-in types, want 68", n)
	}
}

func TestBinaryRoundTrip(t *testing.T) {
	cat := testCatalog(t)
	recs := genRecords(cat, 24, false)
	want := recStrings(recs)

	encodeAll := func(e *Encoder) []byte {
		var buf []byte
		for i := range recs {
			var err error
			if buf, err = e.Append(buf, &recs[i]); err != nil {
				t.Fatal(err)
			}
		}
		return buf
	}

	t.Run("file", func(t *testing.T) {
		e := NewEncoder(EncoderOptions{})
		frames := encodeAll(e)
		strs := NewStrings(0)
		entries := e.NewEntries()
		for i, en := range entries {
			if en.ID != int32(i) {
				t.Fatalf("entry %d has id %d: ids must come in order from 0", i, en.ID)
			}
			if err := strs.Set(en.ID, en.Value); err != nil {
				t.Fatal(err)
			}
		}
		if len(e.NewEntries()) != 0 {
			t.Error("NewEntries did not drain")
		}
		res := checkChunking(t, func() *Decoder { return NewDecoder(Options{Catalog: cat, Strings: strs}) }, frames)
		if res.err != nil || res.off != int64(len(frames)) {
			t.Fatalf("%v after %d of %d bytes", res.err, res.off, len(frames))
		}
		if diff := cmp.Diff(want, recStrings(res.recs)); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	})

	t.Run("inline", func(t *testing.T) {
		e := NewEncoder(EncoderOptions{Inline: true})
		stream := encodeAll(e)
		if len(e.NewEntries()) != 0 {
			t.Error("inline encoder collected entries")
		}
		res := checkChunking(t, func() *Decoder { return NewDecoder(Options{Catalog: cat, Inline: true}) }, stream)
		if res.err != nil || res.off != int64(len(stream)) {
			t.Fatalf("%v after %d of %d bytes", res.err, res.off, len(stream))
		}
		if diff := cmp.Diff(want, recStrings(res.recs)); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	})

	t.Run("dual socket", func(t *testing.T) {
		e := NewEncoder(EncoderOptions{})
		frames := encodeAll(e)
		var reg []byte
		for _, en := range e.NewEntries() {
			reg = AppendRegistryEntry(reg, en.ID, en.Value, false)
		}
		strs := NewStrings(0)
		d := NewDecoder(Options{Catalog: cat, Strings: strs, DualSocket: true})
		rd := NewRegistryDecoder(strs, Options{})
		var b record.Batch
		var got []record.Record
		// Records first: the decoder must wait for the registry.
		n, err := d.Decode(frames, &b)
		if n != 0 || !errors.Is(err, ErrUnknownString) || d.Err() != nil {
			t.Fatalf("before the registry: n=%d err=%v sticky=%v", n, err, d.Err())
		}
		// Deliver the registry in pieces of 97 bytes (the caller keeps
		// what the registry decoder left), retrying the frames after each.
		var pendingReg []byte
		for pos := 0; pos < len(reg) || len(frames) > 0; {
			if pos < len(reg) {
				end := min(pos+97, len(reg))
				pendingReg = append(pendingReg, reg[pos:end]...)
				pos = end
				m, err := rd.Decode(pendingReg)
				if err != nil {
					t.Fatal(err)
				}
				pendingReg = pendingReg[m:]
			}
			n, err := d.Decode(frames, &b)
			for i := range b.Records {
				got = append(got, b.Records[i].Clone())
			}
			b.Reset()
			frames = frames[n:]
			if err != nil && !errors.Is(err, ErrUnknownString) {
				t.Fatal(err)
			}
			if pos >= len(reg) && (err != nil || len(frames) > 0) {
				t.Fatalf("registry complete, still %v with %d bytes left", err, len(frames))
			}
		}
		if rd.Pending() || rd.Offset() != int64(len(reg)) {
			t.Errorf("registry decoder consumed %d of %d", rd.Offset(), len(reg))
		}
		if diff := cmp.Diff(want, recStrings(got)); diff != "" {
			t.Errorf("round trip (-want +got):\n%s", diff)
		}
	})
}

// canonicalNaN replaces NaN payloads: Java's text formats print every NaN
// as "NaN".
func canonicalNaN(recs []record.Record) []record.Record {
	fix := func(k record.Kind, v record.Value) record.Value {
		switch {
		case k == record.Double && math.IsNaN(v.Double()):
			return record.DoubleValue(math.NaN())
		case k == record.Float && v.Float() != v.Float():
			return record.FloatValue(float32(math.NaN()))
		}
		return v
	}
	out := make([]record.Record, len(recs))
	for i := range recs {
		out[i] = recs[i].Clone()
		for j, f := range out[i].Type.Fields {
			if l := out[i].Values[j].List(); l != nil && f.Array {
				for n := range l.Items {
					l.Items[n] = fix(f.Kind, l.Items[n])
				}
				continue
			}
			out[i].Values[j] = fix(f.Kind, out[i].Values[j])
		}
	}
	return out
}

func TestASCIIRoundTrip(t *testing.T) {
	cat := testCatalog(t)
	recs := genRecords(cat, 24, true)
	var reg Registry
	strs := NewStrings(0)
	var data []byte
	for i := range recs {
		id, isNew := reg.ID(recs[i].Type.Name)
		if isNew {
			if err := strs.Set(id, recs[i].Type.Name); err != nil {
				t.Fatal(err)
			}
		}
		data = AppendLine(data, id, &recs[i])
	}
	got := feedText(NewTextDecoder(TextOptions{Catalog: cat, Strings: strs}), data, whole)
	if got.err != nil {
		t.Fatal(got.err)
	}
	if diff := cmp.Diff(recStrings(canonicalNaN(recs)), recStrings(canonicalNaN(got.recs))); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	chunked := feedText(NewTextDecoder(TextOptions{Catalog: cat, Strings: strs}), data, randomChunks(9, 13))
	if diff := cmp.Diff(recStrings(got.recs), recStrings(chunked.recs)); diff != "" || chunked.err != nil {
		t.Errorf("chunked: %v (-whole +chunked):\n%s", chunked.err, diff)
	}
	// Re-writing what was read reproduces the text.
	var again []byte
	for i := range got.recs {
		id, _ := reg.Lookup(got.recs[i].Type.Name)
		again = AppendLine(again, id, &got.recs[i])
	}
	if !bytes.Equal(again, data) {
		t.Error("write(read(text)) differs from text")
	}
}

func TestEncoderErrors(t *testing.T) {
	cat := record.Builtin()
	split := cat.Lookup(record.SplitEvent)
	e := NewEncoder(EncoderOptions{})
	dst := []byte("keep")
	out, err := e.Append(dst, &record.Record{Type: split, Values: make([]record.Value, 2)})
	if err == nil || !strings.Contains(err.Error(), "2 values where 3 were expected") {
		t.Errorf("error %v", err)
	}
	if string(out) != "keep" || e.Registry().Len() != 0 {
		t.Errorf("failed Append changed dst (%q) or the registry (%d)", out, e.Registry().Len())
	}
	if _, err := e.Append(nil, &record.Record{}); err == nil {
		t.Error("no error for a record without a type")
	}
}

// TestEncoderIDOrder: class name first, then the strings in field order,
// as Kieker 2.0 registers them; a string seen before keeps its id.
func TestEncoderIDOrder(t *testing.T) {
	cat := record.Builtin()
	meta := cat.Lookup(record.KiekerMetadataRecord)
	r := record.Record{Type: meta, LoggingTimestamp: -1, Values: []record.Value{
		record.StringValue("2.0.4-SNAPSHOT"), record.StringValue("KIEKER"), record.StringValue("host"),
		record.IntValue(1), record.BoolValue(false), record.IntValue(0), record.StringValue("KIEKER"), record.IntValue(0)}}
	e := NewEncoder(EncoderOptions{})
	frame, err := e.Append(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	want := []Entry{{0, record.KiekerMetadataRecord}, {1, "2.0.4-SNAPSHOT"}, {2, "KIEKER"}, {3, "host"}}
	if diff := cmp.Diff(want, e.NewEntries()); diff != "" {
		t.Errorf("entries (-want +got):\n%s", diff)
	}
	wantFrame := []byte{
		0, 0, 0, 0, // class id
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // logging timestamp -1
		0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, // version, controllerName, hostname
		0, 0, 0, 1, // experimentId
		0,                      // debugMode
		0, 0, 0, 0, 0, 0, 0, 0, // timeOffset
		0, 0, 0, 2, // timeUnit "KIEKER" again
		0, 0, 0, 0, 0, 0, 0, 0, // numberOfRecords
	}
	if !bytes.Equal(frame, wantFrame) {
		t.Errorf("frame\n got % x\nwant % x", frame, wantFrame)
	}
	// The same bytes as Kieker 2.0's binary log for this record layout.
	inline := NewEncoder(EncoderOptions{Inline: true})
	stream, _ := inline.Append(nil, &r)
	if !bytes.HasPrefix(stream, []byte{0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0, 0x2e}) {
		t.Errorf("inline stream starts % x", stream[:12])
	}
}
