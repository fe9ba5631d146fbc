package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	mbits "math/bits"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/tracebridge/tracebridge/internal/store/block"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// The write-ahead area: DIR/wal/<host, path-escaped>/<block id>.wal, one
// file per head. A file is the future block's traces as they arrived:
//
//	header: "TBWL" | version u32 (1) | created i64 unix ns | host length u16 | host | block id (28 bytes)
//	chunks: the segment blocks of segment.go ("TBK…" header, CRC-32C, one
//	        zstd frame of: first symbol id, the symbols it defines, traces)
//
// Symbols start at 1 in every file, so a file needs nothing else; they
// become the block's dictionary when the head is cut.
const (
	walDir     = "wal"
	walMagic   = "TBWL"
	walVersion = 1
	walExt     = ".wal"
)

// head is a partition's traces not yet in a block: their write-ahead
// file and, in memory, their summaries and what the block's meta and
// filter need. The writer adds (holding the partition's lock for what
// readers see); readers read rows, chunks and pending under its read
// lock.
type head struct {
	id      string
	host    string
	path    string
	created time.Time

	f      *os.File // nil for a head read from another process's file
	off    int64    // the file's size (what was written)
	synced int64
	// sealedIndex: its index's size when it was cut (Store.sealedIndex
	// counts it until the upload).
	sealedIndex int64

	syms *symbols
	enc  encoder
	// firstSym: the first symbol the next chunk defines.
	firstSym uint64

	// rows summarize the traces in order; row i's body is in chunk
	// rows[i].Page at rows[i].Index, or pending when Page == len(chunks).
	rows   rowList
	chunks []int64 // chunk offsets in the file
	// bodies are the traces not yet in a chunk, encoded there one after
	// the other (pending trace i ends at bodyEnds[i]). The buffer is
	// written again once its chunk is written: a search copies what it
	// reads of it (headView).
	bodies   []byte
	bodyEnds []int
	// ids holds the rows' service and host lists (keepIDs).
	ids []uint32

	// filter: what the block's filter will hold; for a head with a
	// write-ahead file (not a block being compacted or checked) it lists
	// the head's rows by attribute pair too (filter.terms).
	filter blockFilter
	cat    *catalog
	hosts  map[string]struct{}
	// shared: the bytes of the head's traces that are other hosts'
	// share (their spans in traces of this partition).
	shared map[string]int64
	// idBytes: the bytes of the rows' service and host lists.
	idBytes  int64
	errTrace int
	maxDur   int64
	minStart int64
	maxEnd   int64
	spans    int

	// evicted: the head is cut and its index (rows, their lists, its
	// filter) is in its file only, read back for its upload and by the
	// searches that reach it (Store.reloadIndex); traces counts its rows
	// and idFilter holds their trace ids (Store.evictSealed). attrs,
	// when kept (within Store.evictedAttrs' bound), is what its block's
	// attribute filter will hold: a search by attributes skips the head
	// as it skips a block.
	evicted  bool
	traces   int
	idFilter *block.Bloom
	attrs    *block.Bloom
}

// count returns the number of the head's traces.
func (h *head) count() int {
	if h.evicted {
		return h.traces
	}
	return h.rows.len()
}

// evict drops a cut head's index from memory, keeping its traces' count
// and a filter of their ids (about 10 bits a trace) for the searches by
// id, and its attribute filter when keepAttrs (p.mu held for writing).
func (h *head) evict(keepAttrs bool) {
	if h.evicted {
		return
	}
	ids := block.NewBloom(h.rows.len())
	for i := range h.rows.len() {
		ids.Add(block.HashID(h.rows.at(i).ID))
	}
	if keepAttrs {
		h.attrs = h.filter.bloom()
	}
	h.traces, h.idFilter = h.rows.len(), ids
	h.rows, h.ids, h.idBytes, h.filter = rowList{}, nil, 0, blockFilter{}
	h.evicted = true
}

// restore puts back the index evict dropped, r's (reloadIndex; p.mu
// held for writing).
func (h *head) restore(r *head) {
	h.rows, h.ids, h.idBytes, h.filter = r.rows, r.ids, r.idBytes, r.filter
	h.evicted, h.idFilter, h.attrs = false, nil, nil
}

// reloadIndex reads an evicted head's index back from its file: a head
// of its own (the same id, path, chunks and symbols) that the caller
// uses in its place and drops, so that memory holds an evicted index
// only while an upload or a search reads it. traces and off are what
// the caller saw of h (h.traces, h.off) under its partition's lock.
func (s *Store) reloadIndex(h *head, traces int, off int64) (*head, error) {
	s.readBack.Add(1)
	f, err := os.Open(h.path)
	if err != nil {
		return nil, fmt.Errorf("store: reading the index of cut head %s back: %w", h.id, err)
	}
	defer f.Close()
	r, err := readWALHeader(f, h.path, h.id)
	if err != nil {
		return nil, fmt.Errorf("store: %s: %w", h.path, err)
	}
	end, err := r.replay(f, r.off)
	if err == nil && (end != off || r.rows.len() != traces) {
		err = fmt.Errorf("%d traces up to offset %d, the head had %d up to %d", r.rows.len(), end, traces, off)
	}
	if err != nil {
		return nil, fmt.Errorf("store: reading the index of cut head %s back from %s: %w", h.id, h.path, err)
	}
	r.off, r.synced = end, end
	return r, nil
}

