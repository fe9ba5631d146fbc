package main

import (
	"fmt"
	"math/rand/v2"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
)

// The dialects a run can drive.
const (
	dialectKDB    = "kdb"
	dialectKieker = "kieker"
)

// KDB ids of the default mapping (kdb.DefaultMapping).
const (
	kdbBefore int32 = 1
	kdbAfter  int32 = 2
)

// traceShift puts the connection number (plus one) above the trace number
// in a traceId, so the verifier knows which connection sent a record.
const traceShift = 40

// baseTime is the first event's timestamp (2025-01-01T00:00:00Z in ns): a
// fixed base keeps runs reproducible.
const baseTime int64 = 1735689600_000000000

// signature is one operation: Kieker's operationSignature and its
// classSignature.
type signature struct{ op, class string }

// signatures returns the operations the generator calls: 8 classes with 6
// operations each, in the shape of Kieker's AspectJ probes.
func signatures() []signature {
	classes := []string{"CatalogService", "OrderService", "PaymentGateway", "InventoryRepository",
		"UserSession", "PricingEngine", "ShippingClient", "AuditLog"}
	methods := []string{"find", "save", "update", "validate", "load", "compute"}
	returns := []string{"void", "int", "java.lang.String", "boolean", "long", "java.util.List"}
	params := []string{"int", "java.lang.String", "long, int", "", "org.example.shop.Order", "int[]"}
	var sigs []signature
	for ci, c := range classes {
		class := "org.example.shop." + c
		for mi, m := range methods {
			k := (ci + mi) % len(returns)
			sigs = append(sigs, signature{
				op:    fmt.Sprintf("public %s %s.%s%d(%s)", returns[k], class, m, ci, params[(k+1)%len(params)]),
				class: class,
			})
		}
	}
	return sigs
}

// event is one generated Before or After event, in the compact form the
// verifier compares the log against.
type event struct {
	ts, trace int64
	order     int32
	sig       uint8 // index into signatures()
	after     bool
}

// genEvents returns at least n events of complete traces for connection
// conn: each trace is a random call tree of 1 to 24 calls, up to 12 deep,
// with orderIndex counting every event of the trace from 0 and timestamps
// increasing by 50 to 2050 ns per event. The output is deterministic.
func genEvents(conn, n int, nsigs int) []event {
	rng := rand.New(rand.NewPCG(uint64(conn)+1, 0x7472616365627269))
	evs := make([]event, 0, n+48)
	ts := baseTime
	stack := make([]uint8, 0, 12)
	for trace := int64(1); len(evs) < n; trace++ {
		id := int64(conn+1)<<traceShift | trace
		calls := 1 + rng.IntN(24)
		var order int32
		emit := func(sig uint8, after bool) {
			ts += 50 + int64(rng.IntN(2001))
			evs = append(evs, event{ts: ts, trace: id, order: order, sig: sig, after: after})
			order++
		}
		root := uint8(rng.IntN(nsigs))
		stack = append(stack[:0], root)
		emit(root, false)
		opened := 1
		for len(stack) > 0 {
			if opened < calls && len(stack) < cap(stack) && (len(stack) == 1 || rng.IntN(100) < 50) {
				s := uint8(rng.IntN(nsigs))
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

// stream is what one connection sends: a chunk of events encoded once and
// sent repeatedly. first is the chunk as sent the first time (for Kieker
// with the registry entries interleaved), rest as sent every other time;
// firstEnds[i] and restEnds[i] are the offsets just past event i, so that
// a send can stop after any whole record.
type stream struct {
	conn      int
	events    []event
	first     []byte
	rest      []byte
	firstEnds []int
	restEnds  []int
}

// records returns the number of events in one chunk.
func (s *stream) records() int64 { return int64(len(s.events)) }

// encoder encodes one connection's events in a dialect.
type encoder struct {
	dialect       string
	before, after *record.Type
	sigs          []signature
}

func newEncoder(dialect string, cat *record.Catalog, sigs []signature) (*encoder, error) {
	e := &encoder{dialect: dialect, sigs: sigs,
		before: cat.Lookup(record.BeforeOperationEvent), after: cat.Lookup(record.AfterOperationEvent)}
	if e.before == nil || e.after == nil {
		return nil, fmt.Errorf("record catalogue lacks Before/AfterOperationEvent")
	}
	switch dialect {
	case dialectKDB, dialectKieker:
	default:
		return nil, fmt.Errorf("unknown dialect %q (want kdb or kieker)", dialect)
	}
	return e, nil
}

// loggingTimestamp is the logging timestamp a record of ev carries in the
// dialect (KDB's binary dialect has none) and hence in the log.
func (e *encoder) loggingTimestamp(ev *event) int64 {
	if e.dialect == dialectKDB {
		return record.NoTimestamp
	}
	return ev.ts
}

// stream encodes events for connection conn.
func (e *encoder) stream(conn int, events []event) (*stream, error) {
	s := &stream{conn: conn, events: events}
	var b record.Batch
	rec := func(ev *event) *record.Record {
		b.Reset()
		t := e.before
		if ev.after {
			t = e.after
		}
		r := b.Add(t, e.loggingTimestamp(ev))
		r.Values[0] = record.IntValue(ev.ts)
		r.Values[1] = record.IntValue(ev.trace)
		r.Values[2] = record.IntValue(int64(ev.order))
		r.Values[3] = record.StringValue(e.sigs[ev.sig].op)
		r.Values[4] = record.StringValue(e.sigs[ev.sig].class)
		return r
	}
	switch e.dialect {
	case dialectKDB:
		var err error
		for i := range events {
			id := kdbBefore
			if events[i].after {
				id = kdbAfter
			}
			if s.first, err = kdb.AppendBinary(s.first, id, rec(&events[i])); err != nil {
				return nil, fmt.Errorf("connection %d: event %d: %w", conn, i, err)
			}
			s.firstEnds = append(s.firstEnds, len(s.first))
		}
		s.rest, s.restEnds = s.first, s.firstEnds
	case dialectKieker:
		// One encoder for both passes: the first registers every string
		// (inline entries before first use), the second finds them all
		// registered and writes bare frames.
		enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
		for pass := 0; pass < 2; pass++ {
			var buf []byte
			var ends []int
			for i := range events {
				var err error
				if buf, err = enc.Append(buf, rec(&events[i])); err != nil {
					return nil, fmt.Errorf("connection %d: event %d: %w", conn, i, err)
				}
				ends = append(ends, len(buf))
			}
			if pass == 0 {
				s.first, s.firstEnds = buf, ends
			} else {
				s.rest, s.restEnds = buf, ends
			}
		}
	}
	return s, nil
}
