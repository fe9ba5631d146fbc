// Stream is the live stream's end-to-end benchmark. It is run by hand
// (go run ./bench/stream), never by CI; README.md explains the numbers.
//
// It starts `tracebridge serve` with a Kieker TCP receiver, a binary
// Kieker log and the stream on the embedded NATS server, and measures in
// one run:
//
//   - latency: a client writes Before/After events to the bridge's socket
//     at -rate records a second, each stamped (its timestamp field) with
//     the time it is written; -subs subscribers (the Go API, in this
//     process, each on its own connection) take the difference on
//     arrival. p50, p99 and max over every record every subscriber got
//     after the warm-up, and whether each got every record;
//   - ingest throughput without and with the subscribers: -records events
//     sent as fast as one connection goes, timed until the log sink has
//     consumed them all (tracebridge_sink_records_total{sink="log"}), on a
//     fresh bridge each time, -runs times alternating; the best of each.
//     The subscribers of these runs stand for subscribers on other
//     machines: a child process at nice 19 (-in-process: this process),
//     which must then get every record.
//
// Concurrency: one goroutine sends; each subscriber has Start's goroutine;
// the main goroutine polls the metrics and prints.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/stream"
)

// The aims.
const (
	aimP99   = 50 * time.Millisecond
	aimRatio = 0.8
)

type options struct {
	subs      int
	rate      int
	duration  time.Duration
	warmup    time.Duration
	records   int
	runs      int
	bin       string
	skip      string
	inProcess bool

	conns              int           // loss runs: connections
	burstFrom, burstTo int           // loss runs: burst sizes
	burstAim           int           // the largest lossless burst must reach this
	rateFrom           int           // loss runs: the first paced rate
	paceFor            time.Duration // loss runs: length of a paced run
	durable            bool          // loss runs: also with policy: durable
	streamExtra        string        // loss runs: more keys of the stream section

	otlpFrom, otlpTo int // OTLP runs: burst sizes (spans)
	otlpClients      int // OTLP runs: concurrent clients
}