func newHeadValue(id, host, path string, created time.Time) *head {
	syms := newSymbols()
	h := &head{id: id, host: host, path: path, created: created, syms: syms, enc: encoder{syms: syms}, firstSym: 1,
		cat: newCatalog(), hosts: map[string]struct{}{}, shared: map[string]int64{}, minStart: math.MaxInt64, maxEnd: math.MinInt64}
	if path != "" {
		h.filter.terms = &headTerms{}
	}
	return h
}

func walHeader(h *head) []byte {
	b := append([]byte(walMagic), 0, 0, 0, walVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(h.created.UnixNano()))
	b = binary.BigEndian.AppendUint16(b, uint16(len(h.host)))
	b = append(b, h.host...)
	return append(b, h.id...)
}

// newHead begins a head with its write-ahead file.
func (s *Store) newHead(host string, now time.Time) (*head, error) {
	if len(host) > math.MaxUint16 {
		host = host[:math.MaxUint16]
	}
	dir := filepath.Join(s.dir, walDir, url.PathEscape(host))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("store: host %s: %w", host, err)
	}
	id := block.NewID(now)
	h := newHeadValue(id, host, filepath.Join(dir, id+walExt), now)
	f, err := os.OpenFile(h.path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: host %s: %w", host, err)
	}
	hdr := walHeader(h)
	if _, err := f.Write(hdr); err != nil {
		f.Close()
		return nil, fmt.Errorf("store: host %s: %s: %w", host, h.path, err)
	}
	if err := syncDir(dir); err != nil {
		f.Close()
		return nil, err
	}
	h.f, h.off = f, int64(len(hdr))
	s.addWAL(h.off)
	return h, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// add encodes t into the head's pending bodies (the partition's lock is
// held) and returns its encoded size.
func (h *head) add(t *trace.Trace) int {
	start := len(h.bodies)
	h.bodies = h.enc.appendTrace(h.bodies, t)
	n := len(h.bodies) - start
	h.bodyEnds = append(h.bodyEnds, len(h.bodies))
	row := summarizeInto(t, h.syms, &h.ids)
	row.Page, row.Index = uint32(len(h.chunks)), uint32(len(h.bodyEnds)-1)
	h.rows.append(row)
	h.idBytes += 4 * int64(len(row.Services)+len(row.Hosts))
	h.note(t, &row, n)
	return n
}

// rowSize is the memory of a row (the lists it points to aside).
const rowSize = int64(unsafe.Sizeof(block.Summary{}))

// indexSize returns about how many bytes the head's index keeps in
// memory: its rows and their lists, the pairs of its filter and its
// term index's postings (the rows counted by their number: the room
// the slice has grown to may be up to twice that). A head of many
// small traces (single spans, Kieker's executions) or of very
// compressible ones reaches its write-ahead size with an index several
// times larger: Append bounds the heads' indexes together
// (Options.HeadSize).
func (h *head) indexSize() int64 {
	n := int64(h.rows.len())*rowSize + h.idBytes + h.filter.pairs.size()
	if ht := h.filter.terms; ht != nil {
		n += int64(ht.n)*postingSize + ht.listed
	}
	return n
}

// pendingBody returns the body of pending trace i (false: there is none).
func (h *head) pendingBody(i int) ([]byte, bool) {
	if i < 0 || i >= len(h.bodyEnds) {
		return nil, false
	}
	start := 0
	if i > 0 {
		start = h.bodyEnds[i-1]
	}
	end := h.bodyEnds[i]
	return h.bodies[start:end:end], true
}

// note adds what a trace of size bytes brings to the head's meta and
// filter: its hosts, and the share of the bytes of other hosts' spans.
func (h *head) note(t *trace.Trace, row *block.Summary, size int) {
	h.filter.add(t, uint32(max(h.rows.len()-1, 0)))
	h.cat.add(t)
	perSpan := max(int64(size)/int64(max(len(t.Spans), 1)), 1)
	last := "" // a span's host mostly repeats the previous span's
	for i := range t.Spans {
		hs := t.Spans[i].Host
		if hs == "" {
			continue
		}
		if hs != last {
			if _, ok := h.hosts[hs]; !ok {
				h.hosts[strings.Clone(hs)] = struct{}{}
			}
			last = hs
		}
		if hs != h.host {
			if _, ok := h.shared[hs]; !ok {
				hs = strings.Clone(hs)
			}
			h.shared[hs] += perSpan
		}
	}
	if row.Errors > 0 {
		h.errTrace++
	}
	h.maxDur = max(h.maxDur, row.Duration)
	h.minStart = min(h.minStart, row.Start)
	h.maxEnd = max(h.maxEnd, row.Start+row.Duration)
	h.spans += int(row.Spans)
}

// summarize returns a trace's index row, its strings as symbols of syms
// (which encoding the trace defined).
func summarize(t *trace.Trace, syms *symbols) block.Summary { return summarizeInto(t, syms, nil) }

