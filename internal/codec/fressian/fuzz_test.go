package fressian

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var updateSeeds = flag.Bool("update-seeds", false, "rewrite the seed corpus under testdata/fuzz")

// fuzzLimits keep one input cheap.
var fuzzLimits = Limits{MaxDepth: 64, MaxString: 1 << 16, MaxCount: 1 << 12, MaxCache: 256, MaxReplay: 1 << 16}

// seeds are inputs for FuzzDecode: every code family, the caches, footers
// and some damage.
func seeds(tb testing.TB) [][]byte {
	var e Encoder
	var gen []byte
	for _, v := range []Value{
		Struct("com.jitlogic.zorka.TraceRecord_v1", Int(1), Int(2), Int(3), Int(2), Int(1500000), Int(1), Int(0),
			Struct("com.jitlogic.zorka.TraceMarker_v1", Int(4), Int(1700000000000), Int(0), Int(0)),
			Null(), Map(Int(5), Int(200)), Null()),
		String(strings.Repeat("é", 20)), Bytes(bytes.Repeat([]byte{7}, 20)), // small: big seeds make minimizing slow
		Array("double[]", Double(0.5), Double(-1)), Set(String("a")), Float(2),
	} {
		gen = e.AppendValue(gen, v)
	}
	out := [][]byte{gen, AppendFooter(bytes.Clone(gen[:40]), 0)}
	for _, s := range []string{
		"00 3F FF 50 C8 4F FE 72 16 E3 60 7B 8B CF E5 68 00 F8 80 00 00 00 00 00 00 00",
		"F5 F6 F7 FB FC FA 40 04 00 00 00 00 00 00 F9 3F C0 00 00",
		`DA DB "C" E3 08 "12345678" DB 00 DC C3 A9 E0 ED A0 BD ED BA 80 DC C0 80`,
		`E2 03 "abc" E2 02 "de" DB "f" E2 03 ED A0 BD DD ED BA 80`,
		`D0 D3 01 02 03 D9 08 0102030405060708 D8 02 AABB D8 01 CC D9 00`,
		`E4 E6 01 02 EC 02 03 04 ED 05 06 FD EE 07`,
		`C0 E6 05 50 C8 C1 E5 DB "a" C0 ED FD`,
		`EF DB "T" 02 01 02 A0 03 04 EF DB "U" 00 A1 F0 00 05 06 EF 05 01 F7`,
		`C3 D0 C4 DB "r" C5 DB "u" C6 D1 05 C7 D1 05 02 C8 7B 8B CF E5 68 00 C9 F7 DB "s" CA DB "n" DB "k"`,
		`B3 02 01 FF B0 01 F8 7F FF FF FF FF FF FF FF B1 02 FB FC B4 01 F9 3F C0 00 00 B2 02 F5 F6 B5 02 DB "x" F7`,
		`CD DB "C" 80 80 CD E6 01 02 81 CC 00 CD 03 E3 82 "abc"`,
		`CD EF DB "T" 02 CD DB "a" 81 80 A0 01 02 FE EF DB "U" 01 C0 E6 01 ED 02 FD B3 02 01 02`,
		`CD E6 00 00 CD E6 80 80 CD E6 81 81 CD E6 82 82 83`,
		`CD E5 80`, `CD E5 FE 01`, `E3 76 7F FF FF FF`, `EC 77 7F FF FF FF`, `EF DB "T" FF`,
	} {
		out = append(out, hx(tb, s))
	}
	return out
}

func FuzzDecode(f *testing.F) {
	for _, s := range seeds(f) {
		f.Add(s)
	}
	f.Fuzz(fuzzBody)
}

func fuzzBody(t *testing.T, in []byte) {
	{
		opts := Options{Limits: fuzzLimits}
		vals, err := decodeAll(in, opts)

		// Skip walks exactly as far as ReadValue and fails the same way.
		d := NewDecoder(opts)
		d.Reset(in)
		n := 0
		for d.More() {
			d.Skip()
			if d.Err() == nil {
				n++
			}
		}
		if n != len(vals) || fmt.Sprint(d.Err()) != fmt.Sprint(err) {
			t.Fatalf("Skip: %d values, %v; ReadValue: %d values, %v", n, d.Err(), len(vals), err)
		}
		if !consistentTags(vals, map[string]int{}) {
			return // Java's writer caches structs by tag alone
		}
		// Encoding what was read and reading it again is stable.
		var e Encoder
		var enc1 []byte
		for _, v := range vals {
			enc1 = e.AppendValue(enc1, v)
		}
		vals2, err := decodeAll(enc1, Options{Limits: Limits{MaxDepth: 2 * fuzzLimits.MaxDepth}})
		if err != nil {
			t.Fatalf("re-encoded values: %v\n% X", err, enc1)
		}
		e.Reset()
		var enc2 []byte
		for _, v := range vals2 {
			enc2 = e.AppendValue(enc2, v)
		}
		if !bytes.Equal(enc1, enc2) {
			t.Fatalf("encoding not stable:\n% X\n% X", enc1, enc2)
		}
	}
}

// consistentTags reports whether every struct tag has one field count.
func consistentTags(vs []Value, seen map[string]int) bool {
	for _, v := range vs {
		if v.Kind == KindStruct {
			if n, ok := seen[v.Tag]; ok && n != len(v.Items) {
				return false
			}
			seen[v.Tag] = len(v.Items)
		}
		if !consistentTags(v.Items, seen) {
			return false
		}
	}
	return true
}

// TestSeedCorpus keeps testdata/fuzz/FuzzDecode in step with seeds
// (go test -run TestSeedCorpus -update-seeds rewrites it).
func TestSeedCorpus(t *testing.T) {
	writeCorpus(t, "FuzzDecode", seeds(t))
}

func writeCorpus(t *testing.T, name string, inputs [][]byte) {
	dir := filepath.Join("testdata", "fuzz", name)
	if !*updateSeeds {
		if _, err := os.Stat(dir); err != nil {
			t.Fatalf("seed corpus missing (run with -update-seeds): %v", err)
		}
		return
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, in := range inputs {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", in)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
