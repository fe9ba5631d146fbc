package gen

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/tracebridge/tracebridge/internal/irl"
	"github.com/tracebridge/tracebridge/internal/record"
)

// tinfo is a record type prepared for the emitters: everything they need,
// language-independent.
type tinfo struct {
	rt      *record.Type
	id      int32    // KDB id in the test program and mapping (1..n)
	short   string   // the type's short name
	doc     []string // comment lines: the IRL doc, then annotations
	fields  []finfo
	consts  []cinfo
	aliases []ainfo
}

// finfo is a field.
type finfo struct {
	name  string // Kieker's name (the wire never carries it)
	kind  record.Kind
	array bool
	doc   []string
	def   *record.Value // IRL default; nil when none (zero value)
	// defConst is the index in tinfo.consts of the constant the default
	// names, or -1.
	defConst int
	note     string // about a default that could not be used
}

// cinfo is a constant visible in the type.
type cinfo struct {
	name  string
	kind  record.Kind
	array bool
	val   record.Value
	doc   []string
}

// ainfo is "alias field as name".
type ainfo struct {
	field int // index in tinfo.fields
	name  string
}

// prepare checks the types and gathers their IRL details.
func prepare(types []Type) ([]*tinfo, error) {
	var out []*tinfo
	seen := map[string]bool{}
	for _, t := range types {
		if t.Record == nil {
			return nil, fmt.Errorf("%w: a type without a record type", ErrInvalid)
		}
		if seen[t.Record.Name] {
			continue
		}
		seen[t.Record.Name] = true
		ti := &tinfo{rt: t.Record, id: int32(len(out) + 1), short: t.Record.ShortName()}
		for _, f := range t.Record.Fields {
			ti.fields = append(ti.fields, finfo{name: f.Name, kind: f.Kind, array: f.Array, defConst: -1})
		}
		if t.Decl != nil && t.Model != nil {
			describe(ti, t.Decl, t.Model)
		}
		out = append(out, ti)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: no record types", ErrInvalid)
	}
	return out, nil
}

// describe adds the doc, annotations, constants, aliases and defaults of
// the IRL declaration d.
func describe(ti *tinfo, d *irl.Decl, m *irl.Model) {
	ti.doc = docLines(d.Doc)
	if len(d.Annotations) > 0 && len(ti.doc) > 0 {
		ti.doc = append(ti.doc, "")
	}
	for _, a := range d.Annotations {
		ti.doc = append(ti.doc, oneLine("@"+a.Name+" "+a.Value))
	}

	// Constants and aliases visible in d, in Model.Constant's order: its
	// own, its parent chain's, its templates'.
	var decls []*irl.Decl
	var walk func(x *irl.Decl)
	visited := map[*irl.Decl]bool{}
	walk = func(x *irl.Decl) {
		if x == nil || visited[x] {
			return
		}
		visited[x] = true
		decls = append(decls, x)
		walk(m.Parent(x))
		for _, t := range m.Templates(x) {
			walk(t)
		}
	}
	walk(d)
	constIndex := map[*irl.Const]int{}
	names := map[string]bool{}
	for _, x := range decls {
		for _, c := range x.Constants {
			if names[c.Name] {
				continue
			}
			v, ok := constValue(m, x, c.Type.Kind, len(c.Type.Dims) > 0, c.Value, 0)
			if !ok || len(c.Type.Dims) > 1 {
				continue
			}
			names[c.Name] = true
			constIndex[c] = len(ti.consts)
			ti.consts = append(ti.consts, cinfo{name: c.Name, kind: c.Type.Kind, array: len(c.Type.Dims) > 0, val: v, doc: docLines(c.Doc)})
		}
	}
	aliasNames := map[string]bool{}
	for _, x := range decls {
		for _, a := range x.Aliases {
			i := fieldIndex(ti, a.Field)
			if i < 0 || aliasNames[a.Name] || fieldIndex(ti, a.Name) >= 0 {
				continue
			}
			aliasNames[a.Name] = true
			ti.aliases = append(ti.aliases, ainfo{field: i, name: a.Name})
		}
	}

	for _, f := range m.Fields(d) {
		i := fieldIndex(ti, f.Name)
		if i < 0 {
			continue
		}
		fi := &ti.fields[i]
		fi.doc = docLines(f.Decl.Doc)
		lit := f.Decl.Default
		if lit == nil {
			continue
		}
		if lit.Kind == irl.LitIdent {
			c := f.Const
			if c == nil {
				c = m.Constant(f.Owner, lit.Str)
			}
			if c == nil {
				fi.note = "IRL default " + oneLine(lit.Str) + " is not an IRL constant; the zero value is used"
				continue
			}
			if k, ok := constIndex[c]; ok && ti.consts[k].kind == fi.kind && ti.consts[k].array == fi.array {
				v := ti.consts[k].val
				fi.def, fi.defConst = &v, k
				continue
			}
		}
		if v, ok := constValue(m, f.Owner, fi.kind, fi.array, lit, 0); ok {
			fi.def = &v
		} else {
			fi.note = "IRL default " + oneLine(lit.Text) + " does not fit the field; the zero value is used"
		}
	}
}

func fieldIndex(ti *tinfo, name string) int {
	for i := range ti.fields {
		if ti.fields[i].name == name {
			return i
		}
	}
	return -1
}

// docLines splits a doc comment into lines safe for every language's
// comments (see the emitters for the comment syntax itself).
func docLines(doc string) []string {
	if doc == "" {
		return nil
	}
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(oneLine(l), " ")
	}
	return lines
}

