package store

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tracebridge/tracebridge/internal/hostauth"
)

// Host is a monitored host: its partition of the store and what the
// receivers check when it connects (ZICO's host table).
type Host struct {
	Name string `json:"name"`
	ID   uint32 `json:"id"`
	// Addr, when set, is the only address the host may connect from
	// (with security on).
	Addr string `json:"addr,omitempty"`
	// Secret is the argon2id hash of the host's secret ("" when none):
	// never the secret itself.
	Secret  string `json:"secret,omitempty"`
	Group   string `json:"group,omitempty"`
	Comment string `json:"comment,omitempty"`
	// MaxSize (bytes) and MaxAge bound the host's partition (0:
	// unbounded); the oldest whole segments go first.
	MaxSize int64         `json:"maxSize,omitempty"`
	MaxAge  time.Duration `json:"maxAge,omitempty"`
	// Disabled hosts' traces are dropped (and answered OK).
	Disabled    bool      `json:"disabled,omitempty"`
	Created     time.Time `json:"created"`
	LastContact time.Time `json:"lastContact,omitzero"`
	// Shared is the host's share of the traces kept in other hosts'
	// partitions (those rooted elsewhere with spans of this host): the
	// encoded bytes of each such trace split by spans, as appended (best
	// effort, not synced; retention of the other partitions does not
	// lower it).
	Shared int64 `json:"shared,omitempty"`
}

// Sentinel errors of host management.
var (
	ErrNoHost     = errors.New("no such host")
	ErrHostExists = errors.New("host exists")
)

// Hosts returns every host, by name.
func (s *Store) Hosts() ([]Host, error) {
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kHostRc}, UpperBound: []byte{kHostRc + 1}})
	if err != nil {
		return nil, err
	}
	var out []Host
	for it.First(); it.Valid(); it.Next() {
		var h Host
		if err := json.Unmarshal(it.Value(), &h); err != nil {
			it.Close()
			return nil, fmt.Errorf("host record %q: %w", it.Key()[1:], err)
		}
		out = append(out, h)
	}
	return out, it.Close()
}

// Host returns the named host.
func (s *Store) Host(name string) (Host, error) {
	h, ok := s.hostRecord(name)
	if !ok {
		return Host{}, fmt.Errorf("%w: %s", ErrNoHost, name)
	}
	return h, nil
}

func (s *Store) hostRecord(name string) (Host, bool) {
	v, c, err := s.db.Get(keyHostRecord(name))
	if err != nil {
		return Host{}, false
	}
	defer c.Close()
	var h Host
	if json.Unmarshal(v, &h) != nil {
		return Host{}, false
	}
	return h, true
}

// createHost adds a host record with a new id. The writer lock is held.
func (s *Store) createHost(h Host) (Host, error) {
	if h.Name == "" || strings.ContainsAny(h.Name, "\x00") {
		return Host{}, fmt.Errorf("host name %q: want a non-empty name", h.Name)
	}
	if _, ok := s.hostRecord(h.Name); ok {
		return Host{}, fmt.Errorf("%w: %s", ErrHostExists, h.Name)
	}
	var next uint32 = 1
	if v, c, err := s.db.Get(keyNextHost); err == nil {
		if len(v) == 4 {
			next = binary.BigEndian.Uint32(v)
		}
		c.Close()
	}
	h.ID = next
	if h.Created.IsZero() {
		h.Created = s.opt.Now().UTC()
	}
	// The partition's directory names its host, so that the segments
	// alone rebuild the store.
	dir := filepath.Join(s.dir, "hosts", strconv.FormatUint(uint64(h.ID), 10))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Host{}, err
	}
	if err := os.WriteFile(filepath.Join(dir, hostNameFile), []byte(h.Name+"\n"), 0o644); err != nil {
		return Host{}, err
	}
	b, _ := json.Marshal(h)
	batch := s.db.NewBatch()
	batch.Set(keyHostRecord(h.Name), b, nil)
	batch.Set(keyNextHost, binary.BigEndian.AppendUint32(nil, next+1), nil)
	if err := batch.Commit(pebble.Sync); err != nil {
		return Host{}, err
	}
	return h, nil
}

// putHost writes a host record as it is (Rebuild).
func (s *Store) putHost(h Host) error {
	b, _ := json.Marshal(h)
	return s.db.Set(keyHostRecord(h.Name), b, pebble.Sync)
}

// AddHost creates a host (secret, when not empty, is hashed).
func (s *Store) AddHost(h Host, secret string) (Host, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed || s.opt.ReadOnly {
		return Host{}, ErrClosed
	}
	if secret != "" {
		h.Secret = hostauth.HashSecret(secret)
	}
	h, err := s.createHost(h)
	if err != nil {
		return Host{}, err
	}
	s.addPartition(h.ID, h.Name)
	return h, nil
}

// UpdateHost changes a host: update gets the record and changes it (it
// may not change the name or id).
func (s *Store) UpdateHost(name string, update func(*Host) error) (Host, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed || s.opt.ReadOnly {
		return Host{}, ErrClosed
	}
	h, ok := s.hostRecord(name)
	if !ok {
		return Host{}, fmt.Errorf("%w: %s", ErrNoHost, name)
	}
	id := h.ID
	if err := update(&h); err != nil {
		return Host{}, err
	}
	h.Name, h.ID = name, id
	b, _ := json.Marshal(h)
	if err := s.db.Set(keyHostRecord(name), b, pebble.Sync); err != nil {
		return Host{}, err
	}
	return h, nil
}

// Touch records a host's last contact (best effort, not synced).
func (s *Store) Touch(name string, at time.Time) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed || s.opt.ReadOnly {
		return
	}
	if h, ok := s.hostRecord(name); ok {
		s.touchLocked(h, at)
	}
}

// touchLocked records a host's last contact at most once a second. The
// writer lock is held.
func (s *Store) touchLocked(h Host, at time.Time) {
	if at.Sub(h.LastContact) < time.Second {
		return
	}
	h.LastContact = at.UTC()
	b, _ := json.Marshal(h)
	s.db.Set(keyHostRecord(h.Name), b, pebble.NoSync)
}

// shareLocked records spans of h in traces kept in other partitions:
// contact (at) and bytes, their share of those traces. The writer lock is
// held.
func (s *Store) shareLocked(h Host, bytes int64, at time.Time) {
	h.Shared += bytes
	h.LastContact = at.UTC()
	b, _ := json.Marshal(h)
	s.db.Set(keyHostRecord(h.Name), b, pebble.NoSync)
}

// DeleteHost removes a host and every trace of its partition.
func (s *Store) DeleteHost(name string) error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed || s.opt.ReadOnly {
		return ErrClosed
	}
	h, ok := s.hostRecord(name)
	if !ok {
		return fmt.Errorf("%w: %s", ErrNoHost, name)
	}
	p := s.partitionByID(h.ID)
	if p != nil {
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
		delete(s.byID, h.ID)
		s.pmu.Unlock()
	}
	batch := s.db.NewBatch()
	batch.Delete(keyHostRecord(name), nil)
	batch.DeleteRange(keySymbol(h.ID, 0), keySymbol(h.ID+1, 0), nil)
	batch.Delete(keyMark(h.ID), nil)
	return batch.Commit(pebble.Sync)
}
