package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/record"
)

// TestServeSplitStage runs serve with --split: a trace crossing from
// component a.b into c.d arrives as two linked partial traces; split
// --merge gives back the trace that was sent.
func TestServeSplitStage(t *testing.T) {
	m, _ := kdb.DefaultMapping(catalog)
	var wire []byte
	var b record.Batch
	tm := b.Add(catalog.Lookup(record.TraceMetadata), -1)
	tm.Values[0] = record.IntValue(77)
	tm.Values[2] = record.StringValue("<no-session-id>")
	tm.Values[3] = record.StringValue("host")
	tm.Values[4] = record.IntValue(77)
	tm.Values[5] = record.IntValue(-1)
	id, _ := m.ID(tm.Type)
	wire, _ = kdb.AppendBinary(wire, id, tm)
	event := func(name string, oi int, op, cls string) {
		r := b.Add(catalog.Lookup(name), -1)
		r.Values[0] = record.IntValue(int64(1000 + oi))
		r.Values[1] = record.IntValue(77)
		r.Values[2] = record.IntValue(int64(oi))
		r.Values[3] = record.StringValue(op)
		r.Values[4] = record.StringValue(cls)
		id, _ := m.ID(r.Type)
		wire, _ = kdb.AppendBinary(wire, id, r)
	}
	event(record.BeforeOperationEvent, 0, "void m()", "a.b.X")
	event(record.BeforeOperationEvent, 1, "void n()", "c.d.Y")
	event(record.BeforeOperationEvent, 2, "void o()", "c.d.Y")
	event(record.AfterOperationEvent, 3, "void o()", "c.d.Y")
	event(record.AfterOperationEvent, 4, "void n()", "c.d.Y")
	event(record.AfterOperationEvent, 5, "void m()", "a.b.X")

	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-t", "tcp-server", "-p", "0", "--split", "package:2", "--data-dir", "logs")
	send(t, p.Receivers["tcp-server"], wire)
	time.Sleep(300 * time.Millisecond)
	p.Stop()
	var traces []string
	for _, r := range bridgetest.ReadLogSkipBad(t, p.LogDir) {
		if r.Type.Name == record.TraceMetadata {
			traces = append(traces, r.Values[0].Format(record.Long)+"<-"+r.Values[4].Format(record.Long)+"@"+r.Values[5].Format(record.Int))
		}
	}
	if len(traces) != 2 || !strings.HasSuffix(traces[1], "<-77@1") {
		t.Fatalf("partial traces %v, want the root and a child of 77 at orderIndex 1", traces)
	}
	merged := strings.TrimSpace(ok(t, "split", "--merge", p.LogDir, filepath.Join(dir, "merged")).stdout)
	var got []string
	for _, r := range bridgetest.ReadLogSkipBad(t, lastLine(merged)) {
		if r.Type.Name != record.KiekerMetadataRecord {
			got = append(got, r.Type.ShortName()+" "+r.Values[0].Format(record.Long)+" "+r.Values[2].Format(record.Int))
		}
	}
	want := "TraceMetadata 77 0|BeforeOperationEvent 1000 0|BeforeOperationEvent 1001 1|BeforeOperationEvent 1002 2|AfterOperationEvent 1003 3|AfterOperationEvent 1004 4|AfterOperationEvent 1005 5"
	if strings.Join(got, "|") != want {
		t.Fatalf("merged:\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
