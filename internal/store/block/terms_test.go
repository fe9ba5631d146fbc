package block

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

// TestTermIndex: every trace is listed under each of its terms once, in
// the index's row numbers, and nowhere else; a value too long to keep
// whole is found by its first MaxTermValue bytes.
func TestTermIndex(t *testing.T) {
	ctx := context.Background()
	const n = 300
	data, _, _, _ := sample(t, n, 200)
	r, rows := openVerified(t, data)
	terms, err := r.Terms(ctx)
	if err != nil || terms == nil {
		t.Fatal(terms, err)
	}
	// What the index should say: term → the rows (by trace number i,
	// from the body) that hold it.
	want := map[Term][]uint32{}
	for ri, row := range rows {
		i := int(1000 - row.ID.Lo)
		seen := map[Term]bool{}
		for _, tm := range sampleTerms(i) {
			if len(tm.Value) > MaxTermValue {
				tm.Value = tm.Value[:MaxTermValue] + "…" // truncated
			}
			if !seen[tm] {
				seen[tm] = true
				want[tm] = append(want[tm], uint32(ri))
			}
		}
	}
	got := map[Term][]uint32{}
	for i := range terms.Len() {
		key, value, trunc := terms.Term(i)
		tm := Term{key, string(value)}
		if trunc {
			tm.Value += "…"
		}
		terms.Rows(i, func(row uint32) { got[tm] = append(got[tm], row) })
		if terms.Count(i) != len(got[tm]) {
			t.Errorf("term %q: count %d, %d rows", tm, terms.Count(i), len(got[tm]))
		}
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("term index (-want +got):\n%s", d)
	}
	// Lookups.
	for _, c := range []struct {
		key, value string
		rows       int
	}{
		{"user.id", "user-3", 43},
		{"user.id", "user-9", -1},
		{"nope", "user-3", -1},
		{"http.status_code", "500", 75},
		{"", "Connection Reset ü", 60},
		{"db.statement", strings.Repeat("SELECT x FROM t ", 20) + "9", 34}, // every ninth: one truncated term
		{"db.statement", strings.Repeat("SELECT x FROM t ", 16), -1},       // exactly the kept bytes, not truncated: no such value
	} {
		i, ok := terms.Lookup(c.key, c.value)
		switch {
		case c.rows < 0 && ok:
			t.Errorf("Lookup(%q, %.20q) found term %d", c.key, c.value, i)
		case c.rows >= 0 && !ok:
			t.Errorf("Lookup(%q, %.20q) found nothing", c.key, c.value)
		case ok && terms.Count(i) != c.rows:
			t.Errorf("Lookup(%q, %.20q): %d rows, want %d", c.key, c.value, terms.Count(i), c.rows)
		}
	}
	if first, next := terms.Key("user.id"); next-first != 7 {
		t.Errorf("user.id: %d terms", next-first)
	}
	if terms.Size() <= 0 {
		t.Error("size")
	}
}

// termSection makes a term index section (stored bytes) and its footer
// from raw bytes, as a writer would.
func termSection(raw []byte, traces uint32) (Footer, []byte) {
	stored := binary32(uint32(len(raw)))
	stored = compress(stored, raw)
	f := Footer{Version: 3, Traces: traces, Terms: Section{Off: 8, Len: uint32(len(stored)), CRC: crc32.Checksum(stored, castagnoli)}}
	return f, stored
}

func binary32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

