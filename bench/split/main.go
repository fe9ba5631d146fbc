// Split is tracebridge's benchmark of `tracebridge split` on huge traces.
// It is run by hand (see README.md), never by CI.
//
// For each size it generates a Kieker binary log holding a single trace of
// that many bytes, runs `tracebridge split --boundary SPEC IN OUT` on it
// as a child process, and prints the input rate (MB/s of input over wall
// time), the CPU time and the child's peak RSS. As a baseline measured in
// the same run it copies the input's data files into one file (read and
// write with 1 MiB buffers, no splitting), and prints the split's rate as
// a ratio of the copy's: the disk and page cache bound both. Generated logs and the
// split output are deleted after each size unless -keep is given. With
// -verify it also runs `tracebridge split --merge` on the output and checks
// that the merged log has the generated number of records.
//
// Concurrency: everything runs on the main goroutine; tracebridge runs as
// a child process.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
)

// The aims: the rate of the largest input, and peak RSS of the largest
// input over that of the smallest.
const (
	aimRate     = 200.0 // MB/s
	aimRSSRatio = 1.10
)

type options struct {
	sizes    []int64
	bin      string
	dir      string
	boundary string
	keep     bool
	verify   bool
}

func main() {
	os.Exit(benchkit.Main(os.Args[1:], parseFlags, run))
}

func parseFlags(args []string, stderr io.Writer) (*options, error) {
	fs := benchkit.NewFlags("split", "usage: go run ./bench/split [-sizes 200MB,2GB] [-boundary SPEC] [-bin PATH] [-dir DIR] [-keep] [-verify]", stderr)
	var o options
	sizes := fs.String("sizes", "200MB,2GB", "comma-separated input sizes (kB, MB, GB: powers of 1000)")
	fs.StringVar(&o.bin, "bin", "", "tracebridge binary (default: go build ./cmd/tracebridge into the work directory)")
	fs.StringVar(&o.dir, "dir", "", "work directory for the generated logs (default: a new one under $TMPDIR)")
	fs.StringVar(&o.boundary, "boundary", "package:3", "boundary spec for the split")
	fs.BoolVar(&o.keep, "keep", false, "keep the generated and split logs")
	fs.BoolVar(&o.verify, "verify", false, "merge the split log again and check its record count")
	if err := fs.FlagSet.Parse(args); err != nil { // not fs.Parse: split stops at the first problem
		return nil, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "split: unexpected arguments %q\n", fs.Args())
		return nil, errors.New("usage")
	}
	for _, s := range strings.Split(*sizes, ",") {
		n, err := parseSize(strings.TrimSpace(s))
		if err != nil {
			fmt.Fprintf(stderr, "split: -sizes: %v\n", err)
			return nil, err
		}
		o.sizes = append(o.sizes, n)
	}
	return &o, nil
}

func parseSize(s string) (int64, error) {
	mult := int64(1)
	for _, u := range []struct {
		suffix string
		mult   int64
	}{{"GB", 1e9}, {"MB", 1e6}, {"kB", 1e3}, {"B", 1}} {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		return 0, fmt.Errorf("size %q: want a positive number with kB, MB or GB", s)
	}
	return int64(f * float64(mult)), nil
}

type result struct {
	size     int64
	gen      *generated
	wall     time.Duration
	copyWall time.Duration // the raw copy baseline
	cpu      time.Duration
	peakRSS  int64
	partial  int64
	outRecs  int64
	verified string
}

func run(ctx context.Context, o *options, stdout, stderr io.Writer) int {
	dir := o.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "tracebridge-split-bench-")
		if err != nil {
			fmt.Fprintln(stderr, "split:", err)
			return 1
		}
		dir = d
		if !o.keep {
			defer os.RemoveAll(dir)
		}
	}
	bin := o.bin
	if bin == "" {
		b, err := benchkit.Build(ctx, dir)
		if err != nil {
			fmt.Fprintln(stderr, "split: building tracebridge:", err)
			return 1
		}
		bin = b
	}
	var results []result
	for _, size := range o.sizes {
		r, err := runSize(ctx, o, bin, dir, size, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "split: %s: %v\n", formatSize(size), err)
			return 1
		}
		results = append(results, *r)
	}
	return reportResults(stdout, o.boundary, results)
}

