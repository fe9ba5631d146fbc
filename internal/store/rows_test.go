package store

import (
	"sync"
	"testing"

	"github.com/tracebridge/tracebridge/internal/store/block"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestRowList: rows appended across many segments read back in order,
// and a snapshot taken while the list grows (as a search's view of a
// head) reads its rows while the appender goes on (under -race: the
// appender never writes what a snapshot reads).
func TestRowList(t *testing.T) {
	const n = 5<<rowSegShift + 123
	row := func(i int) block.Summary { return block.Summary{ID: trace.ID{Lo: uint64(i)}, Start: int64(i)} }
	var (
		mu    sync.Mutex
		l     rowList
		snaps = make(chan rowList, 64)
	)
	go func() {
		defer close(snaps)
		for i := range n {
			mu.Lock()
			l.append(row(i))
			mu.Unlock()
			if i%700 == 0 || i == 15 || i == 16 || i == 1<<rowSegShift {
				mu.Lock()
				snaps <- l.snapshot()
				mu.Unlock()
			}
		}
	}()
	seen := 0
	for s := range snaps {
		seen++
		for i := range s.len() {
			if r := s.at(i); r.ID.Lo != uint64(i) || r.Start != int64(i) {
				t.Fatalf("snapshot of %d rows: row %d holds %d", s.len(), i, r.ID.Lo)
			}
		}
	}
	if l.len() != n || seen < 10 {
		t.Fatalf("%d rows, %d snapshots", l.len(), seen)
	}
	for i := range n {
		if l.at(i).ID.Lo != uint64(i) {
			t.Fatalf("row %d holds %d", i, l.at(i).ID.Lo)
		}
	}
	if len(l.segs) != n>>rowSegShift+1 {
		t.Errorf("%d segments for %d rows", len(l.segs), n)
	}
	if !l.contains(func(r *block.Summary) bool { return r.Start == n-1 }) || l.contains(func(r *block.Summary) bool { return r.Start == n }) {
		t.Error("contains")
	}

	rows := make([]block.Summary, 3*n)
	for i := range rows {
		rows[i] = row(i)
	}
	b := blockRows(rows)
	if b.len() != len(rows) || b.at(len(rows)-1).ID.Lo != uint64(len(rows)-1) || b.at(n).Start != n {
		t.Errorf("a block's rows: %d", b.len())
	}
	if e := blockRows(nil); e.len() != 0 {
		t.Errorf("no rows: %d", e.len())
	}
}
