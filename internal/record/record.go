package record

// Record is one monitoring record: its type, the logging timestamp the
// writer put in the record header (-1 when not set), and one value per
// field of the type, in the type's order.
type Record struct {
	Type             *Type
	LoggingTimestamp int64
	Values           []Value
}

// NoTimestamp is the logging timestamp of a record that has none (Kieker's
// default when kieker.monitoring.setLoggingTimestamp is false).
const NoTimestamp int64 = -1

// Field returns the value of the named field and whether the type has it.
func (r *Record) Field(name string) (Value, bool) {
	i := r.Type.FieldIndex(name)
	if i < 0 || i >= len(r.Values) {
		return Value{}, false
	}
	return r.Values[i], true
}

// Equal reports whether two records have the same type, timestamp and values.
func (r *Record) Equal(o *Record) bool {
	if r.Type != o.Type && (r.Type == nil || o.Type == nil || r.Type.Name != o.Type.Name) {
		return false
	}
	if r.LoggingTimestamp != o.LoggingTimestamp || len(r.Values) != len(o.Values) {
		return false
	}
	for i := range r.Values {
		if !r.Values[i].Equal(o.Values[i]) {
			return false
		}
	}
	return true
}

// Clone returns a copy of the record whose values do not share memory with
// any batch. Strings are immutable and stay shared.
func (r *Record) Clone() Record {
	c := *r
	c.Values = append([]Value(nil), r.Values...)
	for i, v := range c.Values {
		if v.list != nil {
			l := *v.list
			l.Items = append([]Value(nil), l.Items...)
			c.Values[i].list = &l
		}
	}
	return c
}
