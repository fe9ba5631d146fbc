// Otlp is tracebridge's OTLP ingest benchmark: how many OpenTelemetry
// spans `tracebridge serve` takes in per CPU-second of its own, against
// the OpenTelemetry Collector and Jaeger v2 under the same load in the
// same run. It is run by hand (go run ./bench/otlp), never by CI;
// README.md explains the numbers.
//
// It builds tracebridge, the Collector (core v0.165.0: OTLP receiver,
// batch processor, nop exporter) and Jaeger v2.13 (its cmd/jaeger) from
// the module proxy, keeping the last two in a cache directory, and starts
// each server once for the whole run: tracebridge with its trace store
// (tb-store), with both as the embedded default (tb-default), with a
// binary Kieker log (tb-log), tracebridge's receivers and engine with a
// sink that takes assembled traces and drops them (tb-assemble) and with
// a counting sink (tb-no-sink), the Collector otlp → nop
// and otlp → batch → nop, Jaeger with its in-memory and its Badger
// storage. It drives each with the same pre-encoded
// ExportTraceServiceRequests over gRPC and over HTTP/protobuf from K
// concurrent clients. A phase ends when every span has been answered and
// taken by the server (stored, written or counted, as each server says in
// its metrics); the server's CPU (utime+stime from /proc/PID/stat) over
// the phase gives spans per CPU-second.
//
// Concurrency: one goroutine per client, and one fetching a CPU profile
// during a profiled phase; everything else on the main goroutine. The
// servers are child processes.
package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
)

// aimRatio is where issue 25 aims: tracebridge with its store at twice
// the Collector's (otlp → nop) spans per CPU-second; at least 1× is what
// it must deliver.
const aimRatio = 2.0

const mib = 1 << 20

// The servers, in the table's order, and what -servers accepts.
var serverNames = []string{"tb-store", "tb-default", "tb-log", "tb-assemble", "tb-no-sink", "otelcol", "otelcol-batch", "jaeger-mem", "jaeger-badger"}

// baseline is the server every other one is compared with.
const baseline = "otelcol"

type options struct {
	spans      int64
	perRequest int
	clients    int
	runs       int
	distinct   int
	bin        string
	otelcol    string
	jaeger     string
	cache      string
	profile    string
	keep       bool
	protocols  []string
	servers    []string
	// base: a second tracebridge binary measured beside tb-store, with
	// the store too (tb-base), and beside tb-default with the default's
	// sinks (tb-default-base): the before of a before/after comparison
	// in one run.
	base string
	// baseWorkers ≥ 0 gives tb-base `traces: {workers: N}` (and, without
	// -base, tracebridge's own binary): one worker against tb-store's
	// default (one per core) in one run.
	baseWorkers int
}

