package benchkit

import (
	"fmt"
	"math/rand/v2"

	"github.com/tracebridge/tracebridge/internal/record"
)

// TraceShift puts the number of the connection or publisher that sends an
// event (plus one) above the trace number in its traceId, so that a
// verifier knows who sent a record: traceId = (src+1)<<TraceShift | trace.
const (
	TraceShift = 40
	TraceMask  = 1<<TraceShift - 1 // the trace number's bits
	// RepeatShift: a program that sends its events again gives each
	// repetition traceIds of its own (RepeatID), the repetition's number
	// in the trace number's bits from RepeatShift up (Events numbers its
	// traces below 1<<RepeatShift for n up to 1<<24).
	RepeatShift = 24
)

// RepeatID returns the traceId that trace id has in repetition rep of
// the events (rep 0: id itself). Repetitions 2^16 apart share ids.
func RepeatID(id, rep int64) int64 {
	return id ^ (rep&(1<<(TraceShift-RepeatShift)-1))<<RepeatShift
}

// baseTime is the first event's timestamp (2025-01-01T00:00:00Z in ns): a
// fixed base keeps runs reproducible.
const baseTime int64 = 1735689600_000000000

// Shape of the generated traces.
const (
	numSignatures = 8 * 6 // len(Signatures())
	maxCalls      = 24    // calls in a trace at most
	maxDepth      = 12    // nesting depth at most
)

// Signature is one operation: Kieker's operationSignature and its
// classSignature.
type Signature struct{ Op, Class string }

// Signatures returns the 48 operations Events calls (8 classes with 6
// operations each, in the shape of Kieker's AspectJ probes), indexed by
// Event.Sig.
func Signatures() []Signature {
	classes := []string{"CatalogService", "OrderService", "PaymentGateway", "InventoryRepository",
		"UserSession", "PricingEngine", "ShippingClient", "AuditLog"}
	methods := []string{"find", "save", "update", "validate", "load", "compute"}
	returns := []string{"void", "int", "java.lang.String", "boolean", "long", "java.util.List"}
	params := []string{"int", "java.lang.String", "long, int", "", "org.example.shop.Order", "int[]"}
	sigs := make([]Signature, 0, numSignatures)
	for ci, c := range classes {
		class := "org.example.shop." + c
		for mi, m := range methods {
			k := (ci + mi) % len(returns)
			sigs = append(sigs, Signature{
				Op:    fmt.Sprintf("public %s %s.%s%d(%s)", returns[k], class, m, ci, params[(k+1)%len(params)]),
				Class: class,
			})
		}
	}
	return sigs
}

// Event is one generated BeforeOperationEvent or AfterOperationEvent, in
// the compact form verifiers compare a log against.
type Event struct {
	TS, Trace int64 // timestamp, traceId
	Order     int32 // orderIndex
	Sig       uint8 // index into Signatures()
	After     bool
}

// KDBID returns the event's type id in KDB's default mapping
// (kdb.DefaultMapping, as the Perl probes send them): 1 Before, 2 After.
func (ev *Event) KDBID() int32 {
	if ev.After {
		return 2
	}
	return 1
}

// Events returns at least n events of complete traces sent by src (a
// connection or publisher number from 0): each trace is a random call tree
// of 1 to 24 calls up to 12 deep, its traceId names src (see TraceShift)
// and numbers the traces from 1, orderIndex counts every event of the
// trace from 0, and timestamps rise by 50 to 2050 ns per event. Every
// (traceId, orderIndex) is unique. The output is a function of seed, src
// and n alone; a program picks its own seed.
func Events(seed uint64, src, n int) []Event { return TraceEvents(seed, src, n, 0) }

// TraceEvents is Events with every trace of exactly calls calls (barlib's
// load: traces of 1,000 calls); calls ≤ 0 means Events' 1 to 24.
func TraceEvents(seed uint64, src, n, calls int) []Event {
	rng := rand.New(rand.NewPCG(uint64(src)+1, seed))
	evs := make([]Event, 0, n+2*max(maxCalls, calls))
	ts := baseTime
	stack := make([]uint8, 0, maxDepth)
	for trace := int64(1); len(evs) < n; trace++ {
		id := int64(src+1)<<TraceShift | trace
		want := calls
		if want <= 0 {
			want = 1 + rng.IntN(maxCalls)
		}
		var order int32
		emit := func(sig uint8, after bool) {
			ts += 50 + int64(rng.IntN(2001))
			evs = append(evs, Event{TS: ts, Trace: id, Order: order, Sig: sig, After: after})
			order++
		}
		root := uint8(rng.IntN(numSignatures))
		stack = append(stack[:0], root)
		emit(root, false)
		opened := 1
		for len(stack) > 0 {
			if opened < want && len(stack) < cap(stack) && (len(stack) == 1 || rng.IntN(100) < 50) {
				s := uint8(rng.IntN(numSignatures))
				stack = append(stack, s)
				emit(s, false)
				opened++
				continue
			}
			emit(stack[len(stack)-1], true)
			stack = stack[:len(stack)-1]
		}
	}
	return evs
}

// Recorder turns events into records of a catalogue's
// BeforeOperationEvent and AfterOperationEvent types.
type Recorder struct {
	before, after *record.Type
	sigs          []Signature
}

// NewRecorder returns a Recorder for the types of cat and the operations
// sigs (normally Signatures()).
func NewRecorder(cat *record.Catalog, sigs []Signature) (*Recorder, error) {
	r := &Recorder{before: cat.Lookup(record.BeforeOperationEvent), after: cat.Lookup(record.AfterOperationEvent), sigs: sigs}
	if r.before == nil || r.after == nil {
		return nil, fmt.Errorf("record catalogue lacks Before/AfterOperationEvent")
	}
	return r, nil
}

// Add adds ev to b as a record with the logging timestamp ts and returns
// it; the pointer is valid until the next Add to b or its Reset.
func (r *Recorder) Add(b *record.Batch, ev *Event, ts int64) *record.Record {
	t := r.before
	if ev.After {
		t = r.after
	}
	rec := b.Add(t, ts)
	rec.Values[0] = record.IntValue(ev.TS)
	rec.Values[1] = record.IntValue(ev.Trace)
	rec.Values[2] = record.IntValue(int64(ev.Order))
	rec.Values[3] = record.StringValue(r.sigs[ev.Sig].Op)
	rec.Values[4] = record.StringValue(r.sigs[ev.Sig].Class)
	return rec
}
