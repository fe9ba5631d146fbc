package kieker

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/tracebridge/tracebridge/internal/javanum"
	"github.com/tracebridge/tracebridge/internal/record"
)

// TextOptions configure a LineDecoder or TextDecoder.
type TextOptions struct {
	// Catalog resolves class names to record types; nil means
	// record.Builtin().
	Catalog *record.Catalog
	// Strings maps type ids to class names (from kieker.map); nil means a
	// new, empty table (see Strings()).
	Strings *Strings
	// Interner interns string values so that repeated values are allocated
	// once; nil means a new record.Interner with its default limits.
	Interner *record.Interner
	// MaxArrayLen limits the element count of an array field
	// (DefaultMaxArrayLen when 0).
	MaxArrayLen int
	// MaxLineLen limits the length of a line in TextDecoder
	// (DefaultMaxLineLen when 0).
	MaxLineLen int
}

// LineDecoder decodes Kieker ASCII lines ($<typeId>;<loggingTimestamp>;
// <field>;…), the records of .dat files. It reads exactly what Kieker 2.0's
// reader reads:
//
//   - the '$' is optional; the type id resolves through kieker.map (the
//     Strings table) and the catalogue, aliases included;
//   - values are split at ';', and a backslash keeps itself and the next
//     character verbatim in the value (so a\;b is one value a\;b and C:\\
//     is the four characters C:\\): Kieker's writer means to escape ';' but
//     escapes nothing, and its reader keeps the backslash;
//   - numbers parse like Java's parseX (a leading '+' is fine; doubles take
//     NaN, Infinity, exponents, hexadecimal and a d/D/f/F suffix);
//     booleans are true when the value is "true" in any case and false
//     otherwise, as Java's Boolean.parseBoolean; a char is one UTF-16 unit,
//     taken as it is (even ';') and followed by a separator or the line end;
//     an array is its length followed by the elements;
//   - a line may end with an empty last value ("…;-1;" ends with an empty
//     string); a line whose value count fits a legacy layout of the type
//     (Kieker ≤1.5's OperationExecutionRecord with a leading experimentId)
//     and not the current one is read with the legacy layout.
//
// A LineDecoder is not safe for concurrent use.
type LineDecoder struct {
	strs    *Strings
	classes classCache
	intern  *record.Interner
	maxArr  int
}

// NewLineDecoder returns a line decoder configured by o.
func NewLineDecoder(o TextOptions) *LineDecoder {
	d := &LineDecoder{strs: o.Strings, intern: o.Interner, maxArr: o.MaxArrayLen}
	if d.strs == nil {
		d.strs = NewStrings(0)
	}
	if d.intern == nil {
		d.intern = &record.Interner{}
	}
	if d.maxArr <= 0 {
		d.maxArr = DefaultMaxArrayLen
	}
	d.classes.cat = o.Catalog
	if d.classes.cat == nil {
		d.classes.cat = record.Builtin()
	}
	return d
}

// Strings returns the type id → class name table.
func (d *LineDecoder) Strings() *Strings { return d.strs }

// Decode decodes one line (without its line end) into b; lineNo is used in
// errors. An empty line adds nothing. On error nothing is added.
func (d *LineDecoder) Decode(line []byte, lineNo int, b *record.Batch) error {
	if len(line) == 0 {
		return nil
	}
	c := cursor{line: line, more: true, backslash: -1}
	head, _ := c.next()
	if len(head) > 0 && head[0] == '$' {
		head = head[1:]
	}
	id, ok := javanum.ParseInt(head, 32)
	if !ok {
		return lineError(lineNo, fmt.Sprintf("type id %q is not a number", clip(string(head))), ErrMalformed)
	}
	ci := d.classes.get(int32(id))
	if ci == nil {
		if ci = d.classes.resolve(int32(id), d.strs); ci == nil {
			return lineError(lineNo, fmt.Sprintf("type id %d not in kieker.map", id), ErrUnknownString)
		}
	}
	if ci.typ == nil {
		e := lineError(lineNo, fmt.Sprintf("type id %d names %s, which is not in the catalogue", id, ci.name), ErrUnknownType)
		e.Class = ci.name
		return e
	}
	tsv, ok := c.next()
	if !ok {
		return lineError(lineNo, fmt.Sprintf("no logging timestamp for %s", ci.typ.Name), ErrMalformed)
	}
	ts, ok := javanum.ParseInt(tsv, 64)
	if !ok {
		return lineError(lineNo, fmt.Sprintf("logging timestamp %q is not a long", clip(string(tsv))), ErrMalformed)
	}
	mark := b.Len()
	vals := b.Add(ci.typ, ts).Values
	body := c
	err := d.fields(&c, ci.typ.Fields, nil, vals, lineNo, b)
	if err == nil && c.more {
		err = errTooMany
	}
	if err == nil {
		return nil
	}
	// Try the older layouts of the type before giving up.
	for _, l := range ci.typ.Legacy {
		clear(vals)
		lc := body
		if d.fields(&lc, l.Fields, l.Target, vals, lineNo, b) == nil && !lc.more {
			return nil
		}
	}
	b.Truncate(mark)
	if err == errTooMany || err == errTooFew {
		got := body.count()
		return lineError(lineNo, fmt.Sprintf("%d values where %d were expected for %s", got, c.expected, ci.typ.Name), ErrMalformed)
	}
	return err
}