// summarizeInto is summarize with the row's service and host lists cut
// from *ids (a head's arena: a row costs no allocation of its own) when
// ids is not nil.
func summarizeInto(t *trace.Trace, syms *symbols, ids *[]uint32) block.Summary {
	r := block.Summary{ID: t.ID, Start: t.Start(), Duration: t.Duration(), Spans: uint32(len(t.Spans)), Errors: uint32(t.Errors()), Broken: len(t.Broken) > 0}
	r.Name = syms.byName[t.Name()]
	var svcs, hosts [64]uint32
	var ns, nh int
	// A span's service and host mostly repeat the previous span's: they
	// are looked up when they change.
	var lastSvc, lastHost string
	for i := range t.Spans {
		sp := &t.Spans[i]
		if sv := sp.Service; sv != "" && (i == 0 || sv != lastSvc) {
			lastSvc = sv
			if id := syms.byName[sv]; !slices.Contains(svcs[:ns], id) && ns < len(svcs) {
				svcs[ns] = id
				ns++
			}
		}
		if hs := sp.Host; hs != "" && (i == 0 || hs != lastHost) {
			lastHost = hs
			if id := syms.byName[hs]; !slices.Contains(hosts[:nh], id) && nh < len(hosts) {
				hosts[nh] = id
				nh++
			}
		}
	}
	r.Services, r.Hosts = keepIDs(ids, svcs[:ns]), keepIDs(ids, hosts[:nh])
	return r
}

// idArena is the largest buffer of a head's rows' symbol lists (the
// first holds 64 ids, each next twice the last).
const idArena = 4096

// keepIDs returns a copy of list (nil when it is empty), cut from the
// arena *ids when ids is not nil (a new buffer begins when one is full;
// ids once kept are never written again).
func keepIDs(ids *[]uint32, list []uint32) []uint32 {
	if len(list) == 0 {
		return nil
	}
	if ids == nil {
		return slices.Clone(list)
	}
	if cap(*ids)-len(*ids) < len(list) {
		*ids = make([]uint32, 0, min(max(2*cap(*ids), 64), idArena)) // a list holds 64 at most
	}
	start := len(*ids)
	*ids = append(*ids, list...)
	return (*ids)[start:len(*ids):len(*ids)]
}

func (h *head) walSize() int64 { return h.off + int64(len(h.bodies)) }

// writeChunk writes the head's pending traces to its file as one chunk
// (s.wmu is held).
func (s *Store) writeChunk(p *partition, h *head) error {
	if len(h.bodyEnds) == 0 {
		return nil
	}
	p.mu.Lock()
	newSyms := h.syms.names[h.firstSym:]
	p.mu.Unlock()
	// The payload and the block are built in the store's scratch
	// buffers (s.wmu is held: one chunk is written at a time).
	raw := appendPayloadHead(s.chunkRaw[:0], h.firstSym, newSyms, len(h.bodyEnds))
	for i := range h.bodyEnds {
		body, _ := h.pendingBody(i)
		raw = appendBytes(raw, body)
	}
	s.chunkRaw = raw
	s.chunkBlk = appendBlock(s.chunkBlk[:0], s.chunkRaw, blockHeader{count: uint32(len(h.bodyEnds)), minStart: h.minStart, maxEnd: h.maxEnd})
	blk := s.chunkBlk
	if cap(s.chunkRaw) > 4*s.opt.ChunkSize { // a huge trace's chunk: not kept
		s.chunkRaw, s.chunkBlk = nil, nil
	}
	if _, err := h.f.WriteAt(blk, h.off); err != nil {
		return fmt.Errorf("store: host %s: writing %s: %w", h.host, h.path, err)
	}
	p.mu.Lock()
	h.chunks = append(h.chunks, h.off)
	h.off += int64(len(blk))
	h.firstSym = uint64(len(h.syms.names))
	// The bodies are in the file now: their buffer takes the next ones
	// (a search copied what it reads), unless a huge trace grew it.
	h.bodies, h.bodyEnds = h.bodies[:0], h.bodyEnds[:0]
	if cap(h.bodies) > 4*s.opt.ChunkSize {
		h.bodies = nil
	}
	p.mu.Unlock()
	s.addWAL(int64(len(blk)))
	return nil
}

func (h *head) sync() error {
	if h.f == nil || h.synced == h.off {
		return nil
	}
	if err := h.f.Sync(); err != nil {
		return err
	}
	h.synced = h.off
	return nil
}

func (h *head) close() {
	if h.f != nil {
		h.f.Close()
		h.f = nil
	}
}

