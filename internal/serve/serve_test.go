package serve

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/config"
)

func TestBuildDefaultLikeConfig(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Config{
		DataDir: dir,
		Metrics: "127.0.0.1:0",
		Receivers: []config.Receiver{
			{Type: config.KiekerTCP, Listen: "127.0.0.1:0", TimestampUnit: "us"},
			{Type: config.TCPServer, Listen: "127.0.0.1:0"},
			{Type: config.KiekerTCPDual, Listen: "127.0.0.1:0", RegistryListen: "127.0.0.1:0"},
		},
		Sinks: []config.Sink{{Type: config.KiekerLog}},
	}
	s, err := Build(cfg, Settings{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if len(s.Receivers) != 3 || !strings.Contains(s.Receivers[2].Where, "registry") || s.MetricsAddr == "" {
		t.Fatalf("%+v %q", s.Receivers, s.MetricsAddr)
	}
	if filepath.Dir(s.Sinks[0].Where) != dir {
		t.Fatalf("log %s not under %s", s.Sinks[0].Where, dir)
	}
}

func TestBuildErrorClasses(t *testing.T) {
	dir := t.TempDir()
	badMap := filepath.Join(dir, "m.txt")
	os.WriteFile(badMap, []byte("1=does.not.Exist\n"), 0o644)
	busy, _ := net.Listen("tcp", "127.0.0.1:0")
	defer busy.Close()
	for _, tc := range []struct {
		cfg   config.Config
		class error
	}{
		{config.Config{Receivers: []config.Receiver{{Type: config.TCPServer, Listen: "127.0.0.1:0", Mapping: badMap}}, Sinks: []config.Sink{{Type: config.KiekerLog, Path: dir}}}, ErrMapping},
		{config.Config{Receivers: []config.Receiver{{Type: config.TCPServer, Listen: busy.Addr().String()}}, Sinks: []config.Sink{{Type: config.KiekerLog, Path: dir}}}, ErrComm},
		{config.Config{Receivers: []config.Receiver{{Type: "x"}}, Sinks: []config.Sink{{Type: config.KiekerLog}}}, ErrConfig},
		{config.Config{Receivers: []config.Receiver{{Type: config.TCPServer, Listen: "127.0.0.1:0"}}, Sinks: []config.Sink{{Type: config.KiekerLog, Path: dir, Compression: "bzip2"}}}, ErrConfig},
		{config.Config{Libraries: []string{badMap}, Receivers: []config.Receiver{{Type: config.TCPServer, Listen: "127.0.0.1:0"}}, Sinks: []config.Sink{{Type: config.KiekerLog, Path: dir}}}, ErrConfig},
	} {
		cfg := tc.cfg
		_, err := Build(&cfg, Settings{})
		if !errors.Is(err, tc.class) {
			t.Errorf("%+v: error %v, want class %v", tc.cfg.Receivers, err, tc.class)
		}
	}
}

func TestKiekerPropertiesUnderSinkKeys(t *testing.T) {
	dir := t.TempDir()
	props := filepath.Join(dir, "kieker.monitoring.properties")
	os.WriteFile(props, []byte(`kieker.monitoring.name=FROMPROPS
kieker.monitoring.writer.filesystem.FileWriter.logStreamHandler=kieker.monitoring.writer.filesystem.TextLogStreamHandler
kieker.monitoring.writer.filesystem.FileWriter.maxEntriesInFile=77
kieker.monitoring.writer.filesystem.FileWriter.customStoragePath=/from/props
`), 0o644)
	kc, err := kiekerLogConfig(&config.Sink{Type: config.KiekerLog, KiekerProperties: props, Path: dir, MaxEntriesInFile: 5}, "data")
	if err != nil {
		t.Fatal(err)
	}
	if kc.Binary || kc.ControllerName != "FROMPROPS" || kc.Path != dir || kc.MaxEntriesInFile != 5 || !kc.Metadata {
		t.Fatalf("%+v", kc)
	}
	// Without a path of its own the sink takes customStoragePath, and
	// without either the data directory.
	if kc, _ := kiekerLogConfig(&config.Sink{Type: config.KiekerLog, KiekerProperties: props}, "data"); kc.Path != "/from/props" || kc.MaxEntriesInFile != 77 {
		t.Fatalf("%+v", kc)
	}
	if kc, _ := kiekerLogConfig(&config.Sink{Type: config.KiekerLog}, "data"); kc.Path != "data" {
		t.Fatalf("%+v", kc)
	}
}