// TestTermIndexCorrupt: term indexes that break a rule are reported, not
// read.
func TestTermIndexCorrupt(t *testing.T) {
	good := (&termSet{}).appendTerms(nil, nil)
	if f, stored := termSection(good, 0); true {
		if tm, err := f.ParseTerms(stored); err != nil || tm.Len() != 0 {
			t.Fatalf("an empty term index: %v %v", tm, err)
		}
	}
	for name, raw := range map[string][]byte{
		"keys out of order":    {2, 1, 'b', 1, 2, 'x', 1, 0, 1, 'a', 1, 2, 'x', 1, 0},
		"row beyond the index": {1, 1, 'a', 1, 2, 'x', 1, 5},
		"rows out of order":    {1, 1, 'a', 1, 2, 'x', 2, 1, 0},
		"values out of order":  {1, 1, 'a', 2, 2, 'y', 1, 0, 2, 'x', 1, 0},
		"key without terms":    {1, 1, 'a', 0},
		"no rows":              {1, 1, 'a', 1, 2, 'x', 0},
		"short truncated":      {1, 1, 'a', 1, 3, 'x', 1, 0},
		"trailing bytes":       {1, 1, 'a', 1, 2, 'x', 1, 0, 0},
		"cut short":            {1, 1, 'a', 1, 2, 'x', 1},
		"huge count":           {1, 1, 'a', 0xff, 0xff, 0xff, 0xff, 0x0f},
	} {
		f, stored := termSection(raw, 3)
		if _, err := f.ParseTerms(stored); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Version 2 has none.
	if tm, err := (Footer{Version: 2}).ParseTerms(nil); tm != nil || err != nil {
		t.Errorf("version 2: %v %v", tm, err)
	}
}

// FuzzParseTerms: any bytes as a term index (compressed and checksummed
// as a writer would, so that the fuzzer reaches the parser) are read or
// reported; what reads keeps the index's promises.
func FuzzParseTerms(f *testing.F) {
	var ts termSet
	for i := range 12 {
		ts.add(sampleTerms(i))
	}
	perm := make([]uint32, 12)
	for i := range perm {
		perm[i] = uint32(11 - i)
	}
	f.Add(ts.appendTerms(nil, perm), uint32(12))
	f.Add([]byte{1, 1, 'a', 1, 2, 'x', 2, 1, 1}, uint32(3))
	f.Add([]byte{0}, uint32(0))
	f.Fuzz(func(t *testing.T, raw []byte, traces uint32) {
		footer, stored := termSection(raw, traces)
		tm, err := footer.ParseTerms(stored)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("not ErrCorrupt: %v", err)
			}
			return
		}
		for i := range tm.Len() {
			key, value, trunc := tm.Term(i)
			var rows []uint32
			tm.Rows(i, func(r uint32) { rows = append(rows, r) })
			if len(rows) != tm.Count(i) || len(rows) == 0 || !slices.IsSorted(rows) || rows[len(rows)-1] >= traces {
				t.Fatalf("term %d: rows %v of %d traces", i, rows, traces)
			}
			if trunc {
				if len(value) != MaxTermValue {
					t.Fatalf("term %d: truncated at %d bytes", i, len(value))
				}
				continue
			}
			if j, ok := tm.Lookup(key, string(value)); !ok || j != i {
				t.Fatalf("term %d (%q=%q) looked up: %d %v", i, key, value, j, ok)
			}
		}
		// Written again from what was read, it reads the same (the bytes
		// may differ: a varint may have been written longer than needed).
		if traces > 1<<16 {
			return
		}
		list := func(tm *Terms) []string {
			var out []string
			for i := range tm.Len() {
				key, value, trunc := tm.Term(i)
				s := fmt.Sprintf("%q=%q %v:", key, value, trunc)
				tm.Rows(i, func(r uint32) { s += fmt.Sprint(" ", r) })
				out = append(out, s)
			}
			return out
		}
		var again termSet
		perRow := make([][]Term, traces)
		for i := range tm.Len() {
			key, value, trunc := tm.Term(i)
			v := string(value)
			if trunc {
				v += "+"
			}
			tm.Rows(i, func(r uint32) { perRow[r] = append(perRow[r], Term{key, v}) })
		}
		ident := make([]uint32, traces)
		for i := range perRow {
			again.add(perRow[i])
			ident[i] = uint32(i)
		}
		f2, stored2 := termSection(again.appendTerms(nil, ident), traces)
		tm2, err := f2.ParseTerms(stored2)
		if err != nil {
			t.Fatalf("written again: %v", err)
		}
		if d := cmp.Diff(list(tm), list(tm2)); d != "" {
			t.Fatalf("written again (-read +again):\n%s", d)
		}
	})
}

func ExampleTerms_Lookup() {
	var ts termSet
	ts.add([]Term{{"user.id", "u1"}})
	ts.add([]Term{{"user.id", "u2"}, {"http.status_code", "500"}})
	ts.add([]Term{{"user.id", "u1"}})
	f, stored := termSection(ts.appendTerms(nil, []uint32{0, 1, 2}), 3)
	tm, _ := f.ParseTerms(stored)
	i, _ := tm.Lookup("user.id", "u1")
	tm.Rows(i, func(r uint32) { fmt.Print(r, " ") })
	// Output: 0 2
}

