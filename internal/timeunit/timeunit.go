// Package timeunit converts the timestamps of records from writers that do
// not use nanoseconds (Kieker's C language pack sends microseconds) to the
// nanoseconds Kieker's analyses assume.
//
// The fields converted are the long fields Kieker's records use for points
// in time: timestamp, tin and tout (OperationExecutionRecord), and the
// logging timestamp unless it is -1 (not set).
package timeunit

import (
	"fmt"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Factor returns the multiplier from unit ("ns", "us", "ms", "s"; "" means
// ns) to nanoseconds.
func Factor(unit string) (int64, error) {
	switch unit {
	case "", "ns":
		return 1, nil
	case "us", "µs":
		return 1_000, nil
	case "ms":
		return 1_000_000, nil
	case "s":
		return 1_000_000_000, nil
	}
	return 0, fmt.Errorf("time unit %q: want ns, us, ms or s", unit)
}

// Converter scales the time fields of records by a fixed factor. The
// positions of the time fields are computed once per type of the catalogue
// it was made for, so a Converter is safe for concurrent use.
type Converter struct {
	factor int64
	fields map[*record.Type][]int // read-only after New
}

// New returns a converter from unit to nanoseconds for the types of cat, or
// nil when unit is already nanoseconds (Apply on a nil Converter does
// nothing).
func New(unit string, cat *record.Catalog) (*Converter, error) {
	f, err := Factor(unit)
	if err != nil || f == 1 {
		return nil, err
	}
	c := &Converter{factor: f, fields: map[*record.Type][]int{}}
	for _, t := range cat.Types() {
		c.fields[t] = timeFields(t)
	}
	return c, nil
}

// Apply converts the records of b from index from on.
func (c *Converter) Apply(b *record.Batch, from int) {
	if c == nil {
		return
	}
	for i := from; i < len(b.Records); i++ {
		r := &b.Records[i]
		if r.LoggingTimestamp != record.NoTimestamp {
			r.LoggingTimestamp *= c.factor
		}
		idx, ok := c.fields[r.Type]
		if !ok {
			idx = timeFields(r.Type)
		}
		for _, fi := range idx {
			r.Values[fi] = record.IntValue(r.Values[fi].Int() * c.factor)
		}
	}
}

func timeFields(t *record.Type) []int {
	var idx []int
	for i, f := range t.Fields {
		if f.Kind == record.Long && !f.Array && (f.Name == "timestamp" || f.Name == "tin" || f.Name == "tout") {
			idx = append(idx, i)
		}
	}
	return idx
}
