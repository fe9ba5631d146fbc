package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
)

// pprofEnv is the environment variable with which tracebridge (and the
// sink-less bridge) serves Go's profiles at /debug/pprof/ on an address.
const pprofEnv = "TRACEBRIDGE_PPROF"

// startBridge starts tracebridge serve with both OTLP receivers and its
// sinks: "store" (the trace store, as the embedded default's; traces
// assembled from the spans), "log" (a binary Kieker log, spans as
// OperationExecutionRecords after assembly) or "default" (both, as the
// embedded default configures them: the binary Kieker log, then the
// store). With pprof set it serves
// its profiles there; workers ≥ 0 sets traces: {workers: N} (the
// assembly workers; the default is one per core).
func startBridge(ctx context.Context, name, bin, tmp, sink, pprof string, workers int) (*target, error) {
	dir := filepath.Join(tmp, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	sinks := fmt.Sprintf("  - name: log\n    type: kieker-log\n    format: binary\n    path: %q\n", filepath.Join(dir, "log"))
	switch sink {
	case "store":
		sinks = "  - name: store\n    type: store\n"
	case "default":
		sinks += "  - name: store\n    type: store\n"
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
%s`, dir, sinks)
	if workers >= 0 {
		cfg += fmt.Sprintf("traces:\n  workers: %d\n", workers)
	}
	path := filepath.Join(dir, "tracebridge.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	var env []string
	if pprof != "" {
		env = []string{pprofEnv + "=" + pprof}
	}
	srv, err := startServerEnv(ctx, name, bin, env, "serve", "-c", path)
	if err != nil {
		return nil, err
	}
	t := newTarget(name, srv)
	t.data, t.pprof = dir, pprof
	timeout := time.After(time.Minute)
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
			return nil, fmt.Errorf("%s: tracebridge serve exited at start (%v): %s", name, srv.waitErr, srv.stderr)
		case <-timeout:
			srv.stop()
			return nil, fmt.Errorf("%s: tracebridge serve not ready within a minute: %s", name, srv.stderr)
		}
	}
	if t.grpc == "" || t.http == "" || t.metrics == "" {
		srv.stop()
		return nil, errors.New("tracebridge serve did not print its receivers' and metrics' addresses (are the OTLP receivers in serve.DefaultFactories?)")
	}
	// Taken: consumed by the sink as part of an assembled trace, which
	// happens once the trace window (2 s) after a trace's last span has
	// passed, so a phase counts assembly and the sink's CPU too. With
	// both sinks a span is taken once both have consumed it.
	names := []string{sink}
	if sink == "default" {
		names = []string{"log", "store"}
	}
	t.taken = func() (int64, error) {
		taken := int64(-1)
		for _, n := range names {
			v, _, err := benchkit.Metric(t.metrics, "tracebridge_sink_trace_spans_total", fmt.Sprintf("sink=%q", n))
			if err != nil {
				return 0, err
			}
			if taken < 0 || int64(v) < taken {
				taken = int64(v)
			}
		}
		return taken, nil
	}
	return t, nil
}
