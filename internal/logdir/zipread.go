package logdir

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"path"
	"strings"
)

// Zip signatures.
var (
	sigLocal      = []byte("PK\x03\x04")
	sigCentral    = []byte("PK\x01\x02")
	sigEnd        = []byte("PK\x05\x06")
	sigEnd64      = []byte("PK\x06\x06")
	sigDescriptor = []byte("PK\x07\x08")
)

const (
	zipFlagEncrypted  = 0x0001
	zipFlagDescriptor = 0x0008
	zipFlagStrongEnc  = 0x0040
	zipStored         = 0
	zipDeflated       = 8
	zipMax32          = 0xffffffff
)

// zipEntry describes one entry while it is read.
type zipEntry struct {
	name   string
	flags  uint16
	method uint16
	crc    uint32
	csize  uint64
	usize  uint64
	zip64  bool // the local header had a zip64 extra field
}

// isMapEntry reports a zip entry holding the string registry.
func isMapEntry(name string) bool {
	base := path.Base(name)
	return base == MapFile || base == LegacyMapFile
}

// isDataEntry reports a zip entry that may hold data: not a directory, not
// the map, not hidden and not a .txt/.md note.
func isDataEntry(name string) bool {
	if strings.HasSuffix(name, "/") || isMapEntry(name) {
		return false
	}
	return !skipName(path.Base(name))
}

// zipScanner reads a zip archive front to back from its local file headers,
// without the central directory, so that an archive cut off by a crash
// still yields every byte it holds. It returns the concatenated data of
// the wanted entries (stored or deflated, with or without data
// descriptors, zip64 sizes included), checking each entry's CRC-32 and
// sizes, and stops at the central directory. An archive that ends without
// one is reported as truncated after its last complete byte.
type zipScanner struct {
	src  *source
	want func(string) bool
	one  bool  // stop after the first wanted entry
	need error // returned when the archive holds no wanted entry

	fr      io.ReadCloser // reused flate reader
	ent     zipEntry
	cur     io.Reader // the current entry's data; nil between entries
	start   int64     // src.n where the current entry's data starts
	crc     uint32
	size    uint64
	skip    bool
	found   int
	done    bool
	hdr     [46]byte
	nameBuf []byte
}

func newZipScanner(src *source, want func(string) bool, one bool, need error) *zipScanner {
	return &zipScanner{src: src, want: want, one: one, need: need}
}

// newZipEntryReader reads the data of one entry whose header the central
// directory gave; src starts at the entry's data.
func newZipEntryReader(src *source, ent zipEntry) *zipScanner {
	z := &zipScanner{src: src, one: true, done: true}
	z.begin(ent, false)
	return z
}

func (z *zipScanner) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	for {
		if z.cur == nil {
			if z.done {
				return 0, io.EOF
			}
			if err := z.next(); err != nil {
				return 0, err
			}
			continue
		}
		n, err := z.cur.Read(p)
		if n > 0 {
			z.crc = crc32.Update(z.crc, crc32.IEEETable, p[:n])
			z.size += uint64(n)
		}
		skip := z.skip
		if skip {
			n = 0 // p was scratch space
		}
		switch {
		case err == io.EOF:
			if err := z.endEntry(); err != nil {
				return n, err
			}
			z.cur = nil
			if n > 0 {
				return n, nil
			}
		case err != nil:
			return n, err
		case n > 0:
			return n, nil
		}
	}
}

