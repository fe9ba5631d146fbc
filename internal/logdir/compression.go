package logdir

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
)

// Compression is the compression of one data file. Readers decide it from
// the file's first bytes (Sniff), never from its name.
type Compression uint8

// The compressions Kieker and tracebridge write. BZip2 is read only: Kieker
// 2.0's BZip2CompressionFilter writes it under a ".gz" name.
const (
	None    Compression = iota
	Deflate             // a zlib stream (RFC 1950), Kieker's ".df"
	Gzip                // gzip, possibly several members
	Zip                 // a zip archive read by streaming its local headers
	XZ                  // xz, possibly several streams
	BZip2               // bzip2, read only
)

var compressionNames = [...]string{"none", "deflate", "gzip", "zip", "xz", "bzip2"}

// String returns the short name: none, deflate, gzip, zip, xz or bzip2.
func (c Compression) String() string {
	if int(c) < len(compressionNames) {
		return compressionNames[c]
	}
	return fmt.Sprintf("compression(%d)", uint8(c))
}

// Ext returns the file name extension tracebridge appends after ".dat" or
// ".bin" for c: "", ".df", ".gz", ".zip", ".xz" or ".bz2".
func (c Compression) Ext() string {
	switch c {
	case Deflate:
		return ".df"
	case Gzip:
		return ".gz"
	case Zip:
		return ".zip"
	case XZ:
		return ".xz"
	case BZip2:
		return ".bz2"
	}
	return ""
}

// Kieker's compression filter classes, by simple class name. Kieker 1.14
// kept them in kieker.monitoring.writer.filesystem.compression, 1.15 and
// later in kieker.monitoring.writer.compression; any package is accepted.
var kiekerFilters = map[string]Compression{
	"nonecompressionfilter":    None,
	"deflatecompressionfilter": Deflate,
	"gzipcompressionfilter":    Gzip,
	"zipcompressionfilter":     Zip,
	"xzcompressionfilter":      XZ,
	"bzip2compressionfilter":   BZip2,
}

// ParseCompression accepts tracebridge's short names (none, deflate, gzip,
// zip, xz; case-insensitive; "" means none) and Kieker's compression filter
// class names (kieker.monitoring.writer.compression.GZipCompressionFilter and
// the like, with any package prefix). BZip2 names are an error wrapping
// ErrUnsupported: bzip2 can be read but not written.
func ParseCompression(s string) (Compression, error) {
	name := strings.ToLower(strings.TrimSpace(s))
	c, ok := Compression(0), false
	switch name {
	case "", "none":
		c, ok = None, true
	case "deflate", "df", "zlib":
		c, ok = Deflate, true
	case "gzip", "gz":
		c, ok = Gzip, true
	case "zip":
		c, ok = Zip, true
	case "xz":
		c, ok = XZ, true
	case "bzip2", "bz2":
		c, ok = BZip2, true
	default:
		c, ok = kiekerFilters[name[strings.LastIndexByte(name, '.')+1:]]
	}
	if !ok {
		return None, fmt.Errorf("compression %q: want none, deflate, gzip, zip, xz or a Kieker compression filter class", s)
	}
	if c == BZip2 {
		return None, fmt.Errorf("compression %q: %w: tracebridge reads bzip2 logs but does not write them; choose deflate, gzip, zip or xz", s, ErrUnsupported)
	}
	return c, nil
}

var (
	magicGzip  = []byte{0x1f, 0x8b}
	magicXZ    = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	magicBZip2 = []byte("BZh")
	magicZip   = []byte("PK\x03\x04")
	magicZipE  = []byte("PK\x05\x06") // an empty zip: only the end record
)

// sniffLen is how many leading bytes Sniff needs to decide.
const sniffLen = 6

