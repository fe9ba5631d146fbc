// Package logwrite writes records as a Kieker log directory that Kieker's
// own readers accept: Kieker ≥1.13 directory and file names, kieker.map,
// ASCII (.dat) or binary (.bin) data files, rotation, retention and
// compression (see internal/logdir), one string registry per writer with
// ids from 0.
//
// Record types that Kieker's built-in catalogue lacks (JFR event types,
// user types, span records) are described in IRL files beside kieker.map
// (TypesFilePrefix), so the log reads without the types' source; a type
// whose name the log already describes with other fields continues the log
// in a new directory.
//
// Durability: kieker.map entries and IRL files reach the operating system
// before any data that uses them, and Flush hands all data written so far to the operating
// system in a decodable form, so a process killed at any moment leaves every
// record written before the last Flush readable.
//
// Concurrency: a Writer may be used from several goroutines; Consume, Flush
// and Close serialise on a mutex.
package logwrite

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/logdir"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Config configures a Writer. Its fields mirror Kieker's FileWriter keys.
type Config struct {
	// Path is the directory in which the log directory is created
	// (Kieker's customStoragePath).
	Path string
	// Binary writes .bin files (BinaryLogStreamHandler); else .dat.
	Binary bool
	// Compression of the data files.
	Compression logdir.Compression
	// MaxEntriesInFile, MaxLogSize (MiB) and MaxLogFiles as in Kieker
	// (see logdir.Options): 0 means Kieker's defaults (25000, unlimited,
	// unlimited).
	MaxEntriesInFile int
	MaxLogSize       int
	MaxLogFiles      int
	// BufferSize of the data file writer (Kieker's bufferSize).
	BufferSize int
	// FlushEachBatch flushes after every consumed batch (Kieker's flush=true
	// flushes after every record; a batch is the unit here).
	FlushEachBatch bool

	// Hostname and ControllerName name the directory and fill the
	// KiekerMetadataRecord (kieker.monitoring.hostname / .name). An empty
	// Hostname means the machine's host name; an empty ControllerName
	// "KIEKER".
	Hostname       string
	ControllerName string
	// Metadata writes a KiekerMetadataRecord as the first record
	// (kieker.monitoring.metadata, Kieker's default true). Converters that
	// copy a log's own metadata record turn it off.
	Metadata bool
	// ExperimentID fills the metadata record's experimentId.
	ExperimentID int
	// SetLoggingTimestamp stamps records that carry no logging timestamp
	// (-1) with the time they are written, in nanoseconds since the epoch
	// (kieker.monitoring.setLoggingTimestamp).
	SetLoggingTimestamp bool
	// NameFromMetadata delays creating the directory until the first
	// batch and takes the host and controller name from the first
	// KiekerMetadataRecord in it (used when re-writing a log, whose own
	// metadata record is copied, so the output holds exactly the input's
	// records).
	NameFromMetadata bool

	// MaxRegistryEntries bounds a binary log's string registry (its
	// kieker.map): before it would be exceeded the writer continues in a
	// new log directory with a new registry, so memory stays bounded and
	// every log stays readable by readers with the same limit. Default
	// kieker.DefaultMaxRegistryEntries, the reader's default limit.
	MaxRegistryEntries int

	// Now gives the time for names and timestamps; nil means time.Now.
	Now func() time.Time

	// ConvertSpans writes spans (trace.SpanType records: OTLP, zorka)
	// as Kieker's OperationExecutionRecords once their trace is
	// assembled (ConsumeTraces), instead of as span records, so Kieker's
	// own tools read them. serve's kieker-log sinks set it.
	ConvertSpans bool

	// OnUndescribed hears about a record type that is not in Kieker's
	// built-in catalogue and that IRL cannot describe (a name without a
	// package, a name with a line break): the log holds its records, but
	// reading them needs its description. Once per type and log
	// directory. Nil: ignored.
	OnUndescribed func(error)
}

// Version is what the KiekerMetadataRecord written by tracebridge gives as
// the Kieker version: the record format it follows.
const Version = "2.0.3"

