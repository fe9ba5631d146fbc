// Package block is the store's immutable, self-contained block: the
// traces of one host over a span of time, with everything needed to read
// them (their dictionary, an index of trace summaries, Bloom filters), in
// one data object that is written once, listed, read by range, compacted
// and deleted whole — on a local directory or in object storage — and a
// small meta object beside it. docs/STORE.md ("Blocks") describes the
// bytes; testdata/block-v3.golden pins those this version writes and
// block-v2.golden those of version 2, which it still reads. Version 3
// adds the term index (terms.go): every attribute pair, exception value
// and status message of the block's traces with the rows that hold it,
// so that a search reads only the pages of traces that may match.
//
// The package knows the container, not the trace encoding: a trace is an
// opaque body whose strings are ids of the block's dictionary, which the
// caller builds and hands to Finish.
package block

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"

	"github.com/tracebridge/tracebridge/internal/trace"
)

// Version is the block format this package writes (and the newest it
// reads); it reads every version from MinVersion on.
const (
	Version    = 3
	MinVersion = 2
)

// The data object's fixed parts.
const (
	Magic      = "TBB2" // the same in every version: the version field tells them apart
	HeaderSize = 8      // magic, version u32
	// FooterSize is the footer of version 3: six sections of 16 bytes,
	// traces u32, pages u32, version u32, magic; version 2's is
	// FooterSizeV2 (five sections, no term index).
	FooterSize   = 112
	FooterSizeV2 = 96
	// Limits checked when reading: a corrupt length must not make a reader
	// allocate gigabytes.
	MaxSection = 256 << 20
	MaxPageRaw = 64 << 20
	maxList    = 1 << 24
)

// footerSize returns the footer's size in a version.
func footerSize(version uint32) int {
	if version == 2 {
		return FooterSizeV2
	}
	return FooterSize
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrCorrupt is wrapped by every error about a block's bytes.
var ErrCorrupt = errors.New("corrupt block")

func corruptf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrCorrupt, fmt.Sprintf(format, args...))
}

// Summary is a trace's row in a block's index: what a search needs
// without reading the trace.
type Summary struct {
	ID       trace.ID
	Start    int64 // unix ns
	Duration int64 // ns
	Spans    uint32
	Errors   uint32
	Broken   bool
	// Name, Services and Hosts are ids of the block's dictionary: the
	// trace's name, the services and hosts of its spans.
	Name     uint32
	Services []uint32
	Hosts    []uint32
	// Page and Index locate the trace's body (set by the Writer).
	Page, Index uint32
}

// Section locates one part of the data object.
type Section struct {
	Off uint64
	Len uint32
	CRC uint32 // CRC-32C of the section's bytes
}

// Footer is the last FooterSize bytes of a data object.
type Footer struct {
	Dict, Index, Pages, Attrs, IDs Section
	// Terms is the term index (version 3; zero in version 2).
	Terms             Section
	Traces, PageCount uint32
	Version           uint32
}

// PageRef is a page's row in the page table.
type PageRef struct {
	Off    uint64
	Len    uint32 // stored (compressed) bytes
	Raw    uint32 // bytes after decompression
	Traces uint32
	CRC    uint32 // CRC-32C of the stored bytes
}

const pageRefSize = 24

var (
	zencOnce sync.Once
	zenc     *zstd.Encoder
	zdecPool = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(MaxSection),
			zstd.IgnoreChecksum(true)) // a section's CRC-32C checks its bytes
		if err != nil {
			panic(err)
		}
		return d
	}}
)

func compress(dst, raw []byte) []byte {
	zencOnce.Do(func() {
		var err error
		// A 1 MiB window: pages are 64 KiB, and the encoder keeps a
		// history of twice its window for good (16 MiB at the default
		// 8 MiB); a section larger than the window finds its matches
		// within the last MiB.
		zenc, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithWindowSize(1<<20))
		if err != nil {
			panic(err)
		}
	})
	return zenc.EncodeAll(raw, dst)
}

