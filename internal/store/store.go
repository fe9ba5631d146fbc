package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracebridge/tracebridge/internal/lograte"
	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/store/block"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Options configure a Store. Zero values mean the defaults.
type Options struct {
	// Bucket is where blocks live; nil: the local directory DIR/blocks
	// (objstore.Local over DIR).
	Bucket objstore.Store
	// ChunkSize is the uncompressed size at which a host's pending traces
	// are written to its write-ahead file as one chunk (default 256 KiB);
	// a Sync writes them too.
	ChunkSize int
	// PageSize is the uncompressed size of a block's pages (default the
	// smaller of ChunkSize and 64 KiB): a search that lists a trace
	// decompresses its page.
	PageSize int
	// HeadSize and HeadAge: a host's head (the traces not yet in a block)
	// is cut into a block when its write-ahead file reaches this size
	// (default 32 MiB) or at this age (default 5 min); and the largest
	// open head is cut when the indexes the open heads keep in memory
	// (their traces' rows and what their filters and term indexes keep
	// of them) reach this size together, if its own is at least a 32nd
	// of it (with more hosts than that, the indexes may reach a 32nd of
	// it a host). A cut head keeps its index until its block is
	// uploaded: when the cut heads' indexes exceed twice HeadSize
	// together (uploads behind: a slow or unreachable bucket), Append
	// waits, as for MaxWAL.
	HeadSize int64
	HeadAge  time.Duration
	// MaxWAL bounds the write-ahead area (every head, cut or not, waiting
	// for its upload; default 1 GiB): past it Append waits for uploads
	// (back-pressure on the receivers).
	MaxWAL int64
	// CompactBelow: blocks of a host smaller than this are merged into
	// larger ones by Compact (default HeadSize / 2); CompactTo is the
	// size a compacted block aims at (default 4 × HeadSize).
	CompactBelow, CompactTo int64
	// MaxAge and MaxSize bound the whole store (0: unbounded); hosts
	// have their own bounds (Hosts).
	MaxAge  time.Duration
	MaxSize int64
	// CacheSize bounds what is kept of blocks for reading: their indexes
	// and filters (three quarters) and decompressed pages (a quarter;
	// default 256 MiB in all: the indexes of 10 M spans fit).
	CacheSize int64
	// ReadOnly opens the store for queries and checks only, beside a
	// writer: it sees the blocks and write-ahead files so far and looks
	// again at most every Refresh (default 1 s), when a query comes.
	ReadOnly bool
	Refresh  time.Duration
	// Node names this store's writer when several stores (one per node
	// of a cluster, each with a directory of its own) write into one
	// bucket: its blocks' metas say so (block.Meta.Node), each block it
	// writes is announced under recent/ for a while, and in the
	// background it lists the announcements every Refresh (taking in the
	// blocks the others uploaded and compacted) and every block every
	// ListAll (default 1 min, and at least ten times as long as the last
	// such listing took; forgetting the blocks the others deleted); a
	// search that finds a block gone lists again at once. "" (the
	// default): the only writer of its bucket, which lists it at Open
	// only. With ReadOnly, Node (any name) makes a reader of a shared
	// bucket: a query lists the announcements (at most every Refresh)
	// and every block only every ListAll.
	Node    string
	ListAll time.Duration
	// MayCompact, when set, is asked before every retention and
	// compaction run, between compactions and before each block
	// retention deletes: only while it says true does this store delete
	// old blocks or compact them, so that one node of those sharing a
	// bucket does at a time (a cluster wires it to a lease, false from
	// the lease's renewal deadline on). It is asked again before a
	// compacted block's data is written and before its meta is: a
	// compaction that finds it false writes nothing (a data object
	// already written is deleted) and stops; the blocks a compaction
	// replaced are deleted only while it says true (else the next
	// compactor deletes them). This narrows the window, it does not
	// close it: an answer holds until the next question, so the role can
	// pass between the last question and the end of the meta's upload
	// (or of a retention's delete request). Two compactors then each
	// publish a block of the same inputs (their traces twice, read once
	// and merged by the next compaction), or delete the same old block;
	// nothing is lost. nil: always (a store of its own).
	MayCompact func() bool
	// CloseWait: Close cuts every head into a block and waits at most
	// this long for the uploads (default 10 s; negative: it does not cut,
	// the heads stay in the write-ahead area until the next open).
	CloseWait time.Duration
	// Hosts is the host table: which hosts are disabled, their bounds,
	// and what it learns of them from stored traces (nil: none).
	Hosts HostTable
	// Logger hears about recovery, uploads, retention and compaction.
	Logger *slog.Logger
	// Now is the clock (tests); nil means time.Now.
	Now func() time.Time
}

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
	// Contact records that traces of host name (of any source: spans at
	// the root or below it) were stored at: its last contact, and the
	// host itself when the table does not know it. Same rules as Policy.
	Contact(name string, at time.Time)
}

