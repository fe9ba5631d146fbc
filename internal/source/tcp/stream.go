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
	endDeadline                 // the drain deadline passed
	endConsumer                 // the consumer refused batches for good (pipeline.ErrClosed)
)

// streamEnd reports how and where a stream ended.
type streamEnd struct {
	kind    endKind
	err     error
	offset  int64 // stream offset of the offending or incomplete unit
	dropped int   // endTruncated, endDeadline: bytes of an incomplete unit read and dropped
}

// errHardStop ends a registry wait when the drain deadline passed.
var errHardStop = errors.New("drain deadline passed")

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
	// registryWait bounds the wait for a Dual registry entry; hard is
	// closed when the drain deadline passed.
	registryWait time.Duration
	hard         <-chan struct{}

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
		end.kind = endDeadline
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
		}
		if s.batch.Len() > 0 {
			b, herr := s.handOn(s.batch)
			if b == nil {
				b = new(record.Batch)
			}
			s.batch = b
			if herr != nil {
				return used, streamEnd{kind: endConsumer, err: herr, offset: s.off}, true
			}
		}
		if err == nil {
			return used, streamEnd{}, false
		}
		var wait *errWaitRegistry
		if errors.As(err, &wait) {
			werr := s.waitRegistry(wait)
			if werr == nil {
				continue
			}
			if werr == errHardStop {
				return used, streamEnd{kind: endDeadline, offset: s.off, dropped: len(p) - used}, true
			}
			err = werr
		}
		return used, streamEnd{kind: endDecode, err: err, offset: s.off}, true
	}
}

// waitRegistry waits until the registry changed, for at most registryWait
// per unit in all. It returns nil to retry, errHardStop, or the final error.
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
	select {
	case <-w.changed:
		return nil
	case <-s.hard:
		return errHardStop
	case <-t.C:
		return fmt.Errorf("%w (no registry connection delivered it within %s)", w.err, s.registryWait)
	}
}
