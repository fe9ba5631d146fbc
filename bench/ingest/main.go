// Ingest is tracebridge's end-to-end ingest benchmark. It is run by hand
// (go run ./bench/ingest -conns 4), never by CI; README.md explains the
// numbers.
//
// For each dialect (KDB binary, Kieker's single-socket binary) it starts a
// tracebridge serve process with one receiver of that dialect and a binary
// Kieker log sink, drives K concurrent loopback connections of generated
// Before/After events into it, and stops the clock when the sink has
// consumed every record sent (tracebridge_sink_records_total). It then
// stops the bridge with SIGTERM, reads its peak RSS, and verifies the log
// record by record. In the same run the same clients send the same bytes
// to a server process that only discards them: the raw loopback copy the
// bridge is compared with.
//
// Concurrency: one goroutine per client connection; everything else runs
// on the main goroutine. The bridge and the baseline server are separate
// processes that this program starts and stops.
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
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/record"
	tstore "github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// The aim of the benchmark (at 4 connections).
const (
	aimRatio   = 0.35
	aimRSS     = 256 << 20
	aimConns   = 4
	mib        = 1 << 20
	megabyte   = 1e6
	chunkLimit = 1 << 24 // events per chunk at most
	// maxCopies: copies of a chunk with traceIds of their own
	// (benchkit.RepeatID numbers them in 16 bits).
	maxCopies = 1 << (benchkit.TraceShift - benchkit.RepeatShift)
)

type options struct {
	conns    int
	records  int64
	duration time.Duration
	chunk    int
	rawRuns  int
	bin      string
	base     string // a second binary (main's) run log-only beside bin's, against the same raw copy
	keep     bool
	dialects []string
	store    bool // also run with the trace store sink (the embedded default's path)
	calls    int  // calls per generated trace (0: 1 to 24)
	sameIDs  bool // every repetition of a chunk with the same traceIds
}

func main() {
	if code, ok := benchkit.Child(roleEnv, "discard", "discard server", discardServer); ok {
		os.Exit(code)
	}
	os.Exit(benchkit.Main(os.Args[1:], parseFlags, run))
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := benchkit.NewFlags("ingest", "usage: go run ./bench/ingest [-conns K] [-records N | -duration D] [-dialects kdb,kieker] [-bin PATH] [-keep]", stderr)
	var o options
	var dialects string
	fs.IntVar(&o.conns, "conns", 4, "concurrent client connections")
	fs.Int64Var(&o.records, "records", 2_000_000, "records each connection sends")
	fs.DurationVar(&o.duration, "duration", 0, "send for this long instead of -records (whole chunks; the baseline then sends the same bytes)")
	fs.IntVar(&o.chunk, "chunk", 65536, "events per pre-encoded chunk (each connection sends its chunk over and over)")
	fs.IntVar(&o.rawRuns, "raw-runs", 3, "how often the raw copy is measured (the median counts)")
	fs.StringVar(&o.bin, "bin", "", "tracebridge binary (default: go build ./cmd/tracebridge into a temporary directory)")
	fs.StringVar(&o.base, "base", "", "a second tracebridge binary (main's, say) run log-only right after -bin's, compared against the same raw copy")
	fs.BoolVar(&o.keep, "keep", false, "keep the temporary directory with the Kieker logs")
	fs.StringVar(&dialects, "dialects", "kdb,kieker", "comma-separated dialects to drive: kdb, kieker")
	fs.BoolVar(&o.store, "store", false, "run each dialect again with a trace store sink beside the log (the embedded default's path) and compare")
	fs.IntVar(&o.calls, "calls", 0, "calls per generated trace (0: 1 to 24; barlib's load is 1000)")
	fs.BoolVar(&o.sameIDs, "same-ids", false, "send each repetition of a chunk with the same traceIds (the load before 2026-11-30: its traces again, which the trace assembler merges)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.conns < 1 || o.conns > 1000 {
		fs.Bad("-conns %d: want 1 to 1000", o.conns)
	}
	if o.duration < 0 || (o.duration == 0 && o.records < 1) {
		fs.Bad("want -records ≥ 1 or a positive -duration")
	}
	if o.base != "" && o.duration > 0 {
		fs.Bad("-base needs -records (both binaries get the same bytes)")
	}
	if o.rawRuns < 1 || o.rawRuns > 100 {
		fs.Bad("-raw-runs %d: want 1 to 100", o.rawRuns)
	}
	if o.chunk < 1 || o.chunk > chunkLimit {
		fs.Bad("-chunk %d: want 1 to %d", o.chunk, chunkLimit)
	}
	if o.duration == 0 && !o.sameIDs && o.chunk >= 1 && o.records/int64(o.chunk) >= maxCopies {
		fs.Bad("-records %d in chunks of %d: %d copies or more repeat the traceIds (a larger -chunk, or -same-ids)", o.records, o.chunk, maxCopies)
	}
	if o.calls < 0 || o.calls > 10_000_000 {
		fs.Bad("-calls %d: want 0 to 10000000", o.calls)
	}
	o.dialects = fs.List("dialects", dialects, func(d string) string {
		if d != dialectKDB && d != dialectKieker {
			return fmt.Sprintf("-dialects: unknown dialect %q (want kdb or kieker)", d)
		}
		return ""
	})
	if err := fs.Err(); err != nil {
		return nil, err
	}
	return &o, nil
}

