package main

import (
	"fmt"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/record"
)

// genSeed seeds benchkit.Events ("brokers!").
const genSeed = 0x62726f6b65727321

// genEvents returns exactly n events for publisher pub: the first n of
// benchkit.Events (the last trace may be cut short). Every (traceId,
// orderIndex) is unique, so the verifier can count duplicates. The output
// is deterministic.
func genEvents(pub, n int) []benchkit.Event {
	return benchkit.Events(genSeed, pub, n)[:n]
}

// load is what one publisher (or TCP connection) sends, encoded before
// anything is timed.
type load struct {
	pub    int
	events []benchkit.Event
	// traceFirst[t-1] is the index of the first event of trace t.
	traceFirst []int
	// bin is every event in KDB binary: the TCP baseline's stream.
	bin []byte
	// text holds the broker messages (KDB text) back to back, msgEnds[k]
	// the offset just past message k; within a message records are
	// separated by "\n".
	text    []byte
	msgEnds []int
}

// messages returns the number of broker messages.
func (l *load) messages() int { return len(l.msgEnds) }

// message returns broker message k.
func (l *load) message(k int) []byte {
	start := 0
	if k > 0 {
		start = l.msgEnds[k-1]
	}
	return l.text[start:l.msgEnds[k]]
}

// split divides total records among pubs publishers as evenly as possible.
func split(total int64, pubs int) []int {
	n := make([]int, pubs)
	for i := range n {
		n[i] = int(total / int64(pubs))
		if int64(i) < total%int64(pubs) {
			n[i]++
		}
	}
	return n
}

// newLoad generates n events for publisher pub and encodes them as KDB
// text messages of perMsg records each (the last one may hold fewer), or,
// when perMsg is 0, as one KDB binary stream.
func newLoad(pub, n, perMsg int, cat *record.Catalog, sigs []benchkit.Signature) (*load, error) {
	rec, err := benchkit.NewRecorder(cat, sigs)
	if err != nil {
		return nil, err
	}
	l := &load{pub: pub, events: genEvents(pub, n)}
	var b record.Batch
	for i := range l.events {
		ev := &l.events[i]
		if i == 0 || ev.Trace != l.events[i-1].Trace {
			l.traceFirst = append(l.traceFirst, i)
		}
		b.Reset()
		r := rec.Add(&b, ev, record.NoTimestamp)
		if perMsg == 0 {
			if l.bin, err = kdb.AppendBinary(l.bin, ev.KDBID(), r); err != nil {
				return nil, fmt.Errorf("publisher %d: event %d: %w", pub, i, err)
			}
			continue
		}
		if i%perMsg != 0 {
			l.text = append(l.text, '\n')
		}
		if l.text, err = kdb.AppendText(l.text, ev.KDBID(), r); err != nil {
			return nil, fmt.Errorf("publisher %d: event %d: %w", pub, i, err)
		}
		if (i+1)%perMsg == 0 || i == len(l.events)-1 {
			l.msgEnds = append(l.msgEnds, len(l.text))
		}
	}
	return l, nil
}
