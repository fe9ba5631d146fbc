package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"
)

// Partition describes a host's part of the store.
type Partition struct {
	Name string `json:"name"`
	// Size is the bytes of its blocks and write-ahead files; Shared the
	// host's share of traces kept in other hosts' partitions (HostSize is
	// both).
	Size   int64 `json:"size"`
	Shared int64 `json:"shared,omitempty"`
	Blocks int   `json:"blocks"`
	Traces int   `json:"traces"`
	// Oldest and Newest bound its traces' times (unix ns; 0 when empty).
	Oldest int64 `json:"oldest,omitempty"`
	Newest int64 `json:"newest,omitempty"`
}

// ErrNoHost is returned for a host the store has no partition of.
var ErrNoHost = errors.New("no such host")

// Partitions describes every host that holds traces, by name.
func (s *Store) Partitions() []Partition {
	s.refresh()
	var out []Partition
	ps := s.partitions()
	for _, p := range ps {
		pi := Partition{Name: p.host, Size: p.size()}
		for _, o := range ps {
			if o != p {
				pi.Shared += o.sharedOf(p.host)
			}
		}
		p.mu.RLock()
		span := func(lo, hi int64, n int) {
			if n == 0 {
				return
			}
			if pi.Traces == 0 || lo < pi.Oldest {
				pi.Oldest = lo
			}
			pi.Newest = max(pi.Newest, hi)
			pi.Traces += n
		}
		for _, b := range p.blocks {
			span(b.meta.MinStart, b.meta.MaxEnd, b.meta.Traces)
		}
		pi.Blocks = len(p.blocks)
		for _, h := range append(slices.Clip(p.sealed), p.head) {
			if h != nil {
				span(h.minStart, h.maxEnd, h.count())
			}
		}
		p.mu.RUnlock()
		if pi.Traces > 0 || pi.Blocks > 0 {
			out = append(out, pi)
		}
	}
	return out
}

// DeletePartition removes host name's partition: every block and head of
// it (the host's record in the host table is not the store's). ErrNoHost
// when the store has no partition of the host.
func (s *Store) DeletePartition(name string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed || s.opt.ReadOnly {
		return ErrClosed
	}
	s.pmu.RLock()
	p := s.parts[name]
	s.pmu.RUnlock()
	if p == nil {
		return fmt.Errorf("%w: %s", ErrNoHost, name)
	}
	// Its head is cut (so that nothing is being written), and its cut
	// heads leave the upload queue.
	if err := s.cut(p); err != nil {
		return err
	}
	p.mu.Lock()
	heads, blocks := p.sealed, p.blocks
	p.sealed, p.blocks = nil, nil
	p.mu.Unlock()
	s.takeOut(blocks...)
	s.walMu.Lock()
	for _, h := range heads {
		s.dropSealed(h)
	}
	s.walMu.Unlock()
	for _, h := range heads {
		h.close()
		os.Remove(h.path)
	}
	ctx, cancel := context.WithTimeout(s.ctx, time.Minute)
	defer cancel()
	for _, b := range blocks {
		if err := s.deleteBlock(ctx, b); err != nil {
			return fmt.Errorf("store: deleting host %s: %w", name, err)
		}
	}
	s.pmu.Lock()
	delete(s.parts, name)
	s.pmu.Unlock()
	return nil
}

// LegacyHosts returns the host records (JSON) of a store of version 1
// converted by this Open (version 1 kept them in its index), for the
// host table to import; DropLegacyHosts forgets them.
func (s *Store) LegacyHosts() [][]byte {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return slices.Clone(s.legacy)
}

// DropLegacyHosts forgets the legacy host records once the host table has
// them (the converted store's old index, kept aside, still holds them).
func (s *Store) DropLegacyHosts() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.legacy = nil
	return nil
}

// legacyRecord reports whether an 'H' value of a version 1 index is a
// host record (not a partition record, which has "v").
func legacyRecord(v []byte) bool {
	var probe struct {
		V    int    `json:"v"`
		Name string `json:"name"`
	}
	return json.Unmarshal(v, &probe) == nil && probe.V == 0 && probe.Name != "" && bytes.HasPrefix(bytes.TrimSpace(v), []byte("{"))
}
