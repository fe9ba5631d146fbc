// Kta is tracebridge's benchmark of `analyze --kieker-trace-analysis`
// (the drop-in for Kieker's trace-analysis tool) on a large generated
// Kieker log. It is run by hand (see README.md), never by CI.
//
// It generates a Kieker log (ASCII by default) of event traces: each a
// TraceMetadata and the Before and After events of 1 to 40 calls up to 12
// deep (one of -kinds random call trees: the kinds of request a system
// serves), on four hosts, with -open traces running at once so that their
// records interleave as a busy system's do. Then, in the same run, it
// times as child processes:
//
//   - `cat` of the log's files to /dev/null (the floor: reading the bytes),
//   - `tracebridge cat` of the log to /dev/null (decoding every record),
//   - `tracebridge analyze --kieker-trace-analysis` with every aggregate
//     output (execution, message and invalid traces, both equivalence
//     classes, the system model, every dependency graph with response
//     times, both aggregated call trees), and with -per-trace also the
//     sequence diagrams and call trees of every trace,
//   - the same with the binary -base names (an older tracebridge), whose
//     outputs are compared with the new ones (ignoring " (assumed)",
//     which older binaries did not print),
//
// and prints wall time, CPU time, peak RSS and MB/s of each, and the
// ratios against cat.
//
// Concurrency: everything runs on the main goroutine; the programs timed
// run as child processes, one at a time.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/logwrite"
	"github.com/tracebridge/tracebridge/internal/record"
)

type options struct {
	calls    int
	kinds    int
	open     int
	binary   bool
	bin      string
	base     string
	dir      string
	keep     bool
	perTrace bool
	runs     int
}

func main() {
	os.Exit(benchkit.Main(os.Args[1:], parseFlags, run))
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := benchkit.NewFlags("kta", "usage: go run ./bench/kta [-calls N] [-open N] [-binary] [-bin PATH] [-base PATH] [-per-trace] [-runs N] [-dir DIR] [-keep]", stderr)
	var o options
	fs.IntVar(&o.calls, "calls", 1_300_000, "calls in the generated log (about 220 bytes each in ASCII)")
	fs.IntVar(&o.kinds, "kinds", 200, "kinds of request: each trace has the calls of one of this many random call trees (0: every trace its own)")
	fs.IntVar(&o.open, "open", 32, "traces running at once (their records interleave)")
	fs.BoolVar(&o.binary, "binary", false, "write a binary log instead of ASCII")
	fs.StringVar(&o.bin, "bin", "", "tracebridge binary (default: go build ./cmd/tracebridge into the work directory)")
	fs.StringVar(&o.base, "base", "", "an older tracebridge binary to measure beside it and compare outputs with")
	fs.BoolVar(&o.perTrace, "per-trace", false, "also plot every trace's sequence diagrams and call tree (three files per trace)")
	fs.IntVar(&o.runs, "runs", 1, "runs of each program (alternated)")
	fs.StringVar(&o.dir, "dir", "", "directory for the log and outputs, kept (default: a new one under $TMPDIR, removed unless -keep)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work directory")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if o.calls < 1 || o.open < 1 || o.runs < 1 || o.kinds < 0 {
		fs.Bad("-calls, -open and -runs must be positive, -kinds not negative")
	}
	return &o, fs.Err()
}