// Sniff decides the compression of a data file from its first bytes (at
// least 6 unless the file is shorter): zlib (CMF with method 8, a valid
// header checksum and no preset dictionary), gzip 1f 8b, xz fd 37 7a 58 5a
// 00, bzip2 "BZh1"…"BZh9", zip "PK\3\4" (or the end record of an empty
// zip). A file shorter than a magic whose bytes are a prefix of it is taken
// as that compression, cut short: reading it then reports ErrTruncated
// instead of passing the fragment on as plain data. Anything else is None.
func Sniff(b []byte) Compression {
	if len(b) == 0 {
		return None
	}
	if len(b) < sniffLen {
		for _, m := range []struct {
			magic []byte
			c     Compression
		}{{magicGzip, Gzip}, {magicXZ, XZ}, {magicBZip2, BZip2}, {magicZip, Zip}} {
			if len(b) <= len(m.magic) && bytes.HasPrefix(m.magic, b) {
				return m.c
			}
		}
		if len(b) == 1 && b[0] == 0x78 {
			return Deflate
		}
	}
	switch {
	case bytes.HasPrefix(b, magicGzip):
		return Gzip
	case bytes.HasPrefix(b, magicXZ):
		return XZ
	case bytes.HasPrefix(b, magicZip), bytes.HasPrefix(b, magicZipE):
		return Zip
	case len(b) >= 4 && bytes.HasPrefix(b, magicBZip2) && b[3] >= '1' && b[3] <= '9':
		return BZip2
	case len(b) >= 2 && isZlibHeader(b[0], b[1]):
		return Deflate
	}
	return None
}

// isZlibHeader checks RFC 1950's CMF/FLG pair: method 8 (deflate), a window
// of at most 32 KiB, FCHECK making the pair a multiple of 31, and no preset
// dictionary (Kieker never uses one). Kieker's ASCII data starts with '$'
// and its binary data with a zero byte, so neither passes.
func isZlibHeader(cmf, flg byte) bool {
	return cmf&0x0f == 8 && cmf>>4 <= 7 && (uint16(cmf)<<8|uint16(flg))%31 == 0 && flg&0x20 == 0
}

// Format says how to read a data file.
type Format struct {
	Compression Compression
	// Text is true for Kieker's ASCII format (lines "$id;timestamp;…") and
	// false for the binary one (record frames).
	Text bool
}

func (f Format) String() string {
	kind := "binary"
	if f.Text {
		kind = "ascii"
	}
	return f.Compression.String() + "/" + kind
}

// Errors callers decide on. Errors about a file's content are *Error values
// wrapping one of these (or an I/O error); test with errors.Is.
var (
	// ErrTruncated: a compressed stream ends before its end marker, as a
	// file cut off by a crash does. Everything before the cut has been
	// returned.
	ErrTruncated = errors.New("compressed stream ends early (file truncated)")
	// ErrCorrupt: the bytes are not a valid stream of their compression.
	ErrCorrupt = errors.New("corrupt data")
	// ErrUnsupported: valid data using a feature this package does not
	// implement (an xz filter other than LZMA2, zip encryption or a zip
	// method other than stored and deflate), or bzip2 output.
	ErrUnsupported = errors.New("unsupported")
	// ErrLimit: the data needs more memory than a configured Limits value
	// allows.
	ErrLimit = errors.New("over the limit")
	// ErrNoLog: Discover found no Kieker log under the path.
	ErrNoLog = errors.New("no Kieker log found")
	// ErrNoMap: a log has no kieker.map (a per-thread zip of Kieker ≤1.12
	// cut off before its map was written at the end).
	ErrNoMap = errors.New("no kieker.map")
	// ErrClosed: Write or Flush after Close.
	ErrClosed = errors.New("closed")
)

// Error is a failure reading one data file: the file, the offset in its
// compressed bytes where the problem showed, and the reason.
type Error struct {
	Path   string // the file; for an entry of a per-thread zip "zip!entry"
	Offset int64  // compressed byte offset in Path
	Err    error  // ErrTruncated, an error wrapping ErrCorrupt, ErrUnsupported or ErrLimit, or an I/O error
}

func (e *Error) Error() string { return fmt.Sprintf("%s: offset %d: %v", e.Path, e.Offset, e.Err) }

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }

// corrupt returns an error wrapping ErrCorrupt with a reason.
func corrupt(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}
