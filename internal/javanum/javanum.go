// Package javanum reads and writes numbers in the text forms Java uses:
// Long.parseLong and friends, Double.parseDouble/Float.parseFloat, and
// Double.toString/Float.toString. Kieker's ASCII logs and the KDB text
// dialect are written and read by Java, so both codecs use this package.
//
// The formatting follows Java ≥ 19 (shortest round-trip digits). Java 8 to
// 18 sometimes printed one or two more digits (e.g. 1.12758569352908506E18
// where Java 19 prints 1.127585693529085E18); values written by such JVMs
// read back exactly, but re-writing them gives the shorter form.
package javanum

import (
	"math"
	"strconv"
)

// AppendDouble appends v formatted exactly as Java's Double.toString
// (Java ≥ 19) prints it: NaN, Infinity, -Infinity, 0.0, -0.0; for
// 1e-3 <= |v| < 1e7 a plain decimal with at least one fractional digit
// (100.0, 0.062, 2472576.0); otherwise computerized scientific notation
// (1.0E-4, 1.23456789E7, -4.9E-324). The digits are the shortest that
// round-trip, except that when one digit would do, the two-digit decimal
// closest to v is preferred if it round-trips too (Java's rule, which is why
// Double.MIN_VALUE prints as 4.9E-324, not 5.0E-324).
func AppendDouble(dst []byte, v float64) []byte {
	return appendJava(dst, v, 64)
}

// AppendFloat appends v formatted exactly as Java's Float.toString
// (Java ≥ 19) prints it (see AppendDouble): 3.4028235E38, 1.4E-45, 0.1.
func AppendFloat(dst []byte, v float32) []byte {
	return appendJava(dst, float64(v), 32)
}