// next reads the next local file header, or finds the end of the entries.
func (z *zipScanner) next() error {
	sig := z.hdr[:4]
	if _, err := io.ReadFull(z.src, sig); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF // no central directory: the archive was cut off
		}
		return z.missing(err)
	}
	switch {
	case bytes.Equal(sig, sigLocal):
	case bytes.Equal(sig, sigCentral), bytes.Equal(sig, sigEnd), bytes.Equal(sig, sigEnd64):
		z.done = true
		return z.missing(io.EOF)
	case bytes.Equal(sig, sigDescriptor) && z.src.n == 4:
		return nil // the marker of a split archive that turned out to be whole
	default:
		return corrupt("zip: unexpected signature %x", sig)
	}
	h := z.hdr[4:30]
	if _, err := io.ReadFull(z.src, h); err != nil {
		return noEOF(err)
	}
	le := binary.LittleEndian
	ent := zipEntry{
		flags:  le.Uint16(h[2:]),
		method: le.Uint16(h[4:]),
		crc:    le.Uint32(h[10:]),
		csize:  uint64(le.Uint32(h[14:])),
		usize:  uint64(le.Uint32(h[18:])),
	}
	nameLen, extraLen := int(le.Uint16(h[22:])), int(le.Uint16(h[24:]))
	if cap(z.nameBuf) < nameLen+extraLen {
		z.nameBuf = make([]byte, nameLen+extraLen)
	}
	buf := z.nameBuf[:nameLen+extraLen]
	if _, err := io.ReadFull(z.src, buf); err != nil {
		return noEOF(err)
	}
	ent.name = string(buf[:nameLen])
	if err := ent.parseExtra(buf[nameLen:]); err != nil {
		return err
	}
	if ent.flags&(zipFlagEncrypted|zipFlagStrongEnc) != 0 {
		return fmt.Errorf("zip entry %q is encrypted: %w", ent.name, ErrUnsupported)
	}
	if ent.method != zipStored && ent.method != zipDeflated {
		return fmt.Errorf("zip entry %q uses compression method %d: %w", ent.name, ent.method, ErrUnsupported)
	}
	wanted := z.want(ent.name)
	if wanted {
		z.found++
		if z.one {
			z.done = true
		}
	}
	z.begin(ent, !wanted)
	return nil
}

// missing turns the end of the archive into z.need when no wanted entry
// was found.
func (z *zipScanner) missing(err error) error {
	if z.need != nil && z.found == 0 {
		if err == io.EOF {
			return z.need
		}
		return fmt.Errorf("%w (the archive is cut short)", z.need)
	}
	return err
}

// parseExtra reads the zip64 sizes of a local header.
func (e *zipEntry) parseExtra(extra []byte) error {
	le := binary.LittleEndian
	for len(extra) >= 4 {
		id, size := le.Uint16(extra), int(le.Uint16(extra[2:]))
		extra = extra[4:]
		if size > len(extra) {
			break
		}
		field := extra[:size]
		extra = extra[size:]
		if id != 0x0001 {
			continue
		}
		e.zip64 = true
		if e.usize == zipMax32 {
			if len(field) < 8 {
				return corrupt("zip entry %q: short zip64 extra field", e.name)
			}
			e.usize, field = le.Uint64(field), field[8:]
		}
		if e.csize == zipMax32 {
			if len(field) < 8 {
				return corrupt("zip entry %q: short zip64 extra field", e.name)
			}
			e.csize = le.Uint64(field)
		}
	}
	return nil
}

// begin starts reading an entry's data.
func (z *zipScanner) begin(ent zipEntry, skip bool) {
	z.ent, z.skip = ent, skip
	z.start, z.crc, z.size = z.src.n, 0, 0
	switch {
	case ent.method == zipDeflated:
		if z.fr == nil {
			z.fr = flate.NewReader(z.src)
		} else {
			_ = z.fr.(flate.Resetter).Reset(z.src, nil)
		}
		z.cur = z.fr
	case ent.flags&zipFlagDescriptor != 0:
		z.cur = &storedScan{z: z}
	default:
		z.cur = &exactReader{r: z.src, n: ent.csize}
	}
}

