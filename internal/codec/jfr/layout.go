package jfr

import (
	"math"
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/record"
)

// MaxDepth is how many levels of nested structs (other than the rendered
// types: threads, classes, methods, stack traces and frames) an event's
// fields are flattened into; deeper struct fields are left out.
const MaxDepth = 3

// render says how a column's value was derived, for documentation and
// for the tests that compare it with jfr print --json.
type render uint8

const (
	renderValue      render = iota // a primitive as recorded
	renderTimestamp                // epoch nanoseconds
	renderTimespan                 // nanoseconds
	renderThreadName               // javaName, or osName for a thread without a Java id
	renderThreadID                 // javaThreadId or osThreadId
	renderClass                    // class name with dots
	renderMethod                   // class.method(parameter types)
	renderFrame                    // method line: N
)

// column is one record field: where its value sits in the event (path
// below the event in jfr print --json), how it is rendered, and its kind.
type column struct {
	path     []string
	render   render
	kind     record.Kind
	array    bool
	unsigned bool // @Unsigned: the bits are kept in the signed kind
}

func (c column) name() string { return strings.Join(c.path, ".") }

// layout reads one wire value (of a class or of a field) and fills the
// values of its columns.
type layout struct {
	cols []column
	// read consumes one value from in and writes len(cols) values to dst.
	read func(d *decoder, in *input, dst []record.Value)
}

func prefixed(name string, cols []column) []column {
	out := make([]column, len(cols))
	for i, c := range cols {
		c.path = append([]string{name}, c.path...)
		out[i] = c
	}
	return out
}

// compiler builds the layouts of one metadata, on demand, and caches them.
type compiler struct {
	meta    *Metadata
	classes map[layoutKey]*layout
	fields  map[fieldKey]*layout
}

type layoutKey struct {
	c      *Class
	budget int
}

type fieldKey struct {
	f      *Field
	budget int
}

func newCompiler(m *Metadata) *compiler {
	return &compiler{meta: m, classes: map[layoutKey]*layout{}, fields: map[fieldKey]*layout{}}
}

// wellKnown reports whether values of the class are rendered as a whole
// (threads, classes, methods, frames, stack traces) instead of being
// flattened field by field.
func wellKnown(c *Class) bool {
	switch c.Name {
	case "java.lang.Thread", "java.lang.Class", "jdk.types.Method", "jdk.types.StackFrame", "jdk.types.StackTrace":
		return len(c.Fields) > 0
	}
	return false
}

// simple reports whether the class is shown as its only field's value.
func simple(c *Class) bool { return c.SimpleType && len(c.Fields) == 1 }

// structured reports whether values of the class are flattened field by
// field, which costs one level of depth.
func structured(c *Class) bool { return !c.Primitive() && !wellKnown(c) && !simple(c) }

// class returns the layout of a value of class c with budget levels of
// struct nesting left.
func (cp *compiler) class(c *Class, budget int) *layout {
	k := layoutKey{c, budget}
	if l, ok := cp.classes[k]; ok {
		return l
	}
	// A placeholder breaks cycles (a struct that refers to itself through
	// a pool or an array): the inner occurrence gets no columns.
	cp.classes[k] = &layout{read: func(d *decoder, in *input, _ []record.Value) { d.skipClass(in, c) }}
	var l *layout
	switch {
	case c.Primitive():
		l = primLayout(c.prim, nil)
	case c.Name == "java.lang.Thread" && len(c.Fields) > 0:
		l = cp.thread(c)
	case c.Name == "java.lang.Class" && len(c.Fields) > 0:
		l = cp.named(c, renderClass, func(d *decoder, v []string) string { return d.className(v[0]) }, "name")
	case c.Name == "jdk.types.Method" && len(c.Fields) > 0:
		l = cp.named(c, renderMethod, func(d *decoder, v []string) string { return d.method(v[0], v[1], v[2]) }, "type", "name", "descriptor")
	case c.Name == "jdk.types.StackFrame" && len(c.Fields) > 0:
		l = cp.frame(c)
	case c.Name == "jdk.types.StackTrace" && len(c.Fields) > 0:
		l = cp.stackTrace(c)
	case simple(c):
		l = cp.field(c.Fields[0], budget)
	default:
		l = cp.structure(c, budget)
	}
	cp.classes[k] = l
	return l
}

