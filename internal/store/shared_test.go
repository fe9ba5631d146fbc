package store

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/objstore/objstoretest"
	"github.com/tracebridge/tracebridge/internal/servicetest"
	"github.com/tracebridge/tracebridge/internal/store/block"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// The tests of several stores (the nodes of a cluster, each with a
// directory of its own) on one bucket of a real S3 server (versitygw).

// sharedBucket starts an S3 server with a bucket and returns its
// configuration (each store opens a client of its own, as nodes do).
func sharedBucket(t *testing.T) objstore.S3Config {
	t.Helper()
	srv := objstoretest.Start(t)
	return srv.Bucket(t, "traces", "prod/")
}

func s3Client(t *testing.T, cfg objstore.S3Config) *objstore.S3 {
	t.Helper()
	b, err := objstore.NewS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// openNode opens a writer of the shared bucket named node.
func openNode(t *testing.T, cfg objstore.S3Config, node string, o Options) *Store {
	t.Helper()
	o.Bucket = s3Client(t, cfg)
	o.Node = node
	if o.Refresh == 0 {
		o.Refresh = 100 * time.Millisecond
	}
	if o.ListAll == 0 {
		o.ListAll = 300 * time.Millisecond
	}
	return open(t, t.TempDir(), o)
}

// waitUntil waits (generously: the machine is busy) for cond.
func waitUntil(t *testing.T, what string, cond func() error) {
	t.Helper()
	servicetest.Wait(t, 90*time.Second, what, cond)
}

// traceAt is trace i of a test (on host alpha or beta), 4 spans.
func traceAt(i int) *trace.Trace {
	return mkTrace(i, []string{"alpha", "beta"}[i%2], 4, int64(1_000_000+i*1000), int64(100+i%50), i%9 == 0)
}

// sees checks that s finds traces [0, n) once each, whole: one search
// row each (newest first and oldest first), four spans each, unbroken;
// and by id.
func sees(s *Store, n int, byID []int) error {
	for _, oldest := range []bool{false, true} {
		p, err := s.Search(Query{Limit: 10 * n, Oldest: oldest})
		if err != nil {
			return err
		}
		if len(p.Traces) != n {
			return fmt.Errorf("search (oldest %v) lists %d traces, want %d", oldest, len(p.Traces), n)
		}
		seen := map[trace.ID]bool{}
		for _, sum := range p.Traces {
			if seen[sum.ID] {
				return fmt.Errorf("search (oldest %v) lists trace %s twice", oldest, sum.TraceID)
			}
			seen[sum.ID] = true
			if sum.Spans != 4 || sum.Broken {
				return fmt.Errorf("search (oldest %v): trace %s has %d spans (broken %v), want 4", oldest, sum.TraceID, sum.Spans, sum.Broken)
			}
		}
	}
	for _, i := range byID {
		want := traceAt(i)
		got, err := s.Get(want.ID)
		if err != nil {
			return fmt.Errorf("trace %d: %w", i, err)
		}
		if err := onceEach(got); err != nil {
			return fmt.Errorf("trace %d: %w", i, err)
		}
		if len(got.Spans) != 4 || len(got.Broken) > 0 {
			return fmt.Errorf("trace %d: %d spans, broken %q", i, len(got.Spans), got.Broken)
		}
	}
	return nil
}

// onceEach checks that a trace has each span id once.
func onceEach(t *trace.Trace) error {
	seen := map[trace.SpanID]bool{}
	for _, s := range t.Spans {
		if seen[s.SpanID] {
			return fmt.Errorf("span %s twice", s.SpanID)
		}
		seen[s.SpanID] = true
	}
	return nil
}

// TestSharedBucketWriters: three stores append at once into one bucket;
// once their blocks are uploaded, each finds every trace of the others,
// once; each block's meta names its writer.
func TestSharedBucketWriters(t *testing.T) {
	cfg := sharedBucket(t)
	nodes := []string{"n1", "n2", "n3"}
	var stores []*Store
	for _, n := range nodes {
		stores = append(stores, openNode(t, cfg, n, Options{ChunkSize: 4 << 10, HeadSize: 16 << 10}))
	}
	const per = 120
	var wg sync.WaitGroup
	errs := make(chan error, len(stores))
	for k, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < per; j += 10 {
				var batch []*trace.Trace
				for i := j; i < j+10; i++ {
					batch = append(batch, traceAt(k*per+i))
				}
				if _, err := s.Append(batch); err != nil {
					errs <- err
					return
				}
				if err := s.Sync(); err != nil {
					errs <- err
					return
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			errs <- s.Flush(ctx)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	n := len(stores) * per
	for k, s := range stores {
		waitUntil(t, nodes[k]+" sees every trace", func() error { return sees(s, n, []int{0, per + 1, 2*per + 2, n - 1}) })
	}
	objs, err := stores[0].Bucket().List(context.Background(), block.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	writers := map[string]int{}
	for _, o := range objs {
		if _, _, name, _ := block.ParseKey(o.Key); name != block.MetaName {
			continue
		}
		p, err := stores[0].Bucket().Get(context.Background(), o.Key)
		if err != nil {
			t.Fatal(err)
		}
		m, err := block.ParseMeta(p)
		if err != nil {
			t.Fatal(err)
		}
		writers[m.Node]++
	}
	if len(writers) != 3 || writers["n1"] == 0 || writers["n2"] == 0 || writers["n3"] == 0 {
		t.Fatalf("blocks by writer: %v", writers)
	}
}

// TestSharedDuplicates: the same traces written by two stores (a
// partition taken over in a cluster assembled again what was not yet
// acknowledged), whole or in part (the root alone in one, unbroken; the
// children alone in the other), are one search row each, whole, every
// span once by id, on both; compaction writes each span once.
func TestSharedDuplicates(t *testing.T) {
	cfg := sharedBucket(t)
	a := openNode(t, cfg, "a", Options{})
	b := openNode(t, cfg, "b", Options{MayCompact: func() bool { return false }})
	const n = 60
	var whole, copies []*trace.Trace
	for i := range n {
		w := traceAt(i)
		if i >= 40 && i < 50 {
			// What the first node assembled: the root alone (a trace of
			// its own, unbroken), the second the whole trace.
			w.Spans = w.Spans[:1]
		}
		whole = append(whole, w)
		c := traceAt(i)
		if i >= 50 {
			// A part: the children only (their root was in what the
			// first node had acknowledged), in the partition of their
			// host.
			c.Spans = c.Spans[1:]
			for k := range c.Spans {
				c.Spans[k].Parent, c.Spans[k].Depth = -1, 0
			}
			c.Broken = []string{"span 0000000000000002 (x): parent 0000000000000001 missing"}
		}
		copies = append(copies, c)
	}
	if _, err := a.Append(whole); err != nil {
		t.Fatal(err)
	}
	flush(t, a)
	if _, err := b.Append(copies[:30]); err != nil {
		t.Fatal(err)
	}
	flush(t, b)
	if _, err := b.Append(copies[30:]); err != nil {
		t.Fatal(err)
	}
	b.Sync() // some copies in b's head, the others in a block
	all := []int{0, 1, 29, 30, 40, 49, 50, 59}
	waitUntil(t, "a lists b's first blocks", func() error {
		if k := a.blocksBy("b"); k != 2 {
			return fmt.Errorf("a lists %d blocks of b's, want 2", k)
		}
		// (40 to 49 are the root alone until b's head is uploaded.)
		p, err := a.Search(Query{Limit: 1000})
		if err != nil || len(p.Traces) != n {
			return fmt.Errorf("a lists %d traces, want %d (%v)", len(p.Traces), n, err)
		}
		return nil
	})
	waitUntil(t, "b sees a's traces once", func() error { return sees(b, n, all) })
	flush(t, b)
	waitUntil(t, "a lists b's last blocks", func() error {
		if k := a.blocksBy("b"); k != 5 {
			return fmt.Errorf("a lists %d blocks of b's, want 5", k)
		}
		return sees(a, n, all)
	})
	// Check: copies are no problem, and counted.
	res, err := Check(t.TempDir(), Options{Bucket: s3Client(t, cfg)})
	if err != nil || len(res.Problems) > 0 || res.InSeveral != n {
		t.Fatalf("check: %d traces in several blocks (want %d), problems %q, %v", res.InSeveral, n, res.Problems, err)
	}
	// b may not compact (its hook says no); a merges the copies.
	if m, err := b.Compact(); err != nil || m != 0 {
		t.Fatalf("a store whose hook says no compacted: %d %v", m, err)
	}
	if m, err := a.Compact(); err != nil || m == 0 {
		t.Fatalf("compaction: %d %v", m, err)
	}
	if err := sees(a, n, all); err != nil {
		t.Fatal("after the compaction: ", err)
	}
	spans := 0
	for _, p := range a.Partitions() {
		if p.Name == "alpha" || p.Name == "beta" {
			if p.Blocks != 1 {
				t.Fatalf("partition %s: %d blocks after the compaction", p.Name, p.Blocks)
			}
		}
	}
	for _, p := range a.partitions() {
		p.mu.RLock()
		for _, blk := range p.blocks {
			if p.host == "alpha" || p.host == "beta" {
				spans += blk.meta.Spans
			}
		}
		p.mu.RUnlock()
	}
	if spans != 4*n {
		t.Fatalf("the compacted blocks hold %d spans, want %d (each once)", spans, 4*n)
	}
	waitUntil(t, "b sees the compacted block", func() error { return sees(b, n, all) })
}

// blocksBy counts the blocks of node s lists.
func (s *Store) blocksBy(node string) int {
	n := 0
	for _, p := range s.partitions() {
		p.mu.RLock()
		for _, b := range p.blocks {
			if b.meta.Node == node {
				n++
			}
		}
		p.mu.RUnlock()
	}
	return n
}

// listedBlocks counts the blocks s lists.
func (s *Store) listedBlocks() int {
	n := 0
	for _, p := range s.partitions() {
		p.mu.RLock()
		n += len(p.blocks)
		p.mu.RUnlock()
	}
	return n
}

// TestSharedCompactionWhileWriting: one store compacts (its sources
// deleted at once, not after the grace) while another uploads blocks and
// searches; nothing is lost, nothing found twice, no search fails.
func TestSharedCompactionWhileWriting(t *testing.T) {
	cfg := sharedBucket(t)
	small := Options{ChunkSize: 1 << 10, HeadSize: 3 << 10, CompactBelow: 64 << 10, CompactTo: 256 << 10}
	ca := small
	a := openNode(t, cfg, "a", ca)
	cb := small
	cb.MayCompact = func() bool { return false }
	b := openNode(t, cfg, "b", cb)
	const n = 240
	if _, err := a.Append(func() (ts []*trace.Trace) {
		for i := 0; i < n; i += 2 {
			ts = append(ts, traceAt(i))
		}
		return ts
	}()); err != nil {
		t.Fatal(err)
	}
	flush(t, a)
	done := make(chan error, 2)
	go func() { // b writes the odd traces, a few at a time, each batch a block
		for i := 1; i < n; i += 10 {
			var batch []*trace.Trace
			for j := i; j < i+10 && j < n; j += 2 {
				batch = append(batch, traceAt(j))
			}
			if _, err := b.Append(batch); err != nil {
				done <- err
				return
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			err := b.Flush(ctx)
			cancel()
			if err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	stop := make(chan struct{})
	go func() { // a compacts meanwhile, deleting what it merged at once
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if _, err := a.Compact(); err != nil {
				done <- err
				return
			}
			a.removeRetired(true)
			time.Sleep(100 * time.Millisecond) // pacing, not a wait for anything
		}
	}()
	// Searches of b's meanwhile: never an error.
	searches := 0
	deadline := time.Now().Add(2 * time.Minute)
	for len(done) == 0 && time.Now().Before(deadline) {
		if _, err := b.Search(Query{Limit: 1000}); err != nil {
			t.Fatalf("a search beside the compaction: %v", err)
		}
		// (A lookup may miss a trace moved twice while it reads: here
		// the compacted blocks go at once, not after uploadedGrace.)
		if _, err := b.Get(traceAt(0).ID); err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatalf("a trace by id beside the compaction: %v", err)
		}
		searches++
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := a.Compact(); err != nil {
		t.Fatal(err)
	}
	a.removeRetired(true)
	every := []int{0, 1, 2, 3, n / 2, n/2 + 1, n - 2, n - 1}
	waitUntil(t, "a finds every trace once", func() error { return sees(a, n, every) })
	waitUntil(t, "b finds every trace once", func() error { return sees(b, n, every) })
	// In the bucket: every trace once (the writers' traces are distinct).
	r := open(t, t.TempDir(), Options{Bucket: s3Client(t, cfg), ReadOnly: true})
	if err := sees(r, n, every); err != nil {
		t.Fatal("a reader of the bucket: ", err)
	}
	traces := 0
	for _, p := range r.Partitions() {
		traces += p.Traces
	}
	if traces != n {
		t.Fatalf("the bucket's blocks hold %d traces, want %d", traces, n)
	}
	t.Logf("%d searches beside the compaction", searches)
}

// TestSharedBlockGoneUnderSearch: blocks deleted behind a store's back
// (retention or a compaction of another node) are skipped by its
// searches and lookups, never an error; a store whose listing is behind
// finds the traces of a compacted block that replaced them.
func TestSharedBlockGoneUnderSearch(t *testing.T) {
	cfg := sharedBucket(t)
	a := openNode(t, cfg, "a", Options{CompactBelow: 1 << 20})
	// b lists only when asked (a long Refresh): its list is behind.
	b := openNode(t, cfg, "b", Options{Refresh: time.Hour})
	const n = 40
	for i := 0; i < n; i += 10 {
		var batch []*trace.Trace
		for j := i; j < i+10; j++ {
			batch = append(batch, traceAt(j))
		}
		if _, err := a.Append(batch); err != nil {
			t.Fatal(err)
		}
		flush(t, a)
	}
	if _, err := b.relist(time.Now()); err != nil {
		t.Fatal(err)
	}
	every := []int{0, 11, 22, 39}
	if err := sees(b, n, every); err != nil {
		t.Fatal(err)
	}
	// a compacts and deletes the sources at once; b reads them from its
	// cache no longer.
	if m, err := a.Compact(); err != nil || m == 0 {
		t.Fatalf("compaction: %d %v", m, err)
	}
	a.removeRetired(true)
	b.cache.dropPrefix("")
	b.pages.dropPrefix("")
	if err := sees(b, n, every); err != nil {
		t.Fatal("after a compaction elsewhere: ", err)
	}
	// A block deleted outright (retention elsewhere): its traces are
	// gone, the others found, no error.
	p := a.partition("alpha")
	p.mu.RLock()
	victim := p.blocks[0]
	p.mu.RUnlock()
	victimTraces := victim.meta.Traces
	if err := b.relistNow(); err != nil {
		t.Fatal(err)
	}
	b.cache.dropPrefix("")
	b.pages.dropPrefix("")
	ctx := context.Background()
	if err := a.Bucket().Delete(ctx, block.Dir(victim.meta.Host, victim.meta.ID)+block.MetaName); err != nil {
		t.Fatal(err)
	}
	if err := a.Bucket().Delete(ctx, block.Dir(victim.meta.Host, victim.meta.ID)+block.DataName); err != nil {
		t.Fatal(err)
	}
	page, err := b.Search(Query{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Traces) != n-victimTraces {
		t.Fatalf("%d traces after a block of %d went, want %d", len(page.Traces), victimTraces, n-victimTraces)
	}
	if _, err := b.Get(traceAt(0).ID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a trace of the deleted block: %v, want ErrNotFound", err)
	}
	if _, err := b.Get(traceAt(1).ID); err != nil {
		t.Fatalf("a trace of beta: %v", err)
	}
}

// relistNow lists the bucket (tests).
func (s *Store) relistNow() error {
	_, err := s.relist(time.Now())
	return err
}

// TestSharedCompactorHook: a store whose MayCompact says no neither
// deletes old blocks nor compacts; the compactor deletes the blocks a
// compaction replaced when their compactor stopped before it did.
func TestSharedCompactorHook(t *testing.T) {
	cfg := sharedBucket(t)
	var mu sync.Mutex
	allowed := false
	may := func() bool { mu.Lock(); defer mu.Unlock(); return allowed }
	past := time.Now().Add(-time.Hour)
	// b's clock is an hour behind: its blocks are old, and so is its
	// compaction.
	b := openNode(t, cfg, "b", Options{MaxAge: time.Minute, Now: func() time.Time { return past }})
	a := openNode(t, cfg, "a", Options{MaxAge: 30 * time.Minute, MayCompact: may})
	for i := range 3 {
		if _, err := b.Append([]*trace.Trace{mkTrace(i, "alpha", 2, past.UnixNano()+int64(i), 10, false)}); err != nil {
			t.Fatal(err)
		}
		flush(t, b)
	}
	if err := a.relistNow(); err != nil {
		t.Fatal(err)
	}
	if a.listedBlocks() != 3 {
		t.Fatalf("a lists %d blocks, want 3", a.listedBlocks())
	}
	if d, err := a.Retain(); err != nil || d != 0 {
		t.Fatalf("retention without the lease: %d %v", d, err)
	}
	if m, err := a.Compact(); err != nil || m != 0 {
		t.Fatalf("compaction without the lease: %d %v", m, err)
	}
	// b compacts and stops before deleting what it merged (its grace):
	// the next compactor deletes them.
	if m, err := b.Compact(); err != nil || m != 2 {
		t.Fatalf("b's compaction: %d %v", m, err)
	}
	b.walMu.Lock()
	b.retired = nil
	b.walMu.Unlock()
	count := func() int {
		objs, err := a.Bucket().List(context.Background(), block.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		return len(objs)
	}
	if c := count(); c != 8 {
		t.Fatalf("%d objects, want 8 (3 blocks and the compacted one)", c)
	}
	mu.Lock()
	allowed = true
	mu.Unlock()
	if err := a.relistNow(); err != nil { // (Compact takes a listing of the last half ListAll)
		t.Fatal(err)
	}
	if _, err := a.Compact(); err != nil {
		t.Fatal(err)
	}
	if c := count(); c != 2 {
		t.Fatalf("%d objects after the compactor's sweep, want 2 (the compacted block)", c)
	}
	// Retention with the lease: b's block is older than a's max age.
	if d, err := a.Retain(); err != nil || d != 1 {
		t.Fatalf("retention with the lease: %d %v", d, err)
	}
	if c := count(); c != 0 {
		t.Fatalf("%d objects after retention", c)
	}
	waitUntil(t, "b forgets the deleted block", func() error {
		if n := b.listedBlocks(); n != 0 {
			return fmt.Errorf("b lists %d blocks", n)
		}
		return nil
	})
}

// TestSharedAnnouncements: a store that lists every block only at open
// (ListAll of an hour) sees another's new blocks and compactions through
// their announcements, and so does a reader of the shared bucket; the
// compactor deletes old announcements.
func TestSharedAnnouncements(t *testing.T) {
	keep := announceKeep
	t.Cleanup(func() { announceKeep = keep })
	announceKeep = 0 // every announcement listed is old
	cfg := sharedBucket(t)
	a := openNode(t, cfg, "a", Options{ListAll: time.Hour, Refresh: 50 * time.Millisecond, MayCompact: func() bool { return false }})
	b := openNode(t, cfg, "b", Options{ListAll: time.Hour})
	// A reader of the shared bucket opened before the blocks were.
	r := open(t, t.TempDir(), Options{Bucket: s3Client(t, cfg), ReadOnly: true, Node: "reader", ListAll: time.Hour, Refresh: 10 * time.Millisecond})
	for i := range 3 {
		if _, err := b.Append([]*trace.Trace{traceAt(2 * i)}); err != nil {
			t.Fatal(err)
		}
		flush(t, b)
	}
	waitUntil(t, "a sees b's blocks", func() error {
		if k := a.blocksBy("b"); k != 3 {
			return fmt.Errorf("a lists %d blocks of b's, want 3", k)
		}
		return nil
	})
	waitUntil(t, "the reader sees b's blocks", func() error {
		if p, err := r.Search(Query{Limit: 100}); err != nil || len(p.Traces) != 3 {
			return fmt.Errorf("the reader lists %d traces, want 3 (%v)", len(p.Traces), err)
		}
		return nil
	})
	if m, err := b.Compact(); err != nil || m != 2 {
		t.Fatalf("b's compaction: %d %v", m, err)
	}
	waitUntil(t, "a sees b's compaction", func() error {
		if k := a.blocksBy("b"); k != 1 {
			return fmt.Errorf("a lists %d blocks of b's, want 1", k)
		}
		p, err := a.Search(Query{Limit: 100})
		if err != nil || len(p.Traces) != 3 {
			return fmt.Errorf("a lists %d traces, want 3 (%v)", len(p.Traces), err)
		}
		return nil
	})
	// b is the compactor: its next run deletes the announcements it
	// listed (all old here).
	if err := b.relistAnnounced(); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Compact(); err != nil {
		t.Fatal(err)
	}
	objs, err := b.Bucket().List(context.Background(), announcePrefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 0 {
		t.Fatalf("%d announcements left after the compactor's sweep", len(objs))
	}
}
