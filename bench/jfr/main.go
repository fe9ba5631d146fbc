// Jfr is tracebridge's benchmark of its JDK Flight Recorder reader. It is
// run by hand (see README.md), never by CI.
//
// It records the Java workload of internal/jfrtest into a large recording
// (at least 50 MB by default; -file uses an existing one), then, in the
// same run, times
//
//  1. tracebridge's reader (internal/source/jfr, in this process) decoding
//     every event into records and writing them as JSON lines
//     (internal/codec/jsonl) to /dev/null;
//  2. the same with a type filter selecting only jdk.ExecutionSample;
//  3. `jfr print --json FILE > /dev/null`, the JDK's own reader and JSON
//     writer (the baseline the aim refers to);
//  4. `jfr summary FILE`, which only frames the events and counts them;
//
// and prints the times and the ratios to the reader's time. The aim: at
// least 10 times faster than jfr print --json; the exit status is 3 when
// it is missed.
//
// Concurrency: everything runs on the main goroutine; the JVM and the jfr
// tool run as child processes.
package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/codec/jsonl"
	"github.com/tracebridge/tracebridge/internal/jfrtest"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	source "github.com/tracebridge/tracebridge/internal/source/jfr"
)

const aimRatio = 10.0 // jfr print --json time over ours

type options struct {
	file    string
	dir     string
	seconds int
	scale   int
	minSize int64
	runs    int
	keep    bool
	noPrint bool
}

func main() {
	os.Exit(benchkit.Main(os.Args[1:], parseFlags, run))
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := benchkit.NewFlags("jfr", "usage: go run ./bench/jfr [-file REC.jfr] [-seconds 20] [-scale 8] [-runs 3] [-dir DIR] [-keep]", stderr)
	fs.StringVar(&o.file, "file", "", "use this recording instead of recording the workload")
	fs.StringVar(&o.dir, "dir", "", "work directory (default: a new one under $TMPDIR)")
	fs.IntVar(&o.seconds, "seconds", 20, "how long the workload runs")
	fs.IntVar(&o.scale, "scale", 8, "worker threads per kind, and events between pauses")
	fs.Int64Var(&o.minSize, "min-size", 50e6, "warn when the recording is smaller (bytes)")
	fs.IntVar(&o.runs, "runs", 3, "runs of tracebridge's reader (the fastest counts)")
	fs.BoolVar(&o.keep, "keep", false, "keep the recording")
	fs.BoolVar(&o.noPrint, "no-print", false, "skip jfr print --json (it is slow)")
	err := fs.FlagSet.Parse(args) // arguments after the flags are ignored
	return o, err
}

type timing struct {
	name    string
	wall    time.Duration
	cpu     time.Duration
	records int64
	note    string
}

