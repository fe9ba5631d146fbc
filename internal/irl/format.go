package irl

import (
	"strconv"
	"strings"
)

// Format renders f as IRL text in a canonical layout: package, imports,
// then each declaration with its doc comment and annotations, and in a
// body first the constants, then the aliases, then the fields. Literals
// keep their source text. Parsing the result yields the same File except
// for positions and the order of body items of different sorts.
func Format(f *File) []byte {
	var b strings.Builder
	b.WriteString("package " + escape(f.Package) + "\n")
	if len(f.Imports) > 0 {
		b.WriteByte('\n')
	}
	for _, imp := range f.Imports {
		b.WriteString("import " + escape(imp.Path))
		if imp.Wildcard {
			b.WriteString(".*")
		}
		b.WriteByte('\n')
	}
	w := declWriter{b: &b, docs: true, name: func(r Ref) string { return escape(r.Name) }}
	for _, d := range f.Decls {
		b.WriteByte('\n')
		w.decl(d)
	}
	return []byte(b.String())
}

// declWriter renders declarations. name maps a type reference to the text
// written for it, so that two declarations can be compared with their
// references resolved.
type declWriter struct {
	b    *strings.Builder
	docs bool
	name func(Ref) string
}

func (w declWriter) doc(indent, text string) {
	if !w.docs || text == "" {
		return
	}
	text = strings.ReplaceAll(text, "*/", "* /")
	w.b.WriteString(indent + "/**\n")
	for _, l := range strings.Split(text, "\n") {
		w.b.WriteString(strings.TrimRight(indent+" * "+l, " ") + "\n")
	}
	w.b.WriteString(indent + " */\n")
}

func (w declWriter) decl(d *Decl) {
	b := w.b
	w.doc("", d.Doc)
	for _, a := range d.Annotations {
		b.WriteString("@" + a.Name + " " + quote(a.Value) + "\n")
	}
	if d.Abstract {
		b.WriteString("abstract ")
	}
	b.WriteString(d.Kind.String() + " " + escapeName(d.Name))
	if d.Parent != nil {
		b.WriteString(" extends " + w.name(*d.Parent))
	}
	for i, t := range d.Templates {
		if i == 0 {
			b.WriteString(" : ")
		} else {
			b.WriteString(", ")
		}
		b.WriteString(w.name(t))
	}
	if len(d.Constants)+len(d.Aliases)+len(d.Fields) == 0 {
		b.WriteByte('\n')
		return
	}
	b.WriteString(" {\n")
	for _, c := range d.Constants {
		w.doc("\t", c.Doc)
		b.WriteString("\tconst " + c.Type.String() + " " + escapeName(c.Name) + " = " + c.Value.Text + "\n")
	}
	for _, a := range d.Aliases {
		b.WriteString("\talias " + escapeName(a.Field) + " as " + escapeName(a.Name) + "\n")
	}
	for _, f := range d.Fields {
		w.doc("\t", f.Doc)
		b.WriteByte('\t')
		for _, m := range f.Modifiers {
			b.WriteString(m + " ")
		}
		if f.GroupedBy != nil {
			b.WriteString("grouped by " + w.name(f.GroupedBy.Decl) + "." + escapeName(f.GroupedBy.Field) + " ")
		}
		if f.Type.Name != "" {
			b.WriteString(f.Type.String() + " ")
		}
		b.WriteString(escapeName(f.Name))
		if f.Semantics != "" {
			b.WriteString(" : " + escapeName(f.Semantics))
		}
		if f.Default != nil {
			b.WriteString(" = " + f.Default.Text)
		}
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
}

// quote renders s as an IRL string in single quotes. Bytes other than
// quotes, backslashes and control characters are written unchanged.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('\'')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\'', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if c < 0x20 || c == 0x7f {
				b.WriteString(`\u00`)
				b.WriteString(strconv.FormatUint(uint64(c)>>4, 16))
				b.WriteString(strconv.FormatUint(uint64(c)&15, 16))
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('\'')
	return b.String()
}

// escape renders a dotted name, each part as escapeName does.
func escape(name string) string {
	if !strings.Contains(name, ".") {
		return escapeName(name)
	}
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = escapeName(p)
	}
	return strings.Join(parts, ".")
}

// escapeName renders a simple name: an identifier as it is, a keyword
// prefixed with ^, anything else in backquotes (tracebridge's extension;
// see ValidName).
func escapeName(name string) string {
	switch {
	case !isIdent(name):
		return "`" + name + "`"
	case keywords[name]:
		return "^" + name
	}
	return name
}

// isIdent reports whether name is an IRL identifier (a letter or _, then
// letters, digits and _).
func isIdent(name string) bool {
	if name == "" || !isLetter(name[0]) {
		return false
	}
	for i := 1; i < len(name); i++ {
		if !isLetter(name[i]) && !isDigit(name[i]) {
			return false
		}
	}
	return true
}

// ValidName reports whether IRL can write name as one name: any non-empty
// text without backquotes and line breaks (identifiers as they are,
// others in backquotes).
func ValidName(name string) bool {
	return name != "" && !strings.ContainsAny(name, "`\n\r")
}