// cut seals p's head: its file complete and synced, it waits for its
// upload (still searchable); the next trace begins a new head.
func (s *Store) cut(p *partition) error {
	h := p.head
	if h == nil {
		return nil
	}
	if err := s.writeChunk(p, h); err != nil {
		return err
	}
	if err := h.sync(); err != nil {
		return fmt.Errorf("store: host %s: %w", p.host, err)
	}
	s.headIndex -= h.indexSize()
	s.indexCheck = 0
	p.mu.Lock()
	p.head = nil
	h.bodies, h.bodyEnds = nil, nil // a sealed head's traces are all in its file
	h.enc = encoder{}               // (its recent symbols would keep what they point into)
	if h.rows.len() > 0 {
		p.sealed = append(p.sealed, h)
	}
	p.mu.Unlock()
	if h.rows.len() == 0 {
		h.close()
		os.Remove(h.path)
		s.addWAL(-h.off)
		return nil
	}
	s.walMu.Lock()
	s.addSealed(h)
	s.walMu.Unlock()
	s.kickUploader()
	return nil
}

// headBody returns row's trace body (h is a search's copy of a head,
// headView: its pending bodies are its own; chunks are read from the
// file and cached).
func (s *Store) headBody(h *head, row *block.Summary) ([]byte, error) {
	if int(row.Page) == len(h.chunks) {
		body, ok := h.pendingBody(int(row.Index))
		if !ok {
			return nil, fmt.Errorf("store: head %s: no pending trace %d", h.id, row.Index)
		}
		return body, nil
	}
	bodies, err := s.headChunk(h, int(row.Page))
	if err != nil {
		return nil, err
	}
	if int(row.Index) >= len(bodies) {
		return nil, fmt.Errorf("store: %s chunk %d: no trace %d", h.path, row.Page, row.Index)
	}
	return bodies[row.Index], nil
}

// headChunk returns the bodies of chunk i of a head's file.
func (s *Store) headChunk(h *head, i int) ([][]byte, error) {
	off := h.chunks[i]
	key := h.id + "/wal/" + fmt.Sprint(off)
	if v, ok := s.pages.get(key); ok {
		return v.([][]byte), nil
	}
	f, err := os.Open(h.path)
	if err != nil {
		return nil, fmt.Errorf("store: %w", err)
	}
	defer f.Close()
	ch, raw, err := readBlock(f, off)
	if err != nil {
		return nil, fmt.Errorf("store: %s offset %d: %w", h.path, off, err)
	}
	pl, err := parsePayload(raw, ch.version)
	if err != nil {
		return nil, fmt.Errorf("store: %s offset %d: %w", h.path, off, err)
	}
	s.pages.put(key, pl.traces, int64(len(raw)))
	return pl.traces, nil
}

// loadWAL reads the write-ahead files. A writer cuts each into a block
// (or deletes it when its block exists: the crash came after the
// upload); a reader keeps them as heads to search.
func (s *Store) loadWAL() error {
	root := filepath.Join(s.dir, walDir)
	dirs, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, d := range dirs {
		if !d.IsDir() {
			continue
		}
		files, err := os.ReadDir(filepath.Join(root, d.Name()))
		if err != nil {
			return err
		}
		for _, f := range files {
			id, ok := strings.CutSuffix(f.Name(), walExt)
			if !ok || !block.ValidID(id) {
				continue
			}
			if err := s.loadWALFile(filepath.Join(root, d.Name(), f.Name()), id, nil); err != nil {
				return err
			}
		}
	}
	return nil
}

// loadWALFile reads one write-ahead file into a head (from the chunk
// after those h already holds, when h is given: a reader following a
// writer).
func (s *Store) loadWALFile(path, id string, h *head) error {
	if h == nil && s.hasBlock(id) {
		if !s.opt.ReadOnly {
			os.Remove(path) // its block was uploaded before the crash
		}
		return nil
	}
	flag := os.O_RDWR
	if s.opt.ReadOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(path, flag, 0)
	if err != nil {
		if s.opt.ReadOnly && errors.Is(err, os.ErrNotExist) {
			return nil // uploaded meanwhile
		}
		return err
	}
	defer f.Close()
	following := h != nil
	if h == nil {
		h, err = readWALHeader(f, path, id)
		if err != nil {
			s.recovery.Truncated = append(s.recovery.Truncated, fmt.Sprintf("%s: %v (file skipped)", path, err))
			return nil
		}
	}
	// A head searches may read (a reader following a writer's file)
	// takes its new chunks under its partition's lock.
	if following {
		fp := s.partition(h.host)
		fp.mu.Lock()
		defer fp.mu.Unlock()
	}
	from := h.off
	end, scanErr := h.replay(f, from)
	if scanErr != nil && !errors.Is(scanErr, errTorn) {
		return fmt.Errorf("%s: %w", path, scanErr)
	}
	h.off, h.synced = end, end
	if following { // already among its partition's heads
		if h.off > from {
			m := &block.Meta{Host: h.host}
			m.Services, m.Names = h.cat.metaOf()
			s.cat.addMeta(m)
		}
		return nil
	}
	if scanErr != nil && !s.opt.ReadOnly {
		st, _ := f.Stat()
		if err := f.Truncate(end); err != nil {
			return err
		}
		s.recovery.Truncated = append(s.recovery.Truncated, fmt.Sprintf("%s: offset %d: %v (%d bytes cut)", path, end, scanErr, st.Size()-end))
	}
	p := s.partition(h.host)
	if from == int64(len(walHeader(h))) || h.off > from {
		m := &block.Meta{Host: h.host}
		m.Services, m.Names = h.cat.metaOf()
		s.cat.addMeta(m)
	}
	if s.opt.ReadOnly {
		p.mu.Lock()
		if !slices.Contains(p.sealed, h) {
			p.sealed = append(p.sealed, h)
		}
		p.mu.Unlock()
		return nil
	}
	s.recovery.Traces += h.rows.len()
	s.addWAL(h.off)
	if h.rows.len() == 0 {
		os.Remove(path)
		s.addWAL(-h.off)
		return nil
	}
	// A writer cuts it at once: the next traces begin a new head. (A
	// write-ahead area of many heads, a bucket away before the stop,
	// keeps the newest heads' indexes in memory: addSealed.)
	p.mu.Lock()
	p.sealed = append(p.sealed, h)
	p.mu.Unlock()
	s.walMu.Lock()
	s.addSealed(h)
	s.walMu.Unlock()
	return nil
}