func main() {
	if code, ok := benchkit.Child(roleEnv, "nop", "sink-less bridge", func() error { return nopBridge("nop") }); ok {
		os.Exit(code)
	}
	if code, ok := benchkit.Child(roleEnv, "assemble", "assembling bridge", func() error { return nopBridge("assemble") }); ok {
		os.Exit(code)
	}
	os.Exit(benchkit.Main(os.Args[1:], parseFlags, run))
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := benchkit.NewFlags("otlp", "usage: go run ./bench/otlp [-spans N] [-per-request S] [-clients K] [-runs R] [-protocols grpc,http] [-servers LIST] [-bin PATH] [-otelcol PATH] [-jaeger PATH] [-cache DIR] [-profile DIR] [-keep]", stderr)
	var o options
	var protocols, servers string
	cache := ""
	if d, err := os.UserCacheDir(); err == nil {
		cache = filepath.Join(d, "tracebridge-bench-otlp")
	}
	fs.Int64Var(&o.spans, "spans", 1_000_000, "spans per measured phase (one server, one protocol)")
	fs.IntVar(&o.perRequest, "per-request", 256, "spans per export request")
	fs.IntVar(&o.clients, "clients", 4, "concurrent clients (connections)")
	fs.IntVar(&o.runs, "runs", 3, "measured phases per server and protocol (the median counts)")
	fs.IntVar(&o.distinct, "distinct", 64, "distinct pre-encoded requests, sent round robin")
	fs.StringVar(&o.bin, "bin", "", "tracebridge binary (default: go build ./cmd/tracebridge into a temporary directory)")
	fs.StringVar(&o.otelcol, "otelcol", "", "Collector binary built before (default: the one in -cache, built from the module proxy when missing)")
	fs.StringVar(&o.jaeger, "jaeger", "", "Jaeger v2 binary built before (default: the one in -cache, built from the module proxy when missing)")
	fs.StringVar(&o.cache, "cache", cache, "directory keeping the Collector and Jaeger binaries across runs (\"\": build them into the temporary directory)")
	fs.StringVar(&o.profile, "profile", "", "after the measured rounds, one more phase per tracebridge server and protocol with a CPU and an allocation profile of it, written to DIR")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory (binaries, configurations, the data directories)")
	fs.StringVar(&protocols, "protocols", "grpc,http", "protocols to measure: grpc, http")
	fs.StringVar(&servers, "servers", strings.Join(serverNames, ","), "servers to measure: "+strings.Join(serverNames, ", "))
	fs.StringVar(&o.base, "base", "", "a second tracebridge binary measured beside tb-store as tb-base (with the store) and beside tb-default as tb-default-base (store and Kieker log), e.g. the main branch's")
	fs.IntVar(&o.baseWorkers, "base-workers", -1, "N ≥ 0: tb-base assembles with traces: {workers: N} (the -bin binary unless -base names another)")
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
	o.servers = fs.List("servers", servers, func(s string) string {
		if !slices.Contains(serverNames, s) {
			return fmt.Sprintf("-servers: unknown %q (known: %s)", s, strings.Join(serverNames, ", "))
		}
		return ""
	})
	if err := fs.Err(); err != nil {
		return nil, err
	}
	// The table's order, whatever the flag's.
	o.servers = slices.DeleteFunc(slices.Clone(serverNames), func(s string) bool { return !slices.Contains(o.servers, s) })
	return &o, nil
}

// target is one server under load.
type target struct {
	name           string // in the table
	srv            *server
	grpc, http     string // receiver addresses
	metrics        string // host:port of its metrics endpoint
	pprof          string // host:port of its /debug/pprof/ ("" if none)
	data           string // its data directory ("" if it keeps nothing on disk)
	taken          func() (int64, error)
	sent           int64 // spans answered so far, warm-up included
	samples        map[string][]sample
	retries        map[string]int64
	peakRSS, final int64
	diskLive       int64 // bytes in data after the last phase, running
	diskClosed     int64 // bytes in data after a clean stop
	// runCPU: the process's CPU from its start to its exit (Wait's
	// rusage): every phase, and what a server does after a phase is
	// counted (tracebridge builds a cut head's block in the background,
	// partly after the phase that filled it; its clean stop cuts the
	// last heads).
	runCPU time.Duration
}

func newTarget(name string, srv *server) *target {
	return &target{name: name, srv: srv, samples: map[string][]sample{}, retries: map[string]int64{}}
}

// sample is one measured phase.
type sample struct {
	spans   int64
	cpu     time.Duration
	wall    time.Duration
	retries int64
}

func (s sample) perCPU() float64 { return float64(s.spans) / s.cpu.Seconds() }

// runPerCPU is the spans taken per CPU-second of the whole run.
func (t *target) runPerCPU() float64 { return float64(t.final) / t.runCPU.Seconds() }

// runRatio is t's whole-run figure ÷ base's (false: no base, or a CPU
// not read).
func (t *target) runRatio(base *target) (float64, bool) {
	if base == nil || base.runCPU <= 0 || t.runCPU <= 0 {
		return 0, false
	}
	return t.runPerCPU() / base.runPerCPU(), true
}

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

func (o *options) wants(prefix string) bool {
	return slices.ContainsFunc(o.servers, func(s string) bool { return strings.HasPrefix(s, prefix) })
}

