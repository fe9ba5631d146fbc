package zico_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tracebridge/tracebridge/internal/codec/fressian"
	"github.com/tracebridge/tracebridge/internal/codec/zico"
)

// Struct heads at their first use in a payload; later uses are A0+index.
const (
	sym  = `EF E3 1C "com.jitlogic.zorka.Symbol_v1" 02 `
	rec  = `EF E3 21 "com.jitlogic.zorka.TraceRecord_v1" 0B `
	mark = `EF E3 21 "com.jitlogic.zorka.TraceMarker_v1" 04 `
	exc  = `EF E3 27 "com.jitlogic.zorka.SymbolicException_v1" 04 `
	ste  = `EF E3 2A "com.jitlogic.zorka.SymbolicStackElement_v1" 04 `
	tagd = `EF E3 21 "com.jitlogic.zorka.TaggedValue_v1" 02 `
	// ids, flags 0, time 10, calls 1, errors 0
	plain = `01 02 03 00 0A 01 00 `
)

func TestDecodeData(t *testing.T) {
	r := func() zico.TraceRecord { // the expected plain record
		return zico.TraceRecord{ClassID: 1, MethodID: 2, SignatureID: 3, Class: "C", Method: "m", Signature: "()V", Time: 10, Calls: 1}
	}
	syms := sym + `01 DB "C" A0 02 DB "m" A0 03 DD "()V" A0 04 DB "K" `
	symObjs := []any{zico.Symbol{ID: 1, Name: "C"}, zico.Symbol{ID: 2, Name: "m"}, zico.Symbol{ID: 3, Name: "()V"}, zico.Symbol{ID: 4, Name: "K"}}
	withSyms := func(objs ...any) []any { return append(append([]any{}, symObjs...), objs...) }
	trace := func(rec zico.TraceRecord, n int) zico.Trace { return zico.Trace{Root: &rec, Records: n} }

	withChildren := r()
	withChildren.Children = []zico.TraceRecord{r(), r()}
	dupAttrs := r()
	dupAttrs.Attrs = []zico.Attr{{KeyID: 4, Key: "K", Value: zico.Value{Kind: zico.KindString, Str: "last"}},
		{KeyID: 1, Key: "C", Value: zico.Value{Kind: zico.KindBool, Int: 1}}}
	tagged := r()
	tagged.Attrs = []zico.Attr{{KeyID: 4, Key: "K", Value: zico.Value{Kind: zico.KindTagged, Int: 1, Str: "C",
		Elem: &zico.Value{Kind: zico.KindDouble, Float: 1}}}}
	other := r()
	other.Attrs = []zico.Attr{{KeyID: 4, Key: "K", Value: zico.Value{Kind: zico.KindOther,
		Other: &fressian.Value{Kind: fressian.KindList, Items: []fressian.Value{fressian.Int(1)}}}}}
	withExc := r()
	withExc.Exception = &zico.Exception{ClassID: 1, Class: "C", Message: "boom",
		Stack: []zico.StackElement{{ClassID: 1, MethodID: 2, FileID: 3, Class: "C", Method: "m", File: "()V", Line: -2}},
		Cause: &zico.Exception{ClassID: 4, Class: "K", Stack: []zico.StackElement{}}}
	unresolved := r()
	unresolved.ClassID, unresolved.Class = 9, ""
	markerNoFlag := r()
	markerNoFlag.Marker = &zico.TraceMarker{TraceID: 4, TraceType: "K", Clock: 5}

	for _, tc := range []struct {
		name string
		in   string
		lim  zico.Limits
		want []any
		err  string // "" for none
		kind error
	}{
		{"plain record", syms + rec + plain + `F7 F7 F7 F7`, zico.Limits{}, withSyms(trace(r(), 1)), "", nil},
		{"children", syms + rec + plain + `F7 F7 F7 E6 A1 ` + plain + `F7 F7 F7 F7 A1 ` + plain + `F7 F7 F7 F7`, zico.Limits{},
			withSyms(trace(withChildren, 3)), "", nil},
		{"closed and open child lists", syms + rec + plain + `F7 F7 F7 ED A1 ` + plain + `F7 F7 F7 F7 A1 ` + plain + `F7 F7 F7 F7 FD ` +
			`A1 ` + plain + `F7 F7 F7 EE A1 ` + plain + `F7 F7 F7 F7 A1 ` + plain + `F7 F7 F7 F7`, zico.Limits{},
			withSyms(trace(withChildren, 3), trace(withChildren, 3)), "", nil},
		{"cached child", syms + rec + plain + `F7 F7 F7 E6 CD A1 ` + plain + `F7 F7 F7 F7 80`, zico.Limits{},
			withSyms(trace(withChildren, 3)), "", nil},
		{"duplicate attribute keys", syms + rec + plain + `F7 F7 C0 EA 04 DC "v1" 01 F5 04 DE "last" F7`, zico.Limits{},
			withSyms(trace(dupAttrs, 1)), "", nil},
		{"tagged and other values", syms + rec + plain + `F7 F7 C0 E6 04 ` + tagd + `01 FC F7 A1 ` + plain + `F7 F7 C0 E6 04 E5 01 F7`, zico.Limits{},
			withSyms(trace(tagged, 1), trace(other, 1)), "", nil},
		{"exception", syms + rec + plain + `F7 ` + exc + `01 DE "boom" E5 ` + ste + `01 02 03 4F FE A2 04 F7 E4 F7 F7 F7`, zico.Limits{},
			withSyms(trace(withExc, 1)), "", nil},
		{"exception of another type is ignored", syms + rec + plain + `F7 DB "x" F7 F7`, zico.Limits{},
			withSyms(trace(r(), 1)), "", nil},
		{"marker without the flag is kept", syms + rec + plain + mark + `04 05 00 00 F7 F7 F7`, zico.Limits{},
			withSyms(trace(markerNoFlag, 1)), "", nil},
		{"unresolved id", syms + rec + `09 02 03 00 0A 01 00 F7 F7 F7 F7`, zico.Limits{},
			withSyms(zico.Trace{Root: &unresolved, Records: 1, Unresolved: 1}), "", nil},
		{"metric declares 4 fields and has 6", syms + `EF E3 1C "com.jitlogic.zorka.Metric_v1" 04 01 02 03 DB "n" DB "d" F7 A0 05 DB "L"`, zico.Limits{},
			withSyms(zico.Unknown{Kind: fressian.KindStruct, Tag: zico.TagMetric}, zico.Symbol{ID: 5, Name: "L"}), "", nil},
		{"bare values and a marker", `01 DB "x" ` + mark + `04 05 00 00`, zico.Limits{},
			[]any{zico.Unknown{Kind: fressian.KindInt}, zico.Unknown{Kind: fressian.KindString}, zico.TraceMarker{TraceID: 4, Clock: 5}}, "", nil},
		{"symbol redefined, null name ignored", sym + `01 DB "C" A0 01 DB "D" A0 02 F7 ` + rec + `01 02 03 00 0A 01 00 F7 F7 F7 F7`, zico.Limits{},
			[]any{zico.Symbol{ID: 1, Name: "C"}, zico.Symbol{ID: 1, Name: "D"}, zico.Symbol{ID: 2},
				zico.Trace{Root: &zico.TraceRecord{ClassID: 1, Class: "D", MethodID: 2, SignatureID: 3, Time: 10, Calls: 1}, Records: 1, Unresolved: 2}}, "", nil},
		{"null stack element drops the record", syms + rec + plain + `F7 ` + exc + `01 F7 E5 F7 F7 F7 F7 A1 ` + plain + `F7 F7 F7 F7`, zico.Limits{},
			withSyms(trace(r(), 1)), "", nil},

		{"truncated", syms + rec + plain + `F7 F7 C0 E6 04`, zico.Limits{}, withSyms(),
			"fressian: offset 98: payload ends inside a value", fressian.ErrTruncated},
		{"marker of another type", syms + rec + plain + `DB "x" F7 F7 F7`, zico.Limits{}, withSyms(),
			"fressian: offset 93: record marker: expected TraceMarker_v1, got string", fressian.ErrType},
		{"null child, after the list", syms + rec + plain + `F7 F7 F7 E6 F7 A1 ` + plain + `F7 F7 F7 F7`, zico.Limits{}, withSyms(),
			"fressian: offset 97: record child: expected TraceRecord_v1", fressian.ErrType},
		{"null child in a truncated list is truncation", syms + rec + plain + `F7 F7 F7 E6 F7 A1 01`, zico.Limits{}, withSyms(),
			"fressian: offset 100: payload ends inside a value", fressian.ErrTruncated},
		{"children not a list", syms + rec + plain + `F7 F7 F7 01`, zico.Limits{}, withSyms(),
			"fressian: offset 96: record children: expected list, got int", fressian.ErrType},
		{"attribute key not an int", syms + rec + plain + `F7 F7 C0 E8 DB "k" 01 02 03 F7`, zico.Limits{}, withSyms(),
			"fressian: offset 97: record attribute key: expected int", fressian.ErrType},
		{"attributes not a map", syms + rec + plain + `F7 F7 E4 F7`, zico.Limits{}, withSyms(),
			"fressian: offset 95: record attributes: expected map, got list", fressian.ErrType},
		{"null stack", syms + rec + plain + `F7 ` + exc + `01 F7 F7 F7 F7 F7 F7`, zico.Limits{}, withSyms(),
			"fressian: offset 139: exception stack: null", fressian.ErrType},
		{"undefined code", syms + rec + plain + `F7 F7 F7 CE`, zico.Limits{}, withSyms(),
			"fressian: offset 96: undefined code 0xCE", fressian.ErrMalformed},
		{"records limit", syms + rec + plain + `F7 F7 F7 E6 A1 ` + plain + `F7 F7 F7 F7 A1 ` + plain + `F7 F7 F7 F7`, zico.Limits{MaxRecords: 2}, withSyms(),
			"fressian: offset 110: more than 2 trace records in a payload", fressian.ErrLimit},
		{"depth limit", syms + rec + plain + `F7 F7 F7 E5 A1 ` + plain + `F7 F7 F7 E5 A1 ` + plain + `F7 F7 F7 F7`, zico.Limits{MaxDepth: 2}, withSyms(),
			"fressian: offset 110: trace records nested deeper than 2", fressian.ErrLimit},
		{"attribute limit", syms + rec + plain + `F7 F7 C0 E8 04 01 01 02 F7`, zico.Limits{MaxAttrs: 1}, withSyms(),
			"fressian: offset 99: more than 1 attributes in a record", fressian.ErrLimit},
		{"items limit", syms + rec + plain + `F7 F7 C0 E8 04 01 01 02 F7`, zico.Limits{MaxItems: 2}, withSyms(),
			"fressian: offset 99: more than 2 records, attributes and stack elements in a payload", fressian.ErrLimit},
		{"stack limit", syms + rec + plain + `F7 ` + exc + `01 F7 E6 ` + ste + `01 02 03 04 A3 01 02 03 04 F7 F7 F7`, zico.Limits{MaxStack: 1}, withSyms(),
			"fressian: offset 190: more than 1 stack elements in an exception", fressian.ErrLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := zico.NewDecoder(tc.lim)
			res := decode(d, hx(t, tc.in), zico.NewSymbolMap(0, 0))
			if diff := cmp.Diff(tc.want, res.Objects); diff != "" {
				t.Errorf("objects (-want +got):\n%s", diff)
			}
			switch {
			case tc.err == "" && res.Err != nil:
				t.Fatalf("error %v", res.Err)
			case tc.err != "" && (res.Err == nil || res.Err.Error() != tc.err || !errors.Is(res.Err, tc.kind)):
				t.Fatalf("error %v\nwant  %s (%v)", res.Err, tc.err, tc.kind)
			}
		})
	}
}