func readWALHeader(f io.ReaderAt, path, id string) (*head, error) {
	var b [16]byte
	if _, err := f.ReadAt(b[:], 0); err != nil {
		return nil, fmt.Errorf("write-ahead header: %w", err)
	}
	if string(b[:4]) != walMagic {
		return nil, errors.New("not a write-ahead file")
	}
	if v := binary.BigEndian.Uint32(b[4:]); v != walVersion {
		return nil, fmt.Errorf("write-ahead version %d (this tracebridge reads %d)", v, walVersion)
	}
	created := int64(binary.BigEndian.Uint64(b[8:]))
	var lb [2]byte
	if _, err := f.ReadAt(lb[:], 16); err != nil {
		return nil, fmt.Errorf("write-ahead header: %w", err)
	}
	n := int(binary.BigEndian.Uint16(lb[:]))
	rest := make([]byte, n+len(id))
	if _, err := f.ReadAt(rest, 18); err != nil {
		return nil, fmt.Errorf("write-ahead header: %w", err)
	}
	if string(rest[n:]) != id {
		return nil, fmt.Errorf("write-ahead header names block %q, the file %q", rest[n:], id)
	}
	h := newHeadValue(id, string(rest[:n]), path, time.Unix(0, created))
	h.off = int64(18 + len(rest))
	return h, nil
}

// replay adds the chunks of the head's file f from offset from
// (replayChunk) and returns where they end (a torn or corrupt chunk
// ends them with an errTorn error).
func (h *head) replay(f *os.File, from int64) (int64, error) {
	return scanBlocks(f, from, func(off int64, ch blockHeader, raw []byte) error {
		pl, err := parsePayload(raw, ch.version)
		if err != nil {
			return fmt.Errorf("%w: %v", errTorn, err)
		}
		return h.replayChunk(off, pl)
	})
}

// replayChunk adds a chunk read from the file: its symbols, its traces'
// rows (decoded once for their summaries, meta and filter).
func (h *head) replayChunk(off int64, pl payload) error {
	if pl.firstSym != uint64(len(h.syms.names)) {
		return fmt.Errorf("%w: chunk at %d defines symbols from %d, the file has %d", errTorn, off, pl.firstSym, len(h.syms.names))
	}
	for _, name := range pl.syms {
		h.syms.id(strings.Clone(name))
	}
	h.firstSym = uint64(len(h.syms.names))
	page := uint32(len(h.chunks))
	var rows []block.Summary
	var traces []*trace.Trace
	for i, body := range pl.traces {
		t, err := decodeTrace(body, h.syms)
		if err != nil {
			return fmt.Errorf("%w: chunk at %d, trace %d: %v", errTorn, off, i, err)
		}
		row := summarizeInto(t, h.syms, &h.ids)
		row.Page, row.Index = page, uint32(i)
		rows = append(rows, row)
		traces = append(traces, t)
	}
	h.chunks = append(h.chunks, off)
	for i, t := range traces {
		h.rows.append(rows[i])
		h.idBytes += 4 * int64(len(rows[i].Services)+len(rows[i].Hosts))
		h.note(t, &rows[i], len(pl.traces[i]))
	}
	return nil
}

// headTerms is a head's term index in memory, for the attribute pairs
// only (a text or regex search reads a head's traces): the postings of
// the pairs its filter lists (blockFilter.put), each the head's rows that
// hold the pair, as uvarint differences (a few bytes a trace; a block's
// term index is built from the traces when the head is cut). At most
// maxHeadPairs distinct pairs are listed (values unique to a trace would
// cost a posting each): once full, a pair not listed may be in any row.
type headTerms struct {
	// slabs hold the postings in the order they began, postingSlab each
	// (a posting's number is 1 + its place; its address stays).
	slabs [][]headPosting
	n     int
	full  bool
	// listed counts the bytes the postings hold beyond their first 8.
	listed int64
}

// postingSize is the memory of a posting (its rows past the first 8
// bytes aside).
const postingSize = int64(unsafe.Sizeof(headPosting{}))

// maxHeadPairs bounds a head's term index (about 56 bytes a pair).
const maxHeadPairs = 1 << 16

// postingSlab: the postings allocated at once.
const postingSlab = 64

