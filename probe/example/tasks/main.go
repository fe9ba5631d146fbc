// Tasks shows invocation identifiers (probe.InvocationHeader,
// TraceOptions.Remote, and the InvocationRecords of Fork): work handed to
// a pool of goroutines that outlive every trace, and work done by another
// process on behalf of a call, end up in the caller's call tree.
//
//	go run ./probe/example/tasks -mode pool -jobs 3       # a worker pool fed by a channel
//	go run ./probe/example/tasks -mode caller -requests 2 # each request calls a second process
//
// In pool mode one trace, Dispatcher.Run, submits -jobs jobs to ONE worker
// goroutine started before the trace (a pool reuses its goroutines): each
// Submit call hands the job a child trace (probe.Fork) with the job; the
// worker runs Worker.Work → Worker.Step in it and ends it.
//
// In caller mode each request is a root trace Client.Call that runs this
// program again as a callee (another process, with -node naming another
// host), passing probe.InvocationHeader in the environment variable
// TRACEBRIDGE_INVOCATION; the callee starts its trace with
// TraceOptions{Remote: header} and runs Server.Handle → Server.Lookup.
//
// Both print the path of every call they make across goroutines and
// processes ("path OP | OP | …@NODE"), and last what the probe did
// ("probe: sent=… dropped=…", one line per process). The bridge address is
// -addr (default: TRACEBRIDGE_HOST/TRACEBRIDGE_PORT, else 127.0.0.1:10133).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/tracebridge/tracebridge/probe"
)

var (
	opRun    = probe.NewOp("func (*main.Dispatcher) Run(context.Context, int)", "main.Dispatcher")
	opSubmit = probe.NewOp("func (*main.Dispatcher) Submit(context.Context, int)", "main.Dispatcher")
	opWork   = probe.NewOp("func (*main.Worker) Work(context.Context, int)", "main.Worker")
	opStep   = probe.NewOp("func (*main.Worker) Step(context.Context)", "main.Worker")
	opCall   = probe.NewOp("func (*main.Client) Call(context.Context, int) error", "main.Client")
	opHandle = probe.NewOp("func (*main.Server) Handle(context.Context)", "main.Server")
	opLookup = probe.NewOp("func (*main.Server) Lookup(context.Context)", "main.Server")
)

// EnvInvocation is the variable that carries the caller's header to the
// callee.
const EnvInvocation = "TRACEBRIDGE_INVOCATION"

func main() {
	mode := flag.String("mode", "pool", "pool, caller or callee")
	addr := flag.String("addr", "", "the bridge's kieker-tcp address")
	node := flag.String("node", "", "the hostname to report (default: os.Hostname)")
	jobs := flag.Int("jobs", 3, "pool: jobs to submit")
	requests := flag.Int("requests", 2, "caller: requests")
	prefix := flag.String("prefix", "", "callee: the caller's path")
	flag.Parse()

	cfg, err := probe.ConfigFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if *addr != "" {
		cfg.Addr = *addr
	}
	if *node != "" {
		cfg.Hostname = *node
	}
	w, err := probe.NewWriter(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	node0 := cfg.Hostname
	if node0 == "" {
		node0, _ = os.Hostname()
	}
	out := &printer{node: node0}
	switch *mode {
	case "pool":
		pool(w, out, *jobs)
	case "caller":
		caller(w, out, *requests, *addr)
	case "callee":
		callee(w, out, os.Getenv(EnvInvocation), *prefix)
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", *mode)
		os.Exit(2)
	}
	err = w.Close()
	st := w.Stats()
	out.printf("probe: sent=%d dropped=%d\n", st.Sent, st.Dropped)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// printer writes the program's account, one line at a time.
type printer struct {
	mu   sync.Mutex
	node string
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Printf(format, args...)
	os.Stdout.Sync()
}

// call notes a call of op below path and returns its path.
func (p *printer) call(path string, op probe.Op) string {
	if path != "" {
		path += " | "
	}
	path += op.Operation()
	p.printf("path %s@%s\n", path, p.node)
	return path
}

// job is the work a worker runs: its trace (a child of the Submit call)
// and, for the account, the path of the Submit call.
type job struct {
	ctx  context.Context
	n    int
	path string
}

// pool runs one trace that submits jobs to a worker goroutine started
// before it.
func pool(w *probe.Writer, out *printer, jobs int) {
	queue := make(chan job)
	var done sync.WaitGroup
	done.Add(1)
	go func() { // the pool: one goroutine, reused for every job
		defer done.Done()
		for j := range queue {
			work(j, out)
		}
	}()
	t := w.StartTrace()
	ctx := probe.WithTrace(context.Background(), t)
	run := t.EnterOp(opRun)
	path := out.call("", opRun)
	for n := range jobs {
		submit := t.EnterOp(opSubmit)
		sp := out.call(path, opSubmit)
		queue <- job{ctx: probe.Fork(ctx), n: n, path: sp} // the job's trace is created here
		submit.Exit()
	}
	close(queue)
	done.Wait()
	run.Exit()
}

// work runs a job on the pool's goroutine, in the job's trace.
func work(j job, out *printer) {
	t := probe.FromContext(j.ctx)
	defer t.End()
	c := t.EnterOp(opWork)
	path := out.call(j.path, opWork)
	t.EnterOp(opStep).Exit()
	out.call(path, opStep)
	c.Exit()
}

// caller makes requests, each a call to another process.
func caller(w *probe.Writer, out *printer, requests int, addr string) {
	for range requests {
		t := w.StartTrace()
		c := t.EnterOp(opCall)
		path := out.call("", opCall)
		args := []string{"-mode", "callee", "-node", out.node + "-callee", "-prefix", path}
		if addr != "" {
			args = append(args, "-addr", addr)
		}
		cmd := exec.Command(os.Args[0], args...)
		cmd.Env = append(os.Environ(), EnvInvocation+"="+t.InvocationHeader())
		var b strings.Builder
		cmd.Stdout, cmd.Stderr = &b, os.Stderr
		err := cmd.Run()
		out.printf("%s", b.String())
		if err != nil {
			fmt.Fprintln(os.Stderr, "callee:", err)
			os.Exit(1)
		}
		c.Exit()
	}
}

// callee handles one request on behalf of the caller whose header came
// with it.
func callee(w *probe.Writer, out *printer, header, prefix string) {
	t := w.Start(probe.TraceOptions{Remote: header})
	defer t.End()
	h := t.EnterOp(opHandle)
	path := out.call(prefix, opHandle)
	t.EnterOp(opLookup).Exit()
	out.call(path, opLookup)
	h.Exit()
}
