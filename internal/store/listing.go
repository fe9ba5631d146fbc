package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/store/block"
)

// The block list. A store lists the bucket at Open; a reader beside a
// writer (Options.ReadOnly) lists it again when a query comes, at most
// every Refresh; a writer sharing its bucket with others (Options.Node)
// lists it in the background every ListAll, and at once when a read finds
// a block gone. A listing is one List of the blocks' keys (S3: a request
// per 1,000 keys, two keys a block) and a Get of each meta not read
// before: its cost grows with the blocks (BenchmarkListShared: about half
// a CPU-second of the client's at 10,000 blocks), not with what changed.
//
// So that the others see a block within about Refresh without listing
// every block, a shared writer announces each block it writes: after its
// meta it puts a copy of the meta under recent/<id>. Every Refresh the
// others list recent/ (one request while it holds under 1,000) and read
// the announcements they have not read; the compactor deletes those older
// than announceKeep, so recent/ holds the blocks of the last minutes
// whatever the store's size. An announcement adds a block (and drops those
// its compaction replaced); what the others delete is seen by the full
// listing (or by a read that finds a block gone).

// announcePrefix is where shared writers announce their blocks.
const announcePrefix = "recent/"

// announceKeep is how long an announcement stays: much longer than a full
// listing's interval, so that a block is seen by one or the other.
var announceKeep = 10 * time.Minute

// listing is what one listing of the bucket found.
type listing struct {
	// refs are the blocks of the store: every meta that reads, with its
	// data, and not replaced by a compaction.
	refs []*blockRef
	// problems name the metas skipped (unreadable, without data, of
	// another size).
	problems []string
	// ids holds the id of every meta listed (replaced or not).
	ids map[string]bool
	// replaced are the blocks that a listed compacted block names.
	replaced []replacedBlock
}

// replacedBlock is a block a compaction replaced, with the creation time
// of the block that replaced it.
type replacedBlock struct {
	ref *blockRef
	by  time.Time
}

// metaFetchers bounds the metas a listing reads at once.
const metaFetchers = 8

// listBlocks lists the bucket's blocks, reading the metas it has not read
// before (s.metas; the caller holds refreshMu).
func (s *Store) listBlocks(ctx context.Context) (listing, error) {
	objs, err := s.bucket.List(ctx, block.Prefix)
	if err != nil {
		return listing{}, fmt.Errorf("listing blocks: %w", err)
	}
	data := map[string]int64{} // block dir → data size
	var dirs []string          // of the metas
	for _, o := range objs {
		_, _, name, ok := block.ParseKey(o.Key)
		if !ok {
			continue
		}
		dir := strings.TrimSuffix(o.Key, name)
		if name == block.DataName {
			data[dir] = o.Size
		} else {
			dirs = append(dirs, dir)
		}
	}
	// The metas not read before, several at once.
	metas := make(map[string]*block.Meta, len(dirs))
	var todo []string
	for _, dir := range dirs {
		if m := s.metas[dir]; m != nil {
			metas[dir] = m
		} else {
			todo = append(todo, dir)
		}
	}
	fetched, fetchErr := s.readMetas(ctx, todo, block.MetaName)
	var l listing
	l.ids = make(map[string]bool, len(dirs))
	for i, dir := range todo {
		switch err := fetchErr[i]; {
		case errors.Is(err, objstore.ErrNotExist):
			// deleted between the list and the get
		case errors.As(err, new(*objstore.Error)):
			return listing{}, err
		case err != nil:
			l.problems = append(l.problems, fmt.Sprintf("block %s: %v (skipped)", dir, err))
		default:
			metas[dir] = fetched[i]
		}
	}
	for _, dir := range dirs {
		m := metas[dir]
		if m == nil {
			continue
		}
		host, id, _, _ := block.ParseKey(dir + block.MetaName)
		if m.ID != id || m.Host != host {
			l.problems = append(l.problems, fmt.Sprintf("block %s: meta names block %s of host %s (skipped)", dir, m.ID, m.Host))
			continue
		}
		l.ids[id] = true
		size, ok := data[dir]
		if !ok {
			l.problems = append(l.problems, fmt.Sprintf("block %s: meta without data (skipped)", dir))
			continue
		}
		if size != m.Size {
			l.problems = append(l.problems, fmt.Sprintf("block %s: meta says %d bytes, the data object has %d (skipped)", dir, m.Size, size))
			continue
		}
		l.refs = append(l.refs, &blockRef{meta: m, key: dir + block.DataName})
	}
	// The metas read are kept for the next listing (only those still
	// listed).
	clear(s.metas)
	for _, r := range l.refs {
		s.metas[block.Dir(r.meta.Host, r.meta.ID)] = r.meta
	}
	// Blocks a compaction replaced leave the list at once (their
	// replacement holds their traces).
	replaced := map[string]time.Time{}
	for _, r := range l.refs {
		for _, id := range r.meta.CompactedFrom {
			replaced[r.meta.Host+"\x00"+id] = r.meta.Created
		}
	}
	if len(replaced) > 0 {
		l.refs = slices.DeleteFunc(l.refs, func(r *blockRef) bool {
			by, ok := replaced[r.meta.Host+"\x00"+r.meta.ID]
			if ok {
				l.replaced = append(l.replaced, replacedBlock{ref: r, by: by})
			}
			return ok
		})
	}
	return l, nil
}

