package main

import "github.com/tracebridge/tracebridge/probe"

// The monitored method of MooBench: a recursion of the given depth with no
// work of its own (MooBench's method time 0).
var op = probe.NewOp("public long moobench.application.MonitoredClassSimple.monitoredMethod(long, int)",
	"moobench.application.MonitoredClassSimple")

// plain is the uninstrumented method.
//
//go:noinline
func plain(depth int) int64 {
	r := int64(1)
	if depth > 1 {
		r = plain(depth-1) + 1
	}
	return r
}

// monitored is the same method with a probe at entry and exit.
//
//go:noinline
func monitored(t *probe.Trace, depth int) int64 {
	t.BeforeOp(op)
	r := int64(1)
	if depth > 1 {
		r = monitored(t, depth-1) + 1
	}
	t.AfterOp(op)
	return r
}

// sink keeps the results, so that no call can be left out.
var sink int64

// callPlain calls plain n times.
func callPlain(n, depth int) {
	for range n {
		sink += plain(depth)
	}
}

// callMonitored calls monitored n times, each call its own trace (as
// Kieker's probes start a trace when the outermost monitored method is
// entered). With the probes switched off StartTrace returns nil and every
// probe is a nil check and a load.
func callMonitored(w *probe.Writer, n, depth int) {
	for range n {
		t := w.StartTrace()
		sink += monitored(t, depth)
	}
}
