package kdb

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/tracebridge/tracebridge/internal/javanum"
	"github.com/tracebridge/tracebridge/internal/record"
)

// TextDecoder decodes text-dialect messages. It is not safe for concurrent
// use; give each consumer goroutine its own.
type TextDecoder struct {
	plans   plans
	lim     limits
	in      *record.Interner
	scratch []byte // unescaped values
}

// NewTextDecoder returns a decoder for records mapped by m.
// Options.MaxRecordSize is not used.
func NewTextDecoder(m *Mapping, o Options) *TextDecoder {
	return &TextDecoder{plans: newPlans(m), lim: o.limits(), in: o.interner()}
}

// DecodeMessage decodes every record of msg, one per line, into b and
// returns how many it added. Blank lines are skipped. Each record is all or
// nothing: on error the bad record is not in b, the n records before it
// are, and the *Error names the line (counted from 1, physical lines).
// The records do not refer to msg.
func (d *TextDecoder) DecodeMessage(msg []byte, b *record.Batch) (n int, err error) {
	return d.decode(msg, b, -1)
}

// DecodeLine decodes the one record of line into b. Blank lines around it
// (a trailing "\n" or "\r\n", say) are allowed and a blank line adds
// nothing; a second record is an error and leaves nothing in b.
func (d *TextDecoder) DecodeLine(line []byte, b *record.Batch) error {
	_, err := d.decode(line, b, 1)
	return err
}

// decode decodes up to limit records (any number when limit < 0).
func (d *TextDecoder) decode(msg []byte, b *record.Batch, limit int) (n int, err error) {
	pos := 0
	for pos < len(msg) {
		if next, blank := blankLine(msg, pos); blank {
			pos = next
			continue
		}
		if n == limit {
			b.Truncate(b.Len() - n)
			return 0, &Error{Offset: -1, Line: 1 + bytes.Count(msg[:pos], []byte{'\n'}),
				Reason: "more than one record in the line", Err: ErrInvalid}
		}
		end, e := d.decodeRecord(msg, pos, b)
		if e != nil {
			e.Line = 1 + bytes.Count(msg[:pos], []byte{'\n'})
			return n, e
		}
		n++
		pos = end
	}
	return n, nil
}

// blankLine reports whether the line starting at pos holds only spaces,
// tabs and carriage returns, and where the next line starts.
func blankLine(msg []byte, pos int) (next int, blank bool) {
	for i := pos; i < len(msg); i++ {
		switch msg[i] {
		case ' ', '\t', '\r':
		case '\n':
			return i + 1, true
		default:
			return pos, false
		}
	}
	return len(msg), true
}

// tokenizer splits one record into its raw values.
type tokenizer struct {
	msg  []byte
	pos  int
	done bool // the record's last value has been returned
}

// next returns the next raw value and whether it holds backslashes. It
// must not be called once done is set.
func (z *tokenizer) next() (tok []byte, esc bool) {
	msg, start := z.msg, z.pos
	i, escEnd := start, start
	for i < len(msg) {
		switch msg[i] {
		case ';':
			z.pos = i + 1
			return msg[start:i], esc
		case '\n':
			z.done, z.pos = true, i+1
			return trimCR(msg, start, i, escEnd), esc
		case '\\':
			esc = true
			i = min(i+2, len(msg))
			escEnd = i
			continue
		}
		i++
	}
	z.done, z.pos = true, len(msg)
	return trimCR(msg, start, len(msg), escEnd), esc
}

// trimCR drops an unescaped carriage return before the end of a record.
func trimCR(msg []byte, start, end, escEnd int) []byte {
	if end > escEnd && msg[end-1] == '\r' {
		end--
	}
	return msg[start:end]
}

// count returns the number of values left in the record.
func (z tokenizer) count() int {
	n := 0
	for !z.done {
		z.next()
		n++
	}
	return n
}

// value returns tok unescaped (in d.scratch when it had backslashes), or
// false for a backslash with nothing after it.
func (d *TextDecoder) value(tok []byte, esc bool) ([]byte, bool) {
	if !esc {
		return tok, true
	}
	out := d.scratch[:0]
	for j := 0; j < len(tok); j++ {
		c := tok[j]
		if c == '\\' {
			j++
			if j == len(tok) {
				return nil, false
			}
			c = tok[j]
		}
		out = append(out, c)
	}
	d.scratch = out
	return out, true
}

// decodeRecord decodes the record starting at msg[pos] and returns where
// the next line starts. On error nothing is left in b; the caller sets Line.
func (d *TextDecoder) decodeRecord(msg []byte, pos int, b *record.Batch) (int, *Error) {
	z := tokenizer{msg: msg, pos: pos}
	val, ok := d.value(z.next())
	if !ok {
		return 0, &Error{Offset: -1, Reason: "backslash at the end of the message", Err: ErrInvalid}
	}
	id, ok := javanum.ParseInt(val, 32)
	if !ok {
		return 0, &Error{Offset: -1, Reason: fmt.Sprintf("record id %s is not a number", quote(val)), Err: ErrInvalid}
	}
	p := d.plans.get(int32(id))
	if p == nil {
		return 0, &Error{Offset: -1, Reason: fmt.Sprintf("unknown type id %d", id), Err: ErrUnknownID}
	}
	n := b.Len()
	if err := d.fields(p, &z, b.Add(p.t, record.NoTimestamp).Values, b); err != nil {
		b.Truncate(n)
		return 0, err
	}
	return z.pos, nil
}

