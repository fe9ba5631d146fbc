package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/stream"
)

// lossRun is what one burst or paced run showed.
type lossRun struct {
	records    int64         // sent
	logTook    time.Duration // until the log sink had them all
	streamTook time.Duration // until the stream sink had consumed (or dropped) them all
	streamed   int64         // records a subscriber from the repository's start got
	missed     int64         // records it was told it missed (OnGap)
	overflow   int64         // records the engine dropped for the stream
	peakRSS    int64         // the bridge's peak resident memory (bytes)
}

func (r lossRun) lossless() bool { return r.streamed == r.records && r.missed == 0 && r.overflow == 0 }

// logRate is the log sink's rate over the run (records a second).
func (r lossRun) logRate() float64 { return float64(r.records) / r.logTook.Seconds() }

// streamRate is the stream sink's rate over the run: the records it took
// from the engine's queue (published, or handed to its asynchronous
// publisher) a second, from the first byte sent.
func (r lossRun) streamRate() float64 { return float64(r.records) / r.streamTook.Seconds() }

func (r lossRun) String() string {
	return fmt.Sprintf("%9d records: log %5.2f M records/s, stream %5.2f M records/s (%.2f of the log's); stream got %9d, told of %d missed, engine dropped %d: lossless %v; bridge peak RSS %d MiB",
		r.records, r.logRate()/1e6, r.streamRate()/1e6, r.streamRate()/r.logRate(), r.streamed, r.missed, r.overflow, r.lossless(), r.peakRSS>>20)
}

// connEvents builds each connection's bytes: n records in all, Kieker
// single-socket frames, its own string registry per connection.
func connEvents(n, conns int) (data [][]byte, records []int) {
	data, records = make([][]byte, conns), make([]int, conns)
	for i := range data {
		k := n / conns
		if i < n%conns {
			k++
		}
		data[i], records[i] = newEncoder().append(nil, k, int64(i+1)), k
	}
	return data, records
}

// lossy sends n records on conns connections, at once (rate 0) or paced
// at rate records a second in all, to a fresh bridge whose stream section
// has streamExtra; it waits for the log sink to have them, then counts
// what the stream's repository holds with a subscriber from its start.
func lossy(ctx context.Context, o options, n int, rate int, dir, streamExtra string) (lossRun, error) {
	res := lossRun{records: int64(n)}
	data, counts := connEvents(n, o.conns)
	b, err := startBridgeWith(ctx, o.bin, dir, streamExtra)
	if err != nil {
		return res, err
	}
	defer b.stop()
	cs := make([]net.Conn, o.conns)
	for i := range cs {
		if cs[i], err = net.Dial("tcp", b.addr); err != nil {
			return res, err
		}
		defer cs[i].Close()
	}
	start := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, o.conns)
	for i, c := range cs {
		wg.Go(func() { errs[i] = send(c, data[i], counts[i], rate/o.conns, start) })
	}
	for {
		got, err := b.sinkRecords()
		if err != nil {
			return res, err
		}
		if res.streamTook == 0 {
			if taken, _, err := b.streamTaken(); err == nil && taken >= int64(n) {
				res.streamTook = time.Since(start)
			}
		}
		if got >= int64(n) {
			res.logTook = time.Since(start)
			break
		}
		select {
		case <-b.exited:
			return res, fmt.Errorf("bridge exited: %s", b.stderr)
		case <-ctx.Done():
			return res, ctx.Err()
		case <-time.After(benchkit.PollStep(time.Since(start))):
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return res, err
	}
	// The stream sink has consumed or dropped every batch.
	if err := waitStream(b, &res, start, n); err != nil {
		return res, err
	}
	res.streamed, res.missed, err = countRepository(ctx, b.url, int64(n))
	_, res.peakRSS, _ = benchkit.Memory(b.cmd.Process.Pid)
	return res, err
}

// waitStream waits (at most 2 minutes) until the stream sink has consumed
// or dropped n records, noting when in res.streamTook (if not yet noted)
// and what it dropped in res.overflow.
func waitStream(b *bridge, res *lossRun, start time.Time, n int) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		taken, dropped, err := b.streamTaken()
		if err != nil {
			return err
		}
		res.overflow = dropped
		if taken >= int64(n) {
			if res.streamTook == 0 {
				res.streamTook = time.Since(start)
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the stream sink consumed %d and dropped %d of %d records in 2 minutes", taken-dropped, dropped, n)
		}
		time.Sleep(benchkit.PollStep(time.Since(start)))
	}
}

