package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The OpenTelemetry Collector the benchmark compares with: its core
// modules at these versions, built from the module proxy into a binary
// with the OTLP receiver and the nop exporter only.
const (
	collectorVersion = "v0.165.0"
	collectorStable  = "v1.71.0" // the stable modules released with it
)

const collectorMain = `// Command otelcol-bench is the OpenTelemetry Collector with the OTLP
// receiver and the nop exporter only: the baseline of tracebridge's
// bench/otlp.
package main

import (
	"log"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/nopexporter"
	"go.opentelemetry.io/collector/otelcol"
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
		req("go.opentelemetry.io/collector/receiver", collectorStable) +
		req("go.opentelemetry.io/collector/receiver/otlpreceiver", collectorVersion) +
		req("go.opentelemetry.io/collector/service", collectorVersion) +
		")\n"
}

// buildCollector writes the Collector's main into a module of its own
// under dir and builds it; it returns the binary's path.
func buildCollector(ctx context.Context, dir string) (string, error) {
	src := filepath.Join(dir, "otelcol-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", err
	}
	main := strings.ReplaceAll(collectorMain, "COLLECTOR_VERSION", collectorVersion)
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(main), 0o644); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(collectorGoMod()), 0o644); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "otelcol-bench")
	for _, args := range [][]string{{"mod", "tidy"}, {"build", "-o", bin, "."}} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = src
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("go %s (the Collector %s): %v\n%s", strings.Join(args, " "), collectorVersion, err, out)
		}
	}
	return bin, nil
}

// collectorConfig is the Collector's configuration: the OTLP receiver on
// both protocols (gRPC taking messages as large as tracebridge's
// receiver does), the nop exporter, its own metrics on a port of ours.
func collectorConfig(grpcAddr, httpAddr, metricsHost, metricsPort string) string {
	return fmt.Sprintf(`receivers:
  otlp:
    protocols:
      grpc:
        endpoint: %q
        max_recv_msg_size_mib: 16
      http:
        endpoint: %q
exporters:
  nop:
service:
  pipelines:
    traces:
      receivers: [otlp]
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
`, grpcAddr, httpAddr, metricsHost, metricsPort)
}
