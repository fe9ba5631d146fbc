package kieker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// entryReader parses the id | length | bytes part of a registry entry.
type entryReader struct {
	maxLen    int
	javaCount bool

	// Progress of a UTF-16 count scan over an incomplete entry at stream
	// offset scanOff, so that feeding a long entry in small pieces does not
	// rescan it from the start each time.
	scanOff   int64
	scanBytes int
	scanUnits int
}

func newEntryReader(maxLen int, javaCount bool) entryReader {
	if maxLen <= 0 {
		maxLen = DefaultMaxStringLen
	}
	return entryReader{maxLen: maxLen, javaCount: javaCount, scanOff: -1}
}

// read parses an entry at the start of p. It returns the bytes consumed (0
// when p holds only part of the entry), the id and the string's bytes. off
// is the stream offset of the entry (of its marker, if any) for errors.
func (e *entryReader) read(p []byte, off int64) (n int, id int32, val []byte, err error) {
	if len(p) < 8 {
		return 0, 0, nil, nil
	}
	id = int32(binary.BigEndian.Uint32(p))
	length := int32(binary.BigEndian.Uint32(p[4:]))
	if length < 0 {
		return 0, 0, nil, offsetError(off, fmt.Sprintf("registry entry for id %d: string length %d is negative", id, length), ErrMalformed)
	}
	if int(length) > e.maxLen {
		return 0, 0, nil, offsetError(off, fmt.Sprintf("registry entry for id %d: string length %d over the limit %d", id, length, e.maxLen), ErrLimit)
	}
	body := p[8:]
	if len(body) < int(length) {
		return 0, 0, nil, nil // a UTF-16 unit takes at least one byte
	}
	if !e.javaCount {
		val = body[:length]
		if !utf8.Valid(val) {
			return 0, 0, nil, invalidEntry(off, id, val)
		}
		return 8 + int(length), id, val, nil
	}
	// Java's writers send String.length(), the count of UTF-16 units, of a
	// string whose UTF-8 bytes follow: walk the bytes until that many units.
	units, i := 0, 0
	if e.scanOff == off && e.scanBytes <= len(body) {
		i, units = e.scanBytes, e.scanUnits
	}
	e.scanOff = -1
	for units < int(length) {
		if i >= len(body) {
			e.scanOff, e.scanBytes, e.scanUnits = off, i, units
			return 0, 0, nil, nil
		}
		if c := body[i]; c < utf8.RuneSelf {
			i++
			units++
			continue
		}
		r, size := utf8.DecodeRune(body[i:])
		if r == utf8.RuneError && size <= 1 {
			if !utf8.FullRune(body[i:]) {
				e.scanOff, e.scanBytes, e.scanUnits = off, i, units
				return 0, 0, nil, nil
			}
			return 0, 0, nil, offsetError(off, fmt.Sprintf("registry entry for id %d: invalid UTF-8 at byte %d of the string", id, i), ErrMalformed)
		}
		i += size
		if r > 0xFFFF {
			units += 2
		} else {
			units++
		}
	}
	if units != int(length) {
		return 0, 0, nil, offsetError(off, fmt.Sprintf("registry entry for id %d: a supplementary character straddles the UTF-16 length %d", id, length), ErrMalformed)
	}
	if i > e.maxLen {
		return 0, 0, nil, offsetError(off, fmt.Sprintf("registry entry for id %d: string of %d bytes over the limit %d", id, i, e.maxLen), ErrLimit)
	}
	return 8 + i, id, body[:i], nil
}

// invalidEntry describes an entry whose bytes are not UTF-8. A multi-byte
// sequence cut at the end is the signature of Kieker's Java writers, which
// send the UTF-16 char count of a string as the length of its UTF-8 bytes.
func invalidEntry(off int64, id int32, val []byte) error {
	if cutAtEnd(val) {
		return offsetError(off, fmt.Sprintf("registry entry for id %d: its %d bytes are not valid UTF-8 (a multi-byte sequence is cut at the end): most likely the stream comes from Kieker's Java writer, which sends the UTF-16 char count instead of the byte count as the length (decode such a stream with `java_char_count: true` on the receiver in the YAML configuration; in Go: JavaCharCount)", id, len(val)), ErrMalformed, ErrJavaCharCount)
	}
	return offsetError(off, fmt.Sprintf("registry entry for id %d: its %d bytes are not valid UTF-8", id, len(val)), ErrMalformed)
}

// cutAtEnd reports whether val is valid UTF-8 except for an incomplete
// multi-byte sequence at its end.
func cutAtEnd(val []byte) bool {
	for k := 1; k <= 3 && k <= len(val); k++ {
		i := len(val) - k
		if c := val[i]; c&0xC0 != 0x80 {
			return c >= 0xC0 && !utf8.FullRune(val[i:]) && utf8.Valid(val[:i])
		}
	}
	return false
}

func isErr(err, target error) bool { return errors.Is(err, target) }

// RegistryDecoder decodes the registry connection of Kieker's dual-socket
// TCP writers (Kieker ≤1.12 TCPWriter, DualSocketTcpWriter): entries
// int32 id | int32 length | bytes, without the -1 marker, into a Strings
// table that a dual-socket Decoder reads. It is resumable like Decoder;
// errors are sticky. It is not safe for concurrent use, nor to run while a
// Decoder reads the same table.
type RegistryDecoder struct {
	strs    *Strings
	entries entryReader
	off     int64
	err     error
	pending bool
}

// NewRegistryDecoder returns a decoder filling s, configured by o's
// MaxStringLen and JavaCharCount (Kieker's Java DualSocketTcpWriter sends
// UTF-16 char counts too).
func NewRegistryDecoder(s *Strings, o Options) *RegistryDecoder {
	return &RegistryDecoder{strs: s, entries: newEntryReader(o.MaxStringLen, o.JavaCharCount)}
}

// Offset returns the number of bytes consumed so far.
func (d *RegistryDecoder) Offset() int64 { return d.off }

// Pending reports whether the last Decode left an incomplete entry.
func (d *RegistryDecoder) Pending() bool { return d.pending }

// Decode registers every complete entry at the start of buf and returns the
// number of bytes consumed (see Decoder.Decode).
func (d *RegistryDecoder) Decode(buf []byte) (int, error) {
	if d.err != nil {
		d.pending = len(buf) > 0
		return 0, d.err
	}
	pos := 0
	var err error
	for {
		off := d.off + int64(pos)
		n, id, val, rerr := d.entries.read(buf[pos:], off)
		if rerr != nil {
			err = rerr
			break
		}
		if n == 0 {
			break
		}
		if serr := d.strs.Set(id, string(val)); serr != nil {
			err = entryError(off, serr)
			break
		}
		pos += n
	}
	d.off += int64(pos)
	d.pending = pos < len(buf)
	d.err = err
	return pos, err
}
