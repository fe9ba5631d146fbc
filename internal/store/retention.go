package store

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/tracebridge/tracebridge/internal/store/block"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Retain deletes the oldest whole blocks of every host beyond its own
// bounds (the host table's max_age and max_size) and then of the store
// beyond Options.MaxAge and MaxSize. It returns the number of blocks
// deleted. Heads are never deleted (they are the newest traces); ingest
// goes on meanwhile: only the block list is locked, and only to take a
// block out of it.
func (s *Store) Retain() (int, error) {
	if s.opt.ReadOnly {
		return 0, ErrClosed
	}
	if !s.mayCompact() {
		return 0, nil
	}
	if s.shared() {
		// The bounds are the bucket's: every node's blocks count (a
		// listing of the last half ListAll will do).
		if _, err := s.relist(time.Now().Add(-s.opt.ListAll / 2)); err != nil {
			return 0, fmt.Errorf("store: retention: %w", err)
		}
	}
	now := s.opt.Now().UnixNano()
	var victims []*blockRef
	type aged struct {
		p *partition
		b *blockRef
	}
	var all []aged
	var total int64
	for _, p := range s.partitions() {
		var maxAge time.Duration
		var maxSize int64
		if s.opt.Hosts != nil {
			pol := s.opt.Hosts.Policy(p.host)
			maxAge, maxSize = pol.MaxAge, pol.MaxSize
		}
		size := p.size()
		p.mu.RLock()
		blocks := slices.Clone(p.blocks)
		p.mu.RUnlock()
		slices.SortFunc(blocks, func(a, b *blockRef) int { return cmp.Compare(a.meta.MaxEnd, b.meta.MaxEnd) })
		for len(blocks) > 0 {
			old := blocks[0]
			tooOld := maxAge > 0 && now-old.meta.MaxEnd > int64(maxAge)
			tooBig := maxSize > 0 && size > maxSize
			if !tooOld && !tooBig {
				break
			}
			victims = append(victims, old)
			size -= old.meta.Size
			blocks = blocks[1:]
		}
		for _, b := range blocks {
			all = append(all, aged{p, b})
		}
		total += size
	}
	slices.SortFunc(all, func(a, b aged) int { return cmp.Compare(a.b.meta.MaxEnd, b.b.meta.MaxEnd) })
	for len(all) > 0 {
		old := all[0]
		tooOld := s.opt.MaxAge > 0 && now-old.b.meta.MaxEnd > int64(s.opt.MaxAge)
		tooBig := s.opt.MaxSize > 0 && total > s.opt.MaxSize
		if !tooOld && !tooBig {
			break
		}
		victims = append(victims, old.b)
		total -= old.b.meta.Size
		all = all[1:]
	}
	dropped := 0
	for _, b := range victims {
		if !s.mayCompact() {
			break // another node runs retention now
		}
		if err := s.dropBlock(b); err != nil {
			return dropped, err
		}
		dropped++
	}
	if dropped > 0 {
		s.opt.Logger.Info("store retention deleted old blocks", "dir", s.dir, "blocks", dropped)
	}
	return dropped, nil
}

// dropBlock takes a block out of its partition and deletes it.
func (s *Store) dropBlock(b *blockRef) error {
	p := s.partition(b.meta.Host)
	p.mu.Lock()
	p.blocks = slices.DeleteFunc(p.blocks, func(x *blockRef) bool { return x == b })
	p.mu.Unlock()
	s.takeOut(b)
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	if err := s.deleteBlock(ctx, b); err != nil {
		return fmt.Errorf("store: deleting block %s of host %s: %w", b.meta.ID, b.meta.Host, err)
	}
	return nil
}

