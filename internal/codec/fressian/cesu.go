package fressian

import (
	"unicode/utf16"
	"unicode/utf8"
)

// Java writes strings one UTF-16 code unit at a time, 1–3 bytes each
// (CESU-8): U+0000 is the single byte 00, an astral character is two
// 3-byte surrogates. Java's reader accepts the lead bytes 00–7F, C0–DF and
// E0–EF and takes the low six bits of the continuation bytes unchecked.

// cesuScan checks b as Java's reader reads it. bad is the index of the
// first invalid lead byte or of a sequence cut by the end of b, or -1.
// plain reports that b is also well-formed UTF-8 without surrogates, so
// the Go string of b is exactly the string Java reads.
func cesuScan(b []byte) (bad int, plain bool) {
	plain = true
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c < 0x80:
			i++
		case c >= 0xC0 && c < 0xE0:
			if i+2 > len(b) {
				return i, false
			}
			if c < 0xC2 || b[i+1]&0xC0 != 0x80 {
				plain = false
			}
			i += 2
		case c >= 0xE0 && c < 0xF0:
			if i+3 > len(b) {
				return i, false
			}
			c1, c2 := b[i+1], b[i+2]
			if c1&0xC0 != 0x80 || c2&0xC0 != 0x80 ||
				(c == 0xE0 && c1 < 0xA0) || // overlong
				(c == 0xED && c1 >= 0xA0) { // a surrogate
				plain = false
			}
			i += 3
		default:
			return i, false
		}
	}
	return -1, plain
}

// appendCESU appends the UTF-8 of the CESU-8 bytes b (checked by cesuScan)
// to dst, pairing surrogates; an unpaired surrogate becomes U+FFFD.
func appendCESU(dst, b []byte) []byte {
	pending := rune(-1) // a high surrogate waiting for its low half
	for i := 0; i < len(b); {
		var u rune
		switch c := b[i]; {
		case c < 0x80:
			u = rune(c)
			i++
		case c < 0xE0:
			u = rune(c&0x1F)<<6 | rune(b[i+1]&0x3F)
			i += 2
		default:
			u = rune(c&0x0F)<<12 | rune(b[i+1]&0x3F)<<6 | rune(b[i+2]&0x3F)
			i += 3
		}
		if pending >= 0 {
			if u >= 0xDC00 && u <= 0xDFFF {
				dst = utf8.AppendRune(dst, utf16.DecodeRune(pending, u))
				pending = -1
				continue
			}
			dst = utf8.AppendRune(dst, utf8.RuneError)
			pending = -1
		}
		if u >= 0xD800 && u <= 0xDBFF {
			pending = u
			continue
		}
		dst = utf8.AppendRune(dst, u) // a lone low surrogate becomes U+FFFD
	}
	if pending >= 0 {
		dst = utf8.AppendRune(dst, utf8.RuneError)
	}
	return dst
}

// cesuLen returns the length of s in CESU-8, and whether the bytes of s
// are already its CESU-8 (valid UTF-8 without characters beyond the BMP).
// Invalid UTF-8 in s counts as U+FFFD, as Go's range loop reads it.
func cesuLen(s string) (n int, plain bool) {
	plain = true
	for i := 0; i < len(s); {
		c := s[i]
		if c < 0x80 {
			n++
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += 3
			plain = false
		case r < 0x800:
			n += 2
		case r < 0x10000:
			n += 3
		default:
			n += 6
			plain = false
		}
		i += size
	}
	return n, plain
}

// appendCESUString appends s in CESU-8.
func appendCESUString(dst []byte, s string) []byte {
	for _, r := range s {
		switch {
		case r < 0x80:
			dst = append(dst, byte(r))
		case r < 0x800:
			dst = append(dst, 0xC0|byte(r>>6), 0x80|byte(r&0x3F))
		case r < 0x10000:
			dst = append3(dst, r)
		default:
			hi, lo := utf16.EncodeRune(r)
			dst = append3(append3(dst, hi), lo)
		}
	}
	return dst
}

func append3(dst []byte, u rune) []byte {
	return append(dst, 0xE0|byte(u>>12), 0x80|byte(u>>6&0x3F), 0x80|byte(u&0x3F))
}
