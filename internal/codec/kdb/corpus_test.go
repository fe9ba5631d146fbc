package kdb

// Shared test fixtures: the Perl probes' corpus, a mapping of every
// built-in type, records with extreme values, and a chunked decoding loop
// that behaves like a source.

import (
	"bytes"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/record/recordtest"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// cmpOpts compares records by type name and bit-exact values.
var cmpOpts = cmp.Options{
	cmpopts.EquateEmpty(),
	cmp.Comparer(func(a, b record.Value) bool { return a.Equal(b) }),
	cmp.Comparer(func(a, b *record.Type) bool {
		return a == b || (a != nil && b != nil && a.Name == b.Name)
	}),
}

// diffRecords is cmp.Diff(want, got, cmpOpts) with a fast path for equal
// records (fuzz targets compare on every input).
func diffRecords(want, got []record.Record) string {
	if len(want) == len(got) {
		equal := true
		for i := range want {
			if !want[i].Equal(&got[i]) {
				equal = false
				break
			}
		}
		if equal {
			return ""
		}
	}
	return cmp.Diff(want, got, cmpOpts)
}

const perlMappingText = `# the EPrints Perl probes
1=kieker.common.record.flow.trace.operation.BeforeOperationEvent
2=kieker.common.record.flow.trace.operation.AfterOperationEvent
3=kieker.common.record.flow.trace.Trace
`

func perlMapping(tb testing.TB) *Mapping {
	tb.Helper()
	m, err := ParseMapping("perl.map", strings.NewReader(perlMappingText), record.Builtin())
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

// perlMessages returns the 251 text messages of the Perl probes' run.
func perlMessages(tb testing.TB) [][]byte {
	tb.Helper()
	data := testcorpus.Read(tb, "kieker-streams", "perl-kdb-messages.txt")
	return bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n"))
}

// stompBodies returns the bodies of the SEND frames of the captured STOMP
// session of the same run (frames end with NUL, no content-length).
func stompBodies(tb testing.TB) [][]byte {
	tb.Helper()
	data := testcorpus.Read(tb, "kieker-streams", "perl-stomp.bin")
	var bodies [][]byte
	for _, frame := range bytes.Split(data, []byte{0}) {
		if !bytes.HasPrefix(frame, []byte("SEND\n")) {
			continue
		}
		if _, body, ok := bytes.Cut(frame, []byte("\n\n")); ok {
			bodies = append(bodies, body)
		}
	}
	return bodies
}

// allKinds is a test type with a scalar and an array field of every kind.
var allKinds = record.MustType("test.AllKinds", append(recordtest.AllKinds(), record.Field{Name: "tail", Kind: record.Int})...)

const allKindsID = 100

// allTypesMapping maps the 67 built-in types to ids 1 to 67 in name order,
// and test.AllKinds to 100.
func allTypesMapping(tb testing.TB) *Mapping {
	tb.Helper()
	return builtinMapping(tb, map[int32]*record.Type{allKindsID: allKinds})
}

// builtinMapping maps the built-in types from 1 on, in the catalogue's
// order, besides the types of extra.
func builtinMapping(tb testing.TB, extra map[int32]*record.Type) *Mapping {
	tb.Helper()
	types := map[int32]*record.Type{}
	for id, t := range extra {
		types[id] = t
	}
	for i, t := range record.Builtin().Types() {
		types[int32(i+1)] = t
	}
	m, err := NewMapping(types)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

const variants = 6

// sample returns variant v of a value of kind k. Text cannot carry NaN
// payloads or lone surrogates, so text variants use Java's canonical NaNs.
func sample(k record.Kind, v int, text bool) record.Value {
	switch k {
	case record.Bool:
		return record.BoolValue(v%2 == 1)
	case record.Byte:
		return record.IntValue([]int64{0, math.MinInt8, math.MaxInt8, -1, 59, 92}[v])
	case record.Short:
		return record.IntValue([]int64{0, math.MinInt16, math.MaxInt16, -1, 1, 1000}[v])
	case record.Char:
		return record.IntValue([]int64{0, 0xFFFF, ';', 0xE9, '\n', '\\'}[v])
	case record.Int:
		return record.IntValue([]int64{0, math.MinInt32, math.MaxInt32, -1, 42, 11727}[v])
	case record.Long:
		return record.IntValue([]int64{0, math.MinInt64, math.MaxInt64, -1, 11727, 1795312705697789000}[v])
	case record.Float:
		nan := math.Float32frombits(javaFloatNaN)
		if !text {
			nan = math.Float32frombits(0x7f800001) // a signalling NaN with a payload
		}
		return record.FloatValue([]float32{0, -math.MaxFloat32, float32(math.Inf(1)), nan, math.SmallestNonzeroFloat32, float32(math.Copysign(0, -1))}[v])
	case record.Double:
		nan := math.Float64frombits(javaDoubleNaN)
		if !text {
			nan = math.Float64frombits(0x7ff0000000000abc)
		}
		return record.DoubleValue([]float64{0.1, -math.MaxFloat64, math.Inf(-1), nan, math.SmallestNonzeroFloat64, math.Copysign(0, -1)}[v])
	case record.String:
		return record.StringValue([]string{"", "ä€😀 unicode", "semi;colon\\back\nnew\rline\r", " spaces\t", strings.Repeat("x", 1000), "realclients.perl.Bookstore"}[v])
	}
	panic("no sample for " + k.String())
}

// sampleRecord returns variant v of a record of type t: arrays hold v
// elements (variant 0: an empty array).
func sampleRecord(t *record.Type, v int, text bool) record.Record {
	r := record.Record{Type: t, LoggingTimestamp: record.NoTimestamp, Values: make([]record.Value, len(t.Fields))}
	for i, f := range t.Fields {
		if !f.Array {
			r.Values[i] = sample(f.Kind, (v+i)%variants, text)
			continue
		}
		var items []record.Value
		for j := range v {
			items = append(items, sample(f.Kind, (v+j)%variants, text))
		}
		r.Values[i] = record.ListValue(f.Kind, items)
	}
	return r
}

// sampleRecords returns every variant of every type of m with its id.
func sampleRecords(m *Mapping, text bool) ([]int32, []record.Record) {
	var ids []int32
	var recs []record.Record
	for _, id := range m.IDs() {
		for v := range variants {
			ids = append(ids, id)
			recs = append(recs, sampleRecord(m.Type(id), v, text))
		}
	}
	return ids, recs
}

// chunked decodes data the way a source does: it reads chunks of the sizes
// size returns, appends them to what the decoder left, and decodes. It
// returns the records, the final error (or End's verdict) and the bytes
// consumed.
func chunked(d *Decoder, data []byte, size func() int) ([]record.Record, int, error) {
	var (
		b        record.Batch
		out      []record.Record
		buf      []byte
		consumed int
	)
	for off := 0; off < len(data); {
		n := min(max(size(), 1), len(data)-off)
		buf = append(buf, data[off:off+n]...)
		off += n
		b.Reset()
		used, err := d.Decode(buf, &b)
		consumed += used
		for i := range b.Records {
			out = append(out, b.Records[i].Clone())
		}
		if err != nil {
			return out, consumed, err
		}
		buf = append(buf[:0], buf[used:]...)
	}
	return out, consumed, d.End()
}

func byteByByte() int { return 1 }

func randomChunks(seed uint64) func() int {
	rng := rand.New(rand.NewPCG(seed, 7))
	return func() int { return 1 + rng.IntN(97) }
}

// whole decodes data in one call.
func whole(d *Decoder, data []byte) ([]record.Record, int, error) {
	var b record.Batch
	n, err := d.Decode(data, &b)
	if err == nil {
		err = d.End()
	}
	return b.Records, n, err
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
