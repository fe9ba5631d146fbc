package jfrevents

import (
	"cmp"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	codec "github.com/tracebridge/tracebridge/internal/codec/jfr"
	"github.com/tracebridge/tracebridge/internal/record"
)

// matcher selects and sorts the events of one type for a query.
type matcher struct {
	q       Query
	threads []int // thread fields
	start   int   // startTime, or -1
	sortBy  int   // the sort field, or -1 (time)
	filters []compiled
	thread  string
}

type compiled struct {
	field int
	op    string
	text  string
	num   float64
	isNum bool
}

func newMatcher(info *codec.TypeInfo, q Query) (*matcher, error) {
	m := &matcher{q: q, start: -1, sortBy: -1, thread: strings.ToLower(q.Thread)}
	idx := map[string]int{}
	for i, f := range info.Fields {
		idx[f.Name] = i
	}
	for i, f := range info.Fields {
		if f.Name == "startTime" {
			m.start = i
		}
		if _, ok := idx[f.Name+".javaThreadId"]; ok && f.Kind == "string" {
			m.threads = append(m.threads, i)
		}
	}
	if q.Sort != "" && q.Sort != "startTime" {
		i, ok := idx[q.Sort]
		if !ok {
			return nil, fmt.Errorf("%w: sort by %q: %s has no such field", ErrQuery, q.Sort, info.Name)
		}
		m.sortBy = i
	}
	for _, f := range q.Filters {
		i, ok := idx[f.Field]
		if !ok {
			return nil, fmt.Errorf("%w: filter on %q: %s has no such field", ErrQuery, f.Field, info.Name)
		}
		c := compiled{field: i, op: f.Op, text: f.Value}
		if v, err := strconv.ParseFloat(f.Value, 64); err == nil {
			c.num, c.isNum = v, true
		}
		if c.op == "~" {
			c.text = strings.ToLower(c.text)
		}
		m.filters = append(m.filters, c)
	}
	return m, nil
}

func (m *matcher) time(r *record.Record) int64 {
	if m.start >= 0 {
		return r.Values[m.start].Int()
	}
	return r.LoggingTimestamp
}

func (m *matcher) match(r *record.Record) bool {
	if t := m.time(r); (m.q.Since != 0 && t < m.q.Since) || (m.q.Until != 0 && t > m.q.Until) {
		return false
	}
	if m.thread != "" && (len(m.threads) == 0 || !strings.Contains(strings.ToLower(r.Values[m.threads[0]].Str()), m.thread)) {
		return false
	}
	for _, c := range m.filters {
		if !c.match(r.Type.Fields[c.field], r.Values[c.field]) {
			return false
		}
	}
	return true
}

func (c compiled) match(f record.Field, v record.Value) bool {
	if c.op == "~" {
		return strings.Contains(strings.ToLower(text(f, v)), c.text)
	}
	if n, ok := number(f, v); ok && c.isNum {
		return compare(c.op, n, c.num)
	}
	return compare(c.op, text(f, v), c.text)
}

// compare applies the comparison op (=, !=, <, <=, >, >=) to a and b.
func compare[T cmp.Ordered](op string, a, b T) bool {
	switch op {
	case "=":
		return a == b
	case "!=":
		return a != b
	case "<":
		return a < b
	case "<=":
		return a <= b
	case ">":
		return a > b
	case ">=":
		return a >= b
	}
	return false
}

// number returns a numeric value as a float64.
func number(f record.Field, v record.Value) (float64, bool) {
	if f.Array {
		return 0, false
	}
	switch f.Kind {
	case record.Byte, record.Short, record.Int, record.Long, record.Char:
		return float64(v.Int()), true
	case record.Float:
		return float64(v.Float()), true
	case record.Double:
		return v.Double(), true
	case record.Bool:
		if v.Bool() {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// text returns a value as text (an array: its items joined by newlines).
func text(f record.Field, v record.Value) string {
	if f.Array {
		l := v.List()
		if l == nil {
			return ""
		}
		var b strings.Builder
		for i, it := range l.Items {
			if i > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(it.Format(l.Elem))
		}
		return b.String()
	}
	if f.Kind == record.String {
		return v.Str()
	}
	return v.Format(f.Kind)
}

func (m *matcher) sort(hits []*event) {
	less := func(a, b *event) bool { // ascending
		if m.sortBy >= 0 {
			f := a.rec.Type.Fields[m.sortBy]
			va, vb := a.rec.Values[m.sortBy], b.rec.Values[m.sortBy]
			if na, ok := number(f, va); ok {
				nb, _ := number(b.rec.Type.Fields[m.sortBy], vb)
				if na != nb {
					return na < nb
				}
			} else if ta, tb := text(f, va), text(b.rec.Type.Fields[m.sortBy], vb); ta != tb {
				return ta < tb
			}
		}
		if ta, tb := m.time(&a.rec), m.time(&b.rec); ta != tb {
			return ta < tb
		}
		return a.id < b.id
	}
	sort.SliceStable(hits, func(i, j int) bool {
		if m.q.Asc {
			return less(hits[i], hits[j])
		}
		return less(hits[j], hits[i])
	})
}

// event renders e; frames > 0 cuts arrays to that many items.
func (m *matcher) event(e *event, frames int) Event {
	r := &e.rec
	out := Event{ID: e.id, Time: m.time(r), Values: make([]any, len(r.Values))}
	if len(m.threads) > 0 {
		out.Thread = r.Values[m.threads[0]].Str()
	}
	for i, v := range r.Values {
		f := r.Type.Fields[i]
		switch {
		case f.Array:
			l := v.List()
			items := []any{}
			if l != nil {
				for j, it := range l.Items {
					if frames > 0 && j == frames {
						items = append(items, fmt.Sprintf("… %d more", len(l.Items)-frames))
						break
					}
					items = append(items, scalar(l.Elem, it))
				}
			}
			out.Values[i] = items
		default:
			out.Values[i] = scalar(f.Kind, v)
		}
	}
	return out
}

// scalar returns a value for JSON (null for a null string; NaN and the
// infinities as text).
func scalar(k record.Kind, v record.Value) any {
	switch k {
	case record.String:
		if v.IsNull() {
			return nil
		}
		return v.Str()
	case record.Bool:
		return v.Bool()
	case record.Float, record.Double:
		x := v.Double()
		if k == record.Float {
			x = float64(v.Float())
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return strconv.FormatFloat(x, 'g', -1, 64)
		}
		return x
	case record.Char:
		return string(rune(v.Int()))
	}
	return v.Int()
}