func decompress(stored []byte, rawLen int) ([]byte, error) {
	d := zdecPool.Get().(*zstd.Decoder)
	defer zdecPool.Put(d)
	raw, err := d.DecodeAll(stored, make([]byte, 0, rawLen))
	if err != nil {
		return nil, corruptf("decompressing: %v", err)
	}
	return raw, nil
}

// Writer builds a data object. Add traces (their bodies encoded against
// the caller's dictionary), then Finish with the dictionary and the
// attribute filter.
type Writer struct {
	pageSize int
	head     []byte   // the object's header
	segs     [][]byte // the pages written so far, in segments
	size     int      // bytes of head and segs
	raw      []byte   // the current page, uncompressed
	page     []byte   // scratch: the page with its count, compressed from
	inPage   uint32
	pages    []PageRef
	// rows are the summaries Add copied, unless from reads them where
	// the caller keeps them (ReadRows); pos is each row's place in the
	// block, in Add order.
	rows     []Summary
	from     func(i int) *Summary
	pos      []rowPos
	spans    int
	minStart int64
	maxEnd   int64
	terms    termSet
}

// NewWriter returns a Writer that cuts pages at pageSize uncompressed
// bytes (default 256 KiB).
func NewWriter(pageSize int) *Writer {
	if pageSize <= 0 {
		pageSize = 256 << 10
	}
	w := &Writer{pageSize: pageSize, minStart: math.MaxInt64, maxEnd: math.MinInt64}
	w.head = append(w.head, Magic...)
	w.head = binary.BigEndian.AppendUint32(w.head, Version)
	w.size = len(w.head)
	return w
}

// rowPos is where a row's body is: its page and its place in the page.
type rowPos struct{ page, index uint32 }

// Add adds a trace's body with its summary (its Page and Index are the
// block's, set here) and the terms the term index lists it under
// (repeats are fine). The body and terms are copied, and the summary
// unless the Writer reads the rows where the caller keeps them
// (ReadRows).
func (w *Writer) Add(body []byte, s Summary, terms ...Term) {
	w.terms.add(terms)
	w.raw = binary.AppendUvarint(w.raw, uint64(len(body)))
	w.raw = append(w.raw, body...)
	w.pos = append(w.pos, rowPos{uint32(len(w.pages)), w.inPage})
	w.inPage++
	if w.from == nil {
		w.rows = append(w.rows, s)
	}
	w.spans += int(s.Spans)
	w.minStart = min(w.minStart, s.Start)
	w.maxEnd = max(w.maxEnd, s.Start+s.Duration)
	if len(w.raw) >= w.pageSize {
		w.cut()
	}
}

// Grow makes room for n more traces' rows (a writer that knows how many
// traces it will add copies none of them as it grows).
func (w *Writer) Grow(n int) {
	if w.from == nil {
		w.rows = slices.Grow(w.rows, n)
	}
	w.pos = slices.Grow(w.pos, n)
	w.terms.rowEnd = slices.Grow(w.terms.rowEnd, n)
}

// GrowTerms makes room for about distinct different terms before the
// first Add: a block of a busy host lists hundreds of thousands, and a
// table grown by doubling is hashed again at each step. (The rows' terms
// are not made room for: their count, repeats included, overstates them,
// and that much at once raised the peak memory of a busy store by 8 %.)
func (w *Writer) GrowTerms(distinct int) {
	if w.terms.keys == nil {
		w.terms.init(distinct)
	}
}

// Traces returns the number of traces added; Size the bytes so far
// (compressed pages and the uncompressed current page).
func (w *Writer) Traces() int { return len(w.pos) }
func (w *Writer) Size() int   { return w.size + len(w.raw) }

// ReadRows tells a Writer, before the first Add, that the summary of the
// i-th trace added is at rows(i) until Finish returns, as Add is given it
// (but for its Page and Index): the Writer reads it there instead of
// keeping a copy (a cut head's rows are in memory already: a copy of a
// busy host's was tens of megabytes more while its block was built).
func (w *Writer) ReadRows(rows func(i int) *Summary) {
	if len(w.pos) == 0 {
		w.from, w.rows = rows, nil
	}
}