// start starts the servers o names; on an error it stops those started.
func start(ctx context.Context, o *options, tmp string, logf func(string, ...any)) ([]*target, error) {
	var bin, col, jaeger string
	var err error
	if o.wants("tb-store") || o.wants("tb-default") || o.wants("tb-log") {
		if bin, err = benchkit.Tracebridge(ctx, o.bin, tmp, logf); err != nil {
			return nil, err
		}
	}
	if o.wants("otelcol") {
		what := "the OpenTelemetry Collector " + collectorVersion + " (otlp receiver, batch processor, nop exporter)"
		if col, err = buildOnce(ctx, o.otelcol, o.cache, tmp, collectorBinary, what, buildCollector, logf); err != nil {
			return nil, err
		}
	}
	if o.wants("jaeger") {
		what := "Jaeger " + jaegerRelease + " (" + jaegerModule + " " + jaegerVersion + ", cmd/jaeger)"
		if jaeger, err = buildOnce(ctx, o.jaeger, o.cache, tmp, jaegerBinary, what, buildJaeger, logf); err != nil {
			return nil, err
		}
	}
	var targets []*target
	for _, name := range o.servers {
		var pprof string
		if o.profile != "" && strings.HasPrefix(name, "tb-") {
			if pprof, err = freeAddr(); err != nil {
				break
			}
		}
		var t *target
		switch name {
		case "tb-store":
			t, err = startBridge(ctx, name, bin, tmp, "store", pprof, -1)
			if base := o.base; err == nil && (base != "" || o.baseWorkers >= 0) {
				if base == "" {
					base = bin
				}
				var b *target
				if b, err = startBridge(ctx, "tb-base", base, tmp, "store", "", o.baseWorkers); err == nil {
					logf("tb-base started (pid %d)", b.srv.pid())
					targets = append(targets, b)
				} else {
					t.srv.stop()
				}
			}
		case "tb-default":
			t, err = startBridge(ctx, name, bin, tmp, "default", pprof, -1)
			if err == nil && o.base != "" {
				var b *target
				if b, err = startBridge(ctx, "tb-default-base", o.base, tmp, "default", "", o.baseWorkers); err == nil {
					logf("tb-default-base started (pid %d)", b.srv.pid())
					targets = append(targets, b)
				} else {
					t.srv.stop()
				}
			}
		case "tb-log":
			t, err = startBridge(ctx, name, bin, tmp, "log", pprof, -1)
		case "tb-no-sink":
			t, err = startNop(ctx, name, "nop", pprof)
		case "tb-assemble":
			t, err = startNop(ctx, name, "assemble", pprof)
		case "otelcol":
			t, err = startCollector(ctx, name, col, tmp, false)
		case "otelcol-batch":
			t, err = startCollector(ctx, name, col, tmp, true)
		case "jaeger-mem":
			t, err = startJaeger(ctx, name, jaeger, tmp, false)
		case "jaeger-badger":
			t, err = startJaeger(ctx, name, jaeger, tmp, true)
		}
		if err != nil {
			break
		}
		logf("%s started (pid %d)", name, t.srv.pid())
		targets = append(targets, t)
	}
	if err != nil {
		for _, t := range targets {
			t.srv.stop()
		}
		return nil, err
	}
	return targets, nil
}

