package kiekerlog

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/properties"
)

func TestApplyKiekerProperties(t *testing.T) {
	p, err := properties.Parse("k.properties", strings.NewReader(`
kieker.monitoring.name=BRIDGE
kieker.monitoring.hostname=lab
kieker.monitoring.metadata=false
kieker.monitoring.setLoggingTimestamp=true
kieker.monitoring.writer=kieker.monitoring.writer.filesystem.FileWriter
kieker.monitoring.writer.filesystem.FileWriter.customStoragePath=/data/logs
kieker.monitoring.writer.filesystem.FileWriter.charsetName=UTF-8
kieker.monitoring.writer.filesystem.FileWriter.maxEntriesInFile=5000
kieker.monitoring.writer.filesystem.FileWriter.maxLogSize=-1
kieker.monitoring.writer.filesystem.FileWriter.maxLogFiles=10
kieker.monitoring.writer.filesystem.FileWriter.logStreamHandler=kieker.monitoring.writer.filesystem.TextLogStreamHandler
kieker.monitoring.writer.filesystem.FileWriter.flush=true
kieker.monitoring.writer.filesystem.FileWriter.bufferSize=81920
kieker.monitoring.writer.filesystem.FileWriter.compression=kieker.monitoring.writer.compression.GZipCompressionFilter
`))
	if err != nil {
		t.Fatal(err)
	}
	var s FactoryConfig
	if err := s.ApplyKiekerProperties(p); err != nil {
		t.Fatal(err)
	}
	if s.ControllerName != "BRIDGE" || s.Hostname != "lab" || s.Metadata == nil || *s.Metadata || !s.SetLoggingTimestamp ||
		s.Path != "/data/logs" || s.MaxEntriesInFile != 5000 || s.MaxLogSize != -1 || s.MaxLogFiles != 10 ||
		s.Format != "ascii" || !s.FlushEachBatch || s.BufferSize != 81920 || !strings.HasSuffix(s.Compression, "GZipCompressionFilter") {
		t.Fatalf("%+v", s)
	}

	legacy, _ := properties.Parse("old", strings.NewReader("kieker.monitoring.writer=kieker.monitoring.writer.filesystem.AsyncBinaryFsWriter\nkieker.monitoring.writer.filesystem.AsyncBinaryFsWriter.customStoragePath=/old\n"))
	s = FactoryConfig{}
	if err := s.ApplyKiekerProperties(legacy); err != nil || s.Format != "binary" || s.Path != "/old" {
		t.Fatalf("legacy writer: %+v %v", s, err)
	}

	for _, bad := range []string{
		"kieker.monitoring.writer=kieker.monitoring.writer.tcp.SingleSocketTcpWriter\n",
		"kieker.monitoring.writer.filesystem.FileWriter.maxEntriesInFile=lots\n",
		"kieker.monitoring.writer.filesystem.FileWriter.charsetName=ISO-8859-1\n",
	} {
		p, _ := properties.Parse("bad", strings.NewReader(bad))
		if err := (&FactoryConfig{}).ApplyKiekerProperties(p); err == nil {
			t.Errorf("%q accepted", bad)
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
	kc, err := (&FactoryConfig{KiekerProperties: props, Path: dir, MaxEntriesInFile: 5}).WriterConfig("data")
	if err != nil {
		t.Fatal(err)
	}
	if kc.Binary || kc.ControllerName != "FROMPROPS" || kc.Path != dir || kc.MaxEntriesInFile != 5 || !kc.Metadata {
		t.Fatalf("%+v", kc)
	}
	// Without a path of its own the sink takes customStoragePath, and
	// without either the data directory.
	if kc, _ := (&FactoryConfig{KiekerProperties: props}).WriterConfig("data"); kc.Path != "/from/props" || kc.MaxEntriesInFile != 77 {
		t.Fatalf("%+v", kc)
	}
	if kc, _ := (&FactoryConfig{}).WriterConfig("data"); kc.Path != "data" {
		t.Fatalf("%+v", kc)
	}
}