// Writer is a Kieker log sink.
type Writer struct {
	cfg Config

	mu      sync.Mutex
	dir     string
	dirs    []string // every log directory created, dir last
	mapFile *os.File
	files   *logdir.Files
	closed  bool
	err     error // sticky write error

	registry  *kieker.Registry // binary: every string; ASCII: class names
	enc       *kieker.Encoder
	rec       *kieker.Recoder // binary: records whose frames the decoder kept
	buf       []byte
	mapBuf    []byte
	metaType  *record.Type
	records   int64
	rollovers int

	oerType *record.Type
	keep    []record.Record // Consume's records without span records (ConvertSpans)
	oers    record.Batch    // ConsumeTraces' records
	// unpack reads packed traces' spans (lean: their shape only).
	unpack trace.Unpacker

	types *describer // the IRL files beside kieker.map
}

var _ pipeline.Sink = (*Writer)(nil)

// New creates the log directory (unless NameFromMetadata defers it) and
// returns the writer.
func New(cfg Config) (*Writer, error) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Hostname == "" {
		cfg.Hostname, _ = os.Hostname()
	}
	if cfg.ControllerName == "" {
		cfg.ControllerName = "KIEKER"
	}
	if cfg.Path == "" {
		cfg.Path = "."
	}
	w := &Writer{cfg: cfg, registry: &kieker.Registry{}, metaType: record.Builtin().Lookup(record.KiekerMetadataRecord)}
	w.types = newDescriber(func(_ *record.Type, err error) {
		if w.cfg.OnUndescribed != nil {
			w.cfg.OnUndescribed(fmt.Errorf("kieker log %s: %w; reading its records needs -L", w.dir, err))
		}
	})
	w.enc = kieker.NewEncoder(kieker.EncoderOptions{Registry: w.registry})
	w.rec = kieker.NewRecoder(w.registry)
	if !cfg.NameFromMetadata {
		if err := w.open(); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// Dir returns the log directory ("" until it is created).
func (w *Writer) Dir() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dir
}

// Dirs returns every log directory the writer created, in order: more
// than one when a binary log's registry filled up (see
// Config.MaxRegistryEntries).
func (w *Writer) Dirs() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.dirs...)
}

// Records returns the number of records written.
func (w *Writer) Records() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.records
}

func (w *Writer) open() error {
	now := w.cfg.Now().UTC()
	if err := os.MkdirAll(w.cfg.Path, 0o755); err != nil {
		return fmt.Errorf("kieker log: %w", err)
	}
	// The log directory is new, never an existing one: the nanoTime part
	// (Java's System.nanoTime there) makes names unique; step it on a
	// clash.
	var dir string
	for nano := now.UnixNano(); ; nano++ {
		dir = filepath.Join(w.cfg.Path, logdir.DirName(now, nano, w.cfg.Hostname, w.cfg.ControllerName))
		err := os.Mkdir(dir, 0o755)
		if err == nil {
			w.dirs = append(w.dirs, dir)
			break
		}
		if !errors.Is(err, fs.ErrExist) || nano-now.UnixNano() > 1000 {
			return fmt.Errorf("kieker log: %w", err)
		}
	}
	mf, err := os.OpenFile(filepath.Join(dir, logdir.MapFile), os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("kieker log: %w", err)
	}
	files, err := logdir.NewFiles(logdir.Options{
		Dir:              dir,
		Binary:           w.cfg.Binary,
		Compression:      w.cfg.Compression,
		MaxEntriesInFile: w.cfg.MaxEntriesInFile,
		MaxLogSize:       w.cfg.MaxLogSize,
		MaxLogFiles:      w.cfg.MaxLogFiles,
		BufferSize:       w.cfg.BufferSize,
		Now:              w.cfg.Now,
	})
	if err != nil {
		mf.Close()
		return fmt.Errorf("kieker log: %w", err)
	}
	w.dir, w.mapFile, w.files = dir, mf, files
	w.types.reset()
	if w.cfg.Metadata {
		var b record.Batch
		m := b.Add(w.metaType, record.NoTimestamp)
		m.Values[0] = record.StringValue(Version)
		m.Values[1] = record.StringValue(w.cfg.ControllerName)
		m.Values[2] = record.StringValue(w.cfg.Hostname)
		m.Values[3] = record.IntValue(int64(w.cfg.ExperimentID))
		m.Values[4] = record.BoolValue(false)
		m.Values[5] = record.IntValue(0)
		m.Values[6] = record.StringValue("NANOSECONDS")
		m.Values[7] = record.IntValue(0)
		if w.cfg.SetLoggingTimestamp {
			m.LoggingTimestamp = now.UnixNano()
		}
		if err := w.write(b.Records, nil); err != nil {
			files.Close()
			mf.Close()
			w.mapFile, w.files = nil, nil
			return err
		}
	}
	return nil
}