// fields decodes the values of one record.
func (d *TextDecoder) fields(p *plan, z *tokenizer, vals []record.Value, b *record.Batch) *Error {
	got, want := 0, len(p.fields) // values read, values expected so far
	for i := range p.fields {
		f := &p.fields[i]
		if z.done {
			return d.countErr(p, got, want, i)
		}
		val, ok := d.value(z.next())
		got++
		if !ok {
			return d.fieldErr(p, i, ErrInvalid, "backslash at the end of the message")
		}
		if !f.array {
			v, err := d.scalar(p, i, val)
			if err != nil {
				if !p.arrays { // a shifted value reads better as a count error
					if total := got + z.count(); total != want {
						return d.countErr(p, total, want, len(p.fields))
					}
				}
				return err
			}
			vals[i] = v
			continue
		}
		n, ok := javanum.ParseInt(val, 32)
		switch {
		case !ok:
			return d.fieldErr(p, i, ErrInvalid, "%s is not an array length", quote(val))
		case n < 0:
			return d.fieldErr(p, i, ErrInvalid, "array length %d", n)
		case n > int64(d.lim.arr):
			return d.fieldErr(p, i, ErrLimit, "array length %d over the limit %d", n, d.lim.arr)
		}
		want += int(n)
		list := b.NewList(f.kind, int(n))
		items := list.List().Items
		for j := range items {
			if z.done {
				return d.countErr(p, got, want, i+1)
			}
			val, ok := d.value(z.next())
			got++
			if !ok {
				return d.fieldErr(p, i, ErrInvalid, "backslash at the end of the message")
			}
			v, err := d.element(p, i, val)
			if err != nil {
				return err
			}
			items[j] = v
		}
		vals[i] = list
	}
	if !z.done {
		return d.countErr(p, got+z.count(), want, len(p.fields))
	}
	return nil
}

// countErr reports a wrong number of values; read is the number of fields
// whose array counts are known.
func (d *TextDecoder) countErr(p *plan, got, want, read int) *Error {
	atLeast := ""
	for _, f := range p.fields[read:] {
		if f.array {
			atLeast = "at least "
			break
		}
	}
	return &Error{Offset: -1, Type: p.short, Reason: fmt.Sprintf("%d fields where %s%d were expected", got, atLeast, want), Err: ErrInvalid}
}

func (d *TextDecoder) fieldErr(p *plan, field int, kind error, format string, args ...any) *Error {
	return &Error{Offset: -1, Type: p.short, Field: p.fields[field].name, Reason: fmt.Sprintf(format, args...), Err: kind}
}

// scalar parses the value of a scalar field; strings go through the
// field's cache.
func (d *TextDecoder) scalar(p *plan, i int, val []byte) (record.Value, *Error) {
	f := &p.fields[i]
	if f.kind == record.String {
		if len(val) > d.lim.str {
			return record.Value{}, d.fieldErr(p, i, ErrLimit, "string length %d over the limit %d", len(val), d.lim.str)
		}
		return record.StringValue(f.str(val, d.in)), nil
	}
	v, ok := parseText(f.kind, val)
	if !ok {
		return v, d.fieldErr(p, i, ErrInvalid, "%s is not %s", quote(val), article(f.kind))
	}
	return v, nil
}

// element parses one element of an array field.
func (d *TextDecoder) element(p *plan, i int, val []byte) (record.Value, *Error) {
	f := &p.fields[i]
	if f.kind == record.String {
		if len(val) > d.lim.str {
			return record.Value{}, d.fieldErr(p, i, ErrLimit, "string length %d over the limit %d", len(val), d.lim.str)
		}
		return record.StringValue(d.in.Bytes(val)), nil
	}
	v, ok := parseText(f.kind, val)
	if !ok {
		return v, d.fieldErr(p, i, ErrInvalid, "element %s is not %s", quote(val), article(f.kind))
	}
	return v, nil
}

// parseText parses a non-string value the way Java's parse methods do.
func parseText(k record.Kind, val []byte) (record.Value, bool) {
	switch k {
	case record.Bool:
		b, ok := parseBool(val)
		return record.BoolValue(b), ok
	case record.Byte, record.Short, record.Int, record.Long:
		n, ok := javanum.ParseInt(val, uint(8*k.Size()))
		return record.IntValue(n), ok
	case record.Char:
		r, size := utf8.DecodeRune(val)
		if size == 0 || size != len(val) || r > 0xFFFF || (r == utf8.RuneError && size == 1) {
			return record.Value{}, false
		}
		return record.IntValue(int64(r)), true
	case record.Float:
		f, ok := javanum.ParseFloat(val, 32)
		if f != f {
			return record.FloatValue(math.Float32frombits(javaFloatNaN)), ok
		}
		return record.FloatValue(float32(f)), ok
	case record.Double:
		f, ok := javanum.ParseFloat(val, 64)
		if f != f {
			return record.DoubleValue(math.Float64frombits(javaDoubleNaN)), ok
		}
		return record.DoubleValue(f), ok
	}
	return record.Value{}, false
}

