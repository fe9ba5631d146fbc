package block

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/trace"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// mem is a data object in memory, read by range as objstore would.
type mem map[string][]byte

func (m mem) GetRange(_ context.Context, key string, off, n int64) ([]byte, error) {
	p, ok := m[key]
	if !ok {
		return nil, fmt.Errorf("%s: no such object", key)
	}
	if off < 0 || n < 0 || off+n > int64(len(p)) {
		return nil, fmt.Errorf("%s: range %d+%d outside %d bytes", key, off, n, len(p))
	}
	return p[off : off+n], nil
}

// sampleTerms are trace i's terms in sample: a user of seven, a status
// code, every fifth a message, every ninth a value too long to keep whole,
// and a repeat.
func sampleTerms(i int) []Term {
	terms := []Term{{"user.id", fmt.Sprintf("user-%d", i%7)}, {"http.status_code", map[bool]string{true: "500", false: "200"}[i%4 == 1]}, {"user.id", fmt.Sprintf("user-%d", i%7)}}
	if i%5 == 0 {
		terms = append(terms, Term{"", "Connection Reset ü"})
	}
	if i%9 == 0 {
		terms = append(terms, Term{"db.statement", strings.Repeat("SELECT x FROM t ", 20) + fmt.Sprint(i)})
	}
	return terms
}

