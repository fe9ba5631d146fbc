package config

import (
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/pipeline"
)

func TestParseConfig(t *testing.T) {
	c, err := Parse([]byte(`
data_dir: /var/lib/tb
metrics: 127.0.0.1:9464
flush_interval: 250ms
receivers:
  - type: kieker-tcp
    listen: 127.0.0.1:10133
    timestamp_unit: us
  - type: kdb-tcp
    listen: 127.0.0.1:10144
    mapping: m.txt
  - type: kieker-tcp
    listen: 127.0.0.1:10200
sinks:
  - type: kieker-log
    format: ascii
    compression: gzip
  - {type: forward, url: "kieker-tcp://10.0.0.1:10133", policy: best-effort, queue_batches: 8}
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	if c.FlushInterval != pipeline.Duration(250*time.Millisecond) || c.Receivers[1].Type != "kdb-tcp" {
		t.Fatalf("%+v", c)
	}
	if c.Receivers[0].Name != "kieker-tcp" || c.Receivers[2].Name != "kieker-tcp-2" {
		t.Errorf("names %q %q", c.Receivers[0].Name, c.Receivers[2].Name)
	}
	if s := c.Sinks[1]; s.Policy != "best-effort" || s.QueueBatches != 8 || !s.Has("url") || s.Has("policy") {
		t.Errorf("forward sink %+v", s)
	}
	var kl struct {
		Format      string `yaml:"format"`
		Compression string `yaml:"compression"`
	}
	if err := c.Sinks[0].Decode(&kl); err != nil || kl.Format != "ascii" || kl.Compression != "gzip" {
		t.Errorf("kieker-log keys %+v %v", kl, err)
	}
}

// TestComponentUnknownKey: a key the component's configuration does not
// know is an error naming the key and its line, also inside nested and
// inline structs.
func TestComponentUnknownKey(t *testing.T) {
	type TLS struct {
		Cert string `yaml:"cert"`
	}
	type Common struct {
		Mapping string `yaml:"mapping"`
	}
	type cfg struct {
		Listen string `yaml:"listen"`
		TLS    TLS    `yaml:"tls"`
		Common `yaml:",inline"`
	}
	c, err := Parse([]byte("receivers:\n  - type: x\n    listen: a\n    mapping: m\n    tls: {cert: c}\n  - type: x\n    lisen: a\n  - type: x\n    tls: {certs: c}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var ok cfg
	if err := c.Receivers[0].Decode(&ok); err != nil || ok.Listen != "a" || ok.Mapping != "m" || ok.TLS.Cert != "c" {
		t.Fatalf("%+v %v", ok, err)
	}
	var bad cfg
	err = c.Receivers[1].Decode(&bad)
	if err == nil || !strings.Contains(err.Error(), `line 7: unknown key "lisen"`) || !strings.Contains(err.Error(), "listen, mapping, tls") {
		t.Errorf("typo: %v", err)
	}
	err = c.Receivers[2].Decode(&bad)
	if err == nil || !strings.Contains(err.Error(), `tls: line 9: unknown key "certs"`) {
		t.Errorf("nested typo: %v", err)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"receivers: [{type: tcp-server, listen: x}]\nsinks: [{type: kieker-log}]\nbogus: 1\n", "field bogus not found"},
		{"receivers: [{listen: x}]\nsinks: [{type: kieker-log}]\n", "type missing"},
		{"receivers: [{type: tcp-server, listen: x, policy: durable}]\nsinks: [{type: kieker-log}]\n", "policy is a key of sinks"},
		{"receivers: [{type: tcp-server, listen: x}]\nsinks: [{type: kieker-log, policy: sometimes}]\n", `policy "sometimes"`},
		{"receivers: [{type: tcp-server, name: a}]\nsinks: [{type: kieker-log, name: a}]\n", "name used twice"},
		{"flush_interval: soon\n", "duration"},
		{"{}\n", "no receivers"},
		{"receivers: [x]\n", "a component is a mapping"},
		{"memory_limit: 10MiB\nreceivers: [{type: tcp-server}]\nsinks: [{type: kieker-log}]\n", "memory_limit 10MiB: want at least 128MiB"},
		{"memory_limit: lots\n", "size \"lots\""},
		{"memory_target: 100MiB\nreceivers: [{type: tcp-server}]\nsinks: [{type: kieker-log}]\n", "memory_target 100MiB: want at least 128MiB"},
		{"memory_limit: 256MiB\nmemory_target: 300MiB\nreceivers: [{type: tcp-server}]\nsinks: [{type: kieker-log}]\n", "memory_target 300MiB: above memory_limit 256MiB"},
		{"traces: {workers: -1}\nreceivers: [{type: tcp-server}]\nsinks: [{type: kieker-log}]\n", "traces: window and limits must not be negative"},
	} {
		c, err := Parse([]byte(tc.yaml))
		if err == nil {
			err = c.Normalize()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want %q", tc.yaml, err, tc.want)
		}
	}
}

// TestMemoryLimitKey: memory_limit takes a size with a unit.
func TestMemoryLimitKey(t *testing.T) {
	c, err := Parse([]byte("memory_limit: 512MiB\nreceivers: [{type: tcp-server}]\nsinks: [{type: kieker-log}]\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Normalize(); err != nil || c.MemoryLimit != 512<<20 {
		t.Fatalf("memory_limit %d, %v; want 512 MiB", c.MemoryLimit, err)
	}
}

// TestMemoryTargetKey: memory_target takes a size with a unit, alone or
// at most memory_limit.
func TestMemoryTargetKey(t *testing.T) {
	for _, tc := range []struct {
		yaml          string
		limit, target int64
	}{
		{"memory_target: 200MiB\n", 0, 200 << 20},
		{"memory_limit: 1GiB\nmemory_target: 300MB\n", 1 << 30, 300e6},
		{"memory_limit: 1GiB\nmemory_target: 1GiB\n", 1 << 30, 1 << 30},
		{"memory_limit: 1GiB\n", 1 << 30, 0},
	} {
		c, err := Parse([]byte(tc.yaml + "receivers: [{type: tcp-server}]\nsinks: [{type: kieker-log}]\n"))
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Normalize(); err != nil || c.MemoryLimit != pipeline.ByteSize(tc.limit) || c.MemoryTarget != pipeline.ByteSize(tc.target) {
			t.Errorf("%q: memory_limit %d, memory_target %d, %v; want %d, %d", tc.yaml, c.MemoryLimit, c.MemoryTarget, err, tc.limit, tc.target)
		}
	}
}

// TestTraceWorkersKey: traces.workers sets the assembly workers (0, the
// default: one per core).
func TestTraceWorkersKey(t *testing.T) {
	for _, tc := range []struct {
		yaml string
		want int
	}{{"", 0}, {"traces: {workers: 1}\n", 1}, {"traces: {window: 1s, workers: 4}\n", 4}} {
		c, err := Parse([]byte(tc.yaml + "receivers: [{type: tcp-server}]\nsinks: [{type: kieker-log}]\n"))
		if err == nil {
			err = c.Normalize()
		}
		if err != nil {
			t.Errorf("%q: %v", tc.yaml, err)
		} else if c.Traces.Workers != tc.want {
			t.Errorf("%q: workers %d, want %d", tc.yaml, c.Traces.Workers, tc.want)
		}
	}
}

// TestNewComponentRoundTrip: a component built from code (the command
// line) decodes like one read from YAML and marshals back.
func TestNewComponentRoundTrip(t *testing.T) {
	c := NewComponent("tcp-client", map[string]any{"connect": "h:1", "respawn": true, "mapping": ""})
	c.Set("format", "kieker")
	var got struct {
		Connect string `yaml:"connect"`
		Respawn bool   `yaml:"respawn"`
		Format  string `yaml:"format"`
	}
	if err := c.Decode(&got); err != nil || got.Connect != "h:1" || !got.Respawn || got.Format != "kieker" || c.Has("mapping") {
		t.Fatalf("%+v %v", got, err)
	}
	cfg := &Config{Receivers: []Component{c}, Sinks: []Component{NewComponent("kieker-log", nil)}}
	out, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(out)
	if err != nil {
		t.Fatalf("%s: %v", out, err)
	}
	if back.Receivers[0].Type != "tcp-client" || !back.Receivers[0].Has("respawn") {
		t.Fatalf("%s", out)
	}
}