// errTooMany and errTooFew are internal markers turned into a message
// naming the counts.
var (
	errTooMany = &Error{Msg: "too many values"}
	errTooFew  = &Error{Msg: "too few values"}
)

// fields decodes the values of fields from c into vals (target[i] is the
// index in vals of wire field i, or -1 to drop it; nil means identity).
func (d *LineDecoder) fields(c *cursor, fields []record.Field, target []int, vals []record.Value, lineNo int, b *record.Batch) error {
	c.expected = len(fields)
	for i, f := range fields {
		var v record.Value
		var err error
		if f.Array {
			v, err = d.array(c, f, lineNo, b)
		} else {
			v, err = d.value(c, f, f.Kind, lineNo)
		}
		if err != nil {
			return err
		}
		t := i
		if target != nil {
			t = target[i]
		}
		if t >= 0 {
			vals[t] = v
		}
	}
	return nil
}

func (d *LineDecoder) array(c *cursor, f record.Field, lineNo int, b *record.Batch) (record.Value, error) {
	raw, ok := c.next()
	if !ok {
		return record.Value{}, errTooFew
	}
	n, ok := javanum.ParseInt(raw, 32)
	if !ok || n < 0 {
		return record.Value{}, lineError(lineNo, fmt.Sprintf("field %s: array length %q is not a length", f.Name, clip(string(raw))), ErrMalformed)
	}
	if n > int64(d.maxArr) {
		return record.Value{}, lineError(lineNo, fmt.Sprintf("field %s: array length %d over the limit %d", f.Name, n, d.maxArr), ErrLimit)
	}
	c.expected += int(n)
	list := b.NewList(f.Kind, int(n))
	items := list.List().Items
	for j := range items {
		v, err := d.value(c, f, f.Kind, lineNo)
		if err != nil {
			return record.Value{}, err
		}
		items[j] = v
	}
	return list, nil
}

// value decodes the next value of kind k.
func (d *LineDecoder) value(c *cursor, f record.Field, k record.Kind, lineNo int) (record.Value, error) {
	if k == record.Char {
		return d.char(c, f, lineNo)
	}
	raw, ok := c.next()
	if !ok {
		return record.Value{}, errTooFew
	}
	switch k {
	case record.String:
		return record.StringValue(d.intern.Bytes(raw)), nil
	case record.Long, record.Int, record.Short, record.Byte:
		bits := uint(8 * k.Size())
		v, ok := javanum.ParseInt(raw, bits)
		if !ok {
			return record.Value{}, notA(lineNo, f, raw, k)
		}
		return record.IntValue(v), nil
	case record.Double:
		v, ok := javanum.ParseFloat(raw, 64)
		if !ok {
			return record.Value{}, notA(lineNo, f, raw, k)
		}
		return record.DoubleValue(v), nil
	case record.Float:
		v, ok := javanum.ParseFloat(raw, 32)
		if !ok {
			return record.Value{}, notA(lineNo, f, raw, k)
		}
		return record.FloatValue(float32(v)), nil
	case record.Bool:
		return record.BoolValue(len(raw) == 4 && raw[0]|0x20 == 't' && raw[1]|0x20 == 'r' && raw[2]|0x20 == 'u' && raw[3]|0x20 == 'e'), nil
	}
	return record.Value{}, nil
}

func notA(lineNo int, f record.Field, raw []byte, k record.Kind) error {
	return lineError(lineNo, fmt.Sprintf("field %s: %q is not a %s", f.Name, clip(string(raw)), k), ErrMalformed)
}

// char decodes a char value: exactly one UTF-16 unit, taken as it is, then
// a separator or the line end (Kieker's getChar reads one char and skips
// the next).
func (d *LineDecoder) char(c *cursor, f record.Field, lineNo int) (record.Value, error) {
	if !c.more || c.pos >= len(c.line) {
		return record.Value{}, errTooFew
	}
	r, size := utf8.DecodeRune(c.line[c.pos:])
	if r == utf8.RuneError && size <= 1 || r > 0xFFFF {
		return record.Value{}, lineError(lineNo, fmt.Sprintf("field %s: %q is not one UTF-16 char", f.Name, clip(string(c.line[c.pos:c.pos+max(size, 1)]))), ErrMalformed)
	}
	c.pos += size
	switch {
	case c.pos == len(c.line):
		c.more = false
	case c.line[c.pos] == ';':
		c.pos++
	default:
		return record.Value{}, lineError(lineNo, fmt.Sprintf("field %s: char value followed by %q instead of ';'", f.Name, c.line[c.pos]), ErrMalformed)
	}
	return record.IntValue(int64(r)), nil
}