// sample writes a block of n traces with bodies "body-<i>" over a small
// dictionary, in pages of pageSize bytes, with sampleTerms.
func sample(t testing.TB, n, pageSize int) ([]byte, Stats, []Summary, []string) {
	dict := []string{"", "GET /", "web", "db", "host-a"}
	w := NewWriter(pageSize)
	var want []Summary
	for i := range n {
		s := Summary{ID: trace.ID{Hi: uint64(i % 3), Lo: uint64(1000 - i)}, Start: 1_700_000_000_000_000_000 + int64(i)*1000, Duration: int64(10 + i),
			Spans: uint32(1 + i%4), Errors: uint32(i % 2), Broken: i%5 == 0, Name: 1, Services: []uint32{2, 3}[:1+i%2], Hosts: []uint32{4}}
		w.Add(fmt.Appendf(nil, "body-%d", i), s, sampleTerms(i)...)
		want = append(want, s)
	}
	attrs := NewBloom(4)
	attrs.Add(HashString("k\x00v"))
	data, st, err := w.Finish(dict, attrs)
	if err != nil {
		t.Fatal(err)
	}
	return data, st, want, dict
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	data, st, want, dict := sample(t, 100, 64)
	if st.Traces != 100 || st.Size != int64(len(data)) || st.MinStart != want[0].Start || st.MaxEnd != want[99].Start+want[99].Duration {
		t.Fatalf("stats %+v", st)
	}
	r, err := Open(ctx, mem{"k": data}, "k", int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if r.FooterCRC != st.FooterCRC {
		t.Errorf("footer checksum %08x, writer said %08x", r.FooterCRC, st.FooterCRC)
	}
	rows, err := r.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	gotDict, _ := r.Dict(ctx)
	if !cmp.Equal(gotDict, dict) {
		t.Errorf("dictionary %q", gotDict)
	}
	pages, _ := r.Pages(ctx)
	if len(pages) < 10 {
		t.Errorf("%d pages of 64 bytes for 100 traces", len(pages))
	}
	// Every row finds its body; rows are sorted by id.
	seen := map[trace.ID]bool{}
	for i, row := range rows {
		if i > 0 && (rows[i-1].ID.Hi > row.ID.Hi || rows[i-1].ID.Hi == row.ID.Hi && rows[i-1].ID.Lo > row.ID.Lo) {
			t.Fatalf("rows out of order at %d", i)
		}
		bodies, err := r.Page(ctx, pages, int(row.Page))
		if err != nil {
			t.Fatal(err)
		}
		n := int(1000 - row.ID.Lo)
		if got := string(bodies[row.Index]); got != fmt.Sprintf("body-%d", n) {
			t.Fatalf("row %d (trace %d) reads %q", i, n, got)
		}
		w := want[n]
		w.Page, w.Index = row.Page, row.Index
		if d := cmp.Diff(w, row); d != "" {
			t.Fatalf("row of trace %d (-want +got):\n%s", n, d)
		}
		seen[row.ID] = true
	}
	if len(seen) != 100 {
		t.Errorf("%d distinct rows", len(seen))
	}
	attrs, _ := r.Attrs(ctx)
	if !attrs.Has(HashString("k\x00v")) {
		t.Error("attribute filter lost its pair")
	}
	ids, _ := r.IDs(ctx)
	misses := 0
	for i := range 1000 {
		if ids.Has(HashID(trace.ID{Hi: 99, Lo: uint64(i)})) {
			misses++
		}
	}
	if misses > 50 {
		t.Errorf("id filter: %d of 1000 absent ids pass", misses)
	}
}

// TestEmptyBlockAndNoFilter: a block without traces and without an
// attribute filter reads back (the empty filter holds everything).
func TestEmptyBlockAndNoFilter(t *testing.T) {
	ctx := context.Background()
	data, st, err := NewWriter(0).Finish([]string{""}, nil)
	if err != nil || st.Traces != 0 {
		t.Fatal(err, st)
	}
	r, err := Open(ctx, mem{"k": data}, "k", int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	if rows, err := r.Verify(ctx); err != nil || len(rows) != 0 {
		t.Fatal(rows, err)
	}
	if a, _ := r.Attrs(ctx); !a.Has(12345) {
		t.Error("an empty filter must hold everything")
	}
	if _, _, err := NewWriter(0).Finish([]string{"x"}, nil); err == nil {
		t.Error("a dictionary whose id 0 is not empty was accepted")
	}
}

// TestGolden: the bytes of a block are pinned; a block written by this
// version reads in every later one. block-v3.golden is what this version
// writes; block-v2.golden was written by version 2 (no term index) and
// must keep reading.
func TestGolden(t *testing.T) {
	data, _, want, _ := sample(t, 20, 128)
	path := filepath.Join("testdata", fmt.Sprintf("block-v%d.golden", Version))
	if *update {
		os.MkdirAll("testdata", 0o755)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	golden, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(golden, data) {
		t.Errorf("the block format changed: %s differs from what this version writes (run with -update only for a new format version)", path)
	}
	for v := MinVersion; v <= Version; v++ {
		path := filepath.Join("testdata", fmt.Sprintf("block-v%d.golden", v))
		golden, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		r, err := Open(ctx, mem{"g": golden}, "g", int64(len(golden)))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if r.Footer.Version != uint32(v) {
			t.Errorf("%s: version %d", path, r.Footer.Version)
		}
		rows, err := r.Verify(ctx)
		if err != nil || len(rows) != len(want) {
			t.Fatalf("%s: %d rows, %v", path, len(rows), err)
		}
		pages, _ := r.Pages(ctx)
		for _, row := range rows {
			bodies, err := r.Page(ctx, pages, int(row.Page))
			if err != nil {
				t.Fatal(err)
			}
			if n := int(1000 - row.ID.Lo); string(bodies[row.Index]) != fmt.Sprintf("body-%d", n) {
				t.Fatalf("%s: row of trace %d reads %q", path, n, bodies[row.Index])
			}
		}
		terms, err := r.Terms(ctx)
		if err != nil || (v >= 3) != (terms != nil) {
			t.Fatalf("%s: terms %v, %v", path, terms, err)
		}
	}
}

// TestCorruptionIsReported: every single-byte change of a block is either
// harmless (a byte no checksum covers: none but the header's) or reported
// as ErrCorrupt naming the block — never a panic, never wrong data.
func TestCorruptionIsReported(t *testing.T) {
	ctx := context.Background()
	data, _, _, _ := sample(t, 12, 100)
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x41
		r, err := Open(ctx, mem{"blk": bad}, "blk", int64(len(bad)))
		if err == nil {
			_, err = r.Verify(ctx)
		}
		if i < HeaderSize {
			continue // the header is checked by nothing but a human's eye
		}
		if err == nil {
			t.Fatalf("byte %d changed: not noticed", i)
		}
		if !errors.Is(err, ErrCorrupt) || !bytes.Contains([]byte(err.Error()), []byte("block blk")) {
			t.Fatalf("byte %d changed: %v (want ErrCorrupt naming the block)", i, err)
		}
	}
	// Cut short anywhere.
	for n := range len(data) {
		if _, err := Open(ctx, mem{"blk": data[:n]}, "blk", int64(n)); err == nil {
			r, _ := Open(ctx, mem{"blk": data[:n]}, "blk", int64(n))
			if _, err := r.Verify(ctx); err == nil {
				t.Fatalf("cut to %d bytes: not noticed", n)
			}
		}
	}
}

func TestMeta(t *testing.T) {
	data, st, _, _ := sample(t, 5, 0)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	m := &Meta{Version: Version, ID: NewID(now), Host: "web/1 ü", Created: now, MinStart: st.MinStart, MaxEnd: st.MaxEnd,
		Traces: st.Traces, Spans: st.Spans, Size: st.Size, FooterCRC: st.FooterCRC,
		Services: []MetaService{{Name: "web", ViaService: true, Operations: []MetaOp{{Name: "GET /", Kind: 2}}}}}
	p, err := MarshalMeta(m)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseMeta(p)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(m, got); d != "" {
		t.Errorf("meta (-want +got):\n%s", d)
	}
	r, _ := Open(context.Background(), mem{"k": data}, "k", int64(len(data)))
	if err := got.Matches(r.Size(), r.Footer, r.FooterCRC); err != nil {
		t.Error(err)
	}
	other, _, _, _ := sample(t, 6, 0)
	r2, _ := Open(context.Background(), mem{"k": other}, "k", int64(len(other)))
	if err := got.Matches(r2.Size(), r2.Footer, r2.FooterCRC); err == nil {
		t.Error("a meta matched another block's data")
	}
	// Keys.
	dir := Dir(m.Host, m.ID)
	host, id, name, ok := ParseKey(dir + MetaName)
	if !ok || host != m.Host || id != m.ID || name != MetaName {
		t.Errorf("ParseKey(%q) = %q %q %q %v", dir+MetaName, host, id, name, ok)
	}
	for _, k := range []string{"blocks/x/123/data", "blocks/x/" + m.ID + "/other", "other/x/" + m.ID + "/data", "blocks/%zz/" + m.ID + "/data"} {
		if _, _, _, ok := ParseKey(k); ok {
			t.Errorf("ParseKey(%q) accepted", k)
		}
	}
	if a, b := NewID(now), NewID(now.Add(time.Millisecond)); a >= b {
		t.Errorf("ids do not sort by creation: %s, %s", a, b)
	}
	for _, bad := range []string{`{}`, `{"version":2,"id":"x","host":"h","size":200}`, `not json`} {
		if _, err := ParseMeta([]byte(bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("ParseMeta(%s): %v", bad, err)
		}
	}
}

func TestHashPair(t *testing.T) {
	for _, kv := range [][2]string{{"", ""}, {"k", "v"}, {"http.route", "/api/orders/{id}"}, {"", "x"}, {"key", ""}} {
		if got, want := HashPair(kv[0], kv[1]), HashString(kv[0]+"\x00"+kv[1]); got != want {
			t.Errorf("HashPair(%q, %q) = %x, want %x", kv[0], kv[1], got, want)
		}
	}
}

// TestPagesAcrossSegments: pages that fill several of the Writer's
// segments (incompressible bodies, 3 MiB compressed, pages of 64 KiB,
// some larger than a segment) read back where the page table says, and
// the block's size is its bytes.
func TestPagesAcrossSegments(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	w := NewWriter(64 << 10)
	var bodies [][]byte
	for i := range 1600 {
		n := 2000
		if i%400 == 399 {
			n = segSize + 1000 // a page larger than a segment
		}
		body := make([]byte, n)
		for j := range body {
			body[j] = byte(rng.Uint32())
		}
		bodies = append(bodies, body)
		w.Add(body, Summary{ID: trace.ID{Lo: uint64(i + 1)}, Start: int64(i), Duration: 1, Spans: 1})
	}
	data, st, err := w.Finish([]string{""}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size != int64(len(data)) || len(data) < 3<<20 {
		t.Fatalf("size %d, stats %d", len(data), st.Size)
	}
	r, rows := openVerified(t, data)
	pages, _ := r.Pages(ctx)
	for _, row := range rows {
		got, err := r.Page(ctx, pages, int(row.Page))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[row.Index], bodies[row.ID.Lo-1]) {
			t.Fatalf("trace %d: body differs", row.ID.Lo)
		}
	}
}

// openVerified opens the block data and verifies it, returning its rows.
func openVerified(t *testing.T, data []byte) (*Reader, []Summary) {
	t.Helper()
	ctx := context.Background()
	r, err := Open(ctx, mem{"k": data}, "k", int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	rows, err := r.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r, rows
}

// TestWriterHintsSameBytes: the room a Writer is told to make (Grow,
// GrowTerms: right, too little, too much), and reading the rows where the
// caller keeps them (ReadRows), change none of the block's bytes.
func TestWriterHintsSameBytes(t *testing.T) {
	const n, pageSize = 300, 512
	dict := []string{"", "GET /", "web", "db", "host-a"}
	build := func(hint func(w *Writer)) []byte {
		w := NewWriter(pageSize)
		hint(w)
		for i := range n {
			s := Summary{ID: trace.ID{Hi: uint64(i % 3), Lo: uint64(1000 - i)}, Start: int64(i) * 1000, Duration: int64(10 + i), Spans: 2, Name: 1, Services: []uint32{2}}
			w.Add(fmt.Appendf(nil, "body-%d-%s", i, strings.Repeat("x", i%50)), s, sampleTerms(i)...)
		}
		data, st, err := w.Finish(dict, nil)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size != int64(len(data)) {
			t.Fatalf("size %d, stats %d", len(data), st.Size)
		}
		openVerified(t, data)
		return data
	}
	want := build(func(*Writer) {})
	for name, hint := range map[string]func(w *Writer){
		"right":      func(w *Writer) { w.Grow(n); w.GrowTerms(20) },
		"too much":   func(w *Writer) { w.Grow(10 * n); w.GrowTerms(4000) },
		"too little": func(w *Writer) { w.Grow(1); w.GrowTerms(1) },
		// The rows read where the caller keeps them (ReadRows), with
		// Page and Index of their own (a cut head's), not copied.
		"rows read": func(w *Writer) {
			rows := make([]Summary, n)
			for i := range rows {
				rows[i] = Summary{ID: trace.ID{Hi: uint64(i % 3), Lo: uint64(1000 - i)}, Start: int64(i) * 1000, Duration: int64(10 + i), Spans: 2, Name: 1, Services: []uint32{2},
					Page: uint32(7 * i), Index: uint32(i)}
			}
			w.ReadRows(func(i int) *Summary { return &rows[i] })
			w.Grow(n)
		},
	} {
		if got := build(hint); !bytes.Equal(got, want) {
			t.Errorf("%s: the block differs (%d bytes, want %d)", name, len(got), len(want))
		}
	}
}