// Consume writes the records of b.
func (w *Writer) Consume(_ context.Context, b *record.Batch) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if w.files == nil {
		w.nameFromMetadata(b.Records)
		if err := w.open(); err != nil {
			w.err = err
			return err
		}
	}
	if w.cfg.Binary && b.Frames.Only() {
		if err := w.writeFrames(&b.Frames); err != nil {
			w.err = err
			return err
		}
		if w.cfg.FlushEachBatch {
			return w.flush()
		}
		return nil
	}
	recs := b.Records
	if w.cfg.ConvertSpans {
		recs = w.withoutSpans(recs)
	}
	// The frames the records were decoded from, when the decoder kept them
	// and they still match (record.Frames): copied with the log's ids
	// instead of encoded.
	var frames *record.Frames
	if w.cfg.Binary && len(recs) == len(b.Records) && b.Frames.Valid(len(recs)) {
		frames = &b.Frames
	}
	if err := w.write(recs, frames); err != nil {
		w.err = err
		return err
	}
	if w.cfg.FlushEachBatch {
		return w.flush()
	}
	return nil
}

// usable says why the writer cannot write: it is closed, or an earlier
// write failed (nil when it can). w.mu is held.
func (w *Writer) usable() error {
	if w.closed {
		return fmt.Errorf("kieker log %s: %w", w.dir, logdir.ErrClosed)
	}
	return w.err
}

// withoutSpans returns recs without span records (which ConsumeTraces
// writes once their traces are assembled).
func (w *Writer) withoutSpans(recs []record.Record) []record.Record {
	i := 0
	for i < len(recs) && recs[i].Type.Name != trace.SpanTypeName {
		i++
	}
	if i == len(recs) {
		return recs
	}
	w.keep = append(w.keep[:0], recs[:i]...)
	for _, r := range recs[i+1:] {
		if r.Type.Name != trace.SpanTypeName {
			w.keep = append(w.keep, r)
		}
	}
	return w.keep
}

var _ pipeline.LeanTraceConsumer = (*Writer)(nil)

// LeanTraces: OperationExecutionRecords hold no attributes, events or
// links.
func (w *Writer) LeanTraces() bool { return true }

var _ pipeline.PackedTraceConsumer = (*Writer)(nil)

// PackedTraces: ConsumeTraces reads a packed trace through its own
// trace.Unpacker (lean) and keeps none of its Spans, so traces of span
// records reach the log (and a store beside it) without being made of
// Spans. The strings of the records written point into the trace's
// bytes, which are never written again; the registry keeps its own
// copies of new strings.
func (w *Writer) PackedTraces() bool { return true }

// TraceSources: with ConvertSpans the writer takes the traces assembled
// from span records (the others are in the log as their own records).
func (w *Writer) TraceSources() trace.Sources {
	if !w.cfg.ConvertSpans {
		return 0
	}
	return trace.SourcesOf(trace.FromSpan)
}

