package store

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/store/block"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// packedLoad returns batches of span records of every kind the store
// encodes: resources and scopes (shared by services), attributes of each
// type, events, links, errors, strings that repeat and strings that do
// not, spans of other hosts, missing parents, cycles, negative durations,
// copies of a span and span ids used twice.
func packedLoad() []*record.Batch {
	res := make([]*trace.Resource, 4)
	for i := range res {
		res[i] = &trace.Resource{Attributes: []trace.Attr{{Key: "service.name", Value: "svc-" + strconv.Itoa(i), Type: trace.TypeString},
			{Key: "process.pid", Value: strconv.Itoa(100 + i), Type: trace.TypeInt}}}
	}
	scope := &trace.Scope{Name: "lib", Version: "2.0", Attributes: []trace.Attr{{Key: "scope.kind", Value: "http", Type: trace.TypeString}}}
	var out []*record.Batch
	b := &record.Batch{}
	for n := range 6000 {
		if n%64 == 0 {
			b = &record.Batch{Origin: record.Origin{Host: "origin-" + strconv.Itoa(n/1000)}}
			out = append(out, b)
		}
		id := trace.ID{Hi: uint64(n/6 + 1), Lo: 0xabc}
		k := n % 6
		svc := n / 6 % 4
		s := trace.Span{SpanID: trace.SpanID(k + 1), Start: int64(1e15 + n*1000 + (k%3)*7), End: int64(1e15 + n*1000 + 90_000),
			Operation: "op-" + strconv.Itoa(k), Service: "svc-" + strconv.Itoa(svc), Host: "host-" + strconv.Itoa(svc%3),
			Kind: trace.Kind(k % 6), Thread: strconv.Itoa(n % 5), Process: strconv.Itoa(100 + svc)}
		if k > 0 {
			s.ParentID = trace.SpanID(k)
		}
		if k%2 == 0 {
			s.Resource, s.Scope = res[svc], scope
		}
		s.Attributes = []trace.Attr{{Key: "url.path", Value: "/item/" + strconv.Itoa(n*7919), Type: trace.TypeString},
			{Key: "n", Value: strconv.Itoa(n % 10), Type: trace.TypeInt}, {Key: "ok", Value: "true", Type: trace.TypeBool},
			{Key: "f", Value: "0.25", Type: trace.TypeDouble}, {Key: "raw", Value: "/wA=", Type: trace.TypeBytes}, {Key: "j", Value: `{"a":[1]}`, Type: trace.TypeJSON}}
		switch n % 97 {
		case 3:
			s.ParentID = 99 // missing
		case 5:
			s.ParentID = s.SpanID // its own parent
		case 7:
			s.End = s.Start - 5 // negative
		case 11:
			s.Operation = "unique " + strconv.Itoa(n) // an operation never seen again
			s.Service, s.Host = "", ""                // the origin's host
		}
		if n%8 == 3 {
			s.Events = []trace.Event{{Name: "cache.miss", Time: s.Start + 100, Attributes: []trace.Attr{{Key: "cache.key", Value: "k" + strconv.Itoa(n), Type: trace.TypeString}}}}
		}
		if n%13 == 4 {
			s.Links = []trace.Link{{TraceID: trace.ID{Hi: 9, Lo: uint64(n)}, SpanID: 5, TraceState: "a=b", Attributes: []trace.Attr{{Key: "l", Value: "1", Type: trace.TypeInt}}}}
		}
		if n%50 == 7 {
			s.Status, s.StatusMessage = trace.StatusError, "boom "+strconv.Itoa(n)
		}
		trace.AppendSpan(b, id, &s)
		switch n % 41 {
		case 1: // a copy
			trace.AppendSpan(b, id, &s)
		case 2: // another span with the id
			s.Operation = "other"
			trace.AppendSpan(b, id, &s)
		}
	}
	return out
}

// storeBlocks assembles the load (packed or not) into a store and
// returns its block objects by host, with the meta's id cleared (block
// ids are random), and how many traces were packed.
func storeBlocks(t *testing.T, load []*record.Batch, packed bool) (map[string][]byte, int) {
	t.Helper()
	var ts []*trace.Trace
	a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Window: time.Millisecond, Packed: packed,
		Emit: func(tr *trace.Trace) { ts = append(ts, tr) }})
	now := time.Unix(1_700_000_000, 0)
	s, err := Open(t.TempDir(), Options{Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	npacked := 0
	hand := func() {
		for _, tr := range ts {
			if tr.Packed != nil {
				npacked++
			}
		}
		if _, err := s.Append(ts); err != nil {
			t.Fatal(err)
		}
		ts = ts[:0]
	}
	for _, b := range load {
		a.AddBatch(b)
		a.Tick()
		hand()
	}
	a.Flush()
	hand()
	ctx := context.Background()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	objs, err := s.Bucket().List(ctx, block.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, o := range objs {
		host, _, name, ok := block.ParseKey(o.Key)
		if !ok {
			continue
		}
		p, err := s.Bucket().Get(ctx, o.Key)
		if err != nil {
			t.Fatal(err)
		}
		if name == block.MetaName {
			m, err := block.ParseMeta(p)
			if err != nil {
				t.Fatal(err)
			}
			m.ID = ""
			if p, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
		}
		k := host + "/" + name
		if _, dup := out[k]; dup {
			t.Fatalf("two blocks of host %s", host)
		}
		out[k] = p
	}
	return out, npacked
}

// TestPackedTracesStoreTheSameBlocks: traces the assembler emitted packed
// and stored through the store's Unpacker give the same blocks, byte for
// byte (data and meta), as the same traces made of Spans.
func TestPackedTracesStoreTheSameBlocks(t *testing.T) {
	load := packedLoad()
	want, np := storeBlocks(t, load, false)
	if np != 0 {
		t.Fatalf("%d traces packed without Options.Packed", np)
	}
	got, np := storeBlocks(t, load, true)
	if np < 800 {
		t.Fatalf("%d traces packed, want most of 1,000 (%d block objects)", np, len(got))
	}
	if len(want) < 4 {
		t.Fatalf("%d block objects: want blocks of several hosts", len(want))
	}
	if d := cmp.Diff(keys(want), keys(got)); d != "" {
		t.Fatalf("block objects (-unpacked +packed):\n%s", d)
	}
	for k, w := range want {
		if g := got[k]; !bytes.Equal(g, w) {
			t.Errorf("%s: %d bytes packed, %d unpacked, not the same", k, len(g), len(w))
		}
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, fmt.Sprintf("%s (%d B)", k, len(m[k])))
	}
	slices.Sort(out)
	return out
}