func runSize(ctx context.Context, o *options, bin, dir string, size int64, stderr io.Writer) (*result, error) {
	work := filepath.Join(dir, formatSize(size))
	if !o.keep {
		defer os.RemoveAll(work)
	}
	fmt.Fprintf(stderr, "split: generating a %s single-trace log…\n", formatSize(size))
	g, err := generate(filepath.Join(work, "in"), size)
	if err != nil {
		return nil, err
	}
	benchkit.SettleDisk()
	fmt.Fprintf(stderr, "split: %d records (%s); copying them as a baseline…\n", g.records, formatSize(g.bytes))
	copyWall, err := copyBaseline(g.dir, filepath.Join(work, "copy"))
	if err != nil {
		return nil, fmt.Errorf("baseline copy: %w", err)
	}
	benchkit.SettleDisk()
	fmt.Fprintf(stderr, "split: %d records (%s); splitting with --boundary %s…\n", g.records, formatSize(g.bytes), o.boundary)
	out := filepath.Join(work, "out")
	cmd := exec.CommandContext(ctx, bin, "split", "--boundary", o.boundary, g.dir, out)
	var serr strings.Builder
	cmd.Stderr = &serr
	var sout strings.Builder
	cmd.Stdout = &sout
	start := time.Now()
	err = cmd.Run()
	wall := time.Since(start)
	if err != nil {
		return nil, fmt.Errorf("tracebridge split: %v\n%s", err, serr.String())
	}
	r := &result{size: size, gen: g, wall: wall, copyWall: copyWall}
	r.cpu, r.peakRSS = benchkit.Usage(cmd.ProcessState)
	m := summaryRE.FindStringSubmatch(serr.String())
	if m == nil {
		return nil, fmt.Errorf("no summary in tracebridge's output:\n%s", serr.String())
	}
	r.partial, _ = strconv.ParseInt(m[1], 10, 64)
	in, _ := strconv.ParseInt(m[2], 10, 64)
	r.outRecs, _ = strconv.ParseInt(m[3], 10, 64)
	if in != g.records {
		return nil, fmt.Errorf("tracebridge read %d records, %d were generated", in, g.records)
	}
	if strings.Contains(serr.String(), "malformed") {
		return nil, fmt.Errorf("the generated trace was reported malformed:\n%s", serr.String())
	}
	if o.verify {
		split := strings.TrimSpace(sout.String())
		fmt.Fprintf(stderr, "split: merging %s back…\n", split)
		mcmd := exec.CommandContext(ctx, bin, "split", "--merge", split, filepath.Join(work, "merged"))
		var merr strings.Builder
		mcmd.Stderr = &merr
		if err := mcmd.Run(); err != nil {
			return nil, fmt.Errorf("tracebridge split --merge: %v\n%s", err, merr.String())
		}
		mm := recordsRE.FindStringSubmatch(merr.String())
		if mm == nil || mm[2] != strconv.FormatInt(g.records, 10) {
			return nil, fmt.Errorf("merged log: %q, want %d records", merr.String(), g.records)
		}
		r.verified = "merged back: " + mm[2] + " records"
	}
	return r, nil
}

// copyBaseline copies the data files of the log directory in into the
// file out (1 MiB reads and writes, each through the page cache as the
// split's are; no copy_file_range shortcut), syncs nothing, removes out and
// returns the time the copy took.
func copyBaseline(in, out string) (time.Duration, error) {
	files, err := filepath.Glob(filepath.Join(in, "*.bin"))
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("no data files in %s (%v)", in, err)
	}
	buf := make([]byte, 1<<20)
	start := time.Now()
	w, err := os.Create(out)
	if err != nil {
		return 0, err
	}
	defer os.Remove(out)
	for _, name := range files {
		r, err := os.Open(name)
		if err != nil {
			w.Close()
			return 0, err
		}
		// Plain Reader and Writer: io.CopyBuffer must not take the
		// kernel's file-to-file shortcut.
		_, err = io.CopyBuffer(struct{ io.Writer }{w}, struct{ io.Reader }{r}, buf)
		r.Close()
		if err != nil {
			w.Close()
			return 0, err
		}
	}
	if err := w.Close(); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

var (
	summaryRE = regexp.MustCompile(`\((\d+) cut\)[^\n]*\n[^\n]*?(\d+) records in, (\d+) out`)
	recordsRE = regexp.MustCompile(`(\d+) records in, (\d+) out`)
)

func reportResults(w io.Writer, boundary string, rs []result) int {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "input\trecords\tpartial traces\trecords out\twall s\tMB/s\tcopy MB/s\tsplit/copy\tCPU s\tMB/CPU-s\tpeak RSS MiB\t\n")
	for _, r := range rs {
		mb := float64(r.gen.bytes) / 1e6
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%.1f\t%.1f\t%.3f\t%.2f\t%.1f\t%.1f\t\n",
			formatSize(r.gen.bytes), r.gen.records, r.partial, r.outRecs, r.wall.Seconds(),
			mb/r.wall.Seconds(), mb/r.copyWall.Seconds(), r.copyWall.Seconds()/r.wall.Seconds(),
			r.cpu.Seconds(), mb/r.cpu.Seconds(), float64(r.peakRSS)/(1<<20))
	}
	tw.Flush()
	for _, r := range rs {
		if r.verified != "" {
			fmt.Fprintf(w, "%s: %s\n", formatSize(r.gen.bytes), r.verified)
		}
	}
	fmt.Fprintf(w, "boundary %s; aim: ≥ %.0f MB/s, peak RSS of the largest input within %.0f%% of the smallest's\n", boundary, aimRate, (aimRSSRatio-1)*100)
	if len(rs) == 0 {
		return 0
	}
	code := 0
	last := rs[len(rs)-1]
	rate := float64(last.gen.bytes) / 1e6 / last.wall.Seconds()
	verdict := "met"
	if rate < aimRate {
		verdict, code = "NOT met", 3
	}
	fmt.Fprintf(w, "rate at %s: %.1f MB/s (%s)\n", formatSize(last.gen.bytes), rate, verdict)
	if len(rs) > 1 && rs[0].peakRSS > 0 {
		ratio := float64(last.peakRSS) / float64(rs[0].peakRSS)
		verdict = "met"
		if ratio > aimRSSRatio {
			verdict, code = "NOT met", 3
		}
		fmt.Fprintf(w, "peak RSS %s / %s: %.3f (%s)\n", formatSize(last.gen.bytes), formatSize(rs[0].gen.bytes), ratio, verdict)
	}
	return code
}

func formatSize(n int64) string {
	switch {
	case n >= 1e9:
		return strconv.FormatFloat(float64(n)/1e9, 'f', 2, 64) + "GB"
	case n >= 1e6:
		return strconv.FormatFloat(float64(n)/1e6, 'f', 0, 64) + "MB"
	}
	return strconv.FormatInt(n, 10) + "B"
}
