package tcp

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// TestSingleServer: one connection is served, others meanwhile are
// refused, and Run ends by itself when the connection ends.
func TestSingleServer(t *testing.T) {
	m := kdbMapping(t)
	e := start(t, Config{Mode: SingleServer, NewDecoder: KDBDecoder(m, kdb.Options{})}, nil)
	c := dial(t, e.r.Addr())
	if _, err := c.Write(kdbRecords(t, m, 1, 0, 100)); err != nil {
		t.Fatal(err)
	}
	e.col.wait(t, 100, 5*time.Second)
	other := dial(t, e.r.Addr())
	waitClosed(t, other, 5*time.Second)
	if _, err := c.Write(kdbRecords(t, m, 1, 100, 100)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case err := <-e.done:
		e.done <- err
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end after its single connection ended")
	}
	checkPerClient(t, e.col.records(), map[int]int{1: 200})
	if st := e.r.Stats(); st.Rejected != 1 || st.Connections != 1 {
		t.Errorf("stats %+v, want 1 connection, 1 rejected", st)
	}
	// The listener is gone.
	if c, err := net.DialTimeout("tcp", e.r.Addr().String(), time.Second); err == nil {
		c.Close()
		t.Error("single server still accepts after its connection ended")
	}
}

// testServer is the test's own listener that a Client receiver connects to.
func listenOn(t *testing.T, addr string) net.Listener {
	t.Helper()
	var ln net.Listener
	var err error
	for range 100 { // the port may linger briefly after a restart
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal(err)
	return nil
}

// serveOnce accepts one connection on ln, writes data and closes the
// connection and, when closeLn, the listener.
func serveOnce(t *testing.T, ln net.Listener, data []byte, closeLn bool) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		if closeLn {
			defer ln.Close()
		}
		c, err := ln.Accept()
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		if _, err := c.Write(data); err != nil {
			t.Error(err)
		}
	}()
	return done
}