func main() {
	var o options
	flag.IntVar(&o.subs, "subs", 10, "subscribers")
	flag.IntVar(&o.rate, "rate", 100_000, "records a second in the latency run")
	flag.DurationVar(&o.duration, "duration", 10*time.Second, "length of the latency run")
	flag.DurationVar(&o.warmup, "warmup", time.Second, "latencies in the first part of the latency run are not counted")
	flag.IntVar(&o.records, "records", 2_000_000, "records per throughput run")
	flag.IntVar(&o.runs, "runs", 3, "throughput runs with and without subscribers (alternating; the best of each counts)")
	flag.StringVar(&o.bin, "bin", "", "a tracebridge binary (default: build ./cmd/tracebridge)")
	flag.StringVar(&o.skip, "skip", "", "skip parts: loss, otlp, latency, throughput (comma-separated)")
	flag.IntVar(&o.conns, "conns", 2, "loss runs: client connections")
	flag.IntVar(&o.burstFrom, "burst-from", 250_000, "loss runs: the first burst (records; doubled until one loses records)")
	flag.IntVar(&o.burstTo, "burst-to", 8_000_000, "loss runs: the largest burst tried")
	flag.IntVar(&o.burstAim, "burst-aim", 1_000_000, "loss runs: the aim for the largest lossless burst")
	flag.IntVar(&o.rateFrom, "rate-from", 250_000, "loss runs: the first paced rate (records/s; doubled until one loses records or it is twice the log's rate)")
	flag.DurationVar(&o.paceFor, "pace-for", 5*time.Second, "loss runs: length of a paced run")
	flag.StringVar(&o.streamExtra, "stream-extra", "", "loss runs: more keys of the stream section (\"queue_batches: 256\")")
	flag.BoolVar(&o.durable, "durable", true, "loss runs: also with the stream's policy: durable (its cost: the log's rate beside it)")
	flag.IntVar(&o.otlpFrom, "otlp-from", 250_000, "OTLP runs: the first burst (spans; doubled up to -otlp-to)")
	flag.IntVar(&o.otlpTo, "otlp-to", 2_000_000, "OTLP runs: the largest burst")
	flag.IntVar(&o.otlpClients, "otlp-clients", 4, "OTLP runs: concurrent clients")
	cpuprofile := flag.String("cpuprofile", "", "write this program's CPU profile (the subscribers') to a file")
	flag.BoolVar(&o.inProcess, "in-process", false, "throughput: run the subscribers in this process at normal priority, not in a child process at nice 19")
	subscriberURL := flag.String("subscriber", "", "(internal) run -subs subscribers on this stream until each has -records records")
	flag.Parse()
	if *subscriberURL != "" {
		if err := subscriberChild(*subscriberURL, o); err != nil {
			fmt.Fprintln(os.Stderr, "bench/stream subscriber:", err)
			os.Exit(1)
		}
		return
	}
	if *cpuprofile != "" {
		if f, err := os.Create(*cpuprofile); err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	o.records = (o.records + 1<<16 - 1) &^ (1<<16 - 1) // whole chunks
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench/stream:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	tmp, err := os.MkdirTemp("", "bench-stream-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if o.bin == "" {
		if o.bin, err = benchkit.Build(ctx, tmp); err != nil {
			return err
		}
	}
	fmt.Printf("bench/stream: %d subscribers; %s\n", o.subs, benchkit.GoVersion(o.bin))
	failed := false
	skip := func(part string) bool { return slices.Contains(strings.Split(o.skip, ","), part) }
	if !skip("loss") {
		ok, best, err := lossTests(ctx, o, tmp, "best-effort", extra(o.streamExtra))
		if err != nil {
			return err
		}
		failed = failed || !ok
		if o.durable {
			_, durable, err := lossTests(ctx, o, tmp, "durable", ", policy: durable"+extra(o.streamExtra))
			if err != nil {
				return err
			}
			fmt.Printf("\nthe cost of policy: durable: the log sink's best rate beside a durable stream %.2f M records/s, beside a best-effort one %.2f M: ratio %.2f\n",
				durable/1e6, best/1e6, durable/best)
		}
	}
	if !skip("otlp") {
		ok, err := otlpTests(ctx, o, tmp)
		if err != nil {
			return err
		}
		failed = failed || !ok
	}
	if !skip("latency") {
		lat, err := latency(ctx, o, filepath.Join(tmp, "latency"))
		if err != nil {
			return err
		}
		fmt.Printf("\nlatency at %d records/s for %v (%v warm-up), socket write → arrival at each of %d subscribers:\n", o.rate, o.duration, o.warmup, o.subs)
		fmt.Printf("  p50 %v   p99 %v   max %v   (%d arrivals; aim: p99 under %v; JFR remote streams: about 1–2 s)\n",
			lat.p50.Round(10*time.Microsecond), lat.p99.Round(10*time.Microsecond), lat.max.Round(10*time.Microsecond), lat.n, aimP99)
		fmt.Printf("  records sent %d; every subscriber got all of them: %v\n", lat.sent, lat.complete)
		if lat.p99 > aimP99 || !lat.complete {
			failed = true
		}
	}
	if !skip("throughput") {
		var without, with []float64
		for i := range o.runs {
			for _, subs := range slices.Compact([]int{0, o.subs}) {
				r, err := throughput(ctx, o, subs, filepath.Join(tmp, fmt.Sprintf("tp-%d-%d", i, subs)))
				if err != nil {
					return err
				}
				fmt.Printf("  run %d, %2d subscribers: %.0f records/s ingest\n", i+1, subs, r)
				if subs == 0 {
					without = append(without, r)
				} else {
					with = append(with, r)
				}
			}
		}
		if len(with) == 0 {
			return nil
		}
		bw, bs := slices.Max(without), slices.Max(with)
		fmt.Printf("\ningest throughput (%d records over one Kieker TCP connection, best of %d): %.0f records/s without subscribers, %.0f with %d: ratio %.2f (aim: at least %.1f)\n",
			o.records, o.runs, bw, bs, o.subs, bs/bw, aimRatio)
		if bs/bw < aimRatio {
			failed = true
		}
	}
	if failed {
		return errors.New("an aim was missed")
	}
	return nil
}

// bridge is a running `tracebridge serve` with the stream on.
type bridge struct {
	cmd     *exec.Cmd
	addr    string // Kieker TCP
	metrics string
	url     string // the stream
	exited  chan struct{}
	stderr  *benchkit.Tail
}

func startBridge(ctx context.Context, bin, dir string) (*bridge, error) {
	return startBridgeWith(ctx, bin, dir, "")
}

// startBridgeWith starts a bridge whose stream section has extra keys
// (", policy: durable").
func startBridgeWith(ctx context.Context, bin, dir, streamExtra string) (*bridge, error) {
	return startBridgeOn(ctx, bin, dir, "kieker-tcp", streamExtra)
}

// startBridgeOn starts a bridge whose one receiver, named in, is of type
// receiver, on a free loopback port.
func startBridgeOn(ctx context.Context, bin, dir, receiver, streamExtra string) (*bridge, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`data_dir: %q
metrics: "127.0.0.1:0"
receivers: [{name: in, type: %s, listen: "127.0.0.1:0"}]
sinks: [{name: log, type: kieker-log, format: binary, path: %q}]
stream: {listen: "127.0.0.1:0"%s}
`, dir, receiver, filepath.Join(dir, "log"), streamExtra)
	path := filepath.Join(dir, "tracebridge.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	b := &bridge{exited: make(chan struct{}), stderr: benchkit.NewTail(64 << 10)}
	b.cmd = exec.CommandContext(ctx, bin, "serve", "-c", path)
	b.cmd.Stderr = b.stderr
	out, err := b.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := b.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { b.cmd.Wait(); close(b.exited) }()
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		l := sc.Text()
		switch {
		case strings.HasPrefix(l, "tracebridge: receiver in "):
			b.addr = l[strings.LastIndexByte(l, ' ')+1:]
		case strings.HasPrefix(l, "tracebridge: metrics on "):
			b.metrics = strings.TrimSuffix(strings.TrimPrefix(l, "tracebridge: metrics on http://"), "/metrics")
		case strings.HasPrefix(l, "tracebridge: sink stream "):
			f := strings.Fields(l)
			b.url = f[6]
		}
		if l == "tracebridge: ready" {
			go io.Copy(io.Discard, out)
			// Subscribers (in this process and its children) present
			// the credential of the bridge's NATS server.
			user, pass, err := stream.ReadCredentials(stream.CredentialsFile(dir))
			if err != nil {
				b.stop()
				return nil, err
			}
			b.url = strings.Replace(b.url, "://", "://"+url.UserPassword(user, pass).String()+"@", 1)
			return b, nil
		}
	}
	return nil, fmt.Errorf("tracebridge serve did not start: %s", b.stderr)
}

