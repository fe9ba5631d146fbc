package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// shardInput is the input of TestShardedAssemblySameTraces: every log of
// the shared Kieker corpus, batch by batch as its reader gives them, and
// generated OTLP-like traces whose spans are spread over many batches of
// three connections (origins), in a shuffled order, some batches mixing
// Kieker records and spans (so one batch feeds several workers).
func shardInput(t *testing.T) []*record.Batch {
	t.Helper()
	var out []*record.Batch
	for _, name := range testcorpus.LogNames(t) {
		r, err := kiekerlog.Open(testcorpus.Path(t, "kieker-logs", name), kiekerlog.Options{BatchSize: 97})
		if err != nil {
			t.Fatal(err)
		}
		err = r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
			c := &record.Batch{Origin: b.Origin}
			for i := range b.Records {
				c.AddRecord(&b.Records[i])
			}
			out = append(out, c)
			return nil
		}))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	kieker := len(out)
	rng := rand.New(rand.NewPCG(25, 2))
	type spanOf struct {
		id trace.ID
		s  trace.Span
	}
	var spans []spanOf
	for i := range 600 {
		id := trace.ID{Hi: rng.Uint64() | 1, Lo: uint64(i + 1)}
		n := 1 + rng.IntN(40)
		for j := range n {
			s := trace.Span{
				SpanID: trace.SpanID(j + 1), Operation: fmt.Sprintf("op%d", rng.IntN(7)),
				Service: fmt.Sprintf("svc%d", rng.IntN(3)), Host: fmt.Sprintf("h%d", i%5),
				Start: int64(1000*i + 10*j), Kind: trace.KindServer,
				Attributes: []trace.Attr{{Key: "http.route", Value: fmt.Sprintf("/r/%d", j%4), Type: trace.TypeString}},
				Resource:   &trace.Resource{Attributes: []trace.Attr{{Key: "service.name", Value: "svc", Type: trace.TypeString}}},
			}
			s.End = s.Start + int64(1+rng.IntN(500))
			if j > 0 {
				s.ParentID = trace.SpanID(1 + rng.IntN(j))
			}
			if j > 0 && rng.IntN(20) == 0 {
				s.ParentID = trace.SpanID(1000 + j) // a parent that never comes: broken
			}
			spans = append(spans, spanOf{id, s})
		}
	}
	rng.Shuffle(len(spans), func(i, j int) { spans[i], spans[j] = spans[j], spans[i] })
	conns := []record.Origin{{Peer: "10.0.0.1:4001", Session: "1"}, {Peer: "10.0.0.2:4002", Session: "2"}, {Peer: "10.0.0.3:4003", Session: "3"}}
	for len(spans) > 0 {
		n := min(1+rng.IntN(50), len(spans))
		b := &record.Batch{Origin: conns[rng.IntN(len(conns))]}
		for _, s := range spans[:n] {
			trace.AppendSpan(b, s.id, &s.s)
		}
		spans = spans[n:]
		// Now and then a batch of Kieker records joins this one.
		if k := rng.IntN(kieker + 40); k < kieker && out[k].Len() > 0 {
			for i := range out[k].Records {
				b.AddRecord(&out[k].Records[i])
			}
			out[k] = &record.Batch{Origin: out[k].Origin}
		}
		out = append(out, b)
	}
	// Interleave the Kieker logs' batches with the spans' (each keeps
	// its own order).
	ks, ss := out[:kieker], out[kieker:]
	mixed := make([]*record.Batch, 0, len(out))
	for len(ks) > 0 || len(ss) > 0 {
		if len(ss) == 0 || len(ks) > 0 && rng.IntN(3) == 0 {
			mixed, ks = append(mixed, ks[0]), ks[1:]
		} else {
			mixed, ss = append(mixed, ss[0]), ss[1:]
		}
	}
	return mixed
}

// assembleWith runs the batches through an engine with the given
// assembly workers and returns the traces a trace sink got, canonical
// (JSON, sorted), with the assembler's counts.
func assembleWith(t *testing.T, in []*record.Batch, workers int) ([]string, trace.Stats) {
	t.Helper()
	// A window no test outlives: every trace completes at the end, as
	// it would with one worker.
	e := New(Settings{AssemblyWorkers: workers, Traces: trace.Options{Window: time.Hour}})
	sink := &traceSink{}
	e.AddSink("traces", sink)
	e.AddSink("records", &memSink{})
	e.AddSource("replay", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
		for _, b := range in {
			c := &record.Batch{Origin: b.Origin}
			for i := range b.Records {
				c.AddRecord(&b.Records[i])
			}
			if err := out.Consume(ctx, c); err != nil {
				return err
			}
		}
		return nil
	}))
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(sink.traces))
	for i, tr := range sink.traces {
		out[i] = string(trace.AppendJSON(nil, tr))
	}
	slices.Sort(out)
	st := e.TraceStats()
	st.Open = 0
	return out, st
}