// TestTermSetMany: thousands of terms (unique values, repeats within and
// across rows, several keys, values cut at MaxTermValue, a value equal
// to another's first MaxTermValue bytes) are each listed under exactly
// the rows that hold them, in the index's order (the set's table grows
// many times; the rows' term lists span several of termIDs' segments,
// one row more than a whole segment).
func TestTermSetMany(t *testing.T) {
	const rows = 8000
	long := strings.Repeat("x", MaxTermValue)
	rowTerms := func(i int) []Term {
		ts := []Term{
			{Key: "url.path", Value: fmt.Sprintf("/api/orders/%d", i)}, // unique
			{Key: "http.method", Value: []string{"GET", "POST"}[i%2]},  // shared
			{Key: "http.method", Value: []string{"GET", "POST"}[i%2]},  // twice in a row
			{Key: "user", Value: fmt.Sprintf("u%d", i%97)},
			{Value: fmt.Sprintf("message %d", i%13)}, // a status message: key ""
		}
		if i%5 == 0 {
			ts = append(ts, Term{Key: "stmt", Value: long + fmt.Sprint(i%3)}) // truncated
		}
		if i%7 == 0 {
			ts = append(ts, Term{Key: "stmt", Value: long}) // whole, equal to the truncated ones' bytes
		}
		if i == rows/2 {
			for j := range termSeg + 100 {
				ts = append(ts, Term{Key: "big", Value: fmt.Sprint(j)})
			}
		}
		return ts
	}
	var ts termSet
	for i := range rows {
		ts.add(rowTerms(i))
	}
	perm := make([]uint32, rows) // index row r is Add-order row rows-1-r
	for r := range perm {
		perm[r] = uint32(rows - 1 - r)
	}
	footer, stored := termSection(ts.appendTerms(nil, perm), rows)
	tm, err := footer.ParseTerms(stored)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		k, v  string
		trunc bool
	}
	want := map[key][]uint32{}
	for r := range rows {
		i := int(perm[r])
		seen := map[key]bool{}
		for _, x := range rowTerms(i) {
			k := key{x.Key, x.Value, false}
			if len(k.v) > MaxTermValue {
				k.v, k.trunc = k.v[:MaxTermValue], true
			}
			if !seen[k] {
				seen[k] = true
				want[k] = append(want[k], uint32(r))
			}
		}
	}
	got := map[key][]uint32{}
	for i := range tm.Len() {
		k, v, trunc := tm.Term(i)
		x := key{k, string(v), trunc}
		tm.Rows(i, func(r uint32) { got[x] = append(got[x], r) })
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("term index (-want +got):\n%s", diff)
	}
	if len(want) < 3000 {
		t.Errorf("%d terms: the test wants thousands", len(want))
	}
	if ts.rowTerms.n < 2*termSeg {
		t.Errorf("%d rows' terms: the test wants several segments", ts.rowTerms.n)
	}
}

// TestTermSetKeyBytesReused: a key whose bytes the caller writes again
// (the same address, another key) is found by its content, not by its
// address (termSet.key remembers keys by address).
func TestTermSetKeyBytesReused(t *testing.T) {
	buf := []byte("aaaa")
	key := unsafe.String(&buf[0], len(buf))
	var ts termSet
	ts.add([]Term{{Key: key, Value: "1"}})
	copy(buf, "bbbb")
	ts.add([]Term{{Key: key, Value: "1"}})
	copy(buf, "aaaa")
	ts.add([]Term{{Key: key, Value: "1"}, {Key: "aaaa", Value: "1"}})
	footer, stored := termSection(ts.appendTerms(nil, []uint32{0, 1, 2}), 3)
	tm, err := footer.ParseTerms(stored)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]uint32{}
	for i := range tm.Len() {
		k, v, _ := tm.Term(i)
		tm.Rows(i, func(r uint32) { got[k+"="+string(v)] = append(got[k+"="+string(v)], r) })
	}
	want := map[string][]uint32{"aaaa=1": {0, 2}, "bbbb=1": {1}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("term index (-want +got):\n%s", diff)
	}
	if size := unsafe.Sizeof(termEnt{}); size != 24 {
		t.Errorf("a term entry takes %d bytes, want 24 (its row fits in the padding)", size)
	}
}
