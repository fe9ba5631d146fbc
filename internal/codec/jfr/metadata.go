package jfr

import (
	"fmt"
	"strconv"
	"strings"
)

// Metadata is a chunk's type system, from a metadata event (type id 0).
// It is immutable once parsed.
type Metadata struct {
	// ID grows when the JVM's set of types changes; two metadata events of
	// one JVM with the same ID describe the same types.
	ID int64
	// Classes in the order the event lists them.
	Classes []*Class
	// Region: the recording's locale and its UTC offset (milliseconds,
	// daylight saving included), which jfr print applies to timestamps.
	Locale    string
	GMTOffset int64

	byID map[int64]*Class
}

// Class is one type: a primitive, an event type (SuperType jdk.jfr.Event),
// a constant-pool or inline struct type, an annotation or a setting.
type Class struct {
	ID          int64
	Name        string
	SuperType   string
	SimpleType  bool // one field, shown as that field's value
	Fields      []*Field
	Annotations []Annotation

	prim    prim // for primitives (boolean … java.lang.String), else primNone
	minSize int  // smallest wire size of a value (0 when a cycle is possible)
}

// Field is one field of a class.
type Field struct {
	Name         string
	Class        *Class
	ConstantPool bool // the value is a key into the pool of Class
	Array        bool // dimension 1
	Annotations  []Annotation

	// Timestamp and Timespan hold the unit of the jdk.jfr.Timestamp and
	// jdk.jfr.Timespan annotations ("" when absent).
	Timestamp, Timespan string
}

// Annotation is an annotation of a class or field: its type name and its
// values (Values holds the elements of an array value).
type Annotation struct {
	Name   string
	Value  string
	Values []string
}

// IsEvent reports whether the class is an event type.
func (c *Class) IsEvent() bool { return c.SuperType == "jdk.jfr.Event" }

// Primitive reports whether the class is a primitive or java.lang.String.
func (c *Class) Primitive() bool { return c.prim != primNone }

// Field returns the named field, or nil.
func (c *Class) Field(name string) *Field {
	for _, f := range c.Fields {
		if f.Name == name {
			return f
		}
	}
	return nil
}

// Annotation returns the named annotation of the class.
func (c *Class) Annotation(name string) (Annotation, bool) {
	return findAnnotation(c.Annotations, name)
}

// Annotation returns the named annotation of the field.
func (f *Field) Annotation(name string) (Annotation, bool) {
	return findAnnotation(f.Annotations, name)
}

func findAnnotation(as []Annotation, name string) (Annotation, bool) {
	for _, a := range as {
		if a.Name == name {
			return a, true
		}
	}
	return Annotation{}, false
}

// Class returns the class with the given id, or nil.
func (m *Metadata) Class(id int64) *Class { return m.byID[id] }

