package analysis

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestRandomLogsLikeKieker generates logs of interleaved event traces and
// OER traces, some of them broken in the ways Kieker rejects, and compares
// every graph with the oracle.
func TestRandomLogsLikeKieker(t *testing.T) {
	ops := []struct{ op, class string }{
		{"public void shop.Web.get(java.lang.String)", "shop.Web"},
		{"private int shop.Cart.total()", "shop.Cart"},
		{"public shop.Item shop.Db.find(long, int)", "shop.Db"},
		// The class signature names the component, not the signature's class.
		{"public shop.Item shop.Db.find(long)", "shop.Db$Proxy"},
		{"util.log", ""},
		{"static void helper()", ""},
	}
	for seed := range uint64(200) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			var streams [][]func(r *recs, ts int64)
			for id := int64(1); id <= 12; id++ {
				host := []string{"h1", "h2", "h3"}[rng.IntN(3)]
				if rng.IntN(3) == 0 {
					streams = append(streams, randomOERs(rng, id+1000, ops))
					continue
				}
				streams = append(streams, randomEvents(rng, id, host, ops))
			}
			r := &recs{t: t}
			ts := int64(1)
			for len(streams) > 0 { // interleave, each stream in order
				i := rng.IntN(len(streams))
				streams[i][0](r, ts)
				ts += 1 + rng.Int64N(1000)
				if streams[i] = streams[i][1:]; len(streams[i]) == 0 {
					streams = append(streams[:i], streams[i+1:]...)
				}
			}
			an := New(Options{})
			a := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Window: time.Hour, Emit: an.Add})
			a.AddBatch(&r.b)
			a.Flush()
			var rs []raw
			for i := range r.b.Records {
				rs = append(rs, rawOf(&r.b.Records[i]))
			}
			compareWithOracle(t, an, rs)
		})
	}
}

// randomEvents returns the records of one thread trace, maybe broken.
func randomEvents(rng *rand.Rand, id int64, host string, ops []struct{ op, class string }) []func(*recs, int64) {
	type ev struct {
		kind byte
		op   int
	}
	var evs []ev
	var call func(depth int)
	call = func(depth int) {
		o := rng.IntN(len(ops))
		evs = append(evs, ev{'b', o})
		for n := rng.IntN(3); depth < 4 && n > 0; n-- {
			call(depth + 1)
		}
		k := byte('a')
		if rng.IntN(5) == 0 {
			k = 'f'
		}
		evs = append(evs, ev{k, o})
	}
	call(0)
	meta := true
	switch rng.IntN(10) {
	case 0: // a call never returns
		evs = evs[:len(evs)-1]
	case 1: // an event lost in the middle
		if len(evs) > 2 {
			i := 1 + rng.IntN(len(evs)-2)
			evs = append(evs[:i], evs[i+1:]...)
		}
	case 2: // a return from another operation
		last := &evs[len(evs)-1]
		for o := ops[last.op].op; ops[last.op].op == o; {
			last.op = (last.op + 1) % len(ops)
		}
	case 3:
		meta = false
	case 4: // a second root call
		o := rng.IntN(len(ops))
		evs = append(evs, ev{'b', o}, ev{'a', o})
	case 5: // an event twice
		i := rng.IntN(len(evs))
		evs = append(evs[:i+1], evs[i:]...)
	}
	var out []func(*recs, int64)
	if meta {
		out = append(out, func(r *recs, _ int64) { r.meta(id, host) })
	}
	order := 0
	for i, e := range evs {
		o := order
		if i > 0 && evs[i-1] == e && e.kind == 'b' {
			o-- // the duplicate keeps its orderIndex
		}
		order = o + 1
		name := map[byte]string{'b': record.BeforeOperationEvent, 'a': record.AfterOperationEvent, 'f': record.AfterOperationFailedEvent}[e.kind]
		op := ops[e.op]
		out = append(out, func(r *recs, ts int64) {
			r.add(name, "timestamp", ts, "traceId", id, "orderIndex", o, "operationSignature", op.op, "classSignature", op.class)
		})
	}
	return out
}

// randomOERs returns the OERs of one trace on several hosts, maybe broken
// or untraced.
func randomOERs(rng *rand.Rand, id int64, ops []struct{ op, class string }) []func(*recs, int64) {
	type x struct {
		eoi, ess int
		op       string
		host     string
	}
	var xs []x
	var call func(ess int)
	call = func(ess int) {
		xs = append(xs, x{len(xs), ess, ops[rng.IntN(len(ops))].op, []string{"h1", "h2", "h3"}[rng.IntN(3)]})
		for n := rng.IntN(3); ess < 3 && n > 0; n-- {
			call(ess + 1)
		}
	}
	for n := 1 + rng.IntN(2); n > 0; n-- {
		call(0)
	}
	switch rng.IntN(8) {
	case 0: // ess jumps
		xs = append(xs, x{len(xs), xs[len(xs)-1].ess + 2, ops[0].op, "h1"})
	case 1: // eoi gap
		xs[len(xs)-1].eoi++
	case 2: // untraced
		id = -1
		for i := range xs {
			xs[i].eoi, xs[i].ess = -1, -1
		}
	}
	rng.Shuffle(len(xs), func(i, j int) { xs[i], xs[j] = xs[j], xs[i] })
	var out []func(*recs, int64)
	for _, e := range xs {
		d := int64(10 + rng.IntN(100))
		out = append(out, func(r *recs, ts int64) { r.oer(id, e.eoi, e.ess, ts, ts+d, e.op, e.host) })
	}
	return out
}
