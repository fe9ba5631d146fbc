package logdir

import (
	"bufio"
	"compress/bzip2"
	"compress/gzip"
	"compress/zlib"
	"errors"
	"fmt"
	"io"
	"os"
	"sync/atomic"
)

// Limits bound the memory one Stream uses. The zero value means the
// defaults.
type Limits struct {
	// XZDict is the largest xz (LZMA2) dictionary a Stream allocates; an
	// xz file declaring a larger one fails with ErrLimit. xz's presets use
	// at most 64 MiB, which Kieker (preset 9) writes. Default 64 MiB.
	XZDict int64
	// BufferSize is the size of each of a Stream's two buffers, one for
	// compressed and one for decompressed bytes. Default 64 KiB, minimum
	// 4 KiB.
	BufferSize int
}

// Default limits.
const (
	DefaultXZDict     = 64 << 20
	DefaultBufferSize = 64 << 10
	minBufferSize     = 4 << 10
)

func (l Limits) withDefaults() Limits {
	if l.XZDict <= 0 {
		l.XZDict = DefaultXZDict
	}
	if l.BufferSize <= 0 {
		l.BufferSize = DefaultBufferSize
	}
	l.BufferSize = max(l.BufferSize, minBufferSize)
	return l
}

// Stream reads the decompressed bytes of one data file. Read returns the
// data, then io.EOF; a stream cut short returns everything it could decode
// and then an *Error wrapping ErrTruncated; corrupt data an *Error wrapping
// ErrCorrupt. Errors are sticky. A Stream is used by one goroutine; only
// the Log's progress counter it feeds may be read elsewhere.
type Stream struct {
	// Format is the file's compression (from its magic bytes) and whether
	// its content is Kieker's ASCII format (see DataFile.Open).
	Format Format
	// Path names the file in errors.
	Path string

	src    *source
	dec    *decodeReader
	out    *bufio.Reader
	closer io.Closer
	closed bool
}

// Read reads decompressed bytes.
func (s *Stream) Read(p []byte) (int, error) {
	if s.closed {
		return 0, &Error{Path: s.Path, Offset: s.src.offset(), Err: ErrClosed}
	}
	return s.out.Read(p)
}

// Offset returns how many compressed bytes of the file the decompressor has
// consumed so far: its position in the file (for an entry of a per-thread
// zip, its position in the zip).
func (s *Stream) Offset() int64 { return s.src.offset() }

// Close releases the file. It is safe to call twice.
func (s *Stream) Close() error {
	if s.closed {
		return nil
	}
	s.closed = true
	if s.closer != nil {
		return s.closer.Close()
	}
	return nil
}

// OpenFile opens any data file, deciding its format from its content as
// DataFile.Open does. It does not count progress.
func OpenFile(path string, lim Limits) (*Stream, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return newStream(f, f, path, 0, path, nil, lim, streamKind{}), nil
}

// NewStream reads a data file's bytes from r, which the Stream does not
// close; name is used in errors and, for empty content, as the .dat/.bin
// hint.
func NewStream(r io.Reader, name string, lim Limits) *Stream {
	return newStream(r, nil, name, 0, name, nil, lim, streamKind{})
}

// streamKind says what the bytes of a stream are.
type streamKind struct {
	entry   *zipEntry              // one zip entry's compressed bytes, sizes from the central directory
	want    func(name string) bool // a whole zip: the entries to return (nil: data entries)
	one     bool                   // a whole zip: stop after the first wanted entry
	need    error                  // a whole zip: the error when it has no wanted entry
	noSniff bool                   // do not sniff ASCII/binary (map files)
}

// newStream builds a stream over r, whose first byte is at offset base of
// the file named path. hintName gives the .dat/.bin hint; ctr, if not nil,
// counts compressed bytes read.
func newStream(r io.Reader, closer io.Closer, path string, base int64, hintName string,
	ctr *atomic.Int64, lim Limits, kind streamKind) *Stream {
	lim = lim.withDefaults()
	s := &Stream{Path: path, closer: closer}
	s.src = &source{fr: fileReader{r: r, ctr: ctr}, base: base}
	s.src.br = bufio.NewReaderSize(&s.src.fr, lim.BufferSize)
	s.dec = &decodeReader{s: s}
	switch {
	case kind.entry != nil:
		s.Format.Compression = Zip
		ent := *kind.entry
		s.dec.open = func() (io.Reader, error) { return newZipEntryReader(s.src, ent), nil }
	default:
		head, err := s.src.br.Peek(sniffLen)
		if err != nil && err != io.EOF {
			// An I/O error: report it on the first Read.
			s.dec.err = s.wrap(err)
		}
		s.Format.Compression = Sniff(head)
		s.dec.open = s.opener(kind, lim)
	}
	s.out = bufio.NewReaderSize(s.dec, lim.BufferSize)
	if !kind.noSniff {
		s.Format.Text = s.sniffText(hintName)
	}
	return s
}