// readMetas reads the metas under each prefix+suffix, metaFetchers at
// once.
func (s *Store) readMetas(ctx context.Context, prefixes []string, suffix string) ([]*block.Meta, []error) {
	fetched := make([]*block.Meta, len(prefixes))
	fetchErr := make([]error, len(prefixes))
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(metaFetchers, len(prefixes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				p, err := s.bucket.Get(ctx, prefixes[i]+suffix)
				if err != nil {
					fetchErr[i] = err
					continue
				}
				fetched[i], fetchErr[i] = block.ParseMeta(p)
			}
		}()
	}
	for i := range prefixes {
		next <- i
	}
	close(next)
	wg.Wait()
	return fetched, fetchErr
}

// relistAnnounced takes in the blocks announced under recent/ since it
// last looked: they join their partitions (the blocks a compaction of
// theirs replaced leave them).
func (s *Store) relistAnnounced() error {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	return s.relistAnnouncedLocked()
}

// relistAnnouncedLocked is relistAnnounced with refreshMu held.
func (s *Store) relistAnnouncedLocked() error {
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	objs, err := s.bucket.List(ctx, announcePrefix)
	if err != nil {
		return fmt.Errorf("listing the announced blocks: %w", err)
	}
	listed := make(map[string]bool, len(objs))
	var ids []string
	s.staleAnnounced = s.staleAnnounced[:0]
	old := time.Now().Add(-announceKeep)
	// An announcement made well before the last full listing began is of
	// a block that listing read, or of one gone before it (a compaction's
	// sources, deleted a little later): not read again.
	listedAll := s.lastList.Add(-time.Minute)
	for _, o := range objs {
		id := strings.TrimPrefix(o.Key, announcePrefix)
		if !block.ValidID(id) {
			continue
		}
		listed[id] = true
		if o.Modified.Before(old) {
			s.staleAnnounced = append(s.staleAnnounced, o.Key)
		}
		if !s.announced[id] {
			if o.Modified.Before(listedAll) {
				s.announced[id] = true
				continue
			}
			ids = append(ids, id)
		}
	}
	for id := range s.announced {
		if !listed[id] {
			delete(s.announced, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	// Blocks the full listing read already need no second read.
	known := make(map[string]bool, len(s.metas))
	for _, m := range s.metas {
		known[m.ID] = true
	}
	ids = slices.DeleteFunc(ids, func(id string) bool {
		if known[id] {
			s.announced[id] = true
			return true
		}
		return false
	})
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = announcePrefix + id
	}
	metas, errs := s.readMetas(ctx, keys, "")
	epoch := s.listEpoch.Load()
	for i, m := range metas {
		if errs[i] != nil {
			if errors.As(errs[i], new(*objstore.Error)) && !errors.Is(errs[i], objstore.ErrNotExist) {
				return errs[i] // read again next time
			}
			s.announced[ids[i]] = true // unreadable, or gone: not read again
			continue
		}
		s.announced[ids[i]] = true
		if m.ID != ids[i] {
			continue
		}
		s.goneMu.Lock()
		gone := s.gone[m.ID]
		s.goneMu.Unlock()
		if gone {
			continue
		}
		dir := block.Dir(m.Host, m.ID)
		s.metas[dir] = m
		p := s.partition(m.Host)
		p.mu.Lock()
		if len(m.CompactedFrom) > 0 {
			p.blocks = slices.DeleteFunc(p.blocks, func(b *blockRef) bool { return slices.Contains(m.CompactedFrom, b.meta.ID) })
		}
		p.addBlock(&blockRef{meta: m, key: dir + block.DataName, epoch: epoch})
		p.mu.Unlock()
		s.cat.addMeta(m)
	}
	return nil
}

// sweepAnnounced deletes the announcements older than announceKeep (the
// compactor's work).
func (s *Store) sweepAnnounced() {
	s.refreshMu.Lock()
	stale := slices.Clone(s.staleAnnounced)
	s.staleAnnounced = s.staleAnnounced[:0]
	s.refreshMu.Unlock()
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	for _, key := range stale {
		if err := s.bucket.Delete(ctx, key); err != nil {
			s.deleteFailed("store: old block announcements were not deleted; deleted later", err, "key", key)
			return
		}
		s.deleted()
	}
}

// loadBlocks reads the block list at open. A store of its own deletes the
// blocks a compaction replaced (a crash came between writing the
// compacted block and deleting them); a store sharing its bucket leaves
// them to the compactor (Compact), after their grace.
func (s *Store) loadBlocks() error {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	began := time.Now()
	l, err := s.listBlocks(s.ctx)
	if err != nil {
		return err
	}
	s.lastList = began
	for _, pr := range l.problems {
		s.opt.Logger.Warn("store: "+pr, "dir", s.dir)
	}
	for _, r := range l.refs {
		p := s.partition(r.meta.Host)
		p.mu.Lock()
		p.addBlock(r)
		p.mu.Unlock()
		s.cat.addMeta(r.meta)
	}
	switch {
	case s.opt.ReadOnly:
	case s.opt.Node == "" && s.mayCompact():
		for _, r := range l.replaced {
			s.deleteBlock(s.ctx, r.ref)
		}
	default:
		s.replaced = l.replaced
	}
	return nil
}

// mayCompact says whether this store may delete and compact blocks now
// (Options.MayCompact).
func (s *Store) mayCompact() bool { return s.opt.MayCompact == nil || s.opt.MayCompact() }

// shared reports whether other stores write into the bucket too.
func (s *Store) shared() bool { return s.opt.Node != "" && !s.opt.ReadOnly }

// relist lists the bucket unless a listing began after since (a caller
// that found a block gone at since needs a listing begun later; several
// at once share one), and takes the list in: the blocks new to it join
// their partitions, those it no longer holds that joined before it began
// leave them. It returns the ids of every meta listed (nil when a listing
// begun after since is taken instead).
func (s *Store) relist(since time.Time) (map[string]bool, error) {
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	return s.relistLocked(since)
}

// relistLocked is relist with refreshMu held.
func (s *Store) relistLocked(since time.Time) (map[string]bool, error) {
	if s.lastList.After(since) {
		return nil, nil
	}
	began := time.Now()
	start := s.listEpoch.Add(1)
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	l, err := s.listBlocks(ctx)
	if err != nil {
		return nil, err
	}
	s.lastList = began
	s.replaced = l.replaced
	known := map[string]bool{}
	parts := s.partitions()
	for _, p := range parts {
		p.mu.RLock()
		for _, b := range p.blocks {
			known[b.meta.ID] = true
		}
		p.mu.RUnlock()
	}
	listed := make(map[string]bool, len(l.refs))
	s.goneMu.Lock()
	for _, r := range l.refs {
		listed[r.meta.ID] = true
		if known[r.meta.ID] || s.gone[r.meta.ID] {
			continue
		}
		r.epoch = start
		p := s.partition(r.meta.Host)
		p.mu.Lock()
		p.addBlock(r)
		p.mu.Unlock()
		s.cat.addMeta(r.meta)
	}
	// An id taken out stays out until no listing shows it (one that began
	// before it was deleted still may).
	for id := range s.gone {
		if !l.ids[id] {
			delete(s.gone, id)
		}
	}
	s.goneMu.Unlock()
	for _, p := range s.partitions() {
		p.mu.Lock()
		p.blocks = slices.DeleteFunc(p.blocks, func(b *blockRef) bool {
			if listed[b.meta.ID] || b.epoch >= start {
				return false
			}
			s.dropCached(b)
			return true
		})
		p.mu.Unlock()
	}
	return l.ids, nil
}

// takeOut marks blocks this store removes (retention, compaction,
// deletion): no listing brings them back.
func (s *Store) takeOut(blocks ...*blockRef) {
	s.goneMu.Lock()
	for _, b := range blocks {
		s.gone[b.meta.ID] = true
	}
	s.goneMu.Unlock()
}

// dropCached forgets what the cache holds of a block.
func (s *Store) dropCached(b *blockRef) {
	s.cache.dropPrefix(b.meta.ID + "/")
	s.pages.dropPrefix(b.meta.ID + "/")
}

// vanished reports whether err says a block's objects are gone (deleted
// by retention or a compaction, of this store or another) and, if so,
// takes the block out of its partition and asks the lister for a new
// listing: the block's traces are gone, or in the block that replaced it.
func (s *Store) vanished(b *blockRef, err error) bool {
	if b == nil || !errors.Is(err, objstore.ErrNotExist) {
		return false
	}
	p := s.partition(b.meta.Host)
	p.mu.Lock()
	p.blocks = slices.DeleteFunc(p.blocks, func(x *blockRef) bool { return x.meta.ID == b.meta.ID })
	p.mu.Unlock()
	s.takeOut(b)
	s.dropCached(b)
	s.opt.Logger.Debug("store: a block is gone from the bucket; listing again", "block", b.meta.ID, "host", b.meta.Host)
	select {
	case s.relistReq <- struct{}{}:
	default:
	}
	return true
}

// lister, for a writer that shares its bucket (Options.Node), lists the
// announcements every Refresh, and every block every ListAll or, when a
// listing takes longer than a tenth of that, ten times as long as the
// last one took (the full listing's share of the time stays under a
// tenth), and when a read found a block gone.
func (s *Store) lister() {
	defer s.uploadWG.Done()
	t := time.NewTicker(s.opt.Refresh)
	defer t.Stop()
	failing := 0
	every := s.opt.ListAll
	last := time.Now() // Open listed
	for {
		all := false
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			all = time.Since(last) >= every
		case <-s.relistReq:
			all = true
		}
		var err error
		if all {
			began := time.Now()
			_, err = s.relist(began)
			last = time.Now()
			every = max(s.opt.ListAll, listDuty*last.Sub(began))
		} else {
			err = s.relistAnnounced()
		}
		switch {
		case err == nil:
			if failing > 0 {
				s.opt.Logger.Info("store: listing the shared bucket works again", "after_failures", failing)
			}
			failing = 0
		case s.ctx.Err() != nil:
			return
		default:
			failing++
			if failing == 1 || failing%20 == 0 {
				s.opt.Logger.Warn("store: listing the shared bucket failed; the blocks of other nodes are seen later", "failures", failing, "err", err)
			}
		}
	}
}

// listDuty: a shared writer waits at least this many times as long as its
// last full listing took before the next.
const listDuty = 10

// refresh, for a reader beside a writer, takes in the blocks uploaded and
// the write-ahead written since it last looked (at most every Refresh).
func (s *Store) refresh() {
	if !s.opt.ReadOnly {
		return
	}
	s.refreshMu.Lock()
	defer s.refreshMu.Unlock()
	now := s.opt.Now()
	if now.Sub(s.lastRefresh) < s.opt.Refresh {
		return
	}
	s.lastRefresh = now
	if s.opt.Node != "" && time.Since(s.lastList) < s.opt.ListAll {
		// A reader of a shared bucket: the announcements, and every
		// block every ListAll.
		if err := s.relistAnnouncedLocked(); err != nil {
			s.opt.Logger.Warn("store: refreshing the block list", "err", err)
		}
		return
	}
	listed, err := s.relistLocked(time.Now())
	if err != nil {
		s.opt.Logger.Warn("store: refreshing the block list", "err", err)
		return
	}
	heads := map[string]*head{}
	for _, p := range s.partitions() {
		p.mu.Lock()
		// A head whose block is listed now is gone from the writer's
		// write-ahead area.
		p.sealed = slices.DeleteFunc(p.sealed, func(h *head) bool { return listed[h.id] })
		for _, h := range p.sealed {
			heads[h.path] = h
		}
		p.mu.Unlock()
	}
	root := filepath.Join(s.dir, walDir)
	dirs, _ := os.ReadDir(root)
	for _, d := range dirs {
		files, _ := os.ReadDir(filepath.Join(root, d.Name()))
		for _, f := range files {
			id, ok := strings.CutSuffix(f.Name(), walExt)
			if !ok || !block.ValidID(id) || listed[id] {
				continue
			}
			path := filepath.Join(root, d.Name(), f.Name())
			err = s.loadWALFile(path, id, heads[path]) // nil: a new file
			if err != nil {
				s.opt.Logger.Warn("store: reading a write-ahead file", "path", path, "err", err)
			}
		}
	}
}
