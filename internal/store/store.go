package store

import (
	"container/list"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/tracebridge/tracebridge/internal/store/block"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Options configure a Store. Zero values mean the defaults.
type Options struct {
	// BlockSize is the uncompressed size at which a host's pending traces
	// are written as a block (default 256 KiB); a Sync writes them too.
	BlockSize int
	// SegmentSize and SegmentAge: a host's segment is closed and a new
	// one begun when it reaches this size (default 64 MiB) or age
	// (default 1 h). Retention drops whole segments.
	SegmentSize int64
	SegmentAge  time.Duration
	// MaxAge and MaxSize bound the whole store (0: unbounded); hosts have
	// their own bounds too (Hosts).
	MaxAge  time.Duration
	MaxSize int64
	// Hosts is the host table: each host's bounds, whether its traces
	// are dropped, and who sent traces (nil: no host bounds, nothing
	// dropped, no contact recorded).
	Hosts HostTable
	// CacheSize bounds the decompressed blocks kept for reading (default
	// 64 MiB).
	CacheSize int64
	// ReadOnly opens the store for queries and checks only.
	ReadOnly bool
	// Logger hears about recovery and retention.
	Logger *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.BlockSize <= 0 {
		o.BlockSize = 256 << 10
	}
	if o.SegmentSize <= 0 {
		o.SegmentSize = 64 << 20
	}
	if o.SegmentAge <= 0 {
		o.SegmentAge = time.Hour
	}
	if o.CacheSize <= 0 {
		o.CacheSize = 64 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Recovery says what Open found.
type Recovery struct {
	// Traces indexed again from segment blocks written before a crash
	// but not yet in the index.
	Traces int
	// Truncated names the segment tails cut off (torn blocks of a crash),
	// with their offsets and sizes.
	Truncated []string
}

// Store is a trace store (see the package comment).
type Store struct {
	dir string
	db  *pebble.DB
	opt Options

	wmu   sync.Mutex // the writer: Append, Sync, retention, hosts
	batch *pebble.Batch
	dirty map[*partition]bool // segments written since the last sync

	pmu    sync.RWMutex
	byName map[string]*partition
	byID   map[uint32]*partition

	fmu   sync.Mutex
	files map[[2]uint32]*os.File // read handles by (host, segment)

	cache *blockCache
	cat   *catalog

	recovery Recovery
	closed   bool
	// legacy are the host records of a store written before the host
	// table moved out (LegacyHosts).
	legacy [][]byte
}

// partition is one host's part of the store.
type partition struct {
	id   uint32
	name string
	dir  string

	smu  sync.RWMutex
	syms *symbols

	// Owned by the writer (s.wmu).
	enc      encoder
	firstSym uint64
	pending  [][]byte
	refs     []pendingRef
	raw      int
	filter   blockFilter
	minStart int64
	maxEnd   int64

	seg        *os.File
	segNo      uint32
	segOff     int64
	segCreated time.Time

	bmu    sync.RWMutex
	blocks []*blockMeta // in (segment, offset) order

	shared atomic.Int64 // Partition.Shared

	// durBuckets has a bit for each duration bucket with index entries
	// (more may be set once retention emptied one), so that a minimum
	// duration search walks only those; durOnce reads it from the index.
	durBuckets atomic.Uint64
	durOnce    sync.Once
}

// buckets returns the duration buckets of p that have index entries,
// reading them from the index the first time.
func (p *partition) buckets(db *pebble.DB) uint64 {
	p.durOnce.Do(func() {
		it, err := db.NewIter(&pebble.IterOptions{LowerBound: durPrefix(p.id, 0), UpperBound: durPrefix(p.id+1, 0)})
		if err != nil {
			p.durBuckets.Store(^uint64(0)) // unknown: every bucket
			return
		}
		defer it.Close()
		var mask uint64
		for b := 0; b < 64; {
			if !it.SeekGE(durPrefix(p.id, uint8(b))) {
				break
			}
			k := it.Key()
			if len(k) < 6 || k[0] != kDur || binary.BigEndian.Uint32(k[1:5]) != p.id {
				break
			}
			mask |= 1 << k[5]
			b = int(k[5]) + 1
		}
		p.durBuckets.Or(mask)
	})
	return p.durBuckets.Load()
}

// pendingRef is the index entry of a trace waiting in a partition's
// pending block, and the hosts it touches.
type pendingRef struct {
	ref   Ref
	hosts []string
}

// Open opens (creating) the store in dir, recovering what a crash left:
// blocks written but not indexed are indexed, a torn tail is cut off.
func Open(dir string, o Options) (*Store, error) {
	o = o.withDefaults()
	if !o.ReadOnly {
		if err := os.MkdirAll(filepath.Join(dir, "hosts"), 0o755); err != nil {
			return nil, fmt.Errorf("store %s: %w", dir, err)
		}
	} else if _, err := os.Stat(filepath.Join(dir, "index")); err != nil {
		return nil, fmt.Errorf("store %s: no index (not a store?): %w", dir, err)
	}
	db, err := pebble.Open(filepath.Join(dir, "index"), &pebble.Options{ReadOnly: o.ReadOnly, Logger: quietLogger{}})
	if err != nil {
		return nil, fmt.Errorf("store %s: index: %w", dir, err)
	}
	s := &Store{dir: dir, db: db, opt: o, byName: map[string]*partition{}, byID: map[uint32]*partition{},
		files: map[[2]uint32]*os.File{}, dirty: map[*partition]bool{}, cache: newBlockCache(o.CacheSize), cat: newCatalog()}
	if err := errors.Join(s.load(), s.cat.load(db)); err != nil {
		db.Close()
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	if !o.ReadOnly {
		if err := s.recover(); err != nil {
			s.closeFiles()
			db.Close()
			return nil, fmt.Errorf("store %s: recovery: %w", dir, err)
		}
	}
	return s, nil
}

// Recovery returns what Open recovered.
func (s *Store) Recovery() Recovery { return s.recovery }

// Dir returns the store's directory.
func (s *Store) Dir() string { return s.dir }

// load reads the hosts, symbols and block table.
func (s *Store) load() error {
	parts, err := s.readPartitions()
	if err != nil {
		return err
	}
	for _, r := range parts {
		s.addPartition(r.ID, r.Name).shared.Store(r.Shared)
	}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kSymbol}, UpperBound: []byte{kSymbol + 1}})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		k := it.Key()
		if len(k) != 9 {
			continue
		}
		p := s.byID[binary.BigEndian.Uint32(k[1:])]
		if p == nil {
			continue
		}
		id := binary.BigEndian.Uint32(k[5:])
		for uint32(len(p.syms.names)) < id {
			p.syms.names = append(p.syms.names, "") // a gap: should not happen
		}
		if uint32(len(p.syms.names)) == id {
			name := string(it.Value())
			p.syms.names = append(p.syms.names, name)
			p.syms.byName[name] = id
		}
	}
	if err := it.Close(); err != nil {
		return err
	}
	it, err = s.db.NewIter(&pebble.IterOptions{LowerBound: []byte{kBlock}, UpperBound: []byte{kBlock + 1}})
	if err != nil {
		return err
	}
	for it.First(); it.Valid(); it.Next() {
		m, ok := unmarshalBlockMeta(it.Key(), it.Value())
		if !ok {
			continue
		}
		if p := s.byID[m.host]; p != nil {
			p.blocks = append(p.blocks, m)
		}
	}
	return it.Close()
}