// opener returns the function that starts the decompressor (on the first
// Read, so that Open itself never fails on content).
func (s *Stream) opener(kind streamKind, lim Limits) func() (io.Reader, error) {
	src := s.src
	switch s.Format.Compression {
	case Deflate:
		return func() (io.Reader, error) {
			s.dec.atEOF = s.noTrailingData("zlib")
			return zlib.NewReader(src)
		}
	case Gzip:
		return func() (io.Reader, error) { return gzip.NewReader(src) }
	case BZip2:
		return func() (io.Reader, error) { return bzip2.NewReader(src), nil }
	case XZ:
		return func() (io.Reader, error) { return newXZReader(src, lim.XZDict), nil }
	case Zip:
		want := kind.want
		if want == nil {
			want = isDataEntry
		}
		return func() (io.Reader, error) { return newZipScanner(src, want, kind.one, kind.need), nil }
	}
	return func() (io.Reader, error) { return src, nil }
}

// noTrailingData reports bytes after the end of a single-stream format.
func (s *Stream) noTrailingData(format string) func() error {
	return func() error {
		if b, _ := s.src.br.Peek(1); len(b) > 0 {
			return corrupt("data after the end of the %s stream", format)
		}
		return nil
	}
}

// textSniffLen is how much decompressed data the ASCII/binary decision
// looks at.
const textSniffLen = 4096

// sniffText decides ASCII or binary from the first decompressed bytes:
// blank lines (and spaces) are skipped; ASCII if the next byte is '$', or a
// digit starting a printable line with a ';' (pre-'$' legacy lines); else
// binary, whose frames start with a 32-bit type id, in practice a zero
// byte. For empty content the name's .dat/.bin decides (default ASCII).
func (s *Stream) sniffText(hintName string) bool {
	b, _ := s.out.Peek(textSniffLen)
	i := 0
	for i < len(b) && isBlank(b[i]) {
		i++
	}
	if i < len(b) {
		return b[i] == '$' || legacyLine(b[i:])
	}
	if text, ok := textHint(hintName); ok {
		return text
	}
	return true
}

func isBlank(c byte) bool { return c == '\n' || c == '\r' || c == ' ' || c == '\t' }

// legacyLine reports a line of digits, then printable text holding a ';'.
func legacyLine(b []byte) bool {
	if len(b) == 0 || b[0] < '0' || b[0] > '9' {
		return false
	}
	semi := false
	for _, c := range b {
		switch {
		case c == '\n' || c == '\r':
			return semi
		case c == ';':
			semi = true
		case c < 0x20 && c != '\t':
			return false
		}
	}
	return semi
}

// wrap turns a decompressor's error into an *Error naming the file and the
// compressed offset.
func (s *Stream) wrap(err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, ErrTruncated):
		err = ErrTruncated
	case s.src.fr.err != nil && errors.Is(err, s.src.fr.err):
		// an I/O error, kept as it is
	case errors.Is(err, ErrCorrupt), errors.Is(err, ErrUnsupported), errors.Is(err, ErrLimit), errors.Is(err, ErrNoMap):
	default:
		err = fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return &Error{Path: s.Path, Offset: s.src.offset(), Err: err}
}

// decodeReader starts the decompressor lazily, makes its errors sticky and
// turns them into *Error.
type decodeReader struct {
	s     *Stream
	open  func() (io.Reader, error)
	atEOF func() error
	r     io.Reader
	err   error
}

func (d *decodeReader) Read(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	if d.r == nil {
		r, err := d.open()
		if err != nil {
			d.err = d.s.wrap(err)
			return 0, d.err
		}
		d.r = r
	}
	n, err := d.r.Read(p)
	if err == nil {
		return n, nil
	}
	if err == io.EOF && d.atEOF != nil {
		if e := d.atEOF(); e != nil {
			err = e
		}
	}
	if err == io.EOF {
		d.err = io.EOF
	} else {
		d.err = d.s.wrap(err)
	}
	return n, d.err
}

// source is the compressed side of a stream: a buffered reader that counts
// the bytes the decompressor consumed. It implements io.ByteReader, so
// compress/flate, gzip, zlib and bzip2 read from it exactly what their
// format needs and no more.
type source struct {
	br   *bufio.Reader
	fr   fileReader
	base int64 // offset of the first byte in the file
	n    int64 // bytes consumed
}

func (s *source) Read(p []byte) (int, error) {
	n, err := s.br.Read(p)
	s.n += int64(n)
	return n, err
}

func (s *source) ReadByte() (byte, error) {
	c, err := s.br.ReadByte()
	if err == nil {
		s.n++
	}
	return c, err
}

func (s *source) discard(n int) {
	k, _ := s.br.Discard(n)
	s.n += int64(k)
}

func (s *source) offset() int64 { return s.base + s.n }

// fileReader reads the file, adding what it reads to the log's progress
// counter and remembering an I/O error so that wrap can tell it from
// corrupt data.
type fileReader struct {
	r   io.Reader
	ctr *atomic.Int64
	err error
}

func (f *fileReader) Read(p []byte) (int, error) {
	n, err := f.r.Read(p)
	if n > 0 && f.ctr != nil {
		f.ctr.Add(int64(n))
	}
	if err != nil && err != io.EOF {
		f.err = err
	}
	return n, err
}