func run(ctx context.Context, o *options, stdout, stderr io.Writer) int {
	logf := benchkit.Logf(stderr, "kta")
	dir, bin, done, err := benchkit.Setup(ctx, "tracebridge-kta-*", o.bin, o.keep, logf)
	if err != nil {
		logf("%v", err)
		return 1
	}
	defer done()
	if o.dir != "" {
		dir = o.dir
	}
	logDir, size, traces, err := generate(dir, o)
	if err != nil {
		logf("generating the log: %v", err)
		return 1
	}
	logf("log %s: %.1f MB, %d traces, %d calls", logDir, float64(size)/1e6, traces, o.calls)
	files, err := filepath.Glob(filepath.Join(logDir, "*.*"))
	if err != nil {
		logf("%v", err)
		return 1
	}
	type prog struct {
		name string
		args []string
		out  string
	}
	progs := []prog{
		{name: "cat", args: append([]string{"cat"}, files...)},
		{name: "tracebridge cat", args: []string{bin, "cat", logDir}},
		{name: "analyze (new)", out: filepath.Join(dir, "out-new")},
	}
	if o.base != "" {
		progs = append(progs, prog{name: "analyze (base)", out: filepath.Join(dir, "out-base")})
	}
	for i := range progs {
		p := &progs[i]
		if p.out == "" {
			continue
		}
		b := bin
		if strings.HasSuffix(p.name, "(base)") {
			b = o.base
		}
		p.args = append([]string{b}, taArgs(logDir, p.out, o.perTrace)...)
	}
	type result struct {
		wall, cpu time.Duration
		rss       int64
	}
	results := make([][]result, len(progs))
	for r := 0; r < o.runs; r++ {
		for i, p := range progs {
			if p.out != "" {
				os.RemoveAll(p.out)
			}
			start := time.Now()
			cmd := exec.CommandContext(ctx, p.args[0], p.args[1:]...)
			var errb bytes.Buffer
			cmd.Stderr = &errb
			if err := cmd.Run(); err != nil {
				logf("%s: %v\n%s", p.name, err, errb.String())
				return 1
			}
			wall := time.Since(start)
			cpu, rss := benchkit.Usage(cmd.ProcessState)
			results[i] = append(results[i], result{wall, cpu, rss})
			logf("run %d %s: %.2f s, %.2f CPU-s, peak RSS %.0f MiB; %s", r+1, p.name, wall.Seconds(), cpu.Seconds(), float64(rss)/(1<<20), lastLine(errb.String()))
		}
	}
	load, _ := os.ReadFile("/proc/loadavg")
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "program\twall s (best)\tCPU s (best)\tpeak RSS MiB (max)\tMB/s\twall ÷ cat\tCPU ÷ tracebridge cat\t\n")
	best := func(rs []result) result {
		b := rs[0]
		for _, r := range rs[1:] {
			b.wall, b.cpu, b.rss = min(b.wall, r.wall), min(b.cpu, r.cpu), max(b.rss, r.rss)
		}
		return b
	}
	catB, tcatB := best(results[0]), best(results[1])
	for i, p := range progs {
		b := best(results[i])
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.0f\t%.0f\t%.1f\t%.2f\t\n", p.name, b.wall.Seconds(), b.cpu.Seconds(), float64(b.rss)/(1<<20),
			float64(size)/1e6/b.wall.Seconds(), b.wall.Seconds()/catB.wall.Seconds(), b.cpu.Seconds()/tcatB.cpu.Seconds())
	}
	tw.Flush()
	fmt.Fprintf(stdout, "log: %.1f MB, %d traces, about %d calls, %d kinds; load average %s", float64(size)/1e6, traces, o.calls, o.kinds, load)
	if o.base != "" {
		if d := compare(progs[2].out, progs[3].out); d != "" {
			fmt.Fprintf(stdout, "outputs differ from the base's: %s\n", d)
			return 3
		}
		fmt.Fprintln(stdout, "outputs: the same as the base's (\" (assumed)\" aside)")
	}
	return 0
}

