package otlp

import (
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONNesting bounds the nesting of JSON objects and arrays, known
// fields or not.
const maxJSONNesting = 512

// js scans a JSON text in place. The first error sticks: every read
// after it returns a zero value. Objects are iterated as
//
//	for ok := j.object(); ok; ok = j.more('}') {
//		switch string(j.key()) { … read the value … default: j.skip() }
//	}
//
// and arrays as for ok := j.array(); ok; ok = j.more(']') { … }.
type js struct {
	buf   []byte
	pos   int
	depth int
	err   *Error
	tmp   []byte // unescaped string; valid until the next string read
}

func (j *js) fail(format string, args ...any) {
	if j.err == nil {
		j.err = malformed(j.pos, format, args...)
	}
}

func (j *js) ws() {
	for j.pos < len(j.buf) {
		switch j.buf[j.pos] {
		case ' ', '\t', '\n', '\r':
			j.pos++
		default:
			return
		}
	}
}

// peek returns the next byte after white space (0 at the end).
func (j *js) peek() byte {
	j.ws()
	if j.pos < len(j.buf) {
		return j.buf[j.pos]
	}
	return 0
}

// literal consumes lit if it comes next.
func (j *js) literal(lit string) bool {
	if len(j.buf)-j.pos >= len(lit) && string(j.buf[j.pos:j.pos+len(lit)]) == lit {
		j.pos += len(lit)
		return true
	}
	return false
}

func (j *js) open(c byte, what string) bool {
	if j.err != nil {
		return false
	}
	switch j.peek() {
	case c:
	case 'n':
		if j.literal("null") {
			return false
		}
		fallthrough
	default:
		j.fail("want %s", what)
		return false
	}
	j.pos++
	if j.depth++; j.depth > maxJSONNesting {
		j.fail("nested deeper than %d", maxJSONNesting)
		return false
	}
	if j.peek() == c+2 { // '}' or ']'
		j.pos++
		j.depth--
		return false
	}
	return true
}

// object starts an object (null is an empty one); true when it has a
// member to read.
func (j *js) object() bool { return j.open('{', "an object") }

// array starts an array (null is an empty one); true when it has an item
// to read.
func (j *js) array() bool { return j.open('[', "an array") }

// more moves to the next member or item; false at the closing bracket.
func (j *js) more(closing byte) bool {
	if j.err != nil {
		return false
	}
	switch j.peek() {
	case ',':
		j.pos++
		return true
	case closing:
		j.pos++
		j.depth--
		return false
	}
	j.fail("want , or %c", closing)
	return false
}

// key reads a member's name and its colon.
func (j *js) key() []byte {
	if j.peek() != '"' {
		j.fail("want a member name")
		return nil
	}
	k := j.str()
	if j.peek() != ':' {
		j.fail("want :")
		return nil
	}
	j.pos++
	return k
}

// str reads a string (null is ""); the result is valid until the next
// string read.
func (j *js) str() []byte {
	if j.err != nil {
		return nil
	}
	switch j.peek() {
	case '"':
	case 'n':
		if j.literal("null") {
			return nil
		}
		fallthrough
	default:
		j.fail("want a string")
		return nil
	}
	j.pos++
	start := j.pos
	for j.pos < len(j.buf) {
		c := j.buf[j.pos]
		switch {
		case c == '"':
			j.pos++
			return j.buf[start : j.pos-1]
		case c == '\\':
			return j.unescape(start)
		case c < 0x20:
			j.fail("control character %#02x in a string", c)
			return nil
		}
		j.pos++
	}
	j.fail("unterminated string")
	return nil
}

// unescape reads the rest of a string with escapes into j.tmp.
func (j *js) unescape(start int) []byte {
	j.tmp = append(j.tmp[:0], j.buf[start:j.pos]...)
	for j.pos < len(j.buf) {
		c := j.buf[j.pos]
		switch {
		case c == '"':
			j.pos++
			return j.tmp
		case c < 0x20:
			j.fail("control character %#02x in a string", c)
			return nil
		case c != '\\':
			j.tmp = append(j.tmp, c)
			j.pos++
			continue
		}
		if j.pos+1 >= len(j.buf) {
			break
		}
		e := j.buf[j.pos+1]
		j.pos += 2
		switch e {
		case '"', '\\', '/':
			j.tmp = append(j.tmp, e)
		case 'b':
			j.tmp = append(j.tmp, '\b')
		case 'f':
			j.tmp = append(j.tmp, '\f')
		case 'n':
			j.tmp = append(j.tmp, '\n')
		case 'r':
			j.tmp = append(j.tmp, '\r')
		case 't':
			j.tmp = append(j.tmp, '\t')
		case 'u':
			r, ok := j.hex4()
			if !ok {
				return nil
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if j.pos+1 < len(j.buf) && j.buf[j.pos] == '\\' && j.buf[j.pos+1] == 'u' {
					save := j.pos
					j.pos += 2
					if r2, ok = j.hex4(); !ok {
						return nil
					}
					if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
						r = dec
					} else {
						j.pos = save // not a pair: the second escape stands alone
						r = utf8.RuneError
					}
				} else {
					r = utf8.RuneError
				}
			}
			j.tmp = utf8.AppendRune(j.tmp, r)
		default:
			j.pos -= 2
			j.fail("bad escape \\%c", e)
			return nil
		}
	}
	j.fail("unterminated string")
	return nil
}