func run(ctx context.Context, o options, stdout, stderr io.Writer) int {
	tools, err := jfrtest.Find()
	if err != nil {
		fmt.Fprintln(stderr, "jfr bench:", err)
		return 1
	}
	path := o.file
	if path == "" {
		dir := o.dir
		if dir == "" {
			if dir, err = os.MkdirTemp("", "tracebridge-jfr-bench-"); err != nil {
				fmt.Fprintln(stderr, "jfr bench:", err)
				return 1
			}
			if !o.keep {
				defer os.RemoveAll(dir)
			}
		}
		path = filepath.Join(dir, "workload.jfr")
		fmt.Fprintf(stderr, "recording the workload for %d s (scale %d) into %s …\n", o.seconds, o.scale, path)
		if _, err := tools.Record(dir, jfrtest.Options{Seconds: o.seconds, Scale: o.scale, Filename: path, RunID: "bench"}); err != nil {
			fmt.Fprintln(stderr, "jfr bench:", err)
			return 1
		}
		if o.keep {
			fmt.Fprintf(stderr, "kept %s\n", path)
		}
	}
	st, err := os.Stat(path)
	if err != nil {
		fmt.Fprintln(stderr, "jfr bench:", err)
		return 1
	}
	size := st.Size()
	if size < o.minSize {
		fmt.Fprintf(stderr, "warning: the recording has %.1f MB, less than %.0f MB\n", float64(size)/1e6, float64(o.minSize)/1e6)
	}

	var results []timing
	var chunks int64
	for i, r := range []struct {
		name  string
		types []string
	}{
		{"tracebridge reader → JSON lines", nil},
		{"tracebridge reader, --type jdk.ExecutionSample", []string{"jdk.ExecutionSample"}},
	} {
		t, n, err := best(o.runs, func() (timing, int64, error) { return readJSON(ctx, path, r.types) })
		if err != nil {
			fmt.Fprintln(stderr, "jfr bench:", err)
			return 1
		}
		if i == 0 {
			chunks = n // of the whole recording
		}
		t.name = r.name
		t.note = fmt.Sprintf("best of %d", o.runs)
		results = append(results, t)
	}
	ours := results[0]
	var printT timing
	if !o.noPrint {
		fmt.Fprintln(stderr, "running jfr print --json (slow) …")
		printT, err = child(ctx, "jfr print --json FILE > /dev/null", tools.JFR, "print", "--json", path)
		if err != nil {
			fmt.Fprintln(stderr, "jfr bench:", err)
			return 1
		}
		results = append(results, printT)
	}
	summary, err := child(ctx, "jfr summary FILE", tools.JFR, "summary", path)
	if err != nil {
		fmt.Fprintln(stderr, "jfr bench:", err)
		return 1
	}
	results = append(results, summary)

	fmt.Fprintf(stdout, "recording: %s, %.1f MB, %d chunks, %d events; %s, %s/%s, %d CPUs\n\n",
		path, float64(size)/1e6, chunks, ours.records, jfrtest.JavaVersion(tools), runtime.GOOS, runtime.GOARCH, runtime.NumCPU())
	tw := benchkit.Table(stdout)
	fmt.Fprintln(tw, "\twall s\tCPU s\tMB/s\tvs reader\t")
	for _, r := range results {
		ratio := r.wall.Seconds() / ours.wall.Seconds()
		prec := 1
		if ratio < 1 {
			prec = 3
		}
		fmt.Fprintf(tw, "%s\t%.2f\t%.2f\t%.0f\t%.*f×\t %s\n", r.name, r.wall.Seconds(), r.cpu.Seconds(),
			float64(size)/1e6/r.wall.Seconds(), prec, ratio, r.note)
	}
	tw.Flush()
	if !o.noPrint {
		ratio := printT.wall.Seconds() / ours.wall.Seconds()
		fmt.Fprintf(stdout, "\njfr print --json takes %.1f× the reader's time (aim: at least %.0f×)\n", ratio, aimRatio)
		if ratio < aimRatio {
			return 3
		}
	}
	return 0
}

func best(runs int, f func() (timing, int64, error)) (timing, int64, error) {
	var all []timing
	var chunks int64
	for range max(runs, 1) {
		t, c, err := f()
		if err != nil {
			return t, 0, err
		}
		all = append(all, t)
		chunks = c
	}
	slices.SortFunc(all, func(a, b timing) int { return int(a.wall - b.wall) })
	return all[0], chunks, nil
}

// jsonWriter is the consumer: records as JSON lines into a buffered
// writer on /dev/null.
type jsonWriter struct {
	w   *bufio.Writer
	buf []byte
	n   int64
}

func (j *jsonWriter) Consume(_ context.Context, b *record.Batch) error {
	for i := range b.Records {
		j.buf = jsonl.AppendRecord(j.buf[:0], &b.Records[i])
		if _, err := j.w.Write(j.buf); err != nil {
			return err
		}
	}
	j.n += int64(b.Len())
	return nil
}

var _ pipeline.Consumer = (*jsonWriter)(nil)

func readJSON(ctx context.Context, path string, types []string) (timing, int64, error) {
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		return timing{}, 0, err
	}
	defer null.Close()
	src, err := source.New(source.Config{Path: path, Types: types}, source.Settings{OnError: func(err error) {
		fmt.Fprintln(os.Stderr, "reader:", err)
	}})
	if err != nil {
		return timing{}, 0, err
	}
	out := &jsonWriter{w: bufio.NewWriterSize(null, 1<<20)}
	runtime.GC()
	cpu0 := cpuTime()
	t0 := time.Now()
	if err := src.Run(ctx, out); err != nil {
		return timing{}, 0, err
	}
	if err := out.w.Flush(); err != nil {
		return timing{}, 0, err
	}
	wall := time.Since(t0)
	st := src.Stats()
	if st.Errors > 0 {
		return timing{}, 0, fmt.Errorf("%d errors reading %s: %s", st.Errors, path, st.LastError)
	}
	return timing{wall: wall, cpu: cpuTime() - cpu0, records: out.n}, st.Chunks, nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// child runs a command with its output to /dev/null and times it.
func child(ctx context.Context, name, bin string, args ...string) (timing, error) {
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr bytesTail
	cmd.Stderr = &stderr
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return timing{}, fmt.Errorf("%s: %v: %s", name, err, stderr.String())
	}
	wall := time.Since(t0)
	cpu, _ := benchkit.Usage(cmd.ProcessState)
	return timing{name: name, wall: wall, cpu: cpu}, nil
}

// bytesTail keeps the last 4 KiB written to it.
type bytesTail struct{ b []byte }

func (t *bytesTail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

func (t *bytesTail) String() string { return string(t.b) }
