package store

import (
	"strconv"
	"testing"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// TestHeadCutByIndex: heads of many small, alike traces (their
// write-ahead data compresses to a few bytes each) are cut when their
// indexes in memory reach the head size together, the largest first,
// long before their write-ahead files do: the heads' memory stays
// bounded whatever their traces compress to and however many hosts send
// them. A head is not cut for the others below a 32nd of the head size
// (64 hosts: the indexes reach two head sizes instead of a cut every few
// traces). Every trace stays readable.
func TestHeadCutByIndex(t *testing.T) {
	const headSize = 1 << 20
	for _, hosts := range []int{1, 8, 64} {
		t.Run(strconv.Itoa(hosts)+" hosts", func(t *testing.T) {
			s := open(t, t.TempDir(), Options{ChunkSize: 64 << 10, HeadSize: headSize})
			seen := map[*head]int64{} // the most index seen of each head
			var maxIndex, maxWAL int64
			const n = 20_000
			host := func(i int) string { return "host-" + strconv.Itoa(i%hosts) }
			for i := range n {
				tr := &trace.Trace{ID: trace.ID{Hi: 9, Lo: uint64(i + 1)}, Spans: []trace.Span{{SpanID: 1, Parent: -1,
					Operation: "GET /", Service: "web", Host: host(i), Start: int64(1_000_000 + i), End: int64(1_000_100 + i),
					Source: trace.FromSpan, OrderIndex: -1, EOI: -1, ESS: -1,
					Attributes: []trace.Attr{{Key: "http.route", Value: "/", Type: trace.TypeString}, {Key: "n", Value: strconv.Itoa(i % 50), Type: trace.TypeInt}}}}}
				if _, err := s.Append([]*trace.Trace{tr}); err != nil {
					t.Fatal(err)
				}
				var index int64
				for _, p := range s.partitions() {
					if h := p.head; h != nil {
						seen[h] = max(seen[h], h.indexSize())
						index += h.indexSize()
						maxWAL = max(maxWAL, h.walSize())
					}
				}
				if index != s.headIndex {
					t.Fatalf("after trace %d: the heads' indexes hold %d bytes, the store counts %d", i, index, s.headIndex)
				}
				maxIndex = max(maxIndex, index)
			}
			if bound := max(headSize, int64(hosts)*headSize/minCutShare) + headSize/8; maxIndex > bound {
				t.Errorf("the heads' indexes reached %d bytes together; want at most %d", maxIndex, bound)
			}
			open := map[*head]bool{}
			for _, p := range s.partitions() {
				open[p.head] = true
			}
			for h, most := range seen {
				if !open[h] && most < headSize/minCutShare-headSize/256 {
					t.Errorf("a head was cut at %d bytes of index, below a %dth of the head size", most, minCutShare)
				}
			}
			if len(seen) < hosts+2 {
				t.Errorf("%d heads for %d traces of %d hosts (indexes at most %d bytes, a write-ahead file at most %d): want them cut by their index",
					len(seen), n, hosts, maxIndex, maxWAL)
			}
			if maxWAL >= headSize {
				t.Errorf("a head's write-ahead file reached %d bytes: the traces are not as small as the test means", maxWAL)
			}
			if err := s.Sync(); err != nil {
				t.Fatal(err)
			}
			for _, i := range []int{0, n / 2, n - 1} {
				got, err := s.Get(trace.ID{Hi: 9, Lo: uint64(i + 1)})
				if err != nil || len(got.Spans) != 1 || got.Spans[0].Start != int64(1_000_000+i) || got.Spans[0].Host != host(i) {
					t.Errorf("trace %d: %v, %v", i, got, err)
				}
			}
		})
	}
}
