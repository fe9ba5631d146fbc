package bridgetest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
)

// A spec describes trace records as JSON maps: "type" is the short name of
// one of the four types in specTypes, every other key names a field of
// that type. In a spec file (a JSON array) integers are JSON numbers;
// RandomSpec and DecodeSpec hold them as int64.
var specTypes = map[string]string{
	"TraceMetadata":             record.TraceMetadata,
	"BeforeOperationEvent":      record.BeforeOperationEvent,
	"AfterOperationEvent":       record.AfterOperationEvent,
	"AfterOperationFailedEvent": record.AfterOperationFailedEvent,
}

// EncodeSpec encodes the records of a spec file with tracebridge's Kieker
// encoder in single-socket mode (registry entries inline, no logging
// timestamps): the stream a client's encoder must produce for them.
func EncodeSpec(tb testing.TB, specFile string) []byte {
	tb.Helper()
	spec, err := os.ReadFile(specFile)
	if err != nil {
		tb.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.UseNumber()
	var recs []map[string]any
	if err := dec.Decode(&recs); err != nil {
		tb.Fatalf("%s: %v", specFile, err)
	}
	cat := record.Builtin()
	enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
	var out []byte
	var b record.Batch
	for i, m := range recs {
		name, _ := m["type"].(string)
		typ := cat.Lookup(specTypes[name])
		if typ == nil {
			tb.Fatalf("%s: record %d: unknown type %v", specFile, i, m["type"])
		}
		b.Reset()
		r := b.Add(typ, record.NoTimestamp)
		for j, f := range typ.Fields {
			v, ok := m[f.Name]
			if !ok {
				tb.Fatalf("%s: record %d: no field %s", specFile, i, f.Name)
			}
			if f.Kind == record.String {
				s, ok := v.(string)
				if !ok {
					tb.Fatalf("%s: record %d: field %s: %v is not a string", specFile, i, f.Name, v)
				}
				r.Values[j] = record.StringValue(s)
				continue
			}
			num, ok := v.(json.Number)
			n, err := num.Int64()
			if !ok || err != nil {
				tb.Fatalf("%s: record %d: field %s: %v", specFile, i, f.Name, err)
			}
			r.Values[j] = record.IntValue(n)
		}
		if out, err = enc.Append(out, r); err != nil {
			tb.Fatalf("%s: record %d: %v", specFile, i, err)
		}
	}
	return out
}

// CheckGolden compares EncodeSpec(specFile) with the golden stream a
// client's unit tests hold their encoder to; with update it first rewrites
// the golden file.
func CheckGolden(tb testing.TB, specFile, goldenFile string, update bool) {
	tb.Helper()
	out := EncodeSpec(tb, specFile)
	if update {
		if err := os.WriteFile(goldenFile, out, 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	want, err := os.ReadFile(goldenFile)
	if err != nil {
		tb.Fatal(err)
	}
	if !bytes.Equal(out, want) {
		tb.Fatalf("%s is stale: run %s with -update\n got %x\nwant %x", goldenFile, tb.Name(), out, want)
	}
}

// RandomSpec returns n random records, with strings drawn to exercise
// UTF-8 lengths, KDB-special characters and registry reuse, and integers
// across their whole range.
func RandomSpec(rng *rand.Rand, n int) []map[string]any {
	pool := []string{"", "a", "op", "ü", "书", "🐍", "a;b", `back\slash`, "line\nbreak", "<no-session-id>",
		"x.y.Z.method", strings.Repeat("é", 3000)}
	str := func() string {
		if rng.IntN(4) == 0 {
			return fmt.Sprintf("s%d-%s", rng.IntN(50), pool[rng.IntN(len(pool))])
		}
		return pool[rng.IntN(len(pool))]
	}
	i64 := func() int64 {
		switch rng.IntN(4) {
		case 0:
			return []int64{0, -1, 1, -1 << 63, 1<<63 - 1}[rng.IntN(5)]
		case 1:
			return rng.Int64N(1000)
		}
		return int64(rng.Uint64())
	}
	i32 := func() int64 { return int64(int32(rng.Uint32())) }
	out := make([]map[string]any, n)
	for i := range out {
		switch k := rng.IntN(4); k {
		case 0:
			out[i] = map[string]any{"type": "TraceMetadata", "traceId": i64(), "threadId": i64(), "sessionId": str(),
				"hostname": str(), "parentTraceId": i64(), "parentOrderId": i32()}
		default:
			m := map[string]any{"type": []string{"", "BeforeOperationEvent", "AfterOperationEvent", "AfterOperationFailedEvent"}[k],
				"timestamp": i64(), "traceId": i64(), "orderIndex": i32(), "operationSignature": str(), "classSignature": str()}
			if k == 3 {
				m["cause"] = str()
			}
			out[i] = m
		}
	}
	return out
}

// DecodeSpec decodes a single-socket stream with tracebridge's decoder,
// fed in random pieces, into records like RandomSpec's. A record with a
// logging timestamp fails tb.
func DecodeSpec(tb testing.TB, data []byte, rng *rand.Rand) []map[string]any {
	tb.Helper()
	var out []map[string]any
	var b record.Batch
	d := kieker.NewDecoder(kieker.Options{Inline: true})
	var pending []byte
	for len(data) > 0 || len(pending) > 0 {
		k := min(len(data), 1+rng.IntN(4096))
		pending = append(pending, data[:k]...)
		data = data[k:]
		n, err := d.Decode(pending, &b)
		if err != nil {
			tb.Fatalf("decoding: %v", err)
		}
		pending = append(pending[:0], pending[n:]...)
		if k == 0 && n == 0 {
			tb.Fatalf("%d bytes left over", len(pending))
		}
	}
	for _, r := range b.Records {
		m := map[string]any{"type": r.Type.ShortName()}
		for i, f := range r.Type.Fields {
			if f.Kind == record.String {
				m[f.Name] = r.Values[i].Str()
			} else {
				m[f.Name] = r.Values[i].Int()
			}
		}
		if r.LoggingTimestamp != record.NoTimestamp {
			tb.Errorf("logging timestamp %d", r.LoggingTimestamp)
		}
		out = append(out, m)
	}
	return out
}

// EncoderRoundTrip checks a client's encoder: it writes n random records
// (RandomSpec) to a spec file, has encode turn that file into a
// single-socket stream (encode fails tb itself when the client does) and
// decodes the stream in random pieces; the records must come back as they
// were.
func EncoderRoundTrip(tb testing.TB, n int, encode func(specFile string) []byte) {
	tb.Helper()
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	spec := RandomSpec(rng, n)
	js, err := json.Marshal(spec)
	if err != nil {
		tb.Fatal(err)
	}
	in := filepath.Join(tb.TempDir(), "records.json")
	if err := os.WriteFile(in, js, 0o644); err != nil {
		tb.Fatal(err)
	}
	if diff := cmp.Diff(spec, DecodeSpec(tb, encode(in), rng)); diff != "" {
		tb.Fatalf("round trip (-encoded +decoded):\n%s", diff)
	}
}