func (j *js) hex4() (rune, bool) {
	if len(j.buf)-j.pos < 4 {
		j.fail("truncated \\u escape")
		return 0, false
	}
	var r rune
	for _, c := range j.buf[j.pos : j.pos+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			j.fail("bad \\u escape")
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	j.pos += 4
	return r, true
}

// number reads a JSON number's text.
func (j *js) number() []byte {
	start := j.pos
	i := j.pos
	if i < len(j.buf) && j.buf[i] == '-' {
		i++
	}
	digits := func() bool {
		s := i
		for i < len(j.buf) && j.buf[i] >= '0' && j.buf[i] <= '9' {
			i++
		}
		return i > s
	}
	if i < len(j.buf) && j.buf[i] == '0' {
		i++
	} else if !digits() {
		j.fail("want a number")
		return nil
	}
	if i < len(j.buf) && j.buf[i] == '.' {
		i++
		if !digits() {
			j.pos = i
			j.fail("want digits after the decimal point")
			return nil
		}
	}
	if i < len(j.buf) && (j.buf[i] == 'e' || j.buf[i] == 'E') {
		i++
		if i < len(j.buf) && (j.buf[i] == '+' || j.buf[i] == '-') {
			i++
		}
		if !digits() {
			j.pos = i
			j.fail("want digits in the exponent")
			return nil
		}
	}
	j.pos = i
	return j.buf[start:i]
}

// numText reads a number, or a string holding one (how 64-bit integers
// travel in JSON).
func (j *js) numText(what string) []byte {
	if j.err != nil {
		return nil
	}
	c := j.peek()
	if c == '"' {
		return j.str()
	}
	if c == '-' || c >= '0' && c <= '9' {
		return j.number()
	}
	j.fail("%s: want a number", what)
	return nil
}

// uint reads an unsigned integer of bits bits.
func (j *js) uint(what string, bits int) uint64 {
	j.ws()
	at := j.pos
	t := j.numText(what)
	if j.err != nil {
		return 0
	}
	v, err := strconv.ParseUint(string(t), 10, bits)
	if err != nil {
		j.pos = at
		j.fail("%s: %q is not an unsigned %d-bit integer", what, t, bits)
	}
	return v
}

// int reads a signed integer of bits bits.
func (j *js) int(what string, bits int) int64 {
	j.ws()
	at := j.pos
	t := j.numText(what)
	if j.err != nil {
		return 0
	}
	v, err := strconv.ParseInt(string(t), 10, bits)
	if err != nil {
		j.pos = at
		j.fail("%s: %q is not a %d-bit integer", what, t, bits)
	}
	return v
}

// float reads a double: a number, or a string ("NaN", "Infinity",
// "-Infinity", or a number).
func (j *js) float(what string) float64 {
	j.ws()
	at := j.pos
	t := j.numText(what)
	if j.err != nil {
		return 0
	}
	v, err := strconv.ParseFloat(string(t), 64)
	if err != nil && !isRangeErr(err) {
		j.pos = at
		j.fail("%s: %q is not a number", what, t)
	}
	return v
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

// boolean reads true or false.
func (j *js) boolean(what string) bool {
	if j.err != nil {
		return false
	}
	j.ws()
	switch {
	case j.literal("true"):
		return true
	case j.literal("false"):
		return false
	}
	j.fail("%s: want true or false", what)
	return false
}

// enum reads an enum: its number, or its name in names.
func (j *js) enum(what string, names []string) uint64 {
	if j.peek() == '"' {
		at := j.pos
		s := j.str()
		for i, n := range names {
			if string(s) == n {
				return uint64(i)
			}
		}
		if j.err == nil {
			j.pos = at
			j.fail("%s: unknown name %q", what, s)
		}
		return 0
	}
	return uint64(uint32(j.int(what, 32)))
}

// skip reads a value of any kind.
func (j *js) skip() {
	if j.err != nil {
		return
	}
	switch c := j.peek(); {
	case c == '{':
		for ok := j.object(); ok; ok = j.more('}') {
			j.key()
			j.skip()
		}
	case c == '[':
		for ok := j.array(); ok; ok = j.more(']') {
			j.skip()
		}
	case c == '"':
		j.str()
	case c == '-' || c >= '0' && c <= '9':
		j.number()
	case j.literal("true"), j.literal("false"), j.literal("null"):
	default:
		j.fail("want a value")
	}
}

// end checks that only white space follows the top-level value.
func (j *js) end() {
	if j.err == nil && j.peek() != 0 {
		j.fail("data after the top-level value")
	}
}

func (j *js) errOrNil() error {
	if j.err == nil {
		return nil
	}
	return j.err
}