// Compact merges each host's small blocks (smaller than CompactBelow)
// into larger ones (up to about CompactTo), oldest first, as Tempo's
// compactor does: the parts of a trace in those blocks become one trace.
// The new block is written (with the ids it replaces in its meta) before
// the old ones are deleted, so a crash in between loses nothing and
// duplicates nothing (Open deletes the replaced blocks). It returns the
// number of blocks merged away.
func (s *Store) Compact() (int, error) {
	if s.opt.ReadOnly {
		return 0, ErrClosed
	}
	if !s.mayCompact() {
		return 0, nil
	}
	if s.shared() {
		// Every node's blocks (a listing of the last half ListAll: the
		// lister's, or retention's just before); and what other
		// compactions replaced goes once its grace has passed.
		if _, err := s.relist(time.Now().Add(-s.opt.ListAll / 2)); err != nil {
			return 0, fmt.Errorf("store: compaction: %w", err)
		}
		s.sweepReplaced()
		s.sweepAnnounced()
	}
	merged := 0
	for _, p := range s.partitions() {
		for s.mayCompact() {
			group := s.compactGroup(p)
			if len(group) < 2 {
				break
			}
			err := s.compactBlocks(p, group)
			if errors.Is(err, errGroupGone) {
				continue // a block of it is gone (deleted elsewhere): it left the list
			}
			if errors.Is(err, errNotCompactor) {
				s.opt.Logger.Info("store compaction stopped: another node compacts now (MayCompact turned false); the blocks it was merging stay as they are",
					"dir", s.dir, "host", p.host, "blocks", len(group))
				return merged, nil
			}
			if err != nil {
				return merged, err
			}
			merged += len(group) - 1
		}
	}
	if merged > 0 {
		s.opt.Logger.Info("store compaction merged blocks", "dir", s.dir, "blocks", merged)
	}
	return merged, nil
}

// compactGroup picks the oldest run of small blocks of p to merge.
func (s *Store) compactGroup(p *partition) []*blockRef {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var group []*blockRef
	var size int64
	for _, b := range p.blocks { // by MinStart
		if b.meta.Size >= s.opt.CompactBelow {
			if len(group) >= 2 {
				return group
			}
			group, size = group[:0], 0
			continue
		}
		group = append(group, b)
		size += b.meta.Size
		if size >= s.opt.CompactTo {
			return group
		}
	}
	return group
}

// errGroupGone: a block of a compaction's group is gone from the bucket.
var errGroupGone = errors.New("a block to compact is gone")

// errNotCompactor: MayCompact turned false while a compaction read its
// blocks; it wrote nothing (or took back the data object it wrote).
var errNotCompactor = errors.New("no longer the compactor")

