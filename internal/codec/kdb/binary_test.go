package kdb

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// encodeAll encodes records in the binary dialect.
func encodeAll(tb testing.TB, ids []int32, recs []record.Record) []byte {
	tb.Helper()
	var buf []byte
	for i := range recs {
		var err error
		if buf, err = AppendBinary(buf, ids[i], &recs[i]); err != nil {
			tb.Fatalf("record %d (%s): %v", i, recs[i].Type.ShortName(), err)
		}
	}
	return buf
}

func TestBinaryRoundTripAllTypes(t *testing.T) {
	m := allTypesMapping(t)
	if m.Len() != 69 {
		t.Fatalf("%d types mapped, want the 68 built-in ones and test.AllKinds", m.Len())
	}
	ids, recs := sampleRecords(m, false)
	data := encodeAll(t, ids, recs)
	for _, tc := range []struct {
		name   string
		decode func(*Decoder) ([]record.Record, int, error)
	}{
		{"whole", func(d *Decoder) ([]record.Record, int, error) { return whole(d, data) }},
		{"byte by byte", func(d *Decoder) ([]record.Record, int, error) { return chunked(d, data, byteByByte) }},
		{"random chunks", func(d *Decoder) ([]record.Record, int, error) { return chunked(d, data, randomChunks(1)) }},
		{"random chunks 2", func(d *Decoder) ([]record.Record, int, error) { return chunked(d, data, randomChunks(2)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(m, Options{})
			got, n, err := tc.decode(d)
			if err != nil || n != len(data) {
				t.Fatalf("consumed %d of %d bytes, error %v", n, len(data), err)
			}
			if diff := cmp.Diff(recs, got, cmpOpts); diff != "" {
				t.Fatalf("decode(encode(r)) (-want +got):\n%s", diff)
			}
			if d.Offset() != int64(len(data)) || d.Pending() != 0 {
				t.Fatalf("offset %d, pending %d", d.Offset(), d.Pending())
			}
		})
	}
}

func TestBinaryPerlRecords(t *testing.T) {
	m := perlMapping(t)
	td := NewTextDecoder(m, Options{})
	var b record.Batch
	var ids []int32
	for _, msg := range perlMessages(t) {
		if _, err := td.DecodeMessage(msg, &b); err != nil {
			t.Fatal(err)
		}
		id, _ := m.ID(b.Records[b.Len()-1].Type)
		ids = append(ids, id)
	}
	data := encodeAll(t, ids, b.Records)
	for seed := range uint64(4) {
		got, n, err := chunked(NewDecoder(m, Options{}), data, randomChunks(seed))
		if err != nil || n != len(data) {
			t.Fatalf("consumed %d of %d, %v", n, len(data), err)
		}
		if diff := cmp.Diff(b.Records, got, cmpOpts); diff != "" {
			t.Fatalf("(-want +got):\n%s", diff)
		}
	}
}

// be builds binary input: int32, int64 and string pieces.
type be []byte

func (b be) i32(v int32) be  { return binary.BigEndian.AppendUint32(b, uint32(v)) }
func (b be) i64(v int64) be  { return binary.BigEndian.AppendUint64(b, uint64(v)) }
func (b be) str(s string) be { return append(b.i32(int32(len(s))), s...) }
func (b be) raw(p ...byte) be {
	return append(b, p...)
}

// before is a BeforeOperationEvent (id 1 of the default mapping).
func before(op string) be {
	return be{}.i32(1).i64(1000).i64(11727).i32(0).str(op).str("realclients.perl.Bookstore")
}

func TestBinaryDecode(t *testing.T) {
	cat := record.Builtin()
	m, err := DefaultMapping(cat)
	if err != nil {
		t.Fatal(err)
	}
	metadata := be{}.i32(13).str("2.0.3").str("KIEKER").str("vm").i32(7).raw(2).i64(0).str("NANOSECONDS").i64(5)
	got, n, err := whole(NewDecoder(m, Options{}), metadata)
	if err != nil || n != len(metadata) || len(got) != 1 {
		t.Fatalf("%d records, %d bytes, %v", len(got), n, err)
	}
	r := got[0]
	if r.Type.Name != record.KiekerMetadataRecord || r.LoggingTimestamp != record.NoTimestamp {
		t.Fatalf("record %s, timestamp %d", r.Type.Name, r.LoggingTimestamp)
	}
	for name, want := range map[string]string{"version": "2.0.3", "hostname": "vm", "debugMode": "true", "experimentId": "7", "timeUnit": "NANOSECONDS", "numberOfRecords": "5"} {
		v, _ := r.Field(name)
		if got := v.Format(r.Type.Fields[r.Type.FieldIndex(name)].Kind); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if v, _ := r.Field("debugMode"); v.Int() != 1 {
		t.Errorf("boolean byte 2 decoded as %d, want 1 (true)", v.Int())
	}

	// Strings are interned per decoder: equal strings are one allocation.
	in := &record.Interner{}
	d := NewDecoder(m, Options{Interner: in})
	var b record.Batch
	two := append(before("search_book"), be{}.i32(2).i64(1001).i64(11727).i32(1).str("search_book").str("realclients.perl.Bookstore")...)
	if _, err := d.Decode(two, &b); err != nil || b.Len() != 2 {
		t.Fatal(err)
	}
	s1, _ := b.Records[0].Field("operationSignature")
	s2, _ := b.Records[1].Field("operationSignature")
	if s1.Str() != "search_book" || !sameString(s1.Str(), s2.Str()) {
		t.Fatal("repeated string not interned")
	}
	if in.Len() != 2 {
		t.Fatalf("the given interner holds %d strings, want 2", in.Len())
	}
}

// sameString reports whether a and b share their bytes.
func sameString(a, b string) bool {
	return a == b && unsafe.StringData(a) == unsafe.StringData(b)
}

func TestBinaryErrors(t *testing.T) {
	m := defaultMapping(t)
	good := before("op")
	update := func(count int32) be { // remotecontrol.UpdateParameterEvent, mapped to 20 below
		return be{}.i32(20).str("pattern").str("name").i32(count)
	}
	types := map[int32]*record.Type{1: m.Type(1), 20: record.Builtin().Lookup(record.Prefix + "remotecontrol.UpdateParameterEvent"), 21: allKinds}
	arrays, err := NewMapping(types)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		m       *Mapping
		opts    Options
		data    []byte
		records int
		want    string
		is      error
	}{
		{"unknown id", m, Options{}, append(append([]byte{}, good...), be{}.i32(77).i64(1)...), 1,
			fmt.Sprintf("offset %d: unknown type id 77", len(good)), ErrUnknownID},
		{"unknown id 0", m, Options{}, be{}.i32(0), 0, "offset 0: unknown type id 0", ErrUnknownID},
		{"negative string length", m, Options{}, be{}.i32(1).i64(1).i64(2).i32(3).i32(-3).raw(1, 2, 3), 0,
			"offset 0: BeforeOperationEvent field operationSignature: string length -3", ErrInvalid},
		{"string over the limit", m, Options{}, append(append([]byte{}, good...), be{}.i32(1).i64(1).i64(2).i32(3).str("a").i32(math.MaxInt32)...), 1,
			fmt.Sprintf("offset %d: BeforeOperationEvent field classSignature: string length 2147483647 over the limit 65536", len(good)), ErrLimit},
		{"string over a configured limit", m, Options{MaxStringLen: 4}, be{}.i32(1).i64(1).i64(2).i32(3).str("abcde"), 0,
			"offset 0: BeforeOperationEvent field operationSignature: string length 5 over the limit 4", ErrLimit},
		{"string at a configured limit", m, Options{MaxStringLen: 26}, good, 1, "<nil>", nil},
		{"record over the limit", m, Options{MaxRecordSize: 40}, be{}.i32(1).i64(1).i64(2).i32(3).str("0123456789").str("0123456789"), 0,
			"offset 0: BeforeOperationEvent field classSignature: record size 52 over the limit 40", ErrLimit},
		{"fixed-size record over the limit", m, Options{MaxRecordSize: 10}, be{}.i32(8), 0,
			"offset 0: SplitEvent: record size 24 over the limit 10", ErrLimit},
		{"negative array length", arrays, Options{}, update(-1), 0,
			"offset 0: UpdateParameterEvent field values: array length -1", ErrInvalid},
		{"array over the limit", arrays, Options{MaxArrayLen: 2}, update(3), 0,
			"offset 0: UpdateParameterEvent field values: array length 3 over the limit 2", ErrLimit},
		{"array element string", arrays, Options{}, update(2).str("a").i32(-9), 0,
			"offset 0: UpdateParameterEvent field values: string length -9", ErrInvalid},
		{"fixed-size array over the record limit", arrays, Options{MaxRecordSize: 1000},
			be{}.i32(21).raw(make([]byte, 1+1+2+2+4+8+4+8)...).str("").i32(0).i32(0).i32(0).i32(0).i32(0).i32(200), 0,
			"offset 0: AllKinds field la: record size 1662 over the limit 1000", ErrLimit},
		{"truncated id", m, Options{}, append(append([]byte{}, good...), 0, 0), 1,
			fmt.Sprintf("offset %d: stream ends inside a record after 2 of its bytes", len(good)), ErrTruncated},
		{"truncated string", m, Options{}, good[:len(good)-1], 0,
			fmt.Sprintf("offset 0: BeforeOperationEvent: stream ends inside a record after %d of its bytes", len(good)-1), ErrTruncated},
		{"truncated array", arrays, Options{}, update(2).str("a"), 0,
			fmt.Sprintf("offset 0: UpdateParameterEvent: stream ends inside a record after %d of its bytes", len(update(2).str("a"))), ErrTruncated},
		{"empty stream", m, Options{}, nil, 0, "<nil>", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, mode := range []string{"whole", "byte by byte", "random"} {
				d := NewDecoder(tc.m, tc.opts)
				var (
					got []record.Record
					n   int
					err error
				)
				switch mode {
				case "whole":
					got, n, err = whole(d, tc.data)
				case "byte by byte":
					got, n, err = chunked(d, tc.data, byteByByte)
				default:
					got, n, err = chunked(d, tc.data, randomChunks(3))
				}
				if errString(err) != tc.want || !errors.Is(err, tc.is) && tc.is != nil {
					t.Fatalf("%s: error %q, want %q (%v)", mode, errString(err), tc.want, tc.is)
				}
				if len(got) != tc.records {
					t.Fatalf("%s: %d records before the error, want %d", mode, len(got), tc.records)
				}
				var e *Error
				if err != nil && (!errors.As(err, &e) || e.Offset != int64(n) && !errors.Is(err, ErrTruncated)) {
					t.Fatalf("%s: consumed %d, error %#v", mode, n, err)
				}
				if err != nil && !errors.Is(err, ErrTruncated) {
					// The error is final.
					var b record.Batch
					if n2, err2 := d.Decode(good, &b); n2 != 0 || err2 != err || b.Len() != 0 || d.Err() != err || d.End() != err {
						t.Fatalf("%s: error not sticky: %d, %v", mode, n2, err2)
					}
				}
			}
		})
	}
}

