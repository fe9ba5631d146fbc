package streammsg

import (
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/record"
)

var allKinds = record.MustType("t.AllKinds",
	record.Field{Name: "b", Kind: record.Bool},
	record.Field{Name: "y", Kind: record.Byte},
	record.Field{Name: "s", Kind: record.Short},
	record.Field{Name: "i", Kind: record.Int},
	record.Field{Name: "l", Kind: record.Long},
	record.Field{Name: "f", Kind: record.Float},
	record.Field{Name: "d", Kind: record.Double},
	record.Field{Name: "c", Kind: record.Char},
	record.Field{Name: "str", Kind: record.String},
	record.Field{Name: "strs", Kind: record.String, Array: true},
	record.Field{Name: "longs", Kind: record.Long, Array: true},
)

var other = record.MustType("t.Other", record.Field{Name: "x", Kind: record.Long})

// sample returns a batch of records of allKinds and other, interleaved.
func sample() *record.Batch {
	b := &record.Batch{}
	for i := range 6 {
		if i%3 == 2 {
			r := b.Add(other, -1)
			r.Values[0] = record.IntValue(int64(i))
			continue
		}
		r := b.Add(allKinds, int64(1e18)+int64(i))
		v := r.Values
		v[0] = record.BoolValue(i%2 == 0)
		v[1] = record.IntValue(-128 + int64(i))
		v[2] = record.IntValue(-32768)
		v[3] = record.IntValue(math.MinInt32)
		v[4] = record.IntValue(math.MaxInt64 - int64(i))
		v[5] = record.FloatValue(float32(math.Inf(-1)))
		v[6] = record.DoubleValue(math.NaN())
		if i == 1 {
			v[5] = record.FloatValue(0.1)
			v[6] = record.DoubleValue(-0.25)
		}
		v[7] = record.IntValue('é')
		v[8] = record.StringValue("public void a.B.c(\"x\")\n\x01é")
		v[9] = b.NewList(record.String, 2)
		v[9].List().Items[0] = record.StringValue("a.B")
		v[9].List().Items[1] = record.StringValue("")
		v[10] = b.NewList(record.Long, 0)
	}
	return b
}

// parts splits b by type as the sink does: part 0 allKinds, part 1 other.
func parts(b *record.Batch) []Header {
	var pos [2][]uint32
	for i := range b.Records {
		k := 0
		if b.Records[i].Type == other {
			k = 1
		}
		pos[k] = append(pos[k], uint32(i))
	}
	refs := []PartRef{{TypeID: 1, Host: "web-1"}, {TypeID: 2, Host: "web-1"}}
	var out []Header
	for k := range 2 {
		out = append(out, Header{Run: 3, Meta: 7, Time: 1700000000123456789, Ordinal: 1000, BatchRecords: uint32(b.Len()),
			Index: uint32(k), Parts: refs, SubjectOrdinal: uint64(10 * k), Lost: 5,
			Origin:    record.Origin{Receiver: "kieker-tcp", Peer: "127.0.0.1:5555", Host: "web-1", Service: "shop", Session: "3"},
			Positions: pos[k], Count: len(pos[k])})
	}
	return out
}

func TestRoundTrip(t *testing.T) {
	for _, form := range []string{"binary", "json"} {
		t.Run(form, func(t *testing.T) { roundTrip(t, form, sample()) })
	}
}

