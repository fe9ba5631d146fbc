package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// noFlags are the flags not given: ports -1.
func noFlags() Flags { return Flags{Port: -1, RegistryPort: -1, MQTTPort: -1} }

func TestFromFlags(t *testing.T) {
	f := noFlags()
	cfg, err := FromFlags(f)
	if err != nil || len(cfg.Receivers) != len(Default().Receivers) {
		t.Fatalf("no flags: %v, %d receivers; want the default", err, len(cfg.Receivers))
	}

	f = noFlags()
	f.Type, f.Port, f.NoStore, f.HTTP, f.Stream = "kieker-tcp-dual", 10133, true, "off", "nats://h:4222"
	f.RegistryPort = 10134
	cfg, err = FromFlags(f)
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Listen         string `yaml:"listen"`
		RegistryListen string `yaml:"registry_listen"`
	}
	if err := cfg.Receivers[0].Decode(&k); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Receivers) != 1 || k.Listen != "127.0.0.1:10133" || k.RegistryListen != "127.0.0.1:10134" {
		t.Errorf("receivers %+v, keys %+v", cfg.Receivers, k)
	}
	if len(cfg.Sinks) != 1 || cfg.Sinks[0].Type != "kieker-log" || cfg.HTTP.Listen != "" || cfg.Stream == nil || !cfg.Stream.Has("url") {
		t.Errorf("sinks %+v, http %+v, stream %+v", cfg.Sinks, cfg.HTTP, cfg.Stream)
	}

	for _, bad := range []func(*Flags){
		func(f *Flags) { f.ConfigFile, f.Type = "x.yaml", "tcp-server" },
		func(f *Flags) { f.Port, f.Host = 1, "127.0.0.1" },
		func(f *Flags) { f.Type = "tcp-server" },
		func(f *Flags) { f.Type, f.Port = "nope", 1 },
		func(f *Flags) { f.Type, f.Port = "otlp", 1 },
		func(f *Flags) { f.Type, f.Port, f.Respawn = "tcp-server", 1, true },
	} {
		f := noFlags()
		bad(&f)
		var fe *FlagError
		if _, err := FromFlags(f); !errors.As(err, &fe) {
			t.Errorf("%+v: %v, want a *FlagError", f, err)
		}
	}
}

// TestInsecureFlag: --insecure sets insecure: true on the listening
// receivers of -t and on the --stream address, and is refused where no
// listener takes it.
func TestInsecureFlag(t *testing.T) {
	f := noFlags()
	f.Type, f.Host, f.Port, f.Insecure, f.Stream = "kieker-tcp-dual", "0.0.0.0", 0, true, "0.0.0.0:14222"
	f.RegistryPort = 0
	cfg, err := FromFlags(f)
	if err != nil {
		t.Fatal(err)
	}
	insecure := func(c Component) bool {
		var m map[string]any
		if err := c.Decode(&m); err != nil {
			t.Fatal(err)
		}
		return m["insecure"] == true
	}
	if !insecure(cfg.Receivers[0]) || !insecure(*cfg.Stream) {
		t.Errorf("receiver %v, stream %v: want insecure", insecure(cfg.Receivers[0]), insecure(*cfg.Stream))
	}
	f = noFlags()
	f.Type, f.Insecure = "otlp", true
	cfg, err = FromFlags(f)
	if err != nil || len(cfg.Receivers) != 2 {
		t.Fatal(err)
	}
	for _, r := range cfg.Receivers {
		if !insecure(r) {
			t.Errorf("%s: not insecure", r.Type)
		}
	}
	for _, bad := range []Flags{
		{Type: "tcp-client", Host: "127.0.0.1", Port: 1, RegistryPort: -1, MQTTPort: -1, Insecure: true},
		{Port: -1, RegistryPort: -1, MQTTPort: -1, Insecure: true},
		{Port: -1, RegistryPort: -1, MQTTPort: -1, Insecure: true, Stream: "nats://10.0.0.1:4222"},
	} {
		var fe *FlagError
		if _, err := FromFlags(bad); !errors.As(err, &fe) {
			t.Errorf("%+v: %v, want a flag error", bad, err)
		}
	}
}