func TestBinaryPending(t *testing.T) {
	m := defaultMapping(t)
	d := NewDecoder(m, Options{})
	var b record.Batch
	data := append(before("a"), before("b")...)
	half := len(data) - 5
	n, err := d.Decode(data[:half], &b)
	if err != nil || n != len(before("a")) || b.Len() != 1 {
		t.Fatalf("first half: %d bytes, %d records, %v", n, b.Len(), err)
	}
	if d.Pending() != half-n || d.Offset() != int64(n) {
		t.Fatalf("pending %d, offset %d", d.Pending(), d.Offset())
	}
	if err := d.End(); !errors.Is(err, ErrTruncated) {
		t.Fatalf("End with a partial record: %v", err)
	}
	// A call with too few new bytes does not re-measure, and still reports.
	if n, err := d.Decode(data[n:half+1], &b); n != 0 || err != nil || d.Pending() != half+1-len(before("a")) {
		t.Fatalf("short call: %d, %v, pending %d", n, err, d.Pending())
	}
	n2, err := d.Decode(data[n:], &b)
	if err != nil || n2 != len(data)-n || b.Len() != 2 || d.Pending() != 0 || d.End() != nil {
		t.Fatalf("rest: %d, %v, %d records, pending %d, end %v", n2, err, b.Len(), d.Pending(), d.End())
	}
}

