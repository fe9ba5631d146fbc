package store

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// segStat is what retention knows of a segment.
type segStat struct {
	p      *partition
	n      uint32
	size   int64
	maxEnd int64 // latest span end in it (0: empty)
}

func (s *Store) segStats(p *partition) ([]segStat, error) {
	segs, err := p.segments()
	if err != nil {
		return nil, err
	}
	p.bmu.RLock()
	ends := map[uint32]int64{}
	for _, b := range p.blocks {
		if b.maxEnd > ends[b.seg] {
			ends[b.seg] = b.maxEnd
		}
	}
	p.bmu.RUnlock()
	out := make([]segStat, 0, len(segs))
	for _, n := range segs {
		st, err := os.Stat(filepath.Join(p.dir, segName(n)))
		if err != nil {
			continue
		}
		out = append(out, segStat{p: p, n: n, size: st.Size(), maxEnd: ends[n]})
	}
	return out, nil
}

// Retain drops the oldest whole segments of every host beyond its own
// bounds (the host table's HostPolicy, Options.Hosts) and then of the store beyond
// Options.MaxAge and MaxSize, trimming the index with them. It returns the
// number of segments dropped.
func (s *Store) Retain() (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed || s.opt.ReadOnly {
		return 0, ErrClosed
	}
	now := s.opt.Now().UnixNano()
	dropped := 0
	var all []segStat
	var total int64
	for _, p := range s.partitions() {
		stats, err := s.segStats(p)
		if err != nil {
			return dropped, err
		}
		var h HostPolicy
		if s.opt.Hosts != nil {
			h = s.opt.Hosts.Policy(p.name)
		}
		var size int64
		for _, st := range stats {
			size += st.size
		}
		for len(stats) > 0 {
			old := stats[0]
			tooOld := h.MaxAge > 0 && old.maxEnd > 0 && now-old.maxEnd > int64(h.MaxAge)
			tooBig := h.MaxSize > 0 && size > h.MaxSize
			if !tooOld && !tooBig {
				break
			}
			if err := s.dropSegment(p, old.n); err != nil {
				return dropped, err
			}
			dropped++
			size -= old.size
			stats = stats[1:]
		}
		all = append(all, stats...)
		total += size
	}
	sort.Slice(all, func(i, j int) bool { return all[i].maxEnd < all[j].maxEnd })
	for len(all) > 0 {
		old := all[0]
		tooOld := s.opt.MaxAge > 0 && old.maxEnd > 0 && now-old.maxEnd > int64(s.opt.MaxAge)
		tooBig := s.opt.MaxSize > 0 && total > s.opt.MaxSize
		if !tooOld && !tooBig {
			break
		}
		if err := s.dropSegment(old.p, old.n); err != nil {
			return dropped, err
		}
		dropped++
		total -= old.size
		all = all[1:]
	}
	if dropped > 0 {
		s.opt.Logger.Info("store retention dropped old segments", "dir", s.dir, "segments", dropped)
	}
	return dropped, nil
}

// dropSegment deletes segment n of p and the index entries of its traces.
// The writer lock is held.
func (s *Store) dropSegment(p *partition, n uint32) error {
	if p.seg != nil && p.segNo == n {
		// The segment being written: write what is pending, close it;
		// the next block begins a new one.
		if err := s.writeBlock(p); err != nil {
			return err
		}
		if err := s.syncLocked(); err != nil {
			return err
		}
		p.seg.Close()
		p.seg = nil
	}
	batch := s.db.NewBatch()
	p.bmu.Lock()
	var keep []*blockMeta
	var gone []*blockMeta
	for _, b := range p.blocks {
		if b.seg == n {
			gone = append(gone, b)
		} else {
			keep = append(keep, b)
		}
	}
	p.blocks = keep
	p.bmu.Unlock()
	for _, b := range gone {
		loc := location{host: p.id, seg: n, off: b.off}
		pl, err := s.block(loc)
		if err == nil {
			p.smu.RLock()
			for _, body := range pl.traces {
				t, err := decodeTrace(body, p.syms)
				if err != nil {
					continue
				}
				start := t.Start()
				s.deleteIndexOf(batch, t.ID, start, indexHosts(t, p.name))
			}
			p.smu.RUnlock()
		}
		batch.Delete(keyBlock(p.id, n, b.off), nil)
	}
	if err := batch.Commit(pebble.Sync); err != nil {
		return err
	}
	s.cache.drop(p.id, n)
	s.fmu.Lock()
	if f := s.files[[2]uint32{p.id, n}]; f != nil {
		f.Close()
		delete(s.files, [2]uint32{p.id, n})
	}
	s.fmu.Unlock()
	if err := os.Remove(filepath.Join(p.dir, segName(n))); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("store: host %s: %w", p.name, err)
	}
	return nil
}

// deleteIndexOf deletes a trace's index entries, unless the id entry now
// points elsewhere (a later part of the trace).
func (s *Store) deleteIndexOf(batch *pebble.Batch, id trace.ID, start int64, hosts []string) {
	for _, h := range hosts {
		s.pmu.RLock()
		hp := s.byName[h]
		s.pmu.RUnlock()
		if hp == nil {
			continue
		}
		if v, c, err := s.db.Get(keyHost(hp.id, start, id)); err == nil {
			if ref, ok := unmarshalRef(id, v); ok {
				ref.Start = start
				for _, k := range secondaryKeys(hp.id, &ref) {
					batch.Delete(k, nil)
				}
			}
			c.Close()
		}
		batch.Delete(keyHost(hp.id, start, id), nil)
	}
	if v, c, err := s.db.Get(keyTrace(id)); err == nil {
		ref, ok := unmarshalLocation(id, v)
		c.Close()
		if ok && ref.Start == start {
			batch.Delete(keyTrace(id), nil)
		}
	}
}

// Size returns the bytes of the store's segments and index.
func (s *Store) Size() int64 {
	var n int64
	filepath.WalkDir(s.dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// HostSize returns the bytes of a host's segments and its share of the
// traces kept in other hosts' partitions (Partition.Shared).
func (s *Store) HostSize(name string) int64 {
	s.pmu.RLock()
	p := s.byName[name]
	s.pmu.RUnlock()
	if p == nil {
		return 0
	}
	n := p.shared.Load()
	stats, _ := s.segStats(p)
	for _, st := range stats {
		n += st.size
	}
	return n
}

var _ = time.Second
