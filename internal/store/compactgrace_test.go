package store

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestCompactionSparesRunningSearches: a search that chose its blocks
// before a compaction still reads them whole (the end-to-end kill test
// lost traces to "not found" while compaction deleted them under a
// search): the replaced blocks leave the listing at once — a reader sees
// every trace once — but their objects go only after a grace, or at
// Close.
func TestCompactionSparesRunningSearches(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{ChunkSize: 512, HeadSize: 2 << 10, CompactBelow: 8 << 10, CompactTo: 32 << 10})
	if err != nil {
		t.Fatal(err)
	}
	const n = 60
	for i := range n {
		if _, err := s.Append([]*trace.Trace{mkTrace(i, "a", 2, int64(1000+i), 10, false)}); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, s)
	p := s.partition("a")
	p.mu.RLock()
	old := slices.Clone(p.blocks)
	p.mu.RUnlock()
	if len(old) < 2 {
		t.Fatalf("%d blocks, want several to compact", len(old))
	}
	if m, err := s.Compact(); err != nil || m == 0 {
		t.Fatalf("compaction: %d %v", m, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, b := range old {
		s.cache.dropPrefix(b.meta.ID + "/") // read the objects, not the cache
		v, err := s.blockView(ctx, p, b)
		if err != nil {
			t.Fatalf("a replaced block, right after the compaction: %v", err)
		}
		for i := range v.rows {
			if _, err := v.body(ctx, &v.rows[i]); err != nil {
				t.Fatalf("a replaced block's trace, right after the compaction: %v", err)
			}
		}
	}
	r := open(t, dir, Options{ReadOnly: true})
	page, err := r.Search(Query{Limit: 1000})
	if err != nil || len(page.Traces) != n {
		t.Fatalf("a reader beside the writer: %d traces, want %d once each (%v)", len(page.Traces), n, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, b := range old {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(b.key))); !os.IsNotExist(err) {
			t.Errorf("replaced block %s still there after Close: %v", b.meta.ID, err)
		}
	}
}