func TestEncodeErrors(t *testing.T) {
	cat := record.Builtin()
	m, _ := DefaultMapping(cat)
	bt := cat.Lookup(record.BeforeOperationEvent)
	rec := func(t *record.Type, vals ...record.Value) *record.Record {
		return &record.Record{Type: t, LoggingTimestamp: -1, Values: vals}
	}
	okBefore := rec(bt, record.IntValue(1), record.IntValue(2), record.IntValue(3), record.StringValue("op"), record.StringValue("cls"))
	withKinds := func(i int, v record.Value) *record.Record {
		r := sampleRecord(allKinds, 1, true)
		r.Values[i] = v
		return &r
	}
	for _, tc := range []struct {
		name string
		enc  *Encoder
		r    *record.Record
		want string
		is   error
	}{
		{"long string", NewEncoder(m, Options{}), rec(bt, record.IntValue(1), record.IntValue(2), record.IntValue(3), record.StringValue(strings.Repeat("x", 65537)), record.StringValue("")),
			"encode: BeforeOperationEvent field operationSignature: string length 65537 over the limit 65536", ErrLimit},
		{"configured string limit", NewEncoder(m, Options{MaxStringLen: 2}), okBefore,
			"encode: BeforeOperationEvent field classSignature: string length 3 over the limit 2", ErrLimit},
		{"record size", NewEncoder(m, Options{MaxRecordSize: 20}), okBefore,
			"encode: BeforeOperationEvent: record size 37 over the limit 20", ErrLimit},
		{"values", NewEncoder(m, Options{}), rec(bt, record.IntValue(1)),
			"encode: BeforeOperationEvent: 1 values for 5 fields", ErrInvalid},
		{"no type", NewEncoder(m, Options{}), &record.Record{}, "encode: record class <nil> has no id", ErrUnmapped},
		{"unmapped", NewEncoder(m, Options{}), rec(cat.Lookup(record.Prefix + "misc.EmptyRecord")),
			"encode: record class kieker.common.record.misc.EmptyRecord has no id", ErrUnmapped},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dst := []byte("keep")
			for _, enc := range []func([]byte, *record.Record) ([]byte, error){tc.enc.AppendBinary, tc.enc.AppendText} {
				out, err := enc(dst, tc.r)
				if tc.name == "record size" && err == nil { // text has no record limit
					continue
				}
				if errString(err) != tc.want || !errors.Is(err, tc.is) || string(out) != "keep" {
					t.Fatalf("error %q, want %q; dst %q", errString(err), tc.want, out)
				}
			}
		})
	}
	for _, tc := range []struct {
		name  string
		field int
		v     record.Value
		want  string
	}{
		{"byte range", 1, record.IntValue(128), "encode: AllKinds field y: value 128 out of the byte range"},
		{"short range", 2, record.IntValue(-32769), "encode: AllKinds field s: value -32769 out of the short range"},
		{"char range", 3, record.IntValue(-1), "encode: AllKinds field c: value -1 out of the char range"},
		{"int range", 4, record.IntValue(1 << 31), "encode: AllKinds field i: value 2147483648 out of the int range"},
		{"array kind", 9, record.ListValue(record.Int, nil), "encode: AllKinds field ba: array of int where boolean[] was expected"},
		{"array element", 10, record.ListValue(record.Byte, []record.Value{record.IntValue(1000)}), "encode: AllKinds field ya: value 1000 out of the byte range"},
		{"array length", 17, record.ListValue(record.String, make([]record.Value, DefaultMaxArrayLen+1)), "encode: AllKinds field stra: array length 65537 over the limit 65536"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := withKinds(tc.field, tc.v)
			if _, err := AppendBinary(nil, allKindsID, r); errString(err) != tc.want {
				t.Fatalf("binary: %q, want %q", errString(err), tc.want)
			}
			if _, err := AppendText(nil, allKindsID, r); errString(err) != tc.want {
				t.Fatalf("text: %q, want %q", errString(err), tc.want)
			}
		})
	}
	// A zero Value is an empty array.
	r := withKinds(17, record.Value{})
	data, err := AppendBinary(nil, allKindsID, r)
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := whole(NewDecoder(allTypesMapping(t), Options{}), data)
	if err != nil || got[0].Values[17].List() == nil || len(got[0].Values[17].List().Items) != 0 {
		t.Fatalf("zero array value: %v, %v", got, err)
	}
}