// row returns the summary of the i-th trace added (its Page and Index
// not the block's: pos has those).
func (w *Writer) row(i int) *Summary {
	if w.from != nil {
		return w.from(i)
	}
	return &w.rows[i]
}

// segSize is the size of the segments a Writer keeps its compressed pages
// in: a block of many pages grown as one slice would be copied at every
// quarter of growth, and each copy is a fresh large allocation the garbage
// collector clears; FinishParts hands the segments on as they are
// (Finish copies them once).
const segSize = 1 << 20

// cut writes the current page: uvarint trace count, then each body
// (uvarint length, bytes), compressed.
func (w *Writer) cut() {
	if w.inPage == 0 {
		return
	}
	raw := binary.AppendUvarint(w.page[:0], uint64(w.inPage))
	raw = append(raw, w.raw...)
	w.page = raw
	// A page goes whole into the last segment when it has room for
	// zstd's bound (the input, a 128th of it and the headers), else into
	// a new one.
	bound := len(raw) + len(raw)>>7 + 64
	n := len(w.segs)
	if n == 0 || cap(w.segs[n-1])-len(w.segs[n-1]) < bound {
		w.segs = append(w.segs, make([]byte, 0, max(segSize, bound)))
		n++
	}
	seg := w.segs[n-1]
	at := len(seg)
	seg = compress(seg, raw)
	w.segs[n-1] = seg
	stored := seg[at:]
	w.pages = append(w.pages, PageRef{Off: uint64(w.size), Len: uint32(len(stored)), Raw: uint32(len(raw)), Traces: w.inPage, CRC: crc32.Checksum(stored, castagnoli)})
	w.size += len(stored)
	w.raw, w.inPage = w.raw[:0], 0
}

// Stats describe a finished block.
type Stats struct {
	Traces, Spans    int
	MinStart, MaxEnd int64 // unix ns; 0 for an empty block
	Size             int64
	FooterCRC        uint32 // for Meta.FooterCRC
}

// Finish writes the rest of the data object (dictionary, index, page
// table, the attribute filter, the trace-id filter, the term index,
// footer) and returns it. dict[0] must be "" (id 0). attrs may be nil (no filter: every
// search reads the block).
func (w *Writer) Finish(dict []string, attrs *Bloom) ([]byte, Stats, error) {
	parts, st, err := w.FinishParts(dict, attrs)
	if err != nil {
		return nil, st, err
	}
	return slices.Concat(parts...), st, nil
}

// FinishParts is Finish returning the data object in parts, to be stored
// one after the other: the pages as the Writer kept them, then the rest
// (a busy host's block is tens of megabytes, and one copy of it was an
// eighth of building it).
func (w *Writer) FinishParts(dict []string, attrs *Bloom) ([][]byte, Stats, error) {
	if len(dict) == 0 || dict[0] != "" {
		return nil, Stats{}, errors.New("block: the dictionary's id 0 must be the empty string")
	}
	n := len(w.pos)
	for i := range n {
		r := w.row(i)
		// The largest symbol a row names (no list built: a block has
		// many rows).
		top := r.Name
		for _, id := range r.Services {
			top = max(top, id)
		}
		for _, id := range r.Hosts {
			top = max(top, id)
		}
		if int(top) >= len(dict) {
			return nil, Stats{}, fmt.Errorf("block: trace %s names symbol %d of %d", r.ID, top, len(dict))
		}
	}
	w.cut()
	var f Footer
	f.Version, f.Traces, f.PageCount = Version, uint32(n), uint32(len(w.pages))
	// The sections after the pages, in one part with the footer.
	var tail []byte
	section := func(raw []byte, compressed bool) Section {
		off := len(tail)
		if compressed {
			tail = binary.BigEndian.AppendUint32(tail, uint32(len(raw)))
			tail = compress(tail, raw)
		} else {
			tail = append(tail, raw...)
		}
		b := tail[off:]
		return Section{Off: uint64(w.size + off), Len: uint32(len(b)), CRC: crc32.Checksum(b, castagnoli)}
	}
	var raw []byte
	raw = binary.AppendUvarint(raw, uint64(len(dict)))
	for _, s := range dict {
		raw = binary.AppendUvarint(raw, uint64(len(s)))
		raw = append(raw, s...)
	}
	f.Dict = section(raw, true)
	perm := sortRows(n, w.row)
	f.Index = section(w.appendIndex(nil, perm), true)
	raw = raw[:0]
	for _, p := range w.pages {
		raw = binary.BigEndian.AppendUint64(raw, p.Off)
		raw = binary.BigEndian.AppendUint32(raw, p.Len)
		raw = binary.BigEndian.AppendUint32(raw, p.Raw)
		raw = binary.BigEndian.AppendUint32(raw, p.Traces)
		raw = binary.BigEndian.AppendUint32(raw, p.CRC)
	}
	f.Pages = section(raw, false)
	if attrs == nil {
		attrs = &Bloom{} // empty: holds everything
	}
	f.Attrs = section(attrs.Marshal(nil), false)
	ids := NewBloom(n)
	for i := range n {
		ids.Add(HashID(w.row(i).ID))
	}
	f.IDs = section(ids.Marshal(nil), false)
	f.Terms = section(w.terms.appendTerms(nil, perm), true)
	tail = appendFooter(tail, f)
	parts := make([][]byte, 0, len(w.segs)+2)
	parts = append(parts, w.head)
	parts = append(parts, w.segs...)
	parts = append(parts, tail)
	w.segs = nil
	st := Stats{Traces: n, Spans: w.spans, Size: int64(w.size + len(tail)), FooterCRC: FooterChecksum(tail)}
	if n > 0 {
		st.MinStart, st.MaxEnd = w.minStart, w.maxEnd
	}
	return parts, st, nil
}