// TestNullStrings: a null string (JFR's null, record.NullString) stays
// null through both forms, apart from "", as a field and as an array
// item; a binary message with one is format version 2, one without stays
// version 1; JSON says null.
func TestNullStrings(t *testing.T) {
	withNulls := func() *record.Batch {
		b := sample()
		b.Records[0].Values[8] = record.NullString()
		b.Records[0].Values[9].List().Items[0] = record.NullString() // Items[1] is ""
		b.Records[1].Values[8] = record.StringValue("")
		return b
	}
	for _, form := range []string{"binary", "json"} {
		t.Run(form, func(t *testing.T) {
			got := roundTrip(t, form, withNulls())
			if v := got[0].Values[8]; !v.IsNull() {
				t.Errorf("null field read as %q (not null)", v.Str())
			}
			if items := got[0].Values[9].List().Items; !items[0].IsNull() || items[1].IsNull() {
				t.Errorf("array items: null %v, empty %v", items[0].IsNull(), items[1].IsNull())
			}
			if v := got[1].Values[8]; v.IsNull() || v.Str() != "" {
				t.Errorf("an empty string read as null")
			}
		})
	}
	var enc Encoder
	h := parts(withNulls())[0]
	if msg := enc.AppendBinary([]byte("prefix"), &h, withNulls().Records); string(msg[:6]) != "prefix" || msg[8] != nullVersion {
		t.Errorf("a message with null strings: %q…, want version %d after the prefix", msg[:9], nullVersion)
	}
	if msg := enc.AppendBinary(nil, &h, sample().Records); msg[2] != 1 {
		t.Errorf("a message without null strings has version %d, want 1", msg[2])
	}
	if msg := enc.AppendJSON(nil, &h, withNulls().Records); !strings.Contains(string(msg), `"str":null`) {
		t.Errorf("JSON without null: %s", msg)
	}
}

// roundTrip encodes b's parts in form, decodes them and checks that the
// batch comes back as it was; it returns the records read, in b's order.
func roundTrip(t *testing.T, form string, b *record.Batch) []record.Record {
	t.Helper()
	var enc Encoder
	var m Message
	got := &record.Batch{}
	var positions []uint32
	for _, h := range parts(b) {
		var msg []byte
		if form == "json" {
			msg = enc.AppendJSON(nil, &h, b.Records)
			if !json.Valid(msg) {
				t.Fatalf("invalid JSON: %s", msg)
			}
		} else {
			msg = enc.AppendBinary(nil, &h, b.Records)
		}
		if err := m.Parse(msg); err != nil {
			t.Fatal(err)
		}
		want := h
		want.JSON = form == "json"
		if diff := cmp.Diff(want, m.Header); diff != "" {
			t.Fatalf("header (-want +got):\n%s", diff)
		}
		typ := allKinds
		if m.TypeID() == 2 {
			typ = other
		}
		if err := m.Records(typ, got, &record.Interner{}); err != nil {
			t.Fatal(err)
		}
		positions = append(positions, m.Positions...)
	}
	// Put the batch back in order.
	ordered := make([]record.Record, b.Len())
	for i, p := range positions {
		ordered[p] = got.Records[i]
	}
	for i := range b.Records {
		if !equalNaN(&b.Records[i], &ordered[i]) {
			t.Errorf("record %d:\n got %v\nwant %v", i, ordered[i].Values, b.Records[i].Values)
		}
	}
	return ordered
}

// equalNaN is Record.Equal, except that a NaN double equals any NaN
// (JSON keeps no NaN payload).
func equalNaN(a, b *record.Record) bool {
	if a.Equal(b) {
		return true
	}
	if a.Type != b.Type || a.LoggingTimestamp != b.LoggingTimestamp {
		return false
	}
	for i, f := range a.Type.Fields {
		if f.Kind == record.Double && !f.Array && math.IsNaN(a.Values[i].Double()) && math.IsNaN(b.Values[i].Double()) {
			continue
		}
		if !a.Values[i].Equal(b.Values[i]) {
			return false
		}
	}
	return true
}

func TestSinglePartHasNoPositions(t *testing.T) {
	b := &record.Batch{}
	for i := range 3 {
		b.Add(other, int64(i)).Values[0] = record.IntValue(int64(i * i))
	}
	h := Header{Run: 1, Meta: 1, BatchRecords: 3, Parts: []PartRef{{TypeID: 9}}, Count: 3}
	var enc Encoder
	for _, msg := range [][]byte{enc.AppendBinary(nil, &h, b.Records), enc.AppendJSON(nil, &h, b.Records)} {
		var m Message
		if err := m.Parse(msg); err != nil {
			t.Fatal(err)
		}
		if m.Positions != nil || m.Position(2) != 2 || m.Origin.Host != "" {
			t.Fatalf("positions %v, host %q", m.Positions, m.Origin.Host)
		}
		got := &record.Batch{}
		if err := m.Records(other, got, nil); err != nil {
			t.Fatal(err)
		}
		for i := range b.Records {
			if !got.Records[i].Equal(&b.Records[i]) {
				t.Fatalf("record %d", i)
			}
		}
	}
	if s := string(enc.AppendJSON(nil, &h, b.Records)); strings.Contains(s, "positions") {
		t.Fatalf("positions in %s", s)
	}
}

