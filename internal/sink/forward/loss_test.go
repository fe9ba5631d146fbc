package forward

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// TestNonBlockReportsBufferedLoss: records of a batch whose Consume
// returned nil and that are lost with the connection before they were
// written make the next Flush (or Close) fail with ErrDropped, once; the
// bridge must not take them for delivered.
func TestNonBlockReportsBufferedLoss(t *testing.T) {
	// peerCloses sends batch A (buffered), lets the receiver close the
	// connection and waits until the sink has noticed.
	peerCloses := func(t *testing.T, rec *receiver, s *Sink) {
		t.Helper()
		if err := s.Consume(context.Background(), events(0, 10)); err != nil {
			t.Fatal(err)
		}
		rec.stop() // the target restarts
		rec.start()
		deadline := time.Now().Add(5 * time.Second)
		for s.Connected() {
			if time.Now().After(deadline) {
				t.Fatal("the sink did not notice that the peer closed")
			}
			time.Sleep(time.Millisecond)
		}
	}
	for _, tc := range []struct {
		name string
		// run returns the error that must report the loss of batch A.
		run func(t *testing.T, rec *receiver, s *Sink) error
	}{
		{"flush after the next consume", func(t *testing.T, rec *receiver, s *Sink) error {
			peerCloses(t, rec, s)
			if err := s.Consume(context.Background(), events(100, 5)); err != nil {
				t.Fatalf("Consume(B): %v", err) // B goes on a new connection
			}
			err := s.Flush()
			if again := s.Flush(); again != nil {
				t.Errorf("second Flush: %v (the loss is reported once)", again)
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			return err
		}},
		{"close after the next consume", func(t *testing.T, rec *receiver, s *Sink) error {
			peerCloses(t, rec, s)
			if err := s.Consume(context.Background(), events(100, 5)); err != nil {
				t.Fatalf("Consume(B): %v", err)
			}
			return s.Close()
		}},
		{"flush without a consume", func(t *testing.T, rec *receiver, s *Sink) error {
			peerCloses(t, rec, s)
			err := s.Flush()
			if err := s.Consume(context.Background(), events(100, 5)); err != nil {
				t.Fatalf("Consume(B): %v", err)
			}
			if err := s.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := newReceiver(t, Kieker)
			rec.start()
			defer rec.stop()
			s, err := New(Config{URL: rec.url()}, Settings{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			err = tc.run(t, rec, s)
			if !errors.Is(err, ErrDropped) || !strings.Contains(err.Error(), " 10 records") {
				t.Fatalf("got %v, want an error wrapping ErrDropped that counts batch A's 10 records", err)
			}
			rec.waitFor(5)
			if st := s.Stats(); st.Dropped != 10 || st.Sent != 5 || st.Connects != 2 {
				t.Fatalf("stats %+v", st)
			}
			got := orderIndexes(rec.records())
			for i := 100; i < 105; i++ {
				if got[int64(i)] != 1 {
					t.Fatalf("received %v, want batch B (orderIndex 100-104) once", got)
				}
			}
		})
	}
}

// failConn is a connection whose writes fail; reads block until Close.
type failConn struct{ net.Conn }

func (failConn) Write([]byte) (int, error) { return 0, errors.New("connection reset by peer") }

// TestNonBlockWriteFailureSplitsTheCount: a write that fails inside
// Consume reports the batch's own records; the records of an earlier,
// accepted batch that were in the buffer are reported by the next Flush.
func TestNonBlockWriteFailureSplitsTheCount(t *testing.T) {
	s, err := New(Config{URL: "kieker-tcp://127.0.0.1:1", BufferSize: 4 << 10}, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var peers []net.Conn
	defer func() {
		for _, p := range peers {
			p.Close()
		}
	}()
	s.dial = func(context.Context, string, string) (net.Conn, error) {
		c, p := net.Pipe()
		peers = append(peers, p)
		return failConn{c}, nil
	}
	ctx := context.Background()
	if err := s.Consume(ctx, events(0, 3)); err != nil { // buffered
		t.Fatal(err)
	}
	err = s.Consume(ctx, events(3, 500)) // fills the buffer: the write fails
	if !errors.Is(err, ErrDropped) || !strings.Contains(err.Error(), " 500 records of the batch") {
		t.Fatalf("Consume: %v", err)
	}
	err = s.Flush()
	if !errors.Is(err, ErrDropped) || !strings.Contains(err.Error(), " 3 records") || !strings.Contains(err.Error(), "connection reset") {
		t.Fatalf("Flush: %v, want the 3 records of the first batch", err)
	}
	if err := s.Flush(); err != nil {
		t.Fatalf("second Flush: %v", err)
	}
	if st := s.Stats(); st.Dropped != 503 || st.Sent != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// TestUnconfirmedRecords: a receiver that reads what it was sent and then
// closes its end (cleanly or with a reset) before the sink ends the stream
// (as one that rejects the stream does) leaves the records written on that
// connection unconfirmed: Close fails with ErrDropped and Stats counts
// them.
func TestUnconfirmedRecords(t *testing.T) {
	for _, reset := range []bool{false, true} {
		t.Run(map[bool]string{false: "close", true: "reset"}[reset], func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			hungUp := make(chan struct{})
			go func() {
				defer close(hungUp)
				c, err := ln.Accept()
				if err != nil {
					return
				}
				buf := make([]byte, 64<<10)
				for { // read everything: no unread data turns the close into a reset
					c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
					if _, err := c.Read(buf); err != nil {
						break
					}
				}
				if reset {
					c.(*net.TCPConn).SetLinger(0)
				}
				c.Close()
			}()
			s, err := New(Config{URL: "kdb-tcp://" + ln.Addr().String(), Block: true}, Settings{})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Consume(context.Background(), events(0, 10)); err != nil {
				t.Fatal(err)
			}
			<-hungUp
			err = s.Close()
			if !errors.Is(err, ErrDropped) || !strings.Contains(err.Error(), "10 records") {
				t.Errorf("Close: %v, want ErrDropped counting the 10 records", err)
			}
			if st := s.Stats(); st.Unconfirmed != 10 || st.Sent != 10 {
				t.Errorf("stats %+v, want 10 sent and unconfirmed", st)
			}
		})
	}
}