type headPosting struct {
	last, n uint32
	rows    []byte
	// first holds rows while they fit (most pairs are in few rows).
	first [8]byte
}

// begin returns a new posting and its number (0 and nil when the index
// is full).
func (ht *headTerms) begin() (uint32, *headPosting) {
	if ht.n >= maxHeadPairs {
		ht.full = true
		return 0, nil
	}
	if ht.n%postingSlab == 0 {
		ht.slabs = append(ht.slabs, make([]headPosting, postingSlab))
	}
	p := &ht.slabs[ht.n/postingSlab][ht.n%postingSlab]
	p.rows = p.first[:0]
	ht.n++
	return uint32(ht.n), p
}

// posting returns the posting numbered v (begin).
func (ht *headTerms) posting(v uint32) *headPosting {
	v--
	return &ht.slabs[v/postingSlab][v%postingSlab]
}

// add lists row (rows come in ascending order; a repeat is listed once)
// and returns how many bytes the posting's memory grew by.
func (p *headPosting) add(row uint32) int64 {
	if p.n > 0 && p.last == row {
		return 0 // a repeat in this trace
	}
	c := cap(p.rows)
	p.rows = binary.AppendUvarint(p.rows, uint64(row-p.last))
	p.last = row
	p.n++
	if c2 := cap(p.rows); c2 != c {
		if c == len(p.first) {
			c = 0 // the first bytes are the posting's own
		}
		return int64(c2 - c)
	}
	return 0
}

// rowsOf returns the rows below n that hold the pair of hash x as a
// bitmap (nil when none does), and false when it cannot tell (the pair
// came when the head's term index was full); only for a filter that
// lists rows (terms), the caller holding the partition's read lock.
func (f *blockFilter) rowsOf(x uint64, n int) ([]uint64, bool) {
	v, ok := f.pairs.get(x)
	if !ok {
		return nil, true
	}
	if v == 0 {
		return nil, false
	}
	p := f.terms.posting(v)
	set := make([]uint64, (n+63)/64)
	b, row := p.rows, uint64(0)
	for range p.n {
		d, k := binary.Uvarint(b)
		b = b[k:]
		row += d
		if row >= uint64(n) {
			break
		}
		set[row/64] |= 1 << (row % 64)
	}
	return set, true
}

// pairSet is a filter's set of pair hashes (pairHash), open-addressed
// in two flat slices, each hash with a value: the number of its posting
// in the head's term index (headTerms.begin; 0: none). The hashes are
// mixed already, so their low bits place them. It took the place of a
// map for the filter and another for the term index: a pair never seen
// cost two map inserts (h-storecpu2).
type pairSet struct {
	keys []uint64 // 0: an empty slot (the hash 0 is kept aside)
	vals []uint32
	n    int // keys in use
	zero bool
	zv   uint32
}

// pairSetMin is a set's first size (slots).
const pairSetMin = 64

// ref returns the value of x, adding x (value 0) when new (added); the
// pointer is good until the next ref.
func (s *pairSet) ref(x uint64) (v *uint32, added bool) {
	if x == 0 {
		added = !s.zero
		s.zero = true
		return &s.zv, added
	}
	if 4*(s.n+1) > 3*len(s.keys) {
		s.grow()
	}
	mask := uint64(len(s.keys) - 1)
	for i := x & mask; ; i = (i + 1) & mask {
		switch s.keys[i] {
		case x:
			return &s.vals[i], false
		case 0:
			s.keys[i] = x
			s.n++
			return &s.vals[i], true
		}
	}
}

// get returns the value of x and whether the set holds x.
func (s *pairSet) get(x uint64) (uint32, bool) {
	if x == 0 {
		return s.zv, s.zero
	}
	if len(s.keys) == 0 {
		return 0, false
	}
	mask := uint64(len(s.keys) - 1)
	for i := x & mask; ; i = (i + 1) & mask {
		switch s.keys[i] {
		case x:
			return s.vals[i], true
		case 0:
			return 0, false
		}
	}
}

// has reports whether the set holds x.
func (s *pairSet) has(x uint64) bool {
	_, ok := s.get(x)
	return ok
}

// grow doubles the slots (at most three in four are used).
func (s *pairSet) grow() {
	keys, vals := s.keys, s.vals
	size := max(2*len(keys), pairSetMin)
	s.keys, s.vals = make([]uint64, size), make([]uint32, size)
	mask := uint64(size - 1)
	for j, x := range keys {
		if x == 0 {
			continue
		}
		i := x & mask
		for s.keys[i] != 0 {
			i = (i + 1) & mask
		}
		s.keys[i], s.vals[i] = x, vals[j]
	}
}

// size returns the bytes of the set's slots.
func (s *pairSet) size() int64 { return 12 * int64(len(s.keys)) }

// len returns the number of hashes in the set.
func (s *pairSet) len() int {
	if s.zero {
		return s.n + 1
	}
	return s.n
}

// each calls fn with every hash of the set.
func (s *pairSet) each(fn func(uint64)) {
	if s.zero {
		fn(0)
	}
	for _, x := range s.keys {
		if x != 0 {
			fn(x)
		}
	}
}

