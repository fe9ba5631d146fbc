package otlp

import (
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/logtest"
	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// TestListenPolicy: otlp-grpc and otlp-http follow the listener policy:
// off loopback without TLS the configuration is refused naming listen and
// the fix; with insecure: true the receiver starts and warns once; on
// loopback it starts without a word.
func TestListenPolicy(t *testing.T) {
	for _, f := range Factories() {
		t.Run(f.Type(), func(t *testing.T) {
			for _, addr := range []string{"0.0.0.0:4318", ":4318", "[::]:4318", "192.0.2.1:4318"} {
				cfg := f.NewConfig().(*Config)
				cfg.Listen = addr
				err := cfg.Validate()
				if err == nil || !strings.Contains(err.Error(), "listen "+addr) || !strings.Contains(err.Error(), "insecure: true") || !strings.Contains(err.Error(), "tls: {cert, key}") {
					t.Errorf("%s without tls: %v; want a refusal naming listen and the fix", addr, err)
				}
				cfg.Insecure = true
				if err := cfg.Validate(); err != nil {
					t.Errorf("%s with insecure: true: %v", addr, err)
				}
			}
			for _, off := range []bool{false, true} {
				cfg := f.NewConfig().(*Config)
				cfg.Listen = "127.0.0.1:0"
				if off {
					cfg.Listen, cfg.Insecure = "0.0.0.0:0", true
				}
				var logs logtest.Buffer
				r, err := f.NewReceiver(cfg, pipeline.Settings{Name: "o", Logger: logs.Logger()})
				if err != nil {
					t.Fatal(err)
				}
				r.(interface{ Close() error }).Close()
				warnings := strings.Count(logs.String(), "in plain text (insecure: true)")
				if want := map[bool]int{false: 0, true: 1}[off]; warnings != want {
					t.Errorf("off loopback %v: %d plain-text warnings, want %d:\n%s", off, warnings, want, logs.String())
				}
			}
		})
	}
}