// HashID is a trace id's hash in the id filter.
func HashID(id trace.ID) uint64 {
	h := id.Hi*0x9e3779b97f4a7c15 ^ id.Lo
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	return h
}

// sortRows orders the n rows by trace id, then start (stable): perm[i]
// is the Add-order number of the index's row i.
func sortRows(n int, row func(i int) *Summary) []uint32 {
	perm := make([]uint32, n)
	for i := range perm {
		perm[i] = uint32(i)
	}
	slices.SortStableFunc(perm, func(x, y uint32) int {
		a, b := row(int(x)), row(int(y))
		switch {
		case a.ID.Hi != b.ID.Hi:
			return cmpU64(a.ID.Hi, b.ID.Hi)
		case a.ID.Lo != b.ID.Lo:
			return cmpU64(a.ID.Lo, b.ID.Lo)
		case a.Start < b.Start:
			return -1
		case a.Start > b.Start:
			return 1
		}
		return 0
	})
	return perm
}

// appendIndex appends the index: the rows in perm's order (sortRows),
// each with its place in the block.
func (w *Writer) appendIndex(dst []byte, perm []uint32) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(perm)))
	for _, p := range perm {
		r, at := w.row(int(p)), w.pos[p]
		dst = binary.BigEndian.AppendUint64(dst, r.ID.Hi)
		dst = binary.BigEndian.AppendUint64(dst, r.ID.Lo)
		dst = binary.AppendVarint(dst, r.Start)
		dst = binary.AppendVarint(dst, r.Duration)
		dst = binary.AppendUvarint(dst, uint64(r.Spans))
		dst = binary.AppendUvarint(dst, uint64(r.Errors))
		var flags byte
		if r.Broken {
			flags |= 1
		}
		dst = append(dst, flags)
		dst = binary.AppendUvarint(dst, uint64(r.Name))
		for _, l := range [2][]uint32{r.Services, r.Hosts} {
			dst = binary.AppendUvarint(dst, uint64(len(l)))
			for _, id := range l {
				dst = binary.AppendUvarint(dst, uint64(id))
			}
		}
		dst = binary.AppendUvarint(dst, uint64(at.page))
		dst = binary.AppendUvarint(dst, uint64(at.index))
	}
	return dst
}

func cmpU64(a, b uint64) int {
	if a < b {
		return -1
	}
	return 1
}