// eventStream returns n Before/After events in the binary dialect with
// realistic, repeating signatures.
func eventStream(tb testing.TB, m *Mapping, n int) []byte {
	tb.Helper()
	cat := record.Builtin()
	bt, at := cat.Lookup(record.BeforeOperationEvent), cat.Lookup(record.AfterOperationEvent)
	enc := NewEncoder(m, Options{})
	var data []byte
	for i := range n {
		typ := bt
		if i%2 == 1 {
			typ = at
		}
		op := fmt.Sprintf("public void org.example.shop.Service%d.handleRequest%d(java.lang.String)", i/8%5, i/2%20)
		r := record.Record{Type: typ, LoggingTimestamp: -1, Values: []record.Value{
			record.IntValue(1795312705697789000 + int64(i)*1000), record.IntValue(11727 + int64(i/100)), record.IntValue(int64(i % 100)),
			record.StringValue(op), record.StringValue(fmt.Sprintf("org.example.shop.Service%d", i/8%5)),
		}}
		var err error
		if data, err = enc.AppendBinary(data, &r); err != nil {
			tb.Fatal(err)
		}
	}
	return data
}

func BenchmarkBinaryDecode(b *testing.B) {
	m := defaultMapping(b)
	const n = 1000
	data := eventStream(b, m, n)
	d := NewDecoder(m, Options{})
	var batch record.Batch
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		batch.Reset()
		if _, err := d.Decode(data, &batch); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/float64(b.N*n), "allocs/record")
}

