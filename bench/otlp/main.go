// Otlp is tracebridge's OTLP ingest benchmark: how many OpenTelemetry
// spans `tracebridge serve` takes in per CPU-second of its own, against
// the OpenTelemetry Collector under the same load in the same run. It is
// run by hand (go run ./bench/otlp), never by CI; README.md explains the
// numbers.
//
// It builds tracebridge and the Collector (core v0.165.0: OTLP receiver →
// nop exporter, from the module proxy), starts both — tracebridge with an
// otlp-grpc and an otlp-http receiver and a binary kieker-log sink — and
// drives each with the same pre-encoded ExportTraceServiceRequests over
// gRPC and over HTTP/protobuf from K concurrent clients. A phase ends
// when every span has been answered and, for tracebridge, consumed by the
// log sink; the server's CPU (utime+stime from /proc/PID/stat) over the
// phase gives spans per CPU-second.
//
// Concurrency: one goroutine per client; everything else on the main
// goroutine. The servers are child processes.
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
)

// aimRatio is what tracebridge should reach: spans per CPU-second at
// least twice the Collector's.
const aimRatio = 2.0

const mib = 1 << 20

type options struct {
	spans      int64
	perRequest int
	clients    int
	runs       int
	distinct   int
	bin        string
	otelcol    string
	keep       bool
	protocols  []string
	// sinks: the sinks of tracebridge serve (log, store or both); base:
	// a second tracebridge binary measured beside it (tb-base), the
	// before of a before/after comparison in one run.
	sinks []string
	base  string
}

func main() {
	if code, ok := benchkit.Child(roleEnv, "nop", "sink-less bridge", nopBridge); ok {
		os.Exit(code)
	}
	os.Exit(benchkit.Main(os.Args[1:], parseFlags, run))
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := benchkit.NewFlags("otlp", "usage: go run ./bench/otlp [-spans N] [-per-request S] [-clients K] [-runs R] [-protocols grpc,http] [-bin PATH] [-otelcol PATH] [-keep]", stderr)
	var o options
	var protocols string
	fs.Int64Var(&o.spans, "spans", 1_000_000, "spans per measured phase (one server, one protocol)")
	fs.IntVar(&o.perRequest, "per-request", 256, "spans per export request")
	fs.IntVar(&o.clients, "clients", 4, "concurrent clients (connections)")
	fs.IntVar(&o.runs, "runs", 3, "measured phases per server and protocol (the median counts)")
	fs.IntVar(&o.distinct, "distinct", 64, "distinct pre-encoded requests, sent round robin")
	fs.StringVar(&o.bin, "bin", "", "tracebridge binary (default: go build ./cmd/tracebridge into a temporary directory)")
	fs.StringVar(&o.otelcol, "otelcol", "", "Collector binary built before (default: build it from the module proxy, 1–3 minutes)")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (binaries, configurations, the Kieker log)")
	fs.StringVar(&protocols, "protocols", "grpc,http", "protocols to measure: grpc, http")
	var sinks string
	fs.StringVar(&sinks, "sinks", "log", "sinks of tracebridge serve: log (binary Kieker log), store (the trace store), or log,store")
	fs.StringVar(&o.base, "base", "", "a second tracebridge binary measured beside the first as tb-base (same sinks), e.g. the main branch's")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.spans < 1 || o.perRequest < 1 || o.perRequest > 100_000 || o.clients < 1 || o.clients > 256 || o.runs < 1 || o.distinct < 1 {
		fs.Bad("want -spans ≥ 1, -per-request 1–100000, -clients 1–256, -runs ≥ 1, -distinct ≥ 1")
	}
	o.protocols = fs.List("protocols", protocols, func(p string) string {
		if p != "grpc" && p != "http" {
			return fmt.Sprintf("-protocols: unknown %q", p)
		}
		return ""
	})
	o.sinks = fs.List("sinks", sinks, func(s string) string {
		if s != "log" && s != "store" {
			return fmt.Sprintf("-sinks: unknown %q", s)
		}
		return ""
	})
	if err := fs.Err(); err != nil {
		return nil, err
	}
	return &o, nil
}