// taArgs is the drop-in's command line with every output.
func taArgs(log, out string, perTrace bool) []string {
	args := []string{"analyze", "--kieker-trace-analysis", "-i", log, "-o", out,
		"--print-Execution-Traces", "--print-Message-Traces", "--print-Deployment-Equivalence-Classes",
		"--print-Assembly-Equivalence-Classes", "--print-System-Model", "--plot-Container-Dependency-Graph",
		"--plot-Deployment-Component-Dependency-Graph", "responseTimes-ms", "--plot-Assembly-Component-Dependency-Graph", "responseTimes-ms",
		"--plot-Deployment-Operation-Dependency-Graph", "responseTimes-ms", "--plot-Assembly-Operation-Dependency-Graph", "responseTimes-ms",
		"--plot-Aggregated-Deployment-Call-Tree", "--plot-Aggregated-Assembly-Call-Tree", "--ignore-invalid-traces"}
	if perTrace {
		args = append(args, "--plot-Deployment-Sequence-Diagrams", "--plot-Assembly-Sequence-Diagrams", "--plot-Call-Trees")
	}
	return args
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// compare reports the first file of a that b lacks or that differs.
func compare(a, b string) string {
	ents, err := os.ReadDir(a)
	if err != nil {
		return err.Error()
	}
	for _, e := range ents {
		x, err := os.ReadFile(filepath.Join(a, e.Name()))
		if err != nil {
			return err.Error()
		}
		y, err := os.ReadFile(filepath.Join(b, e.Name()))
		if err != nil {
			return err.Error()
		}
		x, y = bytes.ReplaceAll(x, []byte(" (assumed)"), nil), bytes.ReplaceAll(y, []byte(" (assumed)"), nil)
		if !bytes.Equal(x, y) {
			return e.Name()
		}
	}
	return ""
}

// shape is a trace's calls: for each event, the signature of the call it
// begins (≥ 0) or -1 for the end of the innermost call begun.
type shape []int

// newShape returns a random call tree of 1 to 40 calls up to 12 deep.
func newShape(rng *rand.Rand, nsigs int) shape {
	left := 1 + rng.IntN(40)
	var s shape
	depth := 0
	for left > 0 || depth > 0 {
		if left > 0 && (depth <= 1 || (depth < 12 && rng.IntN(100) < 55)) {
			s = append(s, rng.IntN(nsigs))
			depth++
			left--
			continue
		}
		s = append(s, -1)
		depth--
	}
	return s
}

// generate writes the log: traces of 1 to 40 calls (Kieker's AspectJ
// signatures of benchkit.Signatures), each of one of o.kinds shapes,
// o.open at a time, until at least o.calls calls are written.
func generate(dir string, o *options) (logDir string, size int64, traces int, err error) {
	w, err := logwrite.New(logwrite.Config{Path: dir, Binary: o.binary, Hostname: "kta", Metadata: true, MaxEntriesInFile: 1_000_000})
	if err != nil {
		return "", 0, 0, err
	}
	cat := record.Builtin()
	meta, before, after := cat.Lookup(record.TraceMetadata), cat.Lookup(record.BeforeOperationEvent), cat.Lookup(record.AfterOperationEvent)
	sigs := benchkit.Signatures()
	rng := rand.New(rand.NewPCG(1, 2))
	kinds := make([]shape, o.kinds)
	for i := range kinds {
		kinds[i] = newShape(rng, len(sigs))
	}
	type open struct {
		id    int64
		shape shape
		next  int   // the next event of shape
		stack []int // signatures of the calls begun
	}
	var running []*open
	ts := int64(1735689600_000000000)
	started := 0
	var b record.Batch
	flush := func() error {
		if err := w.Consume(context.Background(), &b); err != nil {
			return err
		}
		b.Reset()
		return nil
	}
	for started < o.calls || len(running) > 0 {
		for len(running) < o.open && started < o.calls {
			traces++
			t := &open{id: int64(traces)}
			if o.kinds > 0 {
				t.shape = kinds[rng.IntN(o.kinds)]
			} else {
				t.shape = newShape(rng, len(sigs))
			}
			for _, sig := range t.shape {
				if sig >= 0 {
					started++
				}
			}
			r := b.Add(meta, ts)
			r.Values[0] = record.IntValue(t.id)
			r.Values[1] = record.IntValue(int64(traces % 97))
			r.Values[2] = record.StringValue(fmt.Sprintf("session-%d", traces%100))
			r.Values[3] = record.StringValue(fmt.Sprintf("host%d", traces%4))
			r.Values[4] = record.IntValue(-1)
			r.Values[5] = record.IntValue(-1)
			running = append(running, t)
		}
		i := rng.IntN(len(running))
		t := running[i]
		ts += 200 + int64(rng.IntN(1800))
		typ := before
		sig := t.shape[t.next]
		if sig >= 0 {
			t.stack = append(t.stack, sig)
		} else {
			typ = after
			sig = t.stack[len(t.stack)-1]
			t.stack = t.stack[:len(t.stack)-1]
		}
		r := b.Add(typ, ts)
		r.Values[0] = record.IntValue(ts)
		r.Values[1] = record.IntValue(t.id)
		r.Values[2] = record.IntValue(int64(t.next))
		r.Values[3] = record.StringValue(sigs[sig].Op)
		r.Values[4] = record.StringValue(sigs[sig].Class)
		t.next++
		if t.next == len(t.shape) {
			running[i] = running[len(running)-1]
			running = running[:len(running)-1]
		}
		if len(b.Records) >= 4096 {
			if err := flush(); err != nil {
				return "", 0, 0, err
			}
		}
	}
	if err := flush(); err != nil {
		return "", 0, 0, err
	}
	if err := w.Close(); err != nil {
		return "", 0, 0, err
	}
	logDir = w.Dir()
	err = filepath.WalkDir(logDir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				size += fi.Size()
			}
		}
		return err
	})
	return logDir, size, traces, err
}
