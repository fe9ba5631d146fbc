// Package kiekerlog reads Kieker log directories as a source: every record
// of every log found under a path, in Kieker's order, handed downstream in
// batches. It combines internal/logdir (which files, in which order, how
// compressed) with internal/codec/kieker (kieker.map, .dat lines, .bin
// frames).
//
// A log directory may describe its record types in IRL files beside
// kieker.map (see Options.Catalog): they are loaded for that log.
//
// Memory does not grow with the size of a log: each data file is streamed
// through one read buffer and one batch.
//
// The end of a log's last data file may have been cut by a writer killed
// while writing (see Options.OnCutEnd): the records before the cut are
// read and the cut is reported, not treated as malformed data.
//
// Concurrency: a Reader runs on the goroutine that calls Run; Consumed and
// Size may be read from any goroutine (for progress bars).
package kiekerlog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/irl"
	"github.com/tracebridge/tracebridge/internal/logdir"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Options configure a Reader.
type Options struct {
	// Catalog resolves class names; nil means record.Builtin(). The IRL
	// files (*.irl) in a log directory, such as the ones
	// internal/logwrite writes beside kieker.map for JFR and other
	// types Kieker lacks, add to it for that log; where they describe a
	// type of Catalog differently, the log's own description wins.
	Catalog *record.Catalog
	// SkipBad skips a malformed record (an ASCII line; for a binary file,
	// whose frames cannot be re-synchronised, the rest of the file) instead
	// of stopping, and counts it. OnSkip hears about each one.
	SkipBad bool
	OnSkip  func(err error)
	// OnCutEnd hears about a log whose last data file ends early, as a
	// writer killed while writing leaves it (a compressed stream cut
	// short, a binary file ending inside a record, a last line without its
	// line end that does not parse; one that parses is a record): every complete record before the cut has been
	// handed on, and reading goes on with the next log, without SkipBad.
	// err names the file and the offset. The same in any other data file
	// of a log is malformed data (an error, or a skip with SkipBad).
	OnCutEnd func(err error)
	// BatchSize is the number of records handed downstream at a time
	// (default 1024).
	BatchSize int
	// ReadBufferSize is the size of the read buffer (default 256 KiB).
	ReadBufferSize int
	// Strict stops at a record whose type is not in the catalogue, as at
	// any malformed record. Otherwise such records are skipped and counted
	// per type (Stats.Unknown), as Kieker's own reader does, and the rest
	// of the log is read; in a binary file, whose records carry no length,
	// the rest of that file cannot be framed and is skipped
	// (Stats.UnknownTails).
	Strict bool
}

// Stats count what a Reader did.
type Stats struct {
	Logs, Files int
	Records     int64
	// Skipped counts malformed records skipped (SkipBad); SkippedTails
	// counts the files among them whose rest had to be skipped because
	// their records could not be framed again (binary files, overlong
	// lines, truncated compressed streams).
	Skipped      int64
	SkippedTails int64
	// Unknown counts the records skipped because their type is not in
	// the catalogue, by class name (without Strict). UnknownTails names
	// the binary files whose rest was skipped after such a record, with
	// the offset.
	Unknown      map[string]int64
	UnknownTails []string
	// CutEnds counts logs whose last data file ended early (see
	// Options.OnCutEnd).
	CutEnds int64
}

// Add adds o's counts to s (as for the readers of one command).
func (s *Stats) Add(o Stats) {
	s.Logs += o.Logs
	s.Files += o.Files
	s.Records += o.Records
	s.Skipped += o.Skipped
	s.SkippedTails += o.SkippedTails
	for k, n := range o.Unknown {
		if s.Unknown == nil {
			s.Unknown = map[string]int64{}
		}
		s.Unknown[k] += n
	}
	s.UnknownTails = append(s.UnknownTails, o.UnknownTails...)
	s.CutEnds += o.CutEnds
}

// Reader reads the Kieker logs found under one path.
type Reader struct {
	path string
	logs []*logdir.Log
	opts Options

	records, skipped, tails, cutEnds atomic.Int64
	files                            atomic.Int64

	umu          sync.Mutex
	unknown      map[string]int64
	unknownTails []string
}

// Open finds the logs under path (a log directory, a directory of logs, or
// a Kieker ≤1.12 per-thread zip).
func Open(path string, o Options) (*Reader, error) {
	logs, err := logdir.Discover(path)
	if err != nil {
		return nil, err
	}
	if o.Catalog == nil {
		o.Catalog = record.Builtin()
	}
	if o.BatchSize <= 0 {
		o.BatchSize = 1024
	}
	if o.ReadBufferSize < 4096 {
		o.ReadBufferSize = 256 << 10
	}
	return &Reader{path: path, logs: logs, opts: o}, nil
}

// Logs returns the logs the reader will read, in order.
func (r *Reader) Logs() []*logdir.Log { return r.logs }

// Size returns the total (compressed) size of all data files.
func (r *Reader) Size() int64 {
	var n int64
	for _, l := range r.logs {
		n += l.Size()
	}
	return n
}

