package forward

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

func TestParseURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want Target
		err  string // substring of the error; "" means valid
	}{
		{url: "kieker-tcp://127.0.0.1:10133", want: Target{Kieker, "127.0.0.1:10133"}},
		{url: "kdb-tcp://bridge.example.org:5678/", want: Target{KDB, "bridge.example.org:5678"}},
		{url: "kdb-tcp://[::1]:1", want: Target{KDB, "[::1]:1"}},
		{url: "tcp://127.0.0.1:10133", err: `unknown scheme "tcp"`},
		{url: "127.0.0.1:10133", err: "first path segment in URL cannot contain colon"},
		{url: "localhost", err: "missing scheme"},
		{url: "kieker-tcp://127.0.0.1", err: "missing port"},
		{url: "kieker-tcp://127.0.0.1:", err: "missing port"},
		{url: "kieker-tcp://:10133", err: "missing host"},
		{url: "kieker-tcp://h:0", err: `port "0" is not a number from 1 to 65535`},
		{url: "kieker-tcp://h:65536", err: `port "65536" is not a number from 1 to 65535`},
		{url: "kieker-tcp://h:x", err: "invalid port"},
		{url: "kieker-tcp:h:1", err: "missing // after the scheme"},
		{url: "kieker-tcp://u:p@h:1", err: "user information"},
		{url: "kieker-tcp://h:1/path", err: `unexpected path "/path"`},
		{url: "kieker-tcp://h:1?x=1", err: "unexpected query"},
		{url: "kieker-tcp://h:1#f", err: "unexpected fragment"},
		{url: "", err: "missing scheme"},
	} {
		t.Run(tc.url, func(t *testing.T) {
			got, err := ParseURL(tc.url)
			if tc.err == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got != tc.want {
					t.Fatalf("got %+v, want %+v", got, tc.want)
				}
				if back, err := ParseURL(got.String()); err != nil || back != got {
					t.Fatalf("String %q does not parse back: %v", got.String(), err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted as %+v", got)
			}
			if !errors.Is(err, ErrBadURL) || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.url) {
				t.Fatalf("error %q does not wrap ErrBadURL, name the URL and say %q", err, tc.err)
			}
			if _, nerr := New(Config{URL: tc.url}, Settings{}); !errors.Is(nerr, ErrBadURL) {
				t.Fatalf("New: %v", nerr)
			}
		})
	}
}

func TestNewConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"backoff max below min", Config{BackoffMin: time.Second, BackoffMax: time.Millisecond}},
		{"negative dial timeout", Config{DialTimeout: -1}},
		{"negative buffer", Config{BufferSize: -1}},
		{"negative registry limit", Config{MaxRegistryEntries: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.URL = "kieker-tcp://127.0.0.1:1"
			if _, err := New(tc.cfg, Settings{}); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	// A mapping is only needed for kdb-tcp; an empty catalogue cannot
	// build the default one.
	if _, err := New(Config{URL: "kdb-tcp://127.0.0.1:1", Catalog: record.NewCatalog()}, Settings{}); err == nil {
		t.Fatal("default mapping built from an empty catalogue")
	}
}

// TestCorpus forwards every record of every shared Kieker log through a
// loopback connection and checks that the receiver decodes exactly the
// records read (for kdb-tcp without the logging timestamp, which the
// dialect does not carry).
func TestCorpus(t *testing.T) {
	logs := testcorpus.LogNames(t)
	if len(logs) < 9 {
		t.Fatalf("found %d logs in the corpus", len(logs))
	}
	for _, proto := range []Protocol{Kieker, KDB} {
		for _, block := range []bool{false, true} {
			for _, name := range logs {
				t.Run(proto.String()+"/block="+map[bool]string{false: "false", true: "true"}[block]+"/"+name, func(t *testing.T) {
					rec := newReceiver(t, proto)
					rec.start()
					defer rec.stop()
					s, err := New(Config{URL: rec.url(), Mapping: allMapping, Block: block, BufferSize: 4096}, Settings{})
					if err != nil {
						t.Fatal(err)
					}
					r, err := kiekerlog.Open(testcorpus.Path(t, "kieker-logs", name), kiekerlog.Options{Catalog: cat, BatchSize: 100})
					if err != nil {
						t.Fatal(err)
					}
					var want []record.Record
					err = r.Run(context.Background(), pipeline.ConsumerFunc(func(ctx context.Context, b *record.Batch) error {
						for i := range b.Records {
							c := b.Records[i].Clone()
							if proto == KDB {
								c.LoggingTimestamp = record.NoTimestamp
							}
							want = append(want, c)
						}
						return s.Consume(ctx, b)
					}))
					if err != nil {
						t.Fatal(err)
					}
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					if len(want) == 0 {
						t.Fatal("log has no records")
					}
					rec.waitFor(len(want))
					if errs := rec.decodeErrors(); len(errs) > 0 {
						t.Fatalf("receiver: %v", errs)
					}
					if diff := cmp.Diff(want, rec.records(), cmpRecords...); diff != "" {
						t.Fatalf("received records differ (-sent +received):\n%s", diff)
					}
					if st := s.Stats(); st.Sent != int64(len(want)) || st.Dropped != 0 || st.Connects != 1 {
						t.Fatalf("stats %+v for %d records", st, len(want))
					}
				})
			}
		}
	}
}

// TestBlockDeliversAcrossRestart stops the receiver between two halves of a
// stream and restarts it later: with Block, Consume waits and nothing is
// lost.
func TestBlockDeliversAcrossRestart(t *testing.T) {
	for _, proto := range []Protocol{Kieker, KDB} {
		t.Run(proto.String(), func(t *testing.T) {
			rec := newReceiver(t, proto)
			rec.start()
			defer rec.stop()
			var logs logBuffer
			s, err := New(Config{URL: rec.url(), Block: true, BackoffMin: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond, Mapping: allMapping},
				Settings{Logger: newLogger(&logs)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			ctx := context.Background()
			const batches, size = 20, 500
			for i := range batches / 2 {
				if err := s.Consume(ctx, events(i*size, size)); err != nil {
					t.Fatal(err)
				}
			}
			rec.waitFor(batches / 2 * size)
			rec.stop()
			for deadline := time.Now().Add(10 * time.Second); s.Connected(); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("still connected 10 s after the receiver closed the connection")
				}
			}
			restarted := make(chan struct{})
			go func() {
				time.Sleep(300 * time.Millisecond)
				rec.start()
				close(restarted)
			}()
			t0 := time.Now()
			for i := batches / 2; i < batches; i++ {
				if err := s.Consume(ctx, events(i*size, size)); err != nil {
					t.Fatal(err)
				}
				if i == batches/2 {
					if d := time.Since(t0); d < 200*time.Millisecond {
						t.Fatalf("Consume returned after %v while the receiver was down", d)
					}
				}
			}
			<-restarted
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			rec.waitFor(batches * size)
			seen := orderIndexes(rec.records())
			for i := range batches * size {
				if seen[int64(i)] == 0 {
					t.Fatalf("record %d lost", i)
				}
			}
			if st := s.Stats(); st.Dropped != 0 || st.Connects != 2 {
				t.Fatalf("stats %+v", st)
			}
			for _, msg := range []string{"forward: connected", "forward: connection lost", "forward: reconnected"} {
				if n := logs.count(msg); n != 1 {
					t.Fatalf("%q logged %d times:\n%s", msg, n, logs.String())
				}
			}
		})
	}
}

// TestBlockOutageLoggedOnce: the receiver goes away in the middle of a
// stream (it stops listening and ends its connections, reading what they
// still carry) and comes back while the sender waits, as replay's target
// does when it is restarted. The sink logs the loss once, naming the
// target and the reason, and the return once, with how long the target was
// down, not each failed retry; every record arrives. The connection Connect
// made is not logged: its caller reports it (replay said nothing at all).
func TestBlockOutageLoggedOnce(t *testing.T) {
	for _, proto := range []Protocol{Kieker, KDB} {
		t.Run(proto.String(), func(t *testing.T) {
			rec := newReceiver(t, proto)
			rec.start()
			defer rec.stop()
			var logs logBuffer
			s, err := New(Config{URL: rec.url(), Block: true, BackoffMin: 5 * time.Millisecond, BackoffMax: 20 * time.Millisecond, Mapping: allMapping},
				Settings{Logger: newLogger(&logs)})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var refused atomic.Int64
			dial := s.dial
			s.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dial(ctx, network, addr)
				if err != nil {
					refused.Add(1)
				}
				return c, err
			}
			ctx := context.Background()
			if err := s.Connect(ctx); err != nil {
				t.Fatal(err)
			}
			const size = 50
			stop := make(chan struct{})
			type result struct {
				batches int
				err     error
			}
			sent := make(chan result, 1)
			go func() {
				i := 0
				for ; ; i++ {
					select {
					case <-stop:
						sent <- result{i, nil}
						return
					default:
					}
					if err := s.Consume(ctx, events(i*size, size)); err != nil {
						sent <- result{i, err}
						return
					}
					time.Sleep(time.Millisecond) // a paced stream, as replay --rate sends
				}
			}()
			rec.waitFor(20 * size)
			rec.goAway()
			waitLog(t, &logs, "forward: connection lost")
			for deadline := time.Now().Add(10 * time.Second); refused.Load() < 3; time.Sleep(5 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("%d connection attempts failed in 10 s while the receiver was away", refused.Load())
				}
			}
			rec.start()
			rec.waitConn(1, 20*size) // the stream goes on over a new connection
			close(stop)
			var res result
			select {
			case res = <-sent:
			case <-time.After(30 * time.Second):
				t.Fatal("Consume still blocked 30 s after the receiver came back")
			}
			if res.err != nil {
				t.Fatal(res.err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			rec.waitFor(res.batches * size)
			seen := orderIndexes(rec.records())
			for i := range res.batches * size {
				if seen[int64(i)] == 0 {
					t.Fatalf("record %d of %d lost", i, res.batches*size)
				}
			}
			target := "target=" + s.Target().String()
			var lost, back []string
			for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
				switch {
				case strings.Contains(line, "forward: connection lost, reconnecting"):
					lost = append(lost, line)
				case strings.Contains(line, "forward: reconnected"):
					back = append(back, line)
				case strings.Contains(line, "forward: connected"), strings.Contains(line, "unreachable"):
					t.Errorf("logged: %s", line)
				}
			}
			if len(lost) != 1 || len(back) != 1 {
				t.Fatalf("%d lines on the loss and %d on the return, want one each:\n%s", len(lost), len(back), logs.String())
			}
			if !strings.Contains(lost[0], target) || !strings.Contains(lost[0], "err=") {
				t.Errorf("the loss does not name the target and the reason: %s", lost[0])
			}
			if !strings.Contains(back[0], target) || !strings.Contains(back[0], "down_for=") {
				t.Errorf("the return does not name the target and how long it was down: %s", back[0])
			}
			if st := s.Stats(); st.Connects != 2 || st.Dropped != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// bigBatch returns records large enough on the wire (about 8 KiB each)
// that n of them cannot fit in the socket buffers of a loopback connection.
func bigBatch(n int) *record.Batch {
	typ := cat.Lookup(record.Prefix + "flow.trace.operation.EntryLevelBeforeOperationEvent")
	params := make([]record.Value, 2000)
	for i := range params {
		params[i] = record.StringValue("p")
	}
	b := &record.Batch{}
	for i := range n {
		r := b.Add(typ, int64(i))
		r.Values[0] = record.IntValue(int64(i))
		r.Values[1] = record.IntValue(7)
		r.Values[2] = record.IntValue(int64(i))
		r.Values[3] = record.StringValue(opNames[i%len(opNames)])
		r.Values[4] = record.StringValue(classNames[i%len(classNames)])
		r.Values[5] = record.ListValue(record.String, params)
		r.Values[6] = record.ListValue(record.String, nil)
		r.Values[7] = record.IntValue(1)
	}
	return b
}

// TestBlockResendsPartialBatch resets the connection in the middle of a
// large batch: the whole batch arrives on the next connection.
func TestBlockResendsPartialBatch(t *testing.T) {
	for _, proto := range []Protocol{Kieker, KDB} {
		t.Run(proto.String(), func(t *testing.T) {
			rec := newReceiver(t, proto)
			rec.abortFirst = 64 << 10
			rec.start()
			defer rec.stop()
			s, err := New(Config{URL: rec.url(), Block: true, BackoffMin: 10 * time.Millisecond, Mapping: allMapping}, Settings{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			b := bigBatch(1000) // about 8 MB, twice the largest send buffer (tcp_wmem)
			if err := s.Consume(context.Background(), b); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			rec.waitConn(1, b.Len())
			first := rec.connRecords(0)
			if len(first) >= b.Len() {
				t.Fatalf("the first connection received all %d records; the batch was too small to be cut", len(first))
			}
			want := b.Records
			if proto == KDB {
				want = nil
				for i := range b.Records {
					c := b.Records[i].Clone()
					c.LoggingTimestamp = record.NoTimestamp
					want = append(want, c)
				}
			}
			if diff := cmp.Diff(want, rec.connRecords(1), cmpRecords...); diff != "" {
				t.Fatalf("second connection (-sent +received):\n%s", diff)
			}
			if st := s.Stats(); st.Connects != 2 || st.Dropped != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestNonBlockDropsWhileDown stops the receiver: batches are dropped,
// counted and reported without blocking, reconnection is tried at most once
// per back-off interval, and sending resumes once the receiver is back.
func TestNonBlockDropsWhileDown(t *testing.T) {
	for _, proto := range []Protocol{Kieker, KDB} {
		t.Run(proto.String(), func(t *testing.T) {
			rec := newReceiver(t, proto)
			rec.start()
			defer rec.stop()
			var logs logBuffer
			reg := metrics.New()
			const backoff = 100 * time.Millisecond
			s, err := New(Config{URL: rec.url(), BackoffMin: backoff, BackoffMax: backoff, Mapping: allMapping},
				Settings{Logger: newLogger(&logs), Metrics: reg.Sink("forward")})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var dials atomic.Int64
			dial := s.dial
			s.dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				dials.Add(1)
				return dial(ctx, network, addr)
			}
			ctx := context.Background()
			const size = 100
			next := 0
			send := func() error {
				err := s.Consume(ctx, events(next, size))
				next += size
				return err
			}

			// Up.
			for range 5 {
				if err := send(); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Flush(); err != nil {
				t.Fatal(err)
			}
			rec.waitFor(next)

			// Down: every batch is dropped at once.
			rec.stop()
			time.Sleep(50 * time.Millisecond)
			dials.Store(0)
			dropped := 0
			t0 := time.Now()
			for time.Since(t0) < 5*backoff/2 {
				t1 := time.Now()
				err := send()
				if d := time.Since(t1); d > 250*time.Millisecond {
					t.Fatalf("Consume blocked %v while the receiver was down", d)
				}
				if !errors.Is(err, ErrDropped) {
					t.Fatalf("Consume while down: %v", err)
				}
				dropped += size
				time.Sleep(time.Millisecond)
			}
			// Attempts at 0, 100, 200 ms (give or take the loop's timing).
			if n := dials.Load(); n < 2 || n > 4 {
				t.Fatalf("%d connection attempts in %v with a back-off of %v", n, 5*backoff/2, backoff)
			}
			if err := s.Flush(); err != nil {
				t.Fatalf("Flush with nothing buffered: %v", err)
			}

			// Back up: sending resumes within a back-off interval.
			rec.start()
			deadline := time.Now().Add(5 * time.Second)
			for {
				err := send()
				if err == nil {
					break
				}
				if !errors.Is(err, ErrDropped) || time.Now().After(deadline) {
					t.Fatalf("after restart: %v", err)
				}
				dropped += size
				time.Sleep(10 * time.Millisecond)
			}
			for range 5 {
				if err := send(); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			rec.waitFor(next - dropped)
			seen := orderIndexes(rec.records())
			if len(seen)+dropped != next {
				t.Fatalf("%d records received and %d dropped of %d", len(seen), dropped, next)
			}
			for i, n := range seen {
				if n != 1 {
					t.Fatalf("record %d received %d times", i, n)
				}
			}
			if st := s.Stats(); st.Dropped != int64(dropped) || st.Sent != int64(next-dropped) || st.Connects != 2 {
				t.Fatalf("stats %+v, dropped %d of %d", st, dropped, next)
			}
			if got := droppedCounter(t, reg); got != float64(dropped) {
				t.Fatalf("metric: %v dropped, want %d", got, dropped)
			}
			for _, msg := range []string{"forward: connected", "forward: connection lost", "forward: reconnected"} {
				if n := logs.count(msg); n != 1 {
					t.Fatalf("%q logged %d times:\n%s", msg, n, logs.String())
				}
			}
			if n := logs.count("unreachable"); n != 0 {
				t.Fatalf("retries logged:\n%s", logs.String())
			}
		})
	}
}

// droppedCounter returns the dropped-records counter of the sink "forward".
func droppedCounter(t *testing.T, reg *metrics.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gatherer().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "tracebridge_sink_dropped_records_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "sink" && l.GetValue() == "forward" {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// TestNonBlockSlowDial: a dial that hangs (a target that drops SYNs) holds
// Consume up to a second once, then batches are dropped at once while the
// dial goes on; Close interrupts it.
func TestNonBlockSlowDial(t *testing.T) {
	s, err := New(Config{URL: "kieker-tcp://192.0.2.1:10133", DialTimeout: time.Minute}, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	s.dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	ctx := context.Background()
	t0 := time.Now()
	err = s.Consume(ctx, events(0, 10))
	if d := time.Since(t0); d < maxDialWait-50*time.Millisecond || d > maxDialWait+500*time.Millisecond {
		t.Fatalf("first Consume took %v", d)
	}
	if !errors.Is(err, ErrDropped) || !errors.Is(err, errDialing) {
		t.Fatalf("first Consume: %v", err)
	}
	for range 10 {
		t1 := time.Now()
		if err := s.Consume(ctx, events(0, 10)); !errors.Is(err, ErrDropped) {
			t.Fatal(err)
		}
		if d := time.Since(t1); d > 50*time.Millisecond {
			t.Fatalf("Consume took %v while a dial was in flight", d)
		}
	}
	t2 := time.Now()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t2); d > time.Second {
		t.Fatalf("Close took %v", d)
	}
	if st := s.Stats(); st.Dropped != 110 {
		t.Fatalf("stats %+v", st)
	}
}

// TestBlockInterrupted: a blocked Consume returns when ctx is done or the
// sink is closed, and counts its batch as dropped.
func TestBlockInterrupted(t *testing.T) {
	addr := deadAddr(t)
	t.Run("ctx", func(t *testing.T) {
		s, err := New(Config{URL: "kdb-tcp://" + addr, Block: true, BackoffMin: 10 * time.Millisecond, BackoffMax: 20 * time.Millisecond}, Settings{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		err = s.Consume(ctx, events(0, 5))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatal(err)
		}
		if d := time.Since(t0); d > time.Second {
			t.Fatalf("returned after %v", d)
		}
		if st := s.Stats(); st.Dropped != 5 {
			t.Fatalf("stats %+v", st)
		}
	})
	t.Run("close", func(t *testing.T) {
		s, err := New(Config{URL: "kieker-tcp://" + addr, Block: true, BackoffMin: time.Minute}, Settings{})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() { done <- s.Consume(context.Background(), events(0, 5)) }()
		time.Sleep(100 * time.Millisecond)
		t0 := time.Now()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := <-done; !errors.Is(err, ErrClosed) {
			t.Fatal(err)
		}
		if d := time.Since(t0); d > time.Second {
			t.Fatalf("Close took %v", d)
		}
	})
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestCloseAndReuse(t *testing.T) {
	s, err := New(Config{URL: "kieker-tcp://" + deadAddr(t)}, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	if s.Connected() {
		t.Fatal("connected before the first Consume")
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Consume(context.Background(), events(0, 3)); !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Consume(context.Background(), &record.Batch{}); err != nil {
		t.Fatal(err)
	}
}

// TestUnmappedKDB sends types the mapping lacks: they are dropped, counted
// and logged once per type; the mapped records arrive.
func TestUnmappedKDB(t *testing.T) {
	m, err := kdb.NewMapping(map[int32]*record.Type{1: cat.Lookup(record.BeforeOperationEvent)})
	if err != nil {
		t.Fatal(err)
	}
	rec := newReceiver(t, KDB)
	rec.mapping = m
	rec.start()
	defer rec.stop()
	var logs logBuffer
	reg := metrics.New()
	s, err := New(Config{URL: rec.url(), Mapping: m}, Settings{Logger: newLogger(&logs), Metrics: reg.Sink("forward")})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	after := cat.Lookup(record.AfterOperationEvent)
	split := cat.Lookup(record.SplitEvent)
	for round := range 3 {
		b := events(round*10, 10)
		for i := range 4 {
			r := b.Add(after, 1)
			r.Values[3] = record.StringValue("op")
			r.Values[4] = record.StringValue("class")
			b.Add(split, 2).Values[2] = record.IntValue(int64(i))
		}
		if err := s.Consume(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	rec.waitFor(30)
	if got := len(orderIndexes(rec.records())); got != 30 || rec.count() != 30 {
		t.Fatalf("received %d records", rec.count())
	}
	if st := s.Stats(); st.Dropped != 24 || st.Sent != 30 {
		t.Fatalf("stats %+v", st)
	}
	if got := droppedCounter(t, reg); got != 24 {
		t.Fatalf("metric: %v dropped", got)
	}
	for _, typ := range []string{record.AfterOperationEvent, record.SplitEvent} {
		if n := logs.count("type=" + typ); n != 1 {
			t.Fatalf("%s logged %d times:\n%s", typ, n, logs.String())
		}
	}
}

// TestRegistryRotation: a kieker-tcp connection whose registry is full is
// replaced by a new one; nothing is lost and each connection decodes on its
// own.
func TestRegistryRotation(t *testing.T) {
	for _, block := range []bool{false, true} {
		t.Run(map[bool]string{false: "nonblock", true: "block"}[block], func(t *testing.T) {
			rec := newReceiver(t, Kieker)
			rec.start()
			defer rec.stop()
			s, err := New(Config{URL: rec.url(), Block: block, MaxRegistryEntries: 40}, Settings{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			typ := cat.Lookup(record.BeforeOperationEvent)
			const batches, size = 10, 20
			for k := range batches {
				b := &record.Batch{}
				for i := range size {
					r := b.Add(typ, 0)
					r.Values[2] = record.IntValue(int64(k*size + i))
					r.Values[3] = record.StringValue("op" + string(rune('a'+k)) + string(rune('a'+i)))
					r.Values[4] = record.StringValue("class")
				}
				if err := s.Consume(context.Background(), b); err != nil {
					t.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			rec.waitFor(batches * size)
			if errs := rec.decodeErrors(); len(errs) > 0 {
				t.Fatal(errs)
			}
			if got := len(orderIndexes(rec.records())); got != batches*size {
				t.Fatalf("received %d distinct records", got)
			}
			// 22 strings per batch (class name, "class", 20 ops): a new
			// connection every second batch.
			if st := s.Stats(); st.Connects != batches/2 || st.Dropped != 0 {
				t.Fatalf("stats %+v", st)
			}
		})
	}
}

// TestConsumeDoesNotAllocate checks the hot path once the buffer and the
// registry have grown.
func TestConsumeDoesNotAllocate(t *testing.T) {
	for _, proto := range []Protocol{Kieker, KDB} {
		for _, block := range []bool{false, true} {
			t.Run(proto.String()+map[bool]string{false: "/nonblock", true: "/block"}[block], func(t *testing.T) {
				rec := newReceiver(t, proto)
				rec.discard = true
				rec.start()
				defer rec.stop()
				s, err := New(Config{URL: rec.url(), Block: block}, Settings{})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				b := events(0, 1000)
				ctx := context.Background()
				for range 5 {
					if err := s.Consume(ctx, b); err != nil {
						t.Fatal(err)
					}
				}
				if n := testing.AllocsPerRun(50, func() {
					if err := s.Consume(ctx, b); err != nil {
						t.Fatal(err)
					}
				}); n != 0 {
					t.Fatalf("%v allocations per batch of %d records", n, b.Len())
				}
			})
		}
	}
}
