package kdb

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Mapping maps KDB record ids to record types. It is immutable once built
// and safe for concurrent use.
type Mapping struct {
	dense  []*record.Type         // dense[id] for 0 <= id < len(dense)
	sparse map[int32]*record.Type // every other id
	names  map[int32]string       // the class name as written, for WriteTo
	ids    []int32                // all ids, ascending
	byType map[*record.Type]int32 // lowest id of each type
	byName map[string]int32       // lowest id of each canonical type name
}

// maxDense bounds the slice Type indexes: ids from 0 to maxDense-1 are
// looked up in a slice when the table is dense enough, others in a map.
const maxDense = 4096

// maxMappingLine bounds one line of a mapping file.
const maxMappingLine = 64 << 10

// NewMapping builds a mapping from a table of ids to types. A nil type is an
// error.
func NewMapping(types map[int32]*record.Type) (*Mapping, error) {
	names := make(map[int32]string, len(types))
	for id, t := range types {
		if t == nil {
			return nil, fmt.Errorf("mapping: id %d has no type", id)
		}
		names[id] = t.Name
	}
	return build(types, names), nil
}

// build indexes a validated table.
func build(types map[int32]*record.Type, names map[int32]string) *Mapping {
	m := &Mapping{
		names:  names,
		ids:    make([]int32, 0, len(types)),
		byType: make(map[*record.Type]int32, len(types)),
		byName: make(map[string]int32, len(types)),
	}
	for id := range types {
		m.ids = append(m.ids, id)
	}
	slices.Sort(m.ids)
	maxID := int32(-1)
	for _, id := range m.ids {
		if id >= 0 && id < maxDense {
			maxID = id
		}
	}
	// Dense when the slice is small or at most a quarter empty-ish: ids
	// handed out by people are small and consecutive.
	if maxID >= 0 && (maxID < 256 || int(maxID) < 4*len(types)) {
		m.dense = make([]*record.Type, maxID+1)
	}
	for _, id := range m.ids { // ascending, so the first id seen is the lowest
		t := types[id]
		if id >= 0 && int(id) < len(m.dense) {
			m.dense[id] = t
		} else {
			if m.sparse == nil {
				m.sparse = make(map[int32]*record.Type)
			}
			m.sparse[id] = t
		}
		if _, ok := m.byType[t]; !ok {
			m.byType[t] = id
		}
		if _, ok := m.byName[t.Name]; !ok {
			m.byName[t.Name] = id
		}
	}
	return m
}

// Type returns the type mapped to id, or nil.
func (m *Mapping) Type(id int32) *record.Type {
	if uint32(id) < uint32(len(m.dense)) {
		return m.dense[id]
	}
	return m.sparse[id]
}

// ID returns the lowest id mapped to t (or to a type of the same name), for
// encoders.
func (m *Mapping) ID(t *record.Type) (int32, bool) {
	if t == nil {
		return 0, false
	}
	if id, ok := m.byType[t]; ok {
		return id, true
	}
	id, ok := m.byName[t.Name]
	return id, ok
}

// IDs returns the mapped ids in ascending order.
func (m *Mapping) IDs() []int32 { return slices.Clone(m.ids) }

// Len returns the number of mapped ids.
func (m *Mapping) Len() int { return len(m.ids) }

// WriteTo writes the mapping as a mapping file, one "<id>=<class>" line per
// id in ascending order, with the class names as they were read (or the
// types' names for NewMapping and DefaultMapping).
func (m *Mapping) WriteTo(w io.Writer) (int64, error) {
	var buf []byte
	for _, id := range m.ids {
		buf = strconv.AppendInt(buf, int64(id), 10)
		buf = append(buf, '=')
		buf = append(buf, m.names[id]...)
		buf = append(buf, '\n')
	}
	n, err := w.Write(buf)
	if err != nil {
		return int64(n), fmt.Errorf("write mapping: %w", err)
	}
	return int64(n), nil
}