// field returns the layout of field f of a struct flattened with budget
// levels left.
func (cp *compiler) field(f *Field, budget int) *layout {
	k := fieldKey{f, budget}
	if l, ok := cp.fields[k]; ok {
		return l
	}
	l := cp.buildField(f, budget)
	cp.fields[k] = l
	return l
}

func (cp *compiler) buildField(f *Field, budget int) *layout {
	c := f.Class
	inner := budget
	if structured(c) {
		if budget == 0 {
			return &layout{read: func(d *decoder, in *input, _ []record.Value) { d.skipField(in, f) }}
		}
		inner = budget - 1
	}
	if f.Array {
		return cp.array(f, inner)
	}
	if f.ConstantPool {
		el := cp.class(c, inner)
		if len(el.cols) == 0 {
			return &layout{read: func(d *decoder, in *input, _ []record.Value) { in.varint() }}
		}
		return &layout{cols: el.cols, read: func(d *decoder, in *input, dst []record.Value) {
			key := in.i64()
			if in.ok() {
				resolved(dst, d.resolve(c, inner, key, el), el.cols)
			}
		}}
	}
	if c.Primitive() {
		return primLayout(c.prim, f)
	}
	return cp.class(c, inner)
}

// resolved stores the values of a constant in dst; a constant found
// nowhere (nil: JFR's null) leaves zero values, and null in its string
// columns, as JFR shows its string fields.
func resolved(dst, v []record.Value, cols []column) {
	if v != nil {
		copy(dst, v)
		return
	}
	for i := range dst {
		if c := &cols[i]; c.kind == record.String && c.render == renderValue && !c.array {
			dst[i] = record.NullString()
		}
	}
}

// structure flattens a struct: its fields' columns, prefixed with their
// names, in metadata order.
func (cp *compiler) structure(c *Class, budget int) *layout {
	subs := make([]*layout, len(c.Fields))
	var cols []column
	for i, f := range c.Fields {
		subs[i] = cp.field(f, budget)
		cols = append(cols, prefixed(f.Name, subs[i].cols)...)
	}
	return &layout{cols: cols, read: func(d *decoder, in *input, dst []record.Value) {
		if !d.enter(in) {
			return
		}
		o := 0
		for _, s := range subs {
			n := len(s.cols)
			s.read(d, in, dst[o:o+n])
			o += n
		}
		d.leave()
	}}
}

// array reads a count and that many elements. Each column of the element
// becomes an array column; columns that are arrays themselves are left
// out (their elements are read and dropped).
func (cp *compiler) array(f *Field, budget int) *layout {
	c := f.Class
	var el *layout
	switch {
	case f.ConstantPool:
		inner := cp.class(c, budget)
		el = &layout{cols: inner.cols, read: func(d *decoder, in *input, dst []record.Value) {
			key := in.i64()
			if in.ok() {
				resolved(dst, d.resolve(c, budget, key, inner), inner.cols)
			}
		}}
	case c.Primitive():
		el = primLayout(c.prim, f)
	default:
		el = cp.class(c, budget)
	}
	var keep []int
	var cols []column
	for i, col := range el.cols {
		if col.array {
			continue
		}
		col.array = true
		keep = append(keep, i)
		cols = append(cols, col)
	}
	min := c.minSize
	if f.ConstantPool {
		min = 1
	}
	nel := len(el.cols)
	return &layout{cols: cols, read: func(d *decoder, in *input, dst []record.Value) {
		n := in.count(min, d.lim.MaxArrayLen)
		if !d.enter(in) {
			return
		}
		defer d.leave()
		if len(keep) == 0 {
			for i := 0; i < n && in.ok(); i++ {
				el.read(d, in, nil)
			}
			return
		}
		items := make([][]record.Value, len(keep))
		for j := range items {
			items[j] = make([]record.Value, 0, n)
		}
		tmp := make([]record.Value, nel)
		for i := 0; i < n && in.ok(); i++ {
			clear(tmp)
			el.read(d, in, tmp)
			for j, k := range keep {
				items[j] = append(items[j], tmp[k])
			}
		}
		for j := range keep {
			dst[j] = newList(cols[j].kind, items[j])
		}
	}}
}

// newList makes an array value. Every array value is made here, so that
// moving array items into the batch's arena changes one function.
func newList(elem record.Kind, items []record.Value) record.Value {
	return record.ListValue(elem, items)
}

