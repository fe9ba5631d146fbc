package store

import (
	"context"
	"fmt"
	"slices"

	"github.com/tracebridge/tracebridge/internal/store/block"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// CheckResult is what Check found.
type CheckResult struct {
	Hosts, Blocks, Traces int
	// WAL counts the write-ahead files (heads not yet in a block).
	WAL int
	// Problems name the block (or file), the part and the reason of
	// everything wrong: unreadable metas, metas that disagree with their
	// data, corrupt parts, traces that do not decode, torn write-ahead
	// tails.
	Problems []string
	// Repaired names what Rebuild changed.
	Repaired []string
	// InSeveral counts the traces found in more than one block: parts
	// (spans more than a trace window apart), or copies written by two
	// nodes of a cluster sharing the bucket. Not a problem: reads merge
	// them, each span once, and compaction writes them once. Counted
	// over the first maxCheckIDs trace ids (Uncounted: there were more).
	InSeveral int
	Uncounted bool
}

// maxCheckIDs bounds the trace ids check keeps to count those in several
// blocks (about 40 bytes each).
const maxCheckIDs = 4 << 20

func (res *CheckResult) problemf(format string, args ...any) {
	res.Problems = append(res.Problems, fmt.Sprintf(format, args...))
}

// Check verifies a store (beside a running writer too): every block's
// meta against its data, every part's checksum, every trace decoding, the
// write-ahead files. The bucket is o.Bucket (nil: DIR's blocks).
func Check(dir string, o Options) (CheckResult, error) {
	o.ReadOnly = true
	s, err := Open(dir, o)
	if err != nil {
		return CheckResult{}, err
	}
	defer s.Close()
	return s.check(false)
}

// Rebuild checks a store no writer holds open and repairs what the blocks
// alone allow: a meta that disagrees with its data is written again from
// the data (catalogue, times, counts), a data object without meta (a
// crash between the two uploads) gets its meta when no other block or
// write-ahead file holds its traces, and unreadable blocks are reported.
// There is no global index to rebuild: every query reads the blocks'
// own.
func Rebuild(dir string, o Options) (CheckResult, error) {
	if o.Bucket == nil && !isV1(dir) {
		// (Open would make a new store there.)
		if err := checkStoreDir(dir); err != nil {
			return CheckResult{}, err
		}
	}
	o.ReadOnly = false
	s, err := Open(dir, o)
	if err != nil {
		return CheckResult{}, err
	}
	defer s.Close()
	return s.check(true)
}

func (s *Store) check(repair bool) (CheckResult, error) {
	ctx := s.ctx
	var res CheckResult
	objs, err := s.bucket.List(ctx, block.Prefix)
	if err != nil {
		return res, err
	}
	metas := map[string]bool{}
	var orphans []string
	for _, o := range objs {
		if _, _, name, ok := block.ParseKey(o.Key); ok && name == block.MetaName {
			metas[o.Key[:len(o.Key)-len(name)]] = true
		}
	}
	for _, o := range objs {
		if _, _, name, ok := block.ParseKey(o.Key); ok && name == block.DataName && !metas[o.Key[:len(o.Key)-len(name)]] {
			orphans = append(orphans, o.Key)
		}
	}
	s.refreshMu.Lock()
	l, err := s.listBlocks(ctx)
	s.refreshMu.Unlock()
	if err != nil {
		return res, err
	}
	res.Problems = append(res.Problems, l.problems...)
	ids := map[trace.ID]uint8{} // the blocks each trace id is in (up to 2)
	for _, p := range s.partitions() {
		res.Hosts++
		p.mu.RLock()
		blocks := slices.Clone(p.blocks)
		res.WAL += len(p.sealed)
		for _, h := range p.sealed {
			res.Traces += h.count()
		}
		p.mu.RUnlock()
		for _, b := range blocks {
			res.Blocks++
			s.countIDs(ctx, b, ids, &res)
			n, err := s.checkBlock(ctx, b.key, b.meta)
			res.Traces += n
			if err == nil {
				continue
			}
			res.problemf("block %s: %v", b.key, err)
			if !repair {
				continue
			}
			if m, rerr := s.metaFromData(ctx, b.key, b.meta); rerr == nil {
				if perr := s.putMeta(ctx, m); perr == nil {
					res.Repaired = append(res.Repaired, fmt.Sprintf("block %s: meta written again from its data", b.key))
				}
			}
		}
	}
	for _, key := range orphans {
		res.problemf("%s: a data object without meta (not part of the store)", key)
		if !repair {
			continue
		}
		host, id, _, _ := block.ParseKey(key)
		if s.hasBlock(id) || s.walHolds(id) {
			continue
		}
		m, err := s.metaFromData(ctx, key, &block.Meta{Version: block.Version, ID: id, Host: host})
		if err != nil {
			res.problemf("%s: %v", key, err)
			continue
		}
		if err := s.putMeta(ctx, m); err == nil {
			res.Repaired = append(res.Repaired, fmt.Sprintf("%s: meta written from its data", key))
		}
	}
	res.Problems = append(res.Problems, s.recovery.Truncated...)
	return res, nil
}

// countIDs counts the trace ids of a block already found in another
// (res.InSeveral), from the block's index.
func (s *Store) countIDs(ctx context.Context, b *blockRef, ids map[trace.ID]uint8, res *CheckResult) {
	if res.Uncounted {
		return
	}
	bi, err := s.index(ctx, b)
	if err != nil {
		return // checkBlock reports it
	}
	for i := range bi.rows {
		id := bi.rows[i].ID
		if i > 0 && bi.rows[i-1].ID == id {
			continue // parts in one block (rows sorted by id)
		}
		switch n := ids[id]; {
		case n == 1:
			res.InSeveral++
			ids[id] = 2
		case n == 0:
			if len(ids) >= maxCheckIDs {
				res.Uncounted = true
				return
			}
			ids[id] = 1
		}
	}
}

// walHolds reports whether a write-ahead file of that id is read.
func (s *Store) walHolds(id string) bool {
	for _, p := range s.partitions() {
		p.mu.RLock()
		found := slices.ContainsFunc(p.sealed, func(h *head) bool { return h.id == id })
		p.mu.RUnlock()
		if found {
			return true
		}
	}
	return false
}

// checkBlock reads every part of a block and decodes every trace; it
// returns the traces that decoded.
func (s *Store) checkBlock(ctx context.Context, key string, m *block.Meta) (int, error) {
	r, err := block.Open(ctx, s.bucket, key, m.Size)
	if err != nil {
		return 0, err
	}
	if err := m.Matches(r.Size(), r.Footer, r.FooterCRC); err != nil {
		return 0, err
	}
	rows, err := r.Verify(ctx)
	if err != nil {
		return 0, err
	}
	dict, _ := r.Dict(ctx)
	pages, _ := r.Pages(ctx)
	terms, _ := r.Terms(ctx)
	syms := &symbols{names: dict}
	// The index row of each page's traces, and, for the term index, the
	// rows that hold each term by the traces themselves.
	_, first := pageOrder(rows, pages)
	rowAt := make([]uint32, len(rows))
	for ri := range rows {
		if at := first[rows[ri].Page] + rows[ri].Index; int(at) < len(rowAt) {
			rowAt[at] = uint32(ri)
		}
	}
	var want [][]uint32
	if terms != nil {
		want = make([][]uint32, terms.Len())
	}
	var buf []block.Term
	n := 0
	for i := range pages {
		bodies, err := r.Page(ctx, pages, i)
		if err != nil {
			return n, err
		}
		for j, body := range bodies {
			t, err := decodeTrace(body, syms)
			if err != nil {
				return n, fmt.Errorf("page %d, trace %d: %w", i, j, err)
			}
			if terms != nil && int(first[i])+j < len(rowAt) {
				ri := rowAt[int(first[i])+j]
				buf = appendTerms(buf[:0], t)
				for _, tm := range buf {
					k, ok := terms.Lookup(tm.Key, tm.Value)
					if !ok {
						return n, fmt.Errorf("page %d, trace %d (%s): term %q=%.40q not in the term index", i, j, t.ID, tm.Key, tm.Value)
					}
					if l := len(want[k]); l == 0 || want[k][l-1] != ri {
						want[k] = append(want[k], ri)
					}
				}
			}
			n++
		}
	}
	if n != len(rows) {
		return n, fmt.Errorf("%d traces in the pages, %d in the index", n, len(rows))
	}
	for k := range want {
		got := make([]uint32, 0, terms.Count(k))
		terms.Rows(k, func(r uint32) { got = append(got, r) })
		slices.Sort(want[k])
		if !slices.Equal(got, want[k]) {
			key, value, _ := terms.Term(k)
			return n, fmt.Errorf("term index: term %q=%.40q lists %d traces, %d hold it", key, value, len(got), len(want[k]))
		}
	}
	return n, nil
}

// metaFromData makes a block's meta from its data alone (keeping what only
// the old meta knows: created, level, compaction sources).
func (s *Store) metaFromData(ctx context.Context, key string, old *block.Meta) (*block.Meta, error) {
	objs, err := s.bucket.List(ctx, key)
	if err != nil || len(objs) != 1 {
		return nil, fmt.Errorf("%s: cannot size the data object: %v", key, err)
	}
	r, err := block.Open(ctx, s.bucket, key, objs[0].Size)
	if err != nil {
		return nil, err
	}
	if _, err := r.Verify(ctx); err != nil {
		return nil, err
	}
	dict, _ := r.Dict(ctx)
	pages, _ := r.Pages(ctx)
	syms := &symbols{names: dict}
	h := newHeadValue(old.ID, old.Host, "", s.opt.Now())
	for i := range pages {
		bodies, err := r.Page(ctx, pages, i)
		if err != nil {
			return nil, err
		}
		for _, body := range bodies {
			t, err := decodeTrace(body, syms)
			if err != nil {
				return nil, err
			}
			row := summarize(t, syms)
			h.note(t, &row, len(body))
		}
	}
	m := &block.Meta{Version: int(r.Footer.Version), ID: old.ID, Host: old.Host, Level: old.Level, Created: old.Created, CompactedFrom: old.CompactedFrom,
		Traces: int(r.Footer.Traces), Size: r.Size(), FooterCRC: r.FooterCRC, Spans: h.spans}
	if m.Created.IsZero() {
		m.Created = s.opt.Now().UTC()
	}
	if m.Traces > 0 {
		m.MinStart, m.MaxEnd = h.minStart, h.maxEnd
	}
	h.fillMeta(m)
	return m, nil
}

func (s *Store) putMeta(ctx context.Context, m *block.Meta) error {
	mb, err := block.MarshalMeta(m)
	if err != nil {
		return err
	}
	return s.bucket.Put(ctx, block.Dir(m.Host, m.ID)+block.MetaName, mb)
}
