package zico_test

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/tracebridge/tracebridge/internal/codec/fressian"
	"github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the seed corpora under testdata/fuzz")

// fuzzLimits keep one input cheap.
var fuzzLimits = zico.Limits{
	Fressian:   fressian.Limits{MaxDepth: 64, MaxString: 1 << 16, MaxCount: 1 << 12, MaxCache: 256, MaxReplay: 1 << 16},
	MaxRecords: 1 << 12, MaxItems: 1 << 13, MaxDepth: 32, MaxAttrs: 64, MaxStack: 64,
}

// payloadSeeds: the golden packets, generated traces (small: big seeds
// make the fuzzer's minimizing slow), and damaged ones.
func payloadSeeds(tb testing.TB) [][]byte {
	out := [][]byte{hx(tb, goldenHello), hx(tb, goldenData1), hx(tb, goldenData2)}
	rng := rand.New(rand.NewPCG(7, 8))
	p := zicotest.NewPayload(zicotest.NewRegistry())
	for _, n := range []int{1, 3, 12} {
		r := zicotest.Generate(rng, n, clock)
		r.Exception = &zico.Exception{Class: "E", Message: "m", Stack: []zico.StackElement{{Class: "C", Method: "m", Line: 3}},
			Cause: &zico.Exception{Class: "F", Stack: []zico.StackElement{}}}
		out = append(out, p.Append(nil, &r))
	}
	for _, s := range []string{
		sym + `01 DB "C" A0 02 DB "m" A0 03 DD "()V" A0 04 DB "K" ` + rec + plain + `F7 F7 C0 E6 04 ` + tagd + `01 FC E6 A1 ` + plain + `F7 DB "x" F7 F7 F7`,
		rec + plain + `F7 F7 F7 ED A0 ` + plain + `F7 F7 F7 F7 FD A0 ` + plain + `F7 F7 F7 EE CD A0 ` + plain + `F7 F7 F7 F7 80`,
		`EF E3 1C "com.jitlogic.zorka.Metric_v1" 04 01 02 03 DB "n" DB "d" F7 01 DB "x"`,
		rec + plain + `F7 ` + exc + `01 F7 E5 F7 F7 F7 F7`,
		rec + plain + `F7 F7 C0 E8 DB "k" 01 02 03 F7`,
	} {
		out = append(out, hx(tb, s))
	}
	return out
}

func FuzzDecodeData(f *testing.F) {
	for _, s := range payloadSeeds(f) {
		f.Add(s)
	}
	other := hx(f, goldenData2)
	f.Fuzz(func(t *testing.T, in []byte) {
		fresh := decode(zico.NewDecoder(fuzzLimits), in, zico.NewSymbolMap(0, 0))

		// A Decoder that decoded something else before gives the same.
		d := zico.NewDecoder(fuzzLimits)
		decode(d, other, zico.NewSymbolMap(0, 0))
		if again := decode(d, in, zico.NewSymbolMap(0, 0)); dump(fresh) != dump(again) {
			t.Fatalf("reused decoder differs:\n%s\n%s", dump(fresh), dump(again))
		}
		if fresh.Err != nil && !errors.Is(fresh.Err, zico.ErrFressianTruncated) {
			return
		}
		// What was decoded, encoded again, decodes to the same.
		var e zico.Encoder
		var enc []byte
		var want []any
		for _, o := range fresh.Objects {
			switch o := o.(type) {
			case zico.Symbol:
				if o.Name == "" {
					continue // a null name and "" differ on the wire
				}
				enc = e.AppendSymbol(enc, o)
			case zico.HelloRequest:
				enc = e.AppendHello(enc, o)
			case zico.TraceMarker:
				enc = e.AppendMarker(enc, &o)
			case zico.Trace:
				if !consistentTags(o.Root) {
					return // Java's writer caches structs by tag alone
				}
				enc = e.AppendRecord(enc, o.Root)
				r := clone(o.Root)
				r.Walk(func(r *zico.TraceRecord, _ int) bool {
					if r.Flags&zico.FlagTraceBegin == 0 {
						r.Marker = nil // zorka writes it only then
					}
					return true
				})
				o.Root, o.Unresolved = &r, 0
				want = append(want, o)
				continue
			default:
				continue
			}
			want = append(want, o)
		}
		second := decode(zico.NewDecoder(zico.Limits{}), enc, zico.NewSymbolMap(0, 0))
		if second.Err != nil {
			t.Fatalf("re-encoded: %v", second.Err)
		}
		for i, o := range second.Objects {
			if tr, ok := o.(zico.Trace); ok {
				tr.Unresolved = 0
				second.Objects[i] = tr
			}
		}
		if diff := cmp.Diff(want, second.Objects, cmpopts.EquateNaNs(), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("re-encoded (-want +got):\n%s", diff)
		}
	})
}

