package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// HostTable is what the store asks of the host table kept outside it
// (internal/hostdb, wired by the store sink): the bounds of a host's
// partition and whether its traces are taken; and what it tells it: which
// hosts sent the traces it stores. Options.Hosts nil: no host bounds,
// every host's traces taken, no contact recorded.
type HostTable interface {
	// Policy says what the table says of host name's traces (the zero
	// HostPolicy for a host it does not know). It is called under the
	// store's writer lock, once per host per Append and Retain: it must be
	// quick and must not call the store.
	Policy(name string) HostPolicy
	// Contact records that traces of host name (of any source) were
	// stored at: its last contact, and the host itself when the table does
	// not know it. Same rules as Policy.
	Contact(name string, at time.Time)
}

// HostPolicy bounds a host's partition (0: unbounded; the oldest whole
// segments go first) and says whether its traces are dropped.
type HostPolicy struct {
	MaxSize  int64
	MaxAge   time.Duration
	Disabled bool
}

// Partition is what the store keeps of a host: its partition's id and the
// host's share of traces kept in other hosts' partitions.
type Partition struct {
	Name string `json:"name"`
	ID   uint32 `json:"id"`
	// Shared is the host's share of the traces kept in other hosts'
	// partitions (those rooted elsewhere with spans of this host): the
	// encoded bytes of each such trace split by spans, as appended (best
	// effort, not synced; retention of the other partitions does not
	// lower it).
	Shared int64 `json:"shared,omitempty"`
}

// partitionRecord is a partition's record in the index (key 'H' name).
// Records without V are host records of the store's version before the
// host table moved out (internal/hostdb): Open keeps them for
// LegacyHosts.
type partitionRecord struct {
	V int `json:"v"`
	Partition
}

// partitionVersion marks partition records (legacy host records have no
// "v").
const partitionVersion = 2

// Sentinel errors of partitions.
var ErrNoHost = errors.New("no such host")

// Partitions returns every host that has a partition, by name.
func (s *Store) Partitions() []Partition {
	ps := s.partitions()
	out := make([]Partition, 0, len(ps))
	for _, p := range ps {
		out = append(out, Partition{Name: p.name, ID: p.id, Shared: p.shared.Load()})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LegacyHosts returns the host records (JSON) of a store written before
// the host table moved out of it (internal/hostdb), for the host table to
// import; DropLegacyHosts then reduces them to partition records.
func (s *Store) LegacyHosts() [][]byte {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return slices.Clone(s.legacy)
}

// DropLegacyHosts rewrites the legacy host records as partition records
// (name, id, shared bytes): their other fields are the host table's now.
func (s *Store) DropLegacyHosts() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed || s.opt.ReadOnly {
		return ErrClosed
	}
	if len(s.legacy) == 0 {
		return nil
	}
	b := s.db.NewBatch()
	for _, p := range s.partitions() {
		b.Set(keyHostRecord(p.name), p.record(), nil)
	}
	if err := b.Commit(pebble.Sync); err != nil {
		return fmt.Errorf("store %s: rewriting host records: %w", s.dir, err)
	}
	s.legacy = nil
	return nil
}

func (p *partition) record() []byte {
	b, _ := json.Marshal(partitionRecord{V: partitionVersion, Partition: Partition{Name: p.name, ID: p.id, Shared: p.shared.Load()}})
	return b
}

// readPartitions reads the partition records (and legacy host records).
func (s *Store) readPartitions() ([]Partition, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kHostRc}, UpperBound: []byte{kHostRc + 1}})
	if err != nil {
		return nil, err
	}
	var out []Partition
	for it.First(); it.Valid(); it.Next() {
		var r partitionRecord
		if err := json.Unmarshal(it.Value(), &r); err != nil {
			it.Close()
			return nil, fmt.Errorf("host record %q: %w", it.Key()[1:], err)
		}
		if r.V == 0 {
			s.legacy = append(s.legacy, slices.Clone(it.Value()))
		}
		out = append(out, r.Partition)
	}
	return out, it.Close()
}

// createPartition adds a partition record with a new id. The writer lock
// is held.
func (s *Store) createPartition(name string) (*partition, error) {
	if name == "" || strings.ContainsAny(name, "\x00") {
		return nil, fmt.Errorf("host name %q: want a non-empty name", name)
	}
	var next uint32 = 1
	if v, c, err := s.db.Get(keyNextHost); err == nil {
		if len(v) == 4 {
			next = binary.BigEndian.Uint32(v)
		}
		c.Close()
	}
	// The partition's directory names its host, so that the segments
	// alone rebuild the store.
	dir := filepath.Join(s.dir, "hosts", strconv.FormatUint(uint64(next), 10))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, hostNameFile), []byte(name+"\n"), 0o644); err != nil {
		return nil, err
	}
	p := &partition{id: next, name: name}
	batch := s.db.NewBatch()
	batch.Set(keyHostRecord(name), p.record(), nil)
	batch.Set(keyNextHost, binary.BigEndian.AppendUint32(nil, next+1), nil)
	if err := batch.Commit(pebble.Sync); err != nil {
		return nil, err
	}
	return s.addPartition(next, name), nil
}

// putPartition writes a partition record (Rebuild).
func (s *Store) putPartition(p *partition) error {
	return s.db.Set(keyHostRecord(p.name), p.record(), pebble.Sync)
}

// shareLocked adds bytes to p's share of traces kept in other
// partitions. The writer lock is held.
func (s *Store) shareLocked(p *partition, bytes int64) {
	p.shared.Add(bytes)
	s.db.Set(keyHostRecord(p.name), p.record(), pebble.NoSync)
}

// DeletePartition removes host name's partition: every trace of it and
// its record (the host's record in the host table is not the store's).
// ErrNoHost when the store has no partition of the host.
func (s *Store) DeletePartition(name string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed || s.opt.ReadOnly {
		return ErrClosed
	}
	s.pmu.RLock()
	p := s.byName[name]
	s.pmu.RUnlock()
	if p == nil {
		return fmt.Errorf("%w: %s", ErrNoHost, name)
	}
	if err := s.syncLocked(); err != nil {
		return err
	}
	segs, err := p.segments()
	if err != nil {
		return err
	}
	if p.seg != nil {
		p.seg.Close()
		p.seg = nil
	}
	for _, n := range segs {
		if err := s.dropSegment(p, n); err != nil {
			return err
		}
	}
	os.RemoveAll(p.dir)
	s.pmu.Lock()
	delete(s.byName, name)
	delete(s.byID, p.id)
	s.pmu.Unlock()
	batch := s.db.NewBatch()
	batch.Delete(keyHostRecord(name), nil)
	batch.DeleteRange(keySymbol(p.id, 0), keySymbol(p.id+1, 0), nil)
	batch.Delete(keyMark(p.id), nil)
	return batch.Commit(pebble.Sync)
}