// primLayout reads a primitive; f (nil for a pool of primitives) supplies
// the time annotations.
func primLayout(p prim, f *Field) *layout {
	col := column{kind: primKind[p]}
	if f != nil {
		_, col.unsigned = f.Annotation("jdk.jfr.Unsigned")
	}
	var conv func(c *clock, v int64) int64
	if f != nil && p != primFloat && p != primDouble && p != primBool && p != primString {
		switch {
		case f.Timestamp == "TICKS":
			col.render, conv = renderTimestamp, (*clock).timestamp
		case f.Timestamp == "MILLISECONDS_SINCE_EPOCH":
			col.render, conv = renderTimestamp, millis
		case f.Timespan == "TICKS":
			col.render, conv = renderTimespan, (*clock).span
		case f.Timespan != "":
			if mul, ok := spanUnits[f.Timespan]; ok {
				col.render = renderTimespan
				conv = func(_ *clock, v int64) int64 { return scale(v, mul) }
			}
		}
		if conv != nil {
			col.kind = record.Long
		}
	}
	l := &layout{cols: []column{col}}
	switch p {
	case primBool:
		l.read = func(_ *decoder, in *input, dst []record.Value) { dst[0] = record.BoolValue(in.u8() != 0) }
	case primFloat:
		l.read = func(_ *decoder, in *input, dst []record.Value) { dst[0] = record.FloatValue(in.f32()) }
	case primDouble:
		l.read = func(_ *decoder, in *input, dst []record.Value) { dst[0] = record.DoubleValue(in.f64()) }
	case primString:
		l.read = func(d *decoder, in *input, dst []record.Value) { dst[0] = d.str(in) }
	default:
		width := p
		l.read = func(d *decoder, in *input, dst []record.Value) {
			v := readInt(in, width)
			if conv != nil {
				v = conv(&d.clock, v)
			}
			dst[0] = record.IntValue(v)
		}
	}
	return l
}

var primKind = [...]record.Kind{
	primBool:   record.Bool,
	primByte:   record.Byte,
	primChar:   record.Char,
	primShort:  record.Short,
	primInt:    record.Int,
	primLong:   record.Long,
	primFloat:  record.Float,
	primDouble: record.Double,
	primString: record.String,
}

// readInt reads an integer primitive: a varint truncated to its width and
// sign-extended (char is unsigned); a byte is one raw byte.
func readInt(in *input, p prim) int64 {
	switch p {
	case primByte:
		return int64(int8(in.u8()))
	case primChar:
		return int64(uint16(in.varint()))
	case primShort:
		return int64(int16(in.varint()))
	case primInt:
		return int64(int32(in.varint()))
	}
	return int64(in.varint())
}

var spanUnits = map[string]int64{
	"NANOSECONDS":  1,
	"MICROSECONDS": 1e3,
	"MILLISECONDS": 1e6,
	"SECONDS":      1e9,
}

func millis(_ *clock, v int64) int64 { return scale(v, 1e6) }

// scale multiplies, keeping Long.MIN_VALUE (JFR's "no value") and
// saturating instead of overflowing.
func scale(v, mul int64) int64 {
	if v == math.MinInt64 || mul == 1 {
		return v
	}
	if v > math.MaxInt64/mul {
		return math.MaxInt64
	}
	if v < math.MinInt64/mul {
		return math.MinInt64
	}
	return v * mul
}

// thread renders java.lang.Thread as three columns: the name (javaName,
// or osName for a thread without a Java id, as jfr print does), the Java
// thread id and the OS thread id.
func (cp *compiler) thread(c *Class) *layout {
	subs := cp.subfields(c)
	idx := fieldIndexes(c, "javaName", "osName", "javaThreadId", "osThreadId")
	cols := []column{
		{render: renderThreadName, kind: record.String},
		{path: []string{"javaThreadId"}, render: renderThreadID, kind: record.Long},
		{path: []string{"osThreadId"}, render: renderThreadID, kind: record.Long},
	}
	return &layout{cols: cols, read: func(d *decoder, in *input, dst []record.Value) {
		var v [4]record.Value
		d.readFields(in, c, subs, idx[:], v[:])
		name := v[0].Str()
		if v[2].Int() <= 0 {
			name = v[1].Str()
		}
		dst[0] = record.StringValue(name)
		dst[1] = record.IntValue(v[2].Int())
		dst[2] = record.IntValue(v[3].Int())
	}}
}

