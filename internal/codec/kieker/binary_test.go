package kieker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/record"
)

func be32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// splitFrame is a SplitEvent frame (timestamp, traceId, orderIndex) with
// class id cid.
func splitFrame(cid int32) []byte {
	return cat(be32(cid), make([]byte, 8), make([]byte, 8), make([]byte, 8), be32(7))
}

func TestDecoderErrors(t *testing.T) {
	base := func() *Strings {
		s := NewStrings(0)
		for id, name := range []string{record.SplitEvent, record.BeforeOperationEvent, "kieker.foo.Bar", "op",
			record.Prefix + "remotecontrol.UpdateParameterEvent"} {
			if err := s.Set(int32(id), name); err != nil {
				t.Fatal(err)
			}
		}
		return s
	}
	good := splitFrame(0)
	before := cat(be32(1), make([]byte, 8), make([]byte, 8), make([]byte, 8), be32(1), be32(3), be32(3))
	tests := []struct {
		name    string
		opts    Options
		data    []byte
		records int
		msg     string
		kinds   []error
	}{
		{"unknown class id", Options{}, cat(good, splitFrame(17)), 1,
			"offset 32: unknown string id 17 (class name of record)", []error{ErrUnknownString}},
		{"class not in catalogue", Options{}, cat(good, good, splitFrame(2)), 2,
			"offset 64: class id 2 names kieker.foo.Bar, which is not in the catalogue", []error{ErrUnknownType}},
		{"unknown field string", Options{}, cat(good, before[:len(before)-4], be32(9)), 1,
			"offset 32: string id 9 not registered (field classSignature of kieker.common.record.flow.trace.operation.BeforeOperationEvent)", []error{ErrUnknownString}},
		{"negative array length", Options{}, cat(good, be32(4), make([]byte, 8), be32(3), be32(3), be32(-1)), 1,
			"offset 32: array length -1 (field values of kieker.common.record.remotecontrol.UpdateParameterEvent)", []error{ErrMalformed}},
		{"array over limit", Options{MaxArrayLen: 2}, cat(be32(4), make([]byte, 8), be32(3), be32(3), be32(3)), 0,
			"offset 0: array length 3 over the limit 2 (field values of kieker.common.record.remotecontrol.UpdateParameterEvent)", []error{ErrLimit}},
		{"unknown array element", Options{}, cat(be32(4), make([]byte, 8), be32(3), be32(3), be32(2), be32(3), be32(99)), 0,
			"offset 0: string id 99 not registered (field values of kieker.common.record.remotecontrol.UpdateParameterEvent)", []error{ErrUnknownString}},
		{"registry entry in a file", Options{}, cat(good, be32(-1), be32(5), be32(1), []byte("x")), 1,
			"offset 32: class id -1 (a registry entry marker, valid only in single-socket TCP streams)", []error{ErrMalformed}},
		{"negative class id", Options{Inline: true}, cat(good, be32(-2)), 1,
			"offset 32: negative class id -2", []error{ErrMalformed}},
		{"negative string length", Options{Inline: true}, cat(be32(-1), be32(5), be32(-3)), 0,
			"offset 0: registry entry for id 5: string length -3 is negative", []error{ErrMalformed}},
		{"string over limit", Options{Inline: true, MaxStringLen: 4}, cat(be32(-1), be32(5), be32(2147483647)), 0,
			"offset 0: registry entry for id 5: string length 2147483647 over the limit 4", []error{ErrLimit}},
		{"conflicting entry", Options{Inline: true}, cat(be32(-1), be32(3), be32(1), []byte("x")), 0,
			`offset 0: registry entry: string id 3 already registered as "op", not "x"`, []error{ErrConflict}},
		{"invalid UTF-8", Options{Inline: true}, cat(good, be32(-1), be32(5), be32(2), []byte{0xff, 'a'}), 1,
			"offset 32: registry entry for id 5: its 2 bytes are not valid UTF-8", []error{ErrMalformed}},
		{"registry full", Options{Inline: true, Strings: NewStrings(5)}, cat(be32(-1), be32(5), be32(1), []byte("x")), 0,
			"offset 0: registry entry: string id 5: registry holds 5 entries, the limit", []error{ErrLimit}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.opts
			if o.Strings == nil {
				o.Strings = base()
			} else {
				for id, s := range base().All() {
					if err := o.Strings.Set(id, s); err != nil {
						t.Fatal(err)
					}
				}
			}
			newDecoder := func() *Decoder {
				o2 := o
				o2.Strings = NewStrings(o.Strings.max)
				for id, s := range o.Strings.All() {
					_ = o2.Strings.Set(id, s)
				}
				return NewDecoder(o2)
			}
			res := checkChunking(t, newDecoder, tt.data)
			if res.err == nil {
				t.Fatalf("no error; %d records", len(res.recs))
			}
			if got := res.err.Error(); !strings.HasPrefix(got, tt.msg) {
				t.Errorf("error\n got %s\nwant %s…", got, tt.msg)
			}
			for _, k := range tt.kinds {
				if !errors.Is(res.err, k) {
					t.Errorf("error %v is not %v", res.err, k)
				}
			}
			if len(res.recs) != tt.records {
				t.Errorf("%d records before the error, want %d", len(res.recs), tt.records)
			}
			// Sticky: the same error again, nothing consumed.
			d := newDecoder()
			var b record.Batch
			_, err1 := d.Decode(tt.data, &b)
			n, err2 := d.Decode(tt.data, &b)
			if n != 0 || err2 == nil || err1.Error() != err2.Error() || d.Err() == nil {
				t.Errorf("second call: n=%d err=%v, want the sticky %v", n, err2, err1)
			}
		})
	}
}

