package logdir

import (
	"archive/zip"
	"compress/flate"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Options configure Files.
type Options struct {
	// Dir is the log directory; it is created if missing.
	Dir string
	// Binary selects .bin names (the caller writes binary frames); else .dat.
	Binary bool
	// Compression of the data files. BZip2 is not supported.
	Compression Compression
	// MaxEntriesInFile is the most records a data file holds. 0 means
	// Kieker's default 25000, a negative value no limit.
	MaxEntriesInFile int
	// MaxLogSize in MiB is the size at which a data file is rotated (see
	// Files); ≤0 means no limit.
	MaxLogSize int
	// MaxLogFiles bounds the number of data files kept (see Files); ≤0
	// means no limit.
	MaxLogFiles int
	// BufferSize is the write buffer in front of each file. 0 means
	// Kieker's default 65536. Files keeps two buffers of at least 1 MiB
	// each, so that one is written to the file while the other fills.
	BufferSize int
	// Now gives the time in data file names; nil means time.Now.
	Now func() time.Time
	// Logger reports old data files that could not be deleted; nil
	// discards.
	Logger *slog.Logger
}

// DefaultMaxEntriesInFile is Kieker's default for maxEntriesInFile.
const DefaultMaxEntriesInFile = 25000

// Files writes the data files of one log directory, rotating them the way
// Kieker's FileWriter does. It writes bytes the caller encoded (whole
// records), never kieker.map.
//
// Rotation: a new data file is started before a Write whose records would
// not fit into the current one (so every file holds at most
// MaxEntriesInFile records when no Write carries more); files are named
// with DataFileName, counter 1, 2, … and the time from Options.Now.
//
// A new file is also started before a Write when the current one has
// reached MaxLogSize MiB on disk (compressed bytes written so far, plus
// what is buffered), as Kieker ≥1.13's FileWriter reads maxLogSize ("the
// maximal size of a log file"); files may exceed it by one Write.
//
// Retention follows Kieker's pool handlers: each time a new file is
// started, the oldest files this Files wrote are deleted while more than
// MaxLogFiles files would exist, the new one counted (Kieker ≥1.14's
// RotatingLogFilePoolHandler, ≤1.12's AbstractFsWriterThread). Without
// MaxLogFiles nothing is ever deleted.
//
// Durability: Flush hands everything written so far to the operating
// system in a form a reader decodes even if the process is then killed
// without Close. gzip and xz end their stream on Flush: the file is then a
// complete sequence of gzip members or xz streams (xz at most every
// xzSealInterval; a Flush in between ends the current LZMA2 chunk). zlib
// and zip keep one stream per file, because Kieker's readers read only the
// first zlib stream and the first zip entry: Flush sync-flushes the deflate
// stream (zip: the data file is a zip whose single entry, named like the
// file without ".zip", is a streamed deflate entry with a data
// descriptor), and such a file reads as ErrTruncated after the flushed
// bytes until Close (or rotation) completes it, as does any file whose
// process was killed while bytes after the last Flush were on their way.
// Flush does not fsync.
//
// A Files is used by one goroutine.
type Files struct {
	opt        Options
	maxEntries int
	maxBytes   int64

	file    io.WriteCloser // an *os.File, or a pendingFile
	path    string
	bw      *overlapWriter
	comp    compressor
	entries int
	created int

	kept      []keptFile // finished files, oldest first
	keptBytes int64
	closed    bool
	err       error // sticky write error
}

type keptFile struct {
	path string
	size int64
}

// compressor is the compression stage in front of the file's buffer.
type compressor interface {
	io.Writer
	Flush() error
	Close() error
}

// NewFiles prepares writing data files into opt.Dir, creating it if
// needed. The first file is created by the first Write.
func NewFiles(opt Options) (*Files, error) {
	switch opt.Compression {
	case None, Deflate, Gzip, Zip, XZ:
	case BZip2:
		return nil, fmt.Errorf("logdir: %w: tracebridge reads bzip2 logs but does not write them; choose deflate, gzip, zip or xz", ErrUnsupported)
	default:
		return nil, fmt.Errorf("logdir: unknown compression %v", opt.Compression)
	}
	if opt.Dir == "" {
		return nil, errors.New("logdir: Options.Dir is empty")
	}
	if err := os.MkdirAll(opt.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("logdir: %w", err)
	}
	f := &Files{opt: opt, maxEntries: opt.MaxEntriesInFile}
	switch {
	case f.maxEntries == 0:
		f.maxEntries = DefaultMaxEntriesInFile
	case f.maxEntries < 0:
		f.maxEntries = math.MaxInt
	}
	if opt.MaxLogSize > 0 {
		f.maxBytes = int64(opt.MaxLogSize) << 20
	}
	if f.opt.BufferSize <= 0 {
		f.opt.BufferSize = 65536
	}
	if f.opt.Now == nil {
		f.opt.Now = time.Now
	}
	if f.opt.Logger == nil {
		f.opt.Logger = slog.New(slog.DiscardHandler)
	}
	return f, nil
}

// Write appends p, which holds records whole records, to the current data
// file, starting a new one first if they would not fit. A Write carrying
// more than MaxEntriesInFile records is an error (nothing is written):
// split batches with Room.
func (f *Files) Write(p []byte, records int) error {
	if f.closed {
		return fmt.Errorf("logdir: write: %w", ErrClosed)
	}
	if f.err != nil {
		return f.err
	}
	if records < 0 {
		return fmt.Errorf("logdir: write of %d records", records)
	}
	if records > f.maxEntries {
		return fmt.Errorf("logdir: %d records in one write, over MaxEntriesInFile %d", records, f.maxEntries)
	}
	if f.file == nil || (f.entries > 0 && (f.entries+records > f.maxEntries || f.full())) {
		if err := f.rotate(); err != nil {
			f.err = err
			return err
		}
	}
	var err error
	if f.comp != nil {
		_, err = f.comp.Write(p)
	} else {
		_, err = f.bw.Write(p)
	}
	if err != nil {
		f.err = fmt.Errorf("logdir: write %s: %w", f.path, err)
		return f.err
	}
	f.entries += records
	return nil
}

// Room returns how many records the next Write may carry without starting
// a new file early: what is left in the current file, or a whole file's
// worth when there is none yet or it is full.
func (f *Files) Room() int {
	if f.file == nil || f.entries >= f.maxEntries {
		return f.maxEntries
	}
	return f.maxEntries - f.entries
}

// Flush hands everything written so far to the operating system,
// decodable without Close (see Files).
func (f *Files) Flush() error {
	if f.closed {
		return fmt.Errorf("logdir: flush: %w", ErrClosed)
	}
	if f.err != nil {
		return f.err
	}
	if f.file == nil {
		return nil
	}
	if f.comp != nil {
		if err := f.comp.Flush(); err != nil {
			f.err = fmt.Errorf("logdir: flush %s: %w", f.path, err)
			return f.err
		}
	}
	if err := f.bw.Flush(); err != nil {
		f.err = fmt.Errorf("logdir: flush %s: %w", f.path, err)
		return f.err
	}
	return nil
}

// Close completes the current data file. It is safe to call twice.
func (f *Files) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	if f.file == nil {
		return nil
	}
	return errors.Join(f.finish(), f.bw.wait())
}