func (s *Store) addPartition(id uint32, name string) *partition {
	p := &partition{id: id, name: name, dir: filepath.Join(s.dir, "hosts", strconv.FormatUint(uint64(id), 10)), syms: newSymbols()}
	p.enc.syms = p.syms
	p.firstSym = 1
	s.pmu.Lock()
	s.byName[name] = p
	s.byID[id] = p
	s.pmu.Unlock()
	return p
}

// segments lists a partition's segment numbers in order.
func (p *partition) segments() ([]uint32, error) {
	es, err := os.ReadDir(p.dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, err
	}
	var out []uint32
	for _, e := range es {
		var n uint32
		if _, err := fmt.Sscanf(e.Name(), "%08d.seg", &n); err == nil && e.Name() == segName(n) {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

func segName(n uint32) string { return fmt.Sprintf("%08d.seg", n) }

// recover indexes the blocks after each partition's watermark and cuts
// torn tails.
func (s *Store) recover() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.batch = s.db.NewBatch()
	for _, p := range s.partitions() {
		mark, err := s.mark(p.id)
		if err != nil {
			return err
		}
		p.firstSym = uint64(len(p.syms.names))
		segs, err := p.segments()
		if err != nil {
			return err
		}
		for i, n := range segs {
			if n < mark.seg {
				continue
			}
			from := int64(segHeaderSize)
			if n == mark.seg && mark.off > 0 {
				from = mark.off
			}
			last := i == len(segs)-1
			if err := s.recoverSegment(p, n, from, last); err != nil {
				return err
			}
		}
	}
	if s.batch.Count() > 0 {
		if err := s.batch.Commit(pebble.Sync); err != nil {
			return err
		}
	}
	s.batch = s.db.NewBatch()
	if s.recovery.Traces > 0 || len(s.recovery.Truncated) > 0 {
		s.opt.Logger.Warn("store recovered after an unclean stop", "dir", s.dir, "traces", s.recovery.Traces, "truncated", s.recovery.Truncated)
	}
	return nil
}

func (s *Store) recoverSegment(p *partition, n uint32, from int64, last bool) error {
	path := filepath.Join(p.dir, segName(n))
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	if from < segHeaderSize {
		from = segHeaderSize
	}
	end, scanErr := scanBlocks(f, from, func(off int64, h blockHeader, raw []byte) error {
		pl, err := parsePayload(raw, h.version)
		if err != nil {
			return fmt.Errorf("%w: %v", errTorn, err)
		}
		if err := p.defineSymbols(pl); err != nil {
			return err
		}
		return s.indexBlock(p, n, off, h, pl, true)
	})
	if scanErr != nil {
		if !errors.Is(scanErr, errTorn) {
			return scanErr
		}
		st, _ := f.Stat()
		size := st.Size()
		if !last {
			// A bad block in a closed segment: report it; the rest of that
			// segment is unreadable, the other segments are fine.
			s.recovery.Truncated = append(s.recovery.Truncated, fmt.Sprintf("%s: offset %d: %v (%d bytes unreadable)", path, end, scanErr, size-end))
			return nil
		}
		if err := f.Truncate(end); err != nil {
			return err
		}
		s.recovery.Truncated = append(s.recovery.Truncated, fmt.Sprintf("%s: offset %d: %v (%d bytes cut)", path, end, scanErr, size-end))
	}
	s.batch.Set(keyMark(p.id), markValue(n, end), nil)
	return nil
}

// defineSymbols adds the symbols a block defined (when the index does not
// know them yet).
func (p *partition) defineSymbols(pl payload) error {
	p.smu.Lock()
	defer p.smu.Unlock()
	for i, name := range pl.syms {
		id := pl.firstSym + uint64(i)
		switch {
		case id < uint64(len(p.syms.names)):
			if p.syms.names[id] != name {
				return fmt.Errorf("%w: symbol %d is %q in a block and %q in the index", errTorn, id, name, p.syms.names[id])
			}
		case id == uint64(len(p.syms.names)):
			name = strings.Clone(name) // not the block's memory: the table lives on
			p.syms.names = append(p.syms.names, name)
			p.syms.byName[name] = uint32(id)
		default:
			return fmt.Errorf("%w: symbol %d defined before symbol %d", errTorn, id, len(p.syms.names))
		}
	}
	p.firstSym = uint64(len(p.syms.names))
	return nil
}

type mark struct {
	seg uint32
	off int64
}

func markValue(seg uint32, off int64) []byte {
	v := binary.BigEndian.AppendUint32(nil, seg)
	return binary.BigEndian.AppendUint64(v, uint64(off))
}

func (s *Store) mark(host uint32) (mark, error) {
	v, c, err := s.db.Get(keyMark(host))
	if errors.Is(err, pebble.ErrNotFound) {
		return mark{}, nil
	}
	if err != nil {
		return mark{}, err
	}
	defer c.Close()
	if len(v) != 12 {
		return mark{}, nil
	}
	return mark{seg: binary.BigEndian.Uint32(v), off: int64(binary.BigEndian.Uint64(v[4:]))}, nil
}

func (s *Store) partitions() []*partition {
	s.pmu.RLock()
	defer s.pmu.RUnlock()
	out := make([]*partition, 0, len(s.byID))
	for _, p := range s.byID {
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

func (s *Store) partitionByID(id uint32) *partition {
	s.pmu.RLock()
	defer s.pmu.RUnlock()
	return s.byID[id]
}

// indexBlock adds the index entries of a block's traces to the batch (the
// symbols the block defines too, when new is set) and the block to the
// block table.
func (s *Store) indexBlock(p *partition, seg uint32, off int64, h blockHeader, pl payload, recovered bool) error {
	for i, name := range pl.syms {
		s.batch.Set(keySymbol(p.id, uint32(pl.firstSym)+uint32(i)), []byte(name), nil)
	}
	m := &blockMeta{host: p.id, seg: seg, off: off, size: blockSize(h), count: h.count, minStart: h.minStart, maxEnd: h.maxEnd}
	var items blockFilter
	p.smu.RLock()
	for i, body := range pl.traces {
		t, err := decodeTrace(body, p.syms)
		if err != nil {
			p.smu.RUnlock()
			return fmt.Errorf("%w: trace %d: %v", errTorn, i, err)
		}
		ref, hosts := summarize(t, p)
		ref.loc = location{host: p.id, seg: seg, off: off, idx: uint32(i)}
		items.add(t)
		s.cat.add(t, s.batch)
		if err := s.indexRef(ref, hosts); err != nil {
			p.smu.RUnlock()
			return err
		}
		if recovered {
			s.recovery.Traces++
		}
	}
	p.smu.RUnlock()
	m.filter = items.bloom()
	s.batch.Set(keyBlock(p.id, seg, off), m.marshal(nil), nil)
	p.bmu.Lock()
	p.blocks = append(p.blocks, m)
	p.bmu.Unlock()
	return nil
}

// indexRef adds a trace's index entries to the batch: its location under
// its id, its summary under every host it touches.
func (s *Store) indexRef(ref Ref, hosts []string) error {
	v := ref.marshal(nil)
	s.batch.Set(keyTrace(ref.ID), ref.marshalLocation(nil), nil)
	for _, h := range hosts {
		hp, err := s.partitionFor(h)
		if err != nil {
			return err
		}
		s.batch.Set(keyHost(hp.id, ref.Start, ref.ID), v, nil)
		hp.durBuckets.Or(1 << durBucket(ref.Duration))
		for _, k := range secondaryKeys(hp.id, &ref) {
			s.batch.Set(k, nil, nil)
		}
	}
	return nil
}

// secondaryKeys are a trace's value-less index entries under host.
func secondaryKeys(host uint32, ref *Ref) [][]byte {
	ks := [][]byte{secondary(durPrefix(host, durBucket(ref.Duration)), ref.Start, ref.ID)}
	if ref.Errors > 0 {
		ks = append(ks, secondary(errPrefix(host), ref.Start, ref.ID))
	}
	if host == ref.loc.host && ref.name != 0 {
		ks = append(ks, secondary(namePrefix(host, ref.name), ref.Start, ref.ID))
	}
	return ks
}

// summarize returns a trace's index summary (symbols of p) and the hosts
// it touches. p.syms must be locked.
func summarize(t *trace.Trace, p *partition) (Ref, []string) {
	syms := p.syms
	r := Ref{ID: t.ID, Start: t.Start(), Duration: t.Duration(), Spans: len(t.Spans), Errors: t.Errors(), Broken: len(t.Broken) > 0}
	r.name = syms.byName[t.Name()]
	seen := map[uint32]bool{}
	for i := range t.Spans {
		sv := t.Spans[i].Service
		if sv == "" {
			continue
		}
		id := syms.byName[sv]
		if !seen[id] && len(r.services) < 64 {
			seen[id] = true
			r.services = append(r.services, id)
		}
	}
	return r, indexHosts(t, p.name)
}

// indexHosts returns the hosts a trace of partition part is indexed
// under: those of its spans, else (no span names a host) its partition,
// so that every trace is found.
func indexHosts(t *trace.Trace, part string) []string {
	if hs := t.Hosts(); len(hs) > 0 {
		return hs
	}
	return []string{part}
}

// blockFilter collects what a block's filter holds: every attribute pair
// (key=value) and the trigrams of the strings the host's dictionary keeps
// (operations, classes, attribute keys, hosts, services, threads), each
// once. Attribute values and messages are found by scanning the block's
// bytes instead: putting their trigrams in the filter would make it larger
// than the data.
type blockFilter struct {
	pairs   map[uint64]struct{}
	strings map[string]struct{}
	// The resources and scopes added (the assembler shares one among
	// the traces of a resource: their pairs are hashed once a block).
	resources map[*trace.Resource]struct{}
	scopes    map[*trace.Scope]struct{}
}

func (f *blockFilter) add(t *trace.Trace) {
	if f.pairs == nil {
		f.pairs = map[uint64]struct{}{}
		f.strings = map[string]struct{}{}
		f.resources = map[*trace.Resource]struct{}{}
		f.scopes = map[*trace.Scope]struct{}{}
	}
	for i := range t.Spans {
		s := &t.Spans[i]
		for _, str := range [...]string{s.Operation, s.Component, s.Host, s.Service, s.Thread} {
			f.strings[str] = struct{}{}
		}
		for _, a := range s.Attributes {
			f.pairs[pairHash(a.Key, a.Value)] = struct{}{}
			f.strings[a.Key] = struct{}{}
		}
		for _, a := range trace.KiekerAttrs(s) {
			f.pairs[pairHash(a.Key, a.Value)] = struct{}{}
		}
	}
	// Resource and scope attributes are the spans' too (Span.Attr finds
	// them), stored once per trace.
	for _, r := range t.Resources {
		if _, ok := f.resources[r]; ok {
			continue
		}
		f.resources[r] = struct{}{}
		for _, a := range r.Attributes {
			f.pairs[pairHash(a.Key, a.Value)] = struct{}{}
			f.strings[a.Key] = struct{}{}
		}
	}
	for _, c := range t.Scopes {
		if _, ok := f.scopes[c]; ok {
			continue
		}
		f.scopes[c] = struct{}{}
		f.pairs[pairHash(trace.ScopeNameKey, c.Name)] = struct{}{}
		f.pairs[pairHash(trace.ScopeVersionKey, c.Version)] = struct{}{}
		for _, a := range c.Attributes {
			f.pairs[pairHash(a.Key, a.Value)] = struct{}{}
			f.strings[a.Key] = struct{}{}
		}
	}
}

// bloom builds the filter and empties f.
func (f *blockFilter) bloom() *block.Bloom {
	n := len(f.pairs)
	for s := range f.strings {
		n += max(len(s)-2, 0)
	}
	b := block.NewBloom(n)
	for h := range f.pairs {
		b.Add(h)
	}
	for s := range f.strings {
		trigrams(s, b.Add)
	}
	clear(f.pairs)
	clear(f.strings)
	clear(f.resources)
	clear(f.scopes)
	return b
}

// partitionOf returns the partition host of a trace: its root span's
// host, else any span's, else its service, else trace.UnknownService.
func partitionOf(t *trace.Trace) string {
	if r := t.Root(); r != nil && r.Host != "" {
		return r.Host
	}
	for i := range t.Spans {
		if h := t.Spans[i].Host; h != "" {
			return h
		}
	}
	for i := range t.Spans {
		if sv := t.Spans[i].Service; sv != "" {
			return sv
		}
	}
	return trace.UnknownService
}

// partitionFor returns the partition of host, creating the host when new.
// The writer lock is held.
func (s *Store) partitionFor(host string) (*partition, error) {
	s.pmu.RLock()
	p := s.byName[host]
	s.pmu.RUnlock()
	if p != nil {
		return p, nil
	}
	return s.createPartition(host)
}

// ErrClosed is returned by a closed store.
var ErrClosed = errors.New("store closed")

// ErrDisabled is returned for traces of a disabled host (dropped).
var ErrDisabled = errors.New("host disabled")

// Append adds traces. They are written with the next block and visible to
// queries after the next Sync. Traces of disabled hosts are dropped
// (counted in the returned number).
func (s *Store) Append(ts []*trace.Trace) (dropped int, err error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed || s.opt.ReadOnly {
		return 0, ErrClosed
	}
	if s.batch == nil {
		s.batch = s.db.NewBatch()
	}
	// The host table is asked once a call per host, not once a trace.
	disabled := map[*partition]bool{}
	now := s.opt.Now()
	// shares: the bytes of spans of hosts other than the partition's,
	// their share of the trace (split by spans).
	var shares map[string]int64
	for _, t := range ts {
		if len(t.Spans) == 0 {
			continue
		}
		p, err := s.partitionFor(partitionOf(t))
		if err != nil {
			return dropped, err
		}
		off, seen := disabled[p]
		if !seen {
			if s.opt.Hosts != nil {
				off = s.opt.Hosts.Policy(p.name).Disabled
				if !off {
					// Traces of any source are contact (not only a
					// zico HELLO or an OTLP token).
					s.opt.Hosts.Contact(p.name, now)
				}
			}
			disabled[p] = off
		}
		if off {
			dropped++
			continue
		}
		p.smu.Lock()
		body := p.enc.encodeTrace(t)
		ref, hosts := summarize(t, p)
		p.smu.Unlock()
		perSpan := int64(len(body)) / int64(len(t.Spans))
		for i := range t.Spans {
			if h := t.Spans[i].Host; h != "" && h != p.name {
				if shares == nil {
					shares = map[string]int64{}
				}
				shares[h] += max(perSpan, 1)
			}
		}
		p.pending = append(p.pending, append([]byte(nil), body...))
		p.refs = append(p.refs, pendingRef{ref: ref, hosts: hosts})
		p.filter.add(t)
		s.cat.add(t, s.batch)
		if len(p.pending) == 1 || ref.Start < p.minStart {
			p.minStart = ref.Start
		}
		if end := ref.Start + ref.Duration; len(p.pending) == 1 || end > p.maxEnd {
			p.maxEnd = end
		}
		p.raw += len(body)
		if p.raw >= s.opt.BlockSize {
			if err := s.writeBlock(p); err != nil {
				return dropped, err
			}
		}
	}
	// Hosts below the root sent spans too: they are contact and own
	// their share of the bytes.
	for name, n := range shares {
		hp, err := s.partitionFor(name)
		if err != nil {
			return dropped, err
		}
		if s.opt.Hosts != nil {
			if s.opt.Hosts.Policy(name).Disabled {
				continue
			}
			s.opt.Hosts.Contact(name, now)
		}
		s.shareLocked(hp, n)
	}
	return dropped, nil
}

// writeBlock writes a partition's pending traces as one block of its
// current segment and adds their index entries to the batch.
func (s *Store) writeBlock(p *partition) error {
	if len(p.pending) == 0 {
		return nil
	}
	if err := s.ensureSegment(p); err != nil {
		return err
	}
	raw := appendPayload(nil, p.firstSym, p.enc.newSyms, p.pending)
	h := blockHeader{count: uint32(len(p.pending)), minStart: p.minStart, maxEnd: p.maxEnd}
	blk := appendBlock(nil, raw, h)
	if _, err := p.seg.WriteAt(blk, p.segOff); err != nil {
		return fmt.Errorf("store: host %s: writing %s: %w", p.name, segName(p.segNo), err)
	}
	off := p.segOff
	p.segOff += int64(len(blk))
	s.dirty[p] = true
	h, _ = parseBlockHeader(blk)
	for i, name := range p.enc.newSyms {
		s.batch.Set(keySymbol(p.id, uint32(p.firstSym)+uint32(i)), []byte(name), nil)
	}
	for i := range p.refs {
		r := &p.refs[i]
		r.ref.loc = location{host: p.id, seg: p.segNo, off: off, idx: uint32(i)}
		if err := s.indexRef(r.ref, r.hosts); err != nil {
			return err
		}
	}
	m := &blockMeta{host: p.id, seg: p.segNo, off: off, size: blockSize(h), count: h.count, minStart: h.minStart, maxEnd: h.maxEnd}
	m.filter = p.filter.bloom()
	s.batch.Set(keyBlock(p.id, p.segNo, off), m.marshal(nil), nil)
	s.batch.Set(keyMark(p.id), markValue(p.segNo, p.segOff), nil)
	p.bmu.Lock()
	p.blocks = append(p.blocks, m)
	p.bmu.Unlock()
	p.firstSym += uint64(len(p.enc.newSyms))
	p.enc.newSyms = p.enc.newSyms[:0]
	clear(p.pending)
	p.pending, p.refs, p.raw = p.pending[:0], p.refs[:0], 0
	return nil
}

// ensureSegment opens the partition's current segment, beginning a new one
// when there is none, it is full or old.
func (s *Store) ensureSegment(p *partition) error {
	now := s.opt.Now()
	if p.seg != nil && p.segOff < s.opt.SegmentSize && now.Sub(p.segCreated) < s.opt.SegmentAge {
		return nil
	}
	if p.seg != nil {
		if err := p.seg.Sync(); err != nil {
			return err
		}
		p.seg.Close()
		p.seg = nil
	}
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	segs, err := p.segments()
	if err != nil {
		return err
	}
	if len(segs) > 0 && p.segNo == 0 {
		// The last segment of an earlier run: continue it while it has
		// room.
		last := segs[len(segs)-1]
		path := filepath.Join(p.dir, segName(last))
		if f, err := os.OpenFile(path, os.O_RDWR, 0); err == nil {
			hdr, herr := readSegHeader(f)
			st, serr := f.Stat()
			if herr == nil && serr == nil && st.Size() < s.opt.SegmentSize && now.Sub(time.Unix(0, hdr.created)) < s.opt.SegmentAge {
				p.seg, p.segNo, p.segOff, p.segCreated = f, last, st.Size(), time.Unix(0, hdr.created)
				return nil
			}
			f.Close()
		}
	}
	next := p.segNo + 1
	if len(segs) > 0 && segs[len(segs)-1] >= next {
		next = segs[len(segs)-1] + 1
	}
	path := filepath.Join(p.dir, segName(next))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("store: host %s: %w", p.name, err)
	}
	if _, err := f.Write(appendSegHeader(nil, segHeader{host: p.id, seg: next, created: now.UnixNano()})); err != nil {
		f.Close()
		return err
	}
	if err := syncDir(p.dir); err != nil {
		f.Close()
		return err
	}
	p.seg, p.segNo, p.segOff, p.segCreated = f, next, segHeaderSize, now
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Sync writes the pending traces, makes the segments durable, then the
// index: after Sync returns, a kill -9 loses none of the traces appended
// before it, and queries see them.
func (s *Store) Sync() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed || s.opt.ReadOnly {
		return nil
	}
	return s.syncLocked()
}

func (s *Store) syncLocked() error {
	for _, p := range s.partitions() {
		if err := s.writeBlock(p); err != nil {
			return err
		}
	}
	for p := range s.dirty {
		if p.seg != nil {
			if err := p.seg.Sync(); err != nil {
				return fmt.Errorf("store: host %s: sync: %w", p.name, err)
			}
		}
		delete(s.dirty, p)
	}
	if s.batch != nil && s.batch.Count() > 0 {
		if err := s.batch.Commit(pebble.Sync); err != nil {
			return fmt.Errorf("store: index: %w", err)
		}
		s.batch = s.db.NewBatch()
	}
	return nil
}

// Close syncs and closes the store. It is safe to call twice.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return nil
	}
	var err error
	if !s.opt.ReadOnly {
		err = s.syncLocked()
	}
	s.closed = true
	for _, p := range s.partitions() {
		if p.seg != nil {
			p.seg.Close()
			p.seg = nil
		}
	}
	s.closeFiles()
	if s.batch != nil {
		s.batch.Close()
	}
	return errors.Join(err, s.db.Close())
}

func (s *Store) closeFiles() {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	for k, f := range s.files {
		f.Close()
		delete(s.files, k)
	}
}

// file returns a read handle of a segment.
func (s *Store) file(host, seg uint32) (*os.File, error) {
	s.fmu.Lock()
	defer s.fmu.Unlock()
	k := [2]uint32{host, seg}
	if f := s.files[k]; f != nil {
		return f, nil
	}
	p := s.partitionByID(host)
	if p == nil {
		return nil, fmt.Errorf("store: no host %d", host)
	}
	f, err := os.Open(filepath.Join(p.dir, segName(seg)))
	if err != nil {
		return nil, err
	}
	if len(s.files) > 256 {
		for k, f := range s.files {
			f.Close()
			delete(s.files, k)
			break
		}
	}
	s.files[k] = f
	return f, nil
}

// block returns a block's parsed payload, from the cache or the disk.
func (s *Store) block(loc location) (payload, error) {
	if pl, ok := s.cache.get(loc.host, loc.seg, loc.off); ok {
		return pl, nil
	}
	f, err := s.file(loc.host, loc.seg)
	if err != nil {
		return payload{}, err
	}
	h, raw, err := readBlock(f, loc.off)
	if err != nil {
		return payload{}, fmt.Errorf("store: host %d segment %d offset %d: %w", loc.host, loc.seg, loc.off, err)
	}
	pl, err := parsePayload(raw, h.version)
	if err != nil {
		return payload{}, fmt.Errorf("store: host %d segment %d offset %d: %w", loc.host, loc.seg, loc.off, err)
	}
	s.cache.put(loc.host, loc.seg, loc.off, pl, int64(len(raw)))
	return pl, nil
}

// read returns the trace at loc.
func (s *Store) read(loc location) (*trace.Trace, error) {
	pl, err := s.block(loc)
	if err != nil {
		return nil, err
	}
	if int(loc.idx) >= len(pl.traces) {
		return nil, fmt.Errorf("store: host %d segment %d offset %d: no trace %d", loc.host, loc.seg, loc.off, loc.idx)
	}
	p := s.partitionByID(loc.host)
	if p == nil {
		return nil, fmt.Errorf("store: no host %d", loc.host)
	}
	p.smu.RLock()
	defer p.smu.RUnlock()
	return decodeTrace(pl.traces[loc.idx], p.syms)
}

// CompactIndex compacts the whole index now (Pebble compacts in the
// background anyway; this finishes what a large ingest left to do, before
// a benchmark or a backup).
func (s *Store) CompactIndex() error {
	if s.opt.ReadOnly {
		return nil
	}
	return s.db.Compact(context.Background(), []byte{0}, []byte{0xff, 0xff}, true)
}

// ErrNotFound is returned for an unknown trace id.
var ErrNotFound = errors.New("trace not found")

// Get returns the trace with id.
func (s *Store) Get(id trace.ID) (*trace.Trace, error) {
	v, c, err := s.db.Get(keyTrace(id))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	ref, ok := unmarshalLocation(id, v)
	c.Close()
	if !ok {
		return nil, fmt.Errorf("store: trace %s: corrupt index entry", id)
	}
	return s.read(ref.loc)
}

// blockCache keeps parsed block payloads, least recently used dropped
// first, within a size bound.
type blockCache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	ll    *list.List
	items map[[3]int64]*list.Element
}

