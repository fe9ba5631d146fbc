package probe

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func newShard(size int) *shard {
	s := new(shard)
	s.init(size, make(chan struct{}, 1))
	return s
}

func drainAll(s *shard) []event {
	var out []event
	var ev event
	for s.pop(&ev) {
		out = append(out, ev)
	}
	s.release()
	return out
}

func seqEvents(from, n int) []event {
	evs := make([]event, n)
	for i := range evs {
		evs[i] = event{kind: kindBefore, ts: int64(from + i), trace: 1, order: int32(from + i), op: uint32(i % 5), str: 3}
	}
	return evs
}

func TestShardFillAndWrap(t *testing.T) {
	s := newShard(16)
	var want, got []event
	next := 0
	// Many laps with pushes of varying size, drained in between.
	for lap := 0; lap < 50; lap++ {
		n := 1 + lap%5
		evs := seqEvents(next, n)
		next += n
		s.push(evs)
		want = append(want, evs...)
		if lap%2 == 1 {
			got = append(got, drainAll(s)...)
		}
	}
	got = append(got, drainAll(s)...)
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(event{})); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	if r := s.rejected.Load(); r != 0 {
		t.Fatalf("%d rejected", r)
	}
}

func TestShardFull(t *testing.T) {
	s := newShard(8)
	s.push(seqEvents(0, 5))
	s.push(seqEvents(5, 5)) // 3 fit
	if r := s.rejected.Load(); r != 2 {
		t.Fatalf("rejected %d, want 2", r)
	}
	if b := s.buffered(); b != 8 {
		t.Fatalf("buffered %d, want 8", b)
	}
	got := drainAll(s)
	if diff := cmp.Diff(seqEvents(0, 8), got, cmp.AllowUnexported(event{})); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	// A TraceMetadata pair that does not fit whole is rejected whole, and
	// counts as one record.
	s.push(seqEvents(0, 7))
	s.push([]event{{kind: kindMeta, trace: 9}, {kind: kindMetaExt, trace: 9}})
	if r := s.rejected.Load(); r != 3 {
		t.Fatalf("rejected %d, want 3", r)
	}
	if n := len(drainAll(s)); n != 7 {
		t.Fatalf("drained %d, want 7", n)
	}
	s.closed.Store(true)
	s.push(seqEvents(0, 2))
	if r := s.rejected.Load(); r != 5 {
		t.Fatalf("rejected %d after close, want 5", r)
	}
}

func TestShardWake(t *testing.T) {
	s := newShard(16) // pokes every 4 positions
	s.push(seqEvents(0, 3))
	select {
	case <-s.wake:
		t.Fatal("poked before a quarter filled")
	default:
	}
	s.push(seqEvents(3, 2))
	select {
	case <-s.wake:
	default:
		t.Fatal("not poked after a quarter filled")
	}
}

// TestShardConcurrent pushes from several goroutines while one consumer
// drains: every event arrives at most once, each producer's in its order,
// and arrived plus rejected is what was pushed.
func TestShardConcurrent(t *testing.T) {
	const producers, perProducer, chunk = 4, 20000, 7
	s := newShard(256)
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := 0; i < perProducer; i += chunk {
				evs := make([]event, min(chunk, perProducer-i))
				for j := range evs {
					evs[j] = event{kind: kindBefore, trace: int64(p), order: int32(i + j)}
				}
				s.push(evs)
			}
		})
	}
	pushed := make(chan struct{})
	go func() { wg.Wait(); close(pushed) }()
	next := make([]int32, producers)
	arrived, bad := 0, 0
	var ev event
	for finished := false; ; {
		if s.pop(&ev) {
			if ev.order < next[ev.trace] {
				bad++
			}
			next[ev.trace] = ev.order + 1
			arrived++
			if arrived%32 == 0 {
				s.release()
			}
			continue
		}
		s.release()
		if finished {
			break
		}
		select {
		case <-pushed:
			finished = true // one more pass takes what was published last
		default:
		}
	}
	if bad > 0 {
		t.Errorf("%d events out of order", bad)
	}
	if total := arrived + int(s.rejected.Load()); total != producers*perProducer {
		t.Errorf("%d arrived + %d rejected, want %d", arrived, s.rejected.Load(), producers*perProducer)
	}
	if arrived == 0 {
		t.Error("nothing arrived")
	}
}
