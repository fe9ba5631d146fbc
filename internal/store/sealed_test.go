package store

import (
	"errors"
	"fmt"
	"strconv"
	"testing"

	"github.com/tracebridge/tracebridge/internal/objstore/objstoretest"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestSealedIndexBounded: while the bucket is away (a real S3 server,
// stopped), cut heads wait for their uploads with their indexes in
// memory; once those exceed twice the head size, Append waits (the
// write-ahead area, far from max_wal, would have let them grow to 1 GiB
// of traces). The indexes never pass the bound by more than the head
// that crossed it, and once the server is back every trace is uploaded
// and readable.
func TestSealedIndexBounded(t *testing.T) {
	srv := objstoretest.Start(t)
	cfg := srv.Bucket(t, "traces", "")
	const headSize = 64 << 10
	s := open(t, t.TempDir(), Options{Bucket: s3Client(t, cfg), ChunkSize: 8 << 10, HeadSize: headSize})
	srv.Stop()

	const n = 6000
	done := make(chan error, 1)
	go func() {
		for i := range n {
			tr := mkTrace(i, "host-"+strconv.Itoa(i%2), 3, int64(1_000_000+i*1000), 100, false)
			if _, err := s.Append([]*trace.Trace{tr}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	stats := func() (index, wal int64, heads, waiting int) {
		s.walMu.Lock()
		defer s.walMu.Unlock()
		return s.sealedIndex, s.walBytes, len(s.sealed), s.waiting
	}
	waitUntil(t, "an Append waiting for uploads", func() error {
		select {
		case err := <-done:
			t.Fatalf("all %d traces appended with the bucket away (err %v)", n, err)
		default:
		}
		if _, _, _, waiting := stats(); waiting == 0 {
			return errors.New("none waits")
		}
		return nil
	})
	index, wal, heads, _ := stats()
	t.Logf("waiting: %d cut heads, %d bytes of index, %d bytes of write-ahead data", heads, index, wal)
	if index <= s.maxSealedIndex() || index > s.maxSealedIndex()+headSize+headSize/8 {
		t.Errorf("Append waits at %d bytes of cut heads' indexes; want more than %d and at most a head more", index, s.maxSealedIndex())
	}
	if wal >= s.opt.MaxWAL {
		t.Errorf("the write-ahead area is full (%d bytes): not the bound under test", wal)
	}

	srv.Restart()
	waitUntil(t, "every Append once the bucket is back", func() error {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return nil
		default:
			return errors.New("still appending")
		}
	})
	waitUntil(t, "every cut head uploaded", func() error {
		if _, _, heads, _ := stats(); heads > 0 {
			return fmt.Errorf("%d cut heads wait", heads)
		}
		return nil
	})
	for i := range n {
		id := mkTrace(i, "", 1, 0, 0, false).ID
		if _, err := s.Get(id); err != nil {
			t.Fatalf("trace %d: %v", i, err)
		}
	}
}