func TestMalformed(t *testing.T) {
	b := sample()
	var enc Encoder
	h := parts(b)[0]
	good := enc.AppendBinary(nil, &h, b.Records)
	var m Message
	for name, msg := range map[string][]byte{
		"empty":      nil,
		"not ours":   []byte("hello"),
		"version 2":  {'T', 'B', 2},
		"cut header": good[:10],
		"json":       []byte(`{"format":"x"}`),
	} {
		if err := m.Parse(msg); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := m.Parse(good); err != nil {
		t.Fatal(err)
	}
	if err := m.Records(other, &record.Batch{}, nil); !errors.Is(err, ErrMalformed) {
		t.Errorf("wrong type: %v", err)
	}
	if err := m.Parse(good[:len(good)-1]); err != nil {
		t.Fatal(err)
	}
	got := &record.Batch{}
	if err := m.Records(allKinds, got, nil); !errors.Is(err, ErrMalformed) || got.Len() != 0 {
		t.Errorf("cut body: %v, %d records", err, got.Len())
	}
}

func TestTokens(t *testing.T) {
	for _, tc := range []struct{ in, tok string }{
		{"kieker.common.record.flow.trace.TraceMetadata", "kieker_common_record_flow_trace_TraceMetadata"},
		{"web-01.example.com", "web-01_example_com"},
		{"my_host", "my%5Fhost"},
		{"a b*c>d%", "a%20b%2Ac%3Ed%25"},
		{"-", "%2D"},
		{"Outer$Inner", "Outer%24Inner"},
		{"é", "%C3%A9"},
	} {
		if got := EscapeToken(tc.in); got != tc.tok {
			t.Errorf("EscapeToken(%q) = %q, want %q", tc.in, got, tc.tok)
		}
		back, err := UnescapeToken(tc.tok)
		if err != nil || back != tc.in {
			t.Errorf("UnescapeToken(%q) = %q, %v", tc.tok, back, err)
		}
	}
	if h := HostToken(""); h != NoHost {
		t.Errorf("HostToken(\"\") = %q", h)
	}
	for _, bad := range []string{"a%", "a%4", "a%zz", "a.b", "a*"} {
		if _, err := UnescapeToken(bad); err == nil {
			t.Errorf("UnescapeToken(%q) accepted", bad)
		}
	}
	s := Subjects{}
	if got := s.Records("h.x", "a.B"); got != "tracebridge.records.h_x.a_B" {
		t.Errorf("Records: %s", got)
	}
	if s.Stream() != "TRACEBRIDGE" || (Subjects{Prefix: "tb.eu-1"}).MetaStream() != "TB_EU_1_META" {
		t.Errorf("stream names %s %s", s.Stream(), (Subjects{Prefix: "tb.eu-1"}).MetaStream())
	}
}

func TestMatchSubject(t *testing.T) {
	for _, tc := range []struct {
		f, s string
		want bool
	}{
		{"a.b.c", "a.b.c", true},
		{"a.*.c", "a.b.c", true},
		{"a.*", "a.b.c", false},
		{"a.>", "a.b.c", true},
		{"a.>", "a", false},
		{"a.b", "a.b.c", false},
		{"a.b.c", "a.b", false},
		{"*.*.*", "a.b.c", true},
	} {
		if got := MatchSubject(tc.f, tc.s); got != tc.want {
			t.Errorf("MatchSubject(%q, %q) = %v", tc.f, tc.s, got)
		}
	}
}

func TestTypeInfo(t *testing.T) {
	ti := NewTypeInfo(4, allKinds)
	got, err := ti.Type(nil)
	if err != nil || !got.SameFields(allKinds) || got.Name != allKinds.Name {
		t.Fatalf("%v %v", got, err)
	}
	cat := record.Builtin()
	bt := cat.Lookup(record.BeforeOperationEvent)
	ti = NewTypeInfo(1, bt)
	if got, _ := ti.Type(cat); got != bt {
		t.Fatal("the catalogue's type not reused")
	}
	ti.Fields[0].Kind = "nope"
	if _, err := ti.Type(nil); err == nil {
		t.Fatal("bad kind accepted")
	}
}