// TestListenerFlags: -p alone and the listener flags (--kieker-port,
// --kdb-port, --otlp-grpc, --otlp-http, --zico) move or remove the one
// receiver of their type, in the embedded default, of -t and of a -c file;
// a flag without exactly one such receiver, a bad address, or -p and a
// flag moving the same receiver are flag errors.
func TestListenerFlags(t *testing.T) {
	listens := func(cfg *Config) map[string]string {
		t.Helper()
		m := map[string]string{}
		for _, r := range cfg.Receivers {
			var k struct {
				Listen string `yaml:"listen"`
			}
			if err := r.Decode(&k); err != nil {
				t.Fatal(err)
			}
			m[r.Type] = k.Listen
		}
		return m
	}
	f := noFlags()
	f.Port = 20133
	f.Listen = map[string]string{"tcp-server": "0.0.0.0:20144", "otlp-grpc": "24317", "otlp-http": "off", "zico": "[::1]:28640"}
	cfg, err := FromFlags(f)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"kieker-tcp": "127.0.0.1:20133", "tcp-server": "0.0.0.0:20144", "otlp-grpc": "127.0.0.1:24317", "zico": "[::1]:28640"}
	if got := listens(cfg); len(got) != len(want) || got["kieker-tcp"] != want["kieker-tcp"] || got["tcp-server"] != want["tcp-server"] ||
		got["otlp-grpc"] != want["otlp-grpc"] || got["zico"] != want["zico"] {
		t.Errorf("default moved: %v, want %v", got, want)
	}
	if f.Listen["kieker-tcp"] != "" {
		t.Error("FromFlags changed the caller's map")
	}

	f = noFlags()
	f.Type, f.Listen = "otlp", map[string]string{"otlp-http": "5318"}
	if cfg, err = FromFlags(f); err != nil || listens(cfg)["otlp-http"] != "127.0.0.1:5318" || listens(cfg)["otlp-grpc"] != "127.0.0.1:4317" {
		t.Errorf("-t otlp --otlp-http 5318: %v %v", err, cfg)
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(file, []byte("receivers: [{type: otlp-grpc, listen: \"127.0.0.1:4317\"}]\nsinks: [{type: kieker-log}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f = noFlags()
	f.ConfigFile, f.Listen = file, map[string]string{"otlp-grpc": "localhost:6317"}
	if cfg, err = FromFlags(f); err != nil || listens(cfg)["otlp-grpc"] != "localhost:6317" {
		t.Errorf("-c with --otlp-grpc: %v %v", err, cfg)
	}

	for _, bad := range []func(*Flags){
		func(f *Flags) { f.Port, f.Listen = 1, map[string]string{"kieker-tcp": "2"} },
		func(f *Flags) { f.Type, f.Port, f.Listen = "tcp-server", 1, map[string]string{"tcp-server": "2"} },
		func(f *Flags) {
			f.Type, f.Port, f.RegistryPort, f.Listen = "kieker-tcp-dual", 1, 2, map[string]string{"kieker-tcp": "3"}
		},
		func(f *Flags) { f.ConfigFile, f.Listen = file, map[string]string{"zico": "3"} },
		func(f *Flags) { f.ConfigFile, f.Port = file, 1 },
		func(f *Flags) { f.Listen = map[string]string{"zico": "nope"} },
		func(f *Flags) { f.Listen = map[string]string{"zico": "127.0.0.1:65536"} },
	} {
		f := noFlags()
		bad(&f)
		var fe *FlagError
		if _, err := FromFlags(f); !errors.As(err, &fe) {
			t.Errorf("%+v: %v, want a *FlagError", f, err)
		}
	}
}
