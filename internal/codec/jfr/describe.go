package jfr

import (
	"sync"

	"github.com/tracebridge/tracebridge/internal/record"
)

// TypeInfo is what a recording's metadata says of an event type: its
// jdk.jfr.Label, jdk.jfr.Description and jdk.jfr.Category annotations,
// and the same of the metadata field each record field comes from.
type TypeInfo struct {
	Name        string      `json:"name"`
	Label       string      `json:"label,omitempty"`
	Description string      `json:"description,omitempty"`
	Category    []string    `json:"category,omitempty"`
	Fields      []FieldInfo `json:"fields"`
}

// FieldInfo describes one field of a record type: its name and kind in
// the record, the label and description of the metadata field it is
// (for a flattened F.sub: of F), and its unit (a timestamp or timespan is
// ns; "bytes", "percent" and "address" from the field's annotations).
type FieldInfo struct {
	Name        string `json:"name"`
	Kind        string `json:"kind"`
	Label       string `json:"label,omitempty"`
	Description string `json:"description,omitempty"`
	Unit        string `json:"unit,omitempty"`
}

// described maps each record type this package made to its TypeInfo
// (the metadata that made it first). Types live as long as the program,
// and so do their descriptions: one per event type and field layout.
var described sync.Map // *record.Type → *TypeInfo

// Describe returns what the metadata said of t, a type of records this
// package made; false for any other type. Safe for concurrent use.
func Describe(t *record.Type) (*TypeInfo, bool) {
	v, ok := described.Load(t)
	if !ok {
		return nil, false
	}
	return v.(*TypeInfo), true
}

// describe keeps the metadata's words on the type made of c.
func describe(t *record.Type, c *Class, cols []column) {
	if _, ok := described.Load(t); ok {
		return
	}
	info := &TypeInfo{Name: t.Name, Label: annotation(c.Annotations, "jdk.jfr.Label"),
		Description: annotation(c.Annotations, "jdk.jfr.Description")}
	if a, ok := c.Annotation("jdk.jfr.Category"); ok {
		info.Category = a.Values
		if len(info.Category) == 0 && a.Value != "" {
			info.Category = []string{a.Value}
		}
	}
	for i, col := range cols {
		fi := FieldInfo{Name: t.Fields[i].Name, Kind: t.Fields[i].Kind.String()}
		if t.Fields[i].Array {
			fi.Kind += "[]"
		}
		if len(col.path) > 0 {
			if f := c.Field(col.path[0]); f != nil {
				fi.Label = annotation(f.Annotations, "jdk.jfr.Label")
				fi.Description = annotation(f.Annotations, "jdk.jfr.Description")
				fi.Unit = unitOf(f, len(col.path) == 1)
			}
		}
		info.Fields = append(info.Fields, fi)
	}
	described.LoadOrStore(t, info)
}

func annotation(as []Annotation, name string) string {
	a, ok := findAnnotation(as, name)
	if !ok {
		return ""
	}
	return a.Value
}

// unitOf names the unit of a field's values (only of the field itself,
// not of its flattened parts).
func unitOf(f *Field, whole bool) string {
	switch {
	case !whole:
		return ""
	case f.Timestamp != "":
		return "epoch-ns"
	case f.Timespan != "":
		return "ns"
	}
	for _, a := range f.Annotations {
		switch a.Name {
		case "jdk.jfr.DataAmount":
			return "bytes"
		case "jdk.jfr.Percentage":
			return "percent"
		case "jdk.jfr.MemoryAddress":
			return "address"
		}
	}
	return ""
}
