package logwrite_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/codec/jsonl"
	"github.com/tracebridge/tracebridge/internal/logwrite"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/record/recordtest"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// jfrSample is a type shaped like a JFR event as internal/codec/jfr makes
// it: dotted field names, arrays.
var jfrSample = recordtest.ExecutionSample

var nested = record.MustType("shop.Outer$Order",
	record.Field{Name: "id", Kind: record.String},
	record.Field{Name: "grade", Kind: record.Char},
	record.Field{Name: "prices", Kind: record.Double, Array: true},
	record.Field{Name: "long", Kind: record.Long})

func mixed(n int) *record.Batch {
	b := events(0, n)
	for i := 0; i < n; i++ {
		r := b.Add(jfrSample, int64(1_700_000_000_000_000_000+i))
		r.Values[0] = record.IntValue(r.LoggingTimestamp)
		r.Values[1] = record.StringValue("worker-" + fmt.Sprint(i%3))
		r.Values[2] = record.IntValue(int64(20 + i%3))
		r.Values[3] = record.IntValue(int64(4000 + i%3))
		r.Values[4] = b.NewList(record.String, 2)
		r.Values[4].List().Items[0] = record.StringValue("Workload.busy(long) line: 12")
		r.Values[4].List().Items[1] = record.StringValue("java.lang.Thread.run() line: 840")
		r.Values[5] = record.BoolValue(i%2 == 0)
		r.Values[6] = record.StringValue("STATE_RUNNABLE")
		o := b.Add(nested, record.NoTimestamp)
		o.Values[0] = record.StringValue("order " + fmt.Sprint(i))
		o.Values[1] = record.IntValue('A' + int64(i%5))
		o.Values[2] = b.NewList(record.Double, 1)
		o.Values[2].List().Items[0] = record.DoubleValue(float64(i) / 4)
		o.Values[3] = record.IntValue(int64(-i))
		trace.AppendSpan(b, trace.ID{Hi: 1, Lo: uint64(i + 1)}, &trace.Span{SpanID: trace.SpanID(i + 1), Operation: "GET /", Thread: "21", Start: 10, End: 20})
	}
	return b
}

func lines(recs []record.Record) []string {
	var out []string
	for i := range recs {
		out = append(out, string(jsonl.AppendRecord(nil, &recs[i])))
	}
	return out
}

// TestTypesDescribedBesideMap: a log with types Kieker lacks carries
// their IRL; read back with only the built-in catalogue it gives the
// records written, in both formats, also from a copy taken after Flush
// (as a crash leaves it).
func TestTypesDescribedBesideMap(t *testing.T) {
	for _, binary := range []bool{false, true} {
		t.Run(fmt.Sprintf("binary=%v", binary), func(t *testing.T) {
			w, err := logwrite.New(logwrite.Config{Path: t.TempDir(), Binary: binary, MaxEntriesInFile: 50})
			if err != nil {
				t.Fatal(err)
			}
			in := mixed(40)
			if err := w.Consume(context.Background(), in); err != nil {
				t.Fatal(err)
			}
			if err := w.Flush(); err != nil {
				t.Fatal(err)
			}
			snap := filepath.Join(t.TempDir(), filepath.Base(w.Dir()))
			copyDir(t, w.Dir(), snap)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			var irls []string
			entries, _ := os.ReadDir(w.Dir())
			for _, e := range entries {
				if strings.HasSuffix(e.Name(), ".irl") {
					irls = append(irls, e.Name())
				}
			}
			sort.Strings(irls)
			want := []string{"tracebridge-types.jdk.irl", "tracebridge-types.shop.irl", "tracebridge-types.tracebridge.trace.irl"}
			if diff := cmp.Diff(want, irls); diff != "" {
				t.Fatalf("IRL files (-want +got):\n%s", diff)
			}
			src, _ := os.ReadFile(filepath.Join(w.Dir(), "tracebridge-types.jdk.irl"))
			if !strings.Contains(string(src), "long `sampledThread.javaThreadId`") {
				t.Errorf("jdk IRL:\n%s", src)
			}
			for _, dir := range []string{w.Dir(), snap} {
				got := readAll(t, dir, false)
				if diff := cmp.Diff(lines(in.Records), lines(got)); diff != "" {
					t.Errorf("%s read back (-written +read):\n%s", dir, diff)
				}
			}
		})
	}
}

// TestConflictingLayoutStartsNewLog: the same type name with other fields
// (an event type of another JVM version) continues in a new log
// directory; each reads back.
func TestConflictingLayoutStartsNewLog(t *testing.T) {
	other := record.MustType(jfrSample.Name, append(append([]record.Field(nil), jfrSample.Fields...), record.Field{Name: "sampledThread.virtual", Kind: record.Bool})...)
	w, err := logwrite.New(logwrite.Config{Path: t.TempDir(), Binary: true})
	if err != nil {
		t.Fatal(err)
	}
	b := &record.Batch{}
	for i := 0; i < 6; i++ {
		typ := jfrSample
		if i >= 3 {
			typ = other
		}
		r := b.Add(typ, int64(i))
		r.Values[0] = record.IntValue(int64(i))
		r.Values[4] = b.NewList(record.String, 0)
	}
	if err := w.Consume(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dirs := w.Dirs()
	if len(dirs) != 2 {
		t.Fatalf("dirs %v, want 2", dirs)
	}
	for i, dir := range dirs {
		got := readAll(t, dir, false)
		if len(got) != 3 || !got[0].Type.SameFields(got[2].Type) || len(got[0].Type.Fields) != 7+i || got[0].LoggingTimestamp != int64(3*i) {
			t.Errorf("%s: %d records, %v", dir, len(got), lines(got))
		}
	}
}

// TestUndescribableType: a type IRL cannot name is written, and reported.
func TestUndescribableType(t *testing.T) {
	var reported []string
	w, err := logwrite.New(logwrite.Config{Path: t.TempDir(), OnUndescribed: func(err error) { reported = append(reported, err.Error()) }})
	if err != nil {
		t.Fatal(err)
	}
	b := &record.Batch{}
	b.Add(record.MustType("NoPackage", record.Field{Name: "x", Kind: record.Int}), 1)
	b.Add(record.MustType("NoPackage", record.Field{Name: "x", Kind: record.Int}), 2)
	if err := w.Consume(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	w.Close()
	if len(reported) != 1 || !strings.Contains(reported[0], "without a package") {
		t.Errorf("reported %q", reported)
	}
}
