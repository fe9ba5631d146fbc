package kdb

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Decoder decodes a binary KDB stream (one TCP connection, or one broker
// byte message). It is not safe for concurrent use.
type Decoder struct {
	plans   plans
	lim     limits
	in      *record.Interner
	off     int64 // stream offset of the next call's buf[0]
	pending int   // bytes of an incomplete record left by the last call
	need    int   // bytes the pending record needs before it is worth measuring again
	partial *plan // the pending record's plan, when its id has arrived
	err     error // sticky
}

// NewDecoder returns a decoder for records mapped by m.
func NewDecoder(m *Mapping, o Options) *Decoder {
	return &Decoder{plans: newPlans(m), lim: o.limits(), in: o.interner()}
}

// Reset makes the decoder ready for a new stream (the next broker message):
// offset 0, no pending record, no error. The interner is kept, so strings
// repeated across messages are still allocated once.
func (d *Decoder) Reset() {
	d.off, d.pending, d.need, d.partial, d.err = 0, 0, 0, nil, nil
}

// Decode decodes every complete record at the start of buf into b and
// returns the number of bytes consumed. An incomplete trailing record is not
// an error: Decode returns n < len(buf) and a nil error, and the caller
// passes buf[n:] followed by more bytes to the next call.
//
// On malformed input Decode returns the bytes consumed by the good records
// before the bad one (they are in b and are valid) and an *Error whose
// Offset is the stream offset of the bad record's first byte. The error is
// final: every later call returns it again.
//
// The records do not refer to buf, which the caller may reuse at once.
func (d *Decoder) Decode(buf []byte, b *record.Batch) (n int, err error) {
	if d.err != nil {
		return 0, d.err
	}
	if len(buf) < d.need {
		d.pending = len(buf)
		return 0, nil
	}
	pos := 0
	for {
		rec := buf[pos:]
		if len(rec) < 4 {
			d.need, d.partial = 4, nil
			break
		}
		id := int32(binary.BigEndian.Uint32(rec))
		p := d.plans.get(id)
		if p == nil {
			return d.fail(pos, &Error{Reason: fmt.Sprintf("unknown type id %d", id), Err: ErrUnknownID})
		}
		size, err := d.measure(p, rec)
		if err != nil {
			return d.fail(pos, err)
		}
		if size < 0 {
			d.need, d.partial = -size, p
			break
		}
		d.fill(p, rec[:size], b.Add(p.t, record.NoTimestamp).Values, b)
		pos += size
	}
	d.off += int64(pos)
	d.pending = len(buf) - pos
	return pos, nil
}

// fail makes err, positioned at buf[pos], the final state.
func (d *Decoder) fail(pos int, err *Error) (int, error) {
	err.Offset = d.off + int64(pos)
	d.off += int64(pos)
	d.pending = 0
	d.err = err
	return pos, err
}

// Offset returns the stream offset up to which records have been decoded.
func (d *Decoder) Offset() int64 { return d.off }

// Pending returns the number of bytes of an incomplete record that the last
// Decode call left unconsumed.
func (d *Decoder) Pending() int { return d.pending }

// Err returns the final error, if any.
func (d *Decoder) Err() error { return d.err }

// End reports how the stream ended, for a source whose input is closed: the
// final error if there was one, an *Error wrapping ErrTruncated when the
// last Decode call left part of a record (a client that disconnected
// mid-record), else nil.
func (d *Decoder) End() error {
	if d.err != nil {
		return d.err
	}
	if d.pending > 0 {
		e := &Error{Offset: d.off, Reason: fmt.Sprintf("stream ends inside a record after %d of its bytes", d.pending), Err: ErrTruncated}
		if d.partial != nil && d.pending >= 4 {
			e.Type = d.partial.short
		}
		return e
	}
	return nil
}

// measure returns the size of the record at the start of rec, or minus the
// number of bytes needed before it can tell (the record is incomplete). It
// checks every length and count against the limits as soon as it is read,
// so an error does not depend on how the stream was split.
func (d *Decoder) measure(p *plan, rec []byte) (int, *Error) {
	pos := 4
	for i := range p.ops {
		op := &p.ops[i]
		pos += op.skip
		if len(rec) < pos+4 {
			return -(pos + 4), nil
		}
		n := int64(int32(binary.BigEndian.Uint32(rec[pos:])))
		pos += 4
		if !op.array {
			if err := d.checkString(p, op.field, n, pos); err != nil {
				return 0, err
			}
			pos += int(n)
			continue
		}
		if n < 0 {
			return 0, d.fieldErr(p, op.field, ErrInvalid, "array length %d", n)
		}
		if n > int64(d.lim.arr) {
			return 0, d.fieldErr(p, op.field, ErrLimit, "array length %d over the limit %d", n, d.lim.arr)
		}
		if op.elem != record.String {
			size := n * int64(op.elem.Size())
			if size > int64(d.lim.rec-pos) {
				return 0, d.recordErr(p, op.field, int64(pos)+size)
			}
			pos += int(size)
			continue
		}
		for range n {
			if len(rec) < pos+4 {
				return -(pos + 4), nil
			}
			l := int64(int32(binary.BigEndian.Uint32(rec[pos:])))
			pos += 4
			if err := d.checkString(p, op.field, l, pos); err != nil {
				return 0, err
			}
			pos += int(l)
		}
	}
	pos += p.tail
	if pos > d.lim.rec {
		return 0, d.recordErr(p, -1, int64(pos))
	}
	if len(rec) < pos {
		return -pos, nil
	}
	return pos, nil
}

// checkString checks a string length read just before pos.
func (d *Decoder) checkString(p *plan, field int, n int64, pos int) *Error {
	switch {
	case n < 0:
		return d.fieldErr(p, field, ErrInvalid, "string length %d", n)
	case n > int64(d.lim.str):
		return d.fieldErr(p, field, ErrLimit, "string length %d over the limit %d", n, d.lim.str)
	case n > int64(d.lim.rec-pos):
		return d.recordErr(p, field, int64(pos)+n)
	}
	return nil
}

func (d *Decoder) fieldErr(p *plan, field int, kind error, format string, args ...any) *Error {
	return &Error{Type: p.short, Field: p.fields[field].name, Reason: fmt.Sprintf(format, args...), Err: kind}
}

// recordErr reports a record over MaxRecordSize, found at field (or at its
// end, field -1).
func (d *Decoder) recordErr(p *plan, field int, size int64) *Error {
	e := &Error{Type: p.short, Reason: fmt.Sprintf("record size %d over the limit %d", size, d.lim.rec), Err: ErrLimit}
	if field >= 0 {
		e.Field = p.fields[field].name
	}
	return e
}

// fill decodes a record that measure found complete.
func (d *Decoder) fill(p *plan, rec []byte, vals []record.Value, b *record.Batch) {
	pos := 4
	for i := range p.fields {
		f := &p.fields[i]
		if f.array {
			pos = d.fillArray(f.kind, rec, pos, &vals[i], b)
			continue
		}
		switch f.kind {
		case record.Long:
			vals[i] = record.IntValue(int64(binary.BigEndian.Uint64(rec[pos:])))
			pos += 8
		case record.Int:
			vals[i] = record.IntValue(int64(int32(binary.BigEndian.Uint32(rec[pos:]))))
			pos += 4
		case record.String:
			n := int(binary.BigEndian.Uint32(rec[pos:]))
			pos += 4
			vals[i] = record.StringValue(f.str(rec[pos:pos+n], d.in))
			pos += n
		default:
			vals[i], pos = scalar(f.kind, rec, pos)
		}
	}
}

// scalar decodes a fixed-size value.
func scalar(k record.Kind, rec []byte, pos int) (record.Value, int) {
	switch k {
	case record.Bool:
		return record.BoolValue(rec[pos] != 0), pos + 1
	case record.Byte:
		return record.IntValue(int64(int8(rec[pos]))), pos + 1
	case record.Short:
		return record.IntValue(int64(int16(binary.BigEndian.Uint16(rec[pos:])))), pos + 2
	case record.Char:
		return record.IntValue(int64(binary.BigEndian.Uint16(rec[pos:]))), pos + 2
	case record.Int:
		return record.IntValue(int64(int32(binary.BigEndian.Uint32(rec[pos:])))), pos + 4
	case record.Long:
		return record.IntValue(int64(binary.BigEndian.Uint64(rec[pos:]))), pos + 8
	case record.Float:
		return record.FloatValue(math.Float32frombits(binary.BigEndian.Uint32(rec[pos:]))), pos + 4
	case record.Double:
		return record.DoubleValue(math.Float64frombits(binary.BigEndian.Uint64(rec[pos:]))), pos + 8
	}
	return record.Value{}, pos
}

func (d *Decoder) fillArray(elem record.Kind, rec []byte, pos int, v *record.Value, b *record.Batch) int {
	n := int(binary.BigEndian.Uint32(rec[pos:]))
	pos += 4
	list := b.NewList(elem, n)
	items := list.List().Items
	for j := range items {
		if elem == record.String {
			l := int(binary.BigEndian.Uint32(rec[pos:]))
			pos += 4
			items[j] = record.StringValue(d.in.Bytes(rec[pos : pos+l]))
			pos += l
			continue
		}
		items[j], pos = scalar(elem, rec, pos)
	}
	*v = list
	return pos
}

// AppendBinary appends r in the binary dialect under id, with the default
// limits. On error dst is returned unchanged.
func AppendBinary(dst []byte, id int32, r *record.Record) ([]byte, error) {
	return appendBinary(dst, id, r, Options{}.limits())
}

// Encoder writes records under the ids of a mapping, within limits that
// match a decoder's. It is immutable and safe for concurrent use.
type Encoder struct {
	m   *Mapping
	lim limits
}

// NewEncoder returns an encoder for the types of m. Options.Interner is
// not used.
func NewEncoder(m *Mapping, o Options) *Encoder {
	return &Encoder{m: m, lim: o.limits()}
}

// AppendBinary appends r in the binary dialect. On error dst is returned
// unchanged.
func (e *Encoder) AppendBinary(dst []byte, r *record.Record) ([]byte, error) {
	id, err := e.id(r)
	if err != nil {
		return dst, err
	}
	return appendBinary(dst, id, r, e.lim)
}

// AppendText appends r in the text dialect (see the package function
// AppendText). On error dst is returned unchanged.
func (e *Encoder) AppendText(dst []byte, r *record.Record) ([]byte, error) {
	id, err := e.id(r)
	if err != nil {
		return dst, err
	}
	return appendText(dst, id, r, e.lim)
}

func (e *Encoder) id(r *record.Record) (int32, error) {
	id, ok := e.m.ID(r.Type)
	if !ok {
		name := "<nil>"
		if r.Type != nil {
			name = r.Type.Name
		}
		return 0, &Error{Offset: -1, Reason: "record class " + name + " has no id", Err: ErrUnmapped}
	}
	return id, nil
}

func appendBinary(dst []byte, id int32, r *record.Record, lim limits) ([]byte, error) {
	if err := checkRecord(r); err != nil {
		return dst, err
	}
	start := len(dst)
	dst = binary.BigEndian.AppendUint32(dst, uint32(id))
	t := r.Type
	for i, f := range t.Fields {
		v := r.Values[i]
		if !f.Array {
			var err error
			if dst, err = appendBinaryValue(dst, f.Kind, v, lim); err != nil {
				return dst[:start], encodeErr(t, f.Name, err)
			}
			continue
		}
		items, err := arrayItems(f, v, lim)
		if err != nil {
			return dst[:start], encodeErr(t, f.Name, err)
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(items)))
		for _, it := range items {
			if dst, err = appendBinaryValue(dst, f.Kind, it, lim); err != nil {
				return dst[:start], encodeErr(t, f.Name, err)
			}
		}
	}
	if size := len(dst) - start; size > lim.rec {
		return dst[:start], &Error{Offset: -1, Type: t.ShortName(), Reason: fmt.Sprintf("record size %d over the limit %d", size, lim.rec), Err: ErrLimit}
	}
	return dst, nil
}

