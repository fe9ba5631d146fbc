package stream

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/otlp"
	"github.com/tracebridge/tracebridge/internal/logwrite"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// The formats Dump writes.
const (
	// FormatKieker is a Kieker log directory with ASCII (.dat) files.
	FormatKieker = "kieker"
	// FormatKiekerBinary is a Kieker log directory with binary (.bin)
	// files.
	FormatKiekerBinary = "kieker-binary"
	// FormatOTLPJSON is OTLP/JSON: one ExportTraceServiceRequest per
	// line, a trace each (the OpenTelemetry Collector's file exporter
	// and otlpjsonfile receiver use this form).
	FormatOTLPJSON = "otlp-json"
)

// DumpOptions say what Dump writes.
type DumpOptions struct {
	// Format is FormatKieker (default), FormatKiekerBinary or
	// FormatOTLPJSON.
	Format string
	// Since and Until bound the window by the time the bridge published
	// the records (zero Since: the repository's oldest; zero Until: what
	// the repository holds when Dump begins).
	Since, Until time.Time
	// Types and Hosts select records (nil: all); types by full or short
	// name.
	Types, Hosts []string
}

// DumpStats say what Dump wrote.
type DumpStats struct {
	// Records written (Kieker logs: spans as OperationExecutionRecords
	// count as the records they became, and the log's own
	// KiekerMetadataRecord, its first, counts too); Traces and Spans
	// written as OTLP.
	Records, Traces, Spans int64
	// Missed counts records of the window retention removed while the
	// dump read (OnGap).
	Missed uint64
	// Dir is the Kieker log directory written (under out); File the OTLP
	// file.
	Dir, File string
}

// Dump writes a window of the repository (JFR's dump) to out: for the
// Kieker formats a log directory created inside the directory out (as
// `serve` writes them), which `tracebridge cat` and Kieker's readers
// read; for OTLP JSON the file out. Spans (OTLP, zorka) go into Kieker
// logs as OperationExecutionRecords; Kieker traces go into OTLP JSON as
// the spans the trace assembler builds of them.
func (s *Stream) Dump(ctx context.Context, out string, o DumpOptions) (DumpStats, error) {
	d := s.fork()
	d.caughtUp = true
	if !o.Since.IsZero() {
		d.SetStartTime(o.Since)
	} else {
		d.SetStartSequence(1)
	}
	if !o.Until.IsZero() {
		d.endTime = o.Until
	}
	d.SetHosts(o.Hosts...)
	var st DumpStats
	d.OnGap(func(g Gap) { st.Missed += g.Records })
	var handle func(*Event)
	var finish func() error
	switch o.Format {
	case "", FormatKieker, FormatKiekerBinary:
		h, f, err := kiekerDump(out, o.Format == FormatKiekerBinary, &st)
		if err != nil {
			return st, err
		}
		handle, finish = h, f
	case FormatOTLPJSON:
		h, f, err := otlpDump(out, &st)
		if err != nil {
			return st, err
		}
		handle, finish = h, f
	default:
		return st, fmt.Errorf("dump: format %q: want %s, %s or %s", o.Format, FormatKieker, FormatKiekerBinary, FormatOTLPJSON)
	}
	if len(o.Types) == 0 {
		d.OnEvent("", handle)
	}
	for _, t := range o.Types {
		d.OnEvent(t, handle)
	}
	var errs []error
	d.OnError(func(err error) { errs = append(errs, err) })
	err := d.Start(ctx)
	if ferr := finish(); err == nil {
		err = ferr
	}
	if err == nil && len(errs) > 0 {
		err = fmt.Errorf("dump: %d messages could not be read: %w", len(errs), errors.Join(errs[:min(len(errs), 3)]...))
	}
	return st, err
}

// kiekerDump writes events to a Kieker log directory in dir.
func kiekerDump(dir string, binary bool, st *DumpStats) (func(*Event), func() error, error) {
	w, err := logwrite.New(logwrite.Config{Path: dir, Binary: binary, Metadata: true, ControllerName: "tracebridge-dump", ConvertSpans: true})
	if err != nil {
		return nil, nil, err
	}
	st.Dir = w.Dir()
	var b record.Batch
	var werr error
	asm := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Sources: trace.SourcesOf(trace.FromSpan), Emit: func(t *trace.Trace) {
		if werr == nil {
			werr = w.ConsumeTraces(context.Background(), []*trace.Trace{t})
		}
	}})
	flush := func() {
		if b.Len() > 0 && werr == nil {
			werr = w.Consume(context.Background(), &b)
		}
		b.Reset()
	}
	handle := func(e *Event) {
		if e.Type.Name == trace.SpanTypeName {
			asm.Add(&e.Record, &e.Origin)
			return
		}
		b.AddRecord(&e.Record)
		if b.Len() >= 1024 {
			flush()
		}
	}
	finish := func() error {
		flush()
		asm.Flush()
		err := errors.Join(werr, w.Close())
		st.Records = w.Records()
		return err
	}
	return handle, finish, nil
}

// otlpDump writes the traces assembled from events to the file path as
// OTLP JSON lines.
func otlpDump(path string, st *DumpStats) (func(*Event), func() error, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, nil, err
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	st.File = path
	bw := bufio.NewWriterSize(f, 256<<10)
	var line []byte
	var werr error
	asm := trace.NewAssembler(trace.Options{Clock: trace.RecordClock, Emit: func(t *trace.Trace) {
		line = appendOTLPLine(line[:0], t)
		if _, err := bw.Write(line); err != nil && werr == nil {
			werr = err
		}
		st.Traces++
		st.Spans += int64(len(t.Spans))
	}})
	handle := func(e *Event) {
		st.Records++
		asm.Add(&e.Record, &e.Origin)
	}
	finish := func() error {
		asm.Flush()
		return errors.Join(werr, bw.Flush(), f.Close())
	}
	return handle, finish, nil
}

// appendOTLPLine appends t as one OTLP/JSON ExportTraceServiceRequest
// (otlp.AppendTraceJSON: the spans' resources and scopes, every
// attribute) and a newline.
func appendOTLPLine(dst []byte, t *trace.Trace) []byte {
	return append(otlp.AppendTraceJSON(dst, t), '\n')
}
