package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// jaegerConfig is Jaeger v2's configuration as the bench runs it: the
// OTLP receiver on both protocols (gRPC taking messages as large as
// tracebridge's receiver does), the batch processor (its defaults, as in
// Jaeger's own example configurations), the jaeger_storage_exporter into
// one backend of the jaeger_storage extension, and the Collector's
// telemetry (its metrics) on a port of ours. storage is the backend's
// YAML, indented under its name. No query service, UI, sampling or
// health check: nothing listens but the receivers and the metrics.
func jaegerConfig(grpcAddr, httpAddr, metricsHost, metricsPort, storage string) string {
	return fmt.Sprintf(`service:
  extensions: [jaeger_storage]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    logs:
      level: warn
    metrics:
      readers:
        - pull:
            exporter:
              prometheus:
                host: %q
                port: %s
extensions:
  jaeger_storage:
    backends:
      bench_store:
%s
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %q
        max_recv_msg_size_mib: 16
      http:
        endpoint: %q
processors:
  batch:
exporters:
  jaeger_storage_exporter:
    trace_storage: bench_store
`, metricsHost, metricsPort, storage, grpcAddr, httpAddr)
}

// jaegerMemoryTraces is the in-memory backend's max_traces: Jaeger's own
// example configuration's. It keeps the newest traces; older ones are
// evicted (a phase of 1,000,000 spans has 125,000 traces).
const jaegerMemoryTraces = 100_000

// startJaeger starts Jaeger v2 on free ports with the in-memory storage,
// or with badger its Badger storage in a directory of the run.
func startJaeger(ctx context.Context, name, bin, tmp string, badger bool) (*target, error) {
	addrs, err := serviceAddrs()
	if err != nil {
		return nil, err
	}
	host, port, _ := strings.Cut(addrs[2], ":")
	storage := fmt.Sprintf("        memory:\n          max_traces: %d", jaegerMemoryTraces)
	data := ""
	if badger {
		data = filepath.Join(tmp, name)
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, err
		}
		// Jaeger's config-badger.yaml, but in our directory.
		storage = fmt.Sprintf(`        badger:
          directories:
            keys: %q
            values: %q
          ephemeral: false
          ttl:
            spans: 48h`, filepath.Join(data, "keys"), filepath.Join(data, "values"))
	}
	path := filepath.Join(tmp, name+".yaml")
	if err := os.WriteFile(path, []byte(jaegerConfig(addrs[0], addrs[1], host, port, storage)), 0o600); err != nil {
		return nil, err
	}
	srv, err := startServer(ctx, name, bin, "--config", path)
	if err != nil {
		return nil, err
	}
	if err := waitListening(srv, 2*time.Minute, addrs[:]...); err != nil {
		srv.stop()
		return nil, err
	}
	t := newTarget(name, srv)
	t.grpc, t.http, t.metrics, t.data = addrs[0], addrs[1], addrs[2], data
	// Taken: what the jaeger_storage_exporter wrote to the storage (the
	// receiver answers once the batch processor has queued the spans).
	// A span the exporter failed to write fails the run.
	t.taken = func() (int64, error) {
		failed, err := otelMetric(t.metrics, "otelcol_exporter_send_failed_spans", `exporter="jaeger_storage_exporter"`)
		if err != nil {
			return 0, err
		}
		if failed > 0 {
			return 0, fmt.Errorf("the jaeger_storage_exporter failed to write %.0f spans: %s", failed, srv.stderr)
		}
		v, err := otelMetric(t.metrics, "otelcol_exporter_sent_spans", `exporter="jaeger_storage_exporter"`)
		return int64(v), err
	}
	return t, nil
}