// Consumed returns how many (compressed) bytes have been read so far.
func (r *Reader) Consumed() int64 {
	var n int64
	for _, l := range r.logs {
		n += l.Consumed()
	}
	return n
}

// Stats returns the counts so far.
func (r *Reader) Stats() Stats {
	st := Stats{Logs: len(r.logs), Files: int(r.files.Load()), Records: r.records.Load(), Skipped: r.skipped.Load(), SkippedTails: r.tails.Load(), CutEnds: r.cutEnds.Load()}
	r.umu.Lock()
	defer r.umu.Unlock()
	if len(r.unknown) > 0 {
		st.Unknown = maps.Clone(r.unknown)
		st.UnknownTails = slices.Clone(r.unknownTails)
	}
	return st
}

// unknownType counts a record of a type not in the catalogue and reports
// whether it was (err is such an error and Strict is off).
func (r *Reader) unknownType(err error, tail string) bool {
	var ke *kieker.Error
	if r.opts.Strict || !errors.Is(err, kieker.ErrUnknownType) || !errors.As(err, &ke) {
		return false
	}
	r.umu.Lock()
	defer r.umu.Unlock()
	if r.unknown == nil {
		r.unknown = map[string]int64{}
	}
	r.unknown[ke.Class]++
	if tail != "" {
		r.unknownTails = append(r.unknownTails, fmt.Sprintf("%s from offset %d", tail, ke.Offset))
	}
	return true
}

// Run reads every record and hands them to next in batches. It stops at the
// first malformed record unless SkipBad is set, returning an error that names
// the file, the line or byte offset, and the reason. Records before a bad
// one have been handed on.
func (r *Reader) Run(ctx context.Context, next pipeline.Consumer) error {
	run := &run{r: r, ctx: ctx, next: next, buf: make([]byte, r.opts.ReadBufferSize)}
	for _, l := range r.logs {
		if err := run.log(l); err != nil {
			return err
		}
	}
	return run.flush()
}

type run struct {
	r     *Reader
	ctx   context.Context
	next  pipeline.Consumer
	buf   []byte
	batch record.Batch
	cat   *record.Catalog // the log's: the options' with the log's own IRL files
}

func (x *run) flush() error {
	if x.batch.Len() == 0 {
		return nil
	}
	n := x.batch.Len()
	err := x.next.Consume(x.ctx, &x.batch)
	x.batch.Reset()
	if err != nil {
		return err
	}
	x.r.records.Add(int64(n))
	return nil
}

// maybeFlush hands the batch on when it is full, and reports a cancelled
// context: after every decoded buffer, so reading stops within one
// buffer's worth of records.
func (x *run) maybeFlush() error {
	if x.batch.Len() >= x.r.opts.BatchSize {
		if err := x.flush(); err != nil {
			return err
		}
	}
	return x.ctx.Err()
}

// skip records a skipped bad record, or returns err when skipping is off.
func (x *run) skip(err error) error {
	if !x.r.opts.SkipBad {
		// Hand on the records before the bad one, then stop.
		if ferr := x.flush(); ferr != nil {
			return ferr
		}
		return err
	}
	x.r.skipped.Add(1)
	if x.r.opts.OnSkip != nil {
		x.r.opts.OnSkip(err)
	}
	return nil
}

func (x *run) log(l *logdir.Log) error {
	cat, err := logCatalog(l.Path, x.r.opts.Catalog)
	if err != nil {
		if err := x.skip(fmt.Errorf("kieker log %s: record types: %w", l.Path, err)); err != nil {
			return err
		}
		cat = x.r.opts.Catalog
	}
	x.cat = cat
	strs := kieker.NewStrings(0)
	m, err := l.OpenMap()
	if err != nil {
		return fmt.Errorf("kieker log %s: %w", l.Path, err)
	}
	err = kieker.ReadMap(m, strs, 0)
	m.Close()
	if err != nil {
		if err := x.skip(fmt.Errorf("kieker log %s: %s: %w", l.Path, logdir.MapFile, err)); err != nil {
			return err
		}
	}
	interner := &record.Interner{}
	files := l.DataFiles()
	for i, df := range files {
		x.r.files.Add(1)
		if err := x.file(df, strs, interner, i == len(files)-1); err != nil {
			return err
		}
	}
	return nil
}

// cutEnd reports the early end of a log's last data file (see
// Options.OnCutEnd).
func (x *run) cutEnd(err error) error {
	x.r.cutEnds.Add(1)
	if x.r.opts.OnCutEnd != nil {
		x.r.opts.OnCutEnd(err)
	}
	return x.maybeFlush()
}