// Current returns the path of the data file being written ("" before the
// first Write).
func (f *Files) Current() string { return f.path }

// Created returns how many data files have been started, deleted ones
// included.
func (f *Files) Created() int { return f.created }

// finish completes the current file and adds it to the retention list.
// The file's last write and its close run in the background (see
// overlapWriter.Finish): their error is returned by a later Write, Flush
// or Close.
func (f *Files) finish() error {
	var errs []error
	if f.comp != nil && f.err == nil {
		errs = append(errs, f.comp.Close())
	}
	size := f.bw.Total()
	if f.err == nil && (len(errs) == 0 || errs[0] == nil) {
		errs = append(errs, f.bw.Finish(f.file, f.path))
	} else {
		f.bw.Reset(nil) // no write in flight when the file closes
		errs = append(errs, f.file.Close())
	}
	f.kept = append(f.kept, keptFile{path: f.path, size: size})
	f.keptBytes += size
	f.file, f.comp = nil, nil
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("logdir: close %s: %w", f.path, err)
	}
	return nil
}

// rotate finishes the current file, starts the next one and applies the
// retention limits.
func (f *Files) rotate() error {
	next := f.file != nil
	if next {
		if err := f.finish(); err != nil {
			return err
		}
	}
	now := f.opt.Now()
	name := DataFileName(now, f.created+1, f.opt.Binary, f.opt.Compression)
	p := filepath.Join(f.opt.Dir, name)
	var file io.WriteCloser
	if next {
		// Creating a file costs a good share of a millisecond on some
		// file systems, at every rotation (Kieker's 25,000 records a
		// file): it runs in the background like the last file's last
		// write and close; its error comes with the first write.
		file = openPending(p)
	} else {
		of, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return fmt.Errorf("logdir: %w", err)
		}
		file = of
	}
	f.created++
	f.file, f.path, f.entries = file, p, 0
	if f.bw == nil {
		f.bw = newOverlapWriter(file, f.opt.BufferSize)
	} else {
		f.bw.Retarget(file)
	}
	var err error
	f.comp, err = newCompressor(f.opt.Compression, f.bw, strings.TrimSuffix(name, ".zip"), now, f.opt.Now)
	if err != nil {
		return fmt.Errorf("logdir: %s: %w", p, err)
	}
	f.retain()
	return nil
}

