package tcp

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
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
// Run returns, and no goroutine is left.
func TestShutdown(t *testing.T) {
	m := kdbMapping(t)
	const n = 20000
	data := kdbRecords(t, m, 1, 0, n)
	t.Run("client stays connected", func(t *testing.T) {
		e := start(t, Config{DrainTimeout: 300 * time.Millisecond, NewDecoder: KDBDecoder(m, kdb.Options{})}, nil)
		e.col.delay = time.Millisecond // a slowish consumer: most records are still unread at cancel
		c := dial(t, e.r.Addr())
		if _, err := c.Write(data); err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		if err := e.stop(t); err != nil {
			t.Fatal(err)
		}
		t.Logf("Run returned %s after cancel", time.Since(begin))
		checkPerClient(t, e.col.records(), map[int]int{1: n})
		goleak.VerifyNone(t)
	})
	t.Run("client closes", func(t *testing.T) {
		e := start(t, Config{DrainTimeout: 5 * time.Second, NewDecoder: KDBDecoder(m, kdb.Options{})}, nil)
		c := dial(t, e.r.Addr())
		if _, err := c.Write(data); err != nil {
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
	t.Run("drain deadline inside a record", func(t *testing.T) {
		e := start(t, Config{DrainTimeout: 200 * time.Millisecond, NewDecoder: KDBDecoder(m, kdb.Options{})}, queued(t))
		c := dial(t, e.r.Addr())
		recSize := len(data) / n
		if _, err := c.Write(data[:100*recSize+5]); err != nil {
			t.Fatal(err)
		}
		e.col.wait(t, 100, 5*time.Second)
		if err := e.stop(t); err != nil {
			t.Fatal(err)
		}
		if lines := e.logs.lines(t, "drain deadline passed inside a record"); len(lines) != 1 || lines[0]["dropped_bytes"] != float64(5) {
			t.Errorf("log lines %v", lines)
		}
		if n := e.r.Stats().DecodeErrors; n != 0 {
			t.Errorf("a shutdown cut counted as %d decode errors", n)
		}
	})
}
