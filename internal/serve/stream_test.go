package serve

import (
	"errors"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/config"
)

// TestStreamSection: the top-level stream: builds a best-effort stream
// sink (sharing the broker-embedded receiver's server when it names no
// address); enabled: false, or no section, builds none; its keys are
// checked like a component's.
func TestStreamSection(t *testing.T) {
	const base = "receivers: [{type: kieker-tcp, listen: \"127.0.0.1:0\"}]\nsinks: [{type: kieker-log}]\n"
	for _, tc := range []struct {
		name, yaml string
		stream     string // where the stream publishes ("": none)
		err        string
	}{
		{"none", base, "", ""},
		{"off", base + "stream: {enabled: false}\n", "", ""},
		{"on", base + "stream: {listen: \"127.0.0.1:0\", max_age: 1h, max_bytes: 10MB}\n", "publishing to nats://127.0.0.1:", ""},
		{"shared", "receivers: [{name: b, type: broker-embedded, listen: \"127.0.0.1:0\"}]\nsinks: [{type: kieker-log}]\nstream: {}\n", "same", ""},
		{"conflict", "receivers: [{name: b, type: broker-embedded, listen: \"127.0.0.1:0\"}]\nsinks: [{type: kieker-log}]\nstream: {listen: \"127.0.0.1:1\"}\n", "", "one embedded server"},
		{"typo", base + "stream: {max_agee: 1h}\n", "", `unknown key "max_agee"`},
		{"both", base + "stream: {listen: \"127.0.0.1:0\", url: \"nats://x:4222\"}\n", "", "exclude each other"},
		{"policy", base + "stream: {policy: always}\n", "", `policy "always": want durable or best-effort`},
		{"durable", base + "stream: {listen: \"127.0.0.1:0\", policy: durable}\n", "publishing to nats://127.0.0.1:", ""},
		{"name", base + "stream: {name: s}\n", "", "not keys of the stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := parse(t, tc.yaml)
			cfg.DataDir = t.TempDir()
			s, err := Build(cfg, Settings{})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrConfig) && !errors.Is(err, ErrComm) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			var where string
			for _, e := range s.Sinks {
				if e.Type == "stream" {
					where = e.Where
					want := "best-effort"
					if tc.name == "durable" {
						want = "durable"
					}
					if e.Policy != want {
						t.Errorf("policy %s, want %s", e.Policy, want)
					}
				}
			}
			switch tc.stream {
			case "":
				if where != "" || s.StreamURL != "" {
					t.Fatalf("a stream: %q", where)
				}
			case "same":
				if !strings.Contains(s.Receivers[0].Where, strings.TrimPrefix(s.StreamURL, "nats://")) {
					t.Fatalf("stream %s, broker %s", s.StreamURL, s.Receivers[0].Where)
				}
			default:
				if !strings.Contains(where, tc.stream) {
					t.Fatalf("stream %q", where)
				}
			}
		})
	}
}

func TestDefaultHasStream(t *testing.T) {
	c := config.Default()
	if c.Stream == nil || !c.Stream.Has("listen") {
		t.Fatalf("default stream %+v", c.Stream)
	}
	b, err := c.Marshal()
	if err != nil || !strings.Contains(string(b), "stream:\n    listen: 127.0.0.1:14222") {
		t.Fatalf("%s %v", b, err)
	}
}
