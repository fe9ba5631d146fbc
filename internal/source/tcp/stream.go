package tcp

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"time"

	"github.com/tracebridge/tracebridge/internal/record"
)

// endKind says how a connection's stream ended.
type endKind int

const (
	endEOF       endKind = iota // the peer closed at a unit boundary
	endTruncated                // the peer closed, or the read failed, inside a unit
	endDecode                   // malformed input: a decode error or a unit over MaxUnit
	endPanic                    // the decoder panicked
	endReadError                // the read failed at a unit boundary (reset, …)
	endDrained                  // draining: the peer was idle for the drain timeout, or the receiver stopped
	endConsumer                 // the consumer refused batches for good (pipeline.ErrClosed)
)

// streamEnd reports how and where a stream ended.
type streamEnd struct {
	kind    endKind
	err     error
	offset  int64 // stream offset of the offending or incomplete unit; endConsumer: of the refused records
	dropped int   // endTruncated, endDrained, endConsumer: bytes read and not decoded
	records int   // endConsumer: records of the refused batch
}

// errDrained ends a registry wait when the drain is over.
var errDrained = errors.New("drain over")

// errUnitSize is wrapped by the error of a unit larger than the decoder's
// MaxUnit.
var errUnitSize = errors.New("unit over the decoder's size limit")

// stream is the decode loop of one connection: read into one buffer,
// decode every complete unit, hand the batch on, keep the incomplete rest,
// repeat. It is used by one goroutine.
type stream struct {
	rd        io.Reader
	dec       Decoder
	bufSize   int
	transform func(b *record.Batch, from int)
	// handOn passes a non-empty batch on and returns the batch to fill
	// next (empty); an error stops the stream (endConsumer).
	handOn func(b *record.Batch) (*record.Batch, error)
	// onRead hears about every read of n > 0 bytes.
	onRead func(n int)
	// beforeRead, if set, is called before every read: the receiver sets
	// the connection's read deadline there while draining.
	beforeRead func()
	// registryWait bounds the wait for a Dual registry entry. Once drain
	// is closed a wait also ends (endDrained) when the registry has not
	// changed for idle; once stop is closed it ends at once.
	registryWait time.Duration
	drain, stop  <-chan struct{}
	idle         time.Duration

	batch   *record.Batch
	off     int64 // stream offset of the next byte to decode
	waiting bool  // a registry wait for the unit at off is under way
	waitEnd time.Time
}

// run decodes the stream until it ends and reports how. A panic inside the
// decoder (or the transform) is recovered and reported as endPanic.
func (s *stream) run() (end streamEnd) {
	defer func() {
		if p := recover(); p != nil {
			end = streamEnd{kind: endPanic, offset: s.off,
				err: fmt.Errorf("offset %d: panic while decoding: %v\n%s", s.off, p, debug.Stack())}
		}
	}()
	if s.batch == nil {
		s.batch = new(record.Batch)
	}
	maxUnit := s.dec.MaxUnit()
	base := make([]byte, s.bufSize)
	buf := base
	w := 0 // buf[:w] holds the bytes not decoded yet: part of one unit
	for {
		if w == len(buf) {
			if len(buf) >= maxUnit {
				return streamEnd{kind: endDecode, offset: s.off,
					err: fmt.Errorf("offset %d: %w: the unit is larger than %d bytes", s.off, errUnitSize, maxUnit)}
			}
			grown := make([]byte, min(2*len(buf), maxUnit))
			copy(grown, buf[:w])
			buf = grown
		}
		if s.beforeRead != nil {
			s.beforeRead()
		}
		n, rerr := s.rd.Read(buf[w:])
		if n > 0 {
			if s.onRead != nil {
				s.onRead(n)
			}
			w += n
			used, end, stop := s.decode(buf[:w])
			if stop {
				return end
			}
			w = copy(buf, buf[used:w])
			if len(buf) > len(base) && w <= len(base) {
				copy(base, buf[:w]) // the large unit is done: back to the usual buffer
				buf = base
			}
		}
		if rerr != nil {
			return s.ended(rerr, w)
		}
	}
}

// ended classifies the end of the input; w bytes of an incomplete unit are
// left.
func (s *stream) ended(rerr error, w int) streamEnd {
	end := streamEnd{offset: s.off, dropped: w}
	switch {
	case errors.Is(rerr, os.ErrDeadlineExceeded):
		end.kind = endDrained
	case rerr == io.EOF:
		end.kind = endEOF
		if w > 0 {
			end.kind = endTruncated
		}
	default:
		end.kind, end.err = endReadError, rerr
		if w > 0 {
			end.kind = endTruncated
		}
	}
	return end
}

// decode decodes the units at the start of p and hands their records on.
// It returns the bytes consumed, and stop with the end when the stream is
// over.
func (s *stream) decode(p []byte) (used int, end streamEnd, stop bool) {
	for {
		start := s.off // the batch is empty: its records come from here on
		from := s.batch.Len()
		n, err := s.dec.Decode(p[used:], s.batch)
		if n < 0 || n > len(p)-used {
			panic(fmt.Sprintf("decoder consumed %d of %d bytes", n, len(p)-used))
		}
		used += n
		s.off += int64(n)
		if n > 0 {
			s.waiting = false
		}
		if s.batch.Len() > from && s.transform != nil {
			s.transform(s.batch, from)
			s.batch.Frames.Drop() // the values changed: the frames are stale
		}
		k := s.batch.Len()
		if k > 0 {
			b, herr := s.handOn(s.batch)
			if b == nil {
				b = new(record.Batch)
			}
			s.batch = b
			if herr != nil {
				return used, streamEnd{kind: endConsumer, err: herr, offset: start, dropped: len(p) - used, records: k}, true
			}
		}
		if err == nil {
			if n > 0 && k > 0 && used < len(p) {
				// A decoder that keeps records as frames only stops where
				// a batch would mix kinds: decode the rest into the next.
				continue
			}
			return used, streamEnd{}, false
		}
		var wait *errWaitRegistry
		if errors.As(err, &wait) {
			werr := s.waitRegistry(wait)
			if werr == nil {
				continue
			}
			if werr == errDrained {
				return used, streamEnd{kind: endDrained, offset: s.off, dropped: len(p) - used}, true
			}
			err = werr
		}
		return used, streamEnd{kind: endDecode, err: err, offset: s.off}, true
	}
}

// waitRegistry waits until the registry changed, for at most registryWait
// per unit in all and, while draining, for at most idle each time. It
// returns nil to retry, errDrained, or the final error.
func (s *stream) waitRegistry(w *errWaitRegistry) error {
	now := time.Now()
	if !s.waiting {
		s.waiting, s.waitEnd = true, now.Add(s.registryWait)
	}
	left := s.waitEnd.Sub(now)
	if left <= 0 {
		return fmt.Errorf("%w (no registry connection delivered it within %s)", w.err, s.registryWait)
	}
	t := time.NewTimer(left)
	defer t.Stop()
	drain := s.drain
	var idle <-chan time.Time
	for {
		select {
		case <-w.changed:
			return nil
		case <-s.stop:
			return errDrained
		case <-drain:
			drain = nil
			it := time.NewTimer(s.idle)
			defer it.Stop()
			idle = it.C
		case <-idle:
			return errDrained
		case <-t.C:
			return fmt.Errorf("%w (no registry connection delivered it within %s)", w.err, s.registryWait)
		}
	}
}