// consistentTags reports whether the generic values in the tree use each
// struct tag with one field count (zorka's tags with theirs).
func consistentTags(r *zico.TraceRecord) bool {
	seen := map[string]int{zico.TagHello: 3, zico.TagSymbol: 2, zico.TagRecord: 11, zico.TagMarker: 4,
		zico.TagException: 4, zico.TagStackElement: 4, zico.TagTagged: 2}
	var check func(v fressian.Value) bool
	check = func(v fressian.Value) bool {
		if v.Kind == fressian.KindStruct {
			if n, ok := seen[v.Tag]; ok && n != len(v.Items) {
				return false
			}
			seen[v.Tag] = len(v.Items)
		}
		for _, it := range v.Items {
			if !check(it) {
				return false
			}
		}
		return true
	}
	ok := true
	r.Walk(func(rec *zico.TraceRecord, _ int) bool {
		for _, a := range rec.Attrs {
			for v := &a.Value; v != nil; v = v.Elem {
				if v.Other != nil && !check(*v.Other) {
					ok = false
				}
			}
		}
		return ok
	})
	return ok
}

// FuzzFrames reads a stream of frames whole and cut at the offsets in
// cuts, and decodes every DATA payload with one symbol table, as a
// session does: both ways give the same frames, objects and errors.
func FuzzFrames(f *testing.F) {
	var stream []byte
	for _, s := range payloadSeeds(f)[:4] {
		stream = zico.AppendFrame(stream, zico.Data, s)
	}
	f.Add(stream, []byte{1, 17, 40})
	f.Add(zico.AppendFrame(zico.AppendFrame(nil, zico.Ping, nil), zico.Hello, hx(f, goldenHello)), []byte{3, 200})
	bad := zico.AppendFrame(nil, zico.Data, hx(f, goldenData1))
	bad[30] ^= 0x40
	f.Add(bad, []byte{5})
	f.Add(stream[:100], []byte{0, 2, 4})
	f.Fuzz(func(t *testing.T, in, cuts []byte) {
		var offs []int
		at := 0
		for _, c := range cuts {
			at += int(c) + 1
			offs = append(offs, at)
		}
		whole := readSession(bytes.NewReader(in))
		split := readSession(&splitReader{b: in, cuts: offs})
		if whole != split {
			t.Fatalf("whole:\n%s\nsplit at %v:\n%s", whole, offs, split)
		}
	})
}

// readSession reads frames until an error and decodes DATA payloads,
// returning a transcript.
func readSession(r interface{ Read([]byte) (int, error) }) string {
	fr := zico.NewFrameReader(r, 1<<16)
	d := zico.NewDecoder(fuzzLimits)
	syms := zico.NewSymbolMap(0, 0)
	var out bytes.Buffer
	for {
		f, err := fr.Next()
		if err != nil {
			fmt.Fprintf(&out, "end: %v\n", err)
			return out.String()
		}
		fmt.Fprintf(&out, "%s at %d, %d bytes\n", f.Type, f.Offset, len(f.Payload))
		if f.Type == zico.Data {
			out.WriteString(dump(decode(d, f.Payload, syms)))
		}
	}
}

// TestSeedCorpora keeps testdata/fuzz in step with the seeds (go test
// -run TestSeedCorpora -args -update-seeds rewrites them).
func TestSeedCorpora(t *testing.T) {
	var frames [][]any
	var stream []byte
	for _, s := range payloadSeeds(t)[:4] {
		stream = zico.AppendFrame(stream, zico.Data, s)
	}
	frames = append(frames, []any{stream, []byte{1, 17, 40}}, []any{stream[:100], []byte{0, 2, 4}})
	var payloads [][]any
	for _, s := range payloadSeeds(t) {
		payloads = append(payloads, []any{s})
	}
	writeCorpus(t, "FuzzDecodeData", payloads)
	writeCorpus(t, "FuzzFrames", frames)
}

func writeCorpus(t *testing.T, name string, inputs [][]any) {
	dir := filepath.Join("testdata", "fuzz", name)
	if !*updateSeeds {
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("seed corpus missing (run with -args -update-seeds): %v", err)
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, in := range inputs {
		body := "go test fuzz v1\n"
		for _, v := range in {
			body += fmt.Sprintf("[]byte(%q)\n", v)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