func appendJava(dst []byte, v float64, bitSize int) []byte {
	switch {
	case v != v:
		return append(dst, "NaN"...)
	case math.IsInf(v, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(v, -1):
		return append(dst, "-Infinity"...)
	case v == 0:
		if math.Signbit(v) {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	if v < 0 {
		dst = append(dst, '-')
		v = -v
	}
	var buf [40]byte
	digits, exp := shortestDigits(buf[:0], v, bitSize)
	if exp >= -3 && exp < 7 {
		if exp >= 0 {
			intLen := exp + 1
			if len(digits) <= intLen {
				dst = append(dst, digits...)
				for i := len(digits); i < intLen; i++ {
					dst = append(dst, '0')
				}
				return append(dst, '.', '0')
			}
			dst = append(dst, digits[:intLen]...)
			dst = append(dst, '.')
			return append(dst, digits[intLen:]...)
		}
		dst = append(dst, '0', '.')
		for i := -1; i > exp; i-- {
			dst = append(dst, '0')
		}
		return append(dst, digits...)
	}
	dst = append(dst, digits[0], '.')
	if len(digits) > 1 {
		dst = append(dst, digits[1:]...)
	} else {
		dst = append(dst, '0')
	}
	dst = append(dst, 'E')
	return strconv.AppendInt(dst, int64(exp), 10)
}

// shortestDigits returns the decimal digits (no trailing zeros) and the
// exponent e of v > 0 as Java chooses them: v ≈ d.ddd × 10^e.
func shortestDigits(buf []byte, v float64, bitSize int) ([]byte, int) {
	s := strconv.AppendFloat(buf, v, 'e', -1, bitSize)
	digits, exp := splitE(s)
	if len(digits) != 1 {
		return digits, exp
	}
	// Java considers two-digit decimals too when one digit suffices and
	// takes the one closest to v among those that round to v.
	var buf2 [40]byte
	s2 := strconv.AppendFloat(buf2[:0], v, 'e', 1, bitSize)
	back, err := strconv.ParseFloat(string(s2), bitSize)
	d2, e2 := splitE(s2)
	if err != nil || back != v || e2 == exp && len(d2) == 1 && d2[0] == digits[0] {
		return digits, exp
	}
	n := copy(buf[:cap(buf)], d2)
	return buf[:n], e2
}

// splitE splits strconv's 'e' format (d.ddde±XX) into digits without
// trailing zeros (in place) and the exponent.
func splitE(s []byte) ([]byte, int) {
	i := 0
	for i < len(s) && s[i] != 'e' {
		i++
	}
	exp, _ := strconv.Atoi(string(s[i+1:]))
	mant := s[:i]
	n := 0
	for _, c := range mant {
		if c != '.' {
			mant[n] = c
			n++
		}
	}
	for n > 1 && mant[n-1] == '0' {
		n--
	}
	return mant[:n], exp
}

// ParseInt parses a decimal integer as Java's Byte/Short/Integer/
// Long.parseX do: an optional sign, ASCII digits, within the range of a
// signed integer of the given bit size.
func ParseInt(b []byte, bitSize uint) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	neg := false
	switch b[0] {
	case '-':
		neg = true
		b = b[1:]
	case '+':
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	limit := uint64(1) << (bitSize - 1) // magnitude of the minimum
	var u uint64
	if len(b) <= 18 { // cannot overflow 64 bits
		for _, c := range b {
			c -= '0'
			if c > 9 {
				return 0, false
			}
			u = u*10 + uint64(c)
		}
	} else {
		cutoff := limit / 10
		for _, c := range b {
			c -= '0'
			if c > 9 || u > cutoff {
				return 0, false
			}
			u = u*10 + uint64(c)
		}
	}
	if u > limit || u == limit && !neg {
		return 0, false
	}
	if neg {
		return -int64(u), true
	}
	return int64(u), true
}

// ParseFloat parses a number as Java's Double.parseDouble (bitSize 64)
// or Float.parseFloat (32) do: surrounding whitespace (chars <= ' ') is
// trimmed; an optional sign; NaN, Infinity, a decimal with optional
// fraction and exponent, or a hexadecimal 0x…p… number; an optional d, D, f
// or F suffix. Out-of-range values become ±Infinity or ±0 as in Java.
func ParseFloat(b []byte, bitSize int) (float64, bool) {
	for len(b) > 0 && b[0] <= ' ' {
		b = b[1:]
	}
	for len(b) > 0 && b[len(b)-1] <= ' ' {
		b = b[:len(b)-1]
	}
	s := b
	neg := false
	if len(s) > 0 && (s[0] == '+' || s[0] == '-') {
		neg = s[0] == '-'
		s = s[1:]
	}
	switch string(s) {
	case "NaN":
		return math.NaN(), true
	case "Infinity":
		if neg {
			return math.Inf(-1), true
		}
		return math.Inf(1), true
	}
	if n := len(s); n > 0 {
		switch s[n-1] {
		case 'd', 'D', 'f', 'F':
			s = s[:n-1]
			b = b[:len(b)-1]
		}
	}
	if !javaFloatSyntax(s) {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(b), bitSize)
	if err != nil {
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return 0, false
		}
	}
	return v, true
}

// javaFloatSyntax checks an unsigned, suffix-less Java floating-point
// literal: digits [. digits] [e[sign]digits], or .digits…, or 0x hex
// [. hex] p[sign]digits.
func javaFloatSyntax(s []byte) bool {
	i := 0
	digits := func(hex bool) int {
		n := 0
		for i < len(s) {
			c := s[i]
			if c >= '0' && c <= '9' || hex && (c|0x20 >= 'a' && c|0x20 <= 'f') {
				i++
				n++
				continue
			}
			break
		}
		return n
	}
	hex := len(s) > 1 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')
	if hex {
		i = 2
	}
	n := digits(hex)
	if i < len(s) && s[i] == '.' {
		i++
		n += digits(hex)
	}
	if n == 0 {
		return false
	}
	if i < len(s) && (hex && (s[i] == 'p' || s[i] == 'P') || !hex && (s[i] == 'e' || s[i] == 'E')) {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits(false) == 0 {
			return false
		}
	} else if hex {
		return false
	}
	return i == len(s)
}