// blockFilter collects what a block's attribute filter holds: every
// attribute pair (key=value) and the trigrams of the strings of the
// block's dictionary (operations, classes, attribute keys, hosts,
// services, threads), each once. Attribute values and messages are found
// by scanning a trace's bytes instead: their trigrams would make the
// filter larger than the data.
type blockFilter struct {
	pairs pairSet
	// attrPairs counts the pairs of attributes (put) among pairs, not
	// Kieker's positions: about the distinct terms of the block's term
	// index.
	attrPairs int
	// terms, when set (a head's filter), lists the head's rows by pair.
	terms   *headTerms
	strings map[string]struct{}
	// The resources and scopes added (the assembler shares one among
	// the traces of a resource: their pairs are hashed once a block),
	// with the hashes of their pairs.
	resources map[*trace.Resource][]uint64
	scopes    map[*trace.Scope][]uint64

	// What spare a trace's spans repeated lookups (a span's strings and
	// Kieker positions mostly repeat the previous span's): strings
	// already in strings by their bytes' address, the last Kieker trace
	// and session hashed, the small orderIndex, eoi and ess values
	// hashed.
	seen [256]string
	// pairAt remembers pairs by address (addPair): made with the first
	// pair, 64 slots, four times as many (to maxPairSlots) each time the
	// head's rows outnumber them (a quiet host's head keeps few).
	pairAt   []pairSlot
	pairBits int
	kid      int64
	kidSeen  bool
	session  string
	small    [3][]uint64 // bit sets of the values added below smallLimit: orderIndex, eoi, ess
}

// add adds t's pairs and strings, and lists the pairs under row when
// the filter lists rows (terms). A pair is hashed once for both.
func (f *blockFilter) add(t *trace.Trace, row uint32) {
	if f.strings == nil {
		f.strings = map[string]struct{}{}
		f.resources = map[*trace.Resource][]uint64{}
		f.scopes = map[*trace.Scope][]uint64{}
	}
	for i := range t.Spans {
		s := &t.Spans[i]
		for _, str := range [...]string{s.Operation, s.Component, s.Host, s.Service, s.Thread} {
			f.addString(str)
		}
		for _, a := range s.Attributes {
			f.addPair(a.Key, a.Value, row)
			f.addString(a.Key)
		}
		f.kieker(s)
	}
	// Resource and scope attributes are the spans' too (Span.Attr finds
	// them), stored once per trace. The tables remember them by address
	// (the assembler shares a process's resource among its traces); a
	// compaction's traces, decoded each with resources of their own,
	// would keep every one of them: past maxRemembered the tables begin
	// again (their pairs are in pairs already).
	if len(f.resources) > maxRemembered {
		clear(f.resources)
	}
	if len(f.scopes) > maxRemembered {
		clear(f.scopes)
	}
	for _, r := range t.Resources {
		hs, ok := f.resources[r]
		if !ok {
			for _, a := range r.Attributes {
				hs = append(hs, pairHash(a.Key, a.Value))
				if _, ok := f.strings[a.Key]; !ok {
					f.strings[strings.Clone(a.Key)] = struct{}{}
				}
			}
			f.resources[r] = hs
		}
		if !ok || f.terms != nil {
			for _, x := range hs {
				f.put(x, row)
			}
		}
	}
	for _, c := range t.Scopes {
		hs, ok := f.scopes[c]
		if !ok {
			hs = append(hs, pairHash(trace.ScopeNameKey, c.Name), pairHash(trace.ScopeVersionKey, c.Version))
			for _, a := range c.Attributes {
				hs = append(hs, pairHash(a.Key, a.Value))
				if _, ok := f.strings[a.Key]; !ok {
					f.strings[strings.Clone(a.Key)] = struct{}{}
				}
			}
			f.scopes[c] = hs
		}
		if !ok || f.terms != nil {
			for _, x := range hs {
				f.put(x, row)
			}
		}
	}
}

// maxRemembered bounds the resources and scopes a filter remembers.
const maxRemembered = 1 << 12

// pairSlot is a pair added before, found again by the addresses of its
// strings (the spans' keys and repeated values are interned: they come
// again with the same bytes), with its posting in the head's term index
// (nil: none).
type pairSlot struct {
	key, value string
	p          *headPosting
}

// maxPairBits: a filter remembers up to 1 << maxPairBits pairs by
// address.
const maxPairBits = 10

// put adds the pair of hash x and, when the filter lists rows, lists it
// under row; it returns the pair's posting (nil: none).
func (f *blockFilter) put(x uint64, row uint32) *headPosting {
	v, added := f.pairs.ref(x)
	if added {
		f.attrPairs++
	}
	if f.terms == nil {
		return nil
	}
	var p *headPosting
	if added {
		*v, p = f.terms.begin()
	} else if *v != 0 {
		p = f.terms.posting(*v)
	}
	if p != nil {
		f.terms.listed += p.add(row)
	}
	return p
}