const maxConstDepth = 16

// constValue converts an IRL literal to a value of kind k (an array of k
// when array is set). A name refers to a constant visible in owner.
func constValue(m *irl.Model, owner *irl.Decl, k record.Kind, array bool, lit *irl.Literal, depth int) (record.Value, bool) {
	if lit == nil || depth > maxConstDepth {
		return record.Value{}, false
	}
	if lit.Kind == irl.LitIdent {
		c := m.Constant(owner, lit.Str)
		if c == nil || c.Type.Kind != k || (len(c.Type.Dims) > 0) != array {
			return record.Value{}, false
		}
		return constValue(m, owner, k, array, c.Value, depth+1)
	}
	if array {
		if lit.Kind != irl.LitArray {
			return record.Value{}, false
		}
		items := make([]record.Value, 0, len(lit.Elems))
		for i := range lit.Elems {
			v, ok := constValue(m, owner, k, false, &lit.Elems[i], depth+1)
			if !ok {
				return record.Value{}, false
			}
			items = append(items, v)
		}
		return record.ListValue(k, items), true
	}
	return scalarValue(k, lit)
}

// scalarValue converts a literal to a scalar of kind k; integers must fit.
func scalarValue(k record.Kind, lit *irl.Literal) (record.Value, bool) {
	inRange := func(lo, hi int64) (record.Value, bool) {
		if lit.Kind != irl.LitInt || lit.Int < lo || lit.Int > hi {
			return record.Value{}, false
		}
		return record.IntValue(lit.Int), true
	}
	switch k {
	case record.Bool:
		if lit.Kind == irl.LitBool {
			return record.BoolValue(lit.Bool), true
		}
	case record.Byte:
		return inRange(math.MinInt8, math.MaxInt8)
	case record.Short:
		return inRange(math.MinInt16, math.MaxInt16)
	case record.Int:
		return inRange(math.MinInt32, math.MaxInt32)
	case record.Long:
		return inRange(math.MinInt64, math.MaxInt64)
	case record.Char:
		if lit.Kind == irl.LitString && utf8.RuneCountInString(lit.Str) == 1 {
			r, _ := utf8.DecodeRuneInString(lit.Str)
			if r > 0xFFFF {
				hi, _ := utf16.EncodeRune(r)
				r = hi
			}
			return record.IntValue(int64(r)), r != utf8.RuneError
		}
		return inRange(0, math.MaxUint16)
	case record.Float, record.Double:
		var f float64
		switch lit.Kind {
		case irl.LitFloat:
			f = lit.Float
		case irl.LitInt:
			f = float64(lit.Int)
		default:
			return record.Value{}, false
		}
		if k == record.Float {
			if math.Abs(f) > math.MaxFloat32 {
				return record.Value{}, false
			}
			return record.FloatValue(float32(f)), true
		}
		return record.DoubleValue(f), true
	case record.String:
		if lit.Kind == irl.LitString {
			return record.StringValue(strings.ToValidUTF8(lit.Str, "\uFFFD")), true
		}
	}
	return record.Value{}, false
}

// namer hands out identifiers unique in one scope.
type namer struct{ used map[string]bool }

func newNamer(reserved ...string) *namer {
	n := &namer{used: map[string]bool{}}
	for _, r := range reserved {
		n.used[r] = true
	}
	return n
}

// take returns base, or base with underscores appended until it is unused,
// and marks it used.
func (n *namer) take(base string) string {
	for n.used[base] {
		base += "_"
	}
	n.used[base] = true
	return base
}

// ident turns an IRL name into an identifier of [A-Za-z_][A-Za-z0-9_]*.
// IRL allows hyphens inside names; other characters cannot occur in IRL
// but may in catalogue types built by code.
func ident(name string) string {
	var b strings.Builder
	for i := 0; i < len(name); i++ {
		c := name[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
			b.WriteByte(c)
		case c >= '0' && c <= '9':
			if i == 0 {
				b.WriteByte('_')
			}
			b.WriteByte(c)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() == 0 {
		return "_"
	}
	return b.String()
}

// exported capitalizes the first letter of an identifier.
func exported(id string) string {
	if id != "" && id[0] >= 'a' && id[0] <= 'z' {
		return string(id[0]-'a'+'A') + id[1:]
	}
	if id != "" && id[0] == '_' {
		return "X" + id
	}
	return id
}

// clash reports two types whose identifiers collide after escaping.
func clash(a, b *tinfo, id string) error {
	return fmt.Errorf("%w: types %s and %s both become %s; generate them in separate runs (with different package names)", ErrInvalid, a.rt.Name, b.rt.Name, id)
}

// typeIdents gives each type an identifier from mk(short name), failing on
// a clash between two types (a clash with a reserved name is resolved with
// a suffix).
func typeIdents(ts []*tinfo, n *namer, mk func(string) string) ([]string, error) {
	ids := make([]string, len(ts))
	owner := map[string]*tinfo{}
	for i, t := range ts {
		base := mk(t.short)
		if o, ok := owner[base]; ok {
			return nil, clash(o, t, base)
		}
		owner[base] = t
		ids[i] = n.take(base)
	}
	return ids, nil
}

// info returns t; the emitters' types embed *tinfo and so have it too.
func (t *tinfo) info() *tinfo { return t }

// infos returns the language-independent part of each of an emitter's
// types.
func infos[T interface{ info() *tinfo }](types []T) []*tinfo {
	ts := make([]*tinfo, len(types))
	for i, t := range types {
		ts[i] = t.info()
	}
	return ts
}