// target is one server under load.
type target struct {
	name           string // in the table
	srv            *server
	grpc, http     string // receiver addresses
	metrics        string // host:port of its metrics endpoint
	taken          func() (int64, error)
	sent           int64 // spans answered so far, warm-up included
	samples        map[string][]sample
	retries        map[string]int64
	peakRSS, final int64
}

// sample is one measured phase.
type sample struct {
	spans int64
	cpu   time.Duration
	wall  time.Duration
}

func (s sample) perCPU() float64 { return float64(s.spans) / s.cpu.Seconds() }

func run(ctx context.Context, o *options, stdout, stderr io.Writer) int {
	logf := benchkit.Logf(stderr, "otlp")
	tmp, done, err := benchkit.WorkDir("tracebridge-otlp-bench-", o.keep, logf)
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer done()
	if err := measure(ctx, o, tmp, stdout, logf); err != nil {
		logf("%v", err)
		return 1
	}
	return 0
}

func measure(ctx context.Context, o *options, tmp string, stdout io.Writer, logf func(string, ...any)) error {
	bin, err := benchkit.Tracebridge(ctx, o.bin, tmp, logf)
	if err != nil {
		return err
	}
	col := o.otelcol
	if col == "" {
		logf("building the OpenTelemetry Collector %s (otlp receiver, nop exporter) from the module proxy", collectorVersion)
		if col, err = buildCollector(ctx, tmp); err != nil {
			return err
		}
	}
	logf("encoding %d requests of %d spans", o.distinct, o.perRequest)
	reqs := requests(o.distinct, o.perRequest, 1)
	var reqBytes int
	for _, r := range reqs {
		reqBytes += len(r.body)
	}

	tb, err := startBridge(ctx, "tracebridge", bin, tmp, o.sinks)
	if err != nil {
		return err
	}
	defer tb.srv.stop()
	targets := []*target{tb}
	if o.base != "" {
		base, err := startBridge(ctx, "tb-base", o.base, tmp, o.sinks)
		if err != nil {
			return err
		}
		defer base.srv.stop()
		targets = append(targets, base)
	}
	nop, err := startNop(ctx)
	if err != nil {
		return err
	}
	defer nop.srv.stop()
	oc, err := startCollector(ctx, col, tmp)
	if err != nil {
		return err
	}
	defer oc.srv.stop()
	targets = append(targets, nop, oc)

	// Warm-up: every server and protocol, unmeasured.
	warm := max(o.spans/10, int64(o.perRequest))
	for _, t := range targets {
		for _, p := range o.protocols {
			if _, err := phase(ctx, o, t, p, reqs, warm); err != nil {
				return fmt.Errorf("%s %s warm-up: %w", t.name, p, err)
			}
		}
	}
	for run := range o.runs {
		for _, p := range o.protocols {
			// Each run starts with another server.
			order := append(slices.Clone(targets[run%len(targets):]), targets[:run%len(targets)]...)
			for _, t := range order {
				s, err := phase(ctx, o, t, p, reqs, o.spans)
				if err != nil {
					return fmt.Errorf("%s %s: %w", t.name, p, err)
				}
				t.samples[p] = append(t.samples[p], s)
				logf("run %d %-4s %-11s %d spans, %.2f CPU-s, %.0f spans/CPU-s, %.2f s", run+1, p, t.name, s.spans, s.cpu.Seconds(), s.perCPU(), s.wall.Seconds())
			}
		}
	}
	for _, t := range targets {
		if _, t.peakRSS, err = benchkit.Memory(t.srv.pid()); err != nil {
			return err
		}
		if t.final, err = t.taken(); err != nil {
			return err
		}
		if t.final != t.sent {
			return fmt.Errorf("%s took %d spans, %d were answered", t.name, t.final, t.sent)
		}
		if err := t.srv.stop(); err != nil {
			return fmt.Errorf("%s: %v: %s", t.name, err, t.srv.stderr)
		}
	}

	fmt.Fprintf(stdout, "OTLP ingest: spans per server CPU-second, tracebridge serve vs the OpenTelemetry Collector %s\n", collectorVersion)
	fmt.Fprintf(stdout, "%d spans per phase, %d runs (median), %d clients, %d spans per request (%d distinct requests, %.0f bytes per span)\n",
		o.spans, o.runs, o.clients, o.perRequest, o.distinct, float64(reqBytes)/float64(o.distinct*o.perRequest))
	fmt.Fprintf(stdout, "bench %s, tracebridge %s, GOMAXPROCS %d, %d CPUs, %s/%s\n\n",
		runtime.Version(), benchkit.GoVersion(bin), runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	w := benchkit.Table(stdout)
	fmt.Fprintln(w, "protocol\tserver\tspans/CPU-s\tCPU-s per phase\tspans/s (wall)\tretries\t")
	ok := true
	for _, p := range o.protocols {
		med := make([]sample, len(targets))
		for i, t := range targets {
			med[i] = median(t.samples[p])
			fmt.Fprintf(w, "%s\t%s\t%.0f\t%.2f\t%.0f\t%d\t\n", p, t.name, med[i].perCPU(), med[i].cpu.Seconds(),
				float64(med[i].spans)/med[i].wall.Seconds(), t.retries[p])
		}
		base := med[len(med)-1].perCPU() // the Collector's
		for i, t := range targets[:len(targets)-1] {
			ratio := med[i].perCPU() / base
			fmt.Fprintf(w, "%s\t%s ÷ otelcol\t%.2f×\t\t\t\t\n", p, t.name, ratio)
			if t == tb {
				ok = ok && ratio >= aimRatio
			}
		}
	}
	w.Flush()
	fmt.Fprintf(stdout, "\npeak RSS:")
	for _, t := range targets {
		fmt.Fprintf(stdout, " %s %.0f MiB", t.name, float64(t.peakRSS)/mib)
	}
	fmt.Fprintln(stdout)
	verdict := "met"
	if !ok {
		verdict = "NOT met"
	}
	fmt.Fprintf(stdout, "aim (tracebridge serve with its Kieker log ≥ %.0f× the Collector's spans per CPU-second): %s\n", aimRatio, verdict)
	return nil
}

func median(s []sample) sample {
	s = slices.Clone(s)
	slices.SortFunc(s, func(a, b sample) int { return cmp.Compare(a.perCPU(), b.perCPU()) })
	return s[len(s)/2]
}

// phase sends spans to t over protocol p and measures t's CPU until it
// has taken them all.
func phase(ctx context.Context, o *options, t *target, p string, reqs []request, spans int64) (sample, error) {
	addr := t.grpc
	if p == "http" {
		addr = t.http
	}
	senders := make([]sender, o.clients)
	var hs *httpSender
	for i := range senders {
		if p == "grpc" {
			g, err := newGRPCSender(addr)
			if err != nil {
				return sample{}, err
			}
			senders[i] = g
			continue
		}
		if hs == nil {
			hs = newHTTPSender(addr, o.clients)
		}
		senders[i] = hs
	}
	defer func() {
		for _, s := range senders {
			s.close()
		}
	}()
	cpu0, err := benchkit.CPU(t.srv.pid())
	if err != nil {
		return sample{}, err
	}
	start := time.Now()
	d, err := drive(ctx, senders, reqs, spans)
	if err != nil {
		return sample{}, err
	}
	t.sent += d.spans
	if err := settle(ctx, t, start); err != nil {
		return sample{}, err
	}
	wall := time.Since(start)
	cpu1, err := benchkit.CPU(t.srv.pid())
	if err != nil {
		return sample{}, err
	}
	t.retries[p] += d.retries
	return sample{spans: d.spans, cpu: cpu1 - cpu0, wall: wall}, nil
}

// settle waits until t has taken every span answered so far.
func settle(ctx context.Context, t *target, start time.Time) error {
	last, lastChange := int64(-1), time.Now()
	for {
		n, err := t.taken()
		if err != nil {
			return err
		}
		if n >= t.sent {
			return nil
		}
		if n != last {
			last, lastChange = n, time.Now()
		} else if time.Since(lastChange) > 30*time.Second {
			return fmt.Errorf("stuck at %d of %d spans", n, t.sent)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.srv.exited:
			return fmt.Errorf("exited (%v): %s", t.srv.waitErr, t.srv.stderr)
		case <-time.After(benchkit.PollStep(time.Since(start))):
		}
	}
}

// startBridge starts tracebridge serve (as name) with both OTLP receivers
// and the sinks named: a binary Kieker log ("log"), the trace store
// ("store").
func startBridge(ctx context.Context, name, bin, tmp string, sinks []string) (*target, error) {
	dir := filepath.Join(tmp, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf(`data_dir: %q
metrics: "127.0.0.1:0"
receivers:
  - name: grpc
    type: otlp-grpc
    listen: "127.0.0.1:0"
    max_message_size: 16777216
  - name: http
    type: otlp-http
    listen: "127.0.0.1:0"
sinks:
`, dir)
	for _, s := range sinks {
		switch s {
		case "log":
			cfg += fmt.Sprintf("  - name: log\n    type: kieker-log\n    format: binary\n    path: %q\n", filepath.Join(dir, "log"))
		case "store":
			cfg += fmt.Sprintf("  - name: store\n    type: store\n    path: %q\n", filepath.Join(dir, "store"))
		}
	}
	path := filepath.Join(dir, "tracebridge.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	srv, err := startServer(ctx, name, bin, "serve", "-c", path)
	if err != nil {
		return nil, err
	}
	t := &target{name: name, srv: srv, samples: map[string][]sample{}, retries: map[string]int64{}}
	timeout := time.After(30 * time.Second)
	for ready := false; !ready; {
		select {
		case l := <-srv.lines:
			l, _ = strings.CutPrefix(l, "tracebridge: ")
			if rest, ok := strings.CutPrefix(l, "receiver grpc (otlp-grpc) listening on "); ok {
				t.grpc, _, _ = strings.Cut(rest, " ")
			}
			if rest, ok := strings.CutPrefix(l, "receiver http (otlp-http) listening on "); ok {
				t.http, _, _ = strings.Cut(rest, " ")
			}
			if rest, ok := strings.CutPrefix(l, "metrics on http://"); ok {
				t.metrics = strings.TrimSuffix(rest, "/metrics")
			}
			ready = l == "ready"
		case <-srv.exited:
			return nil, fmt.Errorf("tracebridge serve exited at start (%v): %s", srv.waitErr, srv.stderr)
		case <-timeout:
			srv.stop()
			return nil, fmt.Errorf("tracebridge serve not ready within 30s: %s", srv.stderr)
		}
	}
	if t.grpc == "" || t.http == "" || t.metrics == "" {
		srv.stop()
		return nil, errors.New("tracebridge serve did not print its receivers' and metrics' addresses (are the OTLP receivers in serve.DefaultFactories?)")
	}
	// Taken: written to the log as OperationExecutionRecords, which
	// happens once a trace is assembled (its window after its last span),
	// so a phase counts the assembly and the log's CPU too.
	t.taken = func() (int64, error) {
		n := int64(-1)
		for _, s := range sinks { // the slowest sink counts
			v, _, err := benchkit.Metric(t.metrics, "tracebridge_sink_trace_spans_total", `sink="`+s+`"`)
			if err != nil {
				return 0, err
			}
			if n < 0 || int64(v) < n {
				n = int64(v)
			}
		}
		return n, nil
	}
	return t, nil
}

// startCollector starts the Collector on free ports.
func startCollector(ctx context.Context, bin, tmp string) (*target, error) {
	var addrs [3]string
	for i := range addrs {
		a, err := freeAddr()
		if err != nil {
			return nil, err
		}
		addrs[i] = a
	}
	host, port, _ := strings.Cut(addrs[2], ":")
	path := filepath.Join(tmp, "otelcol.yaml")
	if err := os.WriteFile(path, []byte(collectorConfig(addrs[0], addrs[1], host, port)), 0o600); err != nil {
		return nil, err
	}
	srv, err := startServer(ctx, "otelcol", bin, "--config", path)
	if err != nil {
		return nil, err
	}
	if err := waitListening(srv, 30*time.Second, addrs[:]...); err != nil {
		srv.stop()
		return nil, err
	}
	t := &target{name: "otelcol", srv: srv, grpc: addrs[0], http: addrs[1], metrics: addrs[2],
		samples: map[string][]sample{}, retries: map[string]int64{}}
	t.taken = func() (int64, error) {
		var sum int64
		for _, tr := range []string{`transport="grpc"`, `transport="http"`} {
			v, _, err := benchkit.Metric(t.metrics, "otelcol_receiver_accepted_spans", tr)
			if err != nil {
				return 0, err
			}
			sum += int64(v)
		}
		return sum, nil
	}
	return t, nil
}
