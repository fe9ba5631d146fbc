package store

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/tracebridge/tracebridge/internal/store/block"
)

func (s *Store) kickUploader() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// uploader turns cut heads into blocks, in order, retrying with back-off
// while the bucket fails; a head's file is deleted once its block is
// listed.
func (s *Store) uploader() {
	defer s.uploadWG.Done()
	backoff := time.Duration(0)
	failing := 0
	for {
		s.walMu.Lock()
		var h *head
		if len(s.sealed) > 0 {
			h = s.sealed[0]
		}
		s.uploading = h
		s.walMu.Unlock()
		if s.built.h != h {
			s.built = builtBlock{} // its head left the queue (its host deleted)
		}
		s.removeUploaded(false)
		s.removeRetired(false)
		if h == nil {
			select {
			case <-s.ctx.Done():
				return
			case <-s.kick:
			case <-time.After(uploadedGrace / 2):
			}
			continue
		}
		err := s.upload(h)
		if err == nil {
			if failing > 0 {
				s.opt.Logger.Info("store: uploads go through again", "after_failures", failing)
			}
			failing, backoff = 0, 0
			continue
		}
		if s.ctx.Err() != nil {
			return
		}
		failing++
		s.uploadFailures.Add(1)
		if failing == 1 || failing%20 == 0 {
			s.opt.Logger.Warn("store: block upload failed; retrying (the traces wait in the write-ahead area)", "host", h.host, "block", h.id, "failures", failing, "err", err)
		}
		backoff = min(max(2*backoff, 100*time.Millisecond), 30*time.Second)
		select {
		case <-s.ctx.Done():
			return
		case <-time.After(backoff):
		}
	}
}

// upload writes a cut head as a block: the data object, then its meta;
// then the block joins the partition and the head's file goes.
func (s *Store) upload(h *head) error {
	// A retry puts the block the last try built (a bucket away for an
	// hour would otherwise have the same block built every 30 s).
	if s.built.h != h {
		s.built = builtBlock{}
		if err := s.restoreIndex(h); err != nil {
			return err
		}
		data, meta, err := s.buildBlock(h)
		if err != nil {
			return err
		}
		s.built = builtBlock{h: h, data: data, meta: meta}
		s.blocksBuilt.Add(1)
	}
	data, meta := s.built.data, s.built.meta
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Minute)
	defer cancel()
	if err := s.putBlock(ctx, data, meta); err != nil {
		if len(data) > 1 {
			// Kept through the retries in one part of its size: the
			// writer's segments have room left in them.
			s.built.data = [][]byte{slices.Concat(data...)}
		}
		return err
	}
	s.built = builtBlock{}
	p := s.partition(h.host)
	ref := s.newBlockRef(meta)
	p.mu.Lock()
	p.addBlock(ref)
	p.sealed = slices.DeleteFunc(p.sealed, func(x *head) bool { return x == h })
	p.mu.Unlock()
	h.close()
	s.walMu.Lock()
	// The file goes a while later: a search that began before the block
	// was listed may still read the head.
	s.uploaded = append(s.uploaded, uploadedHead{path: h.path, at: time.Now()})
	s.dropSealed(h)
	s.walMu.Unlock()
	return nil
}

// builtBlock is the block the uploader built of head h, kept while its
// upload is retried.
type builtBlock struct {
	h    *head
	data [][]byte
	meta *block.Meta
}

// restoreIndex reads the index of h, the head uploading, back into
// memory when it was evicted: h keeps it through the upload's retries
// (counted among the cut heads' indexes again; evictSealed never takes
// the head uploading, and others leave memory for it).
func (s *Store) restoreIndex(h *head) error {
	// Only evictSealed writes these, under walMu, and never those of
	// s.uploading: the uploader reads them as they were when it took h.
	if !h.evicted {
		return nil
	}
	r, err := s.reloadIndex(h, h.traces, h.off)
	if err != nil {
		return err
	}
	s.walMu.Lock()
	defer s.walMu.Unlock()
	if !slices.Contains(s.sealed, h) {
		return fmt.Errorf("store: cut head %s left the upload queue (its host deleted)", h.id)
	}
	if h.attrs != nil {
		s.evictedAttrs -= h.attrs.Size()
	}
	p := s.partition(h.host)
	p.mu.Lock()
	h.restore(r)
	p.mu.Unlock()
	h.sealedIndex = h.indexSize()
	s.sealedIndex += h.sealedIndex
	s.evictSealed()
	return nil
}

// maxReloads bounds the evicted heads' indexes that searches hold read
// back at once (each about a head's index: the upload queue's memory
// bound is twice head_size and this many heads more).
const maxReloads = 2