// ClassByName returns the class with the given name, or nil.
func (m *Metadata) ClassByName(name string) *Class {
	for _, c := range m.Classes {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// prim is the wire form of a primitive.
type prim uint8

const (
	primNone prim = iota
	primBool
	primByte
	primChar
	primShort
	primInt
	primLong
	primFloat
	primDouble
	primString
)

var primByName = map[string]prim{
	"boolean":          primBool,
	"byte":             primByte,
	"char":             primChar,
	"short":            primShort,
	"int":              primInt,
	"long":             primLong,
	"float":            primFloat,
	"double":           primDouble,
	"java.lang.String": primString,
}

// element is a node of the metadata event's tree.
type element struct {
	name     string
	attrs    []attr
	children []*element
}

type attr struct{ key, value string }

func (e *element) attr(key string) string {
	for _, a := range e.attrs {
		if a.key == key {
			return a.value
		}
	}
	return ""
}

// metadataLimits bound what one metadata event may hold.
const (
	maxElementDepth = 16
	maxMetaStrings  = 1 << 20
	maxMetaString   = 64 << 10
)

// ParseMetadata parses a metadata event: b holds the whole event, from its
// size field on. base is the event's offset in the file, for messages.
func ParseMetadata(b []byte, base int64) (*Metadata, error) {
	in := &input{b: b}
	size := in.varint()
	if in.ok() && size != uint64(len(b)) {
		return nil, at(base, 0, "metadata event size %d, have %d bytes", size, len(b))
	}
	if typ := in.varint(); in.ok() && typ != 0 {
		return nil, at(base, 0, "metadata event has type id %d", typ)
	}
	in.varint() // start ticks
	in.varint() // duration ticks
	m := &Metadata{ID: in.i64()}
	n := in.count(1, maxMetaStrings)
	strs := make([]string, n)
	var scratch []byte
	for i := range strs {
		code, text, _ := in.str(&scratch, maxMetaString)
		if code == strPool {
			in.fail("metadata string refers to a constant pool")
		}
		strs[i] = string(text)
	}
	if !in.ok() {
		return nil, at(base, int64(in.failAt), "metadata string table: %s", in.reason)
	}
	root, err := parseElement(in, strs, 0)
	if err != nil {
		return nil, at(base, int64(in.failAt), "metadata: %v", err)
	}
	if err := m.build(root); err != nil {
		return nil, at(base, 0, "metadata: %v", err)
	}
	return m, nil
}

func parseElement(in *input, strs []string, depth int) (*element, error) {
	if depth > maxElementDepth {
		return nil, fmt.Errorf("elements nested deeper than %d", maxElementDepth)
	}
	str := func() string {
		i := in.varint()
		if !in.ok() {
			return ""
		}
		if i >= uint64(len(strs)) {
			in.fail("string index out of range")
			return ""
		}
		return strs[i]
	}
	e := &element{name: str()}
	na := in.count(2, 1<<16)
	e.attrs = make([]attr, 0, na)
	for i := 0; i < na && in.ok(); i++ {
		k := str()
		e.attrs = append(e.attrs, attr{k, str()})
	}
	nc := in.count(3, 1<<20)
	if !in.ok() {
		return nil, fmt.Errorf("%s", in.reason)
	}
	e.children = make([]*element, 0, nc)
	for i := 0; i < nc; i++ {
		c, err := parseElement(in, strs, depth+1)
		if err != nil {
			return nil, err
		}
		e.children = append(e.children, c)
	}
	if !in.ok() {
		return nil, fmt.Errorf("%s", in.reason)
	}
	return e, nil
}

func (m *Metadata) build(root *element) error {
	m.byID = map[int64]*Class{}
	type pending struct {
		f  *Field
		id int64
	}
	var fields []pending
	var annots []*[]Annotation
	var annotIDs [][]int64
	parseAnnots := func(e *element, dst *[]Annotation) error {
		var ids []int64
		for _, a := range e.children {
			if a.name != "annotation" {
				continue
			}
			id, err := strconv.ParseInt(a.attr("class"), 10, 64)
			if err != nil {
				return fmt.Errorf("annotation with class %q", a.attr("class"))
			}
			an := Annotation{Value: a.attr("value")}
			for i := 0; ; i++ {
				v, ok := lookupAttr(a, "value-"+strconv.Itoa(i))
				if !ok {
					break
				}
				an.Values = append(an.Values, v)
			}
			*dst = append(*dst, an)
			ids = append(ids, id)
		}
		annots = append(annots, dst)
		annotIDs = append(annotIDs, ids)
		return nil
	}
	for _, top := range root.children {
		switch top.name {
		case "region":
			m.Locale = top.attr("locale")
			off, _ := strconv.ParseInt(top.attr("gmtOffset"), 10, 64)
			dst, _ := strconv.ParseInt(top.attr("dst"), 10, 64)
			m.GMTOffset = off + dst
		case "metadata":
			for _, ce := range top.children {
				if ce.name != "class" {
					continue
				}
				id, err := strconv.ParseInt(ce.attr("id"), 10, 64)
				if err != nil {
					return fmt.Errorf("class %q has id %q", ce.attr("name"), ce.attr("id"))
				}
				c := &Class{
					ID:         id,
					Name:       ce.attr("name"),
					SuperType:  ce.attr("superType"),
					SimpleType: ce.attr("simpleType") == "true",
				}
				if c.Name == "" {
					return fmt.Errorf("class %d has no name", id)
				}
				if _, dup := m.byID[id]; dup {
					return fmt.Errorf("class id %d defined twice", id)
				}
				m.byID[id] = c
				m.Classes = append(m.Classes, c)
				if err := parseAnnots(ce, &c.Annotations); err != nil {
					return fmt.Errorf("class %s: %v", c.Name, err)
				}
				for _, fe := range ce.children {
					if fe.name != "field" {
						continue
					}
					f := &Field{
						Name:         fe.attr("name"),
						ConstantPool: fe.attr("constantPool") == "true",
					}
					switch d := fe.attr("dimension"); d {
					case "", "0":
					case "1":
						f.Array = true
					default:
						return fmt.Errorf("class %s: field %s has dimension %s", c.Name, f.Name, d)
					}
					id, err := strconv.ParseInt(fe.attr("class"), 10, 64)
					if err != nil || f.Name == "" {
						return fmt.Errorf("class %s: field %q of class %q", c.Name, f.Name, fe.attr("class"))
					}
					c.Fields = append(c.Fields, f)
					fields = append(fields, pending{f, id})
					if err := parseAnnots(fe, &f.Annotations); err != nil {
						return fmt.Errorf("class %s: field %s: %v", c.Name, f.Name, err)
					}
				}
			}
		}
	}
	for _, p := range fields {
		c := m.byID[p.id]
		if c == nil {
			return fmt.Errorf("field %s refers to unknown type id %d", p.f.Name, p.id)
		}
		p.f.Class = c
	}
	for i, dst := range annots {
		for j, id := range annotIDs[i] {
			if c := m.byID[id]; c != nil {
				(*dst)[j].Name = c.Name
			} else {
				(*dst)[j].Name = "#" + strconv.FormatInt(id, 10)
			}
		}
	}
	for _, c := range m.Classes {
		if p, ok := primByName[c.Name]; ok && len(c.Fields) == 0 && c.SuperType == "" {
			c.prim = p
		}
		for _, f := range c.Fields {
			if a, ok := f.Annotation("jdk.jfr.Timestamp"); ok {
				f.Timestamp = a.Value
				if f.Timestamp == "" {
					f.Timestamp = "MILLISECONDS_SINCE_EPOCH" // the annotation's default
				}
			}
			if a, ok := f.Annotation("jdk.jfr.Timespan"); ok {
				f.Timespan = a.Value
				if f.Timespan == "" {
					f.Timespan = "NANOSECONDS"
				}
			}
		}
	}
	return m.checkInline()
}

func lookupAttr(e *element, key string) (string, bool) {
	for _, a := range e.attrs {
		if a.key == key {
			return a.value, true
		}
	}
	return "", false
}

// checkInline rejects classes that contain themselves inline (such a value
// could not be written) and computes every class's smallest wire size.
func (m *Metadata) checkInline() error {
	const (
		unseen = iota
		visiting
		done
	)
	state := make(map[*Class]int, len(m.Classes))
	var visit func(c *Class, path []string) error
	visit = func(c *Class, path []string) error {
		switch state[c] {
		case done:
			return nil
		case visiting:
			return fmt.Errorf("class %s contains itself inline (%s)", c.Name, strings.Join(append(path, c.Name), " → "))
		}
		state[c] = visiting
		size := 0
		switch c.prim {
		case primBool, primByte, primChar, primShort, primInt, primLong, primString:
			size = 1
		case primFloat:
			size = 4
		case primDouble:
			size = 8
		}
		for _, f := range c.Fields {
			if f.ConstantPool || f.Array {
				size++ // a key or a count
				continue
			}
			if err := visit(f.Class, append(path, c.Name+"."+f.Name)); err != nil {
				return err
			}
			size += f.Class.minSize
		}
		c.minSize = size
		state[c] = done
		return nil
	}
	for _, c := range m.Classes {
		if err := visit(c, nil); err != nil {
			return err
		}
	}
	return nil
}
