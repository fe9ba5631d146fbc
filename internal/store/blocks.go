package store

import (
	"cmp"
	"container/list"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/tracebridge/tracebridge/internal/store/block"
)

// hasBlock reports whether a block of that id is listed.
func (s *Store) hasBlock(id string) bool {
	for _, p := range s.partitions() {
		p.mu.RLock()
		found := slices.ContainsFunc(p.blocks, func(b *blockRef) bool { return b.meta.ID == id })
		p.mu.RUnlock()
		if found {
			return true
		}
	}
	return false
}

// deleteBlock removes a block: its meta first (it leaves the store),
// then its data.
func (s *Store) deleteBlock(ctx context.Context, r *blockRef) error {
	dir := block.Dir(r.meta.Host, r.meta.ID)
	if err := s.bucket.Delete(ctx, dir+block.MetaName); err != nil {
		return err
	}
	s.dropCached(r)
	return s.bucket.Delete(ctx, dir+block.DataName)
}

// blockIndex is what reading a block needs besides its pages: its reader
// (footer), dictionary, page table, index and filters.
type blockIndex struct {
	r      *block.Reader
	dict   []string
	byName map[string]uint32
	pages  []block.PageRef
	rows   []block.Summary // by trace id, then start
	// byStart orders rows by start, then trace id: a search walks it
	// newest (or oldest) first and stops once it has enough.
	byStart []uint32
	// byPage lists rows by page, then place; page i's are
	// byPage[pageFirst[i]:pageFirst[i+1]].
	byPage, pageFirst []uint32
	attrs             *block.Bloom
	ids               *block.Bloom
	size              int64
}

// index returns a block's index, from the cache or the bucket.
func (s *Store) index(ctx context.Context, b *blockRef) (*blockIndex, error) {
	key := b.meta.ID + "/index"
	if v, ok := s.cache.get(key); ok {
		return v.(*blockIndex), nil
	}
	r, err := block.Open(ctx, s.bucket, b.key, b.meta.Size)
	if err != nil {
		return nil, err
	}
	if err := b.meta.Matches(r.Size(), r.Footer, r.FooterCRC); err != nil {
		return nil, fmt.Errorf("block %s: %w", b.key, err)
	}
	bi := &blockIndex{r: r}
	if bi.dict, err = r.Dict(ctx); err != nil {
		return nil, err
	}
	if bi.pages, err = r.Pages(ctx); err != nil {
		return nil, err
	}
	if bi.rows, err = r.Index(ctx, len(bi.dict), bi.pages); err != nil {
		return nil, err
	}
	if bi.attrs, err = r.Attrs(ctx); err != nil {
		return nil, err
	}
	if bi.ids, err = r.IDs(ctx); err != nil {
		return nil, err
	}
	bi.byStart = startOrder(bi.rows)
	bi.byPage, bi.pageFirst = pageOrder(bi.rows, bi.pages)
	bi.byName = make(map[string]uint32, len(bi.dict))
	bi.size = 64
	for i, d := range bi.dict {
		bi.byName[d] = uint32(i)
		bi.size += int64(len(d)) + 48
	}
	for i := range bi.rows {
		bi.size += 88 + 4*int64(len(bi.rows[i].Services)+len(bi.rows[i].Hosts))
	}
	bi.size += int64(r.Footer.Attrs.Len+r.Footer.IDs.Len) + 24*int64(len(bi.pages))
	s.cache.put(key, bi, bi.size)
	return bi, nil
}

// startOrder returns the indexes of rows ordered by start, then trace
// id (the order of cursorPos).
func startOrder(rows []block.Summary) []uint32 {
	type key struct {
		start  int64
		hi, lo uint64
		i      uint32
	}
	keys := make([]key, len(rows))
	for i := range rows {
		keys[i] = key{rows[i].Start, rows[i].ID.Hi, rows[i].ID.Lo, uint32(i)}
	}
	slices.SortFunc(keys, func(x, y key) int {
		return cmp.Or(cmp.Compare(x.start, y.start), cmp.Compare(x.hi, y.hi), cmp.Compare(x.lo, y.lo))
	})
	order := make([]uint32, len(rows))
	for i := range keys {
		order[i] = keys[i].i
	}
	return order
}

