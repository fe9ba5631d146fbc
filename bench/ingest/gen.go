package main

import (
	"fmt"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
)

// The dialects a run can drive.
const (
	dialectKDB    = "kdb"
	dialectKieker = "kieker"
)

// genSeed seeds benchkit.Events ("tracebri"): connection c sends the
// events of benchkit.Events(genSeed, c, chunk).
const genSeed = 0x7472616365627269

// stream is what one connection sends: a chunk of events encoded once and
// sent repeatedly. first is the chunk as sent the first time (for Kieker
// with the registry entries interleaved), rest as sent every other time;
// firstEnds[i] and restEnds[i] are the offsets just past event i, so that
// a send can stop after any whole record.
type stream struct {
	conn      int
	events    []benchkit.Event
	first     []byte
	rest      []byte
	firstEnds []int
	restEnds  []int
}

// records returns the number of events in one chunk.
func (s *stream) records() int64 { return int64(len(s.events)) }

// encoder encodes one connection's events in a dialect.
type encoder struct {
	dialect string
	rec     *benchkit.Recorder
	sigs    []benchkit.Signature
}

func newEncoder(dialect string, cat *record.Catalog, sigs []benchkit.Signature) (*encoder, error) {
	rec, err := benchkit.NewRecorder(cat, sigs)
	if err != nil {
		return nil, err
	}
	switch dialect {
	case dialectKDB, dialectKieker:
	default:
		return nil, fmt.Errorf("unknown dialect %q (want kdb or kieker)", dialect)
	}
	return &encoder{dialect: dialect, rec: rec, sigs: sigs}, nil
}

// loggingTimestamp is the logging timestamp a record of ev carries in the
// dialect (KDB's binary dialect has none) and hence in the log.
func (e *encoder) loggingTimestamp(ev *benchkit.Event) int64 {
	if e.dialect == dialectKDB {
		return record.NoTimestamp
	}
	return ev.TS
}

// stream encodes events for connection conn.
func (e *encoder) stream(conn int, events []benchkit.Event) (*stream, error) {
	s := &stream{conn: conn, events: events}
	var b record.Batch
	rec := func(ev *benchkit.Event) *record.Record {
		b.Reset()
		return e.rec.Add(&b, ev, e.loggingTimestamp(ev))
	}
	switch e.dialect {
	case dialectKDB:
		var err error
		for i := range events {
			if s.first, err = kdb.AppendBinary(s.first, events[i].KDBID(), rec(&events[i])); err != nil {
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
