package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// verifier checks a log against what the connections sent: every record
// of connection c must be, in order, the next event of c's chunk (sent
// over and over, each time with its own traceIds: stream.traceID), with
// the logging timestamp the dialect carries; the log
// must hold one KiekerMetadataRecord and nothing else.
type verifier struct {
	enc     *encoder
	streams []*stream
	seen    []int64 // records of each connection found so far

	metadata int64
	bad      int64
	first    error // the first problem found
}

var _ pipeline.Consumer = (*verifier)(nil)

// verifyLog reads the log in dir and compares it with what was sent.
func verifyLog(ctx context.Context, dir string, enc *encoder, streams []*stream, sent []sent) error {
	v := &verifier{enc: enc, streams: streams, seen: make([]int64, len(streams))}
	if err := benchkit.ReadLog(ctx, dir, v); err != nil {
		return err
	}
	var errs []error
	if v.first != nil {
		errs = append(errs, fmt.Errorf("%d records differ from those sent; the first: %w", v.bad, v.first))
	}
	if v.metadata != 1 {
		errs = append(errs, fmt.Errorf("%d KiekerMetadataRecords where 1 was expected", v.metadata))
	}
	for c, s := range sent {
		if v.seen[c] != s.records {
			errs = append(errs, fmt.Errorf("connection %d: the log holds %d of the %d records sent", c, v.seen[c], s.records))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("log %s: %w", dir, err)
	}
	return nil
}

// Consume checks the records of b.
func (v *verifier) Consume(_ context.Context, b *record.Batch) error {
	for i := range b.Records {
		if err := v.check(&b.Records[i]); err != nil {
			v.bad++
			if v.first == nil {
				v.first = err
			}
		}
	}
	return nil
}

func (v *verifier) check(r *record.Record) error {
	var after bool
	switch r.Type.Name {
	case record.KiekerMetadataRecord:
		v.metadata++
		return nil
	case record.BeforeOperationEvent:
	case record.AfterOperationEvent:
		after = true
	default:
		return fmt.Errorf("unexpected record type %s", r.Type.Name)
	}
	if len(r.Values) != 5 {
		return fmt.Errorf("%s with %d values", r.Type.Name, len(r.Values))
	}
	trace := r.Values[1].Int()
	c := int(trace>>benchkit.TraceShift) - 1
	if c < 0 || c >= len(v.streams) {
		return fmt.Errorf("traceId %d names no connection", trace)
	}
	s := v.streams[c]
	n := v.seen[c]
	v.seen[c]++
	ev := &s.events[n%s.records()]
	id := s.traceID(n)
	sig := v.enc.sigs[ev.Sig]
	if after != ev.After || r.Values[0].Int() != ev.TS || trace != id || r.Values[2].Int() != int64(ev.Order) ||
		r.Values[3].Str() != sig.Op || r.Values[4].Str() != sig.Class || r.LoggingTimestamp != v.enc.loggingTimestamp(ev) {
		return fmt.Errorf("connection %d, record %d: got %s ts=%d %v %v %v %q %q, sent after=%v ts=%d traceId %d orderIndex %d %q %q",
			c, n, r.Type.ShortName(), r.LoggingTimestamp, r.Values[0].Int(), trace, r.Values[2].Int(), r.Values[3].Str(), r.Values[4].Str(),
			ev.After, v.enc.loggingTimestamp(ev), id, ev.Order, sig.Op, sig.Class)
	}
	return nil
}
