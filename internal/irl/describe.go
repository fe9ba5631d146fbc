package irl

import (
	"fmt"
	"strings"

	"github.com/tracebridge/tracebridge/internal/record"
)

// SplitName splits a record type's name at its last dot into the package
// and the simple name ("jdk.ExecutionSample" → "jdk", "ExecutionSample").
// A name without a dot has no package.
func SplitName(name string) (pkg, simple string) {
	i := strings.LastIndexByte(name, '.')
	if i < 0 {
		return "", name
	}
	return name[:i], name[i+1:]
}

// Describable reports whether Describe can write t: its name has a package
// whose parts, like its simple name and field names, are valid names
// (ValidName), since an IRL file needs a package declaration.
func Describable(t *record.Type) error {
	pkg, simple := SplitName(t.Name)
	if pkg == "" {
		return fmt.Errorf("record type %s: IRL cannot describe a type without a package", t.Name)
	}
	for _, p := range append(strings.Split(pkg, "."), simple) {
		if !ValidName(p) {
			return fmt.Errorf("record type %s: IRL cannot write the name part %q", t.Name, p)
		}
	}
	for _, f := range t.Fields {
		if !ValidName(f.Name) {
			return fmt.Errorf("record type %s: IRL cannot write the field name %q", t.Name, f.Name)
		}
	}
	return nil
}

// Describe renders record types of one package as an IRL file: the package
// declaration, then one entity per type with its fields in order; names
// that are not identifiers are written in backquotes, doc (if any) heads
// the file as a comment. Every type must be Describable and in package
// pkg. Loading the result gives types with the same names and fields.
func Describe(pkg string, types []*record.Type, doc string) ([]byte, error) {
	f := &File{Package: pkg}
	for _, t := range types {
		if err := Describable(t); err != nil {
			return nil, err
		}
		p, simple := SplitName(t.Name)
		if p != pkg {
			return nil, fmt.Errorf("record type %s is not in package %s", t.Name, pkg)
		}
		d := &Decl{Kind: Entity, Name: simple, Package: pkg}
		for _, fl := range t.Fields {
			tr := TypeRef{Name: fl.Kind.String(), Kind: fl.Kind}
			if fl.Array {
				tr.Dims = []int{0}
			}
			d.Fields = append(d.Fields, &FieldDecl{Name: fl.Name, Type: tr})
		}
		f.Decls = append(f.Decls, d)
	}
	var b strings.Builder
	for _, l := range strings.Split(doc, "\n") {
		if doc == "" {
			break
		}
		b.WriteString(strings.TrimRight("// "+l, " ") + "\n")
	}
	b.Write(Format(f))
	return []byte(b.String()), nil
}