func TestDecoderOffsetsAcrossCalls(t *testing.T) {
	s := NewStrings(0)
	_ = s.Set(0, record.SplitEvent)
	d := NewDecoder(Options{Strings: s})
	var b record.Batch
	frame := splitFrame(0)
	two := cat(frame, frame[:10])
	n, err := d.Decode(two, &b)
	if n != len(frame) || err != nil || !d.Pending() || d.Offset() != 32 || b.Len() != 1 {
		t.Fatalf("n=%d err=%v pending=%v offset=%d records=%d", n, err, d.Pending(), d.Offset(), b.Len())
	}
	rest := cat(frame, splitFrame(5))
	n, err = d.Decode(rest, &b)
	if n != 32 || err == nil || !strings.HasPrefix(err.Error(), "offset 64: unknown string id 5") {
		t.Fatalf("n=%d err=%v", n, err)
	}
	if b.Len() != 2 {
		t.Errorf("%d records, want 2", b.Len())
	}
	var e *Error
	if !errors.As(err, &e) || e.Offset != 64 {
		t.Errorf("error %#v", err)
	}
}

// TestDualSocketRetry: an unknown id in dual-socket mode is not sticky and
// leaves the frame for a retry.
func TestDualSocketRetry(t *testing.T) {
	s := NewStrings(0)
	d := NewDecoder(Options{Strings: s, DualSocket: true})
	var b record.Batch
	frames := cat(splitFrame(0), splitFrame(0))
	n, err := d.Decode(frames, &b)
	if n != 0 || !errors.Is(err, ErrUnknownString) || d.Err() != nil || !d.Pending() {
		t.Fatalf("n=%d err=%v sticky=%v pending=%v", n, err, d.Err(), d.Pending())
	}
	rd := NewRegistryDecoder(s, Options{})
	reg := AppendRegistryEntry(nil, 0, record.SplitEvent, false)
	if m, err := rd.Decode(reg[:5]); m != 0 || err != nil || !rd.Pending() {
		t.Fatalf("partial entry: %d %v", m, err)
	}
	if m, err := rd.Decode(reg); m != len(reg) || err != nil {
		t.Fatalf("entry: %d %v", m, err)
	}
	n, err = d.Decode(frames, &b)
	if n != len(frames) || err != nil || b.Len() != 2 {
		t.Fatalf("retry: n=%d err=%v records=%d", n, err, b.Len())
	}
	// Errors other than unknown strings stay sticky.
	n, err = d.Decode(cat(be32(-1), be32(0)), &b)
	if err == nil || d.Err() == nil || n != 0 {
		t.Errorf("marker in dual mode: n=%d err=%v sticky=%v", n, err, d.Err())
	}
}

