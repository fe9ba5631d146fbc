package config

import (
	"errors"
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
		func(f *Flags) { f.Port = 1 },
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
