package logwrite_test

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/logwrite"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestPackedTracesWriteTheSameLog: traces of span records emitted packed
// (read through the writer's lean Unpacker) give the log, byte for byte,
// that the same traces made of Spans give: every OperationExecutionRecord
// with its operation, host, times, eoi and ess, and the same registry.
// Spans with attributes, events and links (which the log leaves out),
// inline strings, names repeated across traces and broken trees.
func TestPackedTracesWriteTheSameLog(t *testing.T) {
	var b record.Batch
	for i := range 900 {
		s := trace.Span{SpanID: trace.SpanID(i%9 + 1), ParentID: trace.SpanID(i % 9), Start: int64(1000 + i%9*10), End: int64(2000 - i%9*10),
			Operation: fmt.Sprintf("GET /users/%d", i%37), Service: fmt.Sprint("svc", i%3), Host: "host",
			Attributes: []trace.Attr{{Key: "url.path", Value: fmt.Sprint("/users/", i), Type: trace.TypeString}}}
		switch i % 7 {
		case 0:
			s.Events = []trace.Event{{Name: "cache.miss", Time: 1500}}
		case 1:
			s.Service = "" // the host names it
			s.Links = []trace.Link{{TraceID: trace.ID{Hi: 1, Lo: 2}, SpanID: 3}}
		case 2:
			s.ParentID = 99 // a missing parent
		}
		trace.AppendSpan(&b, trace.ID{Hi: uint64(i/9 + 1), Lo: uint64(i/9 + 7)}, &s)
	}
	write := func(packed bool) map[string]string {
		var ts []*trace.Trace
		a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Packed: packed, Emit: func(t *trace.Trace) { ts = append(ts, t) }})
		a.AddBatch(&b)
		a.Flush()
		n := 0
		for _, tr := range ts {
			if tr.Packed != nil {
				n++
			}
		}
		if want := map[bool]int{true: len(ts), false: 0}[packed]; len(ts) != 100 || n != want {
			t.Fatalf("packed %v: %d traces, %d of them packed, want 100 and %d", packed, len(ts), n, want)
		}
		dir := t.TempDir()
		now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
		w, err := logwrite.New(logwrite.Config{Path: dir, Binary: true, Metadata: true, ConvertSpans: true,
			Hostname: "h", ControllerName: "c", Now: func() time.Time { return now }})
		if err != nil {
			t.Fatal(err)
		}
		// In two calls: the Unpacker's memory is reused.
		if err := w.ConsumeTraces(context.Background(), ts[:40]); err != nil {
			t.Fatal(err)
		}
		if err := w.ConsumeTraces(context.Background(), ts[40:]); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if recs := readAll(t, w.Dir(), false); len(recs) != 901 { // the metadata record and 900 OERs
			t.Fatalf("packed %v: %d records read back, want 901", packed, len(recs))
		}
		files := map[string]string{}
		err = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(path)
			rel, _ := filepath.Rel(dir, path)
			files[rel] = string(data)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	if d := cmp.Diff(write(false), write(true)); d != "" {
		t.Fatalf("the log of packed traces differs (-Spans +packed):\n%s", d)
	}
}