func measure(ctx context.Context, o *options, tmp string, stdout io.Writer, logf func(string, ...any)) error {
	load0 := loadAverage()
	if o.profile != "" {
		if err := os.MkdirAll(o.profile, 0o755); err != nil {
			return err
		}
	}
	targets, err := start(ctx, o, tmp, logf)
	if err != nil {
		return err
	}
	defer func() {
		for _, t := range targets {
			t.srv.stop()
		}
	}()
	logf("encoding %d requests of %d spans", o.distinct, o.perRequest)
	reqs := requests(o.distinct, o.perRequest, 1)
	var reqBytes int
	for _, r := range reqs {
		reqBytes += len(r.body)
	}

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
				t.retries[p] += s.retries
				logf("run %d %-4s %-13s %d spans, %.2f CPU-s, %.0f spans/CPU-s, %.2f s, %d retries", run+1, p, t.name, s.spans, s.cpu.Seconds(), s.perCPU(), s.wall.Seconds(), s.retries)
			}
		}
	}
	if o.profile != "" {
		if err := profiles(ctx, o, targets, reqs, logf); err != nil {
			return err
		}
	}
	for _, t := range targets {
		if _, t.peakRSS, err = benchkit.Memory(t.srv.pid()); err != nil {
			return err
		}
		if t.final, err = t.taken(); err != nil {
			return fmt.Errorf("%s: %w", t.name, err)
		}
		if t.final != t.sent {
			return fmt.Errorf("%s took %d spans, %d were answered", t.name, t.final, t.sent)
		}
		if t.data != "" {
			if t.diskLive, err = benchkit.DiskUsage(t.data); err != nil {
				return err
			}
		}
		if err := t.srv.stop(); err != nil {
			return fmt.Errorf("%s: %v: %s", t.name, err, t.srv.stderr)
		}
		if ps := t.srv.cmd.ProcessState; ps != nil {
			t.runCPU = ps.UserTime() + ps.SystemTime()
		}
		if t.data != "" {
			if t.diskClosed, err = benchkit.DiskUsage(t.data); err != nil {
				return err
			}
		}
	}
	report(o, targets, reqBytes, stdout)
	fmt.Fprintf(stdout, "load average (1, 5, 15 min) at the start %s, at the end %s; %s\n", load0, loadAverage(), time.Now().UTC().Format("2006-01-02 15:04 MST"))
	return nil
}

// loadAverage is the machine's load average from /proc/loadavg: on a
// shared machine it says how much the figures are worth.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