func appendBinaryValue(dst []byte, k record.Kind, v record.Value, lim limits) ([]byte, error) {
	if err := checkRange(k, v); err != nil {
		return dst, err
	}
	switch k {
	case record.Bool:
		if v.Bool() {
			return append(dst, 1), nil
		}
		return append(dst, 0), nil
	case record.Byte:
		return append(dst, byte(v.Int())), nil
	case record.Short, record.Char:
		return binary.BigEndian.AppendUint16(dst, uint16(v.Int())), nil
	case record.Int:
		return binary.BigEndian.AppendUint32(dst, uint32(v.Int())), nil
	case record.Long:
		return binary.BigEndian.AppendUint64(dst, uint64(v.Int())), nil
	case record.Float:
		return binary.BigEndian.AppendUint32(dst, uint32(v.Bits())), nil
	case record.Double:
		return binary.BigEndian.AppendUint64(dst, v.Bits()), nil
	case record.String:
		s := v.Str()
		if len(s) > lim.str {
			return dst, &valueError{ErrLimit, fmt.Sprintf("string length %d over the limit %d", len(s), lim.str)}
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
		return append(dst, s...), nil
	}
	return dst, &valueError{ErrInvalid, "kind " + k.String() + " cannot be encoded"}
}

// valueError is a field-level encoding problem; encodeErr gives it context.
type valueError struct {
	kind   error
	reason string
}

func (e *valueError) Error() string { return e.reason }

func encodeErr(t *record.Type, field string, err error) error {
	ve, ok := err.(*valueError)
	if !ok {
		return err
	}
	return &Error{Offset: -1, Type: t.ShortName(), Field: field, Reason: ve.reason, Err: ve.kind}
}

// checkRecord checks that r has a type and one value per field.
func checkRecord(r *record.Record) error {
	if r.Type == nil {
		return &Error{Offset: -1, Reason: "record without a type", Err: ErrInvalid}
	}
	if len(r.Values) != len(r.Type.Fields) {
		return &Error{Offset: -1, Type: r.Type.ShortName(),
			Reason: fmt.Sprintf("%d values for %d fields", len(r.Values), len(r.Type.Fields)), Err: ErrInvalid}
	}
	return nil
}

// checkRange rejects integers that do not fit their kind: the decoder would
// read back a different value.
func checkRange(k record.Kind, v record.Value) error {
	lo, hi := int64(0), int64(0)
	switch k {
	case record.Byte:
		lo, hi = math.MinInt8, math.MaxInt8
	case record.Short:
		lo, hi = math.MinInt16, math.MaxInt16
	case record.Char:
		lo, hi = 0, math.MaxUint16
	case record.Int:
		lo, hi = math.MinInt32, math.MaxInt32
	default:
		return nil
	}
	if n := v.Int(); n < lo || n > hi {
		return &valueError{ErrInvalid, fmt.Sprintf("value %d out of the %s range", n, k)}
	}
	return nil
}

// arrayItems returns the elements of an array value (none for a zero
// Value) after checking their kind and count.
func arrayItems(f record.Field, v record.Value, lim limits) ([]record.Value, error) {
	l := v.List()
	if l == nil {
		return nil, nil
	}
	if l.Elem != f.Kind {
		return nil, &valueError{ErrInvalid, fmt.Sprintf("array of %s where %s[] was expected", l.Elem, f.Kind)}
	}
	if len(l.Items) > lim.arr {
		return nil, &valueError{ErrLimit, fmt.Sprintf("array length %d over the limit %d", len(l.Items), lim.arr)}
	}
	return l.Items, nil
}
