package control

import (
	"context"
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

var cat = record.Builtin()

// batch has one record per (type, host, trace).
func batch(origin string, recs ...[3]string) *record.Batch {
	b := &record.Batch{Origin: record.Origin{Host: origin}}
	for _, r := range recs {
		t := cat.Lookup(r[0])
		rec := b.Add(t, -1)
		if j := t.FieldIndex("hostname"); j >= 0 {
			rec.Values[j] = record.StringValue(r[1])
		}
		if j := t.FieldIndex("traceId"); j >= 0 {
			var id int64
			for _, c := range r[2] {
				id = id*10 + int64(c-'0')
			}
			rec.Values[j] = record.IntValue(id)
		}
	}
	return b
}

func names(b *record.Batch) []string {
	var out []string
	for i := range b.Records {
		out = append(out, b.Records[i].Type.ShortName())
	}
	return out
}

func apply(t *testing.T, c *Controller, reqs ...streammsg.ControlRequest) {
	t.Helper()
	for _, r := range reqs {
		if _, err := c.Apply(r); err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
	}
}

func TestFilter(t *testing.T) {
	c, err := Open(Options{})
	if err != nil {
		t.Fatal(err)
	}
	var got *record.Batch
	st := c.Stage()(pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error { got = b; return nil }))
	ctx := context.Background()
	in := func() *record.Batch {
		return batch("", [3]string{record.TraceMetadata, "a", "1"}, [3]string{record.BeforeOperationEvent, "", "1"},
			[3]string{record.OperationExecutionRecord, "b", "2"}, [3]string{record.OperationExecutionRecord, "a", "3"})
	}
	st.Consume(ctx, in())
	if len(names(got)) != 4 {
		t.Fatalf("nothing set: %v", names(got))
	}
	apply(t, c, streammsg.ControlRequest{Op: "disable", Type: "BeforeOperationEvent"}, streammsg.ControlRequest{Op: "disable", Host: "b"})
	st.Consume(ctx, in())
	if diff := cmp.Diff([]string{"TraceMetadata", "OperationExecutionRecord"}, names(got)); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	// A batch whose origin names a disabled host loses everything.
	b := batch("b", [3]string{record.TraceMetadata, "b", "1"})
	st.Consume(ctx, b)
	if got.Len() != 0 {
		t.Fatalf("%v", names(got))
	}
	apply(t, c, streammsg.ControlRequest{Op: "enable", Type: record.BeforeOperationEvent}, streammsg.ControlRequest{Op: "enable", Host: "b"})
	st.Consume(ctx, in())
	if len(names(got)) != 4 {
		t.Fatalf("all enabled again: %v", names(got))
	}
	// Emit hands the same batch on.
	em := st.(pipeline.Emitter)
	b = in()
	nb, err := em.Emit(ctx, b)
	if err != nil || nb != b {
		t.Fatalf("Emit to a consumer: %v %v", nb == b, err)
	}
}

// TestSample: by trace id for types with one (the same traces kept
// whatever the batch), else every 1/rate-th record.
func TestSample(t *testing.T) {
	c, _ := Open(Options{})
	apply(t, c, streammsg.ControlRequest{Op: "sample", Type: "BeforeOperationEvent", Rate: 0.25},
		streammsg.ControlRequest{Op: "sample", Type: "KiekerMetadataRecord", Rate: 0.1})
	var kept []int64
	n := 0
	st := c.Stage()(pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		for i := range b.Records {
			if v, ok := b.Records[i].Field("traceId"); ok {
				kept = append(kept, v.Int())
			} else {
				n++
			}
		}
		return nil
	}))
	b := &record.Batch{}
	for i := range 4000 {
		b.Add(cat.Lookup(record.BeforeOperationEvent), -1).Values[1] = record.IntValue(int64(i % 2000))
		b.Add(cat.Lookup(record.KiekerMetadataRecord), -1)
	}
	st.Consume(context.Background(), b)
	if len(kept) < 800 || len(kept) > 1200 || n != 400 {
		t.Fatalf("kept %d of 4000 events, %d of 4000 metadata records", len(kept), n)
	}
	seen := map[int64]int{}
	for _, id := range kept {
		seen[id]++
	}
	for id, k := range seen {
		if k != 2 {
			t.Fatalf("trace %d kept %d times of 2", id, k)
		}
	}
	apply(t, c, streammsg.ControlRequest{Op: "sample", Type: "BeforeOperationEvent", Rate: 1})
	if st := c.State(); len(st.Samples) != 1 {
		t.Fatalf("rate 1 ends sampling: %+v", st.Samples)
	}
}