// compactBlocks writes one block with the traces of group (parts of a
// trace merged); the group is deleted after uploadedGrace.
//
// It streams: a trace found once in the group (nearly all) is decoded,
// encoded into the new block and let go, the blocks read page by page;
// only the parts of a trace found several times wait, decoded, until the
// last is read. What it holds beyond the group's indexes (which a search
// holds too) is 16 bytes a trace, the parts waiting and the new block.
func (s *Store) compactBlocks(p *partition, group []*blockRef) error {
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Minute)
	defer cancel()
	level := 0
	var from []string
	views := make([]*view, len(group))
	rows := 0
	for i, b := range group {
		level = max(level, b.meta.Level+1)
		from = append(from, b.meta.ID)
		v, err := s.blockView(ctx, p, b)
		if s.vanished(b, err) {
			return errGroupGone
		}
		if err != nil {
			return fmt.Errorf("store: compacting host %s: %w", p.host, err)
		}
		views[i] = v
		rows += v.rows.len()
	}
	parts := partsOf(views, rows)
	waiting := map[trace.ID][]*trace.Trace{}
	h := newHeadValue(block.NewID(s.opt.Now()), p.host, "", s.opt.Now())
	// A span in several blocks (a partition taken over in a cluster
	// assembled again what was not yet acknowledged) is written once:
	// trace.MergeParts keeps one span per span id.
	w := block.NewWriter(s.opt.PageSize)
	w.Grow(rows)
	var terms []block.Term
	write := func(t *trace.Trace) {
		body := h.enc.encodeTrace(t)
		row := summarize(t, h.syms)
		h.note(t, &row, len(body))
		terms = appendTerms(terms[:0], t)
		w.Add(body, row, terms...)
	}
	var order []uint32
	for i, v := range views {
		b := group[i]
		// The rows in the order of their pages: each page is read once.
		order = order[:0]
		for j := range v.rows.len() {
			order = append(order, uint32(j))
		}
		slices.SortFunc(order, func(x, y uint32) int {
			a, b := v.rows.at(int(x)), v.rows.at(int(y))
			return cmp.Or(cmp.Compare(a.Page, b.Page), cmp.Compare(a.Index, b.Index))
		})
		for _, j := range order {
			row := v.rows.at(int(j))
			body, err := v.body(ctx, row)
			if s.vanished(b, err) {
				return errGroupGone
			}
			if err != nil {
				return fmt.Errorf("store: compacting host %s: %w", p.host, err)
			}
			t, err := v.decode(body)
			if err == nil && t.ID != row.ID {
				err = fmt.Errorf("%w: trace %s in the row of %s", errCorrupt, t.ID, row.ID)
			}
			if err != nil {
				return fmt.Errorf("store: compacting host %s: block %s: %w", p.host, b.meta.ID, err)
			}
			n, several := parts[t.ID]
			if !several {
				write(t)
				continue
			}
			ps := append(waiting[t.ID], t)
			if len(ps) < n {
				waiting[t.ID] = ps
				continue
			}
			delete(waiting, t.ID)
			slices.SortFunc(ps, func(a, b *trace.Trace) int {
				return cmp.Or(cmp.Compare(a.Part, b.Part), cmp.Compare(a.Start(), b.Start()))
			})
			t = trace.MergeParts(ps)
			t.Part = 0
			write(t)
		}
	}
	if len(waiting) > 0 {
		return fmt.Errorf("store: compacting host %s: %d traces' parts not all read", p.host, len(waiting))
	}
	data, st, err := w.FinishParts(h.syms.names, h.filter.bloom())
	if err != nil {
		return err
	}
	m := &block.Meta{Version: block.Version, ID: h.id, Host: p.host, Node: s.opt.Node, Level: level, Created: s.opt.Now().UTC(), MinStart: st.MinStart, MaxEnd: st.MaxEnd,
		Traces: st.Traces, Spans: st.Spans, Size: st.Size, FooterCRC: st.FooterCRC, CompactedFrom: from}
	h.fillMeta(m)
	// Reading the group may take long (a bucket far away, big blocks):
	// the lease that made this node the compactor may have passed to
	// another node meanwhile, which compacts the same blocks. Ask again
	// before the block is written, and before its meta (which makes it
	// visible and replaces the group) is.
	if !s.mayCompact() {
		return errNotCompactor
	}
	if err := s.putData(ctx, data, m); err != nil {
		return err
	}
	if !s.mayCompact() {
		key := block.Dir(m.Host, m.ID) + block.DataName
		if err := s.bucket.Delete(ctx, key); err != nil {
			// A data object without meta is no part of the store:
			// listings skip it, `tracebridge store check` reports it.
			s.opt.Logger.Warn("store: the data of a compaction given up was not deleted", "key", key, "err", err)
		}
		return errNotCompactor
	}
	if err := s.publishMeta(ctx, m); err != nil {
		return err
	}
	ref := s.newBlockRef(m)
	s.takeOut(group...)
	p.mu.Lock()
	p.blocks = slices.DeleteFunc(p.blocks, func(x *blockRef) bool { return slices.Contains(group, x) })
	p.addBlock(ref)
	p.mu.Unlock()
	// The replaced blocks go after a grace (a search that began before
	// may still read them); listings already skip them (the new meta
	// names them), and a crash before leaves them to the next Open.
	now := time.Now()
	s.walMu.Lock()
	for _, b := range group {
		s.retired = append(s.retired, retiredBlock{ref: b, at: now})
	}
	s.walMu.Unlock()
	return nil
}

// sweepReplaced deletes the blocks that a compaction of any node replaced
// more than twice uploadedGrace ago: their compactor deletes them after
// uploadedGrace, unless it stopped before (a crash, a lost lease).
func (s *Store) sweepReplaced() {
	s.refreshMu.Lock()
	var due []*blockRef
	for _, r := range s.replaced {
		if time.Since(r.by) > 2*uploadedGrace {
			due = append(due, r.ref)
		}
	}
	s.refreshMu.Unlock()
	if len(due) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	for _, b := range due {
		if err := s.deleteBlock(ctx, b); err != nil {
			s.deleteFailed("store: blocks replaced by a compaction were not deleted; deleted later", err,
				"block", b.meta.ID, "host", b.meta.Host)
			return
		}
		s.deleted()
	}
	s.opt.Logger.Info("store: deleted blocks that an earlier compaction replaced", "blocks", len(due))
}

// partsOf returns the traces found more than once in the views' rows
// (rows of them in all), with how many times.
func partsOf(views []*view, rows int) map[trace.ID]int {
	ids := make([]trace.ID, 0, rows)
	for _, v := range views {
		for i := range v.rows.len() {
			ids = append(ids, v.rows.at(i).ID)
		}
	}
	slices.SortFunc(ids, func(a, b trace.ID) int { return cmp.Or(cmp.Compare(a.Hi, b.Hi), cmp.Compare(a.Lo, b.Lo)) })
	parts := map[trace.ID]int{}
	for i := 0; i < len(ids); {
		j := i + 1
		for j < len(ids) && ids[j] == ids[i] {
			j++
		}
		if j-i > 1 {
			parts[ids[i]] = j - i
		}
		i = j
	}
	return parts
}