// pageOrder returns the indexes of rows ordered by page, then place, and
// where each page's begin (the index holds every place of every page
// once: block.Footer.ParseIndex checks them against the page table).
func pageOrder(rows []block.Summary, pages []block.PageRef) (order, first []uint32) {
	first = make([]uint32, len(pages)+1)
	for i, p := range pages {
		first[i+1] = first[i] + p.Traces
	}
	order = make([]uint32, first[len(pages)])
	for i := range rows {
		if at := first[rows[i].Page] + rows[i].Index; at < uint32(len(order)) {
			order[at] = uint32(i)
		}
	}
	return order, first
}

// terms returns a block's term index, from the cache or the bucket (nil
// for a block of version 2, which has none). It is read apart from the
// index, by the first search that needs it.
func (s *Store) terms(ctx context.Context, b *blockRef, bi *blockIndex) (*block.Terms, error) {
	if bi.r.Footer.Version < 3 {
		return nil, nil
	}
	key := b.meta.ID + "/terms"
	if v, ok := s.cache.get(key); ok {
		return v.(*block.Terms), nil
	}
	tm, err := bi.r.Terms(ctx)
	if err != nil {
		return nil, err
	}
	s.cache.put(key, tm, tm.Size())
	return tm, nil
}

// page returns the bodies of a block's page, from the cache or the bucket.
func (s *Store) page(ctx context.Context, b *blockRef, bi *blockIndex, i int) ([][]byte, error) {
	key := fmt.Sprintf("%s/page/%d", b.meta.ID, i)
	if v, ok := s.pages.get(key); ok {
		return v.([][]byte), nil
	}
	bodies, err := bi.r.Page(ctx, bi.pages, i)
	if err != nil {
		return nil, err
	}
	s.pages.put(key, bodies, int64(bi.pages[i].Raw)+int64(len(bodies))*24)
	return bodies, nil
}

// cache keeps what was read of blocks (indexes, pages, write-ahead
// chunks), least recently used dropped first, within a size bound.
type cache struct {
	mu    sync.Mutex
	max   int64
	size  int64
	ll    *list.List
	items map[string]*list.Element
}

type cached struct {
	key  string
	v    any
	size int64
}

func newCache(max int64) *cache {
	return &cache{max: max, ll: list.New(), items: map[string]*list.Element{}}
}

func (c *cache) get(key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.items[key]
	if e == nil {
		return nil, false
	}
	c.ll.MoveToFront(e)
	return e.Value.(*cached).v, true
}

func (c *cache) put(key string, v any, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.items[key]; ok {
		return
	}
	c.items[key] = c.ll.PushFront(&cached{key: key, v: v, size: size})
	c.size += size
	for c.size > c.max && c.ll.Len() > 1 {
		e := c.ll.Back()
		x := e.Value.(*cached)
		c.ll.Remove(e)
		delete(c.items, x.key)
		c.size -= x.size
	}
}

// dropPrefix forgets the entries whose keys begin with prefix.
func (c *cache) dropPrefix(prefix string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, e := range c.items {
		if strings.HasPrefix(k, prefix) {
			c.size -= e.Value.(*cached).size
			c.ll.Remove(e)
			delete(c.items, k)
		}
	}
}

// Size returns the bytes of the store: its blocks and write-ahead files.
func (s *Store) Size() int64 {
	var n int64
	for _, p := range s.partitions() {
		n += p.size()
	}
	return n
}

// HostSize returns the bytes of a host's partition and its share of the
// traces kept in other hosts' partitions (those rooted elsewhere with
// spans of this host: each trace's bytes split by its spans).
func (s *Store) HostSize(host string) int64 {
	var n int64
	for _, p := range s.partitions() {
		if p.host == host {
			n += p.size()
		} else {
			n += p.sharedOf(host)
		}
	}
	return n
}

// sharedOf returns host's share of p's blocks and heads.
func (p *partition) sharedOf(host string) int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var n int64
	for _, b := range p.blocks {
		n += b.meta.Shared[host]
	}
	for _, h := range append(slices.Clip(p.sealed), p.head) {
		if h != nil {
			n += h.shared[host]
		}
	}
	return n
}

func (p *partition) size() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	var n int64
	for _, b := range p.blocks {
		n += b.meta.Size
	}
	for _, h := range p.sealed {
		n += h.off
	}
	if p.head != nil {
		n += p.head.walSize()
	}
	return n
}

// Count returns the number of traces stored (parts of a trace in several
// blocks counted once each).
func (s *Store) Count() (int, error) {
	n := 0
	for _, p := range s.Partitions() {
		n += p.Traces
	}
	return n, nil
}