// report prints the table.
func report(o *options, targets []*target, reqBytes int, stdout io.Writer) {
	fmt.Fprintf(stdout, "OTLP ingest: spans per server CPU-second; tracebridge serve, the OpenTelemetry Collector %s, Jaeger %s (%s %s)\n", collectorVersion, jaegerRelease, jaegerModule, jaegerVersion)
	fmt.Fprintf(stdout, "%d spans per phase, %d runs (median), %d clients, %d spans per request (%d distinct requests, %.0f bytes per span)\n",
		o.spans, o.runs, o.clients, o.perRequest, o.distinct, float64(reqBytes)/float64(o.distinct*o.perRequest))
	fmt.Fprintf(stdout, "bench %s, GOMAXPROCS %d, %d CPUs, %s/%s\n\n", runtime.Version(), runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	w := benchkit.Table(stdout)
	fmt.Fprintln(w, "protocol\tserver\tspans/CPU-s\tCPU-s per phase\tspans/s (wall)\tretries\t÷ "+baseline+"\t")
	var base *target
	for _, t := range targets {
		if t.name == baseline {
			base = t
		}
	}
	verdict := map[string]float64{}
	for _, p := range o.protocols {
		for _, t := range targets {
			m := median(t.samples[p])
			ratio := ""
			if base != nil {
				r := m.perCPU() / median(base.samples[p]).perCPU()
				ratio = fmt.Sprintf("%.2f×", r)
				if t.name == "tb-store" {
					verdict[p] = r
				}
			}
			fmt.Fprintf(w, "%s\t%s\t%.0f\t%.2f\t%.0f\t%d\t%s\t\n", p, t.name, m.perCPU(), m.cpu.Seconds(),
				float64(m.spans)/m.wall.Seconds(), t.retries[p], ratio)
		}
	}
	w.Flush()
	fmt.Fprintln(stdout)
	w = benchkit.Table(stdout)
	fmt.Fprintln(w, "server\tpeak RSS\tspans taken\twhole run: CPU-s\tspans/CPU-s\t÷ "+baseline+"\ton disk, running\tper span\ton disk, stopped\tper span\t")
	for _, t := range targets {
		disk := "\t\t\t\t"
		if t.data != "" {
			disk = fmt.Sprintf("%.1f MiB\t%.1f B\t%.1f MiB\t%.1f B\t", float64(t.diskLive)/mib, float64(t.diskLive)/float64(t.final),
				float64(t.diskClosed)/mib, float64(t.diskClosed)/float64(t.final))
		}
		ratio := ""
		if r, ok := t.runRatio(base); ok {
			ratio = fmt.Sprintf("%.2f×", r)
		}
		fmt.Fprintf(w, "%s\t%.0f MiB\t%d\t%.2f\t%.0f\t%s\t%s\n", t.name, float64(t.peakRSS)/mib, t.final, t.runCPU.Seconds(), t.runPerCPU(), ratio, disk)
	}
	w.Flush()
	if len(verdict) > 0 {
		fmt.Fprintf(stdout, "\ntracebridge with its store (tb-store) ÷ the Collector (otlp → nop):")
		met := true
		for _, p := range o.protocols {
			fmt.Fprintf(stdout, " %s %.2f×", p, verdict[p])
			met = met && verdict[p] >= aimRatio
		}
		for _, t := range targets {
			if r, ok := t.runRatio(base); ok && t.name == "tb-store" {
				fmt.Fprintf(stdout, ", whole run %.2f×", r)
				met = met && r >= aimRatio
			}
		}
		v := "met"
		if !met {
			v = "NOT met"
		}
		fmt.Fprintf(stdout, "; aim (≥ %.0f×, issue 25): %s\n", aimRatio, v)
	}
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
	if err == nil {
		t.sent += d.spans
		err = settle(ctx, t, start)
	}
	if err != nil {
		return sample{}, fmt.Errorf("%w%s", err, t.diagnose(o.profile))
	}
	wall := time.Since(start)
	cpu1, err := benchkit.CPU(t.srv.pid())
	if err != nil {
		return sample{}, err
	}
	return sample{spans: d.spans, cpu: cpu1 - cpu0, wall: wall, retries: d.retries}, nil
}

// diagnose saves what a failed phase leaves to look at: with profiles,
// the goroutines of a tracebridge server (where it hangs) in dir; and
// the tail of its standard error.
func (t *target) diagnose(dir string) string {
	var b strings.Builder
	if t.pprof != "" && dir != "" {
		path := filepath.Join(dir, t.name+".goroutines.txt")
		resp, err := metricClientGet("http://" + t.pprof + "/debug/pprof/goroutine?debug=2")
		if err == nil {
			err = os.WriteFile(path, resp, 0o644)
		}
		if err != nil {
			fmt.Fprintf(&b, "; its goroutines: %v", err)
		} else {
			fmt.Fprintf(&b, "; its goroutines in %s", path)
		}
	}
	fmt.Fprintf(&b, "; its standard error: %s", t.srv.stderr)
	return b.String()
}

// metricClientGet fetches url's body (within a minute).
func metricClientGet(url string) ([]byte, error) {
	c := &http.Client{Timeout: time.Minute}
	resp, err := c.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// stuckAfter is how long a server may take no span while it owes some
// before the phase fails: generous, since Badger writes a batch of 8192
// spans at a time and the machine may be shared.
const stuckAfter = 2 * time.Minute

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
		} else if time.Since(lastChange) > stuckAfter {
			return fmt.Errorf("stuck at %d of %d spans for %v", n, t.sent, stuckAfter)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.srv.exited:
			return fmt.Errorf("exited (%v): %s", t.srv.waitErr, t.srv.stderr)
		case <-time.After(settleStep(time.Since(start))):
		}
	}
}

// settleStep is how long settle waits before the next poll, elapsed into
// a phase: 5 % of it, at least 2 ms, at most 100 ms. Each poll costs the
// server CPU (tracebridge's metrics page, its process collector reading
// /proc, takes about half a millisecond), and a server that waits out a
// trace window is polled all through it: at benchkit.PollStep's 0.5 %
// (at most 20 ms) tracebridge was polled some 150 times a phase and the
// polls were 5–6 % of its CPU profile, the Collector (done when the
// last request is answered) once or twice. Spans per CPU-second is the
// figure; the wall time may be up to 5 % late.
func settleStep(elapsed time.Duration) time.Duration {
	return min(100*time.Millisecond, max(2*time.Millisecond, elapsed/20))
}
