package benchkit

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/record"
)

func TestSignatures(t *testing.T) {
	sigs := Signatures()
	if len(sigs) != numSignatures {
		t.Fatalf("%d signatures, want %d", len(sigs), numSignatures)
	}
	seen := map[string]bool{}
	for _, s := range sigs {
		if seen[s.Op] {
			t.Fatalf("%q twice", s.Op)
		}
		seen[s.Op] = true
	}
	if want := (Signature{"public int org.example.shop.CatalogService.save0(long, int)", "org.example.shop.CatalogService"}); sigs[1] != want {
		t.Fatalf("signature 1 = %+v, want %+v", sigs[1], want)
	}
}

func TestEventsFormTraces(t *testing.T) {
	for _, src := range []int{0, 3} {
		t.Run(fmt.Sprint("src", src), func(t *testing.T) {
			evs := Events(1, src, 5000)
			if len(evs) < 5000 {
				t.Fatalf("%d events, want at least 5000", len(evs))
			}
			if again := Events(1, src, 5000); !cmp.Equal(evs, again) {
				t.Fatal("Events is not deterministic")
			}
			if other := Events(2, src, 5000); cmp.Equal(evs[:100], other[:100]) {
				t.Fatal("another seed gives the same events")
			}
			var stack []uint8
			var trace int64
			for i, ev := range evs {
				if int(ev.Trace>>TraceShift) != src+1 {
					t.Fatalf("event %d: traceId %d does not name source %d", i, ev.Trace, src)
				}
				if i > 0 && ev.TS <= evs[i-1].TS {
					t.Fatalf("event %d: timestamp %d not after %d", i, ev.TS, evs[i-1].TS)
				}
				if int(ev.Sig) >= numSignatures {
					t.Fatalf("event %d: signature %d", i, ev.Sig)
				}
				if len(stack) == 0 { // a new trace starts
					if ev.Trace&TraceMask != trace&TraceMask+1 || ev.Order != 0 || ev.After {
						t.Fatalf("event %d: %+v does not start the trace after %d", i, ev, trace)
					}
					trace = ev.Trace
				} else if ev.Trace != trace || ev.Order != evs[i-1].Order+1 {
					t.Fatalf("event %d: %+v does not continue trace %d", i, ev, trace)
				}
				if !ev.After {
					if stack = append(stack, ev.Sig); len(stack) > maxDepth {
						t.Fatalf("event %d: depth %d", i, len(stack))
					}
					continue
				}
				if top := stack[len(stack)-1]; top != ev.Sig {
					t.Fatalf("event %d: After of operation %d closes %d", i, ev.Sig, top)
				}
				stack = stack[:len(stack)-1]
			}
			if len(stack) != 0 {
				t.Fatalf("the last trace is open: %v", stack)
			}
		})
	}
}

func TestRecorder(t *testing.T) {
	sigs := Signatures()
	r, err := NewRecorder(record.Builtin(), sigs)
	if err != nil {
		t.Fatal(err)
	}
	var b record.Batch
	for _, ev := range []Event{
		{TS: 10, Trace: 1<<TraceShift | 1, Order: 0, Sig: 7},
		{TS: 20, Trace: 1<<TraceShift | 1, Order: 1, Sig: 7, After: true},
	} {
		b.Reset()
		rec := r.Add(&b, &ev, 99)
		want := []record.Value{record.IntValue(ev.TS), record.IntValue(ev.Trace), record.IntValue(int64(ev.Order)),
			record.StringValue(sigs[7].Op), record.StringValue(sigs[7].Class)}
		name, id := record.BeforeOperationEvent, int32(1)
		if ev.After {
			name, id = record.AfterOperationEvent, 2
		}
		if rec.Type.Name != name || rec.LoggingTimestamp != 99 || !cmp.Equal(rec.Values, want) {
			t.Fatalf("record %s %d %v, want %s 99 %v", rec.Type.Name, rec.LoggingTimestamp, rec.Values, name, want)
		}
		if ev.KDBID() != id {
			t.Fatalf("KDBID = %d, want %d", ev.KDBID(), id)
		}
	}
	if _, err := NewRecorder(record.NewCatalog(), sigs); err == nil {
		t.Fatal("NewRecorder accepts a catalogue without Before/AfterOperationEvent")
	}
}

// TestRepeatID: a repetition's traceIds keep the connection's bits and
// the trace number, differ from every other repetition's (up to 2^16),
// and repetition 0 is the id itself.
func TestRepeatID(t *testing.T) {
	id := int64(3)<<TraceShift | 12345
	if RepeatID(id, 0) != id {
		t.Fatalf("repetition 0: %d, want %d", RepeatID(id, 0), id)
	}
	seen := map[int64]int64{}
	for rep := range int64(1 << (TraceShift - RepeatShift)) {
		x := RepeatID(id, rep)
		if x>>TraceShift != 3 || x&(1<<RepeatShift-1) != 12345 {
			t.Fatalf("repetition %d: %#x lost the connection's or the trace's bits", rep, x)
		}
		if r, dup := seen[x]; dup {
			t.Fatalf("repetitions %d and %d share traceId %#x", r, rep, x)
		}
		seen[x] = rep
	}
}
