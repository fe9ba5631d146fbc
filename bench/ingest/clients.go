package main

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// sent counts what one connection sent.
type sent struct{ records, bytes int64 }

// dial opens k connections to addr.
func dial(addr string, k int) ([]net.Conn, error) {
	conns := make([]net.Conn, 0, k)
	for i := 0; i < k; i++ {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			for _, c := range conns {
				c.Close()
			}
			return nil, fmt.Errorf("connection %d to %s: %w", i, addr, err)
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// sendAll runs one goroutine per connection: connection i sends
// counts[i] records of streams[i], or, when until is not zero, whole chunks
// until that time has passed; then it closes its connection. The channel
// delivers what each connection sent once all are done, and the first
// error.
func sendAll(conns []net.Conn, streams []*stream, counts []int64, until time.Time) <-chan sendResult {
	res := sendResult{sent: make([]sent, len(conns))}
	errs := make([]error, len(conns))
	var wg sync.WaitGroup
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var n int64
			if counts != nil {
				n = counts[i]
			}
			res.sent[i], errs[i] = send(c, streams[i], n, until)
			if err := c.Close(); err != nil && errs[i] == nil {
				errs[i] = fmt.Errorf("connection %d: close: %w", i, err)
			}
		}()
	}
	done := make(chan sendResult, 1)
	go func() {
		wg.Wait()
		res.err = errors.Join(errs...)
		done <- res
	}()
	return done
}

type sendResult struct {
	sent []sent
	err  error
}

// total sums what all connections sent.
func (r sendResult) total() sent {
	var t sent
	for _, s := range r.sent {
		t.records += s.records
		t.bytes += s.bytes
	}
	return t
}

// counts returns the number of records each connection sent.
func (r sendResult) counts() []int64 {
	c := make([]int64, len(r.sent))
	for i, s := range r.sent {
		c[i] = s.records
	}
	return c
}

// send writes n records of s to c (the first chunk, then the rest chunk as
// often as needed, the last one cut after a whole record), or whole chunks
// until the time until has passed when it is not zero.
func send(c net.Conn, s *stream, n int64, until time.Time) (sent, error) {
	var out sent
	write := func(p []byte, recs int64) error {
		if _, err := c.Write(p); err != nil {
			return fmt.Errorf("connection %d: after %d bytes: %w", s.conn, out.bytes, err)
		}
		out.records += recs
		out.bytes += int64(len(p))
		return nil
	}
	r := s.records()
	// Repetition k (k ≥ 1) is rest with its own traceIds: stream.repeat
	// rewrites rest before each copy is written (the last Write has
	// returned, and a net.Conn keeps no slice it was given). first is
	// written with repetition 0's (for KDB rest is first).
	s.repeat(0)
	var rep int64
	again := func(p []byte, recs int64) error {
		rep++
		if rep >= maxCopies && !s.sameIDs {
			return fmt.Errorf("connection %d: %d copies of its chunk: the next would repeat the first's traceIds (a larger -chunk, or -same-ids)", s.conn, rep)
		}
		s.repeat(rep)
		return write(p, recs)
	}
	if !until.IsZero() {
		if err := write(s.first, r); err != nil {
			return out, err
		}
		for time.Now().Before(until) {
			if err := again(s.rest, r); err != nil {
				return out, err
			}
		}
		return out, nil
	}
	if m := min(n, r); m > 0 {
		if err := write(s.first[:s.firstEnds[m-1]], m); err != nil {
			return out, err
		}
		n -= m
	}
	for ; n >= r; n -= r {
		if err := again(s.rest, r); err != nil {
			return out, err
		}
	}
	if n > 0 {
		if err := again(s.rest[:s.restEnds[n-1]], n); err != nil {
			return out, err
		}
	}
	return out, nil
}