func BenchmarkBinaryEncode(b *testing.B) {
	m := defaultMapping(b)
	const n = 1000
	data := eventStream(b, m, n)
	var batch record.Batch
	if _, err := NewDecoder(m, Options{}).Decode(data, &batch); err != nil {
		b.Fatal(err)
	}
	enc := NewEncoder(m, Options{})
	buf := make([]byte, 0, len(data))
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		buf = buf[:0]
		for i := range batch.Records {
			var err error
			if buf, err = enc.AppendBinary(buf, &batch.Records[i]); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/record")
}

func FuzzBinaryDecode(f *testing.F) {
	m := allTypesMapping(f)
	ids, recs := sampleRecords(m, false)
	for i := range recs {
		data, err := AppendBinary(nil, ids[i], &recs[i])
		if err == nil && len(data) <= 2048 {
			f.Add(data)
		}
	}
	// Real records: the Perl probes' run, re-encoded in the binary dialect.
	var b record.Batch
	perlIDs := map[string]int32{}
	for _, id := range m.IDs() {
		perlIDs[m.Type(id).Name] = id
	}
	pm := perlMapping(f)
	ptd := NewTextDecoder(pm, Options{})
	for _, msg := range perlMessages(f)[:20] {
		if _, err := ptd.DecodeMessage(msg, &b); err != nil {
			f.Fatal(err)
		}
	}
	var stream []byte
	for i := range b.Records {
		var err error
		if stream, err = AppendBinary(stream, perlIDs[b.Records[i].Type.Name], &b.Records[i]); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(stream)
	f.Add(stream[:len(stream)-3])
	// Bytes of other formats: Kieker's own TCP streams.
	for _, name := range []string{"java-tcp.bin", "python-tcp.bin", "c-tcp.bin"} {
		data := testcorpus.Read(f, "kieker-streams", name)
		f.Add(data[:min(len(data), 512)])
	}
	f.Add([]byte(be{}.i32(1).i64(1).i64(2).i32(3).i32(-3)))
	f.Add([]byte(be{}.i32(allKindsID).raw(make([]byte, 29)...).str("").i32(2).raw(1, 0).i32(-1)))

	opts := Options{MaxStringLen: 1200, MaxArrayLen: 16, MaxRecordSize: 4096}
	f.Fuzz(func(t *testing.T, data []byte) {
		want, wantN, wantErr := whole(NewDecoder(m, opts), data)
		for _, tc := range []struct {
			name string
			size func() int
		}{
			{"byte by byte", byteByByte},
			{"random", randomChunks(uint64(len(data)))},
			{"halves", func() int { return len(data)/2 + 1 }},
		} {
			got, n, err := chunked(NewDecoder(m, opts), data, tc.size)
			if errString(err) != errString(wantErr) || n != wantN {
				t.Fatalf("%s: %d bytes, error %q; whole: %d bytes, error %q", tc.name, n, errString(err), wantN, errString(wantErr))
			}
			if diff := diffRecords(want, got); diff != "" {
				t.Fatalf("%s (-whole +chunked):\n%s", tc.name, diff)
			}
		}
		// Round trip: what was decoded encodes and decodes to the same.
		enc := NewEncoder(m, opts)
		var again []byte
		for i := range want {
			var err error
			if again, err = enc.AppendBinary(again, &want[i]); err != nil {
				t.Fatalf("re-encoding record %d: %v", i, err)
			}
		}
		got, n, err := whole(NewDecoder(m, opts), again)
		if err != nil || n != len(again) {
			t.Fatalf("re-decoding: %d of %d bytes, %v", n, len(again), err)
		}
		if diff := diffRecords(want, got); diff != "" {
			t.Fatalf("round trip (-first +second):\n%s", diff)
		}
	})
}