// HostPolicy bounds a host's partition (0: unbounded; the oldest whole
// blocks go first) and says whether its traces are dropped.
type HostPolicy struct {
	MaxSize  int64
	MaxAge   time.Duration
	Disabled bool
}

func (o Options) withDefaults() Options {
	if o.ChunkSize <= 0 {
		o.ChunkSize = 256 << 10
	}
	if o.PageSize <= 0 {
		o.PageSize = min(o.ChunkSize, 64<<10)
	}
	if o.HeadSize <= 0 {
		o.HeadSize = 32 << 20
	}
	if o.HeadAge <= 0 {
		o.HeadAge = 5 * time.Minute
	}
	if o.MaxWAL <= 0 {
		o.MaxWAL = 1 << 30
	}
	if o.CompactBelow <= 0 {
		o.CompactBelow = o.HeadSize / 2
	}
	if o.CompactTo <= 0 {
		o.CompactTo = 4 * o.HeadSize
	}
	if o.CacheSize <= 0 {
		o.CacheSize = 256 << 20
	}
	if o.Refresh <= 0 {
		o.Refresh = time.Second
	}
	if o.ListAll <= 0 {
		o.ListAll = time.Minute
	}
	if o.CloseWait == 0 {
		o.CloseWait = 10 * time.Second
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
	// Traces found in write-ahead files that were not yet in a block.
	Traces int
	// Truncated names the write-ahead tails cut off (torn chunks of a
	// crash), with their offsets and sizes.
	Truncated []string
	// Migrated is set when a store of version 1 was converted.
	Migrated *MigrateResult
}

// Store is a trace store (see the package comment).
type Store struct {
	dir    string
	bucket objstore.Store
	opt    Options

	wmu sync.Mutex // the writer: Append, Sync, cuts, retention, compaction
	// chunkRaw and chunkBlk: writeChunk's scratch buffers (under wmu).
	chunkRaw, chunkBlk []byte
	// unpack makes the Spans of packed traces while Append encodes them
	// (under wmu).
	unpack trace.Unpacker
	// headIndex is what the open heads' indexes keep in memory together
	// (head.indexSize; under wmu); the heads are looked at for a cut
	// once it reaches HeadSize, or indexCheck when that is more (a look
	// found no head worth cutting).
	headIndex, indexCheck int64

	pmu   sync.RWMutex
	parts map[string]*partition

	// The write-ahead area: its bytes (every head's file) and the
	// uploads waiting.
	walMu    sync.Mutex
	walCond  *sync.Cond
	walBytes int64
	sealed   []*head // cut heads waiting for their upload, in order
	// sealedIndex is what the sealed heads' indexes keep in memory
	// together (head.sealedIndex); waiting counts the Appends waiting
	// for room.
	sealedIndex int64
	waiting     int
	// uploading is the cut head the uploader is turning into a block
	// (its index is not evicted meanwhile); evicted counts the heads
	// whose index evictSealed moved to their files.
	uploading *head
	evicted   int
	// evictedAttrs: the bytes of the evicted heads' attribute filters
	// kept (head.attrs), at most HeadSize.
	evictedAttrs int64
	// readBack counts the evicted heads' indexes read back (reloadIndex),
	// blocksBuilt the blocks the uploader built of cut heads,
	// uploadFailures its failed tries.
	readBack, blocksBuilt, uploadFailures atomic.Int64
	// built: the uploader's (its goroutine's alone).
	built builtBlock
	// reloads holds a token for each evicted head's index a search
	// holds, read back (readEvicted).
	reloads  chan struct{}
	uploaded []uploadedHead
	retired  []retiredBlock // blocks compactions replaced, deleted after a grace
	closing  bool

	readFaults lograte.Limiter // unreadable traces: logged a few per second, not each
	// deleteFaults: deleting replaced blocks and old announcements from
	// the bucket; a bucket away fails every one, logged once.
	deleteFaults lograte.Outage

	// cache keeps block indexes and filters (¾ of CacheSize), pages the
	// decompressed pages and write-ahead chunks (¼): a search that reads
	// every page does not push out the indexes every search needs.
	cache, pages *cache
	cat          *catalog

	refreshMu   sync.Mutex
	lastRefresh time.Time
	// The shared bucket (see listing.go): listEpoch numbers the listings
	// (a block added after one began is not forgotten by it); gone holds
	// the ids of blocks this store took out (retention, compaction,
	// deletion) until a listing no longer shows them, so that a listing
	// that began before does not bring them back; metas caches the
	// parsed metas by block directory (a listing reads only new ones);
	// lastList is when the last listing began; relistReq asks the lister
	// for a listing now.
	listEpoch atomic.Uint64
	goneMu    sync.Mutex
	gone      map[string]bool
	metas     map[string]*block.Meta // under refreshMu
	lastList  time.Time              // under refreshMu
	relistReq chan struct{}
	// replaced are blocks that another store's compaction replaced
	// (under refreshMu): the compactor deletes them after a grace.
	replaced []replacedBlock
	// announced holds the ids of the announcements (recent/) taken in,
	// staleAnnounced the keys of those older than announceKeep, which the
	// compactor deletes (both under refreshMu).
	announced      map[string]bool
	staleAnnounced []string

	ctx      context.Context
	cancel   context.CancelFunc
	uploadWG sync.WaitGroup
	kick     chan struct{}

	recovery Recovery
	legacy   [][]byte // host records of a converted store of version 1
	closed   bool
}

// partition is one host's part of the store: its head (traces not yet in
// a block), its cut heads waiting for upload, and its blocks.
type partition struct {
	host string
	mu   sync.RWMutex // guards head's rows and symbols, sealed and blocks
	head *head
	// sealed heads of this partition (also in Store.sealed) until their
	// blocks are listed.
	sealed []*head
	blocks []*blockRef // by MinStart
}

// blockRef is a block of the store: its meta, and where its data is.
type blockRef struct {
	meta *block.Meta
	key  string // the data object's key
	// epoch is Store.listEpoch when the block joined: a listing forgets
	// only blocks that joined before it began.
	epoch uint64
}

// newBlockRef returns the ref of a block whose meta is in the bucket.
func (s *Store) newBlockRef(m *block.Meta) *blockRef {
	return &blockRef{meta: m, key: block.Dir(m.Host, m.ID) + block.DataName, epoch: s.listEpoch.Load()}
}

// Open opens (creating) the store in dir, recovering what a crash left:
// write-ahead files not yet in a block are read again (a torn tail cut
// off) and cut into blocks, blocks a compaction replaced are deleted. A
// store of version 1 (DIR/index) is converted first.
func Open(dir string, o Options) (*Store, error) {
	o = o.withDefaults()
	if !o.ReadOnly {
		if err := os.MkdirAll(filepath.Join(dir, walDir), 0o755); err != nil {
			return nil, fmt.Errorf("store %s: %w", dir, err)
		}
	} else if _, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("store %s: %w", dir, err)
	} else if o.Bucket == nil {
		// A reader of a directory that is no store would find nothing
		// and say so as if the store were empty.
		if isV1(dir) {
			return nil, fmt.Errorf("store %s: %w: a store of version 1, which `tracebridge store migrate` (or serve) converts first", dir, ErrNotStore)
		}
		if err := checkStoreDir(dir); err != nil {
			return nil, err
		}
	}
	s, err := newStore(dir, o)
	if err != nil {
		return nil, err
	}
	cancel := s.cancel
	if !o.ReadOnly && isV1(dir) {
		res, err := migrate(dir, s, o.Logger)
		if err != nil {
			cancel()
			return nil, fmt.Errorf("store %s: converting a store of version 1: %w", dir, err)
		}
		s.recovery.Migrated = &res
	}
	if err := s.loadBlocks(); err != nil {
		cancel()
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	if err := s.loadWAL(); err != nil {
		cancel()
		return nil, fmt.Errorf("store %s: %w", dir, err)
	}
	s.lastRefresh = o.Now()
	if !o.ReadOnly {
		s.uploadWG.Add(1)
		go s.uploader()
		if s.shared() {
			s.uploadWG.Add(1)
			go s.lister()
		}
		s.kickUploader()
		// A clean Close leaves the heads in their files too: only a torn
		// tail says the stop was not clean.
		if len(s.recovery.Truncated) > 0 {
			o.Logger.Warn("store recovered after an unclean stop", "dir", dir, "traces", s.recovery.Traces, "truncated", s.recovery.Truncated)
		} else if s.recovery.Traces > 0 {
			o.Logger.Info("store: write-ahead area replayed", "dir", dir, "traces", s.recovery.Traces)
		}
	}
	return s, nil
}

// ErrNotStore is wrapped by the error of a read-only Open of a directory
// that holds no store.
var ErrNotStore = errors.New("not a trace store")

// checkStoreDir returns an error wrapping ErrNotStore unless dir has a
// store's write-ahead area or blocks.
func checkStoreDir(dir string) error {
	for _, sub := range []string{walDir, block.Prefix} {
		if st, err := os.Stat(filepath.Join(dir, sub)); err == nil && st.IsDir() {
			return nil
		}
	}
	return fmt.Errorf("store %s: %w: it has neither %s/ nor %s (serve makes them)", dir, ErrNotStore, walDir, block.Prefix)
}

// newStore makes a Store value over its bucket (nil: DIR's blocks).
func newStore(dir string, o Options) (*Store, error) {
	bucket := o.Bucket
	if bucket == nil {
		l, err := objstore.NewLocal(dir)
		if err != nil {
			return nil, fmt.Errorf("store %s: %w", dir, err)
		}
		bucket = l
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Store{dir: dir, bucket: bucket, opt: o, parts: map[string]*partition{}, cache: newCache(o.CacheSize - o.CacheSize/4), pages: newCache(o.CacheSize / 4), cat: newCatalog(),
		ctx: ctx, cancel: cancel, kick: make(chan struct{}, 1), reloads: make(chan struct{}, maxReloads), gone: map[string]bool{}, metas: map[string]*block.Meta{}, announced: map[string]bool{}, relistReq: make(chan struct{}, 1)}
	s.walCond = sync.NewCond(&s.walMu)
	return s, nil
}

// Recovery returns what Open recovered.
func (s *Store) Recovery() Recovery { return s.recovery }

// Dir returns the store's local directory.
func (s *Store) Dir() string { return s.dir }

// Bucket returns where the store's blocks live.
func (s *Store) Bucket() objstore.Store { return s.bucket }

func (s *Store) partition(host string) *partition {
	s.pmu.RLock()
	p := s.parts[host]
	s.pmu.RUnlock()
	if p != nil {
		return p
	}
	s.pmu.Lock()
	defer s.pmu.Unlock()
	if p = s.parts[host]; p == nil {
		host = strings.Clone(host) // (a trace's string: see Append)
		p = &partition{host: host}
		s.parts[host] = p
	}
	return p
}

// partitions returns the partitions by host name.
func (s *Store) partitions() []*partition {
	s.pmu.RLock()
	defer s.pmu.RUnlock()
	out := make([]*partition, 0, len(s.parts))
	for _, p := range s.parts {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *partition) int {
		switch {
		case a.host < b.host:
			return -1
		case a.host > b.host:
			return 1
		}
		return 0
	})
	return out
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

// ErrClosed is returned by a closed (or read-only) store.
var ErrClosed = errors.New("store closed")

// Append adds traces to their hosts' heads; they are visible to queries
// at once and durable after the next Sync. Traces of disabled hosts are
// dropped (counted in the returned number). When the write-ahead area is
// full (uploads behind), Append waits.
func (s *Store) Append(ts []*trace.Trace) (dropped int, err error) {
	if err := s.waitRoom(); err != nil {
		return 0, err
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed || s.opt.ReadOnly {
		return 0, ErrClosed
	}
	now := s.opt.Now()
	// A host's policy is asked once a call, not once a trace.
	var disabled map[string]bool
	var contact map[string]bool
	defer s.unpack.Release()
	for _, t := range ts {
		if t.SpanCount() == 0 {
			continue
		}
		// A packed trace's Spans are made in reused memory: nothing
		// below keeps them, and what keeps their strings copies them
		// (symbols, catalogues, partitions, hosts).
		t = s.unpack.Trace(t)
		host := partitionOf(t)
		if s.opt.Hosts != nil {
			if disabled == nil {
				disabled, contact = map[string]bool{}, map[string]bool{}
			}
			off, seen := disabled[host]
			if !seen {
				off = s.opt.Hosts.Policy(host).Disabled
				disabled[host] = off
			}
			if off {
				dropped++
				continue
			}
			note := func(h string) {
				if !contact[h] {
					contact[strings.Clone(h)] = true
				}
			}
			note(host)
			last := ""
			for i := range t.Spans {
				if h := t.Spans[i].Host; h != "" && h != last {
					note(h)
					last = h
				}
			}
		}
		p := s.partition(host)
		if err := s.appendTrace(p, t, now); err != nil {
			return dropped, err
		}
		s.cat.add(t)
	}
	for h := range contact {
		s.opt.Hosts.Contact(h, now)
	}
	return dropped, nil
}

// appendTrace adds t to p's head (beginning one when there is none) and
// cuts the head when it is full.
func (s *Store) appendTrace(p *partition, t *trace.Trace, now time.Time) error {
	if p.head == nil {
		h, err := s.newHead(p.host, now)
		if err != nil {
			return err
		}
		p.mu.Lock()
		p.head = h
		p.mu.Unlock()
	}
	h := p.head
	before := h.indexSize()
	p.mu.Lock()
	h.add(t)
	p.mu.Unlock()
	s.headIndex += h.indexSize() - before
	if len(h.bodies) >= s.opt.ChunkSize {
		if err := s.writeChunk(p, h); err != nil {
			return err
		}
	}
	if h.walSize() >= s.opt.HeadSize {
		return s.cut(p)
	}
	if s.headIndex >= max(s.opt.HeadSize, s.indexCheck) {
		// The open heads' indexes are bounded together: the largest is
		// cut. With more hosts than minCutShare each head may be smaller
		// than a cut is worth (a block and a sync each): then the
		// indexes grow by that share before the heads are looked at
		// again.
		q := s.largestHead()
		if q.head.indexSize() >= s.opt.HeadSize/minCutShare {
			return s.cut(q)
		}
		s.indexCheck = s.headIndex + s.opt.HeadSize/minCutShare
	}
	return nil
}

// minCutShare: a head is cut for the heads' indexes only when its own is
// at least this share of the head size.
const minCutShare = 32

// largestHead returns the partition whose head's index is the largest
// (s.wmu is held).
func (s *Store) largestHead() *partition {
	s.pmu.RLock()
	defer s.pmu.RUnlock()
	var best *partition
	var size int64
	for _, p := range s.parts {
		if p.head != nil {
			if n := p.head.indexSize(); best == nil || n > size {
				best, size = p, n
			}
		}
	}
	return best
}

// Sync writes every head's pending traces to its write-ahead file and
// makes the files durable: after Sync returns, a kill -9 loses none of
// the traces appended before it. Heads older than HeadAge are cut.
func (s *Store) Sync() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed || s.opt.ReadOnly {
		return nil
	}
	return s.syncLocked(false)
}

func (s *Store) syncLocked(cutAll bool) error {
	now := s.opt.Now()
	for _, p := range s.partitions() {
		h := p.head
		if h == nil {
			continue
		}
		if err := s.writeChunk(p, h); err != nil {
			return err
		}
		if err := h.sync(); err != nil {
			return fmt.Errorf("store: host %s: %w", p.host, err)
		}
		if h.rows.len() > 0 && (cutAll || now.Sub(h.created) >= s.opt.HeadAge) {
			if err := s.cut(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// Flush cuts every head into a block and waits until every block is
// uploaded (or ctx ends): what Append received is then in the bucket.
func (s *Store) Flush(ctx context.Context) error {
	_, err := s.flush(ctx)
	return err
}

// flush is Flush; it also says how many of the heads it waited for are
// not uploaded (the store closed first). It waits only for the heads
// cut before it returned from its sync, not for those that appends
// running meanwhile cut, so that it ends under a steady ingest.
func (s *Store) flush(ctx context.Context) (int, error) {
	s.wmu.Lock()
	if s.closed || s.opt.ReadOnly {
		s.wmu.Unlock()
		return 0, nil
	}
	err := s.syncLocked(true)
	s.walMu.Lock()
	wait := slices.Clone(s.sealed)
	s.walMu.Unlock()
	s.wmu.Unlock()
	if err != nil {
		return 0, err
	}
	s.kickUploader()
	stop := context.AfterFunc(ctx, func() {
		s.walMu.Lock()
		s.walCond.Broadcast()
		s.walMu.Unlock()
	})
	defer stop()
	s.walMu.Lock()
	defer s.walMu.Unlock()
	left := func() int {
		wait = slices.DeleteFunc(wait, func(h *head) bool { return !slices.Contains(s.sealed, h) })
		return len(wait)
	}
	for left() > 0 && !s.closing {
		if err := ctx.Err(); err != nil {
			return len(wait), fmt.Errorf("store: %d blocks not uploaded: %w", len(wait), err)
		}
		s.walCond.Wait()
	}
	return len(wait), nil
}

// Persist cuts every non-empty head into a block and returns once their
// blocks (data and meta) are in the bucket: what Append took before the
// call is durable there, whatever happens to this machine. A cluster's
// partition owner calls it before it acknowledges the stream
// (internal/cluster). Unlike Flush it fails when the store closes first.
func (s *Store) Persist(ctx context.Context) error {
	n, err := s.flush(ctx)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("store: %d blocks not uploaded: %w", n, ErrClosed)
	}
	return nil
}

// Close syncs and closes the store; the heads stay in their write-ahead
// files and are cut into blocks at the next Open. It is safe to call
// twice.
func (s *Store) Close() error {
	s.wmu.Lock()
	if s.closed {
		s.wmu.Unlock()
		return nil
	}
	var err error
	if !s.opt.ReadOnly {
		err = s.syncLocked(s.opt.CloseWait > 0)
	}
	s.closed = true
	s.wmu.Unlock()
	if !s.opt.ReadOnly && s.opt.CloseWait > 0 {
		s.awaitUploads(s.opt.CloseWait)
	}
	s.walMu.Lock()
	s.closing = true
	s.walCond.Broadcast()
	s.walMu.Unlock()
	s.cancel()
	s.uploadWG.Wait()
	s.removeUploaded(true)
	s.removeRetired(true)
	for _, p := range s.partitions() {
		p.mu.Lock()
		if p.head != nil {
			p.head.close()
		}
		for _, h := range p.sealed {
			h.close()
		}
		p.mu.Unlock()
	}
	return err
}

// awaitUploads waits at most d for the cut heads to be uploaded (what is
// not stays in the write-ahead area for the next open).
func (s *Store) awaitUploads(d time.Duration) {
	s.kickUploader()
	timer := time.AfterFunc(d, func() {
		s.walMu.Lock()
		s.walCond.Broadcast()
		s.walMu.Unlock()
	})
	defer timer.Stop()
	deadline := time.Now().Add(d)
	s.walMu.Lock()
	defer s.walMu.Unlock()
	for len(s.sealed) > 0 && time.Now().Before(deadline) {
		s.walCond.Wait()
	}
	if n := len(s.sealed); n > 0 {
		s.opt.Logger.Warn("store: closing with blocks not uploaded; they stay in the write-ahead area until the next start", "blocks", n, "waited", d)
	}
}

// waitRoom waits while the write-ahead area is over its bound, or the
// cut heads' indexes waiting for their uploads over theirs (when none
// of them could leave memory: evictSealed).
func (s *Store) waitRoom() error {
	s.walMu.Lock()
	defer s.walMu.Unlock()
	warned := false
	for !s.closing {
		full := s.walBytes > s.opt.MaxWAL
		if !full && s.sealedIndex <= s.maxSealedIndex() {
			break
		}
		if !warned {
			if full {
				s.opt.Logger.Warn("store: the write-ahead area is full; waiting for uploads", "bytes", s.walBytes, "max_wal", s.opt.MaxWAL)
			} else {
				s.opt.Logger.Warn("store: the indexes of the heads waiting for their upload fill their share of memory; waiting for uploads", "bytes", s.sealedIndex, "heads", len(s.sealed), "bound", s.maxSealedIndex())
			}
			warned = true
		}
		s.kickUploader()
		s.waiting++
		s.walCond.Wait()
		s.waiting--
	}
	if s.closing {
		return ErrClosed
	}
	return nil
}

// maxSealedIndex bounds the indexes of the cut heads waiting for their
// uploads in memory: two heads' worth (one uploading, the next cut
// meanwhile); past it the oldest leave memory (evictSealed).
func (s *Store) maxSealedIndex() int64 { return 2 * s.opt.HeadSize }

// evictSealed moves the indexes of the oldest cut heads waiting for
// their uploads (not the one uploading) to their files until those in
// memory are within maxSealedIndex (s.walMu is held; it takes the
// heads' partitions' locks). A bucket that is slow or away is so
// buffered up to max_wal in bounded memory: the upload reads an evicted
// head's index back and keeps it (restoreIndex), the searches that
// reach one read it back for as long as they read it (readEvicted, at
// most maxReloads at once), the searches by id only where its id
// filter may hold the trace. The newest heads keep theirs: they are the
// ones searched most.
func (s *Store) evictSealed() {
	for _, h := range s.sealed {
		if s.sealedIndex <= s.maxSealedIndex() {
			return
		}
		if h.evicted || h == s.uploading {
			continue
		}
		p := s.partition(h.host)
		p.mu.Lock()
		h.evict(s.evictedAttrs < s.opt.HeadSize)
		if h.attrs != nil && s.evictedAttrs+h.attrs.Size() > s.opt.HeadSize {
			h.attrs = nil // past the bound: searches read the head back
		}
		p.mu.Unlock()
		if h.attrs != nil {
			s.evictedAttrs += h.attrs.Size()
		}
		s.sealedIndex -= h.sealedIndex
		h.sealedIndex = 0
		if s.evicted == 0 {
			s.opt.Logger.Info("store: the indexes of cut heads waiting for their upload leave memory for their write-ahead files; searches read them back", "bound", s.maxSealedIndex())
		}
		s.evicted++
	}
}

// addSealed queues h, cut, for its upload (s.walMu is held; no
// partition's lock is): past the bound the oldest cut heads' indexes
// leave memory (evictSealed).
func (s *Store) addSealed(h *head) {
	h.sealedIndex = h.indexSize()
	s.sealedIndex += h.sealedIndex
	s.sealed = append(s.sealed, h)
	s.evictSealed()
}

// dropSealed takes h out of the upload queue (s.walMu is held), waking
// the Appends that wait for room.
func (s *Store) dropSealed(h *head) {
	if i := slices.Index(s.sealed, h); i >= 0 {
		s.sealed = slices.Delete(s.sealed, i, i+1)
		s.sealedIndex -= h.sealedIndex
		s.walBytes -= h.off
		if h.attrs != nil {
			s.evictedAttrs -= h.attrs.Size()
		}
	}
	s.walCond.Broadcast()
}

func (s *Store) addWAL(n int64) {
	s.walMu.Lock()
	s.walBytes += n
	s.walMu.Unlock()
}

// ErrNotFound is returned for an unknown trace id.
var ErrNotFound = errors.New("trace not found")
