package kdb

import (
	"bytes"
	"errors"
	"math"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/record"
)

func TestPerlMessages(t *testing.T) {
	msgs := perlMessages(t)
	if len(msgs) != 251 {
		t.Fatalf("%d messages, want 251", len(msgs))
	}
	bodies := stompBodies(t)
	if diff := cmp.Diff(msgs, bodies); diff != "" {
		t.Fatalf("STOMP bodies differ from the messages (-messages +bodies):\n%s", diff)
	}
	def := defaultMapping(t)
	for _, m := range []*Mapping{perlMapping(t), def} {
		d := NewTextDecoder(m, Options{})
		var b record.Batch
		for i, msg := range msgs {
			if n, err := d.DecodeMessage(msg, &b); err != nil || n != 1 {
				t.Fatalf("message %d %q: %d records, %v", i+1, msg, n, err)
			}
		}
		counts := map[string]int{}
		for _, r := range b.Records {
			counts[r.Type.ShortName()]++
		}
		if diff := cmp.Diff(map[string]int{"TraceMetadata": 1, "BeforeOperationEvent": 125, "AfterOperationEvent": 125}, counts); diff != "" {
			t.Fatalf("record counts (-want +got):\n%s", diff)
		}
		cat := record.Builtin()
		rec := func(name string, vals ...record.Value) record.Record {
			return record.Record{Type: cat.Lookup(name), LoggingTimestamp: record.NoTimestamp, Values: vals}
		}
		i, s := record.IntValue, record.StringValue
		want := []record.Record{
			rec(record.TraceMetadata, i(11727), i(0), s("0"), s("vm"), i(0), i(0)),
			rec(record.BeforeOperationEvent, i(1795312705697789000), i(11727), i(0), s("search_book"), s("realclients.perl.Bookstore")),
			rec(record.BeforeOperationEvent, i(1795312705697947000), i(11727), i(1), s("catalog_lookup"), s("realclients.perl.Bookstore")),
		}
		if diff := cmp.Diff(want, b.Records[:3], cmpOpts); diff != "" {
			t.Fatalf("first three messages (-want +got):\n%s", diff)
		}
		if b.Records[0].Type.Name != record.TraceMetadata {
			t.Fatalf("legacy name not resolved: %s", b.Records[0].Type.Name)
		}
		last := b.Records[250]
		if v, _ := last.Field("orderIndex"); last.Type.Name != record.AfterOperationEvent || v.Int() != 249 {
			t.Fatalf("last record %s orderIndex %d", last.Type.ShortName(), v.Int())
		}

		// The whole run as one multi-record message gives the same records.
		var all record.Batch
		n, err := d.DecodeMessage(bytes.Join(msgs, []byte("\r\n")), &all)
		if err != nil || n != 251 {
			t.Fatalf("one message: %d records, %v", n, err)
		}
		if diff := cmp.Diff(b.Records, all.Records, cmpOpts); diff != "" {
			t.Fatalf("one message (-separate +joined):\n%s", diff)
		}
	}
}

func TestTextRoundTripAllTypes(t *testing.T) {
	m := allTypesMapping(t)
	ids, recs := sampleRecords(m, true)
	var msg []byte
	for i := range recs {
		if i > 0 {
			msg = append(msg, '\n')
		}
		var err error
		if msg, err = AppendText(msg, ids[i], &recs[i]); err != nil {
			t.Fatalf("record %d (%s): %v", i, recs[i].Type.ShortName(), err)
		}
	}
	d := NewTextDecoder(m, Options{})
	var b record.Batch
	n, err := d.DecodeMessage(msg, &b)
	if err != nil || n != len(recs) {
		t.Fatalf("%d of %d records, %v", n, len(recs), err)
	}
	if diff := cmp.Diff(recs, b.Records, cmpOpts); diff != "" {
		t.Fatalf("decode(encode(r)) (-want +got):\n%s", diff)
	}
	// One record per message, through DecodeLine and the Encoder.
	enc := NewEncoder(m, Options{})
	b.Reset()
	for i := range recs {
		line, err := enc.AppendText(nil, &recs[i])
		if err != nil {
			t.Fatal(err)
		}
		if err := d.DecodeLine(append(line, "\r\n"...), &b); err != nil {
			t.Fatalf("record %d: %v\n%q", i, err, line)
		}
	}
	if diff := cmp.Diff(recs, b.Records, cmpOpts); diff != "" {
		t.Fatalf("DecodeLine (-want +got):\n%s", diff)
	}
}

