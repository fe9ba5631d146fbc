package logdir

import (
	"fmt"
	"io"
)

// minOverlapBuffer is the least size of each of an overlapWriter's two
// buffers: big enough that a write system call moves a good share of a
// megabyte, small enough not to matter beside a batch of records.
const minOverlapBuffer = 1 << 20

// overlapWriter is the write buffer in front of a data file. It fills one
// buffer while the other, when full, is written to the file by a goroutine
// started for that one write, so that encoding records and the write
// system calls (which on a busy page cache cost as much as the encoding)
// run on two cores. At most one write is in flight; Flush and Reset wait
// for it. An error of a write is kept and returned by every later call
// until Reset.
//
// Concurrency: used by one goroutine (the Files' owner); the goroutine of
// an in-flight write touches only the buffer it was given and the
// destination, and hands both back through done before anyone else uses
// them.
type overlapWriter struct {
	w        io.Writer
	buf      []byte // being filled
	spare    []byte // the other buffer; nil while its write is in flight
	inflight bool
	done     chan overlapResult // capacity 1: a write never blocks on it
	total    int64              // bytes accepted since Reset
	err      error
}

type overlapResult struct {
	buf []byte
	err error
}

func newOverlapWriter(w io.Writer, size int) *overlapWriter {
	size = max(size, minOverlapBuffer)
	return &overlapWriter{
		w:     w,
		buf:   make([]byte, 0, size),
		spare: make([]byte, 0, size),
		done:  make(chan overlapResult, 1),
	}
}

// Write copies p into the buffers, handing each full one to a background
// write.
func (o *overlapWriter) Write(p []byte) (int, error) {
	if o.err != nil {
		return 0, o.err
	}
	n := 0
	for len(p) > 0 {
		c := copy(o.buf[len(o.buf):cap(o.buf)], p)
		o.buf = o.buf[:len(o.buf)+c]
		p = p[c:]
		n += c
		o.total += int64(c)
		if len(o.buf) == cap(o.buf) {
			if err := o.handOff(); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// handOff starts the write of the full buffer and continues in the spare
// one, after the previous write has ended.
func (o *overlapWriter) handOff() error {
	if err := o.wait(); err != nil {
		return err
	}
	full, w := o.buf, o.w
	o.buf, o.spare, o.inflight = o.spare[:0], nil, true
	go func() {
		_, err := w.Write(full)
		o.done <- overlapResult{buf: full, err: err}
	}()
	return nil
}

// wait waits for the write in flight, if any, and returns the kept error.
func (o *overlapWriter) wait() error {
	if o.inflight {
		r := <-o.done
		o.inflight, o.spare = false, r.buf[:0]
		if r.err != nil && o.err == nil {
			o.err = r.err
		}
	}
	return o.err
}

// Flush writes everything accepted so far to the destination and returns
// when it is there.
func (o *overlapWriter) Flush() error {
	if err := o.wait(); err != nil {
		return err
	}
	if len(o.buf) == 0 {
		return nil
	}
	_, err := o.w.Write(o.buf)
	o.buf = o.buf[:0]
	if err != nil {
		o.err = err
	}
	return err
}

// Finish writes what is buffered and then closes c, both on a goroutine
// started for that (a data file's last write and its close overlap with
// encoding the next file's records): the caller may Retarget at once. The
// next wait (a full buffer's hand-off, Flush, Reset) waits for it and
// returns its error, which names path. Bytes written after Finish and
// before Retarget go to the old destination's buffer: do not.
func (o *overlapWriter) Finish(c io.Closer, path string) error {
	if err := o.wait(); err != nil {
		c.Close()
		return err
	}
	full, w := o.buf, o.w
	o.buf, o.spare, o.inflight = o.spare[:0], nil, true
	go func() {
		var err error
		if len(full) > 0 {
			_, err = w.Write(full)
		}
		if cerr := c.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			err = fmt.Errorf("finish %s: %w", path, err)
		}
		o.done <- overlapResult{buf: full, err: err}
	}()
	return nil
}

// Retarget makes w the destination of the bytes written from now on,
// without waiting for a write in flight (which keeps its own
// destination) and keeping a kept error; Total starts again at 0.
func (o *overlapWriter) Retarget(w io.Writer) {
	o.w, o.total = w, 0
}

// Total returns the number of bytes accepted since the last Reset, written
// or not.
func (o *overlapWriter) Total() int64 { return o.total }

// Reset waits for the write in flight, drops what is buffered and the kept
// error, and makes w the destination.
func (o *overlapWriter) Reset(w io.Writer) {
	o.wait()
	o.w, o.buf, o.total, o.err = w, o.buf[:0], 0, nil
}