// file reads one data file; last says it is the last one of its log, whose
// end may have been cut by a killed writer.
func (x *run) file(df logdir.DataFile, strs *kieker.Strings, interner *record.Interner, last bool) error {
	s, err := df.Open()
	if err != nil {
		return fmt.Errorf("kieker log: %w", err)
	}
	defer s.Close()
	name := s.Path
	if s.Format.Compression != logdir.None {
		name += " (decompressed)"
	}
	if s.Format.Text {
		d := kieker.NewTextDecoder(kieker.TextOptions{Catalog: x.cat, Strings: strs, Interner: interner})
		return x.stream(s, name, d.Decode, func(rest []byte) (bool, error) {
			// A last line without a line end is a record when it parses
			// completely, as Kieker's reader (readLine) reads it; Kieker's
			// writer leaves its logs that way. In the last file of a log
			// one that does not parse is what a killed writer cut off.
			line, off := d.Line()+1, d.Offset()
			err := d.Finish(rest, &x.batch)
			if err != nil && x.r.unknownType(err, "") {
				return false, nil // a line of an unknown type is skipped
			}
			if err != nil && last {
				return true, fmt.Errorf("line %d, offset %d: the last line has no line end and does not parse (%d bytes): %w", line, off, len(rest), err)
			}
			return false, err
		}, true, last)
	}
	d := kieker.NewDecoder(kieker.Options{Catalog: x.cat, Strings: strs})
	return x.stream(s, name, d.Decode, func(rest []byte) (bool, error) {
		if len(rest) > 0 {
			return true, fmt.Errorf("offset %d: file ends inside a record (%d bytes left over)", d.Offset(), len(rest))
		}
		return false, nil
	}, false, last)
}

// stream feeds s through decode. text decoders report a bad line with the
// line consumed, so decoding can go on after it; a binary decoder's error is
// final for the file. finish decodes what is left at the end and says
// whether an error means the file was cut there. In the last file of a log
// (last) a cut end is reported with cutEnd instead of as malformed data.
func (x *run) stream(s *logdir.Stream, name string, decode func([]byte, *record.Batch) (int, error), finish func([]byte) (cut bool, err error), text, last bool) error {
	buf := x.buf
	filled := 0
	for {
		n, rerr := s.Read(buf[filled:])
		filled += n
		data := buf[:filled]
		for len(data) > 0 {
			used, err := decode(data, &x.batch)
			data = data[used:]
			if ferr := x.maybeFlush(); ferr != nil {
				return ferr
			}
			if err == nil {
				break
			}
			if text && used > 0 && x.r.unknownType(err, "") {
				continue // the line of an unknown type is skipped
			}
			if !text && x.r.unknownType(err, name) {
				return x.maybeFlush() // the rest of the file cannot be framed
			}
			if !text || used == 0 {
				// The rest of the file cannot be framed again.
				if !x.r.opts.SkipBad {
					return x.skip(fmt.Errorf("kieker log %s: %w", name, err))
				}
				x.r.tails.Add(1)
				return x.skip(fmt.Errorf("kieker log %s: %w (the rest of the file is skipped)", name, err))
			}
			if err := x.skip(fmt.Errorf("kieker log %s: %w", name, err)); err != nil {
				return err
			}
		}
		// Keep the incomplete tail for the next read.
		filled = copy(buf, data)
		if filled == len(buf) {
			// One unit larger than the buffer: grow (decoders bound it by
			// their own limits).
			nb := make([]byte, 2*len(buf))
			copy(nb, buf)
			buf = nb
			x.buf = nb
		}
		if rerr == io.EOF {
			if cut, err := finish(buf[:filled]); err != nil {
				err = fmt.Errorf("kieker log %s: %w", name, err)
				if cut && last {
					return x.cutEnd(err)
				}
				if err := x.skip(err); err != nil {
					return err
				}
			}
			return x.maybeFlush()
		}
		if rerr != nil {
			if errors.Is(rerr, logdir.ErrTruncated) && last {
				// The partial record or line left in buf is the one the
				// cut interrupted.
				return x.cutEnd(fmt.Errorf("kieker log: %w", rerr))
			}
			if errors.Is(rerr, logdir.ErrTruncated) {
				// Everything before the cut has been decoded; the partial
				// tail is the record a crash interrupted.
				if x.r.opts.SkipBad {
					x.r.tails.Add(1)
				}
				if err := x.skip(fmt.Errorf("kieker log: %w", rerr)); err != nil {
					return err
				}
				return x.maybeFlush()
			}
			return fmt.Errorf("kieker log: %w", rerr)
		}
	}
}

// logCatalog returns the catalogue to read the log at path with: base,
// or, when the log directory holds IRL files, base with their types added
// (the log's types replace base's of the same name).
func logCatalog(path string, base *record.Catalog) (*record.Catalog, error) {
	entries, err := os.ReadDir(path)
	if err != nil {
		return base, nil // not a directory (a per-thread zip)
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".irl") {
			files = append(files, filepath.Join(path, e.Name()))
		}
	}
	if len(files) == 0 {
		return base, nil
	}
	m, err := irl.Load(files...)
	if err != nil {
		return nil, err
	}
	cat := record.NewCatalog()
	if _, err := m.AddTo(cat); err != nil {
		return nil, err
	}
	for _, t := range base.Types() {
		if cat.Lookup(t.Name) == nil {
			cat.Add(t)
		}
	}
	for old, canonical := range base.Aliases() {
		if cat.Lookup(old) == nil {
			cat.AddAlias(old, canonical)
		}
	}
	return cat, nil
}
