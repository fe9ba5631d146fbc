package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
)

// The OpenTelemetry Collector the benchmark compares with: its core
// modules at these versions, built from the module proxy into a binary
// with the OTLP receiver, the batch processor and the nop exporter only.
const (
	collectorVersion = "v0.165.0"
	collectorStable  = "v1.71.0" // the stable modules released with it
)

const collectorMain = `// Command otelcol-bench is the OpenTelemetry Collector with the OTLP
// receiver, the batch processor and the nop exporter only: the baseline
// of tracebridge's bench/otlp.
package main

import (
	"log"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/nopexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/processor"
	"go.opentelemetry.io/collector/processor/batchprocessor"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func components() (otelcol.Factories, error) {
	var f otelcol.Factories
	var err error
	if f.Receivers, err = otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory()); err != nil {
		return f, err
	}
	if f.Processors, err = otelcol.MakeFactoryMap[processor.Factory](batchprocessor.NewFactory()); err != nil {
		return f, err
	}
	if f.Exporters, err = otelcol.MakeFactoryMap[exporter.Factory](nopexporter.NewFactory()); err != nil {
		return f, err
	}
	f.Telemetry = otelconftelemetry.NewFactory()
	return f, nil
}

func main() {
	set := otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol-bench", Description: "bench/otlp baseline", Version: "COLLECTOR_VERSION"},
		Factories: components,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{
			ResolverSettings: confmap.ResolverSettings{
				ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory()},
				DefaultScheme:     "file",
			},
		},
	}
	if err := otelcol.NewCommand(set).Execute(); err != nil {
		log.Fatal(err)
	}
}
`

// collectorGoMod pins the Collector's modules; go mod tidy resolves the
// rest through the module proxy.
func collectorGoMod() string {
	req := func(path, v string) string { return "\t" + path + " " + v + "\n" }
	return "module otelcolbench\n\ngo 1.26\n\nrequire (\n" +
		req("go.opentelemetry.io/collector/component", collectorStable) +
		req("go.opentelemetry.io/collector/confmap", collectorStable) +
		req("go.opentelemetry.io/collector/confmap/provider/fileprovider", collectorStable) +
		req("go.opentelemetry.io/collector/exporter", collectorStable) +
		req("go.opentelemetry.io/collector/exporter/nopexporter", collectorVersion) +
		req("go.opentelemetry.io/collector/otelcol", collectorVersion) +
		req("go.opentelemetry.io/collector/pdata", collectorStable) +
		req("go.opentelemetry.io/collector/processor", collectorStable) +
		req("go.opentelemetry.io/collector/processor/batchprocessor", collectorVersion) +
		req("go.opentelemetry.io/collector/receiver", collectorStable) +
		req("go.opentelemetry.io/collector/receiver/otlpreceiver", collectorVersion) +
		req("go.opentelemetry.io/collector/service", collectorVersion) +
		")\n"
}

// collectorBinary is the name of the Collector's binary in the cache:
// the version and the components, so that another set builds anew.
const collectorBinary = "otelcol-" + collectorVersion + "-otlp-batch-nop"

// buildCollector writes the Collector's main into a module of its own
// under dir and builds it into out.
func buildCollector(ctx context.Context, dir, out string) error {
	src := filepath.Join(dir, "otelcol-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	main := strings.ReplaceAll(collectorMain, "COLLECTOR_VERSION", collectorVersion)
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(main), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(collectorGoMod()), 0o644); err != nil {
		return err
	}
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", out, "."}} {
		if out, err := goCommand(ctx, src, "-mod=mod", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("go %s (the Collector %s): %v\n%s", strings.Join(args, " "), collectorVersion, err, out)
		}
	}
	return nil
}

// collectorConfig is the Collector's configuration: the OTLP receiver on
// both protocols (gRPC taking messages as large as tracebridge's
// receiver does), the batch processor (its defaults) when batch is set,
// the nop exporter, its own metrics on a port of ours.
func collectorConfig(grpcAddr, httpAddr, metricsHost, metricsPort string, batch bool) string {
	processors := ""
	if batch {
		processors = "\n      processors: [batch]"
	}
	return fmt.Sprintf(`receivers:
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
  nop:
service:
  pipelines:
    traces:
      receivers: [otlp]%s
      exporters: [nop]
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
`, grpcAddr, httpAddr, processors, metricsHost, metricsPort)
}

// startCollector starts the Collector on free ports: otlp → nop, or with
// batch otlp → batch → nop.
func startCollector(ctx context.Context, name, bin, tmp string, batch bool) (*target, error) {
	addrs, err := serviceAddrs()
	if err != nil {
		return nil, err
	}
	host, port, _ := strings.Cut(addrs[2], ":")
	path := filepath.Join(tmp, name+".yaml")
	if err := os.WriteFile(path, []byte(collectorConfig(addrs[0], addrs[1], host, port, batch)), 0o600); err != nil {
		return nil, err
	}
	srv, err := startServer(ctx, name, bin, "--config", path)
	if err != nil {
		return nil, err
	}
	if err := waitListening(srv, time.Minute, addrs[:]...); err != nil {
		srv.stop()
		return nil, err
	}
	t := newTarget(name, srv)
	t.grpc, t.http, t.metrics = addrs[0], addrs[1], addrs[2]
	// Taken: without the batch processor, accepted by the receiver (the
	// nop exporter has returned by then); with it, what the batch
	// processor sent on to the exporter (its batch sizes' sum), since the
	// receiver answers once the processor has queued the spans.
	t.taken = func() (int64, error) {
		if batch {
			v, err := otelMetric(t.metrics, "otelcol_processor_batch_batch_send_size_sum", `processor="batch"`)
			return int64(v), err
		}
		var sum int64
		for _, tr := range []string{`transport="grpc"`, `transport="http"`} {
			v, err := otelMetric(t.metrics, "otelcol_receiver_accepted_spans", tr)
			if err != nil {
				return 0, err
			}
			sum += int64(v)
		}
		return sum, nil
	}
	return t, nil
}

// otelMetric reads a counter from a Collector's (or Jaeger's) Prometheus
// endpoint, by its name with or without the _total suffix that
// Prometheus exporters add to counters; a counter not yet exported reads
// 0.
func otelMetric(addr, name, label string) (float64, error) {
	for _, n := range []string{name, name + "_total"} {
		v, ok, err := benchkit.Metric(addr, n, label)
		if err != nil || ok {
			return v, err
		}
	}
	return 0, nil
}
