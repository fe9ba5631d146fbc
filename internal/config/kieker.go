package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Kieker's writer classes that write log directories, and the format each
// writes. FileWriter (≥1.14) takes its format from logStreamHandler.
var kiekerFileWriters = map[string]string{
	"kieker.monitoring.writer.filesystem.FileWriter":          "",
	"kieker.monitoring.writer.filesystem.AsciiFileWriter":     "ascii",
	"kieker.monitoring.writer.filesystem.BinaryFileWriter":    "binary",
	"kieker.monitoring.writer.filesystem.AsyncFsWriter":       "ascii",
	"kieker.monitoring.writer.filesystem.AsyncBinaryFsWriter": "binary",
	"kieker.monitoring.writer.filesystem.SyncFsWriter":        "ascii",
}

const defaultKiekerWriter = "kieker.monitoring.writer.filesystem.FileWriter"

// ApplyKiekerProperties configures a kieker-log sink from the keys of a
// kieker.monitoring.properties file: the monitoring controller's name,
// hostname, metadata and setLoggingTimestamp keys, and the file writer's
// customStoragePath, charsetName, maxEntriesInFile, maxLogSize,
// maxLogFiles, logStreamHandler, flush, bufferSize and compression (for
// Kieker ≤1.13's writer classes too). Other keys are ignored. A writer that
// does not write log directories, a charset other than UTF-8, and
// malformed numbers are errors naming the key.
func ApplyKiekerProperties(p *Properties, s *Sink) error {
	writer := defaultKiekerWriter
	if w, ok := p.Get("kieker.monitoring.writer"); ok && w != "" {
		writer = w
	}
	format, ok := kiekerFileWriters[writer]
	if !ok {
		return fmt.Errorf("kieker.monitoring.writer=%s: the bridge writes Kieker log directories; use one of Kieker's file writers (e.g. %s)", writer, defaultKiekerWriter)
	}
	if format != "" {
		s.Format = format
	}
	if v, ok := p.Get("kieker.monitoring.name"); ok && v != "" {
		s.ControllerName = v
	}
	if v, ok := p.Get("kieker.monitoring.hostname"); ok && v != "" {
		s.Hostname = v
	}
	var errs []string
	boolKey := func(key string, dst *bool) {
		if v, ok := p.Get(key); ok {
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s=%s: not true or false", key, v))
				return
			}
			*dst = b
		}
	}
	intKey := func(key string, dst *int) {
		if v, ok := p.Get(key); ok && strings.TrimSpace(v) != "" {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s=%s: not a number", key, v))
				return
			}
			*dst = n
		}
	}
	if _, ok := p.Get("kieker.monitoring.metadata"); ok {
		var b bool
		boolKey("kieker.monitoring.metadata", &b)
		s.Metadata = &b
	}
	boolKey("kieker.monitoring.setLoggingTimestamp", &s.SetLoggingTimestamp)

	key := func(name string) string { return writer + "." + name }
	if v, ok := p.Get(key("customStoragePath")); ok && v != "" {
		s.Path = v
	}
	if v, ok := p.Get(key("charsetName")); ok && v != "" && !strings.EqualFold(strings.ReplaceAll(v, "-", ""), "UTF8") {
		errs = append(errs, fmt.Sprintf("%s=%s: only UTF-8 is supported", key("charsetName"), v))
	}
	intKey(key("maxEntriesInFile"), &s.MaxEntriesInFile)
	intKey(key("maxLogSize"), &s.MaxLogSize)
	intKey(key("maxLogFiles"), &s.MaxLogFiles)
	intKey(key("bufferSize"), &s.BufferSize)
	boolKey(key("flush"), &s.FlushEachBatch)
	if v, ok := p.Get(key("logStreamHandler")); ok && v != "" {
		switch {
		case strings.HasSuffix(v, "TextLogStreamHandler"):
			s.Format = "ascii"
		case strings.HasSuffix(v, "BinaryLogStreamHandler"):
			s.Format = "binary"
		default:
			errs = append(errs, fmt.Sprintf("%s=%s: want TextLogStreamHandler or BinaryLogStreamHandler", key("logStreamHandler"), v))
		}
	}
	if v, ok := p.Get(key("compression")); ok && v != "" {
		s.Compression = v // checked where the sink is built
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}
