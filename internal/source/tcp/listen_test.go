package tcp

import (
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/logtest"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// TestListenPolicy: every listening TCP receiver follows the listener
// policy: off loopback without TLS its configuration is refused naming
// the key; with insecure: true it starts and warns once per listener at
// start-up; on loopback it starts without a word.
func TestListenPolicy(t *testing.T) {
	for _, c := range []struct {
		typ  string
		cfg  func(listen, registry string, insecure bool) pipeline.Config
		keys []string // the keys off loopback, each refused alone
	}{
		{TypeServer, func(l, _ string, in bool) pipeline.Config {
			return &KDBServerConfig{Listen: l, Limits: Limits{Insecure: in}}
		}, []string{"listen"}},
		{TypeSingleServer, func(l, _ string, in bool) pipeline.Config {
			return &KDBServerConfig{Listen: l, Limits: Limits{Insecure: in}}
		}, []string{"listen"}},
		{TypeKieker, func(l, _ string, in bool) pipeline.Config {
			return &KiekerConfig{Listen: l, Limits: Limits{Insecure: in}}
		}, []string{"listen"}},
		{TypeKiekerDual, func(l, r string, in bool) pipeline.Config {
			return &DualConfig{Listen: l, RegistryListen: r, Limits: Limits{Insecure: in}}
		}, []string{"listen", "registry_listen"}},
	} {
		t.Run(c.typ, func(t *testing.T) {
			var f pipeline.ReceiverFactory
			for _, x := range Factories() {
				if x.Type() == c.typ {
					f = x
				}
			}
			for _, key := range c.keys {
				l, r := "127.0.0.1:0", "127.0.0.1:0"
				if key == "listen" {
					l = "0.0.0.0:10133"
				} else {
					r = "0.0.0.0:10133"
				}
				err := c.cfg(l, r, false).Validate()
				if err == nil || !strings.Contains(err.Error(), key+" 0.0.0.0:10133") || !strings.Contains(err.Error(), "insecure: true") || !strings.Contains(err.Error(), "tls: {cert, key}") {
					t.Errorf("%s off loopback without tls: %v; want a refusal naming %s and the fix", key, err, key)
				}
				if err := c.cfg(l, r, true).Validate(); err != nil {
					t.Errorf("%s off loopback with insecure: true: %v", key, err)
				}
			}
			for _, off := range []bool{false, true} {
				l, r := "127.0.0.1:0", "127.0.0.1:0"
				if off {
					l, r = "0.0.0.0:0", "0.0.0.0:0"
				}
				cfg := c.cfg(l, r, off)
				if err := cfg.Validate(); err != nil {
					t.Fatal(err)
				}
				var logs logtest.Buffer
				rc, err := f.NewReceiver(cfg, pipeline.Settings{Name: "k", Catalog: record.Builtin(), Logger: logs.Logger()})
				if err != nil {
					t.Fatal(err)
				}
				rc.(*built).Close()
				warnings := 0
				for _, m := range logs.Lines(t) {
					if msg, _ := m["msg"].(string); strings.Contains(msg, "in plain text (insecure: true)") {
						warnings++
					}
				}
				if want := map[bool]int{false: 0, true: len(c.keys)}[off]; warnings != want {
					t.Errorf("off loopback %v: %d plain-text warnings, want %d:\n%s", off, warnings, want, logs.String())
				}
			}
		})
	}
}