// readEvicted reads the index of h, evicted, back for a search (see
// reloadIndex) once fewer than maxReloads others are held; release lets
// it go (it must be called once).
func (s *Store) readEvicted(ctx context.Context, h *head, traces int, off int64) (r *head, release func(), err error) {
	select {
	case s.reloads <- struct{}{}:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	release = func() { <-s.reloads }
	if r, err = s.reloadIndex(h, traces, off); err != nil {
		release()
		return nil, nil, err
	}
	return r, release, nil
}

// uploadedHead is the write-ahead file of a head whose block is listed.
type uploadedHead struct {
	path string
	at   time.Time
}

// uploadedGrace is how long a searched head's file outlives its upload
// (longer than any search's budget).
const uploadedGrace = 2 * time.Minute

// removeUploaded deletes the files of uploaded heads (all of them, or
// those past their grace).
func (s *Store) removeUploaded(all bool) {
	s.walMu.Lock()
	var due []string
	keep := s.uploaded[:0]
	for _, u := range s.uploaded {
		if all || time.Since(u.at) > uploadedGrace {
			due = append(due, u.path)
		} else {
			keep = append(keep, u)
		}
	}
	s.uploaded = keep
	s.walMu.Unlock()
	for _, path := range due {
		if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
			s.opt.Logger.Warn("store: write-ahead file not deleted", "path", path, "err", err)
		}
	}
}

// readFault logs a trace a search could not read, a few per second at
// most (a damaged block holds many; each search would name them all).
func (s *Store) readFault(msg string, args ...any) {
	s.readFaults.Log(context.Background(), s.opt.Logger, slog.LevelWarn, msg, args...)
}

// retiredBlock is a block that a compaction replaced, deleted once no
// search that began before can still read it.
type retiredBlock struct {
	ref *blockRef
	at  time.Time
}

// removeRetired deletes the blocks compactions replaced (all of them, or
// those past uploadedGrace). Only the compactor deletes them (MayCompact):
// a store that lost the role keeps them listed here (it deletes them if
// it gets the role back); meanwhile the compactor of the moment deletes
// them (sweepReplaced), since the compacted block's meta names them.
func (s *Store) removeRetired(all bool) {
	if !s.mayCompact() {
		return
	}
	s.walMu.Lock()
	var due []*blockRef
	keep := s.retired[:0]
	for _, r := range s.retired {
		if all || time.Since(r.at) > uploadedGrace {
			due = append(due, r.ref)
		} else {
			keep = append(keep, r)
		}
	}
	s.retired = keep
	s.walMu.Unlock()
	if len(due) == 0 {
		return
	}
	// Not s.ctx: Close removes them after it is cancelled.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i, b := range due {
		if err := s.deleteBlock(ctx, b); err != nil {
			// The meta of the block that replaced it names it: the
			// compactor's sweep (sweepReplaced) or the next Open deletes
			// it and the others.
			s.deleteFailed("store: compacted blocks were not deleted; deleted later", err,
				"blocks", len(due)-i, "block", b.meta.ID, "host", b.meta.Host)
			return
		}
		s.deleted()
	}
}

// deleteFailed logs a failed deletion from the bucket when it is the
// first since deletions last worked: a bucket away fails every one.
func (s *Store) deleteFailed(msg string, err error, args ...any) {
	if s.deleteFaults.Fail() {
		s.opt.Logger.Warn(msg, append(args, "err", err)...)
	}
}

// deleted notes a deletion from the bucket that worked, and logs the end
// of an outage of them.
func (s *Store) deleted() {
	if n := s.deleteFaults.Recover(); n > 0 {
		s.opt.Logger.Info("store: deleting from the bucket works again", "failures", n)
	}
}

// putBlock writes a block's data object (its parts, block.Writer's
// FinishParts), then its meta.
func (s *Store) putBlock(ctx context.Context, data [][]byte, meta *block.Meta) error {
	if err := s.putData(ctx, data, meta); err != nil {
		return err
	}
	return s.publishMeta(ctx, meta)
}

// putData writes a block's data object: nothing lists it until its meta
// is written (publishMeta).
func (s *Store) putData(ctx context.Context, data [][]byte, meta *block.Meta) error {
	if err := s.bucket.Put(ctx, block.Dir(meta.Host, meta.ID)+block.DataName, data...); err != nil {
		return fmt.Errorf("store: block %s of host %s: %w", meta.ID, meta.Host, err)
	}
	return nil
}

