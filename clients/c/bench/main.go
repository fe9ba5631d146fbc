// Command bench measures the overhead of the C client's probes,
// MooBench-style: a recursive method of depth D called N times, (a)
// without instrumentation, (b) compiled with -finstrument-functions but
// switched off (TRACEBRIDGE_ENABLED=0), (c) instrumented and sending to a
// running bridge, automatically (-finstrument-functions) and by hand
// (tb_before_sig/tb_after_sig, and tb_before/tb_after with strings).
//
// It builds the programs with make and the bridge with go build, starts
// `tracebridge serve` with a Kieker TCP receiver and a binary Kieker log,
// runs every variant -runs times (interleaved, so load drifts hit all
// alike), prints the median ns per top-level call and per instrumented
// invocation, the overhead per invocation against (a) in wall-clock time
// and in the calling thread's CPU time (which leaves out the time the
// program waited for a CPU while the writer thread and the bridge ran: on
// a machine with few cores they compete with it), and checks that the log
// holds every record the programs sent.
//
//	go run ./clients/c/bench                       # from the repository root
//	go run ./clients/c/bench -calls 50000 -runs 7
//
// By default the ring buffer is sized to hold a whole measured run, so the
// enabled variants measure the probe cost with every record delivered;
// the "default ring" row shows the same program with the default 65536
// records, where a bridge that cannot keep up makes probes drop (and the
// drop path is cheaper).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	srclog "github.com/tracebridge/tracebridge/internal/source/kiekerlog"
)

type variant struct {
	name    string
	program string
	args    []string
	env     []string
	bridge  bool // sends to the bridge
}

type sample struct {
	nsPerCall     float64 // wall clock
	cpuPerCall    float64 // the calling thread's CPU time
	sent, dropped int64   // of the measured part
	total         int64   // records sent, warm-up included
}