// addPair adds the pair (key, value) and lists it under row (put). A
// pair found by address is neither hashed nor looked up again.
func (f *blockFilter) addPair(key, value string, row uint32) {
	if len(f.pairAt) == 0 || f.pairBits < maxPairBits && int(row) >= len(f.pairAt) {
		f.pairBits = min(max(f.pairBits+2, 6), maxPairBits)
		f.pairAt = make([]pairSlot, 1<<f.pairBits) // a cache: begins empty
	}
	kp, vp := unsafe.StringData(key), unsafe.StringData(value)
	slot := &f.pairAt[((uint64(uintptr(unsafe.Pointer(kp)))^uint64(uintptr(unsafe.Pointer(vp)))<<7^uint64(len(value)))*0x9e3779b97f4a7c15)>>(64-f.pairBits)]
	if kp != nil && unsafe.StringData(slot.key) == kp && unsafe.StringData(slot.value) == vp && len(slot.key) == len(key) && len(slot.value) == len(value) {
		if slot.p != nil {
			f.terms.listed += slot.p.add(row)
		}
		return
	}
	*slot = pairSlot{key: key, value: value, p: f.put(pairHash(key, value), row)}
}

// addString adds s to the strings.
func (f *blockFilter) addString(s string) {
	if s == "" {
		// It has no trigrams; and "" (its data nil) would match an
		// empty slot, so whether it was kept depended on addresses.
		return
	}
	p := unsafe.StringData(s)
	slot := &f.seen[(uintptr(unsafe.Pointer(p))>>4^uintptr(len(s)))%uintptr(len(f.seen))]
	if unsafe.StringData(*slot) == p && len(*slot) == len(s) {
		return
	}
	if _, ok := f.strings[s]; !ok {
		s = strings.Clone(s)
		f.strings[s] = struct{}{}
	}
	*slot = s
}

// The keys of a Kieker span's positions, as trace.KiekerAttrs names them
// (TestFilterKiekerPairs keeps them in step).
const (
	keyKiekerTrace   = "kieker.traceId"
	keyKiekerSession = "kieker.sessionId"
	smallLimit       = 1 << 26 // values below it are remembered in a bit set (8 MiB at most)
)

var smallKeys = [3]string{"kieker.orderIndex", "kieker.eoi", "kieker.ess"}

// kieker adds the pairs of s's Kieker positions (trace.KiekerAttrs)
// without building them, hashing each value once a block.
func (f *blockFilter) kieker(s *trace.Span) {
	switch s.Source {
	case trace.FromEvents:
		f.addSmall(0, s.OrderIndex)
	case trace.FromExecution:
		f.addSmall(1, s.EOI)
		f.addSmall(2, s.ESS)
	default:
		return
	}
	if !f.kidSeen || s.KiekerTrace != f.kid {
		f.pairs.ref(pairHash(keyKiekerTrace, strconv.FormatInt(s.KiekerTrace, 10)))
		f.kid, f.kidSeen = s.KiekerTrace, true
	}
	if s.Session != "" && s.Session != f.session {
		f.pairs.ref(pairHash(keyKiekerSession, s.Session))
		f.session = s.Session
	}
}

// addSmall adds the pair of position k (smallKeys) with value v: a
// value below smallLimit is a bit of the key's set (a huge trace's
// millions of orderIndexes cost a bit each, not a map entry), hashed when
// the block's filter is built; any other is hashed now.
func (f *blockFilter) addSmall(k int, v int32) {
	if v >= 0 && v < smallLimit {
		set := f.small[k]
		if w := int(v / 64); w >= len(set) {
			set = append(set, make([]uint64, max(w+1, 2*len(set), 16)-len(set))...)
			f.small[k] = set
		}
		set[v/64] |= 1 << (v % 64)
		return
	}
	f.pairs.ref(pairHash(smallKeys[k], strconv.Itoa(int(v))))
}

// hasSmall reports whether the pair (key, value) is one of the small
// positions added.
func (f *blockFilter) hasSmall(key, value string) bool {
	k := slices.Index(smallKeys[:], key)
	if k < 0 {
		return false
	}
	v, err := strconv.Atoi(value)
	if err != nil || v < 0 || v >= smallLimit || strconv.Itoa(v) != value {
		return false
	}
	set := f.small[k]
	return v/64 < len(set) && set[v/64]&(1<<(v%64)) != 0
}

// eachPair calls fn with the hash of every pair added.
func (f *blockFilter) eachPair(fn func(uint64)) {
	f.pairs.each(fn)
	for k, set := range f.small {
		for w, bits := range set {
			for ; bits != 0; bits &= bits - 1 {
				v := w*64 + mbits.TrailingZeros64(bits)
				fn(pairHash(smallKeys[k], strconv.Itoa(v)))
			}
		}
	}
}

// bloom builds the filter.
func (f *blockFilter) bloom() *block.Bloom {
	n := f.pairs.len()
	for _, set := range f.small {
		for _, bits := range set {
			n += mbits.OnesCount64(bits)
		}
	}
	for s := range f.strings {
		n += max(len(s)-2, 0)
	}
	b := block.NewBloom(n)
	f.eachPair(b.Add)
	for s := range f.strings {
		trigrams(s, b.Add)
	}
	return b
}
