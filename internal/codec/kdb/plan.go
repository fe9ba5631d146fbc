package kdb

import "github.com/tracebridge/tracebridge/internal/record"

// plan is what a decoder knows about one mapped id: the type, its fields,
// and for the binary dialect where the variable-size fields sit. Plans are
// built on first use and belong to one decoder, so the cache of the last
// string of each field needs no locking.
type plan struct {
	t      *record.Type
	short  string
	fields []fieldPlan
	ops    []varOp // variable-size fields in wire order
	tail   int     // fixed bytes after the last variable field
	arrays bool    // some field is an array
}

type fieldPlan struct {
	name  string
	kind  record.Kind // element kind for arrays
	array bool
	last  *string // the last string decoded for a field of this name (scalar strings)
}

// varOp is one variable-size field of the binary layout: skip fixed bytes,
// then a length or count.
type varOp struct {
	skip  int
	array bool
	elem  record.Kind
	field int
}

func (ps *plans) newPlan(t *record.Type) *plan {
	p := &plan{t: t, short: t.ShortName(), fields: make([]fieldPlan, len(t.Fields))}
	fixed := 0
	for i, f := range t.Fields {
		p.fields[i] = fieldPlan{name: f.Name, kind: f.Kind, array: f.Array}
		if f.Kind == record.String && !f.Array {
			// Fields of one name share the cache across types, so that
			// the After event following its Before event hits it.
			slot := ps.last[f.Name]
			if slot == nil {
				slot = new(string)
				ps.last[f.Name] = slot
			}
			p.fields[i].last = slot
		}
		if f.Array || f.Kind == record.String {
			p.ops = append(p.ops, varOp{skip: fixed, array: f.Array, elem: f.Kind, field: i})
			fixed = 0
			p.arrays = p.arrays || f.Array
			continue
		}
		fixed += f.Kind.Size()
	}
	p.tail = fixed
	return p
}

// plans finds the plan of an id: a slice for the mapping's dense ids, a map
// for the others.
type plans struct {
	m      *Mapping
	dense  []*plan
	sparse map[int32]*plan
	last   map[string]*string // field name → last string decoded for it
}

func newPlans(m *Mapping) plans {
	return plans{m: m, dense: make([]*plan, len(m.dense)), last: map[string]*string{}}
}

// get returns the plan of id, or nil for an unmapped id.
func (ps *plans) get(id int32) *plan {
	if uint32(id) < uint32(len(ps.dense)) {
		if p := ps.dense[id]; p != nil {
			return p
		}
		t := ps.m.dense[id]
		if t == nil {
			return nil
		}
		p := ps.newPlan(t)
		ps.dense[id] = p
		return p
	}
	if p, ok := ps.sparse[id]; ok {
		return p
	}
	t := ps.m.sparse[id]
	if t == nil {
		return nil
	}
	if ps.sparse == nil {
		ps.sparse = make(map[int32]*plan)
	}
	p := ps.newPlan(t)
	ps.sparse[id] = p
	return p
}

// str returns the string for b: the field's previous value when equal (a
// compare, no hashing), else the interned string.
func (f *fieldPlan) str(b []byte, in *record.Interner) string {
	if len(b) == 0 {
		return ""
	}
	if string(b) == *f.last {
		return *f.last
	}
	s := in.Bytes(b)
	*f.last = s
	return s
}