// Java's canonical NaNs (Float.NaN, Double.NaN): every NaN read from text
// has these bits.
const (
	javaFloatNaN  = 0x7fc00000
	javaDoubleNaN = 0x7ff8000000000000
)

// parseBool accepts true and false in any case, and t and f.
func parseBool(b []byte) (bool, bool) {
	switch {
	case len(b) == 1 && (b[0] == 't' || b[0] == 'T'):
		return true, true
	case len(b) == 1 && (b[0] == 'f' || b[0] == 'F'):
		return false, true
	case bytes.EqualFold(b, []byte("true")):
		return true, true
	case bytes.EqualFold(b, []byte("false")):
		return false, true
	}
	return false, false
}

// article names a kind with its article ("a long", "an int").
func article(k record.Kind) string {
	if k == record.Int {
		return "an int"
	}
	return "a " + k.String()
}

// quote renders a value for an error message, shortened when long.
func quote(b []byte) string {
	const limit = 64
	if len(b) > limit {
		return strconv.Quote(string(b[:limit])) + "…"
	}
	return strconv.Quote(string(b))
}

// AppendText appends r in the text dialect under id, with the default
// limits: "<id>;<v1>;…", no newline (join records of one message with
// "\n"). Strings escape ';', '\', CR and LF with a backslash; booleans are
// true/false; floating-point values are written as Java's Double.toString
// and Float.toString print them (package javanum), which read back exactly
// (any NaN is written "NaN" and reads back as Java's canonical NaN). A char that is a lone UTF-16 surrogate cannot be written.
// On error dst is returned unchanged.
func AppendText(dst []byte, id int32, r *record.Record) ([]byte, error) {
	return appendText(dst, id, r, Options{}.limits())
}

func appendText(dst []byte, id int32, r *record.Record, lim limits) ([]byte, error) {
	if err := checkRecord(r); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = strconv.AppendInt(dst, int64(id), 10)
	t := r.Type
	for i, f := range t.Fields {
		v := r.Values[i]
		var err error
		if !f.Array {
			dst = append(dst, ';')
			if dst, err = appendTextValue(dst, f.Kind, v, lim); err != nil {
				return dst[:start], encodeErr(t, f.Name, err)
			}
			continue
		}
		items, err := arrayItems(f, v, lim)
		if err != nil {
			return dst[:start], encodeErr(t, f.Name, err)
		}
		dst = append(dst, ';')
		dst = strconv.AppendInt(dst, int64(len(items)), 10)
		for _, it := range items {
			dst = append(dst, ';')
			if dst, err = appendTextValue(dst, f.Kind, it, lim); err != nil {
				return dst[:start], encodeErr(t, f.Name, err)
			}
		}
	}
	return dst, nil
}

func appendTextValue(dst []byte, k record.Kind, v record.Value, lim limits) ([]byte, error) {
	if err := checkRange(k, v); err != nil {
		return dst, err
	}
	switch k {
	case record.Bool:
		return strconv.AppendBool(dst, v.Bool()), nil
	case record.Byte, record.Short, record.Int, record.Long:
		return strconv.AppendInt(dst, v.Int(), 10), nil
	case record.Char:
		c := rune(v.Int())
		if c >= 0xD800 && c <= 0xDFFF {
			return dst, &valueError{ErrInvalid, fmt.Sprintf("char U+%04X is a lone surrogate, which text cannot hold", c)}
		}
		if c < utf8.RuneSelf && special(byte(c)) {
			dst = append(dst, '\\')
		}
		return utf8.AppendRune(dst, c), nil
	case record.Float:
		return javanum.AppendFloat(dst, v.Float()), nil
	case record.Double:
		return javanum.AppendDouble(dst, v.Double()), nil
	case record.String:
		s := v.Str()
		if len(s) > lim.str {
			return dst, &valueError{ErrLimit, fmt.Sprintf("string length %d over the limit %d", len(s), lim.str)}
		}
		return appendEscaped(dst, s), nil
	}
	return dst, &valueError{ErrInvalid, "kind " + k.String() + " cannot be encoded"}
}

// special reports whether c needs a backslash in a text value.
func special(c byte) bool { return c == ';' || c == '\\' || c == '\n' || c == '\r' }

func appendEscaped(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if special(s[i]) {
			dst = append(dst, s[:i]...)
			for ; i < len(s); i++ {
				if special(s[i]) {
					dst = append(dst, '\\')
				}
				dst = append(dst, s[i])
			}
			return dst
		}
	}
	return append(dst, s...)
}
