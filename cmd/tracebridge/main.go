// Command tracebridge receives monitoring records and traces from
// programs in any language (Kieker's and the Kieker Data Bridge's formats,
// brokers, OTLP, zorka, JFR), writes Kieker-compatible logs, assembles and
// stores traces, and serves them over an HTTP API, a web UI and a live
// stream; its other commands read, convert, replay, analyse and query what
// it wrote.
//
// This package only parses the command line, calls the packages under
// internal/ that do the work, and maps their failures to exit codes. The
// subcommands are one table (commands), from which the top-level help is
// generated.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Exit codes. 1–4 are the Kieker Data Bridge's: 1 mapping file,
// 2 configuration, 3 communication, 4 command line. Commands that read data
// (cat, convert) exit with 1 when the data is malformed.
const (
	exitOK      = 0
	exitData    = 1
	exitMapping = 1
	exitConfig  = 2
	exitComm    = 3
	exitUsage   = 4
	// exitInterrupted: Ctrl-C or SIGTERM stopped a command that had not
	// finished (128 + SIGINT, as shells report it).
	exitInterrupted = 130
)

// command is one subcommand: its name, the one line the top-level help
// says of it, and the function that parses its flags and runs it.
type command struct {
	name, summary string
	run           func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands is the one list of subcommands; run dispatches and topUsage
// describes from it, so the two cannot disagree.
var commands = []command{
	{"serve", "run the bridge: receive records and traces; log, store and serve them", cmdServe},
	{"cat", "print the records of Kieker logs or JFR recordings (text or JSON)", cmdCat},
	{"convert", "rewrite a Kieker log (format, compression), or a JFR recording as one", cmdConvert},
	{"replay", "send a Kieker log to a bridge (Kieker TCP or KDB), at a rate if asked", cmdReplay},
	{"split", "cut huge traces into linked parts at component boundaries, or merge", cmdSplit},
	{"traces", "assemble and print the traces of Kieker logs as call trees", cmdTraces},
	{"query", "search the trace store (filters, text, EQL; a trace's tree, pivots)", cmdQuery},
	{"store", "check or rebuild a trace store", cmdStore},
	{"hosts", "manage the host table: who may send, secrets, bounds", cmdHosts},
	{"token", "make an API token for writes over the HTTP API, and its hash", cmdToken},
	{"analyze", "Kieker's analyses: dependency graphs, call trees, stats; flame graphs", cmdAnalyze},
	{"tail", "follow a bridge's live stream, or replay it from a point in the past", cmdTail},
	{"dump", "write a window of a bridge's stream as a Kieker log or OTLP JSON", cmdDump},
	{"control", "change what a running bridge records: enable, disable, sample, probes", cmdControl},
	{"cluster", "show a cluster: nodes, partition owners and lag, stream, store", cmdCluster},
	{"gen", "write record types and encoders for C, Go, Python or Perl from IRL", cmdGen},
	{"version", "print the version", cmdVersion},
}

// summaryColumn is where the summaries of the top-level help start; a
// summary fits the rest of an 80-column line.
const summaryColumn = 11

// topUsage is the top-level help: what tracebridge is, then one line per
// command.
func topUsage() string {
	var b strings.Builder
	b.WriteString("tracebridge: a monitoring-data bridge and trace collector for programs in\nany language\n\n")
	b.WriteString("usage: tracebridge <command> [flags] [arguments]\n\ncommands:\n")
	for _, c := range commands {
		b.WriteString(wrap("  "+c.name, summaryColumn, c.summary))
	}
	b.WriteString("\nRun 'tracebridge <command> -h' for a command's flags.\n")
	return b.String()
}

func cmdVersion(_ context.Context, _ []string, stdout, _ io.Writer) error {
	fmt.Fprintln(stdout, "tracebridge", version)
	return nil
}

// version is set at build time with -ldflags "-X main.version=…".
var version = "0.1.0-dev"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	// The first signal asks for a clean stop; a second one ends the
	// program at once (the signals' default action; serve says first what
	// its sinks had not delivered: onSecondSignal).
	context.AfterFunc(ctx, stop)
	// TRACEBRIDGE_CPUPROFILE=FILE writes a Go CPU profile of the run (for
	// performance work: `go tool pprof tracebridge FILE`).
	if p := os.Getenv("TRACEBRIDGE_CPUPROFILE"); p != "" {
		if f, err := os.Create(p); err == nil {
			pprof.StartCPUProfile(f)
			defer f.Close()
		}
	}
	// TRACEBRIDGE_PPROF=HOST:PORT serves the profiles while it runs
	// (pprof.go).
	if a := os.Getenv(pprofEnv); a != "" {
		if err := servePprof(a, os.Stderr); err != nil {
			fmt.Fprintln(os.Stderr, "tracebridge:", err)
			os.Exit(2)
		}
	}
	// TRACEBRIDGE_MEMPROFILE=FILE writes a Go heap profile when the run
	// ends (its allocations: `go tool pprof -sample_index=alloc_space`;
	// what is live then: `-sample_index=inuse_space`). FILE.peak is the
	// heap in use at the highest point seen (sampled every quarter
	// second).
	memProfile := os.Getenv("TRACEBRIDGE_MEMPROFILE")
	if memProfile != "" {
		go peakHeapProfile(memProfile + ".peak")
	}
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	pprof.StopCPUProfile()
	if memProfile != "" {
		if f, err := os.Create(memProfile); err == nil {
			pprof.Lookup("allocs").WriteTo(f, 0)
			f.Close()
		}
	}
	os.Exit(code)
}

