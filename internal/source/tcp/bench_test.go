package tcp

import (
	"context"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
)

// discard counts records and keeps nothing.
type discard struct{ n atomic.Int64 }

func (d *discard) Consume(_ context.Context, b *record.Batch) error {
	d.n.Add(int64(b.Len()))
	return nil
}

// benchServer sends b.N copies of payload (recs records each), spread over
// conns loopback connections, into a server with a discarding consumer.
// Each connection first sends prologue (untimed, uncounted records).
func benchServer(b *testing.B, newDec func() Decoder, prologue []byte, prologueRecs int, payload []byte, recs, conns int) {
	r, err := New(Config{Address: "127.0.0.1:0", NewDecoder: newDec}, Settings{})
	if err != nil {
		b.Fatal(err)
	}
	out := &discard{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx, out) }()
	clients := make([]net.Conn, conns)
	for i := range clients {
		if clients[i], err = net.Dial("tcp", r.Addr().String()); err != nil {
			b.Fatal(err)
		}
		if _, err := clients[i].Write(prologue); err != nil {
			b.Fatal(err)
		}
	}
	for out.n.Load() < int64(conns*prologueRecs) {
		time.Sleep(100 * time.Microsecond)
	}
	out.n.Store(0)
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	b.ResetTimer()
	var wg sync.WaitGroup
	for i, c := range clients {
		n := b.N / conns
		if i < b.N%conns {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range n {
				if _, err := c.Write(payload); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	want := int64(b.N) * int64(recs)
	deadline := time.Now().Add(time.Minute)
	for out.n.Load() < want && time.Now().Before(deadline) {
		time.Sleep(100 * time.Microsecond)
	}
	b.StopTimer()
	if got := out.n.Load(); got != want {
		b.Fatalf("%d records arrived, want %d", got, want)
	}
	b.ReportMetric(float64(want)/b.Elapsed().Seconds(), "records/s")
	for _, c := range clients {
		c.Close()
	}
	cancel()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}

func BenchmarkServerKDB(b *testing.B) {
	m := kdbMapping(b)
	payload := kdbRecords(b, m, 1, 0, 1000)
	benchServer(b, KDBDecoder(m, kdb.Options{}), nil, 0, payload, 1000, 4)
}

func BenchmarkServerKieker(b *testing.B) {
	// The records of the Java writer's stream: the prologue registers the
	// strings, the payload repeats the frames, as a long-running writer's
	// stream does once its strings are known.
	recs, _, err := decodeKieker(b, corpus(b, "kieker-streams", "java-tcp.bin"))
	if err != nil {
		b.Fatal(err)
	}
	enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
	var prologue, payload []byte
	for i := range recs {
		if prologue, err = enc.Append(prologue, &recs[i]); err != nil {
			b.Fatal(err)
		}
	}
	for i := range recs {
		if payload, err = enc.Append(payload, &recs[i]); err != nil {
			b.Fatal(err)
		}
	}
	benchServer(b, KiekerDecoder(kieker.Options{}), prologue, len(recs), payload, len(recs), 4)
}
