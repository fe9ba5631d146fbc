package irl

import (
	"slices"
	"strings"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Model is a set of IRL files with every name resolved: parents,
// templates, field references, and the flattened field list of each
// declaration. It is immutable after Load and safe for concurrent use.
type Model struct {
	files  []*File
	decls  []*Decl // in load order, later identical definitions dropped
	byName map[string]*Decl
	info   map[*Decl]*declInfo
	ftype  map[*FieldDecl]fieldType
}

type declInfo struct {
	file      *File
	parent    *Decl
	templates []*Decl
	props     []Field
	done      bool
}

type fieldType struct {
	kind record.Kind
	dims []int
}

// Field is a field of a declaration after resolution: its own fields and
// the ones it inherits, with field references replaced by their types.
type Field struct {
	Name  string
	Kind  record.Kind
	Dims  []int      // array dimensions (see TypeRef.Dims); empty for a scalar
	Decl  *FieldDecl // the declaration: modifiers, default, doc, position
	Owner *Decl      // the entity or template that declares the field
	Const *Const     // the constant Decl.Default names, when it names one visible in Owner
}

// Array reports whether the field is an array.
func (f Field) Array() bool { return len(f.Dims) > 0 }

// Transient reports whether the field is transient (not serialized).
func (f Field) Transient() bool { return f.Decl.Has(Transient) }

// Files returns the loaded files in load order.
func (m *Model) Files() []*File { return m.files }

// Decls returns every declaration in load order. When a type is defined
// identically in two files, only the first definition is listed.
func (m *Model) Decls() []*Decl { return m.decls }

// Decl returns the declaration with the fully qualified name, or nil.
func (m *Model) Decl(fqn string) *Decl { return m.byName[fqn] }

// File returns the file that declares d.
func (m *Model) File(d *Decl) *File {
	if in := m.info[d]; in != nil {
		return in.file
	}
	return nil
}

// Parent returns the entity d extends, or nil.
func (m *Model) Parent(d *Decl) *Decl {
	if in := m.info[d]; in != nil {
		return in.parent
	}
	return nil
}

// Templates returns the templates d lists after ':' (for a template: its
// parent templates), resolved, in declaration order.
func (m *Model) Templates(d *Decl) []*Decl {
	if in := m.info[d]; in != nil {
		return in.templates
	}
	return nil
}

// Properties returns all fields of d in Kieker's order, transient ones
// included: the fields of the parent entity (recursively), then those of
// each template in declaration order (a template contributes the fields of
// its parent templates, depth first, then its own), then d's own fields. A
// name already present is skipped. The caller must not modify the result.
func (m *Model) Properties(d *Decl) []Field {
	if in := m.info[d]; in != nil {
		return in.props
	}
	return nil
}

// Fields returns the serialized fields of d: Properties without the
// transient ones. These are the fields of d's record type.
func (m *Model) Fields(d *Decl) []Field {
	var out []Field
	for _, f := range m.Properties(d) {
		if !f.Transient() {
			out = append(out, f)
		}
	}
	return out
}

// Constant returns the constant named name visible in d: its own, then
// those of its parent chain, then those of its templates. It returns nil
// for an unknown name.
func (m *Model) Constant(d *Decl, name string) *Const {
	return m.constant(d, name, map[*Decl]bool{})
}

func (m *Model) constant(d *Decl, name string, seen map[*Decl]bool) *Const {
	if d == nil || seen[d] {
		return nil
	}
	seen[d] = true
	for _, c := range d.Constants {
		if c.Name == name {
			return c
		}
	}
	in := m.info[d]
	if in == nil {
		return nil
	}
	if c := m.constant(in.parent, name, seen); c != nil {
		return c
	}
	for _, t := range in.templates {
		if c := m.constant(t, name, seen); c != nil {
			return c
		}
	}
	return nil
}

// build resolves the declarations of the parsed files.
func build(files []*File) (*Model, error) {
	m := &Model{
		files:  files,
		byName: map[string]*Decl{},
		info:   map[*Decl]*declInfo{},
		ftype:  map[*FieldDecl]fieldType{},
	}
	var errs ErrorList
	var dups []*Decl // later definitions of a name defined in another file
	for _, f := range files {
		for _, d := range f.Decls {
			m.info[d] = &declInfo{file: f}
			if prev, ok := m.byName[d.FullName()]; ok {
				if m.info[prev].file == f {
					errs = append(errs, newError(d.Pos, "%s %s is declared twice (first at %s)", d.Kind, d.Name, prev.Pos))
				} else {
					dups = append(dups, d)
				}
				continue
			}
			m.byName[d.FullName()] = d
			m.decls = append(m.decls, d)
		}
	}
	for _, d := range m.decls {
		m.resolveRefs(d, &errs)
	}
	for _, d := range dups {
		m.resolveRefs(d, &errs)
		prev := m.byName[d.FullName()]
		if m.canonical(prev) != m.canonical(d) {
			errs = append(errs, newError(d.Pos, "%s %s is also defined at %s with different content", d.Kind, d.FullName(), prev.Pos))
		}
		delete(m.info, d)
	}
	if len(errs) > 0 {
		return nil, errs.sorted()
	}
	m.checkCycles(&errs)
	if len(errs) > 0 {
		return nil, errs.sorted()
	}
	for _, d := range m.decls {
		for _, f := range d.Fields {
			m.fieldType(d, f, map[*FieldDecl]bool{}, &errs)
		}
	}
	if len(errs) > 0 {
		return nil, errs.sorted()
	}
	for _, d := range m.decls {
		m.properties(d, &errs)
	}
	for _, d := range m.decls {
		m.checkMembers(d, &errs)
	}
	if len(errs) > 0 {
		return nil, errs.sorted()
	}
	return m, nil
}

// canonical renders d with its references resolved, for comparing two
// definitions of one type. Doc comments do not count.
func (m *Model) canonical(d *Decl) string {
	in := m.info[d]
	var b strings.Builder
	w := declWriter{b: &b, name: func(r Ref) string {
		if t, _ := m.lookup(in.file, r.Name); t != nil {
			return t.FullName()
		}
		return r.Name
	}}
	w.decl(d)
	return b.String()
}

// lookup resolves a type name as written in f: a qualified name is taken
// as fully qualified, then relative to f's package; a simple name is found
// through an explicit import, then in f's package, then through wildcard
// imports. On failure it returns a hint for the error message.
func (m *Model) lookup(f *File, name string) (*Decl, string) {
	if strings.Contains(name, ".") {
		if d := m.byName[name]; d != nil {
			return d, ""
		}
		if d := m.byName[f.Package+"."+name]; d != nil {
			return d, ""
		}
		return nil, ""
	}
	hint := ""
	for _, imp := range f.Imports {
		if imp.Wildcard || imp.Path != name && !strings.HasSuffix(imp.Path, "."+name) {
			continue
		}
		if d := m.byName[imp.Path]; d != nil {
			return d, ""
		}
		hint = " (imported as " + imp.Path + ", which no loaded file defines)"
	}
	if d := m.byName[f.Package+"."+name]; d != nil {
		return d, ""
	}
	var found *Decl
	for _, imp := range f.Imports {
		if !imp.Wildcard {
			continue
		}
		d := m.byName[imp.Path+"."+name]
		if d == nil || d == found {
			continue
		}
		if found != nil {
			return nil, " (ambiguous: " + found.FullName() + " and " + d.FullName() + ")"
		}
		found = d
	}
	if found != nil {
		return found, ""
	}
	return nil, hint
}

func (m *Model) resolveRefs(d *Decl, errs *ErrorList) {
	in := m.info[d]
	if d.Parent != nil {
		p, hint := m.lookup(in.file, d.Parent.Name)
		switch {
		case p == nil:
			*errs = append(*errs, newError(d.Parent.Pos, "%s %s: unknown parent %s%s", d.Kind, d.Name, d.Parent.Name, hint))
		case p.Kind == Template:
			*errs = append(*errs, newError(d.Parent.Pos, "%s %s: parent %s is a template; list templates after ':'", d.Kind, d.Name, d.Parent.Name))
		default:
			in.parent = p
		}
	}
	for _, r := range d.Templates {
		t, hint := m.lookup(in.file, r.Name)
		switch {
		case t == nil:
			*errs = append(*errs, newError(r.Pos, "%s %s: unknown template %s%s", d.Kind, d.Name, r.Name, hint))
		case t.Kind != Template:
			*errs = append(*errs, newError(r.Pos, "%s %s: %s is an %s, not a template", d.Kind, d.Name, r.Name, t.Kind))
		default:
			in.templates = append(in.templates, t)
		}
	}
}

// checkCycles reports every cycle of the extends and template relations.
func (m *Model) checkCycles(errs *ErrorList) {
	const (
		white = iota
		gray
		black
	)
	color := map[*Decl]int{}
	var stack []*Decl
	var visit func(d *Decl)
	visit = func(d *Decl) {
		color[d] = gray
		stack = append(stack, d)
		in := m.info[d]
		type edge struct {
			to  *Decl
			pos Pos
		}
		var edges []edge
		if in.parent != nil {
			edges = append(edges, edge{in.parent, d.Parent.Pos})
		}
		for i, t := range in.templates {
			edges = append(edges, edge{t, d.Templates[i].Pos})
		}
		for _, e := range edges {
			switch color[e.to] {
			case gray:
				i := slices.Index(stack, e.to)
				path := append(slices.Clone(stack[i:]), e.to)
				what := "template"
				names := make([]string, len(path))
				for j, p := range path {
					names[j] = p.Name
					if p.Kind != Template {
						what = "inheritance"
					}
				}
				*errs = append(*errs, newError(e.pos, "%s %s: %s cycle %s", d.Kind, d.Name, what, strings.Join(names, " -> ")))
			case white:
				visit(e.to)
			}
		}
		stack = stack[:len(stack)-1]
		color[d] = black
	}
	for _, d := range m.decls {
		if color[d] == white {
			visit(d)
		}
	}
}

// fieldType resolves the type of field f of owner, following "grouped by"
// references.
func (m *Model) fieldType(owner *Decl, f *FieldDecl, visiting map[*FieldDecl]bool, errs *ErrorList) (fieldType, bool) {
	if ft, ok := m.ftype[f]; ok {
		return ft, true
	}
	g := f.GroupedBy
	if g == nil {
		ft := fieldType{kind: f.Type.Kind, dims: f.Type.Dims}
		m.ftype[f] = ft
		return ft, true
	}
	if visiting[f] {
		*errs = append(*errs, newError(g.Pos, "field %s: cycle of field references", f.Name))
		return fieldType{}, false
	}
	visiting[f] = true
	defer delete(visiting, f)
	target, hint := m.lookup(m.info[owner].file, g.Decl.Name)
	if target == nil {
		*errs = append(*errs, newError(g.Pos, "field %s: unknown type %s in 'grouped by'%s", f.Name, g.Decl.Name, hint))
		return fieldType{}, false
	}
	tf, towner := m.findField(target, g.Field, map[*Decl]bool{})
	if tf == nil {
		*errs = append(*errs, newError(g.Pos, "field %s: %s has no field %s", f.Name, g.Decl.Name, g.Field))
		return fieldType{}, false
	}
	ft, ok := m.fieldType(towner, tf, visiting, errs)
	if !ok {
		return fieldType{}, false
	}
	if f.Type.Name != "" {
		if f.Type.Kind != ft.kind || !slices.Equal(f.Type.Dims, ft.dims) {
			*errs = append(*errs, newError(f.Type.Pos, "field %s: type %s differs from the type of %s.%s", f.Name, f.Type, g.Decl.Name, g.Field))
			return fieldType{}, false
		}
	}
	m.ftype[f] = ft
	return ft, true
}

// findField finds the declaration of a field of d: its own, then its
// parent's, then its templates'.
func (m *Model) findField(d *Decl, name string, seen map[*Decl]bool) (*FieldDecl, *Decl) {
	if seen[d] {
		return nil, nil
	}
	seen[d] = true
	for _, f := range d.Fields {
		if f.Name == name {
			return f, d
		}
	}
	in := m.info[d]
	if in.parent != nil {
		if f, o := m.findField(in.parent, name, seen); f != nil {
			return f, o
		}
	}
	for _, t := range in.templates {
		if f, o := m.findField(t, name, seen); f != nil {
			return f, o
		}
	}
	return nil, nil
}

// properties computes (once) the flattened field list of d.
func (m *Model) properties(d *Decl, errs *ErrorList) []Field {
	in := m.info[d]
	if in.done {
		return in.props
	}
	in.done = true // the graph is acyclic: no re-entry
	var props []Field
	index := map[string]int{}
	inherit := func(from []Field) {
		for _, f := range from {
			if i, ok := index[f.Name]; ok {
				if p := props[i]; p.Kind != f.Kind || !slices.Equal(p.Dims, f.Dims) {
					*errs = append(*errs, newError(d.Pos, "%s %s: field %s is %s in %s but %s in %s",
						d.Kind, d.Name, f.Name, typeString(p), p.Owner.Name, typeString(f), f.Owner.Name))
				}
				continue
			}
			index[f.Name] = len(props)
			props = append(props, f)
		}
	}
	if in.parent != nil {
		inherit(m.properties(in.parent, errs))
	}
	for _, t := range in.templates {
		inherit(m.properties(t, errs))
	}
	own := map[string]*FieldDecl{}
	for _, fd := range d.Fields {
		if prev, ok := own[fd.Name]; ok {
			*errs = append(*errs, newError(fd.Pos, "%s %s: duplicate field %s (first at %s)", d.Kind, d.Name, fd.Name, prev.Pos))
			continue
		}
		own[fd.Name] = fd
		ft := m.ftype[fd]
		f := Field{Name: fd.Name, Kind: ft.kind, Dims: ft.dims, Decl: fd, Owner: d}
		if fd.Default != nil && fd.Default.Kind == LitIdent {
			f.Const = m.Constant(d, fd.Default.Str)
		}
		if i, ok := index[f.Name]; ok {
			if p := props[i]; p.Kind != f.Kind || !slices.Equal(p.Dims, f.Dims) {
				*errs = append(*errs, newError(fd.Pos, "%s %s: field %s is %s but inherits %s from %s",
					d.Kind, d.Name, f.Name, typeString(f), typeString(p), p.Owner.Name))
			}
			continue
		}
		index[f.Name] = len(props)
		props = append(props, f)
	}
	in.props = props
	return props
}

func typeString(f Field) string {
	return TypeRef{Name: f.Kind.String(), Dims: f.Dims}.String()
}

// checkMembers checks constants and aliases of d.
func (m *Model) checkMembers(d *Decl, errs *ErrorList) {
	consts := map[string]*Const{}
	for _, c := range d.Constants {
		if prev, ok := consts[c.Name]; ok {
			*errs = append(*errs, newError(c.Pos, "%s %s: duplicate constant %s (first at %s)", d.Kind, d.Name, c.Name, prev.Pos))
		}
		consts[c.Name] = c
	}
	props := m.Properties(d)
	has := func(name string) bool {
		return slices.ContainsFunc(props, func(f Field) bool { return f.Name == name })
	}
	for _, a := range d.Aliases {
		if !has(a.Field) {
			*errs = append(*errs, newError(a.Pos, "%s %s: alias %s names no field (%s)", d.Kind, d.Name, a.Name, a.Field))
		}
		if has(a.Name) {
			*errs = append(*errs, newError(a.Pos, "%s %s: alias %s is already a field name", d.Kind, d.Name, a.Name))
		}
	}
}
