package store

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/store/block"
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
		for i := range v.rows.len() {
			if _, err := v.body(ctx, v.rows.at(i)); err != nil {
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

// readHook is the store's bucket with a call before every read of a
// block's data object: a test's way to act while a compaction reads its
// blocks.
type readHook struct {
	objstore.Store
	onData func()
}

func (r readHook) Get(ctx context.Context, key string) ([]byte, error) {
	if strings.HasSuffix(key, block.DataName) {
		r.onData()
	}
	return r.Store.Get(ctx, key)
}

func (r readHook) GetRange(ctx context.Context, key string, off, n int64) ([]byte, error) {
	if strings.HasSuffix(key, block.DataName) {
		r.onData()
	}
	return r.Store.GetRange(ctx, key, off, n)
}

// TestCompactionLosesRole: a compaction under way when MayCompact turns
// false (the node lost partition 0's lease while it read the blocks)
// writes no block and deletes nothing, and says so without an error; the
// blocks a compaction replaced are deleted only while MayCompact says
// yes (the compactor of the moment deletes them otherwise).
func TestCompactionLosesRole(t *testing.T) {
	dir := t.TempDir()
	local, err := objstore.NewLocal(filepath.Join(dir, "bucket"))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	allowed, armed, reads := true, false, 0
	may := func() bool { mu.Lock(); defer mu.Unlock(); return allowed }
	set := func(a, arm bool) { mu.Lock(); allowed, armed = a, arm; mu.Unlock() }
	bucket := readHook{Store: local, onData: func() {
		mu.Lock()
		defer mu.Unlock()
		if armed {
			reads++
			allowed = false // the lease passed to another node
		}
	}}
	s := open(t, dir, Options{Bucket: bucket, MayCompact: may, ChunkSize: 512, HeadSize: 2 << 10, CompactBelow: 8 << 10, CompactTo: 32 << 10})
	const n = 60
	for i := range n {
		if _, err := s.Append([]*trace.Trace{mkTrace(i, "a", 2, int64(1000+i), 10, false)}); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, s)
	objects := func() []string {
		objs, err := local.List(context.Background(), block.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range objs {
			keys = append(keys, o.Key)
		}
		return keys
	}
	before := objects()
	if len(before) < 4 {
		t.Fatalf("%d objects, want several blocks to compact", len(before))
	}
	p := s.partition("a")
	p.mu.RLock()
	for _, b := range p.blocks {
		s.cache.dropPrefix(b.meta.ID + "/") // the compaction reads the bucket
	}
	p.mu.RUnlock()

	set(true, true)
	if m, err := s.Compact(); err != nil || m != 0 {
		t.Fatalf("compaction that lost its role: merged %d, %v; want 0 and no error", m, err)
	}
	mu.Lock()
	r := reads
	mu.Unlock()
	if r == 0 {
		t.Fatal("the compaction read no block: the test did not take the role away during it")
	}
	if d := cmp.Diff(before, objects()); d != "" {
		t.Fatalf("objects changed by a compaction that lost its role (-before +after):\n%s", d)
	}
	if page, err := s.Search(Query{Limit: 1000}); err != nil || len(page.Traces) != n {
		t.Fatalf("after it: %d traces, want %d (%v)", len(page.Traces), n, err)
	}

	// With the role: the compaction writes its block; the blocks it
	// replaced stay while the role is gone, and go once it is back.
	set(true, false)
	if m, err := s.Compact(); err != nil || m == 0 {
		t.Fatalf("compaction with the role: %d %v", m, err)
	}
	set(false, false)
	s.removeRetired(true)
	for _, k := range before {
		if !slices.Contains(objects(), k) {
			t.Fatalf("%s deleted by a store that is not the compactor", k)
		}
	}
	set(true, false)
	s.removeRetired(true)
	left := 0
	for _, k := range before {
		if slices.Contains(objects(), k) {
			left++
		}
	}
	if left == len(before) {
		t.Fatal("the compactor deleted none of the blocks its compaction replaced")
	}
	if page, err := s.Search(Query{Limit: 1000}); err != nil || len(page.Traces) != n {
		t.Fatalf("after the compaction: %d traces, want %d (%v)", len(page.Traces), n, err)
	}
}

// failingDeletes refuses every deletion while failing is set.
type failingDeletes struct {
	objstore.Store
	failing *atomic.Bool
}

func (f failingDeletes) Delete(ctx context.Context, key string) error {
	if f.failing.Load() {
		return errors.New("bucket away")
	}
	return f.Store.Delete(ctx, key)
}

// TestDeleteFailuresLoggedOnce: a bucket that refuses deletions while it
// is away (the end-to-end outage test saw one warning per replaced block)
// is logged once when deleting starts failing, through any number of
// compactions, and once when it works again; the blocks a failed
// deletion left are deleted later.
func TestDeleteFailuresLoggedOnce(t *testing.T) {
	dir := t.TempDir()
	local, err := objstore.NewLocal(filepath.Join(dir, "bucket"))
	if err != nil {
		t.Fatal(err)
	}
	var failing atomic.Bool
	var logs bytes.Buffer
	var logMu sync.Mutex
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: &logs, mu: &logMu}, nil))
	s := open(t, dir, Options{Bucket: failingDeletes{Store: local, failing: &failing}, Logger: logger,
		ChunkSize: 512, HeadSize: 2 << 10, CompactBelow: 8 << 10, CompactTo: 32 << 10})
	next := 0
	compact := func() {
		t.Helper()
		for range 60 {
			if _, err := s.Append([]*trace.Trace{mkTrace(next, "a", 2, int64(1000+next), 10, false)}); err != nil {
				t.Fatal(err)
			}
			next++
		}
		flush(t, s)
		if m, err := s.Compact(); err != nil || m == 0 {
			t.Fatalf("compaction: merged %d, %v; want some", m, err)
		}
		s.removeRetired(true)
	}
	count := func(msg string) int {
		logMu.Lock()
		defer logMu.Unlock()
		return strings.Count(logs.String(), msg)
	}
	failing.Store(true)
	for range 3 {
		compact()
	}
	if n := count("were not deleted"); n != 1 {
		t.Fatalf("deletions failing through 3 compactions logged %d times, want once:\n%s", n, logs.String())
	}
	failing.Store(false)
	compact()
	if n := count("deleting from the bucket works again"); n != 1 {
		t.Fatalf("the end of the failures logged %d times, want once:\n%s", n, logs.String())
	}
	if n := count("were not deleted"); n != 1 {
		t.Fatalf("failures logged %d times after they ended, want once", n)
	}
	if page, err := s.Search(Query{Limit: 1000}); err != nil || len(page.Traces) != next {
		t.Fatalf("%d traces, want %d (%v)", len(page.Traces), next, err)
	}
}

// lockedWriter serialises a log's writes for a test that reads it.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
