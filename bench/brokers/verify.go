package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// tally is what the verifier found in a log.
type tally struct {
	records    int64 // Before/After events read
	distinct   int64 // distinct events among them
	duplicates int64 // records - distinct
	missing    int64 // events sent but not in the log
	bad        int64 // records that match no event sent
	metadata   int64 // KiekerMetadataRecords
	first      error // the first bad record
}

// verifier checks a log against the loads sent. The broker paths deliver
// at least once and may reorder after a redelivery, so a record is found
// by its (traceId, orderIndex), not by its position, and every copy is
// counted.
type verifier struct {
	loads []*load
	sigs  []benchkit.Signature
	seen  [][]uint32 // copies found of each event, by publisher
	t     tally
}

var _ pipeline.Consumer = (*verifier)(nil)

func newVerifier(loads []*load, sigs []benchkit.Signature) *verifier {
	v := &verifier{loads: loads, sigs: sigs, seen: make([][]uint32, len(loads))}
	for i, l := range loads {
		v.seen[i] = make([]uint32, len(l.events))
	}
	return v
}

// verifyLog reads the log in dir and tallies it against what was sent.
// The error names what is wrong: missing or unknown records, or a wrong
// number of KiekerMetadataRecords. Duplicates alone are not an error.
func verifyLog(ctx context.Context, dir string, loads []*load, sigs []benchkit.Signature) (tally, error) {
	v := newVerifier(loads, sigs)
	if err := benchkit.ReadLog(ctx, dir, v); err != nil {
		return tally{}, err
	}
	t := v.finish()
	return t, t.err()
}

// err reports a tally that does not hold every record exactly as sent.
func (t tally) err() error {
	var errs []error
	if t.bad > 0 {
		errs = append(errs, fmt.Errorf("%d records match no record sent; the first: %w", t.bad, t.first))
	}
	if t.missing > 0 {
		errs = append(errs, fmt.Errorf("%d records sent are not in the log", t.missing))
	}
	if t.metadata != 1 {
		errs = append(errs, fmt.Errorf("%d KiekerMetadataRecords where 1 was expected", t.metadata))
	}
	return errors.Join(errs...)
}

// finish counts distinct, duplicate and missing records.
func (v *verifier) finish() tally {
	t := v.t
	for _, seen := range v.seen {
		for _, n := range seen {
			if n == 0 {
				t.missing++
				continue
			}
			t.distinct++
			t.duplicates += int64(n) - 1
		}
	}
	return t
}

// Consume tallies the records of b.
func (v *verifier) Consume(_ context.Context, b *record.Batch) error {
	for i := range b.Records {
		if err := v.check(&b.Records[i]); err != nil {
			v.t.bad++
			if v.t.first == nil {
				v.t.first = err
			}
		}
	}
	return nil
}

func (v *verifier) check(r *record.Record) error {
	var after bool
	switch r.Type.Name {
	case record.KiekerMetadataRecord:
		v.t.metadata++
		return nil
	case record.BeforeOperationEvent:
	case record.AfterOperationEvent:
		after = true
	default:
		return fmt.Errorf("unexpected record type %s", r.Type.Name)
	}
	v.t.records++
	if len(r.Values) != 5 {
		return fmt.Errorf("%s with %d values", r.Type.Name, len(r.Values))
	}
	trace, order := r.Values[1].Int(), r.Values[2].Int()
	p := int(trace>>benchkit.TraceShift) - 1
	if p < 0 || p >= len(v.loads) {
		return fmt.Errorf("traceId %d names no publisher", trace)
	}
	l := v.loads[p]
	tn := trace & benchkit.TraceMask
	if tn < 1 || tn > int64(len(l.traceFirst)) {
		return fmt.Errorf("publisher %d sent no trace %d", p, tn)
	}
	end := len(l.events)
	if tn < int64(len(l.traceFirst)) {
		end = l.traceFirst[tn]
	}
	idx := int64(l.traceFirst[tn-1]) + order
	if order < 0 || idx >= int64(end) {
		return fmt.Errorf("publisher %d, trace %d: no orderIndex %d", p, tn, order)
	}
	ev := &l.events[idx]
	sig := v.sigs[ev.Sig]
	if after != ev.After || r.Values[0].Int() != ev.TS || r.Values[3].Str() != sig.Op ||
		r.Values[4].Str() != sig.Class || r.LoggingTimestamp != record.NoTimestamp {
		return fmt.Errorf("publisher %d, event %d: got %s ts=%d %d %d %d %q %q, sent after=%v %d %d %d %q %q",
			p, idx, r.Type.ShortName(), r.LoggingTimestamp, r.Values[0].Int(), trace, order, r.Values[3].Str(), r.Values[4].Str(),
			ev.After, ev.TS, ev.Trace, ev.Order, sig.Op, sig.Class)
	}
	v.seen[p][idx]++
	return nil
}