func appendFooter(dst []byte, f Footer) []byte {
	secs := []Section{f.Dict, f.Index, f.Pages, f.Attrs, f.IDs, f.Terms}
	if f.Version == 2 {
		secs = secs[:5]
	}
	for _, s := range secs {
		dst = binary.BigEndian.AppendUint64(dst, s.Off)
		dst = binary.BigEndian.AppendUint32(dst, s.Len)
		dst = binary.BigEndian.AppendUint32(dst, s.CRC)
	}
	dst = binary.BigEndian.AppendUint32(dst, f.Traces)
	dst = binary.BigEndian.AppendUint32(dst, f.PageCount)
	dst = binary.BigEndian.AppendUint32(dst, f.Version)
	return append(dst, Magic...)
}

// FooterChecksum returns the CRC-32C of a data object's footer (its last
// bytes, as many as its version's footer has; all of it when shorter).
func FooterChecksum(data []byte) uint32 {
	n := FooterSizeV2
	if len(data) >= 8 {
		n = footerSize(binary.BigEndian.Uint32(data[len(data)-8:]))
	}
	return crc32.Checksum(data[max(len(data)-n, 0):], castagnoli)
}

// ParseFooter reads the footer at the end of tail, the last bytes of a
// data object of size bytes (at least its version's footer size: read
// FooterSize, or all of a smaller object), and checks that its sections
// lie within the object.
func ParseFooter(tail []byte, size int64) (Footer, error) {
	var f Footer
	if len(tail) < FooterSizeV2 || size < HeaderSize+FooterSizeV2 || int64(len(tail)) > size {
		return f, corruptf("%d bytes: too short for a block", size)
	}
	if string(tail[len(tail)-4:]) != Magic {
		return f, corruptf("no %s footer (not a block, or cut short)", Magic)
	}
	f.Version = binary.BigEndian.Uint32(tail[len(tail)-8:])
	if f.Version < MinVersion || f.Version > Version {
		return f, corruptf("version %d (this tracebridge reads %d to %d)", f.Version, MinVersion, Version)
	}
	fs := footerSize(f.Version)
	if len(tail) < fs || size < int64(HeaderSize+fs) {
		return f, corruptf("%d bytes: too short for a block of version %d", size, f.Version)
	}
	tail = tail[len(tail)-fs:]
	secs := []*Section{&f.Dict, &f.Index, &f.Pages, &f.Attrs, &f.IDs, &f.Terms}
	names := [...]string{"dictionary", "index", "page table", "attribute filter", "id filter", "term index"}
	if f.Version == 2 {
		secs = secs[:5]
	}
	end := uint64(size) - uint64(fs)
	for i, s := range secs {
		p := tail[16*i:]
		*s = Section{Off: binary.BigEndian.Uint64(p), Len: binary.BigEndian.Uint32(p[8:]), CRC: binary.BigEndian.Uint32(p[12:])}
		if s.Off < HeaderSize || s.Len > MaxSection || s.Off > end || uint64(s.Len) > end-s.Off {
			return f, corruptf("%s at %d (%d bytes) outside the object", names[i], s.Off, s.Len)
		}
	}
	f.Traces = binary.BigEndian.Uint32(tail[fs-16:])
	f.PageCount = binary.BigEndian.Uint32(tail[fs-12:])
	if uint64(f.PageCount)*pageRefSize != uint64(f.Pages.Len) {
		return f, corruptf("page table of %d bytes for %d pages", f.Pages.Len, f.PageCount)
	}
	return f, nil
}

// check verifies a section's bytes against its checksum.
func (s Section) check(p []byte, what string) error {
	if len(p) != int(s.Len) {
		return corruptf("%s: %d bytes, want %d", what, len(p), s.Len)
	}
	if c := crc32.Checksum(p, castagnoli); c != s.CRC {
		return corruptf("%s at %d: checksum %08x, want %08x", what, s.Off, c, s.CRC)
	}
	return nil
}