func (b *bridge) stop() error {
	b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.exited:
	case <-time.After(60 * time.Second):
		b.cmd.Process.Kill()
		return errors.New("tracebridge serve did not stop")
	}
	return nil
}

func (b *bridge) sinkRecords() (int64, error) {
	v, ok, err := benchkit.Metric(b.metrics, "tracebridge_sink_records_total", `sink="log"`)
	if err != nil || !ok {
		return 0, fmt.Errorf("metrics: %v %v", ok, err)
	}
	return int64(v), nil
}

// streamTaken returns the records the stream sink has consumed or the
// engine dropped for it (taken), and of those the dropped.
func (b *bridge) streamTaken() (taken, dropped int64, err error) {
	c, _, err := benchkit.Metric(b.metrics, "tracebridge_sink_records_total", `sink="stream"`)
	if err != nil {
		return 0, 0, err
	}
	d, _, err := benchkit.Metric(b.metrics, "tracebridge_sink_overflow_records_total", `sink="stream"`)
	if err != nil {
		return 0, 0, err
	}
	return int64(c + d), int64(d), nil
}

// encoder writes Before/After events of small traces in Kieker's
// single-socket format.
type encoder struct {
	enc          *kieker.Encoder
	before, aft  *record.Type
	b            record.Batch
	trace, order int64
}

func newEncoder() *encoder {
	cat := record.Builtin()
	return &encoder{enc: kieker.NewEncoder(kieker.EncoderOptions{Inline: true}),
		before: cat.Lookup(record.BeforeOperationEvent), aft: cat.Lookup(record.AfterOperationEvent)}
}

// append appends n events stamped ts: calls of depth one, 10 per trace.
func (e *encoder) append(dst []byte, n int, ts int64) []byte {
	for range n {
		e.b.Reset()
		t := e.before
		if e.order%2 == 1 {
			t = e.aft
		}
		r := e.b.Add(t, ts)
		r.Values[0] = record.IntValue(ts)
		r.Values[1] = record.IntValue(e.trace)
		r.Values[2] = record.IntValue(e.order)
		r.Values[3] = record.StringValue("public void org.example.shop.Cart.add(int)")
		r.Values[4] = record.StringValue("org.example.shop.Cart")
		dst, _ = e.enc.Append(dst, r)
		e.order++
		if e.order == 20 {
			e.trace, e.order = e.trace+1, 0
		}
	}
	return dst
}