func TestClient(t *testing.T) {
	m := kdbMapping(t)
	t.Run("respawn", func(t *testing.T) {
		ln := listenOn(t, "127.0.0.1:0")
		addr := ln.Addr().String()
		first := serveOnce(t, ln, kdbRecords(t, m, 1, 0, 100), true)
		e := start(t, Config{Mode: Client, Address: addr, Respawn: true, BackoffMin: 5 * time.Millisecond,
			BackoffMax: 40 * time.Millisecond, NewDecoder: KDBDecoder(m, kdb.Options{})}, nil)
		<-first
		e.col.wait(t, 100, 5*time.Second)
		time.Sleep(200 * time.Millisecond) // several refused reconnects
		ln = listenOn(t, addr)
		second := serveOnce(t, ln, kdbRecords(t, m, 1, 100, 100), false)
		<-second
		checkPerClient(t, e.col.wait(t, 200, 5*time.Second), map[int]int{1: 200})
		// A third lifetime: the client keeps coming back.
		third := serveOnce(t, ln, kdbRecords(t, m, 1, 200, 50), true)
		<-third
		checkPerClient(t, e.col.wait(t, 250, 5*time.Second), map[int]int{1: 250})
		if err := e.stop(t); err != nil {
			t.Fatal(err)
		}
		if n := len(e.logs.lines(t, "cannot connect")); n != 1 {
			t.Errorf("%d 'cannot connect' lines, want 1 (one per state change)", n)
		}
		if n := len(e.logs.lines(t, "connected")); n != 3 {
			t.Errorf("%d 'connected' lines, want 3", n)
		}
		if st := e.r.Stats(); st.Connections != 3 {
			t.Errorf("stats %+v, want 3 connections", st)
		}
	})
	t.Run("no respawn", func(t *testing.T) {
		ln := listenOn(t, "127.0.0.1:0")
		defer ln.Close()
		served := serveOnce(t, ln, kdbRecords(t, m, 2, 0, 500), false)
		e := start(t, Config{Mode: Client, Address: ln.Addr().String(), NewDecoder: KDBDecoder(m, kdb.Options{})}, nil)
		<-served
		select {
		case err := <-e.done:
			e.done <- err
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not end with its connection")
		}
		checkPerClient(t, e.col.records(), map[int]int{2: 500})
	})
	t.Run("failed first connect", func(t *testing.T) {
		ln := listenOn(t, "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		r, err := New(Config{Mode: Client, Address: addr, NewDecoder: KDBDecoder(m, kdb.Options{})}, Settings{})
		if err != nil {
			t.Fatal(err)
		}
		err = r.Run(context.Background(), newCollector())
		if !errors.Is(err, ErrConnect) || !strings.Contains(err.Error(), addr) {
			t.Fatalf("Run returned %v, want ErrConnect naming %s", err, addr)
		}
	})
	t.Run("cancel while backing off", func(t *testing.T) {
		ln := listenOn(t, "127.0.0.1:0")
		addr := ln.Addr().String()
		ln.Close()
		e := start(t, Config{Mode: Client, Address: addr, Respawn: true, BackoffMin: time.Hour,
			NewDecoder: KDBDecoder(m, kdb.Options{})}, nil)
		time.Sleep(50 * time.Millisecond)
		begin := time.Now()
		if err := e.stop(t); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(begin); d > time.Second {
			t.Errorf("stopping took %s", d)
		}
	})
}

// dualStreams encodes records as Kieker's dual-socket writers do: frames
// for the records connection, entries for the registry connection.
func dualStreams(t *testing.T, recs []record.Record) (frames, entries []byte) {
	t.Helper()
	enc := kieker.NewEncoder(kieker.EncoderOptions{})
	for i := range recs {
		var err error
		if frames, err = enc.Append(frames, &recs[i]); err != nil {
			t.Fatal(err)
		}
		for _, en := range enc.NewEntries() {
			entries = kieker.AppendRegistryEntry(entries, en.ID, en.Value, false)
		}
	}
	return frames, entries
}

func TestDual(t *testing.T) {
	want, _, err := decodeKieker(t, corpus(t, "kieker-streams", "java-tcp.bin"))
	if err != nil {
		t.Fatal(err)
	}
	frames, entries := dualStreams(t, want)
	tests := []struct {
		name string
		send func(t *testing.T, rec, reg *net.TCPConn)
	}{
		{"registry first", func(t *testing.T, rec, reg *net.TCPConn) {
			sendPieces(t, reg, entries, 1)
			sendPieces(t, rec, frames, 2)
		}},
		{"registry late", func(t *testing.T, rec, reg *net.TCPConn) {
			sendPieces(t, rec, frames, 3)
			time.Sleep(200 * time.Millisecond)
			sendPieces(t, reg, entries, 4)
		}},
		{"registry in two parts", func(t *testing.T, rec, reg *net.TCPConn) {
			half := len(entries) / 2
			sendPieces(t, reg, entries[:half], 5)
			sendPieces(t, rec, frames, 6)
			time.Sleep(100 * time.Millisecond)
			sendPieces(t, reg, entries[half:], 7)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := start(t, Config{Mode: Dual}, nil)
			rec := dial(t, e.r.Addr())
			reg := dial(t, e.r.RegistryAddr())
			tt.send(t, rec, reg)
			rec.Close()
			reg.Close()
			e.col.wait(t, len(want), 10*time.Second)
			waitFor(t, "connections to close", 5*time.Second, func() bool { return e.r.Stats().Open == 0 })
			if diff := cmp.Diff(recStrings(want), recStrings(e.col.records())); diff != "" {
				t.Errorf("records (-want +got):\n%s", diff)
			}
			if n := e.r.Stats().DecodeErrors; n != 0 {
				t.Errorf("%d decode errors", n)
			}
			if err := e.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("registry never comes", func(t *testing.T) {
		e := start(t, Config{Mode: Dual, RegistryWait: 200 * time.Millisecond}, nil)
		rec := dial(t, e.r.Addr())
		if _, err := rec.Write(frames); err != nil {
			t.Fatal(err)
		}
		waitClosed(t, rec, 5*time.Second)
		lines := e.logs.lines(t, "malformed stream")
		if len(lines) != 1 || lines[0]["offset"] != float64(0) || lines[0]["role"] != "records" ||
			!strings.Contains(lines[0]["err"].(string), "within 200ms") {
			t.Errorf("log lines %v", lines)
		}
		if err := e.stop(t); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("shutdown while waiting", func(t *testing.T) {
		e := start(t, Config{Mode: Dual, DrainTimeout: 100 * time.Millisecond}, nil)
		rec := dial(t, e.r.Addr())
		if _, err := rec.Write(frames); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		begin := time.Now()
		if err := e.stop(t); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(begin); d > time.Second {
			t.Errorf("stopping took %s", d)
		}
	})
}

// TestShutdown: records a client sent before the cancel are all handed on,
// however long the consumer takes; Run returns, and no goroutine is left.
func TestShutdown(t *testing.T) {
	m := kdbMapping(t)
	const drain = 100 * time.Millisecond
	t.Run("client stays connected, blocked consumer", func(t *testing.T) {
		// The consumer is blocked well past the drain timeout after the
		// cancel, then slow: the connection's goroutine sits in Consume
		// while the client's bytes wait in the socket buffers.
		const n = 1000
		release := make(chan struct{})
		e := start(t, Config{DrainTimeout: drain, ReadBuffer: 4 << 10, NewDecoder: KDBDecoder(m, kdb.Options{})},
			func(c *collector) pipeline.Consumer {
				c.block, c.delay = release, time.Millisecond
				return c
			})
		c := dial(t, e.r.Addr())
		if _, err := c.Write(kdbRecords(t, m, 1, 0, n)); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the consumer to block", 5*time.Second, func() bool {
			e.col.mu.Lock()
			defer e.col.mu.Unlock()
			return e.col.blocks > 0
		})
		begin := time.Now()
		e.cancel()
		time.Sleep(5 * drain)
		close(release)
		err := <-e.done
		e.done <- err
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(begin)
		t.Logf("Run returned %s after cancel", took)
		checkPerClient(t, e.col.records(), map[int]int{1: n})
		if took > 5*drain+5*time.Second {
			t.Errorf("Run took %s: the idle client was not let go", took)
		}
		if lines := e.logs.lines(t, "dropped"); len(lines) != 0 {
			t.Errorf("loss reported: %v", lines)
		}
		goleak.VerifyNone(t)
	})
	t.Run("clients closed, slow consumer", func(t *testing.T) {
		// Several clients send everything and close before the cancel. The
		// queue's consumer is blocked for several drain timeouts after the
		// cancel, then takes a while per batch: draining lasts far longer
		// than DrainTimeout, and every record must still arrive.
		const clients, n = 4, 1000
		release := make(chan struct{})
		var q *runningQueue
		e := start(t, Config{DrainTimeout: drain, ReadBuffer: 4 << 10, NewDecoder: KDBDecoder(m, kdb.Options{})},
			func(c *collector) pipeline.Consumer {
				c.block, c.delay = release, 2*time.Millisecond
				q = runQueue(t, 4, c)
				return q
			})
		want := map[int]int{}
		var sent sync.WaitGroup
		for k := range clients {
			want[k] = n
			c := dial(t, e.r.Addr())
			data := kdbRecords(t, m, k, 0, n)
			sent.Add(1)
			go func() {
				defer sent.Done()
				if _, err := c.Write(data); err != nil {
					t.Error(err)
				}
				c.Close()
			}()
		}
		done := make(chan struct{})
		go func() { sent.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatal("the clients could not send everything while the consumer was blocked")
		}
		begin := time.Now()
		e.cancel()
		time.Sleep(5 * drain)
		close(release)
		err := <-e.done
		e.done <- err
		if err != nil {
			t.Fatal(err)
		}
		took := time.Since(begin)
		t.Logf("Run returned %s after cancel (drain timeout %s)", took, drain)
		if took < 5*drain {
			t.Fatalf("draining took %s: the test did not hold the receiver past its drain timeout", took)
		}
		q.close() // the queued batches reach the collector
		checkPerClient(t, e.col.records(), want)
		if lines := e.logs.lines(t, "dropped"); len(lines) != 0 {
			t.Errorf("loss reported: %v", lines)
		}
		if n := e.r.Stats().DecodeErrors; n != 0 {
			t.Errorf("%d decode errors", n)
		}
		goleak.VerifyNone(t)
	})
	t.Run("client closes", func(t *testing.T) {
		const n = 20000
		e := start(t, Config{DrainTimeout: 5 * time.Second, NewDecoder: KDBDecoder(m, kdb.Options{})}, nil)
		c := dial(t, e.r.Addr())
		if _, err := c.Write(kdbRecords(t, m, 1, 0, n)); err != nil {
			t.Fatal(err)
		}
		c.Close()
		begin := time.Now()
		if err := e.stop(t); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(begin); d > 2*time.Second {
			t.Errorf("Run took %s to return although the client had closed", d)
		}
		checkPerClient(t, e.col.records(), map[int]int{1: n})
		goleak.VerifyNone(t)
	})
	t.Run("idle timeout inside a record", func(t *testing.T) {
		e := start(t, Config{DrainTimeout: 200 * time.Millisecond, NewDecoder: KDBDecoder(m, kdb.Options{})}, queued(t))
		c := dial(t, e.r.Addr())
		data := kdbRecords(t, m, 1, 0, 101)
		recSize := len(data) / 101
		if _, err := c.Write(data[:100*recSize+5]); err != nil {
			t.Fatal(err)
		}
		e.col.wait(t, 100, 5*time.Second)
		if err := e.stop(t); err != nil {
			t.Fatal(err)
		}
		lines := e.logs.lines(t, "drain idle timeout inside a record")
		if len(lines) != 1 || lines[0]["dropped_bytes"] != float64(5) || lines[0]["offset"] != float64(100*recSize) ||
			lines[0]["peer"] != c.LocalAddr().String() || lines[0]["level"] != "WARN" {
			t.Errorf("log lines %v", lines)
		}
		if n := e.r.Stats().DecodeErrors; n != 0 {
			t.Errorf("a shutdown cut counted as %d decode errors", n)
		}
	})
	t.Run("queue aborted while draining", func(t *testing.T) {
		// The bridge's shutdown timeout aborts the queue: the receiver stops
		// at once, and every connection whose records or bytes are lost says
		// so, with its peer and offset.
		const clients, n = 3, 1000
		release := make(chan struct{})
		defer close(release)
		var q *runningQueue
		e := start(t, Config{DrainTimeout: 10 * time.Second, ReadBuffer: 4 << 10, NewDecoder: KDBDecoder(m, kdb.Options{})},
			func(c *collector) pipeline.Consumer {
				c.block = release
				q = runQueue(t, 1, c)
				return q
			})
		peers := map[string]bool{}
		data := kdbRecords(t, m, 0, 0, n)
		recSize := len(data) / n
		for range clients {
			c := dial(t, e.r.Addr())
			peers[c.LocalAddr().String()] = true
			if _, err := c.Write(data); err != nil {
				t.Fatal(err)
			}
		}
		// The consumer is blocked and the queue full: every connection ends
		// up stuck handing a batch on, its other bytes unread.
		waitFor(t, "the queue to fill", 5*time.Second, func() bool {
			e.col.mu.Lock()
			defer e.col.mu.Unlock()
			return e.col.blocks > 0 && q.Depth() == 1+clients
		})
		e.cancel()
		time.Sleep(3 * drain)
		begin := time.Now()
		q.Abort()
		var err error
		select {
		case err = <-e.done:
			e.done <- err
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after the queue was aborted")
		}
		if !errors.Is(err, pipeline.ErrClosed) {
			t.Errorf("Run returned %v, want pipeline.ErrClosed", err)
		}
		if d := time.Since(begin); d > time.Second {
			t.Errorf("Run returned %s after the abort", d)
		}
		for _, l := range e.logs.lines(t, "dropped") {
			// Every byte the client sent was handed on (before offset),
			// refused (records), or read and dropped; what the probe
			// found in the socket is a lower bound.
			off, recs, dropped, unread := l["offset"], l["records"], l["dropped_bytes"], l["unread_bytes"]
			if l["level"] != "WARN" || off == nil || recs == nil || dropped == nil || unread == nil ||
				recs.(float64) == 0 || off.(float64)+recs.(float64)*float64(recSize)+dropped.(float64)+unread.(float64) > float64(len(data)) {
				t.Errorf("line %v", l)
			}
			delete(peers, l["peer"].(string))
		}
		if len(peers) > 0 {
			t.Errorf("no loss logged for %v:\n%s", peers, e.logs.String())
		}
	})
}

// runningQueue is a pipeline.Queue whose Run goroutine the test owns.
type runningQueue struct {
	*pipeline.Queue
	done chan struct{}
}

// runQueue runs a queue of capacity batches in front of c; it is closed
// when the test ends, if not before.
func runQueue(t *testing.T, capacity int, c *collector) *runningQueue {
	q := &runningQueue{Queue: pipeline.NewQueue(capacity, c, nil), done: make(chan struct{})}
	go func() { q.Run(context.Background()); close(q.done) }()
	t.Cleanup(func() { q.Abort(); <-q.done })
	return q
}

// close closes the queue and waits until its batches are consumed.
func (q *runningQueue) close() {
	q.Close()
	<-q.done
}
