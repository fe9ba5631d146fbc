package kieker

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/record"
)

// textStrings maps type ids for the text tests.
func textStrings(t testing.TB) *Strings {
	s := NewStrings(0)
	for id, name := range map[int32]string{
		0: record.KiekerMetadataRecord,
		1: record.OperationExecutionRecord,
		2: record.ApplicationTraceMetadata,
		3: allKinds.Name,
		4: "kieker.foo.Unknown",
		5: record.Prefix + "remotecontrol.UpdateParameterEvent",
		6: record.Prefix + "misc.EmptyRecord",
		7: "kieker.tpmon.monitoringRecord.executions.KiekerExecutionRecord",
	} {
		if err := s.Set(id, name); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

func TestLineDecoder(t *testing.T) {
	tests := []struct {
		name string
		line string
		want string // recString of the record
		err  string
		kind error
	}{
		{"metadata", "$0;-1;2.0.4-SNAPSHOT;KIEKER;host;1;false;0;NANOSECONDS;0",
			`KiekerMetadataRecord@-1{version="2.0.4-SNAPSHOT", controllerName="KIEKER", hostname="host", experimentId=1, debugMode=false, timeOffset=0, timeUnit="NANOSECONDS", numberOfRecords=0}`, "", nil},
		{"no dollar", "0;5;v;c;h;+1;TRUE;-3;u;7",
			`KiekerMetadataRecord@5{version="v", controllerName="c", hostname="h", experimentId=1, debugMode=true, timeOffset=-3, timeUnit="u", numberOfRecords=7}`, "", nil},
		{"boolean neither true nor false", "$0;5;v;c;h;1;yes;0;u;7",
			`KiekerMetadataRecord@5{version="v", controllerName="c", hostname="h", experimentId=1, debugMode=false, timeOffset=0, timeUnit="u", numberOfRecords=7}`, "", nil},
		{"empty last value", "$2;1;10;21;<no-session-id>;host;10;-1;",
			`ApplicationTraceMetadata@1{traceId=10, threadId=21, sessionId="<no-session-id>", hostname="host", parentTraceId=10, parentOrderId=-1, applicationName=""}`, "", nil},
		{"backslash keeps itself and the next char", `$1;1;a\;b;C:\\;1;2;3;h\x;4;5`,
			`OperationExecutionRecord@1{operationSignature="a\\;b", sessionId="C:\\\\", traceId=1, tin=2, tout=3, hostname="h\\x", eoi=4, ess=5}`, "", nil},
		{"legacy OperationExecutionRecord", "$1;1;7;op;sess;1;2;3;host;4;5",
			`OperationExecutionRecord@1{operationSignature="op", sessionId="sess", traceId=1, tin=2, tout=3, hostname="host", eoi=4, ess=5}`, "", nil},
		{"tpmon alias with legacy layout", "$7;1;7;op;sess;1;2;3;host;4;5",
			`OperationExecutionRecord@1{operationSignature="op", sessionId="sess", traceId=1, tin=2, tout=3, hostname="host", eoi=4, ess=5}`, "", nil},
		{"all kinds", "$3;9;true;-128;-32768;;;2147483647;-9223372036854775808;1.5f;-1.0E-4;s\\;x;2;true;FALSE;1;127;1;-1;3;a;\\;ü;1;5;1;6;1;NaN;2;Infinity;-0.0;2;x;;z",
			`AllKinds@9{b=true, y=-128, s=-32768, c=;, i=2147483647, l=-9223372036854775808, f=1.5/3fc00000, d=-0.0001/bf1a36e2eb1c432d, str="s\\;x", ba=[true,false], ya=[127], sa=[-1], ca=[a,\,ü], ia=[5], la=[6], fa=[NaN/7fc00000], da=[+Inf/7ff0000000000000,-0/8000000000000000], stra=["x",""], last="z"}`, "", nil},
		{"empty record", "$6;3", `EmptyRecord@3{}`, "", nil},
		{"array", "$5;1;p;n;3;a;b;c", `UpdateParameterEvent@1{pattern="p", name="n", values=["a","b","c"]}`, "", nil},

		{"too few", "$1;1;op;sess;1;2;3", "", "line 7: 5 values where 8 were expected for kieker.common.record.controlflow.OperationExecutionRecord", ErrMalformed},
		{"too many", "$1;1;op;sess;1;2;3;h;4;5;6;7", "", "line 7: 10 values where 8 were expected for kieker.common.record.controlflow.OperationExecutionRecord", ErrMalformed},
		{"not a long", "$1;1;op;sess;abc;2;3;h;4;5", "", `line 7: field traceId: "abc" is not a long`, ErrMalformed},
		{"int out of range", "$1;1;op;sess;1;2;3;h;2147483648;5", "", `line 7: field eoi: "2147483648" is not a int`, ErrMalformed},
		{"not a double", "$3;9;true;1;1;c;1;1;1;x;s;0;0;0;0;0;0;0;0;0;z", "", `line 7: field d: "x" is not a double`, ErrMalformed},
		{"unknown type id", "$9;1;x", "", "line 7: type id 9 not in kieker.map", ErrUnknownString},
		{"type not in catalogue", "$4;1;x", "", "line 7: type id 4 names kieker.foo.Unknown, which is not in the catalogue", ErrUnknownType},
		{"bad type id", "$x;1", "", `line 7: type id "x" is not a number`, ErrMalformed},
		{"bad timestamp", "$6;t", "", `line 7: logging timestamp "t" is not a long`, ErrMalformed},
		{"no timestamp", "$6", "", "line 7: no logging timestamp for kieker.common.record.misc.EmptyRecord", ErrMalformed},
		{"array too long", "$5;1;p;n;70000", "", "line 7: field values: array length 70000 over the limit 65536", ErrLimit},
		{"negative array", "$5;1;p;n;-1", "", `line 7: field values: array length "-1" is not a length`, ErrMalformed},
		{"array short", "$5;1;p;n;3;a;b", "", "line 7: 5 values where 6 were expected for kieker.common.record.remotecontrol.UpdateParameterEvent", ErrMalformed},
		{"char not followed by separator", "$3;9;true;1;1;ab;1;1;1;1;s;0;0;0;0;0;0;0;0;0;z", "", `line 7: field c: char value followed by 'b' instead of ';'`, ErrMalformed},
		{"supplementary char", "$3;9;true;1;1;😀;1;1;1;1;s;0;0;0;0;0;0;0;0;0;z", "", `line 7: field c: "😀" is not one UTF-16 char`, ErrMalformed},
	}
	cat := testCatalog(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := NewLineDecoder(TextOptions{Catalog: cat, Strings: textStrings(t)})
			var b record.Batch
			b.Add(cat.Lookup(record.SplitEvent), 0) // records before stay
			err := d.Decode([]byte(tt.line), 7, &b)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Errorf("error\n got %v\nwant %s", err, tt.err)
				}
				if !errors.Is(err, tt.kind) {
					t.Errorf("error %v is not %v", err, tt.kind)
				}
				if b.Len() != 1 {
					t.Errorf("%d records after a failed line, want the 1 before", b.Len())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b.Len() != 2 {
				t.Fatalf("%d records", b.Len())
			}
			if got := recString(&b.Records[1]); got != tt.want {
				t.Errorf("\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

func TestTextDecoderStream(t *testing.T) {
	strs := textStrings(t)
	data := "$6;1\r\n\n\r\n$6;2\n$6;x\n$6;4\n$6;5"
	d := NewTextDecoder(TextOptions{Strings: strs})
	var b record.Batch
	n, err := d.Decode([]byte(data), &b)
	if err == nil || err.Error() != `line 5: logging timestamp "x" is not a long` {
		t.Fatalf("error %v", err)
	}
	if want := strings.Index(data, "$6;4"); n != want || b.Len() != 2 {
		t.Fatalf("consumed %d (want %d), %d records", n, want, b.Len())
	}
	// The caller may skip the bad line and go on.
	rest := []byte(data[n:])
	m, err := d.Decode(rest, &b)
	if err != nil || m != 5 || !d.Pending() || b.Len() != 3 {
		t.Fatalf("m=%d err=%v pending=%v records=%d", m, err, d.Pending(), b.Len())
	}
	if err := d.Finish(rest[m:], &b); err != nil || b.Len() != 4 || d.Line() != 7 || d.Offset() != int64(len(data)) {
		t.Fatalf("finish: %v, %d records, line %d, offset %d", err, b.Len(), d.Line(), d.Offset())
	}
	var ts []int64
	for _, r := range b.Records {
		ts = append(ts, r.LoggingTimestamp)
	}
	if diff := cmp.Diff([]int64{1, 2, 4, 5}, ts); diff != "" {
		t.Error(diff)
	}
}

func TestTextDecoderLineLimit(t *testing.T) {
	strs := textStrings(t)
	long := "$0;1;" + strings.Repeat("x", 100) + ";c;h;1;false;0;u;0\n"
	for _, next := range []chunker{whole, oneByte} {
		res := feedText(NewTextDecoder(TextOptions{Strings: strs, MaxLineLen: 50}), []byte("$6;1\n"+long), next)
		if res.err == nil || !errors.Is(res.err, ErrLimit) || !strings.HasPrefix(res.err.Error(), "line 2: longer than the limit 50 bytes") || len(res.recs) != 1 {
			t.Errorf("error %v, %d records", res.err, len(res.recs))
		}
	}
	// A line of exactly the limit, with CRLF, is fine either way.
	exact := "$0;1;" + strings.Repeat("x", 27) + ";c;h;1;false;0;u;0\r\n"
	if len(exact) != 52 {
		t.Fatalf("line of %d bytes", len(exact))
	}
	for _, next := range []chunker{whole, oneByte} {
		res := feedText(NewTextDecoder(TextOptions{Strings: strs, MaxLineLen: 50}), []byte(exact), next)
		if res.err != nil || len(res.recs) != 1 {
			t.Errorf("error %v, %d records", res.err, len(res.recs))
		}
	}
}

func TestAppendLineStrings(t *testing.T) {
	tests := []struct {
		value string
		line  string // the value as written
		read  string // what reading the line gives
	}{
		{"plain", "plain", "plain"},
		{"", "", ""},
		{"a;b", `a\;b`, `a\;b`},
		{`a\;b`, `a\;b`, `a\;b`},
		{`C:\\`, `C:\\`, `C:\\`},
		{`trail\`, `trail\\`, `trail\\`},
		{`\`, `\\`, `\\`},
		{"two\nlines", `two\nlines`, `two\nlines`},
		{"cr\rlf\n", `cr\rlf\n`, `cr\rlf\n`},
		{"back\\\nslash", `back\\\nslash`, `back\\\nslash`},
		{"ü;😀", `ü\;😀`, `ü\;😀`},
		{`\ü`, `\ü`, `\ü`},
	}
	s := NewStrings(0)
	_ = s.Set(0, record.Prefix+"misc.ThreadMetaData")
	typ := record.Builtin().Lookup(record.Prefix + "misc.ThreadMetaData")
	for _, tt := range tests {
		r := record.Record{Type: typ, LoggingTimestamp: 1, Values: []record.Value{record.StringValue(tt.value), record.IntValue(2)}}
		line := AppendLine(nil, 0, &r)
		if want := "$0;1;" + tt.line + ";2\n"; string(line) != want {
			t.Errorf("%q written as %q, want %q", tt.value, line, want)
		}
		var b record.Batch
		if err := NewLineDecoder(TextOptions{Strings: s}).Decode(line[:len(line)-1], 1, &b); err != nil {
			t.Fatalf("%q: %v", line, err)
		}
		if got := b.Records[0].Values[0].Str(); got != tt.read {
			t.Errorf("%q read back as %q, want %q", line, got, tt.read)
		}
		// Written again, what was read is unchanged.
		if again := AppendLine(nil, 0, &b.Records[0]); string(again) != string(line) {
			t.Errorf("re-written %q, first %q", again, line)
		}
	}
}

func TestAppendLineChars(t *testing.T) {
	s := NewStrings(0)
	_ = s.Set(3, allKinds.Name)
	for _, c := range []int64{'\n', '\r', 0xD800, 0xDFFF} {
		r := record.Record{Type: allKinds, Values: make([]record.Value, len(allKinds.Fields))}
		r.Values[3] = record.IntValue(c)
		line := AppendLine(nil, 3, &r)
		if !strings.Contains(string(line), ";false;0;0;?;0;") {
			t.Errorf("char %#x written as %q", c, line)
		}
	}
}