// ConsumeTraces writes the spans of assembled traces as Kieker
// OperationExecutionRecords: one traceId per trace (the low 64 bits of its
// id), eoi in call order and ess the nesting depth (Kieker's executions),
// tin and tout the span's start and end, operationSignature the span name
// unchanged, hostname the span's service (its host when it names no
// service), sessionId Kieker's "<no-session-id>". Kieker's own readers and
// trace analysis read the result; what OperationExecutionRecords cannot
// hold (kind, attributes, events, links, status) stays in the trace store.
func (w *Writer) ConsumeTraces(_ context.Context, ts []*trace.Trace) error {
	if !w.cfg.ConvertSpans {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if w.oerType == nil {
		w.oerType = record.Builtin().Lookup(record.OperationExecutionRecord)
	}
	// In chunks: a batch that stays small stays in the cache.
	w.oers.Reset()
	w.unpack.Lean = true
	defer w.unpack.Release()
	for _, t := range ts {
		t = w.unpack.Trace(t)
		kid := int64(t.ID.Lo)
		if kid == -1 { // -1 means "no trace" to Kieker
			kid = int64(t.ID.Hi)
		}
		eoi := 0
		for i := range t.Spans {
			sp := &t.Spans[i]
			if sp.Source != trace.FromSpan {
				continue
			}
			host := sp.Service
			if host == "" {
				host = sp.Host
			}
			r := w.oers.Add(w.oerType, record.NoTimestamp)
			v := r.Values
			v[0] = record.StringValue(sp.Operation)
			v[1] = noSession
			v[2] = record.IntValue(kid)
			v[3] = record.IntValue(sp.Start)
			v[4] = record.IntValue(sp.End)
			v[5] = record.StringValue(host)
			v[6] = record.IntValue(int64(eoi))
			v[7] = record.IntValue(int64(sp.Depth))
			eoi++
		}
		if w.oers.Len() >= oerChunk {
			if err := w.writeOERs(); err != nil {
				return err
			}
		}
	}
	if err := w.writeOERs(); err != nil {
		return err
	}
	if w.cfg.FlushEachBatch {
		return w.flush()
	}
	return nil
}

// oerChunk is how many OperationExecutionRecords ConsumeTraces converts
// before it writes them.
const oerChunk = 4096

// writeOERs writes and empties w.oers. The lock is held.
func (w *Writer) writeOERs() error {
	if w.oers.Len() == 0 {
		return nil
	}
	defer w.oers.Reset()
	if w.files == nil {
		if err := w.open(); err != nil {
			w.err = err
			return err
		}
	}
	if err := w.write(w.oers.Records, nil); err != nil {
		w.err = err
		return err
	}
	return nil
}

// noSession is the sessionId of the OperationExecutionRecords written for
// spans: Kieker's own "no session" (a per-trace value would put a string
// into the log's registry per trace; the full trace id stays in the trace
// store).
var noSession = record.StringValue("<no-session-id>")

// nameFromMetadata takes the names from the first KiekerMetadataRecord in
// recs and reports whether there was one.
func (w *Writer) nameFromMetadata(recs []record.Record) bool {
	for i := range recs {
		if recs[i].Type.Name != record.KiekerMetadataRecord || len(recs[i].Values) < 3 {
			continue
		}
		if c := recs[i].Values[1].Str(); c != "" {
			w.cfg.ControllerName = c
		}
		w.cfg.Hostname = recs[i].Values[2].Str()
		return true
	}
	return false
}

// write encodes recs in chunks that fit the current data file, writing new
// kieker.map entries before the data that uses them. frames, if not nil,
// holds the frame of every record of recs (Frames.Valid).
func (w *Writer) write(recs []record.Record, frames *record.Frames) error {
	base := 0 // the index in frames of recs[0]
	var stamp int64
	if w.cfg.SetLoggingTimestamp {
		stamp = w.cfg.Now().UnixNano()
	}
	for len(recs) > 0 {
		n := min(w.files.Room(), len(recs))
		switch i := w.types.conflict(w.types.unseen(recs[:n])); {
		case i == 0:
			// A type this log describes already with other fields (the
			// same JFR event type from another JVM version): a log
			// describes one layout per name, so continue in a new one.
			if err := w.rollover(); err != nil {
				return err
			}
			continue
		case i > 0:
			n = i
		}
		before := w.registry.Len()
		w.buf = w.buf[:0]
		w.mapBuf = w.mapBuf[:0]
		if frames != nil {
			if err := w.recode(recs[:n], frames, base, stamp); err != nil {
				return fmt.Errorf("kieker log %s: %w", w.dir, err)
			}
		} else {
			for i := range recs[:n] {
				if err := w.encode(&recs[i], stamp); err != nil {
					return fmt.Errorf("kieker log %s: %w", w.dir, err)
				}
			}
		}
		if w.full() && before > 0 {
			// The chunk would take the registry past its limit: nothing of
			// it was written yet; continue in a new log directory and
			// encode the chunk again there.
			if err := w.rollover(); err != nil {
				return err
			}
			continue
		}
		// Types first, then registry entries, then the data that uses
		// them.
		w.types.add(w.types.unseen(recs[:n]))
		if err := w.types.flush(w.dir); err != nil {
			return fmt.Errorf("kieker log %s: record types: %w", w.dir, err)
		}
		if len(w.mapBuf) > 0 {
			if _, err := w.mapFile.Write(w.mapBuf); err != nil {
				return fmt.Errorf("kieker log %s: %w", w.dir, err)
			}
		}
		if err := w.files.Write(w.buf, n); err != nil {
			return fmt.Errorf("kieker log %s: %w", w.dir, err)
		}
		w.records += int64(n)
		recs = recs[n:]
		base += n
	}
	return nil
}

// writeFrames writes a batch of frames only (record.Frames.Only) as write
// writes records: in chunks that fit the current data file, each frame
// copied with the log's ids (kieker.Recoder.AppendOnly), new kieker.map
// entries and type descriptions before the data that uses them.
func (w *Writer) writeFrames(f *record.Frames) error {
	var stamp int64
	if w.cfg.SetLoggingTimestamp {
		stamp = w.cfg.Now().UnixNano()
	}
	// Mostly every type of the batch is known already: its tally of
	// types (Frames.Counts) says so, without a pass over the frames.
	described := w.types.seenAll(f)
	for base := 0; base < len(f.Types); {
		n := min(w.files.Room(), len(f.Types)-base)
		i := -1
		if !described {
			i = w.types.conflict(w.types.unseenTypes(f.Types[base : base+n]))
		}
		switch {
		case i == 0:
			if err := w.rollover(); err != nil {
				return err
			}
			described = false // a new directory describes nothing yet
			continue
		case i > 0:
			n = i
		}
		before := w.registry.Len()
		w.buf = w.buf[:0]
		w.mapBuf = w.mapBuf[:0]
		var err error
		if w.buf, err = w.rec.AppendOnly(w.buf, f, base, base+n); err != nil {
			return fmt.Errorf("kieker log %s: %w", w.dir, err)
		}
		w.recodedEntries()
		if stamp != 0 {
			first := frameStart(f, base)
			for k := base; k < base+n; k++ {
				at := frameStart(f, k) - first + 4
				if int64(binary.BigEndian.Uint64(w.buf[at:])) == record.NoTimestamp {
					binary.BigEndian.PutUint64(w.buf[at:], uint64(stamp))
				}
			}
		}
		if w.full() && before > 0 {
			if err := w.rollover(); err != nil {
				return err
			}
			described = false // a new directory describes nothing yet
			continue
		}
		if !described {
			w.types.add(w.types.unseenTypes(f.Types[base : base+n]))
			if err := w.types.flush(w.dir); err != nil {
				return fmt.Errorf("kieker log %s: record types: %w", w.dir, err)
			}
		}
		if len(w.mapBuf) > 0 {
			if _, err := w.mapFile.Write(w.mapBuf); err != nil {
				return fmt.Errorf("kieker log %s: %w", w.dir, err)
			}
		}
		if err := w.files.Write(w.buf, n); err != nil {
			return fmt.Errorf("kieker log %s: %w", w.dir, err)
		}
		w.records += int64(n)
		base += n
	}
	return nil
}

// recode appends the frames of recs (frames[base:]) with the log's ids,
// encoding the records the Recoder leaves (kieker.Recoder.Append); stamp,
// if not 0, replaces a missing logging timestamp. Binary logs only.
func (w *Writer) recode(recs []record.Record, frames *record.Frames, base int, stamp int64) error {
	for i := 0; i < len(recs); {
		start := len(w.buf)
		var n int
		w.buf, n = w.rec.Append(w.buf, recs[i:], frames, base+i)
		if stamp != 0 {
			// The copies are as long as the frames: record k's is where
			// its frame is, relative to the first one's.
			first := frameStart(frames, base+i)
			for k := range recs[i : i+n] {
				if recs[i+k].LoggingTimestamp == record.NoTimestamp {
					at := start + frameStart(frames, base+i+k) - first
					binary.BigEndian.PutUint64(w.buf[at+4:], uint64(stamp))
				}
			}
		}
		i += n
		if i < len(recs) {
			w.recodedEntries() // kieker.map in id order
			if err := w.encode(&recs[i], stamp); err != nil {
				return err
			}
			i++
		}
	}
	w.recodedEntries()
	return nil
}

// frameStart is where frame i starts in f.Data.
func frameStart(f *record.Frames, i int) int {
	if i == 0 {
		return 0
	}
	return f.Ends[i-1]
}

// recodedEntries appends the Recoder's new registry entries to w.mapBuf.
func (w *Writer) recodedEntries() {
	for _, e := range w.rec.NewEntries() {
		w.mapBuf = kieker.AppendMapEntry(w.mapBuf, e.ID, e.Value)
	}
}

// full reports whether a binary log's registry passed its limit.
func (w *Writer) full() bool {
	if !w.cfg.Binary {
		return false // an ASCII registry lists class names only
	}
	max := w.cfg.MaxRegistryEntries
	if max <= 0 {
		max = kieker.DefaultMaxRegistryEntries
	}
	return w.registry.Len() > max
}

// rollover continues in a new log directory with a new registry (and new
// IRL files).
func (w *Writer) rollover() error {
	if err := errors.Join(w.files.Close(), w.mapFile.Close()); err != nil {
		return fmt.Errorf("kieker log %s: %w", w.dir, err)
	}
	w.registry = &kieker.Registry{}
	w.enc = kieker.NewEncoder(kieker.EncoderOptions{Registry: w.registry})
	w.rec = kieker.NewRecoder(w.registry)
	w.rollovers++
	return w.open()
}

// Rollovers returns how many times the writer continued in a new log
// directory because the string registry was full.
func (w *Writer) Rollovers() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.rollovers
}