// subscriber counts what it gets and, after start, the latencies.
type subscriber struct {
	s      *stream.Stream
	n      atomic.Int64
	missed atomic.Int64 // records it was told it missed (OnGap)
	mu     sync.Mutex
	lat    []time.Duration
	after  int64 // records stamped before this (unix ns) are warm-up
	done   chan error
}

func subscribe(ctx context.Context, url string, keep bool) (*subscriber, error) {
	s, err := stream.Open(url, stream.Options{})
	if err != nil {
		return nil, err
	}
	sub := &subscriber{s: s, done: make(chan error, 1), after: 1<<63 - 1}
	ready := make(chan struct{})
	var once sync.Once
	s.OnMetadata(func(*stream.Metadata) { once.Do(func() { close(ready) }) })
	s.OnGap(func(g stream.Gap) { sub.missed.Add(int64(g.Records)) })
	s.OnEvent("", func(e *stream.Event) {
		sub.n.Add(1)
		if !keep {
			return
		}
		ts := e.Values[0].Int()
		if ts >= atomic.LoadInt64(&sub.after) {
			d := time.Duration(time.Now().UnixNano() - ts)
			sub.mu.Lock()
			sub.lat = append(sub.lat, d)
			sub.mu.Unlock()
		}
	})
	go func() { sub.done <- s.Start(ctx) }()
	select {
	case <-ready:
	case err := <-sub.done:
		return nil, fmt.Errorf("subscriber: %v", err)
	case <-time.After(10 * time.Second):
		return nil, errors.New("subscriber: no metadata")
	}
	return sub, nil
}

type latencies struct {
	p50, p99, max time.Duration
	n             int
	sent          int64
	complete      bool
}

// latency runs the paced send with the subscribers.
func latency(ctx context.Context, o options, dir string) (latencies, error) {
	var res latencies
	b, err := startBridge(ctx, o.bin, dir)
	if err != nil {
		return res, err
	}
	defer b.stop()
	subs := make([]*subscriber, o.subs)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range subs {
		if subs[i], err = subscribe(sctx, b.url, true); err != nil {
			return res, err
		}
		defer subs[i].s.Close()
	}
	conn, err := net.Dial("tcp", b.addr)
	if err != nil {
		return res, err
	}
	defer conn.Close()
	enc := newEncoder()
	const tick = time.Millisecond
	perTick := max(1, o.rate/int(time.Second/tick))
	start := time.Now()
	warm := start.Add(o.warmup).UnixNano()
	for _, s := range subs {
		atomic.StoreInt64(&s.after, warm)
	}
	var buf []byte
	next := start
	for time.Since(start) < o.duration {
		// Pace by the clock: what is due is sent now, stamped now.
		due := int(time.Since(start)/tick) + 1
		n := due*perTick - int(res.sent)
		if n > 0 {
			buf = enc.append(buf[:0], n, time.Now().UnixNano())
			if _, err := conn.Write(buf); err != nil {
				return res, err
			}
			res.sent += int64(n)
		}
		next = next.Add(tick)
		time.Sleep(time.Until(next))
	}
	deadline := time.Now().Add(30 * time.Second)
	res.complete = true
	for _, s := range subs {
		for s.n.Load() < res.sent && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if s.n.Load() != res.sent {
			res.complete = false
			fmt.Printf("  a subscriber got %d of %d records\n", s.n.Load(), res.sent)
		}
	}
	var all []time.Duration
	for _, s := range subs {
		s.mu.Lock()
		all = append(all, s.lat...)
		s.mu.Unlock()
	}
	if len(all) == 0 {
		return res, errors.New("no latencies")
	}
	slices.Sort(all)
	res.n = len(all)
	res.p50, res.p99, res.max = all[len(all)/2], all[len(all)*99/100], all[len(all)-1]
	return res, nil
}

