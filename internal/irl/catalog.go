package irl

import (
	"fmt"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Types returns one record type per non-abstract entity or event, named
// package.Name, with the fields of Model.Fields, in declaration order. A
// multi-dimensional array field is an error: the record model has only
// one-dimensional arrays.
func (m *Model) Types() ([]*record.Type, error) {
	_, types, err := m.types()
	return types, err
}

func (m *Model) types() ([]*Decl, []*record.Type, error) {
	var decls []*Decl
	var types []*record.Type
	for _, d := range m.decls {
		if !d.IsRecord() {
			continue
		}
		fields := m.Fields(d)
		rf := make([]record.Field, len(fields))
		for i, f := range fields {
			if len(f.Dims) > 1 {
				return nil, nil, newError(f.Decl.Pos, "%s %s: field %s: multi-dimensional arrays are not supported", d.Kind, d.Name, f.Name)
			}
			rf[i] = record.Field{Name: f.Name, Kind: f.Kind, Array: f.Array()}
		}
		t, err := record.NewType(d.FullName(), rf...)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", d.Pos, err)
		}
		decls = append(decls, d)
		types = append(types, t)
	}
	return decls, types, nil
}

// AddTo adds the record types of the model to cat and returns how many the
// model defines. A type cat already knows with the same fields (Kieker's
// own IRL over the built-in catalogue) is accepted; a conflicting one, or
// one named like a legacy alias, is an error naming the IRL file and line,
// and then nothing is added.
func (m *Model) AddTo(cat *record.Catalog) (int, error) {
	decls, types, err := m.types()
	if err != nil {
		return 0, err
	}
	for i, t := range types {
		old := cat.Lookup(t.Name)
		switch {
		case old == nil:
		case old.Name != t.Name:
			return 0, fmt.Errorf("%s: record type %s: name is a legacy alias of %s", decls[i].Pos, t.Name, old.Name)
		case !old.SameFields(t):
			return 0, fmt.Errorf("%s: record type %s: fields %s conflict with the known type %s", decls[i].Pos, t.Name, t, old)
		}
	}
	for i, t := range types {
		if err := cat.Add(t); err != nil {
			return i, fmt.Errorf("%s: %w", decls[i].Pos, err)
		}
	}
	return len(types), nil
}
