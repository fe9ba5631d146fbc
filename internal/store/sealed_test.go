package store

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/objstore/objstoretest"
	"github.com/tracebridge/tracebridge/internal/store/block"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestSealedIndexBounded: while the bucket is away (a real S3 server,
// stopped), cut heads wait for their uploads; once their indexes exceed
// twice the head size in memory, the oldest move to their files
// (evictSealed) and Append goes on until the write-ahead area reaches
// max_wal, then waits. The indexes in memory never pass the bound by
// more than the head that crossed it, also when the store is opened
// again and reads the write-ahead files; every trace appended is found,
// by id and by an attribute, also those whose head's index is in its
// file only; once the server is back every trace is uploaded and
// readable.
func TestSealedIndexBounded(t *testing.T) {
	srv := objstoretest.Start(t)
	cfg := srv.Bucket(t, "traces", "")
	const headSize, maxWAL = 64 << 10, 640 << 10 // about 120 cut heads of these traces
	dir := t.TempDir()
	opts := Options{Bucket: s3Client(t, cfg), ChunkSize: 8 << 10, HeadSize: headSize, MaxWAL: maxWAL, CloseWait: -1}
	s := open(t, dir, opts)
	srv.Stop()

	const n = 100_000 // more than max_wal takes (about 28,000)
	var appended atomic.Int64
	done := make(chan error, 1)
	go func() {
		for i := range n {
			tr := mkTrace(i, "host-"+strconv.Itoa(i%2), 3, int64(1_000_000+i*1000), 100, false)
			if _, err := s.Append([]*trace.Trace{tr}); err != nil {
				done <- err
				return
			}
			appended.Add(1)
		}
		done <- nil
	}()
	stats := func() (index, wal int64, heads, evicted, waiting int) {
		s.walMu.Lock()
		defer s.walMu.Unlock()
		for _, h := range s.sealed {
			if h.evicted {
				evicted++
			}
		}
		return s.sealedIndex, s.walBytes, len(s.sealed), evicted, s.waiting
	}
	waitUntil(t, "an Append waiting for uploads", func() error {
		select {
		case err := <-done:
			t.Fatalf("all %d traces appended with the bucket away (err %v)", n, err)
		default:
		}
		if _, _, _, _, waiting := stats(); waiting == 0 {
			return errors.New("none waits")
		}
		return nil
	})
	// With the bucket away: the cut heads' indexes mostly in their
	// files, every trace appended found, by id and by a term of its
	// (every 97th, every 20th of those).
	got := int(appended.Load())
	index, wal, heads, evicted, _ := stats()
	t.Logf("Append waiting: %d cut heads (%d of them evicted), %d bytes of index in memory, %d bytes of write-ahead data, %d traces", heads, evicted, index, wal, got)
	if index > s.maxSealedIndex()+headSize+headSize/8 {
		t.Errorf("%d bytes of cut heads' indexes in memory; want at most a head more than %d", index, s.maxSealedIndex())
	}
	if evicted < heads/2 {
		t.Errorf("%d of %d cut heads evicted; want most", evicted, heads)
	}
	s.walMu.Lock()
	attrs := s.evictedAttrs
	s.walMu.Unlock()
	if attrs == 0 || attrs > headSize {
		t.Errorf("%d bytes of evicted heads' attribute filters kept; want some, at most head_size", attrs)
	}
	for i := 0; i < got; i += 97 {
		id := mkTrace(i, "", 1, 0, 0, false).ID
		if _, err := s.Get(id); err != nil {
			t.Fatalf("bucket away: trace %d of %d: %v", i, got, err)
		}
		if i%(97*20) == 0 {
			p, err := s.Search(Query{Attrs: []trace.Attr{{Key: "n", Value: strconv.Itoa(i)}}, Limit: 10, TotalBudget: 5 * time.Minute})
			if err != nil || len(p.Traces) != 1 || p.Traces[0].ID != id {
				t.Fatalf("bucket away: n=%d: %+v, %v", i, p.Traces, err)
			}
		}
	}
	if c, err := s.Count(); err != nil || c < got {
		t.Errorf("bucket away: the store counts %d traces, want %d (%v)", c, got, err)
	}
	// What an evicted head keeps in memory spares reading it back: a
	// search for a service none has, an attribute value none has, a
	// trace id none holds (its attribute and id filters answer for it,
	// wrong about 1 % of the time).
	before := s.readBack.Load()
	if p, err := s.Search(Query{Service: "no-such-service", Limit: 10, TotalBudget: 5 * time.Minute}); err != nil || len(p.Traces) != 0 || p.Partial {
		t.Errorf("bucket away: service no-such-service: %+v, %v", p.Traces, err)
	}
	if n := s.readBack.Load() - before; n != 0 {
		t.Errorf("a search for a service no head has read %d evicted heads' indexes back; want none", n)
	}
	before = s.readBack.Load()
	if p, err := s.Search(Query{Attrs: []trace.Attr{{Key: "n", Value: "no-such-value"}}, Limit: 10, TotalBudget: 5 * time.Minute}); err != nil || len(p.Traces) != 0 || p.Partial {
		t.Errorf("bucket away: n=no-such-value: %+v, %v", p.Traces, err)
	}
	if n := s.readBack.Load() - before; n > int64(evicted/10) {
		t.Errorf("a search for an attribute value no trace has read %d of %d evicted heads' indexes back", n, evicted)
	}
	before = s.readBack.Load()
	if _, err := s.Get(trace.ID{Hi: 99, Lo: 99}); !errors.Is(err, ErrNotFound) {
		t.Errorf("bucket away: an unknown trace id: %v, want ErrNotFound", err)
	}
	if n := s.readBack.Load() - before; n > int64(evicted/10) {
		t.Errorf("a search for an unknown trace id read %d of %d evicted heads' indexes back", n, evicted)
	}
	if wal <= maxWAL {
		t.Errorf("Append waits at %d bytes of write-ahead data; want it at max_wal (%d)", wal, maxWAL)
	}
	// The uploader tries again and again, with the block it built once.
	waitUntil(t, "three failed uploads", func() error {
		if n := s.uploadFailures.Load(); n < 3 {
			return fmt.Errorf("%d failed", n)
		}
		return nil
	})
	if n := s.blocksBuilt.Load(); n != 1 {
		t.Errorf("%d blocks built for %d failed uploads of one cut head; want 1", n, s.uploadFailures.Load())
	}

	// Stopped, and opened again once the bucket is back: the
	// write-ahead files are read again within the same bound (Open lists
	// the bucket: it needs it).
	s.Close()
	if err := <-done; err != nil && !errors.Is(err, ErrClosed) {
		t.Fatal(err)
	}
	got = int(appended.Load())
	srv.Restart()
	s = open(t, dir, opts)
	s.walMu.Lock()
	index, evicted = s.sealedIndex, s.evicted
	s.walMu.Unlock()
	t.Logf("opened again: %d heads' indexes left memory as their files were read, %d bytes of index in memory", evicted, index)
	if evicted == 0 || index > s.maxSealedIndex()+headSize+headSize/8 {
		t.Errorf("opened again: %d heads' indexes left memory, %d bytes in memory; want most of them, and at most a head more than %d", evicted, index, s.maxSealedIndex())
	}
	// Searches meanwhile, while the uploader reads the evicted heads'
	// indexes back one after the other, find every trace they look for.
	stop, readErr := make(chan struct{}), make(chan error, 1)
	go func() {
		defer close(readErr)
		for i := 0; ; i = (i + 31) % got {
			select {
			case <-stop:
				return
			default:
			}
			id := mkTrace(i, "", 1, 0, 0, false).ID
			if _, err := s.Get(id); err != nil {
				readErr <- fmt.Errorf("trace %d during the uploads: %w", i, err)
				return
			}
			if i%10 == 0 {
				p, err := s.Search(Query{Attrs: []trace.Attr{{Key: "n", Value: strconv.Itoa(i)}}, Limit: 10, TotalBudget: 5 * time.Minute})
				if err != nil || len(p.Traces) != 1 || p.Traces[0].ID != id {
					readErr <- fmt.Errorf("n=%d during the uploads: %+v, %v", i, p.Traces, err)
					return
				}
			}
		}
	}()
	waitUntil(t, "every cut head uploaded", func() error {
		if _, _, heads, _, _ := stats(); heads > 0 {
			return fmt.Errorf("%d cut heads wait", heads)
		}
		return nil
	})
	close(stop)
	if err := <-readErr; err != nil {
		t.Error(err)
	}
	// Every byte counted for the cut heads is given back.
	s.walMu.Lock()
	index, attrs = s.sealedIndex, s.evictedAttrs
	s.walMu.Unlock()
	if index != 0 || attrs != 0 {
		t.Errorf("every cut head uploaded, and %d bytes of index, %d of attribute filters still counted", index, attrs)
	}
	for i := 0; i < got; i += 13 {
		id := mkTrace(i, "", 1, 0, 0, false).ID
		if _, err := s.Get(id); err != nil {
			t.Fatalf("trace %d: %v", i, err)
		}
	}
}

// TestMayMatchCatalogueBound: a meta (a block's, or an evicted head's)
// rules a trace name or service out only when its list is below the
// catalogue's bound: one at the bound may lack the name asked for.
func TestMayMatchCatalogueBound(t *testing.T) {
	p := &partition{host: "alpha"}
	for _, n := range []int{10, CatalogMaxNames} {
		m := &block.Meta{}
		for i := range n {
			m.Names = append(m.Names, "GET /u/"+strconv.Itoa(i))
			m.Services = append(m.Services, block.MetaService{Name: "svc-" + strconv.Itoa(i), ViaService: true})
		}
		full := n >= CatalogMaxNames
		for _, q := range []Query{{Name: "GET /u/x"}, {Service: "svc-x"}} {
			if got := (&filter{q: &q}).metaMayMatch(p, m); got != full {
				t.Errorf("%d names and services, query %+v: may match %v, want %v", n, q, got, full)
			}
		}
		if !(&filter{q: &Query{Name: "get /U/3"}}).metaMayMatch(p, m) {
			t.Errorf("%d names: a name listed (in another case) ruled out", n)
		}
	}
}
