package config

import (
	"strings"
	"testing"
	"time"
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
  - type: forward
    url: kieker-tcp://10.0.0.1:10133
`))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Normalize(); err != nil {
		t.Fatal(err)
	}
	if c.FlushInterval != Duration(250*time.Millisecond) || c.Receivers[1].Type != TCPServer {
		t.Fatalf("%+v", c)
	}
	if c.Receivers[0].Name != "kieker-tcp" || c.Receivers[2].Name != "kieker-tcp-2" {
		t.Errorf("names %q %q", c.Receivers[0].Name, c.Receivers[2].Name)
	}
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"receivers: [{type: tcp-server, listen: x}]\nsinks: [{type: kieker-log}]\nbogus: 1\n", "field bogus not found"},
		{"receivers: [{type: udp}]\nsinks: [{type: kieker-log}]\n", `unknown type "udp"`},
		{"receivers: [{type: tcp-client}]\nsinks: [{type: kieker-log}]\n", "connect address missing"},
		{"receivers: [{type: tcp-server, listen: x}]\nsinks: [{type: forward}]\n", "url missing"},
		{"receivers: [{type: tcp-server, listen: x, timestamp_unit: days}]\nsinks: [{type: kieker-log}]\n", "timestamp_unit"},
		{"flush_interval: soon\n", "invalid duration"},
		{"{}\n", "no receivers"},
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

func TestApplyKiekerProperties(t *testing.T) {
	p, err := ParseProperties("k.properties", strings.NewReader(`
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
	var s Sink
	if err := ApplyKiekerProperties(p, &s); err != nil {
		t.Fatal(err)
	}
	if s.ControllerName != "BRIDGE" || s.Hostname != "lab" || s.Metadata == nil || *s.Metadata || !s.SetLoggingTimestamp ||
		s.Path != "/data/logs" || s.MaxEntriesInFile != 5000 || s.MaxLogSize != -1 || s.MaxLogFiles != 10 ||
		s.Format != "ascii" || !s.FlushEachBatch || s.BufferSize != 81920 || !strings.HasSuffix(s.Compression, "GZipCompressionFilter") {
		t.Fatalf("%+v", s)
	}

	legacy, _ := ParseProperties("old", strings.NewReader("kieker.monitoring.writer=kieker.monitoring.writer.filesystem.AsyncBinaryFsWriter\nkieker.monitoring.writer.filesystem.AsyncBinaryFsWriter.customStoragePath=/old\n"))
	s = Sink{}
	if err := ApplyKiekerProperties(legacy, &s); err != nil || s.Format != "binary" || s.Path != "/old" {
		t.Fatalf("legacy writer: %+v %v", s, err)
	}

	for _, bad := range []string{
		"kieker.monitoring.writer=kieker.monitoring.writer.tcp.SingleSocketTcpWriter\n",
		"kieker.monitoring.writer.filesystem.FileWriter.maxEntriesInFile=lots\n",
		"kieker.monitoring.writer.filesystem.FileWriter.charsetName=ISO-8859-1\n",
	} {
		p, _ := ParseProperties("bad", strings.NewReader(bad))
		if err := ApplyKiekerProperties(p, &Sink{}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