// publishMeta writes a block's meta, and its announcement when other stores
// write into the bucket too: then the block is there for every reader.
func (s *Store) publishMeta(ctx context.Context, meta *block.Meta) error {
	dir := block.Dir(meta.Host, meta.ID)
	mb, err := block.MarshalMeta(meta)
	if err != nil {
		return err
	}
	if err := s.bucket.Put(ctx, dir+block.MetaName, mb); err != nil {
		return fmt.Errorf("store: block %s of host %s: meta: %w", meta.ID, meta.Host, err)
	}
	if s.opt.Node != "" {
		// The other writers of the bucket learn of it from the
		// announcements (listing.go).
		if err := s.bucket.Put(ctx, announcePrefix+meta.ID, mb); err != nil {
			return fmt.Errorf("store: block %s of host %s: announcement: %w", meta.ID, meta.Host, err)
		}
	}
	return nil
}

// addBlock adds a block in MinStart order (p.mu is held).
func (p *partition) addBlock(b *blockRef) {
	i, _ := slices.BinarySearchFunc(p.blocks, b, func(x, y *blockRef) int {
		switch {
		case x.meta.MinStart != y.meta.MinStart:
			if x.meta.MinStart < y.meta.MinStart {
				return -1
			}
			return 1
		case x.meta.ID < y.meta.ID:
			return -1
		case x.meta.ID > y.meta.ID:
			return 1
		}
		return 0
	})
	if i < len(p.blocks) && p.blocks[i].meta.ID == b.meta.ID {
		return
	}
	p.blocks = slices.Insert(p.blocks, i, b)
}

// buildBlock makes a cut head's block from its file.
func (s *Store) buildBlock(h *head) ([][]byte, *block.Meta, error) {
	w := block.NewWriter(s.opt.PageSize)
	// The rows are read in the head (its file's traces are its rows, in
	// order), not copied.
	w.ReadRows(h.rows.at)
	w.Grow(h.rows.len())
	// The filter's attribute pairs are about the distinct terms (the
	// term index lists status messages and exceptions' attributes too).
	w.GrowTerms(h.filter.attrPairs)
	f, err := os.Open(h.path)
	if err != nil {
		return nil, nil, fmt.Errorf("store: %w", err)
	}
	defer f.Close()
	row := 0
	syms := &symbols{names: h.syms.names}
	var terms []block.Term
	var buf blockBuf // the chunks are read one after the other into it
	for i, off := range h.chunks {
		ch, raw, err := readBlockInto(f, off, &buf)
		if err != nil {
			return nil, nil, fmt.Errorf("store: %s chunk %d: %w", h.path, i, err)
		}
		pl, err := parsePayload(raw, ch.version)
		if err != nil {
			return nil, nil, fmt.Errorf("store: %s chunk %d: %w", h.path, i, err)
		}
		for _, body := range pl.traces {
			if row >= h.rows.len() {
				return nil, nil, fmt.Errorf("store: %s: more traces than rows", h.path)
			}
			// The trace's terms, for the term index, read from its body
			// (the head keeps no terms: they would cost memory for every
			// trace not yet in a block).
			terms, err = bodyTerms(terms[:0], body, syms)
			if err != nil {
				return nil, nil, fmt.Errorf("store: %s chunk %d: %w", h.path, i, err)
			}
			w.Add(body, *h.rows.at(row), terms...)
			row++
		}
	}
	if row != h.rows.len() {
		return nil, nil, fmt.Errorf("store: %s: %d traces in the file, %d rows", h.path, row, h.rows.len())
	}
	data, st, err := w.FinishParts(h.syms.names, h.filter.bloom())
	if err != nil {
		return nil, nil, fmt.Errorf("store: block of %s: %w", h.path, err)
	}
	m := &block.Meta{Version: block.Version, ID: h.id, Host: h.host, Node: s.opt.Node, Created: s.opt.Now().UTC(),
		MinStart: st.MinStart, MaxEnd: st.MaxEnd, Traces: st.Traces, Spans: st.Spans, Size: st.Size, FooterCRC: st.FooterCRC}
	h.fillMeta(m)
	return data, m, nil
}

// fillMeta sets what a head knows beyond the block's stats: its
// catalogue, hosts, errors and longest duration.
func (h *head) fillMeta(m *block.Meta) {
	m.Services, m.Names = h.cat.metaOf()
	for hs := range h.hosts {
		m.Hosts = append(m.Hosts, hs)
	}
	slices.Sort(m.Hosts)
	m.ErrorTraces = h.errTrace
	m.MaxDuration = h.maxDur
	if len(h.shared) > 0 {
		m.Shared = maps.Clone(h.shared)
	}
}