// unpack checks and decompresses a compressed section (raw length u32,
// then a zstd frame).
func (s Section) unpack(p []byte, what string) ([]byte, error) {
	if err := s.check(p, what); err != nil {
		return nil, err
	}
	if len(p) < 4 {
		return nil, corruptf("%s: too short", what)
	}
	n := binary.BigEndian.Uint32(p)
	if n > MaxSection {
		return nil, corruptf("%s: %d bytes uncompressed, over the limit", what, n)
	}
	raw, err := decompress(p[4:], int(n))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(raw) != int(n) {
		return nil, corruptf("%s: %d bytes uncompressed, want %d", what, len(raw), n)
	}
	return raw, nil
}

// reader reads varints off a byte slice, remembering the first error.
type reader struct {
	p   []byte
	off int
	err error
}

func (r *reader) fail(what string) {
	if r.err == nil {
		r.err = corruptf("%s at byte %d", what, r.off)
	}
}

func (r *reader) uvarint(what string) uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.p[r.off:])
	if n <= 0 {
		r.fail(what)
		return 0
	}
	r.off += n
	return v
}

// varint reads a zig-zag varint as binary.Varint does: the same bytes
// and failures as uvarint.
func (r *reader) varint(what string) int64 {
	u := r.uvarint(what)
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (r *reader) u32(what string) uint32 {
	v := r.uvarint(what)
	if v > math.MaxUint32 {
		r.fail(what)
		return 0
	}
	return uint32(v)
}

// count reads a list length that cannot exceed the bytes left (each item
// takes at least min bytes).
func (r *reader) count(what string, min int) int {
	n := r.uvarint(what)
	if r.err == nil && (n > maxList || n*uint64(min) > uint64(len(r.p)-r.off)) {
		r.fail(what + " count")
		return 0
	}
	return int(n)
}

func (r *reader) bytes(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.p)-r.off {
		r.fail(what)
		return nil
	}
	b := r.p[r.off : r.off+n]
	r.off += n
	return b
}

// ParseDict checks and decodes the dictionary section's stored bytes.
func (f Footer) ParseDict(stored []byte) ([]string, error) {
	raw, err := f.Dict.unpack(stored, "dictionary")
	if err != nil {
		return nil, err
	}
	r := &reader{p: raw}
	n := r.count("dictionary", 1)
	dict := make([]string, 0, n)
	for range n {
		l := r.uvarint("dictionary string length")
		dict = append(dict, string(r.bytes(int(min(l, math.MaxInt32)), "dictionary string")))
	}
	if r.err == nil && r.off != len(raw) {
		r.fail("dictionary: trailing bytes")
	}
	if r.err == nil && (len(dict) == 0 || dict[0] != "") {
		r.fail("dictionary: id 0 is not the empty string")
	}
	if r.err != nil {
		return nil, r.err
	}
	return dict, nil
}