// result is one dialect's measurement.
type result struct {
	dialect      string
	mode         string        // modeLog or modeStore
	exit         time.Duration // first byte sent to the bridge's exit after SIGTERM (traces flushed)
	stored       int           // traces in the store after the run (modeStore)
	wantStored   int           // traces sent (-1: not known, chunks repeated)
	records      int64
	bytes        int64
	elapsed      time.Duration // bridge: first byte sent to last record in the sink
	raw          time.Duration // raw copy of the same bytes
	peak, rssMax int64         // VmHWM before SIGTERM, largest VmRSS sampled
	cpu, rawCPU  time.Duration // process CPU time, bridge and discard server
	err          error
	rawDone      bool
	peakKnown    bool
	verified     bool
}

// run runs the benchmark and returns the exit code.
func run(ctx context.Context, o *options, stdout, stderr io.Writer) int {
	logf := benchkit.Logf(stderr, "ingest")
	tmp, bin, done, err := benchkit.Setup(ctx, "tracebridge-bench-", o.bin, o.keep, logf)
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer done()
	bridgeGo := benchkit.GoVersion(bin)

	cat := record.Builtin()
	sigs := benchkit.Signatures()
	perChunk := o.chunk
	if o.duration == 0 && o.records < int64(perChunk) {
		perChunk = int(o.records)
	}
	events := make([][]benchkit.Event, o.conns)
	for c := range events {
		events[c] = benchkit.TraceEvents(genSeed, c, perChunk, o.calls)
	}

	var results []result
	for _, d := range o.dialects {
		if ctx.Err() != nil {
			break
		}
		r := result{dialect: d, mode: modeLog}
		var rs, rb *result
		if o.store {
			rs = &result{dialect: d, mode: modeStore}
		}
		if o.base != "" {
			rb = &result{dialect: d, mode: modeBase}
		}
		r.err = measure(ctx, o, bin, d, cat, sigs, events, tmp, &r, rs, rb, logf)
		if r.err != nil {
			logf("%s: %v", d, r.err)
		}
		results = append(results, r)
		if rb != nil {
			results = append(results, *rb)
		}
		if rs != nil {
			if rs.err == nil && r.err != nil {
				rs.err = errors.New("not run: the log-only run failed")
			}
			results = append(results, *rs)
		}
	}

	shape := "traces of 1 to 24 calls"
	if o.calls > 0 {
		shape = fmt.Sprintf("traces of %d calls", o.calls)
	}
	fmt.Fprintf(stdout, "tracebridge ingest benchmark: %d connection(s), %s, %s, %d distinct operations\n",
		o.conns, sendPlan(o), shape, len(sigs))
	fmt.Fprintf(stdout, "bench %s, bridge %s (%s), GOMAXPROCS %d, %d CPUs, %s/%s\n",
		runtime.Version(), bridgeGo, bin, runtime.GOMAXPROCS(0), runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	if o.base != "" {
		fmt.Fprintf(stdout, "base (%s): %s\n", modeBase, o.base)
	}
	printTable(stdout, o.conns, results)
	printBase(stdout, results)
	printStore(stdout, results)
	code := 0
	for _, r := range results {
		if r.err != nil {
			code = 1
		}
	}
	if ctx.Err() != nil {
		code = 1
	}
	return code
}

func sendPlan(o *options) string {
	if o.duration > 0 {
		return fmt.Sprintf("sending for %v per connection", o.duration)
	}
	return fmt.Sprintf("%d records per connection", o.records)
}

// The modes of a bridge run.
const (
	modeLog   = "log"       // a binary Kieker log sink
	modeBase  = "log, base" // the same with the -base binary
	modeStore = "log+store" // and the trace store sink
)

// measure runs the bridge (with rb, then the -base binary) and then the
// raw copy for one dialect, then, with rs, the bridge with the store sink
// too.
func measure(ctx context.Context, o *options, bin, dialect string, cat *record.Catalog, sigs []benchkit.Signature,
	events [][]benchkit.Event, tmp string, r, rs, rb *result, logf func(string, ...any)) error {
	enc, err := newEncoder(dialect, cat, sigs)
	if err != nil {
		return err
	}
	streams := make([]*stream, len(events))
	for c := range events {
		if streams[c], err = enc.stream(c, events[c], o.sameIDs); err != nil {
			return err
		}
	}
	dir := filepath.Join(tmp, dialect)
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	var counts []int64
	if o.duration == 0 {
		counts = make([]int64, len(streams))
		for i := range counts {
			counts[i] = o.records
		}
	}
	sr, err := bridgeRun(ctx, o, bin, dir, "", enc, streams, counts, r, logf)
	if err != nil {
		return err
	}
	if rb != nil {
		benchkit.SettleDisk()
		bdir := filepath.Join(tmp, dialect+"-base")
		if err := os.Mkdir(bdir, 0o755); err != nil {
			return err
		}
		if _, rb.err = bridgeRun(ctx, o, o.base, bdir, "", enc, streams, counts, rb, logf); rb.err != nil {
			logf("%s with -base: %v", dialect, rb.err)
		}
	}
	benchkit.SettleDisk()
	logf("%s: raw loopback copy of the same bytes, %d time(s)", dialect, o.rawRuns)
	type copyRun struct{ elapsed, cpu time.Duration }
	runs := make([]copyRun, o.rawRuns)
	for i := range runs {
		if runs[i].elapsed, runs[i].cpu, err = rawRun(ctx, streams, sr.counts()); err != nil {
			return fmt.Errorf("raw copy: %w", err)
		}
	}
	slices.SortFunc(runs, func(a, b copyRun) int { return cmp.Compare(a.elapsed, b.elapsed) })
	med := runs[len(runs)/2]
	r.raw, r.rawCPU, r.rawDone = med.elapsed, med.cpu, true
	if rb != nil {
		rb.raw, rb.rawCPU, rb.rawDone = r.raw, r.rawCPU, true
	}
	if rs == nil {
		return nil
	}
	rs.raw, rs.rawCPU, rs.rawDone = r.raw, r.rawCPU, true
	sdir := filepath.Join(tmp, dialect+"-store")
	if err := os.Mkdir(sdir, 0o755); err != nil {
		return err
	}
	benchkit.SettleDisk()
	ss, err := bridgeRun(ctx, o, bin, sdir, benchkit.StoreSink(sdir), enc, streams, counts, rs, logf)
	if rs.err = err; err != nil {
		logf("%s with the store: %v", dialect, rs.err)
		return nil
	}
	// (With -duration this run sent chunks of its own number.)
	rs.wantStored = tracesSent(streams, ss.sent)
	// (A trace of more than the assembler's max_spans events is stored
	// in parts, each counted.)
	if rs.stored, rs.err = countStored(filepath.Join(sdir, "store")); rs.err == nil && rs.wantStored >= 0 &&
		(rs.stored < rs.wantStored || rs.stored > rs.wantStored && 2*o.calls <= trace.DefaultMaxSpans) {
		rs.err = fmt.Errorf("the store holds %d traces where %d were sent", rs.stored, rs.wantStored)
	}
	if rs.err != nil {
		rs.verified = false
		logf("%s with the store: %v", dialect, rs.err)
	}
	return nil
}

// bridgeRun starts the bridge with the log sink and sinks, drives the
// clients into it, stops it and verifies the log.
func bridgeRun(ctx context.Context, o *options, bin, dir, sinks string, enc *encoder, streams []*stream, counts []int64,
	r *result, logf func(string, ...any)) (sendResult, error) {
	logf("%s: bridge run (%s), %d connection(s)", r.dialect, r.mode, o.conns)
	b, err := benchkit.StartSinks(ctx, bin, dir, receiverConfig(r.dialect), sinks)
	if err != nil {
		return sendResult{}, err
	}
	sr, err := drive(ctx, o, b, streams, counts, r, sinks != "")
	if err != nil {
		b.Kill()
		return sr, err
	}
	logf("%s: %d records, %d bytes in %.2f s (%.2f s to exit); verifying the log", r.dialect, r.records, r.bytes, r.elapsed.Seconds(), r.exit.Seconds())
	if err := verifyLog(ctx, b.LogDir, enc, streams, sr.sent); err != nil {
		return sr, err
	}
	r.verified = true
	if !o.keep {
		if err := os.RemoveAll(filepath.Join(dir, "log")); err != nil {
			return sr, err
		}
	}
	return sr, nil
}

// receiverConfig returns the YAML of the serve receiver that speaks a
// dialect (see benchkit.Start).
func receiverConfig(dialect string) string {
	typ := "tcp-server"
	if dialect == dialectKieker {
		typ = "kieker-tcp"
	}
	return fmt.Sprintf("    type: %s\n    listen: \"127.0.0.1:0\"\n", typ)
}

// stallTimeout ends a run whose sink count has not moved for this long
// after the clients finished.
const stallTimeout = 15 * time.Second

// errStalled reports a bridge whose sink stopped short of the records sent.
var errStalled = errors.New("the sink count stopped short of the records sent")

// drive connects the clients to a started bridge, sends, and stops the
// clock when the sink has consumed every record sent; then it stops the
// bridge. It fills r with the measurement. The metrics endpoint is polled
// at the benchkit.PollStep of the time elapsed.
func drive(ctx context.Context, o *options, b *benchkit.Bridge, streams []*stream, counts []int64, r *result, traces bool) (sendResult, error) {
	pid := b.Pid()
	if n, err := b.SinkRecords(); err != nil || n != 0 {
		return sendResult{}, fmt.Errorf("sink count before the run: %d (%v)", n, err)
	}
	conns, err := dial(b.Addr, len(streams))
	if err != nil {
		return sendResult{}, err
	}
	var until time.Time
	start := time.Now()
	if o.duration > 0 {
		until = start.Add(o.duration)
	}
	done := sendAll(conns, streams, counts, until)
	var sr sendResult
	target := int64(-1)
	timer := time.NewTimer(benchkit.PollStep(0))
	defer timer.Stop()
	last, lastChange := int64(-1), time.Now()
	for {
		select {
		case sr = <-done:
			done = nil
			if sr.err != nil {
				return sr, sr.err
			}
			target = sr.total().records
		case <-timer.C:
		case <-b.Exited():
			return sr, fmt.Errorf("tracebridge serve exited during the run (%v): %s", b.WaitErr(), b.Stderr())
		case <-ctx.Done():
			return sr, ctx.Err()
		}
		if rss, _, err := benchkit.Memory(pid); err == nil {
			r.rssMax = max(r.rssMax, rss)
		}
		n, err := b.SinkRecords()
		if err != nil {
			return sr, err
		}
		now := time.Now()
		timer.Reset(benchkit.PollStep(now.Sub(start)))
		if target >= 0 && n >= target {
			r.elapsed = now.Sub(start)
			if n > target {
				return sr, fmt.Errorf("the sink consumed %d records where %d were sent", n, target)
			}
			break
		}
		if n != last {
			last, lastChange = n, now
		}
		if target >= 0 && now.Sub(lastChange) > stallTimeout {
			return sr, fmt.Errorf("%w: %d of %d after %v without progress; %s", errStalled, n, target, stallTimeout, b.Stderr())
		}
	}
	t := sr.total()
	r.records, r.bytes = t.records, t.bytes
	if traces {
		// Every record sent reached the assembler before the stop.
		if err := waitTraceRecords(ctx, b, t.records); err != nil {
			return sr, err
		}
	}
	if _, peak, err := benchkit.Memory(pid); err == nil {
		r.peak = peak
		r.peakKnown = true
	}
	// The shutdown flushes the open traces (into the store): VmHWM is
	// read until the bridge has exited.
	stopped := make(chan error, 1)
	go func() {
		var err error
		r.cpu, err = b.Stop()
		stopped <- err
	}()
	for {
		select {
		case err := <-stopped:
			if err != nil {
				return sr, err
			}
			r.exit = time.Since(start)
			return sr, nil
		case <-time.After(5 * time.Millisecond):
			if _, peak, err := benchkit.Memory(pid); err == nil {
				r.peak = max(r.peak, peak)
			}
		}
	}
}

// waitTraceRecords waits until the bridge's trace assembler has taken n
// records.
func waitTraceRecords(ctx context.Context, b *benchkit.Bridge, n int64) error {
	deadline := time.Now().Add(stallTimeout)
	for {
		got, err := b.TraceRecords()
		if err != nil {
			return err
		}
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the trace assembler took %d of %d records", got, n)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(benchkit.PollStep(0)):
		}
	}
}