type cached struct {
	key  [3]int64
	pl   payload
	size int64
}

func newBlockCache(max int64) *blockCache {
	return &blockCache{max: max, ll: list.New(), items: map[[3]int64]*list.Element{}}
}

func (c *blockCache) get(host, seg uint32, off int64) (payload, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.items[[3]int64{int64(host), int64(seg), off}]
	if e == nil {
		return payload{}, false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*cached).pl, true
}

func (c *blockCache) put(host, seg uint32, off int64, pl payload, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := [3]int64{int64(host), int64(seg), off}
	if _, ok := c.items[k]; ok {
		return
	}
	c.items[k] = c.ll.PushFront(&cached{key: k, pl: pl, size: size})
	c.size += size
	for c.size > c.max && c.ll.Len() > 1 {
		e := c.ll.Back()
		v := e.Value.(*cached)
		c.ll.Remove(e)
		delete(c.items, v.key)
		c.size -= v.size
	}
}

// drop forgets the blocks of a segment.
func (c *blockCache) drop(host, seg uint32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.items {
		if k[0] == int64(host) && k[1] == int64(seg) {
			c.size -= e.Value.(*cached).size
			c.ll.Remove(e)
			delete(c.items, k)
		}
	}
}

// quietLogger keeps Pebble's informational output out of the bridge's log.
type quietLogger struct{}

func (quietLogger) Infof(string, ...any)  {}
func (quietLogger) Errorf(string, ...any) {}
func (quietLogger) Fatalf(format string, args ...any) {
	panic(fmt.Sprintf("pebble: "+format, args...))
}

var _ = math.MaxInt64
