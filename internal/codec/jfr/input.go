package jfr

import (
	"encoding/binary"
	"math"
	"unicode/utf16"
	"unicode/utf8"
)

// input reads JFR values from a byte slice. Its error sticks: after the
// first failure every read returns zero and pos stays at the end, so a
// record is read field by field and checked once.
type input struct {
	b      []byte
	pos    int
	reason string // why reading failed; "" while reading succeeds
	failAt int    // pos of the failure
}

func (in *input) reset(b []byte) {
	in.b, in.pos, in.reason, in.failAt = b, 0, "", 0
}

func (in *input) ok() bool { return in.reason == "" }

func (in *input) fail(reason string) {
	if in.reason == "" {
		in.reason, in.failAt = reason, in.pos
	}
	in.pos = len(in.b)
}

func (in *input) remaining() int { return len(in.b) - in.pos }

func (in *input) u8() byte {
	if in.pos >= len(in.b) {
		in.fail("unexpected end of data")
		return 0
	}
	c := in.b[in.pos]
	in.pos++
	return c
}

// varint reads JFR's compressed integer: 7 bits a byte, low group first,
// the high bit set when more follow, and a ninth byte, if reached, giving
// all 8 bits.
func (in *input) varint() uint64 {
	b, p := in.b, in.pos
	if p < len(b) && b[p] < 0x80 {
		in.pos = p + 1
		return uint64(b[p])
	}
	var v uint64
	for shift := uint(0); shift < 56; shift += 7 {
		if p >= len(b) {
			in.fail("unexpected end of data in a compressed integer")
			return 0
		}
		c := b[p]
		p++
		v |= uint64(c&0x7f) << shift
		if c < 0x80 {
			in.pos = p
			return v
		}
	}
	if p >= len(b) {
		in.fail("unexpected end of data in a compressed integer")
		return 0
	}
	v |= uint64(b[p]) << 56
	in.pos = p + 1
	return v
}

func (in *input) i64() int64 { return int64(in.varint()) }

// count reads an element count and checks it against the bytes left (each
// element takes at least minSize bytes) and limit.
func (in *input) count(minSize, limit int) int {
	n := in.varint()
	if !in.ok() {
		return 0
	}
	if n > uint64(limit) {
		in.fail("count exceeds the limit")
		return 0
	}
	if minSize > 0 && n*uint64(minSize) > uint64(in.remaining()) {
		in.fail("count exceeds the remaining data")
		return 0
	}
	return int(n)
}

func (in *input) bytes(n int) []byte {
	if n < 0 || n > in.remaining() {
		in.fail("unexpected end of data")
		return nil
	}
	s := in.b[in.pos : in.pos+n]
	in.pos += n
	return s
}

func (in *input) f32() float32 {
	s := in.bytes(4)
	if s == nil {
		return 0
	}
	return math.Float32frombits(binary.BigEndian.Uint32(s))
}

func (in *input) f64() float64 {
	s := in.bytes(8)
	if s == nil {
		return 0
	}
	return math.Float64frombits(binary.BigEndian.Uint64(s))
}

// String encodings (the byte before a string).
const (
	strNull    = 0
	strEmpty   = 1
	strPool    = 2
	strUTF8    = 3
	strChars   = 4
	strLatin1  = 5
	maxStrCode = 5
)

// str reads a string. It returns the encoding and, for inline strings, the
// text as UTF-8 (pointing into in.b or into *scratch, valid until the next
// call) or, for a pool reference, the key in ref.
func (in *input) str(scratch *[]byte, maxLen int) (code byte, text []byte, ref int64) {
	code = in.u8()
	switch code {
	case strNull, strEmpty:
		return code, nil, 0
	case strPool:
		return code, nil, in.i64()
	case strUTF8:
		n := in.count(1, maxLen)
		return code, in.bytes(n), 0
	case strLatin1:
		n := in.count(1, maxLen)
		raw := in.bytes(n)
		for _, c := range raw {
			if c >= utf8.RuneSelf {
				buf := (*scratch)[:0]
				for _, c := range raw {
					buf = utf8.AppendRune(buf, rune(c))
				}
				*scratch = buf
				return code, buf, 0
			}
		}
		return code, raw, 0
	case strChars:
		n := in.count(1, maxLen)
		buf := (*scratch)[:0]
		for i := 0; i < n && in.ok(); i++ {
			u := rune(uint16(in.varint()))
			if utf16.IsSurrogate(u) {
				if u < 0xdc00 && i+1 < n {
					save := in.pos
					u2 := rune(uint16(in.varint()))
					if r := utf16.DecodeRune(u, u2); r != utf8.RuneError {
						buf = utf8.AppendRune(buf, r)
						i++
						continue
					}
					in.pos = save
				}
				u = utf8.RuneError
			}
			buf = utf8.AppendRune(buf, u)
		}
		*scratch = buf
		return code, buf, 0
	}
	in.pos--
	in.fail("unknown string encoding")
	return 0, nil, 0
}

// skipStr skips a string.
func (in *input) skipStr(maxLen int) {
	switch code := in.u8(); code {
	case strNull, strEmpty:
	case strPool:
		in.varint()
	case strUTF8, strLatin1:
		in.bytes(in.count(1, maxLen))
	case strChars:
		n := in.count(1, maxLen)
		for i := 0; i < n && in.ok(); i++ {
			in.varint()
		}
	default:
		in.pos--
		in.fail("unknown string encoding")
	}
}