func TestSymbolLimit(t *testing.T) {
	in := hx(t, sym+`01 DB "C" A0 02 DB "m" A0 03 DB "x"`)
	d := zico.NewDecoder(zico.Limits{})
	res := decode(d, in, zico.NewSymbolMap(2, 0))
	if !errors.Is(res.Err, zico.ErrLimit) || len(res.Objects) != 2 {
		t.Fatalf("%v %v", res.Objects, res.Err)
	}
	res = decode(d, in, zico.NewSymbolMap(0, 2))
	if !errors.Is(res.Err, zico.ErrLimit) || len(res.Objects) != 2 {
		t.Fatalf("bytes: %v %v", res.Objects, res.Err)
	}
}

func TestSymbolMap(t *testing.T) {
	m := zico.NewSymbolMap(0, 0)
	for _, id := range []int32{1, 2, 5000, -7, 1 << 30, 3} {
		if err := m.Put(id, fmt.Sprint("s", id)); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []int32{1, 2, 3, 5000, -7, 1 << 30} {
		if s, ok := m.Lookup(id); !ok || s != fmt.Sprint("s", id) {
			t.Fatalf("%d: %q %v", id, s, ok)
		}
	}
	if _, ok := m.Lookup(4); ok || m.Len() != 6 {
		t.Fatal("4 found or wrong length", m.Len())
	}
	// Dense growth takes in the sparse ids below it.
	for id := int32(4); id < 5100; id++ {
		m.Put(id, "x")
	}
	if s, _ := m.Lookup(5000); s != "x" {
		t.Fatal(s)
	}
	m.Reset()
	if _, ok := m.Lookup(1); ok || m.Len() != 0 {
		t.Fatal("not reset")
	}
	if err := m.Put(1, strings.Repeat("x", zico.DefaultMaxSymbolBytes+1)); !errors.Is(err, zico.ErrSymbolLimit) {
		t.Fatal(err)
	}
}