// cursor walks the values of a line.
type cursor struct {
	line      []byte
	pos       int
	more      bool // another value follows (the last one may be empty)
	expected  int  // values the layout needs so far, for messages
	backslash int  // position of the next backslash at or after pos, if >= pos
}

// next returns the next value: up to the next ';' that is not part of a
// backslash pair, or to the line end. The bytes are the line's.
func (c *cursor) next() ([]byte, bool) {
	if !c.more {
		return nil, false
	}
	start := c.pos
	rest := c.line[start:]
	if c.backslash < start {
		// Find the next backslash once, not once per value.
		if i := bytes.IndexByte(rest, '\\'); i >= 0 {
			c.backslash = start + i
		} else {
			c.backslash = len(c.line)
		}
	}
	// Fast path: the next ';' with no backslash before it.
	j := bytes.IndexByte(rest, ';')
	if j < 0 {
		j = len(rest)
	}
	if c.backslash >= start+j {
		if start+j == len(c.line) {
			c.pos = len(c.line)
			c.more = false
			return rest, true
		}
		c.pos = start + j + 1
		return rest[:j], true
	}
	i := start
	for i < len(c.line) {
		switch c.line[i] {
		case ';':
			c.pos = i + 1
			return c.line[start:i], true
		case '\\':
			i++
		}
		i++
	}
	c.pos = len(c.line)
	c.more = false
	return c.line[start:], true
}

// count returns the number of values left, for messages.
func (c cursor) count() int {
	n := 0
	for {
		if _, ok := c.next(); !ok {
			return n
		}
		n++
	}
}

// TextDecoder decodes a stream of Kieker ASCII lines: it splits buffers
// into lines (LF, with an optional CR before it; empty lines skipped) and
// decodes each with a LineDecoder. It is resumable like Decoder: Decode
// consumes every complete line and leaves an incomplete last line for the
// next call; Finish decodes a last line that has no line end.
//
// A bad line is reported with the bytes up to and including it consumed, so
// a caller that wants to skip bad lines calls Decode again with the rest; a
// line longer than the limit is a sticky error. A TextDecoder is not safe
// for concurrent use.
type TextDecoder struct {
	lines   *LineDecoder
	maxLine int
	lineNo  int
	off     int64
	err     error
	pending bool
	scanned int // bytes of the pending line known to hold no LF
}

// NewTextDecoder returns a text decoder configured by o.
func NewTextDecoder(o TextOptions) *TextDecoder {
	d := &TextDecoder{lines: NewLineDecoder(o), maxLine: o.MaxLineLen}
	if d.maxLine <= 0 {
		d.maxLine = DefaultMaxLineLen
	}
	return d
}

// Strings returns the type id → class name table.
func (d *TextDecoder) Strings() *Strings { return d.lines.strs }

// Line returns the number of lines consumed so far.
func (d *TextDecoder) Line() int { return d.lineNo }

// Offset returns the number of bytes consumed so far.
func (d *TextDecoder) Offset() int64 { return d.off }

// Pending reports whether the last Decode left an incomplete line.
func (d *TextDecoder) Pending() bool { return d.pending }

// Decode decodes every complete line at the start of buf into b and returns
// the number of bytes consumed.
func (d *TextDecoder) Decode(buf []byte, b *record.Batch) (int, error) {
	if d.err != nil {
		d.pending = len(buf) > 0
		return 0, d.err
	}
	pos := 0
	var err error
	for pos < len(buf) {
		from := 0
		if pos == 0 && d.scanned <= len(buf) {
			from = d.scanned // the caller passes the pending line again
		}
		i := bytes.IndexByte(buf[pos+from:], '\n')
		if i >= 0 {
			i += from
		}
		d.scanned = 0
		if i < 0 {
			d.scanned = len(buf) - pos
			if len(buf)-pos > d.maxLine+1 { // +1: a CR before the LF
				d.err = lineError(d.lineNo+1, fmt.Sprintf("longer than the limit %d bytes", d.maxLine), ErrLimit)
				err = d.err
			}
			break
		}
		line := buf[pos : pos+i]
		pos += i + 1
		d.lineNo++
		if err = d.line(line, b); err != nil {
			break
		}
	}
	d.off += int64(pos)
	d.pending = pos < len(buf)
	return pos, err
}

// Finish decodes rest, the bytes left at the end of the stream, as a last
// line without a line end.
func (d *TextDecoder) Finish(rest []byte, b *record.Batch) error {
	if d.err != nil {
		return d.err
	}
	n, err := d.Decode(rest, b)
	if err != nil {
		return err
	}
	rest = rest[n:]
	d.pending = false
	if len(rest) == 0 {
		return nil
	}
	d.off += int64(len(rest))
	d.lineNo++
	return d.line(rest, b)
}

func (d *TextDecoder) line(line []byte, b *record.Batch) error {
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	if len(line) > d.maxLine {
		return lineError(d.lineNo, fmt.Sprintf("longer than the limit %d bytes", d.maxLine), ErrLimit)
	}
	return d.lines.Decode(line, d.lineNo, b)
}
