package jfrevents

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	codec "github.com/tracebridge/tracebridge/internal/codec/jfr"
	"github.com/tracebridge/tracebridge/internal/record"
)

// load decodes the codec's committed recording into a Keeper as host h,
// and returns jfr summary's counts of it.
func load(t *testing.T, opt Options) (*Keeper, map[string]int64) {
	t.Helper()
	dir := filepath.Join("..", "codec", "jfr", "testdata")
	data, err := os.ReadFile(filepath.Join(dir, "small.jfr"))
	if err != nil {
		t.Fatal(err)
	}
	k := New(opt)
	s := codec.NewStream(codec.Options{})
	h, err := codec.ParseHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Open(bytes.NewReader(data), 0, h)
	if err != nil {
		t.Fatal(err)
	}
	b := &record.Batch{}
	for {
		_, err := c.Next(b, 100)
		for i := range b.Records {
			k.Add("h", &b.Records[i])
		}
		b.Reset()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	sum, err := os.ReadFile(filepath.Join(dir, "small.summary"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{}
	sc := bufio.NewScanner(bytes.NewReader(sum))
	for sc.Scan() {
		name, n, _ := strings.Cut(sc.Text(), " ")
		if name != "jdk.Metadata" && name != "jdk.CheckPoint" {
			want[name], _ = strconv.ParseInt(n, 10, 64)
		}
	}
	return k, want
}

func TestTypes(t *testing.T) {
	k, want := load(t, Options{PerType: 50})
	types := k.Types(context.Background(), "h")
	if len(types) != len(want) {
		t.Fatalf("%d types, jfr summary %d", len(types), len(want))
	}
	for _, tc := range types {
		if tc.Count != want[tc.Name] || tc.Kept != int(min(tc.Count, 50)) {
			t.Errorf("%s: count %d kept %d, jfr summary %d", tc.Name, tc.Count, tc.Kept, want[tc.Name])
		}
		if tc.Name == "jdk.ExecutionSample" && (tc.Label != "Method Profiling Sample" || len(tc.Category) == 0 || tc.Fields[0].Name != "startTime" || tc.Fields[0].Unit != "epoch-ns") {
			t.Errorf("%+v %+v", tc.TypeInfo, tc.Fields)
		}
	}
	if k.Types(context.Background(), "other") != nil || len(k.Hosts()) != 1 {
		t.Error("another host")
	}
}

func TestEvents(t *testing.T) {
	k, want := load(t, Options{})
	ctx := context.Background()
	all, err := k.Events(ctx, Query{Host: "h", Type: "jdk.JavaMonitorEnter", Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if int64(all.Total) != want["jdk.JavaMonitorEnter"] || len(all.Events) != all.Total || all.Cursor != "" {
		t.Fatalf("total %d, %d events, jfr summary %d", all.Total, len(all.Events), want["jdk.JavaMonitorEnter"])
	}
	for i := 1; i < len(all.Events); i++ {
		if all.Events[i].Time > all.Events[i-1].Time {
			t.Fatal("not newest first")
		}
	}
	// Pages of 7 walk the same events.
	var paged []int64
	for cur := ""; ; {
		p, err := k.Events(ctx, Query{Host: "h", Type: "jdk.JavaMonitorEnter", Limit: 7, Cursor: cur})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range p.Events {
			paged = append(paged, e.ID)
		}
		if cur = p.Cursor; cur == "" {
			break
		}
	}
	if len(paged) != all.Total {
		t.Fatalf("paged %d of %d", len(paged), all.Total)
	}
	// A thread, a field filter, a sort by duration.
	thread := all.Events[0].Thread
	byThread, _ := k.Events(ctx, Query{Host: "h", Type: "jdk.JavaMonitorEnter", Thread: strings.ToUpper(thread), Limit: 1000})
	n := 0
	for _, e := range all.Events {
		if e.Thread == thread {
			n++
		}
	}
	if byThread.Total != n || n == 0 {
		t.Errorf("thread %q: %d, want %d", thread, byThread.Total, n)
	}
	f, err := ParseFilter("duration>=1000000")
	if err != nil {
		t.Fatal(err)
	}
	long, err := k.Events(ctx, Query{Host: "h", Type: "jdk.JavaMonitorEnter", Filters: []Filter{f}, Sort: "duration", Asc: true, Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	dur := -1
	for i, fi := range long.Type.Fields {
		if fi.Name == "duration" {
			dur = i
		}
	}
	prev := int64(0)
	for _, e := range long.Events {
		d := e.Values[dur].(int64)
		if d < 1000000 || d < prev {
			t.Fatalf("duration %d after %d", d, prev)
		}
		prev = d
	}
	// One event with its whole stack; a page cuts stacks.
	one, err := k.Event(ctx, "h", all.Events[0].ID)
	if err != nil || len(one.Events) != 1 {
		t.Fatal(err)
	}
	for i, fi := range one.Type.Fields {
		if fi.Name == "stackTrace" {
			full, cut := one.Events[0].Values[i].([]any), all.Events[0].Values[i].([]any)
			if len(full) < len(cut) || len(cut) > MaxPageFrames+1 || len(full) == 0 {
				t.Errorf("stack: %d frames whole, %d in the page", len(full), len(cut))
			}
		}
	}
	for _, q := range []Query{
		{Host: "nope", Type: "jdk.JavaMonitorEnter"},
		{Host: "h", Type: "jdk.Nope"},
		{Host: "h", Type: "jdk.JavaMonitorEnter", Sort: "nope"},
		{Host: "h", Type: "jdk.JavaMonitorEnter", Filters: []Filter{{Field: "nope", Op: "=", Value: "1"}}},
		{Host: "h", Type: "jdk.JavaMonitorEnter", Cursor: "x"},
	} {
		if _, err := k.Events(ctx, q); err == nil {
			t.Errorf("%+v: no error", q)
		}
	}
	if _, err := ParseFilter("nothing"); err == nil {
		t.Error("a filter without an operator")
	}
}

// TestBounds: a host keeps at most PerType events of a type and PerHost
// in all; beyond MaxHosts the least recently heard host goes.
func TestBounds(t *testing.T) {
	k, want := load(t, Options{PerType: 100, PerHost: 300, MaxHosts: 1})
	kept := 0
	for _, tc := range k.Types(context.Background(), "h") {
		if tc.Kept > 100 || tc.Count != want[tc.Name] {
			t.Errorf("%s: kept %d, count %d", tc.Name, tc.Kept, tc.Count)
		}
		kept += tc.Kept
	}
	if kept != 300 {
		t.Errorf("kept %d, want 300", kept)
	}
	// A second host pushes the first out (MaxHosts 1).
	p, err := k.Events(context.Background(), Query{Host: "h", Type: "shop.Order", Limit: 1})
	if err != nil || p.Total == 0 {
		t.Fatal(err)
	}
	k.mu.Lock()
	var r record.Record
	for _, te := range k.hosts["h"].types {
		r = te.ring[te.head].rec.Clone()
		break
	}
	k.mu.Unlock()
	k.Add("h2", &r)
	if hosts := k.Hosts(); len(hosts) != 1 || hosts[0] != "h2" {
		t.Errorf("hosts %v", hosts)
	}
}

// BenchmarkAddBatch: keeping a recording's events in a full window
// allocates only for stack traces the first time a slot holds one.
func BenchmarkAddBatch(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("..", "codec", "jfr", "testdata", "small.jfr"))
	if err != nil {
		b.Fatal(err)
	}
	s := codec.NewStream(codec.Options{})
	h, _ := codec.ParseHeader(data)
	c, err := s.Open(bytes.NewReader(data), 0, h)
	if err != nil {
		b.Fatal(err)
	}
	batch := &record.Batch{}
	for {
		if _, err := c.Next(batch, 1<<20); errors.Is(err, io.EOF) {
			break
		}
	}
	batch.Origin.Host = "h"
	k := New(Options{PerType: 100, PerHost: 500})
	k.AddBatch(batch)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		k.AddBatch(batch)
	}
	b.ReportMetric(float64(b.N*batch.Len())/b.Elapsed().Seconds(), "events/s")
}

// BenchmarkDecodeBaseline decodes the same recording's events, the
// baseline BenchmarkAddBatch is compared with (events/s of each).
func BenchmarkDecodeBaseline(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("..", "codec", "jfr", "testdata", "small.jfr"))
	if err != nil {
		b.Fatal(err)
	}
	h, _ := codec.ParseHeader(data)
	batch := &record.Batch{}
	b.ReportAllocs()
	events := 0
	for range b.N {
		s := codec.NewStream(codec.Options{})
		c, err := s.Open(bytes.NewReader(data), 0, h)
		if err != nil {
			b.Fatal(err)
		}
		for {
			_, err := c.Next(batch, 1<<20)
			events += batch.Len()
			batch.Reset()
			if errors.Is(err, io.EOF) {
				break
			}
		}
	}
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
}

// TestWindowAfterDrops: events of several types added in a random order
// to a window that keeps fewer a host than a type allows: after every
// add, each type's window holds its newest events, in order, and no
// empty slot (a ring that had given up its oldest event to the host's
// bound and filled up again used to grow into the middle: it overwrote
// a kept event and showed an empty one, which made /api/v1/jfr/events
// panic).
func TestWindowAfterDrops(t *testing.T) {
	dir := filepath.Join("..", "codec", "jfr", "testdata")
	data, err := os.ReadFile(filepath.Join(dir, "small.jfr"))
	if err != nil {
		t.Fatal(err)
	}
	s := codec.NewStream(codec.Options{})
	h, err := codec.ParseHeader(data)
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Open(bytes.NewReader(data), 0, h)
	if err != nil {
		t.Fatal(err)
	}
	b := &record.Batch{}
	for {
		_, err := c.Next(b, b.Len()+1000)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	byType := map[string][]*record.Record{}
	var names []string
	for i := range b.Records {
		r := &b.Records[i]
		if byType[r.Type.Name] == nil {
			names = append(names, r.Type.Name)
		}
		byType[r.Type.Name] = append(byType[r.Type.Name], r)
	}
	names = names[:min(len(names), 4)]
	for seed := uint64(1); seed <= 20; seed++ {
		k := New(Options{PerType: 12, PerHost: 17})
		rnd := rand.New(rand.NewPCG(seed, 7))
		added := map[string][]int64{} // ids of each type, in order
		for step := 0; step < 400; step++ {
			name := names[rnd.IntN(len(names))]
			rs := byType[name]
			k.Add("h", rs[step%len(rs)])
			added[name] = append(added[name], k.hosts["h"].seq)
			for _, n := range names {
				te := k.hosts["h"].types[n]
				if te == nil {
					continue
				}
				ids := added[n]
				want := ids[len(ids)-te.n:]
				for i := 0; i < te.n; i++ {
					e := &te.ring[(te.head+i)%len(te.ring)]
					if e.rec.Type == nil || e.id != want[i] {
						t.Fatalf("seed %d step %d: %s: event %d of %d in the window is %d (type %v), want %d", seed, step, n, i, te.n, e.id, e.rec.Type, want[i])
					}
				}
			}
		}
	}
}