// named renders a class as one string made from some of its fields' first
// columns (as strings).
func (cp *compiler) named(c *Class, r render, build func(d *decoder, v []string) string, names ...string) *layout {
	subs := cp.subfields(c)
	idx := fieldIndexes(c, names...)
	return &layout{cols: []column{{render: r, kind: record.String}}, read: func(d *decoder, in *input, dst []record.Value) {
		var v [4]record.Value
		d.readFields(in, c, subs, idx, v[:])
		var s [4]string
		for i := range idx {
			s[i] = v[i].Str()
		}
		dst[0] = record.StringValue(build(d, s[:len(idx)]))
	}}
}

// frame renders a stack frame as "method line: N" (the line left out
// when negative), like jfr print.
func (cp *compiler) frame(c *Class) *layout {
	subs := cp.subfields(c)
	idx := fieldIndexes(c, "method", "lineNumber")
	return &layout{cols: []column{{render: renderFrame, kind: record.String}}, read: func(d *decoder, in *input, dst []record.Value) {
		var v [2]record.Value
		d.readFields(in, c, subs, idx, v[:])
		dst[0] = record.StringValue(d.frame(v[0].Str(), v[1].Int()))
	}}
}

// stackTrace renders a stack trace as its frames (top first) and the
// truncated flag.
func (cp *compiler) stackTrace(c *Class) *layout {
	subs := cp.subfields(c)
	idx := fieldIndexes(c, "frames", "truncated")
	cols := []column{
		{render: renderFrame, kind: record.String, array: true},
		{path: []string{"truncated"}, kind: record.Bool},
	}
	return &layout{cols: cols, read: func(d *decoder, in *input, dst []record.Value) {
		d.readFields(in, c, subs, idx, dst[:2])
		if dst[0].List() == nil {
			dst[0] = newList(record.String, nil)
		}
	}}
}

// subfields compiles the fields of a rendered class, each with no struct
// levels (a rendered class uses only scalar fields and rendered classes).
func (cp *compiler) subfields(c *Class) []*layout {
	subs := make([]*layout, len(c.Fields))
	for i, f := range c.Fields {
		subs[i] = cp.field(f, 0)
	}
	return subs
}

// fieldIndexes returns the index of each named field in c, or -1.
func fieldIndexes(c *Class, names ...string) []int {
	idx := make([]int, len(names))
	for i, n := range names {
		idx[i] = -1
		for j, f := range c.Fields {
			if f.Name == n {
				idx[i] = j
			}
		}
	}
	return idx
}

// formatMethod renders a method like jfr print: the class name, a dot, the
// method name and the simple names of the parameter types.
func formatMethod(dst []byte, class, name, descriptor string) []byte {
	dst = append(dst, class...)
	dst = append(dst, '.')
	dst = append(dst, name...)
	dst = append(dst, '(')
	params := strings.TrimPrefix(descriptor, "(")
	if i := strings.LastIndexByte(params, ')'); i >= 0 {
		params = params[:i]
	} else {
		params = ""
	}
	first := true
	for len(params) > 0 {
		dims := 0
		for len(params) > 0 && params[0] == '[' {
			dims++
			params = params[1:]
		}
		if len(params) == 0 {
			break
		}
		var typ string
		switch params[0] {
		case 'L':
			end := strings.IndexByte(params, ';')
			if end < 0 {
				end = len(params)
			}
			typ = params[1:end]
			if i := strings.LastIndexAny(typ, "/."); i >= 0 {
				typ = typ[i+1:]
			}
			params = params[min(end+1, len(params)):]
		default:
			typ = primitiveDescriptor(params[0])
			params = params[1:]
		}
		if !first {
			dst = append(dst, ", "...)
		}
		first = false
		dst = append(dst, typ...)
		for range dims {
			dst = append(dst, "[]"...)
		}
	}
	return append(dst, ')')
}

func primitiveDescriptor(c byte) string {
	switch c {
	case 'Z':
		return "boolean"
	case 'B':
		return "byte"
	case 'C':
		return "char"
	case 'S':
		return "short"
	case 'I':
		return "int"
	case 'J':
		return "long"
	case 'F':
		return "float"
	case 'D':
		return "double"
	case 'V':
		return "void"
	}
	return string(c)
}

// appendFrame renders a frame: the method and, when not negative, the line.
func appendFrame(dst []byte, method string, line int64) []byte {
	dst = append(dst, method...)
	if line >= 0 {
		dst = append(dst, " line: "...)
		dst = strconv.AppendInt(dst, line, 10)
	}
	return dst
}