// printTable prints one row per dialect.
func printTable(w io.Writer, conns int, results []result) {
	tw := benchkit.Table(w)
	fmt.Fprintln(tw, "dialect\tsinks\tconns\trecords\tbytes\tseconds\trecords/s\tMB/s\traw MB/s\tratio\tto exit s\tpeak RSS MiB\tmax sampled RSS MiB\tbridge CPU s\traw CPU s\t")
	for _, r := range results {
		if !r.verified {
			fmt.Fprintf(tw, "%s\t%s\t%d\tFAILED\t\t\t\t\t\t\t\t\t\t\t\t\n", r.dialect, r.mode, conns)
			continue
		}
		secs := r.elapsed.Seconds()
		mbps := float64(r.bytes) / megabyte / secs
		raw, ratio, rawCPU := "-", "-", "-"
		if r.rawDone {
			rawMBps := float64(r.bytes) / megabyte / r.raw.Seconds()
			raw = fmt.Sprintf("%.1f", rawMBps)
			ratio = fmt.Sprintf("%.3f", mbps/rawMBps)
			rawCPU = fmt.Sprintf("%.2f", r.rawCPU.Seconds())
		}
		peak := "-"
		if r.peakKnown {
			peak = fmt.Sprintf("%.1f", float64(r.peak)/mib)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%.3f\t%.0f\t%.1f\t%s\t%s\t%.3f\t%s\t%.1f\t%.2f\t%s\t\n",
			r.dialect, r.mode, conns, r.records, r.bytes, secs, float64(r.records)/secs, mbps, raw, ratio, r.exit.Seconds(), peak, float64(r.rssMax)/mib, r.cpu.Seconds(), rawCPU)
	}
	tw.Flush()
	for _, r := range results {
		if r.err != nil {
			fmt.Fprintf(w, "%s: FAILED: %v\n", r.dialect, r.err)
			continue
		}
		if conns != aimConns || r.mode != modeLog {
			continue
		}
		verdict := func(ok bool) string {
			if ok {
				return "met"
			}
			return "MISSED"
		}
		ratio := r.raw.Seconds() / r.elapsed.Seconds()
		fmt.Fprintf(w, "%s at %d connections: ratio %.3f (aim ≥ %.2f: %s), peak RSS %.1f MiB (aim ≤ %d MiB: %s)\n",
			r.dialect, aimConns, ratio, aimRatio, verdict(ratio >= aimRatio),
			float64(r.peak)/mib, aimRSS/mib, verdict(r.peakKnown && r.peak <= aimRSS))
	}
}