// TestShardedAssemblySameTraces: with several workers the engine
// assembles exactly the traces one worker does: Kieker event traces with
// their threads (TraceMetadata parents), OperationExecutionRecords and
// invocation links of the real logs, and spans of one trace that came in
// many batches over several connections.
func TestShardedAssemblySameTraces(t *testing.T) {
	in := shardInput(t)
	want, wantStats := assembleWith(t, in, 1)
	if len(want) < 600 {
		t.Fatalf("one worker: %d traces, want at least the 600 generated", len(want))
	}
	for _, workers := range []int{2, 3, 8} {
		got, st := assembleWith(t, in, workers)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%d workers: traces differ from one worker's (-want +got):\n%s", workers, diff)
		}
		if st != wantStats {
			t.Errorf("%d workers: stats %+v, want %+v", workers, st, wantStats)
		}
	}
	kieker := 0
	for _, s := range want {
		if strings.Contains(s, `"kieker.`) {
			kieker++
		}
	}
	t.Logf("%d batches, %d traces (%d Kieker), stats %+v", len(in), len(want), kieker, wantStats)
}

// TestShardedKiekerLinksAcrossConnections: a Kieker trace whose threads
// and invocations arrive on different connections, children first, is
// one trace with several workers too.
func TestShardedKiekerLinksAcrossConnections(t *testing.T) {
	cat := record.Builtin()
	meta, before, after := cat.Lookup(record.TraceMetadata), cat.Lookup(record.BeforeOperationEvent), cat.Lookup(record.AfterOperationEvent)
	metaRec := func(b *record.Batch, kid, parent int64, porder int, host string) {
		r := b.Add(meta, 1)
		set := func(name string, v record.Value) { r.Values[meta.FieldIndex(name)] = v }
		set("traceId", record.IntValue(kid))
		set("threadId", record.IntValue(kid))
		set("sessionId", record.StringValue("s"))
		set("hostname", record.StringValue(host))
		set("parentTraceId", record.IntValue(parent))
		set("parentOrderId", record.IntValue(int64(porder)))
	}
	call := func(b *record.Batch, kid int64, order int, op string, ts int64) {
		for k, typ := range []*record.Type{before, after} {
			r := b.Add(typ, 1)
			r.Values[typ.FieldIndex("timestamp")] = record.IntValue(ts + int64(k))
			r.Values[typ.FieldIndex("traceId")] = record.IntValue(kid)
			r.Values[typ.FieldIndex("orderIndex")] = record.IntValue(int64(order + k))
			r.Values[typ.FieldIndex("operationSignature")] = record.StringValue(op)
			r.Values[typ.FieldIndex("classSignature")] = record.StringValue("C")
		}
	}
	var in []*record.Batch
	for root := int64(1); root <= 40; root++ {
		child, task := root*1000+1, root*1000+2
		// The child thread first, on another connection than its parent.
		c := &record.Batch{Origin: record.Origin{Peer: "b", Session: "2", Host: "h2"}}
		metaRec(c, child, root, 1, "h2")
		call(c, child, 0, "child()", 50)
		// A task of a pooled thread, linked by invocation identifiers,
		// its identifier before its parent's.
		d := &record.Batch{Origin: record.Origin{Peer: "c", Session: "3", Host: "h3"}}
		trace.AppendInvocation(d, trace.Invocation{ID: root*10 + 2, ProcessID: 7, Node: "h3", ParentID: root * 10, ParentProcessID: 5, ParentNode: "h1", ParentOrderID: 1, TraceID: task, CreationTime: 60})
		metaRec(d, task, -1, -1, "h3")
		call(d, task, 0, "task()", 60)
		p := &record.Batch{Origin: record.Origin{Peer: "a", Session: "1", Host: "h1"}}
		trace.AppendInvocation(p, trace.Invocation{ID: root * 10, ProcessID: 5, Node: "h1", ParentID: -1, ParentOrderID: -1, TraceID: root, CreationTime: 1})
		metaRec(p, root, -1, -1, "h1")
		call(p, root, 0, "main()", 10)
		// Spans in the same batches, so every batch feeds several workers.
		for k, b := range []*record.Batch{c, d, p} {
			trace.AppendSpan(b, trace.ID{Hi: uint64(root), Lo: 77}, &trace.Span{SpanID: trace.SpanID(k + 1), ParentID: trace.SpanID(k), Operation: "GET", Start: 1, End: 2})
		}
		in = append(in, c, d, p)
	}
	want, _ := assembleWith(t, in, 1)
	got, _ := assembleWith(t, in, 4)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("4 workers: traces differ from one worker's (-want +got):\n%s", diff)
	}
	linked := 0
	for _, s := range want {
		if strings.Contains(s, "child()") && strings.Contains(s, "task()") && strings.Contains(s, "main()") {
			linked++
		}
	}
	if linked != 40 {
		t.Errorf("%d traces hold main, its child thread and its task, want 40", linked)
	}
}