// throughput sends o.records as fast as it can to a fresh bridge with
// subs subscribers and returns the records a second the log sink took.
func throughput(ctx context.Context, o options, subs int, dir string) (float64, error) {
	b, err := startBridge(ctx, o.bin, dir)
	if err != nil {
		return 0, err
	}
	defer b.stop()
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var ss []*subscriber
	var child *exec.Cmd
	var childOut *benchkit.Tail
	if subs > 0 && !o.inProcess {
		// Subscribers on other machines, played by a child process at
		// the lowest priority: they read at their own pace from what the
		// bridge leaves of the two cores.
		self, err := os.Executable()
		if err != nil {
			return 0, err
		}
		childOut = benchkit.NewTail(16 << 10)
		child = exec.CommandContext(sctx, "nice", "-n", "19", self, "-subscriber", b.url, "-subs", fmt.Sprint(subs), "-records", fmt.Sprint(o.records))
		child.Stderr = childOut
		out, err := child.StdoutPipe()
		if err != nil {
			return 0, err
		}
		if err := child.Start(); err != nil {
			return 0, err
		}
		defer child.Process.Kill()
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil || strings.TrimSpace(line) != "subscribed" {
			return 0, fmt.Errorf("subscribers: %q %v: %s", line, err, childOut)
		}
		go func() {
			if rep, err := bufio.NewReader(out).ReadString('\n'); err == nil {
				fmt.Print("    " + rep)
			}
		}()
	}
	for range subs {
		if child != nil {
			break
		}
		s, err := subscribe(sctx, b.url, false)
		if err != nil {
			return 0, err
		}
		defer s.s.Close()
		ss = append(ss, s)
	}
	// One chunk of 65,536 events, sent again and again.
	enc := newEncoder()
	chunk := enc.append(nil, 1<<16, 1)
	bare := enc.append(nil, 1<<16, 1) // registry entries are in the first copy only
	conn, err := net.Dial("tcp", b.addr)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	sendErr := make(chan error, 1)
	go func() {
		w := bufio.NewWriterSize(conn, 1<<20)
		left := o.records
		first := true
		for left > 0 {
			c := bare
			if first {
				c, first = chunk, false
			}
			n := min(left, 1<<16)
			if _, err := w.Write(c); err != nil {
				sendErr <- err
				return
			}
			left -= n
		}
		sendErr <- errors.Join(w.Flush(), conn.Close())
	}()
	var took time.Duration
	for {
		n, err := b.sinkRecords()
		if err != nil {
			return 0, err
		}
		if n >= int64(o.records) {
			took = time.Since(start)
			break
		}
		select {
		case <-b.exited:
			return 0, fmt.Errorf("bridge exited: %s", b.stderr)
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(benchkit.PollStep(time.Since(start))):
		}
	}
	if err := <-sendErr; err != nil {
		return 0, err
	}
	// The subscribers get everything too (not timed: they read at their
	// own pace).
	if child != nil {
		done := make(chan error, 1)
		go func() { done <- child.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				fmt.Printf("  subscribers: %v: %s\n", err, childOut)
			}
		case <-time.After(120 * time.Second):
			fmt.Printf("  subscribers: not done after 120 s: %s\n", childOut)
		}
	}
	if len(ss) > 0 {
		fmt.Println("    " + waitSubscribers(ss, int64(o.records)))
	}
	return float64(o.records) / took.Seconds(), nil
}

// subscriberChild runs o.subs subscribers on url, says "subscribed" once
// they all are, and returns once each has o.records records (an error
// names the ones that did not within two minutes).
func subscriberChild(url string, o options) error {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var ss []*subscriber
	for range o.subs {
		s, err := subscribe(ctx, url, false)
		if err != nil {
			return err
		}
		defer s.s.Close()
		ss = append(ss, s)
	}
	fmt.Println("subscribed")
	fmt.Println(waitSubscribers(ss, int64(o.records)))
	return nil
}

// waitSubscribers waits until every subscriber has got or been told it
// missed want records (or none moves on for 10 s) and says how that went.
func waitSubscribers(ss []*subscriber, want int64) string {
	last, moved := int64(-1), time.Now()
	for {
		var sum int64
		done := true
		for _, s := range ss {
			got := s.n.Load() + s.missed.Load()
			sum += got
			done = done && got >= want
		}
		if done || time.Since(moved) > 10*time.Second {
			break
		}
		if sum != last {
			last, moved = sum, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	var got, missed, lost int64
	for _, s := range ss {
		n, m := s.n.Load(), s.missed.Load()
		got, missed = got+n, missed+m
		lost += max(0, want-n-m)
	}
	k := int64(len(ss))
	return fmt.Sprintf("each subscriber got %.1f%% of the records and was told of %.1f%% it missed (the stream sink was behind during the burst); unaccounted: %d",
		100*float64(got)/float64(want*k), 100*float64(missed)/float64(want*k), lost)
}

// extra makes keys a continuation of the stream section's flow mapping.
func extra(keys string) string {
	if keys == "" {
		return ""
	}
	return ", " + keys
}