// encode appends r to w.buf (its new registry entries to w.mapBuf); stamp,
// if not 0, replaces a missing logging timestamp.
func (w *Writer) encode(r *record.Record, stamp int64) error {
	if stamp != 0 && r.LoggingTimestamp == record.NoTimestamp {
		c := *r
		c.LoggingTimestamp = stamp
		r = &c
	}
	if w.cfg.Binary {
		var err error
		if w.buf, err = w.enc.Append(w.buf, r); err != nil {
			return err
		}
		for _, e := range w.enc.NewEntries() {
			w.mapBuf = kieker.AppendMapEntry(w.mapBuf, e.ID, e.Value)
		}
		return nil
	}
	if len(r.Values) != len(r.Type.Fields) {
		return fmt.Errorf("record %s has %d values for %d fields", r.Type.Name, len(r.Values), len(r.Type.Fields))
	}
	id, isNew := w.registry.ID(r.Type.Name)
	if isNew {
		w.mapBuf = kieker.AppendMapEntry(w.mapBuf, id, r.Type.Name)
	}
	w.buf = kieker.AppendLine(w.buf, id, r)
	return nil
}

// Flush hands everything written so far to the operating system.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flush()
}

func (w *Writer) flush() error {
	if w.files == nil || w.closed {
		return nil
	}
	if err := w.files.Flush(); err != nil {
		return fmt.Errorf("kieker log %s: %w", w.dir, err)
	}
	return nil
}

// Close flushes and closes the log. It is safe to call twice.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	if w.files == nil {
		return nil
	}
	return errors.Join(w.files.Close(), w.mapFile.Close())
}