// onSecondSignal makes a second SIGINT or SIGTERM, once ctx is done (main
// cancels it at the first), call last and then end the program at once, as
// the signal's default action would have; stop undoes it.
func onSecondSignal(ctx context.Context, last func()) (stop func()) {
	ch := make(chan os.Signal, 1)
	var mu sync.Mutex
	stopped := false
	unwatch := context.AfterFunc(ctx, func() {
		mu.Lock()
		defer mu.Unlock()
		if !stopped {
			signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		}
	})
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-ch:
			last()
			signal.Reset(os.Interrupt, syscall.SIGTERM)
			if p, err := os.FindProcess(os.Getpid()); err == nil && p.Signal(sig) == nil {
				time.Sleep(time.Second) // the signal ends the program
			}
			os.Exit(exitInterrupted)
		case <-done:
		}
	}()
	return func() {
		unwatch()
		mu.Lock()
		stopped = true
		signal.Stop(ch)
		mu.Unlock()
		close(done)
	}
}

// exitError carries an exit code with its error.
type exitError struct {
	code int
	err  error
}

func (e exitError) Error() string { return e.err.Error() }
func (e exitError) Unwrap() error { return e.err }

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return exitError{code, err}
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage())
		return exitUsage
	}
	name := args[0]
	switch name {
	case "--version", "-version":
		name = "version"
	case "help", "-h", "--help", "-help":
		fmt.Fprint(stdout, topUsage())
		return exitOK
	}
	for _, c := range commands {
		if c.name == name {
			err := c.run(ctx, args[1:], stdout, stderr)
			var help helpRequest
			if errors.As(err, &help) {
				io.WriteString(stdout, help.text)
				return exitOK
			}
			return report(err, stderr)
		}
	}
	fmt.Fprintf(stderr, "tracebridge: unknown command %q\n\n%s", args[0], topUsage())
	return exitUsage
}

func report(err error, stderr io.Writer) int {
	if err == nil {
		return exitOK
	}
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var ue usageError
	if errors.As(err, &ue) {
		fmt.Fprintf(stderr, "tracebridge: %v\n", err)
		return exitUsage
	}
	fmt.Fprintf(stderr, "tracebridge: %v\n", err)
	var ee exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitData
}

// peakHeapProfile writes the heap profile to path each time the heap in
// use grows a tenth beyond the last profile's (TRACEBRIDGE_MEMPROFILE).
func peakHeapProfile(path string) {
	var last uint64
	for range time.Tick(250 * time.Millisecond) {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		if m.HeapInuse < last+last/10 {
			continue
		}
		last = m.HeapInuse
		if f, err := os.Create(path); err == nil {
			pprof.Lookup("heap").WriteTo(f, 0)
			f.Close()
		}
	}
}