// DefaultMapping returns the bridge's default mapping of common Kieker
// types; ids 1 to 3 are those of the EPrints Perl probes (3 is TraceMetadata,
// which the probes call by its legacy name kieker.common.record.flow.trace.Trace).
// It fails only when cat lacks one of the types.
func DefaultMapping(cat *record.Catalog) (*Mapping, error) {
	names := []string{
		1:  record.BeforeOperationEvent,
		2:  record.AfterOperationEvent,
		3:  record.TraceMetadata,
		4:  record.AfterOperationFailedEvent,
		5:  record.CallOperationEvent,
		6:  record.ApplicationTraceMetadata,
		7:  record.OperationExecutionRecord,
		8:  record.SplitEvent,
		9:  record.JoinEvent,
		10: record.CPUUtilizationRecord,
		11: record.Prefix + "system.MemSwapUsageRecord",
		12: record.Prefix + "system.LoadAverageRecord",
		13: record.KiekerMetadataRecord,
		14: record.Prefix + "flow.thread.BeforeThreadBasedEvent",
		15: record.Prefix + "flow.thread.AfterThreadBasedEvent",
		16: record.Prefix + "flow.thread.AfterFailedThreadBasedEvent",
	}
	types := make(map[int32]*record.Type, len(names))
	for id, name := range names[1:] {
		t := cat.Lookup(name)
		if t == nil {
			return nil, fmt.Errorf("default mapping: id %d: unknown record class %s", id+1, name)
		}
		types[int32(id+1)] = t
	}
	return NewMapping(types)
}

// ParseMapping reads a mapping file; name identifies it in errors. Every
// class must be known to cat (the bridge cannot decode a record it has no
// type for); an id may appear once; several ids may map to one class.
// Errors name the file, the line and the reason.
func ParseMapping(name string, r io.Reader, cat *record.Catalog) (*Mapping, error) {
	types := make(map[int32]*record.Type)
	names := make(map[int32]string)
	lines := make(map[int32]int) // id → line of its first definition
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxMappingLine)
	line := 0
	for sc.Scan() {
		line++
		text := sc.Bytes()
		if line == 1 {
			text = bytes.TrimPrefix(text, []byte("\xef\xbb\xbf")) // UTF-8 byte order mark
		}
		text = bytes.TrimSpace(text) // also drops the CR of a CRLF
		if len(text) == 0 || text[0] == '#' {
			continue
		}
		idText, class, ok := bytes.Cut(text, []byte("="))
		if !ok {
			return nil, fmt.Errorf("mapping %s: line %d: no '=' between id and record class", name, line)
		}
		idText, class = bytes.TrimSpace(idText), bytes.TrimSpace(class)
		id, err := strconv.ParseInt(string(idText), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("mapping %s: line %d: id %q is not a number", name, line, idText)
		}
		if id < math.MinInt32 || id > math.MaxInt32 {
			return nil, fmt.Errorf("mapping %s: line %d: id %d is out of the int32 range", name, line, id)
		}
		if first, dup := lines[int32(id)]; dup {
			return nil, fmt.Errorf("mapping %s: line %d: duplicate id %d (first defined on line %d)", name, line, id, first)
		}
		if len(class) == 0 {
			return nil, fmt.Errorf("mapping %s: line %d: id %d has no record class", name, line, id)
		}
		className := string(class)
		t := cat.Lookup(className)
		if t == nil {
			return nil, fmt.Errorf("mapping %s: line %d: unknown record class %s", name, line, className)
		}
		types[int32(id)], names[int32(id)], lines[int32(id)] = t, className, line
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("mapping %s: line %d: longer than %d bytes", name, line+1, maxMappingLine)
		}
		return nil, fmt.Errorf("mapping %s: line %d: %w", name, line+1, err)
	}
	return build(types, names), nil
}

// String renders the mapping for messages ("1=…BeforeOperationEvent, 2=…").
func (m *Mapping) String() string {
	var b strings.Builder
	for i, id := range m.ids {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d=%s", id, m.names[id])
	}
	return b.String()
}
