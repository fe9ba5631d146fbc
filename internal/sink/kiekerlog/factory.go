// Package kiekerlog is the kieker-log sink: Kieker's FileWriter settings
// (YAML keys or a Kieker properties file) turned into a Kieker log
// directory writer (internal/logwrite, which also serves the public stream
// package's dump and the CLI's converters).
package kiekerlog

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/logdir"
	"github.com/tracebridge/tracebridge/internal/logwrite"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/properties"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Type is the sink type this package builds.
const Type = "kieker-log"

// FactoryConfig is the YAML configuration of a kieker-log sink: Kieker's
// FileWriter settings.
type FactoryConfig struct {
	// Path is the directory in which the log directory is created
	// (default: the properties file's customStoragePath, else data_dir).
	Path string `yaml:"path"`
	// Format: ascii or binary (default binary).
	Format string `yaml:"format"`
	// Compression of the data files: none, deflate, gzip, zip, xz.
	Compression      string `yaml:"compression"`
	MaxEntriesInFile int    `yaml:"max_entries_in_file"`
	MaxLogSize       int    `yaml:"max_log_size"`
	MaxLogFiles      int    `yaml:"max_log_files"`
	BufferSize       int    `yaml:"buffer_size"`
	// Hostname and ControllerName name the directory and fill the
	// metadata record.
	Hostname       string `yaml:"hostname"`
	ControllerName string `yaml:"controller_name"`
	// Metadata writes a KiekerMetadataRecord first (default true).
	Metadata            *bool `yaml:"metadata"`
	SetLoggingTimestamp bool  `yaml:"set_logging_timestamp"`
	FlushEachBatch      bool  `yaml:"flush"`
	// KiekerProperties is a kieker.monitoring.properties file whose
	// FileWriter keys configure this sink (applied first; the keys above
	// override it).
	KiekerProperties string `yaml:"kieker_properties"`
}

// Validate checks the configuration.
func (c *FactoryConfig) Validate() error {
	if c.Format != "" && c.Format != "ascii" && c.Format != "binary" {
		return fmt.Errorf("format %q: want ascii or binary", c.Format)
	}
	if c.Compression != "" {
		if _, err := logdir.ParseCompression(c.Compression); err != nil {
			return err
		}
	}
	return nil
}

var _ pipeline.FramesTaker = (*FactoryConfig)(nil)

// TakesFrames: a binary log copies the Kieker frames that receivers keep
// (record.Frames) with its own ids.
func (c *FactoryConfig) TakesFrames() bool {
	kc, err := c.WriterConfig("")
	return err == nil && kc.Binary
}

var _ pipeline.FramesOnlyTaker = (*FactoryConfig)(nil)

// ReadsValues: the log reads the values of span records (it writes them
// as OperationExecutionRecords once their traces are assembled) and of
// the KiekerMetadataRecord (a log named after it); it copies the frames
// of every other type.
func (c *FactoryConfig) ReadsValues(t *record.Type) bool {
	return t.Name == trace.SpanTypeName || t.Name == record.KiekerMetadataRecord
}

// Factory returns the factory of kieker-log sinks (durable by default).
func Factory() pipeline.SinkFactory {
	return pipeline.NewSinkFactory(Type, pipeline.Durable, func() *FactoryConfig { return &FactoryConfig{} },
		func(c *FactoryConfig, set pipeline.Settings) (pipeline.BuiltSink, error) {
			kc, err := c.WriterConfig(set.DataDir)
			if err != nil {
				return nil, pipeline.Classify(pipeline.ErrConfig, err)
			}
			kc.ConvertSpans = true
			kc.OnUndescribed = func(err error) {
				set.Logger.Warn("kieker log: record type not described", "sink", set.Name, "err", err)
			}
			w, err := logwrite.New(kc)
			if err != nil {
				return nil, pipeline.Classify(pipeline.ErrConfig, err)
			}
			return built{w}, nil
		})
}

type built struct{ *logwrite.Writer }

func (b built) Where() string { return "writing to " + b.Dir() }

// WriterConfig turns the sink's settings (a Kieker properties file first,
// then the sink's own keys, then dataDir for the path) into the writer's
// configuration.
func (c *FactoryConfig) WriterConfig(dataDir string) (logwrite.Config, error) {
	eff := *c
	if c.KiekerProperties != "" {
		p, err := properties.Load(c.KiekerProperties)
		if err != nil {
			return logwrite.Config{}, err
		}
		var base FactoryConfig
		if err := base.ApplyKiekerProperties(p); err != nil {
			return logwrite.Config{}, fmt.Errorf("%s: %w", c.KiekerProperties, err)
		}
		eff = base.overlay(*c)
	}
	if eff.Path == "" {
		eff.Path = dataDir
	}
	comp, err := logdir.ParseCompression(eff.Compression)
	if err != nil {
		return logwrite.Config{}, err
	}
	metadata := true
	if eff.Metadata != nil {
		metadata = *eff.Metadata
	}
	return logwrite.Config{
		Path:                eff.Path,
		Binary:              eff.Format != "ascii",
		Compression:         comp,
		MaxEntriesInFile:    eff.MaxEntriesInFile,
		MaxLogSize:          eff.MaxLogSize,
		MaxLogFiles:         eff.MaxLogFiles,
		BufferSize:          eff.BufferSize,
		FlushEachBatch:      eff.FlushEachBatch,
		Hostname:            eff.Hostname,
		ControllerName:      eff.ControllerName,
		Metadata:            metadata,
		SetLoggingTimestamp: eff.SetLoggingTimestamp,
	}, nil
}

