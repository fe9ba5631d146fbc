package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tracebridge/tracebridge/internal/hostdb"
	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/store/block"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// setMaxAge bounds a host's partition in the host table.
func setMaxAge(t *testing.T, hosts *hostdb.DB, name string, d time.Duration) {
	t.Helper()
	if _, err := hosts.Update(name, func(h *hostdb.Host) error { h.MaxAge = d; return nil }); err != nil {
		t.Fatal(err)
	}
}

func flush(t *testing.T, s *Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func blocksOf(s *Store, host string) int {
	p := s.partition(host)
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.blocks)
}

// TestRecoversTornWriteAhead: traces synced to the write-ahead area are
// found after a crash (no Close), cut into blocks at the next open; a torn
// chunk at the end is cut off and reported; nothing is found twice.
func TestRecoversTornWriteAhead(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{ChunkSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.Append([]*trace.Trace{mkTrace(i, "h", 2, int64(10+i), 5, false)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	// A crash: the process ends without Close; a chunk was half written.
	p := s.partition("h")
	path := p.head.path
	s.cancel()
	s.uploadWG.Wait()
	p.head.close()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("TBK1\x00\x00\x01\x00garbage of a torn chunk"))
	f.Close()

	s2 := open(t, dir, Options{})
	rec := s2.Recovery()
	if rec.Traces != 5 || len(rec.Truncated) != 1 || !strings.Contains(rec.Truncated[0], path) {
		t.Fatalf("recovery %+v", rec)
	}
	flush(t, s2)
	if blocksOf(s2, "h") != 1 {
		t.Fatalf("%d blocks after recovery, want the write-ahead file's one", blocksOf(s2, "h"))
	}
	page, _ := s2.Search(Query{Limit: 100})
	if len(page.Traces) != 5 {
		t.Fatalf("%d traces after recovery, want 5", len(page.Traces))
	}
	s2.Close()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the write-ahead file stays after its upload: %v", err)
	}
	if res, err := Check(dir, Options{}); err != nil || len(res.Problems) != 0 || res.Traces != 5 || res.Blocks != 1 {
		t.Fatalf("check after recovery: %+v %v", res, err)
	}
}

// TestUploadedBlockIsNotReplayed: a crash after a block's upload but
// before its write-ahead file was deleted duplicates nothing.
func TestUploadedBlockIsNotReplayed(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	if _, err := s.Append([]*trace.Trace{mkTrace(1, "h", 3, 100, 5, false)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	h := s.partition("h").head
	saved, err := os.ReadFile(h.path)
	if err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	s.Close()
	// The file comes back, as if the process died before deleting it.
	if err := os.WriteFile(h.path, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, dir, Options{})
	if n, _ := s2.Count(); n != 1 {
		t.Fatalf("%d traces, want 1", n)
	}
	if _, err := os.Stat(h.path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the uploaded block's write-ahead file was not deleted: %v", err)
	}
}

func TestRetentionDropsOldestBlocks(t *testing.T) {
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	hosts := openHosts(t, func() time.Time { return now })
	s := open(t, t.TempDir(), Options{ChunkSize: 1, HeadSize: 1, Hosts: tableOf(hosts), Now: func() time.Time { return now }})
	for i := range 10 {
		start := now.Add(time.Duration(i-10) * time.Hour).UnixNano()
		if _, err := s.Append([]*trace.Trace{mkTrace(i, "h", 2, start, 1000, false)}); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, s)
	if b := blocksOf(s, "h"); b != 10 {
		t.Fatalf("%d blocks, want one a trace", b)
	}
	setMaxAge(t, hosts, "h", 3*time.Hour+time.Minute)
	n, err := s.Retain()
	if err != nil {
		t.Fatal(err)
	}
	count, _ := s.Count()
	if n != 7 || count != 3 {
		t.Fatalf("dropped %d blocks, %d traces left", n, count)
	}
	p, _ := s.Search(Query{Oldest: true})
	if len(p.Traces) != 3 || p.Traces[0].TraceID != (trace.ID{Hi: 7, Lo: 8}).String() {
		t.Fatalf("left: %+v", p.Traces)
	}
	s.opt.MaxSize = s.HostSize("h") - 1
	if n, err := s.Retain(); err != nil || n < 1 {
		t.Fatalf("size retention: %d %v", n, err)
	}
	if _, err := s.Get(trace.ID{Hi: 7, Lo: 8}); err != ErrNotFound {
		t.Fatalf("oldest still there: %v", err)
	}
}

// TestRetentionCompactionThenRebuild: after retention and compaction ran,
// the blocks alone hold everything: check finds nothing wrong, rebuild
// changes nothing, and every trace retention kept is found (the store of
// version 1 lost them: a segment needed the symbols of one retention had
// deleted).
func TestRetentionCompactionThenRebuild(t *testing.T) {
	dir := t.TempDir()
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	hosts := openHosts(t, clock)
	o := Options{ChunkSize: 512, HeadSize: 2 << 10, CompactBelow: 8 << 10, CompactTo: 32 << 10, Hosts: tableOf(hosts), Now: clock}
	s, err := Open(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	var all []*trace.Trace
	for i := range 300 {
		start := now.Add(time.Duration(i-300) * time.Minute).UnixNano()
		all = append(all, mkTrace(i, []string{"a", "b"}[i%2], 1+i%4, start, int64(1000+i), i%7 == 0))
	}
	for _, tr := range all {
		if _, err := s.Append([]*trace.Trace{tr}); err != nil {
			t.Fatal(err)
		}
	}
	flush(t, s)
	before := blocksOf(s, "a") + blocksOf(s, "b")
	setMaxAge(t, hosts, "a", 2*time.Hour)
	if n, err := s.Retain(); err != nil || n == 0 {
		t.Fatalf("retention: %d %v", n, err)
	}
	if n, err := s.Compact(); err != nil || n == 0 {
		t.Fatalf("compaction: %d %v", n, err)
	}
	after := blocksOf(s, "a") + blocksOf(s, "b")
	if after >= before/2 {
		t.Fatalf("%d blocks before, %d after compaction", before, after)
	}
	var kept []*trace.Trace
	for _, tr := range all {
		if _, err := s.Get(tr.ID); err == nil {
			kept = append(kept, tr)
		}
	}
	if len(kept) < 150+50 || len(kept) >= 300 {
		t.Fatalf("%d traces kept of 300", len(kept))
	}
	s.Close()
	res, err := Rebuild(dir, o)
	if err != nil || len(res.Problems) != 0 || len(res.Repaired) != 0 || res.Traces != len(kept) {
		t.Fatalf("rebuild: %+v %v", res, err)
	}
	s2 := open(t, dir, Options{ReadOnly: true})
	for _, tr := range kept {
		got, err := s2.Get(tr.ID)
		if err != nil {
			t.Fatalf("trace %s after rebuild: %v", tr.ID, err)
		}
		if d := cmp.Diff(tr, got, cmpopts.IgnoreUnexported(trace.Span{})); d != "" {
			t.Fatalf("trace %s (-want +got):\n%s", tr.ID, d)
		}
	}
}

// TestTraceInPartsIsOneTrace: a trace whose spans arrive in three parts,
// each in a block of its own (three windows apart), is one search row and
// one trace by id with every span, not broken; compaction merges the
// parts for good.
func TestTraceInPartsIsOneTrace(t *testing.T) {
	s := open(t, t.TempDir(), Options{CompactBelow: 1 << 20})
	whole := mkTrace(1, "web", 6, 1_000_000, 500, false)
	// Part one: the root and a child; then two children; then two more.
	cuts := [][2]int{{0, 2}, {2, 4}, {4, 6}}
	for _, c := range cuts {
		part := &trace.Trace{ID: whole.ID, Spans: slices.Clone(whole.Spans[c[0]:c[1]])}
		for i := range part.Spans {
			if part.Spans[i].ParentID != 0 && c[0] > 0 {
				part.Spans[i].Parent = -1 // its parent is in another part
			}
		}
		if c[0] > 0 {
			part.Broken = []string{"span 0000000000000003 (SELECT): parent 0000000000000001 missing"}
		}
		if _, err := s.Append([]*trace.Trace{part}); err != nil {
			t.Fatal(err)
		}
		flush(t, s) // each part in a block of its own
	}
	other := mkTrace(2, "web", 1, 2_000_000, 5, false)
	s.Append([]*trace.Trace{other})
	// The first part's partition is its root's host; the others' (no
	// root) their first span's.
	if b := blocksOf(s, "web") + blocksOf(s, "db"); b != 3 {
		t.Fatalf("%d blocks, want 3", b)
	}
	check := func(when string) {
		t.Helper()
		p, err := s.Search(Query{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, x := range p.Traces {
			ids = append(ids, x.TraceID)
		}
		if !slices.Equal(ids, []string{other.ID.String(), whole.ID.String()}) {
			t.Fatalf("%s: rows %v", when, ids)
		}
		if x := p.Traces[1]; x.Spans != 6 || x.Broken || x.Duration != whole.Duration() {
			t.Fatalf("%s: the parted trace's row %+v", when, x)
		}
		got, err := s.Get(whole.ID)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Spans) != 6 || len(got.Broken) != 0 {
			t.Fatalf("%s: Get: %d spans, broken %q", when, len(got.Spans), got.Broken)
		}
		if d := cmp.Diff(whole.Spans, got.Spans, cmpopts.IgnoreUnexported(trace.Span{})); d != "" {
			t.Fatalf("%s: spans (-want +got):\n%s", when, d)
		}
	}
	check("three parts")
	if n, err := s.Compact(); err != nil || n != 1 {
		t.Fatalf("compaction merged %d blocks, %v", n, err)
	}
	check("compacted")
}

// TestReaderBesideWriter: a read-only store opened while a writer runs
// sees what the writer synced (its write-ahead files) and uploaded, and
// follows it.
func TestReaderBesideWriter(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{})
	w.Append([]*trace.Trace{mkTrace(1, "h", 2, 100, 5, false)})
	w.Sync()
	var mu sync.Mutex
	now := time.Now()
	r := open(t, dir, Options{ReadOnly: true, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	if _, err := r.Get(trace.ID{Hi: 7, Lo: 2}); err != nil {
		t.Fatalf("the reader misses a synced trace: %v", err)
	}
	w.Append([]*trace.Trace{mkTrace(2, "h", 2, 200, 5, false), mkTrace(3, "g", 1, 300, 5, false)})
	w.Sync()
	flush(t, w)
	w.Append([]*trace.Trace{mkTrace(4, "h", 2, 400, 5, false)})
	w.Sync()
	mu.Lock()
	now = now.Add(2 * time.Second)
	mu.Unlock()
	for i := 1; i <= 4; i++ {
		if _, err := r.Get(trace.ID{Hi: 7, Lo: uint64(i + 1)}); err != nil {
			t.Fatalf("the reader misses trace %d: %v", i, err)
		}
	}
	if p, _ := r.Search(Query{Limit: 10}); len(p.Traces) != 4 {
		t.Fatalf("the reader lists %d traces, want 4", len(p.Traces))
	}
	if _, err := r.Append([]*trace.Trace{mkTrace(9, "h", 1, 1, 1, false)}); err != ErrClosed {
		t.Fatalf("a reader appended: %v", err)
	}
}

// TestCorruptBlockIsReported: a flipped byte in a block's data is found
// by check, named; the other blocks stay readable.
func TestCorruptBlockIsReported(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	s.Append([]*trace.Trace{mkTrace(1, "a", 3, 100, 5, false)})
	s.Append([]*trace.Trace{mkTrace(2, "b", 3, 200, 5, false)})
	flush(t, s)
	key := s.partition("a").blocks[0].key
	s.Close()
	path := filepath.Join(dir, filepath.FromSlash(key))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0xff
	os.WriteFile(path, b, 0o644)
	res, err := Check(dir, Options{})
	if err != nil || len(res.Problems) != 1 || !strings.Contains(res.Problems[0], key) {
		t.Fatalf("check of a flipped byte: %+v %v", res, err)
	}
	s2 := open(t, dir, Options{})
	if _, err := s2.Get(trace.ID{Hi: 7, Lo: 3}); err != nil {
		t.Fatalf("host b's block: %v", err)
	}
	if p, err := s2.Search(Query{Limit: 10}); err != nil || len(p.Traces) != 1 {
		t.Fatalf("search beside a corrupt block: %+v %v", p.Traces, err)
	}
}

// TestMigrateVersion1: a store written by version 1 (testdata/v1store:
// 60 traces of two hosts, made by tracebridge before blocks) is converted
// when opened; every trace reads back the same; the old files are kept
// aside.
func TestMigrateVersion1(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/v1store")); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, Options{})
	rec := s.Recovery()
	if rec.Migrated == nil || rec.Migrated.Traces != 60 || len(rec.Migrated.Lost) != 0 || rec.Migrated.Hosts != 3 {
		t.Fatalf("migration %+v", rec.Migrated)
	}
	for i := range 60 {
		want := mkTrace(i, []string{"alpha", "beta"}[i%2], 1+i%4, int64(1_700_000_000_000_000_000+i*1_000_000), int64(100+i), i%10 == 0)
		got, err := s.Get(want.ID)
		if err != nil {
			t.Fatalf("trace %d: %v", i, err)
		}
		if d := cmp.Diff(want, got, cmpopts.IgnoreUnexported(trace.Span{})); d != "" {
			t.Fatalf("trace %d (-want +got):\n%s", i, d)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, v1Kept, v1Index)); err != nil {
		t.Fatalf("the old index is not kept aside: %v", err)
	}
	if isV1(dir) {
		t.Fatal("still a store of version 1")
	}
}

// TestOnS3 runs the store on a real S3 server.
func TestBlocksInABucket(t *testing.T) {
	l, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := open(t, dir, Options{Bucket: l})
	s.Append([]*trace.Trace{mkTrace(1, "a", 3, 100, 5, false)})
	flush(t, s)
	objs, _ := l.List(context.Background(), block.Prefix)
	if len(objs) != 2 {
		t.Fatalf("bucket holds %v", objs)
	}
	if _, err := os.Stat(filepath.Join(dir, "blocks")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("blocks written to the local directory too: %v", err)
	}
}

// TestTracesAreContact: a host's last contact is the last time traces of
// it were stored, whatever their source (at most once a second).
func TestTracesAreContact(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	hosts := openHosts(t, func() time.Time { return now })
	s := open(t, t.TempDir(), Options{Now: func() time.Time { return now }, Hosts: tableOf(hosts)})
	if _, err := hosts.Add(hostdb.Host{Name: "shop-1"}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append([]*trace.Trace{mkTrace(1, "shop-1", 2, now.UnixNano(), 100, false)}); err != nil {
		t.Fatal(err)
	}
	h, err := hosts.Host("shop-1")
	if err != nil || !h.LastContact.Equal(now) {
		t.Fatalf("after a trace: last contact %v (%v)", h.LastContact, err)
	}
	now = now.Add(500 * time.Millisecond)
	s.Append([]*trace.Trace{mkTrace(2, "shop-1", 2, now.UnixNano(), 100, false)})
	if h, _ := hosts.Host("shop-1"); !h.LastContact.Equal(now.Add(-500 * time.Millisecond)) {
		t.Errorf("within a second: %v", h.LastContact)
	}
	now = now.Add(time.Second)
	s.Append([]*trace.Trace{mkTrace(3, "shop-1", 2, now.UnixNano(), 100, false)})
	if h, _ := hosts.Host("shop-1"); !h.LastContact.Equal(now) {
		t.Errorf("a second later: %v, want %v", h.LastContact, now)
	}
}

// TestEveryHostOfATraceIsContact: every host with spans in a stored trace,
// not only the root span's, gets contact and a share of the stored bytes.
func TestEveryHostOfATraceIsContact(t *testing.T) {
	now := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	hosts := openHosts(t, func() time.Time { return now })
	s := open(t, t.TempDir(), Options{Now: func() time.Time { return now }, Hosts: tableOf(hosts)})
	chain := []string{"frontend-host", "cart-host", "payment-host", "postgres-host"}
	var ts []*trace.Trace
	for i := range 3 {
		tr := &trace.Trace{ID: trace.ID{Hi: 9, Lo: uint64(i + 1)}}
		start := now.UnixNano()
		// A chain frontend → cart → payment → postgres, deeper in each
		// trace; the last trace has a second span on cart-host.
		for j, h := range chain[:2+i] {
			tr.Spans = append(tr.Spans, trace.Span{SpanID: trace.SpanID(j + 1), ParentID: trace.SpanID(j), Parent: int32(j - 1), Depth: int32(j),
				Operation: "op" + strconv.Itoa(j), Host: h, Service: strings.TrimSuffix(h, "-host"), Start: start + int64(j), End: start + 100 - int64(j),
				Source: trace.FromSpan, OrderIndex: -1, EOI: -1, ESS: -1})
		}
		if i == 2 {
			tr.Spans = append(tr.Spans, trace.Span{SpanID: 9, ParentID: 2, Parent: 1, Depth: 2, Operation: "cache", Host: "cart-host", Service: "cart",
				Start: start + 5, End: start + 20, Source: trace.FromSpan, OrderIndex: -1, EOI: -1, ESS: -1})
		}
		ts = append(ts, tr)
	}
	if _, err := s.Append(ts); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	for _, tr := range ts {
		for _, name := range tr.Hosts() {
			h, err := hosts.Host(name)
			if err != nil {
				t.Fatalf("host %s of trace %v: %v", name, tr.ID, err)
			}
			if !h.LastContact.Equal(now) {
				t.Errorf("host %s of trace %v: last contact %v, want %v", name, tr.ID, h.LastContact, now)
			}
			if n := s.HostSize(name); n <= 0 {
				t.Errorf("host %s of trace %v: size %d, want its share of the stored bytes", name, tr.ID, n)
			}
		}
	}
	// Shares survive a reopen.
	dir := s.Dir()
	before := s.HostSize("payment-host")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, Options{Now: func() time.Time { return now }})
	if n := s.HostSize("payment-host"); n != before {
		t.Errorf("payment-host after a reopen: size %d, want %d", n, before)
	}
}

// TestReaderFollowsAGrowingHead: a reader follows the chunks a writer adds
// to a head it already read (the writer's file grows), while searches run.
func TestReaderFollowsAGrowingHead(t *testing.T) {
	dir := t.TempDir()
	w := open(t, dir, Options{ChunkSize: 1})
	w.Append([]*trace.Trace{mkTrace(1, "h", 2, 100, 5, false)})
	w.Sync()
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	r := open(t, dir, Options{ReadOnly: true, Now: clock})
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // searches beside the refreshes
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				r.Search(Query{Limit: 100})
			}
		}
	}()
	for i := 2; i <= 20; i++ {
		w.Append([]*trace.Trace{mkTrace(i, "h", 2, int64(100*i), 5, false)})
		w.Sync()
		mu.Lock()
		now = now.Add(2 * time.Second)
		mu.Unlock()
		if p, _ := r.Search(Query{Limit: 100}); len(p.Traces) != i {
			t.Fatalf("after %d synced traces the reader lists %d", i, len(p.Traces))
		}
	}
	close(stop)
	<-done
	if ops := r.Operations("db"); len(ops) == 0 {
		t.Errorf("the reader's catalogue misses the followed traces' services: %v", r.Services())
	}
}

// TestCloseUploadsHeads: Close cuts the heads into blocks and uploads
// them, so a reader of the bucket alone (no write-ahead area) sees every
// trace, and the write-ahead area is empty.
func TestCloseUploadsHeads(t *testing.T) {
	bucket, err := objstore.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	s := open(t, dir, Options{Bucket: bucket})
	for i := range 5 {
		s.Append([]*trace.Trace{mkTrace(i, []string{"a", "b"}[i%2], 2, int64(100*(i+1)), 5, false)})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	r := open(t, t.TempDir(), Options{Bucket: bucket, ReadOnly: true})
	if n, _ := r.Count(); n != 5 {
		t.Fatalf("the bucket alone holds %d traces, want 5", n)
	}
	files, _ := filepath.Glob(filepath.Join(dir, walDir, "*", "*"+walExt))
	if len(files) != 0 {
		t.Fatalf("write-ahead files after Close: %v", files)
	}
}

// TestReplaysZstdChunks: a write-ahead file of a store before S2 chunks
// (TBK2, zstd), or of one that wrote both, is replayed after a crash.
func TestReplaysZstdChunks(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{ChunkSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if _, err := s.Append([]*trace.Trace{mkTrace(i, "h", 2, int64(10+i), 5, false)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	p := s.partition("h")
	path, chunks, first := p.head.path, p.head.chunks, p.head.chunks[0]
	s.cancel()
	s.uploadWG.Wait()
	p.head.close()
	// Every other chunk rewritten as zstd.
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, first)
	if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	out := head
	for i, off := range chunks {
		h, raw, err := readBlock(f, off)
		if err != nil || !h.s2 {
			t.Fatalf("chunk %d: s2 %v, %v", i, h.s2, err)
		}
		if i%2 == 0 {
			out = appendBlockV2(out, raw, h)
		} else {
			out = appendBlock(out, raw, h)
		}
	}
	f.Close()
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	s2 := open(t, dir, Options{})
	if rec := s2.Recovery(); rec.Traces != 5 || len(rec.Truncated) != 0 {
		t.Fatalf("recovery %+v", rec)
	}
	flush(t, s2)
	page, _ := s2.Search(Query{Limit: 100})
	if len(page.Traces) != 5 {
		t.Fatalf("%d traces after recovery, want 5", len(page.Traces))
	}
	s2.Close()
}
