package jfrview

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/record"
)

var (
	monitorEnter = record.MustType("jdk.JavaMonitorEnter",
		record.Field{Name: "startTime", Kind: record.Long},
		record.Field{Name: "duration", Kind: record.Long},
		record.Field{Name: "eventThread", Kind: record.String},
		record.Field{Name: "stackTrace", Kind: record.String, Array: true},
		record.Field{Name: "monitorClass", Kind: record.String})
	fileRead = record.MustType("jdk.FileRead",
		record.Field{Name: "startTime", Kind: record.Long},
		record.Field{Name: "duration", Kind: record.Long},
		record.Field{Name: "eventThread", Kind: record.String},
		record.Field{Name: "stackTrace", Kind: record.String, Array: true},
		record.Field{Name: "path", Kind: record.String},
		record.Field{Name: "bytesRead", Kind: record.Long})
)

// TestLimits: monitor classes beyond MaxClasses count under Other; only
// the MaxSlow slowest operations of a minute are kept, slowest first;
// minutes older than the history are forgotten when newer ones come; a
// host without events has no views.
func TestLimits(t *testing.T) {
	k := New(2 * time.Minute)
	base := time.Now().Truncate(time.Minute).UnixNano()
	b := &record.Batch{Origin: record.Origin{Host: "jvm"}}
	for i := 0; i < MaxClasses+5; i++ {
		r := b.Add(monitorEnter, base)
		r.Values[0], r.Values[1] = record.IntValue(base), record.IntValue(int64(i+1))
		r.Values[4] = record.StringValue(fmt.Sprintf("C%d", i))
	}
	for i := 0; i < 3*MaxSlow; i++ {
		r := b.Add(fileRead, base)
		r.Values[0], r.Values[1] = record.IntValue(base+int64(i)), record.IntValue(int64(i))
		r.Values[4], r.Values[5] = record.StringValue("/tmp/f"), record.IntValue(10)
	}
	k.Consume(b)
	v, err := k.Views(context.Background(), "jvm", base-1, base+int64(time.Minute))
	if err != nil || v == nil {
		t.Fatalf("views %v %v", v, err)
	}
	if len(v.Monitors) != MaxClasses+1 {
		t.Errorf("%d monitor classes, want %d", len(v.Monitors), MaxClasses+1)
	}
	var other *Monitor
	for i := range v.Monitors {
		if v.Monitors[i].Class == Other {
			other = &v.Monitors[i]
		}
	}
	if other == nil || other.Count != 5 || other.MaxNs != MaxClasses+5 {
		t.Errorf("other classes: %+v", other)
	}
	if len(v.SlowIO) != MaxSlow || v.SlowIO[0].DurationNs != 3*MaxSlow-1 || v.SlowIO[MaxSlow-1].DurationNs != 2*MaxSlow || v.SlowIO[0].Target != "/tmp/f" {
		t.Errorf("slow I/O: %d, first %+v", len(v.SlowIO), v.SlowIO[0])
	}
	if v, _ := k.Views(context.Background(), "other", 0, base+int64(time.Hour)); v != nil {
		t.Errorf("another host: %+v", v)
	}
	// Three minutes later the first minute is gone.
	later := base + 3*int64(time.Minute)
	b.Reset()
	b.Origin.Host = "jvm"
	r := b.Add(monitorEnter, later)
	r.Values[0], r.Values[1], r.Values[4] = record.IntValue(later), record.IntValue(7), record.StringValue("Late")
	k.Consume(b)
	v, _ = k.Views(context.Background(), "jvm", 0, later+1)
	if v == nil || len(v.Monitors) != 1 || v.Monitors[0].Class != "Late" || len(v.SlowIO) != 0 {
		t.Errorf("after the history: %+v", v)
	}
}
