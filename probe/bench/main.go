// Bench is the overhead benchmark of the Go probe, in the manner of
// MooBench: a method recursing to depth D (10) is called N times (a) without
// instrumentation, (b) with probes compiled in but switched off, and (c)
// with probes sending to a running tracebridge, which this program builds
// and starts. It prints the median ns per call and per instrumented
// invocation of each, and the overhead against (a). It is run by hand
// (see probe/README.md), never by CI:
//
//	go run ./probe/bench -calls 50000 -runs 7
//
// Concurrency: the measured loops run on the main goroutine, locked to its
// thread so that its CPU time can be read; the probe's writer goroutine
// and the bridge process run beside it.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/probe"
)

type options struct {
	calls, depth, runs int
	bin                string
}

// scenario is one way of calling the method.
type scenario struct {
	name string
	// run warms up, then makes o.calls calls inside timed, and returns
	// what the probe did in that loop.
	run func(o options, timed func(loop func())) (probe.Stats, error)
	// measured runs, ns per call: wall clock, CPU time of the calling
	// thread, CPU time of the process
	wall, cpu, proc []float64
	sent            uint64
	dropped         uint64
}

func main() {
	var o options
	flag.IntVar(&o.calls, "calls", 50000, "calls of the monitored method per run")
	flag.IntVar(&o.depth, "depth", 10, "recursion depth of one call")
	flag.IntVar(&o.runs, "runs", 7, "runs of each scenario (medians are reported)")
	flag.StringVar(&o.bin, "bin", "", "tracebridge binary (default: go build ./cmd/tracebridge)")
	flag.Parse()
	if o.calls < 1 || o.depth < 1 || o.runs < 1 {
		fmt.Fprintln(os.Stderr, "bench: -calls, -depth and -runs must be at least 1")
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	runtime.LockOSThread()
	dir, err := os.MkdirTemp("", "probe-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	if o.bin == "" {
		if o.bin, err = benchkit.Build(ctx, dir); err != nil {
			return err
		}
	}
	br, err := benchkit.Start(ctx, o.bin, dir, receiver)
	if err != nil {
		return err
	}
	defer br.Kill()

	warm := max(o.calls/10, 1)
	var delivered uint64 // records the writers sent to the bridge, all runs
	viaBridge := func(buffer int) func(options, func(func())) (probe.Stats, error) {
		return func(o options, timed func(func())) (probe.Stats, error) {
			// A long CloseTimeout: Close must deliver what the bridge has
			// not read yet, however long that takes on a busy machine.
			w, err := probe.NewWriter(probe.Config{Addr: br.Addr, BufferEvents: buffer, CloseTimeout: time.Minute})
			if err != nil {
				return probe.Stats{}, err
			}
			callMonitored(w, warm, o.depth) // warms up and connects
			if err := w.Flush(context.Background()); err != nil {
				w.Close()
				return probe.Stats{}, err
			}
			before := w.Stats()
			timed(func() { callMonitored(w, o.calls, o.depth) })
			w.Close() // sends the rest, not timed
			after := w.Stats()
			delivered += after.Sent
			return probe.Stats{Sent: after.Sent - before.Sent, Dropped: after.Dropped - before.Dropped}, nil
		}
	}
	big := min(probe.MaxBufferEvents, pow2(o.calls*(2*o.depth+1)))
	scenarios := []*scenario{
		{name: "(a) no instrumentation", run: func(o options, timed func(func())) (probe.Stats, error) {
			callPlain(warm, o.depth)
			timed(func() { callPlain(o.calls, o.depth) })
			return probe.Stats{}, nil
		}},
		{name: "(b) probes compiled in, switched off", run: func(o options, timed func(func())) (probe.Stats, error) {
			w, err := probe.NewWriter(probe.Config{Addr: br.Addr})
			if err != nil {
				return probe.Stats{}, err
			}
			defer w.Close()
			probe.Enable(false)
			defer probe.Enable(true)
			callMonitored(w, warm, o.depth)
			timed(func() { callMonitored(w, o.calls, o.depth) })
			return probe.Stats{}, nil
		}},
		{name: fmt.Sprintf("(c) probes -> bridge, buffer %d records", big), run: viaBridge(big)},
		{name: fmt.Sprintf("(c') probes -> bridge, default buffer %d", probe.DefaultBufferEvents), run: viaBridge(0)},
		{name: "(d) probes on, no bridge (all dropped)", run: func(o options, timed func(func())) (probe.Stats, error) {
			w, err := probe.NewWriter(probe.Config{Addr: unusedAddr(), CloseTimeout: 100 * time.Millisecond})
			if err != nil {
				return probe.Stats{}, err
			}
			callMonitored(w, warm, o.depth)
			before := w.Stats()
			timed(func() { callMonitored(w, o.calls, o.depth) })
			w.Close()
			after := w.Stats()
			return probe.Stats{Sent: after.Sent - before.Sent, Dropped: after.Dropped - before.Dropped}, nil
		}},
	}

	fmt.Printf("probe overhead benchmark: %d calls of depth %d per run, %d runs, medians; %s, GOMAXPROCS %d, %d CPUs\n",
		o.calls, o.depth, o.runs, runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU())
	for range o.runs {
		for _, s := range scenarios { // interleaved, so that load on the machine hits all alike
			var wall, cpu, proc float64
			timed := func(loop func()) {
				runtime.GC()
				p0, c0, t0 := processCPU(), threadCPU(), time.Now()
				loop()
				wall = float64(time.Since(t0).Nanoseconds()) / float64(o.calls)
				cpu = float64(threadCPU()-c0) / float64(o.calls)
				proc = float64(processCPU()-p0) / float64(o.calls)
			}
			st, err := s.run(o, timed)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			s.wall = append(s.wall, wall)
			s.cpu = append(s.cpu, cpu)
			s.proc = append(s.proc, proc)
			s.sent += st.Sent
			s.dropped += st.Dropped
		}
	}
	got, err := waitReceived(br, int64(delivered))
	if err != nil {
		return err
	}
	if _, err := br.Stop(); err != nil {
		return err
	}
	report(o, scenarios, clockCost())
	fmt.Printf("bridge: decoded %d records; the writers reported %d sent (checksum of the calls %d)\n", got, delivered, sink)
	if uint64(got) != delivered {
		return fmt.Errorf("the bridge decoded %d records, %d were sent", got, delivered)
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// clockCost measures one time.Since, the clock read behind every event.
func clockCost() float64 {
	start := time.Now()
	const n = 1 << 20
	var sink time.Duration
	t0 := threadCPU()
	for range n {
		sink += time.Since(start)
	}
	if sink < 0 {
		fmt.Println()
	}
	return float64(threadCPU()-t0) / n
}

// unusedAddr returns a loopback address nobody listens on.
func unusedAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "127.0.0.1:9"
	}
	defer ln.Close()
	return ln.Addr().String()
}

func pow2(n int) int {
	p := 1
	for p < n {
		p *= 2
	}
	return p
}

// report prints, per scenario, the medians per call and per invocation
// (a call is depth invocations) and the overhead per invocation against
// (a): by the wall clock, by the CPU time of the calling thread (what the
// probes cost the instrumented code, unaffected by other load on the
// machine), and by the CPU time of the whole process (the probes plus the
// writer goroutine that encodes and sends).
func report(o options, scenarios []*scenario, clock float64) {
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\twall ns/call\twall ns/inv\twall overhead/inv\tthread CPU ns/inv\tthread CPU overhead/inv\tprocess CPU overhead/inv\trecords sent\trecords dropped\t")
	base := scenarios[0]
	bw, bc, bp := median(base.wall), median(base.cpu), median(base.proc)
	d := float64(o.depth)
	for _, s := range scenarios {
		w, c, p := median(s.wall), median(s.cpu), median(s.proc)
		fmt.Fprintf(tw, "%s\t%.1f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%d\t%d\t\n", s.name, w, w/d, (w-bw)/d, c/d, (c-bc)/d, (p-bp)/d, s.sent, s.dropped)
	}
	tw.Flush()
	fmt.Printf("probe clock: %s; one time.Since for comparison: %.1f ns (two clock reads per instrumented invocation)\n", probe.Clock(), clock)
}