// ackSink is a durable sink that takes records and traces and notes, at
// each flush, what it had consumed when the flush began.
type ackSink struct {
	mu              sync.Mutex
	records, traces map[int64]bool // consumed: record numbers, trace ids (Lo)
	flushedRecords  map[int64]bool
	flushedTraces   map[int64]bool
	tracesOnly      bool
}

func newAckSink(tracesOnly bool) *ackSink {
	return &ackSink{records: map[int64]bool{}, traces: map[int64]bool{}, flushedRecords: map[int64]bool{}, flushedTraces: map[int64]bool{}, tracesOnly: tracesOnly}
}

func (s *ackSink) Consume(_ context.Context, b *record.Batch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range b.Records {
		if r := &b.Records[i]; r.Type == trace.SpanType {
			s.records[r.Values[trace.SpanSpanID].Int()] = true
		}
	}
	return nil
}

func (s *ackSink) ConsumeTraces(_ context.Context, ts []*trace.Trace) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tr := range ts {
		s.traces[int64(tr.ID.Lo)] = true
	}
	return nil
}

func (s *ackSink) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range s.records {
		s.flushedRecords[k] = true
	}
	for k := range s.traces {
		s.flushedTraces[k] = true
	}
	return nil
}

func (s *ackSink) Close() error                { return nil }
func (s *ackSink) TraceSources() trace.Sources { return trace.AllSources }
func (s *ackSink) TracesOnly() bool            { return s.tracesOnly }

// TestShardedAssemblyAcks: with several workers a batch's Done callbacks
// are called once, without error, and only
// when every durable sink has flushed the batch's records and the traces
// the batch completed (whole traces, as a zorka agent sends them, spread
// over every worker).
func TestShardedAssemblyAcks(t *testing.T) {
	const batches, perBatch = 300, 6
	e := New(Settings{AssemblyWorkers: 4, FlushInterval: 5 * time.Millisecond, AckInterval: time.Millisecond})
	store, log := newAckSink(true), newAckSink(false)
	e.AddSink("store", store)
	e.AddSink("log", log)
	var mu sync.Mutex
	var order []int
	var problems []string
	calls := map[int]int{}
	e.AddSource("zico", pipeline.SourceFunc(func(ctx context.Context, out pipeline.Consumer) error {
		span := int64(0)
		for i := range batches {
			b := &record.Batch{Origin: record.Origin{Session: fmt.Sprint(i % 3)}}
			var ids, spans []int64
			for j := range perBatch {
				id := int64(i*perBatch + j + 1)
				ids = append(ids, id)
				for k := range 3 {
					span++
					spans = append(spans, span)
					trace.AppendSpan(b, trace.ID{Hi: 9, Lo: uint64(id)}, &trace.Span{SpanID: trace.SpanID(span), ParentID: trace.SpanID(span - int64(k)), Operation: "op", Start: 1, End: 2})
					if k == 0 {
						b.Records[b.Len()-1].Values[trace.SpanParentID] = record.IntValue(0)
					}
				}
				b.Records[b.Len()-1].Values[trace.SpanFlags] = record.IntValue(trace.FlagComplete)
			}
			b.Done = append(b.Done, func(err error) {
				mu.Lock()
				defer mu.Unlock()
				calls[i]++
				order = append(order, i)
				if err != nil {
					problems = append(problems, fmt.Sprintf("batch %d: %v", i, err))
				}
				store.mu.Lock()
				for _, id := range ids {
					if !store.flushedTraces[id] {
						problems = append(problems, fmt.Sprintf("batch %d acknowledged before the store flushed its trace %d", i, id))
					}
				}
				store.mu.Unlock()
				log.mu.Lock()
				for _, s := range spans {
					if !log.flushedRecords[s] {
						problems = append(problems, fmt.Sprintf("batch %d acknowledged before the log flushed its span record %d", i, s))
					}
				}
				log.mu.Unlock()
			})
			if err := out.Consume(ctx, b); err != nil {
				return err
			}
		}
		return nil
	}))
	if err := e.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, p := range problems[:min(len(problems), 10)] {
		t.Error(p)
	}
	if len(order) != batches {
		t.Errorf("%d callbacks, want %d", len(order), batches)
	}
	for i := range batches {
		if calls[i] != 1 {
			t.Errorf("batch %d acknowledged %d times", i, calls[i])
		}
	}
	if st := e.TraceStats(); st.Traces != batches*perBatch {
		t.Errorf("%d traces assembled, want %d", st.Traces, batches*perBatch)
	}
}