// full reports whether the current file reached MaxLogSize.
func (f *Files) full() bool {
	return f.maxBytes > 0 && f.bw.Total() >= f.maxBytes
}

// retain deletes the oldest finished files beyond MaxLogFiles.
func (f *Files) retain() {
	for f.opt.MaxLogFiles > 0 && len(f.kept) > 0 && len(f.kept)+1 > f.opt.MaxLogFiles {
		f.dropOldest()
	}
}

func (f *Files) dropOldest() {
	old := f.kept[0]
	f.kept = f.kept[1:]
	f.keptBytes -= old.size
	if err := os.Remove(old.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		f.opt.Logger.Warn("cannot delete old data file", "path", old.path, "err", err)
	}
}

// newCompressor returns the compression stage writing to w, nil for None;
// clock (nil: time.Now) times xz's stream ends.
func newCompressor(c Compression, w io.Writer, entryName string, now time.Time, clock func() time.Time) (compressor, error) {
	switch c {
	case Deflate:
		return zlib.NewWriterLevel(w, zlib.DefaultCompression)
	case Gzip:
		zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
		if err != nil {
			return nil, err
		}
		return &gzipWriter{zw: zw, w: w}, nil
	case XZ:
		return newXZWriter(w, xzWriterDict, clock)
	case Zip:
		return newZipWriter(w, entryName, now)
	}
	return nil, nil
}

// gzipWriter ends its gzip member on every Flush that follows a Write, and
// starts the next member with the next Write: the file is then a complete
// multi-member gzip file, which gzip, Java's GZIPInputStream (Kieker) and
// this package read whole. A member costs 18 bytes of header and trailer
// and restarts the compressor's window.
type gzipWriter struct {
	zw     *gzip.Writer
	w      io.Writer
	dirty  bool // written since the member began
	sealed bool // a member has been ended
}

func (g *gzipWriter) Write(p []byte) (int, error) {
	if len(p) > 0 {
		g.dirty = true
	}
	return g.zw.Write(p)
}

// Flush ends the current member.
func (g *gzipWriter) Flush() error {
	if !g.dirty {
		return nil
	}
	if err := g.zw.Close(); err != nil {
		return err
	}
	g.zw.Reset(g.w)
	g.dirty, g.sealed = false, true
	return nil
}

// Close ends the current member; a file without any data still gets one
// (empty) member, so that it is a gzip file.
func (g *gzipWriter) Close() error {
	if g.sealed && !g.dirty {
		return nil
	}
	g.sealed, g.dirty = true, false
	return g.zw.Close()
}

// zipWriter writes a zip holding one streamed deflate entry (with a data
// descriptor). Flush sync-flushes the deflate stream and the zip writer's
// buffer, so the entry's bytes so far decode without the central
// directory.
type zipWriter struct {
	zw *zip.Writer
	fw *flate.Writer
	w  io.Writer
}

func newZipWriter(w io.Writer, entryName string, now time.Time) (*zipWriter, error) {
	z := &zipWriter{zw: zip.NewWriter(w)}
	z.zw.RegisterCompressor(zip.Deflate, func(out io.Writer) (io.WriteCloser, error) {
		fw, err := flate.NewWriter(out, flate.DefaultCompression)
		z.fw = fw
		return fw, err
	})
	ew, err := z.zw.CreateHeader(&zip.FileHeader{Name: entryName, Method: zip.Deflate, Modified: now.UTC()})
	if err != nil {
		return nil, err
	}
	z.w = ew
	return z, nil
}

func (z *zipWriter) Write(p []byte) (int, error) { return z.w.Write(p) }

func (z *zipWriter) Flush() error {
	if err := z.fw.Flush(); err != nil {
		return err
	}
	return z.zw.Flush()
}

func (z *zipWriter) Close() error { return z.zw.Close() }

// pendingFile is a data file being created in the background (see
// rotate): Write and Close wait for the creation and return its error.
// Used by one goroutine at a time (the Files' owner or the overlapWriter's
// write in flight, which hand it over through channels).
type pendingFile struct {
	ready chan struct{}
	file  *os.File
	err   error
}

func openPending(path string) *pendingFile {
	p := &pendingFile{ready: make(chan struct{})}
	go func() {
		defer close(p.ready)
		if p.file, p.err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); p.err != nil {
			p.err = fmt.Errorf("logdir: %w", p.err)
		}
	}()
	return p
}

func (p *pendingFile) Write(b []byte) (int, error) {
	<-p.ready
	if p.err != nil {
		return 0, p.err
	}
	return p.file.Write(b)
}

func (p *pendingFile) Close() error {
	<-p.ready
	if p.err != nil {
		return p.err
	}
	return p.file.Close()
}