// ParseIndex checks and decodes the index section's stored bytes; symbol
// ids are checked against a dictionary of dictLen strings and page
// positions against the footer.
func (f Footer) ParseIndex(stored []byte, dictLen int, pages []PageRef) ([]Summary, error) {
	raw, err := f.Index.unpack(stored, "index")
	if err != nil {
		return nil, err
	}
	r := &reader{p: raw}
	n := r.count("index", 24)
	if r.err == nil && n != int(f.Traces) {
		return nil, corruptf("index: %d rows, the footer says %d traces", n, f.Traces)
	}
	rows := make([]Summary, n)
	var arena []uint32
	sym := func(what string) uint32 {
		v := r.u32(what)
		if r.err == nil && int(v) >= dictLen {
			r.fail(what + ": symbol outside the dictionary")
		}
		return v
	}
	for i := range rows {
		s := &rows[i]
		id := r.bytes(16, "trace id")
		if r.err != nil {
			break
		}
		s.ID = trace.ID{Hi: binary.BigEndian.Uint64(id), Lo: binary.BigEndian.Uint64(id[8:])}
		s.Start = r.varint("start")
		s.Duration = r.varint("duration")
		s.Spans = r.u32("spans")
		s.Errors = r.u32("errors")
		flags := r.bytes(1, "flags")
		if r.err != nil {
			break
		}
		s.Broken = flags[0]&1 != 0
		s.Name = sym("name")
		for _, l := range [2]*[]uint32{&s.Services, &s.Hosts} {
			m := r.count("symbol list", 1)
			if m > 0 {
				// The lists share arenas: two allocations a row would
				// make an index of 50,000 rows 100,000 objects to
				// allocate and for the collector to trace.
				if len(arena)+m > cap(arena) {
					arena = make([]uint32, 0, max(m, 4096))
				}
				*l = arena[len(arena) : len(arena)+m : len(arena)+m]
				arena = arena[:len(arena)+m]
			}
			for j := range m {
				(*l)[j] = sym("symbol")
			}
		}
		s.Page = r.u32("page")
		s.Index = r.u32("index in page")
		if r.err == nil && (int(s.Page) >= len(pages) || s.Index >= pages[s.Page].Traces) {
			r.fail(fmt.Sprintf("trace %s: page %d, index %d not in the page table", s.ID, s.Page, s.Index))
		}
	}
	if r.err == nil && r.off != len(raw) {
		r.fail("index: trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	return rows, nil
}

// ParsePages checks and decodes the page table's bytes.
func (f Footer) ParsePages(stored []byte) ([]PageRef, error) {
	if err := f.Pages.check(stored, "page table"); err != nil {
		return nil, err
	}
	pages := make([]PageRef, f.PageCount)
	var total uint64
	for i := range pages {
		p := stored[i*pageRefSize:]
		pg := PageRef{Off: binary.BigEndian.Uint64(p), Len: binary.BigEndian.Uint32(p[8:]), Raw: binary.BigEndian.Uint32(p[12:]),
			Traces: binary.BigEndian.Uint32(p[16:]), CRC: binary.BigEndian.Uint32(p[20:])}
		if pg.Off < HeaderSize || pg.Off+uint64(pg.Len) > f.Dict.Off || pg.Raw > MaxPageRaw || pg.Traces == 0 {
			return nil, corruptf("page %d at %d (%d bytes, %d raw, %d traces) out of bounds", i, pg.Off, pg.Len, pg.Raw, pg.Traces)
		}
		total += uint64(pg.Traces)
		pages[i] = pg
	}
	if total != uint64(f.Traces) {
		return nil, corruptf("page table holds %d traces, the footer says %d", total, f.Traces)
	}
	return pages, nil
}

// ParseFilter checks and decodes a filter section (f.Attrs or f.IDs).
func ParseFilter(s Section, stored []byte, what string) (*Bloom, error) {
	if err := s.check(stored, what); err != nil {
		return nil, err
	}
	b, rest, ok := UnmarshalBloom(stored)
	if !ok || len(rest) != 0 {
		if len(stored) == 2 && stored[0] == 0 && stored[1] == 0 { // an empty filter: holds everything
			return &Bloom{}, nil
		}
		return nil, corruptf("%s: malformed", what)
	}
	return b, nil
}

// ParsePage checks and decompresses a page's stored bytes and returns its
// trace bodies (slices of the decompressed page).
func ParsePage(pg PageRef, stored []byte, i int) ([][]byte, error) {
	what := fmt.Sprintf("page %d", i)
	if len(stored) != int(pg.Len) {
		return nil, corruptf("%s: %d bytes, want %d", what, len(stored), pg.Len)
	}
	if c := crc32.Checksum(stored, castagnoli); c != pg.CRC {
		return nil, corruptf("%s at %d: checksum %08x, want %08x", what, pg.Off, c, pg.CRC)
	}
	raw, err := decompress(stored, int(pg.Raw))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	if len(raw) != int(pg.Raw) {
		return nil, corruptf("%s: %d bytes uncompressed, want %d", what, len(raw), pg.Raw)
	}
	r := &reader{p: raw}
	n := r.count(what, 1)
	if r.err == nil && n != int(pg.Traces) {
		return nil, corruptf("%s: %d traces, the page table says %d", what, n, pg.Traces)
	}
	bodies := make([][]byte, 0, n)
	for range n {
		l := r.uvarint("body length")
		bodies = append(bodies, r.bytes(int(min(l, math.MaxInt32)), "body"))
	}
	if r.err == nil && r.off != len(raw) {
		r.fail(what + ": trailing bytes")
	}
	if r.err != nil {
		return nil, r.err
	}
	return bodies, nil
}