// overlay returns base with every field that top sets replaced by top's.
func (base FactoryConfig) overlay(top FactoryConfig) FactoryConfig {
	str := func(b *string, t string) {
		if t != "" {
			*b = t
		}
	}
	num := func(b *int, t int) {
		if t != 0 {
			*b = t
		}
	}
	str(&base.Path, top.Path)
	str(&base.Format, top.Format)
	str(&base.Compression, top.Compression)
	str(&base.Hostname, top.Hostname)
	str(&base.ControllerName, top.ControllerName)
	num(&base.MaxEntriesInFile, top.MaxEntriesInFile)
	num(&base.MaxLogSize, top.MaxLogSize)
	num(&base.MaxLogFiles, top.MaxLogFiles)
	num(&base.BufferSize, top.BufferSize)
	if top.Metadata != nil {
		base.Metadata = top.Metadata
	}
	base.SetLoggingTimestamp = base.SetLoggingTimestamp || top.SetLoggingTimestamp
	base.FlushEachBatch = base.FlushEachBatch || top.FlushEachBatch
	return base
}

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

// ApplyKiekerProperties configures the sink from the keys of a
// kieker.monitoring.properties file: the monitoring controller's name,
// hostname, metadata and setLoggingTimestamp keys, and the file writer's
// customStoragePath, charsetName, maxEntriesInFile, maxLogSize,
// maxLogFiles, logStreamHandler, flush, bufferSize and compression (for
// Kieker ≤1.13's writer classes too). Other keys are ignored. A writer that
// does not write log directories, a charset other than UTF-8, and
// malformed numbers are errors naming the key.
func (c *FactoryConfig) ApplyKiekerProperties(p *properties.Properties) error {
	writer := defaultKiekerWriter
	if w, ok := p.Get("kieker.monitoring.writer"); ok && w != "" {
		writer = w
	}
	format, ok := kiekerFileWriters[writer]
	if !ok {
		return fmt.Errorf("kieker.monitoring.writer=%s: the bridge writes Kieker log directories; use one of Kieker's file writers (e.g. %s)", writer, defaultKiekerWriter)
	}
	if format != "" {
		c.Format = format
	}
	if v, ok := p.Get("kieker.monitoring.name"); ok && v != "" {
		c.ControllerName = v
	}
	if v, ok := p.Get("kieker.monitoring.hostname"); ok && v != "" {
		c.Hostname = v
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
		c.Metadata = &b
	}
	boolKey("kieker.monitoring.setLoggingTimestamp", &c.SetLoggingTimestamp)

	key := func(name string) string { return writer + "." + name }
	if v, ok := p.Get(key("customStoragePath")); ok && v != "" {
		c.Path = v
	}
	if v, ok := p.Get(key("charsetName")); ok && v != "" && !strings.EqualFold(strings.ReplaceAll(v, "-", ""), "UTF8") {
		errs = append(errs, fmt.Sprintf("%s=%s: only UTF-8 is supported", key("charsetName"), v))
	}
	intKey(key("maxEntriesInFile"), &c.MaxEntriesInFile)
	intKey(key("maxLogSize"), &c.MaxLogSize)
	intKey(key("maxLogFiles"), &c.MaxLogFiles)
	intKey(key("bufferSize"), &c.BufferSize)
	boolKey(key("flush"), &c.FlushEachBatch)
	if v, ok := p.Get(key("logStreamHandler")); ok && v != "" {
		switch {
		case strings.HasSuffix(v, "TextLogStreamHandler"):
			c.Format = "ascii"
		case strings.HasSuffix(v, "BinaryLogStreamHandler"):
			c.Format = "binary"
		default:
			errs = append(errs, fmt.Sprintf("%s=%s: want TextLogStreamHandler or BinaryLogStreamHandler", key("logStreamHandler"), v))
		}
	}
	if v, ok := p.Get(key("compression")); ok && v != "" {
		c.Compression = v // checked where the sink is built
	}
	if len(errs) > 0 {
		return errors.New(strings.Join(errs, "; "))
	}
	return nil
}