func TestTextEncoding(t *testing.T) {
	cat := record.Builtin()
	cpu := record.Record{Type: cat.Lookup(record.CPUUtilizationRecord), Values: []record.Value{
		record.IntValue(-5), record.StringValue("h;o\\s\nt\r"), record.StringValue(""),
		record.DoubleValue(0.5), record.DoubleValue(1e-4), record.DoubleValue(1.23456789e7), record.DoubleValue(math.NaN()),
		record.DoubleValue(math.Inf(1)), record.DoubleValue(math.Inf(-1)), record.DoubleValue(math.Copysign(0, -1)),
	}}
	got, err := AppendText([]byte("x"), 10, &cpu)
	if want := "x10;-5;h\\;o\\\\s\\\nt\\\r;;0.5;1.0E-4;1.23456789E7;NaN;Infinity;-Infinity;-0.0"; err != nil || string(got) != want {
		t.Fatalf("got %q, %v\nwant %q", got, err, want)
	}
	meta := record.Record{Type: cat.Lookup(record.KiekerMetadataRecord), Values: []record.Value{
		record.StringValue("2.0"), record.StringValue("c"), record.StringValue("h"), record.IntValue(1), record.BoolValue(true),
		record.IntValue(0), record.StringValue("NANOSECONDS"), record.IntValue(1)}}
	if got, err := AppendText(nil, 13, &meta); err != nil || string(got) != "13;2.0;c;h;1;true;0;NANOSECONDS;1" {
		t.Fatalf("got %q, %v", got, err)
	}
	kinds := sampleRecord(allKinds, 2, true)
	kinds.Values[3] = record.IntValue(0xD800)
	if _, err := AppendText(nil, allKindsID, &kinds); errString(err) != "encode: AllKinds field c: char U+D800 is a lone surrogate, which text cannot hold" || !errors.Is(err, ErrInvalid) {
		t.Fatalf("surrogate: %v", err)
	}
	if _, err := AppendBinary(nil, allKindsID, &kinds); err != nil {
		t.Fatalf("binary holds any char: %v", err)
	}
}

