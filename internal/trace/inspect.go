package trace

import (
	"cmp"
	"regexp"
	"slices"
	"strings"
)

// MethodStat is a row of a trace's method ranking: one operation (with
// its class) and its calls in the trace.
type MethodStat struct {
	Operation string `json:"operation"`
	Component string `json:"component"`
	Calls     int    `json:"calls"`
	Errors    int    `json:"errors"`
	// Total is the time inside the operation, Self that time minus the
	// time in its calls (never below 0); Min and Max per call. In ns.
	Total int64 `json:"totalNs"`
	Self  int64 `json:"selfNs"`
	Min   int64 `json:"minNs"`
	Max   int64 `json:"maxNs"`
}

// Rank returns the method ranking of t (zico's): per operation the calls,
// errors, total and self time, min and max; the most self time first.
func Rank(t *Trace) []MethodStat {
	childTime := make([]int64, len(t.Spans))
	for i := range t.Spans {
		if p := t.Spans[i].Parent; p >= 0 {
			childTime[p] += t.Spans[i].Duration()
		}
	}
	type key struct{ op, comp string }
	idx := map[key]int{}
	var out []MethodStat
	for i := range t.Spans {
		s := &t.Spans[i]
		k := key{s.Operation, s.Component}
		j, ok := idx[k]
		if !ok {
			j = len(out)
			idx[k] = j
			out = append(out, MethodStat{Operation: s.Operation, Component: s.Component, Min: s.Duration(), Max: s.Duration()})
		}
		m := &out[j]
		d := s.Duration()
		m.Calls++
		if s.Error {
			m.Errors++
		}
		m.Total += d
		m.Self += max(d-childTime[i], 0)
		m.Min = min(m.Min, d)
		m.Max = max(m.Max, d)
	}
	slices.SortStableFunc(out, func(a, b MethodStat) int {
		switch {
		case a.Self != b.Self:
			return cmp.Compare(b.Self, a.Self)
		case a.Total != b.Total:
			return cmp.Compare(b.Total, a.Total)
		}
		return strings.Compare(a.Operation, b.Operation)
	})
	return out
}

// Fields selects what a search inside a trace looks at.
type Fields uint8

// The fields.
const (
	FieldClasses    Fields = 1 << iota // the component (class)
	FieldMethods                       // the operation
	FieldAttributes                    // attribute keys and values
	FieldExceptions                    // exception class, message and stack (status message, exception events)
	AllFields       = FieldClasses | FieldMethods | FieldAttributes | FieldExceptions
)

// ParseFields parses a comma-separated list: classes, methods,
// attributes, exceptions (or all).
func ParseFields(s string) (Fields, bool) {
	var f Fields
	for _, p := range strings.Split(s, ",") {
		switch strings.TrimSpace(p) {
		case "classes", "class":
			f |= FieldClasses
		case "methods", "method", "operations":
			f |= FieldMethods
		case "attributes", "attrs":
			f |= FieldAttributes
		case "exceptions", "exception", "errors":
			f |= FieldExceptions
		case "all", "":
			f |= AllFields
		default:
			return 0, false
		}
	}
	return f, true
}

// Find returns the indexes of the spans of t in which the selected fields
// hold text (a substring; case-insensitive with ignoreCase) or match re,
// in tree order: the in-trace search of zico's trace view.
func Find(t *Trace, text string, re *regexp.Regexp, fields Fields, ignoreCase bool) []int {
	if fields == 0 {
		fields = AllFields
	}
	needle := text
	if ignoreCase {
		needle = strings.ToLower(text)
	}
	match := func(s string) bool {
		if re != nil {
			return re.MatchString(s)
		}
		if ignoreCase {
			s = strings.ToLower(s)
		}
		return strings.Contains(s, needle)
	}
	var out []int
	for i := range t.Spans {
		s := &t.Spans[i]
		hit := fields&FieldClasses != 0 && match(s.Component) ||
			fields&FieldMethods != 0 && match(s.Operation)
		if !hit && fields&FieldAttributes != 0 {
			for _, a := range s.Attributes {
				if match(a.Key) || match(a.Value) {
					hit = true
					break
				}
			}
		}
		if !hit && fields&FieldExceptions != 0 {
			hit = s.StatusMessage != "" && match(s.StatusMessage)
			for _, e := range s.Events {
				if hit || e.Name != "exception" {
					continue
				}
				for _, a := range e.Attributes {
					if match(a.Value) {
						hit = true
						break
					}
				}
			}
		}
		if hit {
			out = append(out, i)
		}
	}
	return out
}