// send writes data (records records) to c: at once when perSecond is 0,
// else paced by the clock, by bytes (the bridge reassembles frames cut
// across reads).
func send(c net.Conn, data []byte, records, perSecond int, start time.Time) error {
	if perSecond <= 0 {
		_, err := c.Write(data)
		return err
	}
	bytesPerSec := float64(perSecond) * float64(len(data)) / float64(records)
	sent := 0
	for sent < len(data) {
		due := min(len(data), int(bytesPerSec*time.Since(start).Seconds())+1)
		if due > sent {
			if _, err := c.Write(data[sent:due]); err != nil {
				return err
			}
			sent = due
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

// countRepository reads the stream from its first message and returns
// the records it got and those it was told it missed, once they make
// want or nothing has moved for 15 s.
func countRepository(ctx context.Context, url string, want int64) (got, missed int64, err error) {
	s, err := stream.Open(url, stream.Options{})
	if err != nil {
		return 0, 0, err
	}
	defer s.Close()
	var mu sync.Mutex
	s.OnEvent("", func(*stream.Event) { mu.Lock(); got++; mu.Unlock() })
	s.OnGap(func(g stream.Gap) { mu.Lock(); missed += int64(g.Records); mu.Unlock() })
	s.SetStartSequence(1)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Start(sctx) }()
	last, moved := int64(-1), time.Now()
	for {
		mu.Lock()
		sum := got + missed
		mu.Unlock()
		if sum >= want || time.Since(moved) > 15*time.Second {
			break
		}
		if sum != last {
			last, moved = sum, time.Now()
		}
		select {
		case err := <-done:
			return got, missed, fmt.Errorf("subscriber: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	mu.Lock()
	defer mu.Unlock()
	return got, missed, nil
}

// lossTests finds the largest burst and the highest paced rate the stream
// takes without losing a record, on fresh bridges, beside the log sink's
// rate in the same runs.
func lossTests(ctx context.Context, o options, tmp, label, streamExtra string) (ok bool, logRate float64, err error) {
	fmt.Printf("\n%s: bursts on %d connections, sent at once (doubling from %d to %d records):\n", label, o.conns, o.burstFrom, o.burstTo)
	largest := 0
	worst := 0.0 // the lowest stream rate ÷ log rate of a lossless run
	note := func(r lossRun) {
		if q := r.streamRate() / r.logRate(); r.lossless() && (worst == 0 || q < worst) {
			worst = q
		}
	}
	for n := o.burstFrom; n <= o.burstTo; n *= 2 {
		r, err := lossy(ctx, o, n, 0, filepath.Join(tmp, fmt.Sprintf("%s-burst-%d", label, n)), streamExtra)
		if err != nil {
			return false, 0, err
		}
		fmt.Println("  " + r.String())
		note(r)
		logRate = max(logRate, r.logRate())
		if !r.lossless() {
			break
		}
		largest = n
	}
	fmt.Printf("\n%s: paced on %d connections for %v (rates doubling from %d records/s until the bridge does not keep the pace):\n", label, o.conns, o.paceFor, o.rateFrom)
	best := 0.0
	for rate := o.rateFrom; ; rate *= 2 {
		n := int(float64(rate) * o.paceFor.Seconds())
		r, err := lossy(ctx, o, n, rate, filepath.Join(tmp, fmt.Sprintf("%s-rate-%d", label, rate)), streamExtra)
		if err != nil {
			return false, 0, err
		}
		fmt.Printf("  %8d records/s: %s\n", rate, r)
		note(r)
		if !r.lossless() {
			break
		}
		// The rate the bridge kept (the log sink's): at most the pace.
		best = max(best, min(float64(rate), r.logRate()))
		logRate = max(logRate, r.logRate())
		if r.logRate() < 0.9*float64(rate) {
			break // the bridge (or this client) is at its limit
		}
	}
	fmt.Printf("\n%s: largest lossless burst %d records (log sink: up to %.2f M records/s in these runs); highest lossless sustained rate %.2f M records/s: %.2f of the log sink's best rate\n",
		label, largest, logRate/1e6, best/1e6, best/logRate)
	fmt.Printf("%s: the stream's rate ÷ the log sink's in the same run, lowest of the lossless runs: %.2f (aim: at least %.2f)\n", label, worst, aimKeepUp)
	return largest >= o.burstAim && worst >= aimKeepUp, logRate, nil
}

// aimKeepUp: the stream takes records at least this fraction of the rate
// the log sink takes them in the same run (1 but for the polling's
// resolution: both are read from one metrics page per poll).
const aimKeepUp = 0.95