func TestRegistryDecoder(t *testing.T) {
	var reg []byte
	want := map[int32]string{0: "a", 1: "ünïcödé", 7: "", 1 << 30: "sparse"}
	for _, id := range []int32{0, 1, 7, 1 << 30} {
		reg = AppendRegistryEntry(reg, id, want[id], false)
	}
	for _, next := range []chunker{whole, oneByte, randomChunks(3, 5)} {
		s := NewStrings(0)
		rd := NewRegistryDecoder(s, Options{})
		var buf []byte
		for i := 0; i < len(reg); {
			n := min(next(), len(reg)-i)
			buf = append(buf, reg[i:i+n]...)
			i += n
			m, err := rd.Decode(buf)
			if err != nil {
				t.Fatal(err)
			}
			buf = buf[m:]
		}
		got := map[int32]string{}
		for id, v := range s.All() {
			got[id] = v
		}
		if diff := cmp.Diff(want, got); diff != "" || rd.Pending() || rd.Offset() != int64(len(reg)) {
			t.Errorf("table (-want +got):\n%s pending=%v offset=%d", diff, rd.Pending(), rd.Offset())
		}
	}
	// Errors are sticky.
	rd := NewRegistryDecoder(NewStrings(0), Options{MaxStringLen: 3})
	bad := cat(be32(1), be32(4), []byte("abcd"))
	if _, err := rd.Decode(bad); err == nil || !errors.Is(err, ErrLimit) || !strings.HasPrefix(err.Error(), "offset 0: registry entry for id 1: string length 4 over the limit 3") {
		t.Errorf("error %v", err)
	}
	if n, err := rd.Decode(bad); n != 0 || err == nil {
		t.Errorf("not sticky: %d %v", n, err)
	}
	// Java's char count on the registry connection.
	java := cat(be32(2), be32(2), []byte("ü😀"))
	s := NewStrings(0)
	if n, err := NewRegistryDecoder(s, Options{}).Decode(java); err == nil && n == len(java) {
		t.Error("Java char count read as bytes: decoded without complaint")
	}
	java = cat(be32(2), be32(3), []byte("ü😀"))
	s = NewStrings(0)
	if n, err := NewRegistryDecoder(s, Options{JavaCharCount: true}).Decode(java); err != nil || n != len(java) {
		t.Fatalf("JavaCharCount: %d %v", n, err)
	}
	if v, _ := s.Get(2); v != "ü😀" {
		t.Errorf("got %q", v)
	}
}

func TestJavaCharCountEntries(t *testing.T) {
	tests := []struct {
		name  string
		units int32
		text  string
		rest  string // bytes after the entry
		err   string
	}{
		{"ascii", 3, "abc", "", ""},
		{"two-byte", 2, "üx", "", ""},
		{"three-byte", 1, "–", "", ""},
		{"supplementary counts two", 2, "😀", "", ""},
		{"straddle", 1, "😀", "", "a supplementary character straddles the UTF-16 length 1"},
		{"invalid", 2, "a\xff", "", "invalid UTF-8 at byte 1 of the string"},
		{"empty", 0, "", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := cat(be32(-1), be32(9), be32(tt.units), []byte(tt.text))
			res := checkChunking(t, func() *Decoder { return NewDecoder(Options{Inline: true, JavaCharCount: true}) }, data)
			if tt.err != "" {
				if res.err == nil || !strings.Contains(res.err.Error(), tt.err) {
					t.Errorf("error %v, want %q", res.err, tt.err)
				}
				return
			}
			if res.err != nil || res.off != int64(len(data)) {
				t.Fatalf("%v after %d of %d", res.err, res.off, len(data))
			}
		})
	}
	// Waiting for the rest of a multi-byte character.
	d := NewDecoder(Options{Inline: true, JavaCharCount: true})
	var b record.Batch
	data := cat(be32(-1), be32(9), be32(2), []byte("a😀")[:3])
	if n, err := d.Decode(data, &b); n != 0 || err != nil || !d.Pending() {
		t.Errorf("partial: %d %v", n, err)
	}
}

func TestFileModeKeepsRawStrings(t *testing.T) {
	// kieker.map values are taken as they are, valid UTF-8 or not.
	s := NewStrings(0)
	_ = s.Set(0, record.Prefix+"misc.ThreadMetaData")
	_ = s.Set(1, "bad\xffbytes")
	data := cat(be32(0), make([]byte, 8), be32(1), be32(0), be32(42))
	res := feedBinary(NewDecoder(Options{Strings: s}), data, whole)
	if res.err != nil || len(res.recs) != 1 {
		t.Fatalf("%d records, %v", len(res.recs), res.err)
	}
	if v, _ := res.recs[0].Field("hostname"); v.Str() != "bad\xffbytes" {
		t.Errorf("hostname %q", v.Str())
	}
	// An inline encoder writes such a string as valid UTF-8.
	e := NewEncoder(EncoderOptions{Inline: true})
	stream, _ := e.Append(nil, &res.recs[0])
	got := feedBinary(NewDecoder(Options{Inline: true}), stream, whole)
	if got.err != nil || len(got.recs) != 1 {
		t.Fatalf("%d records, %v", len(got.recs), got.err)
	}
	if v, _ := got.recs[0].Field("hostname"); v.Str() != "bad\uFFFDbytes" {
		t.Errorf("hostname %q", v.Str())
	}
}