func TestCommands(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sub", "control.json")
	c, err := Open(Options{StateFile: file})
	if err != nil {
		t.Fatal(err)
	}
	c.SetKnownTypes(func() []string { return []string{"jdk.ExecutionSample", "x.BeforeOperationEvent"} })
	var changes []string
	c.OnChange(func(old, now streammsg.ControlState) {
		add, rm := now.Diff(&old)
		changes = append(changes, strings.Join(add, ";")+"|"+strings.Join(rm, ";"))
	})
	for _, tc := range []struct {
		req  streammsg.ControlRequest
		want string
	}{
		{streammsg.ControlRequest{Op: "disable", Type: "ExecutionSample"}, ""},
		{streammsg.ControlRequest{Op: "disable", Type: "ExecutionSample"}, ""}, // no change
		{streammsg.ControlRequest{Op: "disable", Type: "BeforeOperationEvent"}, "ambiguous"},
		{streammsg.ControlRequest{Op: "disable", Type: "kieker.common.record.flow.trace.Trace"}, ""}, // a legacy name
		{streammsg.ControlRequest{Op: "disable"}, "needs a record type"},
		{streammsg.ControlRequest{Op: "enable", Type: "T", Host: "h"}, "not both"},
		{streammsg.ControlRequest{Op: "sample", Type: "ExecutionSample", Rate: 0}, "sample rate"},
		{streammsg.ControlRequest{Op: "probe"}, "pattern"},
		{streammsg.ControlRequest{}, "no operation"},
		{streammsg.ControlRequest{Op: "enable", Type: "jdk.ExecutionSample"}, ""},
	} {
		_, err := c.Apply(tc.req)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrCommand)) {
			t.Errorf("%+v: %v", tc.req, err)
		}
	}
	want := []string{"disable jdk.ExecutionSample|", "disable kieker.common.record.flow.trace.TraceMetadata|", "|disable jdk.ExecutionSample"}
	if diff := cmp.Diff(want, changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	again, err := Open(Options{StateFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if st := again.State(); len(st.DisabledTypes) != 1 || st.DisabledTypes[0] != record.TraceMetadata || st.Changes != 3 {
		t.Fatalf("reopened: %+v", st)
	}
}

// TestProbe: a probe command reaches a Kieker TCP controller as a
// remote-control record in Kieker's single-socket format.
func TestProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan *record.Record, 2)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			var buf []byte
			tmp := make([]byte, 4096)
			for {
				n, err := conn.Read(tmp)
				buf = append(buf, tmp[:n]...)
				if err != nil {
					break
				}
			}
			conn.Close()
			d := kieker.NewDecoder(kieker.Options{Catalog: cat, Inline: true})
			var b record.Batch
			if _, err := d.Decode(buf, &b); err != nil || b.Len() != 1 {
				t.Errorf("decode: %v, %d records", err, b.Len())
				got <- nil
				continue
			}
			r := b.Records[0].Clone()
			got <- &r
		}
	}()
	c, _ := Open(Options{Probes: []Probe{{Host: "shop", Address: ln.Addr().String()}, {Host: "gone", Address: "127.0.0.1:1"}}, DialTimeout: time.Second})
	msg, err := c.Apply(streammsg.ControlRequest{Op: "probe", Pattern: "public void shop.Cart.*(..)", Active: true})
	if err != nil || !strings.Contains(msg, "not reached") {
		t.Fatalf("%q %v", msg, err)
	}
	r := <-got
	if r == nil || r.Type.Name != record.Prefix+"remotecontrol.ActivationEvent" || r.Values[0].Str() != "public void shop.Cart.*(..)" {
		t.Fatalf("controller got %v", r)
	}
	if _, err := c.Apply(streammsg.ControlRequest{Op: "probe", Host: "shop", Pattern: "*"}); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r == nil || r.Type.ShortName() != "DeactivationEvent" {
		t.Fatalf("controller got %v", r)
	}
	if _, err := c.Apply(streammsg.ControlRequest{Op: "probe", Host: "gone", Pattern: "*"}); err == nil || !strings.Contains(err.Error(), "no probe controller reached") {
		t.Fatalf("unreachable: %v", err)
	}
	if _, err := c.Apply(streammsg.ControlRequest{Op: "probe", Host: "elsewhere", Pattern: "*"}); err == nil {
		t.Fatal("a host without a controller")
	}
	st := c.State()
	if len(st.Probes) != 2 || st.Probes[1].Active || st.Probes[1].Host != "shop" {
		t.Fatalf("probes %+v", st.Probes)
	}
}