func TestTextDecode(t *testing.T) {
	m := defaultMapping(t)
	arrays := arraysMapping(t)
	for _, tc := range []struct {
		name  string
		m     *Mapping
		msg   string
		field string
		want  []string // the field of each record, via Value.Format
	}{
		{"escapes", m, `1;1;2;3;a\;b;c\\d`, "operationSignature", []string{"a;b"}},
		{"escapes 2", m, `1;1;2;3;\x\y\;;z`, "operationSignature", []string{"xy;"}},
		{"escaped class", m, `1;1;2;3;a;c\\d\;`, "classSignature", []string{`c\d;`}},
		{"escaped newline", m, "1;1;2;3;line1\\\nline2;c\n2;1;2;3;x;c", "operationSignature", []string{"line1\nline2", "x"}},
		{"crlf", m, "1;1;2;3;a;b\r\n2;1;2;3;a;b\r\n", "classSignature", []string{"b", "b"}},
		{"escaped cr kept", m, "1;1;2;3;a;b\\\r\r\n", "classSignature", []string{"b\r"}},
		{"cr inside kept", m, "1;1;2;3;a;b\rc", "classSignature", []string{"b\rc"}},
		{"blank lines", m, "\n\n1;1;2;3;a;b\n  \n\r\n\t\n2;1;2;3;a;b\n\n", "traceId", []string{"2", "2"}},
		{"empty strings", m, "1;1;2;3;;", "operationSignature", []string{""}},
		{"unicode", m, "1;1;2;3;ä€😀;b", "operationSignature", []string{"ä€😀"}},
		{"plus sign", m, "1;+5;2;3;a;b", "timestamp", []string{"5"}},
		{"long extremes", m, "1;-9223372036854775808;9223372036854775807;-2147483648;a;b\n1;0;-0;+2147483647;a;b", "timestamp", []string{"-9223372036854775808", "0"}},
		{"doubles", m, "12;1;h;NaN;Infinity;-Infinity\n12;1;h;1e5; 2.5 ;1.0E-4\n12;1;h;1.5d;0x1.8p1;1e400\n12;1;h;+0.5f;.5;5.", "oneMinLoadAverage",
			[]string{"NaN", "100000", "1.5", "0.5"}},
		{"doubles 2", m, "12;1;h;NaN;Infinity;-Infinity\n12;1;h;1e5; 2.5 ;1.0E-4\n12;1;h;1.5d;0x1.8p1;1e400\n12;1;h;+0.5f;.5;5.", "fiveMinLoadAverage",
			[]string{"+Inf", "2.5", "3", "0.5"}},
		{"booleans", m, "13;v;c;h;1;true;0;u;0\n13;v;c;h;1;FALSE;0;u;0\n13;v;c;h;1;t;0;u;0\n13;v;c;h;1;F;0;u;0", "debugMode",
			[]string{"true", "false", "true", "false"}},
		{"string array", arrays, "60;p;n;3;a;b\\;c;", "values", nil},
		{"empty array", arrays, "60;p;n;0", "name", []string{"n"}},
		{"chars", arrays, "100;t;1;2;é;4;5;6;7;s;0;0;0;2;\\;;￿;0;0;0;0;1;x;9", "c", []string{"é"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewTextDecoder(tc.m, Options{})
			var b record.Batch
			n, err := d.DecodeMessage([]byte(tc.msg), &b)
			if err != nil || (tc.want != nil && n != len(tc.want)) || n != b.Len() {
				t.Fatalf("%d records, %v", n, err)
			}
			if tc.want == nil {
				return
			}
			var got []string
			for _, r := range b.Records {
				v, ok := r.Field(tc.field)
				if !ok {
					t.Fatalf("no field %s", tc.field)
				}
				got = append(got, v.Format(r.Type.Fields[r.Type.FieldIndex(tc.field)].Kind))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestTextArrayValues(t *testing.T) {
	m := arraysMapping(t)
	d := NewTextDecoder(m, Options{})
	var b record.Batch
	if _, err := d.DecodeMessage([]byte("60;p;n;3;a;b\\;c;"), &b); err != nil {
		t.Fatal(err)
	}
	v, _ := b.Records[0].Field("values")
	want := []record.Value{record.StringValue("a"), record.StringValue("b;c"), record.StringValue("")}
	if diff := cmp.Diff(want, v.List().Items, cmpOpts); diff != "" || v.List().Elem != record.String {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	b.Reset()
	if _, err := d.DecodeMessage([]byte("100;t;1;2;é;4;5;6;7;s;0;0;0;2;\\;;\uffff;0;0;0;0;1;x;9"), &b); err != nil {
		t.Fatal(err)
	}
	v, _ = b.Records[0].Field("ca")
	if items := v.List().Items; len(items) != 2 || items[0].Int() != ';' || items[1].Int() != 0xFFFF {
		t.Fatalf("chars %v", items)
	}
}

// arraysMapping maps UpdateParameterEvent (string pattern, string name,
// string[] values) to 60 and test.AllKinds to 100.
// defaultMapping is DefaultMapping of the built-in catalogue.
func defaultMapping(tb testing.TB) *Mapping {
	tb.Helper()
	m, err := DefaultMapping(record.Builtin())
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func arraysMapping(tb testing.TB) *Mapping {
	m, err := NewMapping(map[int32]*record.Type{
		60:         record.Builtin().Lookup(record.Prefix + "remotecontrol.UpdateParameterEvent"),
		allKindsID: allKinds,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

func TestTextErrors(t *testing.T) {
	m := defaultMapping(t)
	arrays := arraysMapping(t)
	for _, tc := range []struct {
		name    string
		m       *Mapping
		opts    Options
		msg     string
		records int
		want    string
		is      error
	}{
		{"not a long", m, Options{}, "1;x;11727;0;a;b", 0, `line 1: BeforeOperationEvent field timestamp: "x" is not a long`, ErrInvalid},
		{"not an int", m, Options{}, "1;1;11727;2147483648;a;b", 0, `line 1: BeforeOperationEvent field orderIndex: "2147483648" is not an int`, ErrInvalid},
		{"space in an int", m, Options{}, "1;1;11727; 2;a;b", 0, `line 1: BeforeOperationEvent field orderIndex: " 2" is not an int`, ErrInvalid},
		{"not a double", m, Options{}, "12;1;h;inf;1;1", 0, `line 1: LoadAverageRecord field oneMinLoadAverage: "inf" is not a double`, ErrInvalid},
		{"not a double 2", m, Options{}, "12;1;h;1_0;1;1", 0, `line 1: LoadAverageRecord field oneMinLoadAverage: "1_0" is not a double`, ErrInvalid},
		{"not a boolean", m, Options{}, "13;v;c;h;1;yes;0;u;0", 0, `line 1: KiekerMetadataRecord field debugMode: "yes" is not a boolean`, ErrInvalid},
		{"too few fields", m, Options{}, "1;1;2;3;a", 0, "line 1: BeforeOperationEvent: 4 fields where 5 were expected", ErrInvalid},
		{"too many fields", m, Options{}, "1;1;2;3;a;b;c", 0, "line 1: BeforeOperationEvent: 6 fields where 5 were expected", ErrInvalid},
		{"trailing separator", m, Options{}, "3;11727;0;0;vm;0;0;", 0, "line 1: TraceMetadata: 7 fields where 6 were expected", ErrInvalid},
		{"shifted value", m, Options{}, "1;1;2;a;b", 0, "line 1: BeforeOperationEvent: 4 fields where 5 were expected", ErrInvalid},
		{"id only", m, Options{}, "1", 0, "line 1: BeforeOperationEvent: 0 fields where 5 were expected", ErrInvalid},
		{"unknown id", m, Options{}, "1;1;2;3;a;b\n77;1", 1, "line 2: unknown type id 77", ErrUnknownID},
		{"bad id", m, Options{}, "x;1", 0, `line 1: record id "x" is not a number`, ErrInvalid},
		{"dangling backslash", m, Options{}, "1;1;2;3;a;b\\", 0, "line 1: BeforeOperationEvent field classSignature: backslash at the end of the message", ErrInvalid},
		{"string limit", m, Options{MaxStringLen: 3}, "1;1;2;3;abc;a\\;bc", 0, "line 1: BeforeOperationEvent field classSignature: string length 4 over the limit 3", ErrLimit},
		{"error on a later line", m, Options{}, "1;1;2;3;a;b\n\n2;1;2;3;a;b\r\n\r\n2;1;2;x;a;b\n1;1;2;3;a;b", 2,
			`line 5: AfterOperationEvent field orderIndex: "x" is not an int`, ErrInvalid},
		{"line counts escaped newlines", m, Options{}, "1;1;2;3;a\\\nb;b\n1;1", 1, "line 3: BeforeOperationEvent: 1 fields where 5 were expected", ErrInvalid},
		{"array too short", arrays, Options{}, "60;p;n;2;a", 0, "line 1: UpdateParameterEvent: 4 fields where 5 were expected", ErrInvalid},
		{"array count missing", arrays, Options{}, "60;p;n", 0, "line 1: UpdateParameterEvent: 2 fields where at least 3 were expected", ErrInvalid},
		{"array too long", arrays, Options{}, "60;p;n;1;a;b", 0, "line 1: UpdateParameterEvent: 5 fields where 4 were expected", ErrInvalid},
		{"array count", arrays, Options{}, "60;p;n;x", 0, `line 1: UpdateParameterEvent field values: "x" is not an array length`, ErrInvalid},
		{"negative array count", arrays, Options{}, "60;p;n;-1", 0, "line 1: UpdateParameterEvent field values: array length -1", ErrInvalid},
		{"array limit", arrays, Options{MaxArrayLen: 2}, "60;p;n;3;a;b;c", 0, "line 1: UpdateParameterEvent field values: array length 3 over the limit 2", ErrLimit},
		{"array element", arrays, Options{}, "100;t;1;2;c;4;5;6;7;s;1;x", 0, `line 1: AllKinds field ba: element "x" is not a boolean`, ErrInvalid},
		{"array string limit", arrays, Options{MaxStringLen: 1}, "60;p;n;1;ab", 0, `line 1: UpdateParameterEvent field values: string length 2 over the limit 1`, ErrLimit},
		{"char too long", arrays, Options{}, "100;t;1;2;ab;4;5;6;7;s;0;0;0;0;0;0;0;0;0;9", 0, `line 1: AllKinds field c: "ab" is not a char`, ErrInvalid},
		{"char outside the BMP", arrays, Options{}, "100;t;1;2;😀;4;5;6;7;s;0;0;0;0;0;0;0;0;0;9", 0, `line 1: AllKinds field c: "😀" is not a char`, ErrInvalid},
		{"byte range", arrays, Options{}, "100;t;128;2;c;4;5;6;7;s;0;0;0;0;0;0;0;0;0;9", 0, `line 1: AllKinds field y: "128" is not a byte`, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewTextDecoder(tc.m, tc.opts)
			var b record.Batch
			n, err := d.DecodeMessage([]byte(tc.msg), &b)
			if errString(err) != tc.want || !errors.Is(err, tc.is) {
				t.Fatalf("error %q, want %q (%v)", errString(err), tc.want, tc.is)
			}
			if n != tc.records || b.Len() != tc.records {
				t.Fatalf("%d records reported, %d in the batch, want %d", n, b.Len(), tc.records)
			}
		})
	}
}

func TestDecodeLine(t *testing.T) {
	m := defaultMapping(t)
	d := NewTextDecoder(m, Options{})
	for _, tc := range []struct {
		line    string
		records int
		want    string
	}{
		{"1;1;2;3;a;b", 1, "<nil>"},
		{"1;1;2;3;a;b\r\n", 1, "<nil>"},
		{"\n1;1;2;3;a;b\n\n", 1, "<nil>"},
		{"", 0, "<nil>"},
		{" \r\n", 0, "<nil>"},
		{"1;1;2;3;a;b\n1;1;2;3;a;b", 0, "line 2: more than one record in the line"},
		{"1;1;2;3;a", 0, "line 1: BeforeOperationEvent: 4 fields where 5 were expected"},
	} {
		var b record.Batch
		if err := d.DecodeLine([]byte(tc.line), &b); errString(err) != tc.want || b.Len() != tc.records {
			t.Errorf("%q: %d records, error %q; want %d, %q", tc.line, b.Len(), errString(err), tc.records, tc.want)
		}
	}
}

func BenchmarkTextDecode(b *testing.B) {
	m := perlMapping(b)
	msgs := perlMessages(b)
	size := 0
	for _, msg := range msgs {
		size += len(msg)
	}
	d := NewTextDecoder(m, Options{})
	var batch record.Batch
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		batch.Reset()
		for _, msg := range msgs {
			if _, err := d.DecodeMessage(msg, &batch); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(msgs)), "ns/record")
}

// splitLines splits a message at its unescaped newlines.
func splitLines(msg []byte) [][]byte {
	var lines [][]byte
	start := 0
	for i := 0; i < len(msg); i++ {
		switch msg[i] {
		case '\\':
			i++
		case '\n':
			lines = append(lines, msg[start:i+1])
			start = i + 1
		}
	}
	return append(lines, msg[start:])
}

func FuzzTextDecode(f *testing.F) {
	for _, msg := range perlMessages(f) {
		f.Add(msg)
	}
	bodies := stompBodies(f)
	f.Add(bytes.Join(bodies[:10], []byte("\n")))
	f.Add(bytes.Join(bodies[10:20], []byte("\r\n\r\n")))
	m := allTypesMapping(f)
	ids, recs := sampleRecords(m, true)
	for i := range recs {
		if line, err := AppendText(nil, ids[i], &recs[i]); err == nil && len(line) < 2048 {
			f.Add(line)
		}
	}
	for _, s := range []string{`1;1;2;3;a\;b;c\\d`, "1;1;2;3;a\\\nb;c\\", "60;p;n;2;a", "60;p;n;-1", "100;t;1;2;ab;4",
		"12;1;h;NaN;-Infinity;0x1p3", "1;+1;-2;3;;\r\n\r\n  \n2;0;0;0;\\\r;\\"} {
		f.Add([]byte(s))
	}
	opts := Options{MaxStringLen: 1200, MaxArrayLen: 16}
	f.Fuzz(func(t *testing.T, msg []byte) {
		d := NewTextDecoder(m, opts)
		var b record.Batch
		n, err := d.DecodeMessage(msg, &b)
		if n != b.Len() {
			t.Fatalf("%d records reported, %d in the batch", n, b.Len())
		}
		var e *Error
		if err != nil && (!errors.As(err, &e) || e.Line < 1) {
			t.Fatalf("error without a line: %v", err)
		}
		// Line by line gives the same records and the same error.
		var lb record.Batch
		var lineErr error
		for _, line := range splitLines(msg) {
			if lineErr = NewTextDecoder(m, opts).DecodeLine(line, &lb); lineErr != nil {
				break
			}
		}
		if diff := diffRecords(b.Records, lb.Records); diff != "" {
			t.Fatalf("line by line (-message +lines):\n%s", diff)
		}
		var le *Error
		if (err == nil) != (lineErr == nil) || err != nil && (!errors.As(lineErr, &le) || le.Reason != e.Reason || le.Err != e.Err || le.Field != e.Field) {
			t.Fatalf("message error %v, line error %v", err, lineErr)
		}
		// Round trip through both dialects.
		var text, bin []byte
		for i := range b.Records {
			id, _ := m.ID(b.Records[i].Type)
			if i > 0 {
				text = append(text, '\n')
			}
			var err error
			if text, err = appendText(text, id, &b.Records[i], opts.limits()); err != nil {
				t.Fatalf("re-encoding record %d as text: %v", i, err)
			}
			if bin, err = appendBinary(bin, id, &b.Records[i], opts.limits()); err != nil {
				t.Fatalf("re-encoding record %d as binary: %v", i, err)
			}
		}
		var again record.Batch
		if _, err := NewTextDecoder(m, opts).DecodeMessage(text, &again); err != nil {
			t.Fatalf("re-decoding text: %v\n%q", err, text)
		}
		if diff := diffRecords(b.Records, again.Records); diff != "" {
			t.Fatalf("text round trip (-first +second):\n%s", diff)
		}
		got, _, err := whole(NewDecoder(m, opts), bin)
		if err != nil {
			t.Fatalf("re-decoding binary: %v", err)
		}
		if diff := diffRecords(b.Records, got); diff != "" {
			t.Fatalf("binary round trip (-text +binary):\n%s", diff)
		}
	})
}