// TestDecodeAllocs: decoding repeated strings allocates nothing per record
// once the batch has grown.
func TestDecodeAllocs(t *testing.T) {
	data, strs, n := benchBinary(t, 2000)
	d := NewDecoder(Options{Strings: strs})
	var b record.Batch
	allocs := testing.AllocsPerRun(20, func() {
		b.Reset()
		if m, err := d.Decode(data, &b); err != nil || m != len(data) {
			t.Fatalf("%d %v", m, err)
		}
	})
	if per := allocs / float64(n); per >= 0.1 {
		t.Errorf("%.3f allocations per record, want < 0.1", per)
	}
}

// TestRegistryBytesLimit: the string table an inline decoder creates never
// holds more than MaxRegistryBytes bytes of strings, however the stream is
// split; the entry that would pass the limit is a sticky ErrLimit error
// naming its offset and the limit, and re-registering a string costs
// nothing.
func TestRegistryBytesLimit(t *testing.T) {
	const limit = 1000
	var stream []byte
	var offs []int
	for id := int32(0); id < 40; id++ {
		offs = append(offs, len(stream))
		stream = AppendRegistryEntry(stream, id, strings.Repeat(string(rune('a'+id%26)), 30+int(id)), true)
		stream = AppendRegistryEntry(stream, 0, strings.Repeat("a", 30), true) // again: free
	}
	// ids 0..22 hold 30+…+52 = 943 bytes; id 23 would bring them to 996,
	// id 24 to 1050: the entry for id 24 fails.
	total, fail := 0, -1
	for id := 0; id < 40; id++ {
		if total+30+id > limit {
			fail = id
			break
		}
		total += 30 + id
	}
	for _, next := range []chunker{whole, oneByte, randomChunks(5, 17)} {
		d := NewDecoder(Options{Inline: true, MaxRegistryBytes: limit})
		var buf []byte
		var err error
		for i := 0; i < len(stream) && err == nil; {
			n := min(next(), len(stream)-i)
			buf = append(buf, stream[i:i+n]...)
			i += n
			var m int
			m, err = d.Decode(buf, &record.Batch{})
			buf = buf[m:]
			if got := d.Strings().Bytes(); got > limit {
				t.Fatalf("table holds %d bytes, over the limit %d", got, limit)
			}
		}
		if err == nil || !errors.Is(err, ErrLimit) {
			t.Fatalf("error %v, want ErrLimit", err)
		}
		want := fmt.Sprintf("offset %d: registry entry: string id %d: registry holds %d bytes of strings, %d more exceed the limit %d (max_registry_bytes)", offs[fail], fail, total, 30+fail, limit)
		if !strings.HasPrefix(err.Error(), want) {
			t.Errorf("error %q\nwant prefix %q", err, want)
		}
		if d.Strings().Bytes() != int64(total) || d.Strings().Len() != fail {
			t.Errorf("table holds %d bytes in %d entries, want %d in %d", d.Strings().Bytes(), d.Strings().Len(), total, fail)
		}
		if n, err2 := d.Decode(buf, &record.Batch{}); n != 0 || err2 != err {
			t.Errorf("not sticky: %d %v", n, err2)
		}
	}
	// The default applies when the option is 0; negative means no limit.
	big := AppendRegistryEntry(nil, 0, strings.Repeat("x", DefaultMaxStringLen), true)
	for _, tt := range []struct {
		max  int
		fail bool
	}{{0, true}, {-1, false}} {
		d := NewDecoder(Options{Inline: true, MaxRegistryBytes: tt.max})
		var err error
		for id := int32(0); id <= DefaultMaxRegistryBytes/DefaultMaxStringLen && err == nil; id++ {
			binary.BigEndian.PutUint32(big[4:], uint32(id))
			_, err = d.Decode(big, &record.Batch{})
		}
		if (err != nil) != tt.fail || (tt.fail && !errors.Is(err, ErrLimit)) {
			t.Errorf("MaxRegistryBytes %d: error %v, want failure %v", tt.max, err, tt.fail)
		}
		if d.Strings().Bytes() > DefaultMaxRegistryBytes && tt.fail {
			t.Errorf("default limit: table holds %d bytes", d.Strings().Bytes())
		}
	}
}
