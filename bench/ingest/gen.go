package main

import (
	"encoding/binary"
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
// with the registry entries interleaved), rest as sent every other time
// (for KDB the same bytes);
// firstEnds[i] and restEnds[i] are the offsets just past event i, so that
// a send can stop after any whole record. Each repetition carries its
// traces under ids of its own (benchkit.RepeatID), as a real stream
// never sends a trace twice: restIDs[i] is where event i's traceId (8
// bytes, big-endian) is in rest, which send rewrites for each repetition
// (restRep: the repetition rest holds now; ids repeat after 2^16
// repetitions, which parseFlags keeps -records below). With sameIDs every
// repetition sends the same traces again (the load before 2026-11-30).
type stream struct {
	conn      int
	events    []benchkit.Event
	first     []byte
	rest      []byte
	firstEnds []int
	restEnds  []int
	restIDs   []int
	restRep   int64
	sameIDs   bool
}

// repeat makes rest carry repetition rep's traceIds.
func (s *stream) repeat(rep int64) {
	if s.sameIDs {
		return
	}
	d := uint64(benchkit.RepeatID(0, rep) ^ benchkit.RepeatID(0, s.restRep))
	for _, o := range s.restIDs {
		p := s.rest[o : o+8]
		binary.BigEndian.PutUint64(p, binary.BigEndian.Uint64(p)^d)
	}
	s.restRep = rep
}

// traceID returns the traceId of the n-th record a connection sends
// (n counts from 0 over all its repetitions).
func (s *stream) traceID(n int64) int64 {
	id := s.events[n%s.records()].Trace
	if s.sameIDs {
		return id
	}
	return benchkit.RepeatID(id, n/s.records())
}

// idAt returns where traceId id is in the record rec, given alt, the
// same record encoded again with altID (= id ^ idFlip) in its place: the
// only 8 bytes that are id in rec and altID in alt, the rest equal. (The
// id's 8 bytes alone may also appear across the fields after it.)
func idAt(rec, alt []byte, id int64) (int, error) {
	if len(rec) != len(alt) {
		return 0, fmt.Errorf("traceId %d: the record's two encodings differ in length (%d, %d bytes)", id, len(rec), len(alt))
	}
	lo := 0
	for lo < len(rec) && rec[lo] == alt[lo] {
		lo++
	}
	hi := len(rec)
	for hi > lo && rec[hi-1] == alt[hi-1] {
		hi--
	}
	for p := max(0, hi-8); p <= lo && p+8 <= len(rec); p++ {
		if binary.BigEndian.Uint64(rec[p:]) == uint64(id) && binary.BigEndian.Uint64(alt[p:]) == uint64(id^idFlip) {
			return p, nil
		}
	}
	return 0, fmt.Errorf("traceId %d is not in the record's bytes as 8 big-endian bytes", id)
}

// idFlip marks the traceId in idAt's second encoding (trace number bits
// only, so the connection's stay).
const idFlip = 0x5aa55a

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
func (e *encoder) stream(conn int, events []benchkit.Event, sameIDs bool) (*stream, error) {
	s := &stream{conn: conn, events: events, sameIDs: sameIDs}
	var b record.Batch
	rec := func(ev *benchkit.Event) *record.Record {
		b.Reset()
		return e.rec.Add(&b, ev, e.loggingTimestamp(ev))
	}
	switch e.dialect {
	case dialectKDB:
		var err error
		var alt []byte
		for i := range events {
			start := len(s.first)
			if s.first, err = kdb.AppendBinary(s.first, events[i].KDBID(), rec(&events[i])); err != nil {
				return nil, fmt.Errorf("connection %d: event %d: %w", conn, i, err)
			}
			ev := events[i]
			ev.Trace ^= idFlip
			if alt, err = kdb.AppendBinary(alt[:0], ev.KDBID(), rec(&ev)); err != nil {
				return nil, fmt.Errorf("connection %d: event %d: %w", conn, i, err)
			}
			at, err := idAt(s.first[start:], alt, events[i].Trace)
			if err != nil {
				return nil, fmt.Errorf("connection %d: event %d: %w", conn, i, err)
			}
			s.firstEnds = append(s.firstEnds, len(s.first))
			s.restIDs = append(s.restIDs, start+at)
		}
		// One buffer for both: send puts repetition 0's ids back before
		// it writes first.
		s.rest, s.restEnds = s.first, s.firstEnds
	case dialectKieker:
		// One encoder for both passes: the first registers every string
		// (inline entries before first use), the second finds them all
		// registered and writes bare frames.
		enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
		for pass := 0; pass < 2; pass++ {
			var buf, alt []byte
			var ends, ids []int
			for i := range events {
				start := len(buf)
				var err error
				if buf, err = enc.Append(buf, rec(&events[i])); err != nil {
					return nil, fmt.Errorf("connection %d: event %d: %w", conn, i, err)
				}
				ends = append(ends, len(buf))
				if pass == 0 {
					continue // first is never rewritten
				}
				// Every string is registered by now: the second encoding
				// is a bare frame too.
				ev := events[i]
				ev.Trace ^= idFlip
				if alt, err = enc.Append(alt[:0], rec(&ev)); err != nil {
					return nil, fmt.Errorf("connection %d: event %d: %w", conn, i, err)
				}
				at, err := idAt(buf[start:], alt, events[i].Trace)
				if err != nil {
					return nil, fmt.Errorf("connection %d: event %d: %w", conn, i, err)
				}
				ids = append(ids, start+at)
			}
			if pass == 0 {
				s.first, s.firstEnds = buf, ends
			} else {
				s.rest, s.restEnds, s.restIDs = buf, ends, ids
			}
		}
	}
	return s, nil
}
