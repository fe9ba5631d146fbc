package jsstall

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestWatch: the checks' schedule, on a clock the test moves. A
// consumer is stalled when two checks at least After apart, with nothing
// read between them, find the same message undelivered; a message read
// starts the checks over; while nothing is found the wait doubles to
// MaxWait.
func TestWatch(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	var w Watch
	w.Start(t0)
	asked := 0
	leader := uint64(0) // what the stream's leader says is next
	next := func(context.Context) uint64 { asked++; return leader }
	stalled := func(at time.Duration) bool { return w.Stalled(context.Background(), t0.Add(at), next) }

	leader = 7
	if stalled(After-time.Millisecond) || asked != 0 {
		t.Fatalf("checked before After (asked %d)", asked)
	}
	if stalled(After) || asked != 1 {
		t.Fatalf("the first check, finding 7: stalled, or asked %d times (want 1)", asked)
	}
	if stalled(2*After-time.Millisecond) || asked != 1 {
		t.Fatalf("checked again before After had passed (asked %d)", asked)
	}
	// Read meanwhile: no stall, the checks begin again After the read.
	w.Read(t0.Add(2*After - time.Millisecond))
	if stalled(2*After) || asked != 1 {
		t.Fatalf("checked just after a read (asked %d)", asked)
	}
	if stalled(3*After) || asked != 2 {
		t.Fatalf("After the read, finding 7: stalled (the read started the checks over), or asked %d times (want 2)", asked)
	}
	leader = 8 // 7 was delivered (not read yet), 8 is next
	if stalled(4*After) || asked != 3 {
		t.Fatalf("another message found: stalled, or asked %d times (want 3)", asked)
	}
	if !stalled(5*After) || asked != 4 {
		t.Fatalf("8 found at two checks After apart with nothing read: not stalled (asked %d)", asked)
	}
	// After a stall the watch begins again, as for a new consumer.
	if stalled(6*After-time.Millisecond) || asked != 4 {
		t.Fatalf("checked within After of the new consumer (asked %d)", asked)
	}

	// Nothing to deliver: the waits double up to MaxWait.
	leader = 0
	w.Start(t0)
	at, waits := After, []time.Duration{}
	for range 8 {
		before := asked
		if stalled(at) || asked != before+1 {
			t.Fatalf("at %v: stalled with nothing to deliver, or not checked", at)
		}
		wait := w.checkAt.Sub(t0.Add(at))
		waits = append(waits, wait)
		at += wait
	}
	want := []time.Duration{2 * After, 4 * After, 8 * After, MaxWait, MaxWait, MaxWait, MaxWait, MaxWait}
	for i := range want {
		if waits[i] != want[i] {
			t.Fatalf("waits between checks %v, want %v", waits, want)
		}
	}
}

// TestNextSeq: the stream's leader on a real server says where the next
// message on a subject is, at or after a sequence; none past the last,
// and none from a stream that does not exist.
func TestNextSeq(t *testing.T) {
	srv, err := natsserver.NewServer(&natsserver.Options{Host: "127.0.0.1", Port: -1, JetStream: true,
		StoreDir: filepath.Join(t.TempDir(), "js"), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(30 * time.Second) {
		t.Fatal("NATS server not ready")
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "STALLTEST", Subjects: []string{"stalltest.>"}, AllowDirect: true}); err != nil {
		t.Fatal(err)
	}
	for _, subj := range []string{"stalltest.a", "stalltest.b", "stalltest.a", "stalltest.b.x"} { // sequences 1–4
		if _, err := js.Publish(ctx, subj, []byte("m")); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		subject string
		from    uint64
		want    uint64
	}{
		{"stalltest.a", 1, 1}, {"stalltest.a", 2, 3}, {"stalltest.a", 4, 0},
		{"stalltest.b", 1, 2}, {"stalltest.b", 3, 0}, {"stalltest.b.*", 1, 4},
		{"stalltest.>", 2, 2}, {"stalltest.>", 5, 0}, {"stalltest.c", 1, 0},
	} {
		if got := NextSeq(ctx, nc, "STALLTEST", c.subject, c.from); got != c.want {
			t.Errorf("NextSeq(%s, %d) = %d, want %d", c.subject, c.from, got, c.want)
		}
	}
	if got := NextSeq(ctx, nc, "NOSUCHSTREAM", "stalltest.a", 1); got != 0 {
		t.Errorf("a stream that does not exist: %d, want 0", got)
	}
}
