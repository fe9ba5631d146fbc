package gen

import (
	"bytes"
	"fmt"
	"math"
	"strings"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
)

// SamplesPerType is the number of sample records per type.
const SamplesPerType = 3

// Sample values, chosen so that every kind shows its extremes, negative
// numbers, signed zero, NaN and infinities, and strings show non-ASCII text
// (a character outside the BMP included), separators and escapes of the
// text formats, a long value, the empty string and a class name (class
// names and values share the Kieker registry's id space). Strings recur so
// that the registry reuses ids.
var (
	sampleLongs  = []int64{math.MinInt64, math.MaxInt64, 1700000000123456789, -1, 0, -42, 4242424242}
	sampleInts   = []int64{math.MinInt32, math.MaxInt32, 123456, -1, 0, -7}
	sampleShorts = []int64{math.MinInt16, math.MaxInt16, 1234, -1, 0}
	sampleBytes  = []int64{math.MinInt8, math.MaxInt8, 42, -1, 0}
	sampleChars  = []int64{0, 0xFFFF, 'A', 0xE9, 0x4E16, 0xD83D}
	sampleBools  = []bool{true, false, true}
	sampleFloats = []uint32{
		0xff800000, // -Inf
		0x7f7fffff, // largest float
		0x80000000, // -0
		0x00000001, // smallest subnormal
		0x40500000, // 3.25
		0x7fc00000, // NaN
		0x3dcccccd, // 0.1
	}
	sampleDoubles = []uint64{
		0xfff0000000000000, // -Inf
		0x7ff0000000000000, // +Inf
		0x7fefffffffffffff, // largest double
		0x8000000000000000, // -0
		0x0000000000000001, // smallest subnormal
		0x7ff8000000000000, // NaN
		0x3fb999999999999a, // 0.1
		0xc05edd2f1a9fbe77, // -123.456
	}
	sampleStrings = []string{
		"",
		"Grüße, 世界 🚀",
		"semi;colon \\ back\\slash\nnew line\ttab \"quoted\" 'single' $dollar @at ??= %s {}",
		"host-α",
		record.BeforeOperationEvent,
		strings.Repeat("0123456789", 30),
		"public void shop.Cart.add(int)",
	}
	sampleArrayLens = []int{3, 1, 0}
)

// Samples returns the sample records the generated test programs build:
// SamplesPerType records per type, in the order of types. Their KDB ids
// are 1..len(types) in the same order. The logging timestamps are -1,
// math.MaxInt64 and 1700000000000000000 plus the type's index.
func Samples(types []*record.Type) []record.Record {
	var out []record.Record
	for ti, t := range types {
		for si := 0; si < SamplesPerType; si++ {
			r := record.Record{Type: t, Values: make([]record.Value, len(t.Fields))}
			switch si {
			case 0:
				r.LoggingTimestamp = record.NoTimestamp
			case 1:
				r.LoggingTimestamp = math.MaxInt64
			default:
				r.LoggingTimestamp = 1700000000000000000 + int64(ti)
			}
			for j, f := range t.Fields {
				if !f.Array {
					r.Values[j] = sampleValue(f.Kind, si+j)
					continue
				}
				n := sampleArrayLens[si%len(sampleArrayLens)]
				var items []record.Value
				if n > 0 {
					items = make([]record.Value, n)
					for e := range items {
						items[e] = sampleValue(f.Kind, si+j+e+1)
					}
				}
				r.Values[j] = record.ListValue(f.Kind, items)
			}
			out = append(out, r)
		}
	}
	return out
}

// sampleValue picks the i-th sample (cyclically) of kind k.
func sampleValue(k record.Kind, i int) record.Value {
	pick := func(n int) int { return i % n }
	switch k {
	case record.Bool:
		return record.BoolValue(sampleBools[pick(len(sampleBools))])
	case record.Byte:
		return record.IntValue(sampleBytes[pick(len(sampleBytes))])
	case record.Short:
		return record.IntValue(sampleShorts[pick(len(sampleShorts))])
	case record.Int:
		return record.IntValue(sampleInts[pick(len(sampleInts))])
	case record.Long:
		return record.IntValue(sampleLongs[pick(len(sampleLongs))])
	case record.Char:
		return record.IntValue(sampleChars[pick(len(sampleChars))])
	case record.Float:
		return record.FloatValue(math.Float32frombits(sampleFloats[pick(len(sampleFloats))]))
	case record.Double:
		return record.DoubleValue(math.Float64frombits(sampleDoubles[pick(len(sampleDoubles))]))
	case record.String:
		return record.StringValue(sampleStrings[pick(len(sampleStrings))])
	}
	return record.Value{}
}

// expected holds the bytes internal/codec writes for each sample record.
type expected struct {
	kdb    [][]byte // KDB binary, under the type's id
	kieker [][]byte // Kieker binary frame with the inline registry entries before it
}

// expect encodes the samples of ts with internal/codec: KDB binary under
// the types' ids, and one inline Kieker encoder (one registry, as for one
// connection) over all of them in order.
func expect(ts []*tinfo, samples []record.Record) (expected, error) {
	var e expected
	enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
	for i := range samples {
		r := &samples[i]
		t := ts[i/SamplesPerType]
		b, err := kdb.AppendBinary(nil, t.id, r)
		if err != nil {
			return e, fmt.Errorf("%w: sample %d of %s: %v", ErrInvalid, i%SamplesPerType, t.rt.Name, err)
		}
		e.kdb = append(e.kdb, b)
		b, err = enc.Append(nil, r)
		if err != nil {
			return e, fmt.Errorf("%w: sample %d of %s: %v", ErrInvalid, i%SamplesPerType, t.rt.Name, err)
		}
		e.kieker = append(e.kieker, b)
	}
	return e, nil
}

// testData returns the samples of ts with their expected bytes.
func testData(ts []*tinfo) ([]record.Record, expected, error) {
	types := make([]*record.Type, len(ts))
	for i, t := range ts {
		types[i] = t.rt
	}
	samples := Samples(types)
	e, err := expect(ts, samples)
	return samples, e, err
}

// mappingFile is the KDB mapping of the test program: ids 1..n.
func mappingFile(ts []*tinfo) []byte {
	var b bytes.Buffer
	for _, t := range ts {
		fmt.Fprintf(&b, "%d=%s\n", t.id, t.rt.Name)
	}
	return b.Bytes()
}

// errorType picks the type whose first sample the test programs use for
// their error paths: the first with both a scalar string and an array
// field, else the first with a string, else the first.
func errorType(ts []*tinfo) int {
	score := func(t *tinfo) int {
		n := 0
		for _, f := range t.fields {
			switch {
			case f.array:
				n |= 1
			case f.kind == record.String:
				n |= 2
			}
		}
		return n
	}
	pick := 0
	for i, t := range ts {
		if score(t) > score(ts[pick]) {
			pick = i
		}
	}
	return pick
}

// firstField returns the index of the first field matching pred, or -1.
func firstField(t *tinfo, pred func(finfo) bool) int {
	for i, f := range t.fields {
		if pred(f) {
			return i
		}
	}
	return -1
}

// listItems renders the items of an array value with item, separated by
// ", ".
func listItems(v record.Value, item func(record.Value) string) string {
	var items []string
	if l := v.List(); l != nil {
		for _, it := range l.Items {
			items = append(items, item(it))
		}
	}
	return strings.Join(items, ", ")
}
