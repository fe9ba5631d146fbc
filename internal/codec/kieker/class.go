package kieker

import "github.com/tracebridge/tracebridge/internal/record"

// Field operations of a class plan: the kind in the low bits, opArray set
// for array fields.
const opArray = 0x80

// classInfo is what a decoder needs to know about the class behind one
// class-name id. typ is nil when the name is not in the catalogue.
type classInfo struct {
	name string
	typ  *record.Type
	ops  []uint8 // one per field: Kind | opArray
	size int     // binary size of the fields (strings as 4-byte ids), -1 with arrays
	strs []int   // offsets of the string fields in the frame (without arrays)
	only uint8   // whether records are kept as frames only (Options.FramesOnly); onlyUnknown until asked
}

// The values of classInfo.only.
const (
	onlyUnknown = iota
	onlyNo
	onlyYes
)

// strField returns the index of the string field at frame offset at.
func (ci *classInfo) strField(at int) int {
	pos := 12
	for i, op := range ci.ops {
		if pos == at {
			return i
		}
		pos += binarySize(record.Kind(op &^ opArray))
	}
	return 0
}

// classCache resolves class-name ids to types through a string table and a
// catalogue, once per id: afterwards the hot path is one slice index.
type classCache struct {
	cat    *record.Catalog
	dense  []*classInfo
	sparse map[int32]*classInfo
}

const classDenseLimit = 1 << 16

// get returns the cached class of id, or nil.
func (c *classCache) get(id int32) *classInfo {
	if uint32(id) < uint32(len(c.dense)) {
		return c.dense[id]
	}
	if c.sparse == nil {
		return nil
	}
	return c.sparse[id]
}

// resolve looks id up in strs and the catalogue and caches the result. It
// returns nil when the id is not registered (not cached: it may be later).
func (c *classCache) resolve(id int32, strs *Strings) *classInfo {
	if ci := c.get(id); ci != nil {
		return ci
	}
	name, ok := strs.Get(id)
	if !ok {
		return nil
	}
	ci := &classInfo{name: name}
	if t := c.cat.Lookup(name); t != nil {
		ci = newClassInfo(name, t)
	}
	if id >= 0 && id < classDenseLimit {
		if int(id) >= len(c.dense) {
			grown := make([]*classInfo, int(id)+1, 2*int(id)+8)
			copy(grown, c.dense)
			c.dense = grown
		}
		c.dense[id] = ci
	} else {
		if c.sparse == nil {
			c.sparse = make(map[int32]*classInfo)
		}
		c.sparse[id] = ci
	}
	return ci
}

func newClassInfo(name string, t *record.Type) *classInfo {
	ci := &classInfo{name: name, typ: t, ops: make([]uint8, len(t.Fields))}
	for i, f := range t.Fields {
		ci.ops[i] = uint8(f.Kind)
		if f.Kind == record.String && !f.Array && ci.size >= 0 {
			ci.strs = append(ci.strs, 12+ci.size)
		}
		switch {
		case f.Array:
			ci.ops[i] |= opArray
			ci.size = -1
		case ci.size < 0:
		default:
			ci.size += binarySize(f.Kind)
		}
	}
	return ci
}

// binarySize is the size of a value of kind k in a binary frame.
func binarySize(k record.Kind) int {
	if k == record.String {
		return 4
	}
	return k.Size()
}