// printBase compares each dialect's log-only run with the -base binary's
// of the same program run: seconds (so ratio) and records per bridge
// CPU-second.
func printBase(w io.Writer, results []result) {
	for i, r := range results {
		if r.mode != modeLog || r.err != nil || !r.verified || i+1 >= len(results) {
			continue
		}
		b := results[i+1]
		if b.mode != modeBase || b.err != nil || !b.verified {
			continue
		}
		perCPU := func(x result) float64 { return float64(x.records) / x.cpu.Seconds() }
		fmt.Fprintf(w, "%s: -bin ÷ -base: %.2f× the records/s (ratio %.3f against %.3f), %.2f× the records per bridge CPU-second (%.0f against %.0f)\n",
			r.dialect, b.elapsed.Seconds()/r.elapsed.Seconds(), r.raw.Seconds()/r.elapsed.Seconds(), b.raw.Seconds()/b.elapsed.Seconds(),
			perCPU(r)/perCPU(b), perCPU(r), perCPU(b))
	}
}

// printStore compares each dialect's run with the store with its log-only
// run of the same program run: records per second from the first byte to
// the bridge's exit (which flushes the open traces into the store), and
// records per CPU-second of the bridge.
func printStore(w io.Writer, results []result) {
	for i, r := range results {
		j := i - 1
		for j >= 0 && results[j].mode == modeBase {
			j--
		}
		if r.mode != modeStore || r.err != nil || !r.verified || j < 0 || results[j].mode != modeLog || !results[j].verified {
			continue
		}
		base := results[j]
		rate := func(x result) float64 { return float64(x.records) / x.exit.Seconds() }
		perCPU := func(x result) float64 { return float64(x.records) / x.cpu.Seconds() }
		want := "not known (chunks repeated with the same traceIds)"
		if r.wantStored >= 0 {
			want = fmt.Sprintf("%d sent", r.wantStored)
		}
		fmt.Fprintf(w, "%s with the store: %.0f records/s to exit (%.3f of the log-only run's %.0f), %.0f records/CPU-s (%.3f of %.0f), peak RSS %.1f MiB (%.2f of %.1f MiB); %d traces stored, %s\n",
			r.dialect, rate(r), rate(r)/rate(base), rate(base), perCPU(r), perCPU(r)/perCPU(base), perCPU(base),
			float64(r.peak)/mib, float64(r.peak)/float64(base.peak), float64(base.peak)/mib, r.stored, want)
	}
}

// tracesSent returns the number of traces in what the connections sent,
// -1 when a connection sent its chunk more than once with the same
// traceIds (-same-ids: its traces again).
func tracesSent(streams []*stream, sent []sent) int {
	n := 0
	for c, s := range streams {
		if s.sameIDs && sent[c].records > s.records() {
			return -1
		}
		last := int64(0)
		for i := range sent[c].records {
			if id := s.traceID(i); id != last {
				n++
				last = id
			}
		}
	}
	return n
}

// countStored opens the store in dir (read-only) and counts its traces.
func countStored(dir string) (int, error) {
	st, err := tstore.Open(dir, tstore.Options{ReadOnly: true})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	return st.Count()
}