func main() {
	calls := flag.Int("calls", 50000, "top-level calls per measured run")
	depth := flag.Int("depth", 10, "recursion depth of the monitored method")
	runs := flag.Int("runs", 5, "runs of each variant (the median is reported)")
	dir := flag.String("dir", "", "the clients/c directory (default: found from the working directory)")
	flag.Parse()
	if err := run(*calls, *depth, *runs, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func findDir(dir string) (string, error) {
	if dir != "" {
		return dir, nil
	}
	for _, d := range []string{".", "clients/c", "../clients/c", ".."} {
		if _, err := os.Stat(filepath.Join(d, "include", "tracebridge.h")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("cannot find clients/c; run from the repository root or give -dir")
}

func run(calls, depth, runs int, dir string) error {
	src, err := findDir(dir)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "tracebridge-cbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	build := filepath.Join(tmp, "build")
	if out, err := exec.Command("make", "-s", "-C", src, "O="+build, "bench").CombinedOutput(); err != nil {
		return fmt.Errorf("make: %v\n%s", err, out)
	}
	ctx := context.Background()
	tb, err := benchkit.Build(ctx, tmp)
	if err != nil {
		return err
	}
	br, err := benchkit.Start(ctx, tb, tmp, "    type: kieker-tcp\n    listen: \"127.0.0.1:0\"\n")
	if err != nil {
		return err
	}
	defer br.Kill()
	_, port, err := net.SplitHostPort(br.Addr)
	if err != nil {
		return fmt.Errorf("the bridge's address %q: %w", br.Addr, err)
	}

	records := calls * depth * 2
	ring := 1024
	for ring < records+records/10 && ring < 1<<24 {
		ring <<= 1
	}
	bufEnv := "TRACEBRIDGE_BUFFER=" + strconv.Itoa(ring)
	n, d := strconv.Itoa(calls), strconv.Itoa(depth)
	variants := []variant{
		{name: "(a) no instrumentation", program: "moobench_plain", args: []string{n, d}},
		{name: "(b) -finstrument-functions, switched off", program: "moobench_auto", args: []string{n, d}, env: []string{"TRACEBRIDGE_ENABLED=0"}},
		{name: "(c) -finstrument-functions, to the bridge", program: "moobench_auto", args: []string{n, d}, env: []string{bufEnv}, bridge: true},
		{name: "(c) manual tb_before_sig/tb_after_sig", program: "moobench_manual", args: []string{n, d, "sig"}, env: []string{bufEnv}, bridge: true},
		{name: "(c) manual tb_before/tb_after (strings)", program: "moobench_manual", args: []string{n, d, "str"}, env: []string{bufEnv}, bridge: true},
		{name: "(c) -finstrument-functions, default ring", program: "moobench_auto", args: []string{n, d}, bridge: true},
	}
	samples := make([][]sample, len(variants))
	var sentTotal int64
	for r := 0; r < runs; r++ {
		for i, v := range variants {
			s, err := runVariant(build, v, port)
			if err != nil {
				return fmt.Errorf("%s: %w", v.name, err)
			}
			samples[i] = append(samples[i], s)
			sentTotal += s.total
		}
	}
	if _, err := br.Stop(); err != nil {
		return err
	}
	logged, err := countEvents(br.LogDir)
	if err != nil {
		return err
	}

	fmt.Printf("MooBench-style overhead: %d calls of a method recursing to depth %d (%d instrumented invocations per run), median of %d runs, %d CPUs\n",
		calls, depth, calls*depth, runs, runtime.NumCPU())
	fmt.Printf("ring for the (c) rows: %d records (TRACEBRIDGE_BUFFER)\n\n", ring)
	fmt.Printf("%-44s %9s %9s %12s %12s %9s\n", "variant", "ns/call", "ns/inv", "overhead/inv", "CPU ovh/inv", "dropped")
	base := median(samples[0], false)
	baseCPU := median(samples[0], true)
	for i, v := range variants {
		m := median(samples[i], false)
		c := median(samples[i], true)
		drop := "-"
		if v.bridge {
			total := float64(m.sent + m.dropped)
			drop = fmt.Sprintf("%.1f%%", 100*float64(m.dropped)/max(total, 1))
		}
		inv := m.nsPerCall / float64(depth)
		fmt.Printf("%-44s %9.1f %9.2f %12.2f %12.2f %9s\n", v.name, m.nsPerCall, inv,
			inv-base.nsPerCall/float64(depth), (c.cpuPerCall-baseCPU.cpuPerCall)/float64(depth), drop)
	}
	fmt.Printf("\nthe bridge logged %d trace records; the programs counted %d sent\n", logged, sentTotal)
	if logged != sentTotal {
		return fmt.Errorf("the log holds %d records, the programs sent %d", logged, sentTotal)
	}
	return nil
}

// median returns the sample with the median wall-clock (or CPU) time.
func median(s []sample, cpu bool) sample {
	c := append([]sample(nil), s...)
	key := func(x sample) float64 {
		if cpu {
			return x.cpuPerCall
		}
		return x.nsPerCall
	}
	sort.Slice(c, func(i, j int) bool { return key(c[i]) < key(c[j]) })
	return c[len(c)/2]
}

var resultLine = regexp.MustCompile(`ns_per_call=([0-9.]+) .*cpu_ns_per_call=([0-9.]+) .* sent=(\d+) dropped=(\d+) total_sent=(\d+)`)

func runVariant(build string, v variant, port string) (sample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(build, v.program), v.args...)
	cmd.Env = append(os.Environ(), "TRACEBRIDGE_PORT="+port, "TRACEBRIDGE_QUIET=1")
	cmd.Env = append(cmd.Env, v.env...)
	out, err := cmd.Output()
	if err != nil {
		return sample{}, fmt.Errorf("%v\n%s", err, out)
	}
	m := resultLine.FindSubmatch(out)
	if m == nil {
		return sample{}, fmt.Errorf("no result in %q", out)
	}
	var s sample
	s.nsPerCall, _ = strconv.ParseFloat(string(m[1]), 64)
	s.cpuPerCall, _ = strconv.ParseFloat(string(m[2]), 64)
	s.sent, _ = strconv.ParseInt(string(m[3]), 10, 64)
	s.dropped, _ = strconv.ParseInt(string(m[4]), 10, 64)
	s.total, _ = strconv.ParseInt(string(m[5]), 10, 64)
	return s, nil
}

// countEvents counts the trace records (metadata and operation events) in
// the bridge's log.
func countEvents(logDir string) (int64, error) {
	r, err := srclog.Open(logDir, srclog.Options{})
	if err != nil {
		return 0, err
	}
	var n int64
	err = r.Run(context.Background(), pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
		for i := range b.Records {
			if b.Records[i].Type.Name != record.KiekerMetadataRecord {
				n++
			}
		}
		return nil
	}))
	return n, err
}