// endEntry reads the data descriptor, if any, and checks CRC and sizes.
func (z *zipScanner) endEntry() error {
	compressed := uint64(z.src.n - z.start)
	crc, csize, usize := z.ent.crc, z.ent.csize, z.ent.usize
	if z.ent.flags&zipFlagDescriptor != 0 {
		wide := z.ent.zip64 || compressed >= zipMax32 || z.size >= zipMax32
		d := z.hdr[:4]
		if _, err := io.ReadFull(z.src, d); err != nil {
			return noEOF(err)
		}
		n := 8
		if wide {
			n = 16
		}
		if bytes.Equal(d, sigDescriptor) {
			if _, err := io.ReadFull(z.src, z.hdr[:4]); err != nil {
				return noEOF(err)
			}
		}
		crc = binary.LittleEndian.Uint32(z.hdr[:4])
		rest := z.hdr[4 : 4+n]
		if _, err := io.ReadFull(z.src, rest); err != nil {
			return noEOF(err)
		}
		if wide {
			csize, usize = binary.LittleEndian.Uint64(rest), binary.LittleEndian.Uint64(rest[8:])
		} else {
			csize, usize = uint64(binary.LittleEndian.Uint32(rest)), uint64(binary.LittleEndian.Uint32(rest[4:]))
		}
	}
	switch {
	case crc != z.crc:
		return corrupt("zip entry %q: CRC-32 %08x where the header says %08x", z.ent.name, z.crc, crc)
	case csize != compressed:
		return corrupt("zip entry %q: %d compressed bytes where the header says %d", z.ent.name, compressed, csize)
	case usize != z.size:
		return corrupt("zip entry %q: %d bytes where the header says %d", z.ent.name, z.size, usize)
	}
	return nil
}

// noEOF turns io.EOF inside a structure into io.ErrUnexpectedEOF.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// exactReader reads exactly n bytes, reporting io.ErrUnexpectedEOF if r
// ends before.
type exactReader struct {
	r io.Reader
	n uint64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.n == 0 {
		return 0, io.EOF
	}
	if uint64(len(p)) > e.n {
		p = p[:e.n]
	}
	n, err := e.r.Read(p)
	e.n -= uint64(n)
	if err == io.EOF {
		if e.n > 0 {
			return n, io.ErrUnexpectedEOF
		}
		err = nil
	}
	return n, err
}

// storedScan reads a stored entry whose size only its data descriptor
// gives: the data ends where a descriptor signature is followed by the
// CRC-32 and sizes of exactly the bytes before it.
type storedScan struct {
	z *zipScanner
}

// descKeep is the longest descriptor (zip64), kept back until checked.
const descKeep = 24

func (r *storedScan) Read(p []byte) (int, error) {
	src := r.z.src
	buf, err := src.br.Peek(src.br.Size())
	if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
		return 0, err
	}
	atEOF := err != nil
	safe := len(buf)
	if !atEOF {
		safe -= descKeep
	}
	for from := 0; ; {
		i := bytes.Index(buf[from:], sigDescriptor)
		if i < 0 {
			break
		}
		i += from
		if i > safe {
			break
		}
		if r.isDescriptor(buf, i) {
			if i == 0 {
				return 0, io.EOF
			}
			safe = i
			break
		}
		from = i + 1
	}
	if safe <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	n := copy(p, buf[:safe])
	src.discard(n)
	return n, nil
}

// isDescriptor checks a candidate descriptor at buf[i:].
func (r *storedScan) isDescriptor(buf []byte, i int) bool {
	size := r.z.size + uint64(i)
	le := binary.LittleEndian
	d := buf[i+4:]
	var csize, usize uint64
	switch {
	case size >= zipMax32 || r.z.ent.zip64:
		if len(d) < 20 {
			return false
		}
		csize, usize = le.Uint64(d[4:]), le.Uint64(d[12:])
	default:
		if len(d) < 12 {
			return false
		}
		csize, usize = uint64(le.Uint32(d[4:])), uint64(le.Uint32(d[8:]))
	}
	return csize == size && usize == size && le.Uint32(d) == crc32.Update(r.z.crc, crc32.IEEETable, buf[:i])
}
