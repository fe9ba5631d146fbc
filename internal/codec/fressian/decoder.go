package fressian

import (
	"encoding/binary"
	"hash/adler32"
	"math"
	"strconv"
)

// Default limits (see Limits).
const (
	DefaultMaxDepth  = 512
	DefaultMaxString = 16 << 20
	DefaultMaxCount  = 1 << 22
	DefaultMaxCache  = 1 << 16
	DefaultMaxReplay = 16 << 20
)

// Limits bound what a Decoder accepts in one payload. Zero fields take the
// defaults.
type Limits struct {
	// MaxDepth bounds the nesting of values read by ReadValue and Skip,
	// together with nested cache references and struct tags.
	MaxDepth int
	// MaxString bounds the bytes of one string or byte array (all chunks).
	MaxString int
	// MaxCount bounds the items of one list or typed array and the fields
	// of one struct.
	MaxCount int
	// MaxCache bounds the entries of the struct cache and of the priority
	// cache.
	MaxCache int
	// MaxReplay bounds the bytes re-read for the priority cache in one
	// payload: the scans that find the end of cached values and the
	// replays of references.
	MaxReplay int
}

func (l Limits) withDefaults() Limits {
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxString <= 0 {
		l.MaxString = DefaultMaxString
	}
	if l.MaxCount <= 0 {
		l.MaxCount = DefaultMaxCount
	}
	if l.MaxCache <= 0 {
		l.MaxCache = DefaultMaxCache
	}
	if l.MaxReplay <= 0 {
		l.MaxReplay = DefaultMaxReplay
	}
	return l
}

// Options configure a Decoder.
type Options struct {
	Limits Limits
	// FieldCount, if set, returns the number of fields that follow a
	// struct with the tag and the declared field count. Java's reader
	// hands a struct to the read handler of its tag, which reads the
	// fields it knows whatever the declared count says; FieldCount lets
	// the caller say the same (zorka's Metric_v1 declares 4 fields and
	// writes 6). Without it, a struct has its declared count.
	FieldCount func(tag string, declared int) int
	// Tags are struct tags the caller expects. The Decoder returns these
	// very strings for them, so that comparing a tag read with one of
	// them is cheap.
	Tags []string
}

// maxTags bounds the interned struct tags of a Decoder.
const maxTags = 256

// Decoder reads the values of one payload (see the package comment).
// Its zero value is not usable; call NewDecoder.
type Decoder struct {
	lim        Limits
	fieldCount func(string, int) int

	buf      []byte
	pos, end int    // the current range: the payload, or a replayed cached value
	frames   []span // the ranges being replayed under the current one
	mark     int    // start of the current footer block
	err      error

	structs  []structType
	prio     []span // cached values; end < 0: under construction
	replayed int    // bytes re-read for the priority cache
	depth    int    // nesting of values being read
	scanning int    // > 0 while sizing a value for the priority cache

	tags    map[string]string
	scratch []byte
}

type span struct{ pos, end int }

type structType struct {
	tag    string
	fields int // as Options.FieldCount says
}

// NewDecoder returns a Decoder; call Reset with a payload before reading.
func NewDecoder(opts Options) *Decoder {
	d := &Decoder{
		lim:        opts.Limits.withDefaults(),
		fieldCount: opts.FieldCount,
		tags:       make(map[string]string),
	}
	for _, t := range opts.Tags {
		d.tags[t] = t
	}
	return d
}

// Reset starts decoding payload with empty caches and no error. The
// Decoder reads payload until the next Reset; the caller must not modify
// it meanwhile.
func (d *Decoder) Reset(payload []byte) {
	d.buf, d.pos, d.end = payload, 0, len(payload)
	d.frames = d.frames[:0]
	d.mark = 0
	d.err = nil
	d.structs = d.structs[:0]
	d.prio = d.prio[:0]
	d.replayed, d.depth, d.scanning = 0, 0, 0
}

// Err returns the first error, or nil.
func (d *Decoder) Err() error { return d.err }

// Offset returns the payload offset of the next byte to be read.
func (d *Decoder) Offset() int { return d.pos }

// Remaining returns the number of bytes left in the range being read:
// the rest of the payload, or of a cached value being replayed. The items
// of a list that lie ahead take at least one byte each, so a caller never
// needs room for more items than this.
func (d *Decoder) Remaining() int {
	for d.pos == d.end && len(d.frames) > 0 {
		d.pop()
	}
	return d.end - d.pos
}

// Fail records an error of kind (one of the Err… kinds) at the payload
// offset off, unless an error was recorded already. Callers use it to
// report what they find wrong in the values they read (a struct with a tag
// they cannot use), so that their errors stick and carry offsets like the
// Decoder's own.
func (d *Decoder) Fail(off int, kind error, msg string) {
	if d.err == nil {
		d.err = &Error{Offset: off, Msg: msg, Kind: kind}
	}
}

func (d *Decoder) malformed(off int, msg string) { d.Fail(off, ErrMalformed, msg) }

func (d *Decoder) truncated() {
	d.Fail(d.pos, ErrTruncated, "payload ends inside a value")
}

// short reports the end of the current range inside a value. At the end
// of the payload that is truncation; at the end of a replayed range it
// cannot happen for ranges the scan accepted, and is reported as
// malformed rather than read on into the bytes after the range.
func (d *Decoder) short() {
	if len(d.frames) > 0 {
		d.malformed(d.pos, "value crosses the end of a cached value")
		return
	}
	d.truncated()
}

// need reports whether n more bytes are in the current range, recording
// the error if not.
func (d *Decoder) need(n int) bool {
	if d.err != nil {
		return false
	}
	// A cached value read as a part of this one (a count given by a
	// reference) may just have ended.
	for d.pos == d.end && len(d.frames) > 0 {
		d.pop()
	}
	if n > d.end-d.pos {
		d.short()
		return false
	}
	return true
}

func (d *Decoder) enter() bool {
	if d.err != nil {
		return false
	}
	if d.depth >= d.lim.MaxDepth {
		d.Fail(d.pos, ErrLimit, "values nested deeper than "+itoa(d.lim.MaxDepth))
		return false
	}
	d.depth++
	return true
}

func (d *Decoder) leave() { d.depth-- }

// replaying reports whether the current range is a cached value being
// re-read: its cache side effects happened when it was first read.
func (d *Decoder) replaying() bool { return len(d.frames) > 0 }

func (d *Decoder) pop() {
	f := d.frames[len(d.frames)-1]
	d.frames = d.frames[:len(d.frames)-1]
	d.pos, d.end = f.pos, f.end
}

// settle returns from the cached values whose replay has ended, down to
// n replays.
func (d *Decoder) settle(n int) {
	for len(d.frames) > n && d.pos == d.end {
		d.pop()
	}
}

// More reports whether another value follows at the top level: the
// payload has bytes left and no error occurred.
func (d *Decoder) More() bool {
	if d.err != nil {
		return false
	}
	for d.pos == d.end && len(d.frames) > 0 {
		d.pop()
	}
	return d.pos < d.end
}

// head handles the codes that may precede a value — priority cache puts
// and references, RESET_CACHES, footers — and returns the code of the
// value itself, not consumed. ok is false after an error.
func (d *Decoder) head() (c byte, ok bool) {
	if d.err == nil && d.pos < d.end { // the common case: a value, no prefix
		if c = d.buf[d.pos]; !prefixCodes[c] {
			return c, true
		}
	}
	for d.err == nil {
		for d.pos == d.end && len(d.frames) > 0 {
			d.pop()
		}
		if d.pos >= d.end {
			d.truncated()
			return 0, false
		}
		c = d.buf[d.pos]
		switch {
		case c >= codePriorityCachePacked && c < codePriorityCachePacked+32:
			d.pos++
			d.ref(d.pos-1, int(c-codePriorityCachePacked))
		case c == codeGetPriorityCache:
			at := d.pos
			d.pos++
			if d.enter() {
				i := d.readInt32("priority cache index")
				d.leave()
				d.ref(at, i)
			}
		case c == codePutPriorityCache:
			d.pos++
			if !d.replaying() {
				d.put()
			}
		case c == codeResetCaches:
			if d.scanning > 0 || d.replaying() {
				d.malformed(d.pos, "RESET_CACHES inside a cached value")
				return 0, false
			}
			d.pos++
			d.resetCaches()
		case c == codeFooter:
			d.footer()
		default:
			return c, true
		}
	}
	return 0, false
}

// prefixCodes are the codes head handles before a value.
var prefixCodes = func() (t [256]bool) {
	for c := codePriorityCachePacked; c < codePriorityCachePacked+32; c++ {
		t[c] = true
	}
	t[codeGetPriorityCache], t[codePutPriorityCache], t[codeResetCaches], t[codeFooter] = true, true, true, true
	return t
}()

func (d *Decoder) resetCaches() {
	d.structs = d.structs[:0]
	d.prio = d.prio[:0]
}

// ref makes the cached value i the next value: its bytes are read again.
func (d *Decoder) ref(at, i int) {
	if d.err != nil {
		return
	}
	if i < 0 || i >= len(d.prio) {
		d.malformed(at, "priority cache index "+itoa(i)+" beyond the end of the cache ("+itoa(len(d.prio))+" entries)")
		return
	}
	e := d.prio[i]
	if e.end < 0 {
		d.malformed(at, "reference to priority cache entry "+itoa(i)+" inside its own value")
		return
	}
	if len(d.frames) >= d.lim.MaxDepth {
		d.Fail(at, ErrLimit, "priority cache references nested deeper than "+itoa(d.lim.MaxDepth))
		return
	}
	if !d.replay(at, e.end-e.pos) {
		return
	}
	d.frames = append(d.frames, span{d.pos, d.end})
	d.pos, d.end = e.pos, e.end
}

func (d *Decoder) replay(at, n int) bool {
	d.replayed += n
	if d.replayed > d.lim.MaxReplay {
		d.Fail(at, ErrLimit, "more than "+itoa(d.lim.MaxReplay)+" bytes re-read through the priority cache")
		return false
	}
	return true
}

// put handles PUT_PRIORITY_CACHE (already consumed) outside replays: it
// reserves the slot, scans the next value to find its end (with the cache
// effects the scan has undone afterwards, so that the real read repeats
// them), and leaves the position at the start of the value.
func (d *Decoder) put() {
	if len(d.prio) >= d.lim.MaxCache {
		d.Fail(d.pos, ErrLimit, "more than "+itoa(d.lim.MaxCache)+" priority cache entries")
		return
	}
	slot := len(d.prio)
	d.prio = append(d.prio, span{d.pos, -1})
	// Also inside a scan (a cached value within a cached value): the
	// value is scanned on its own and then read as part of the outer one.
	start, nStructs, nFrames := d.pos, len(d.structs), len(d.frames)
	d.scanning++
	d.skip()
	d.scanning--
	d.settle(nFrames)
	if d.err != nil {
		return
	}
	if !d.replay(start, d.pos-start) {
		return
	}
	d.prio[slot].end = d.pos
	d.structs = d.structs[:nStructs]
	d.prio = d.prio[:slot+1]
	d.pos = start
}

// footer checks a footer at d.pos: the magic, the byte count since the
// start of the payload or the last footer, and the Adler-32 of those bytes
// with the magic and count. Then the caches are reset.
func (d *Decoder) footer() {
	at := d.pos
	if d.scanning > 0 || d.replaying() {
		d.malformed(at, "footer inside a cached value")
		return
	}
	if !d.need(4) {
		return
	}
	if m := binary.BigEndian.Uint32(d.buf[at:]); m != footerMagic {
		d.malformed(at, "invalid footer magic")
		return
	}
	d.pos += 4
	if !d.need(4) {
		return
	}
	if n := int32(binary.BigEndian.Uint32(d.buf[d.pos:])); int(n) != at-d.mark {
		d.malformed(at, "footer length "+itoa(int(n))+", expected "+itoa(at-d.mark))
		return
	}
	d.pos += 4
	if !d.need(4) {
		return
	}
	if sum := adler32.Checksum(d.buf[d.mark:d.pos]); sum != binary.BigEndian.Uint32(d.buf[d.pos:]) {
		d.malformed(at, "footer checksum mismatch")
		return
	}
	d.pos += 4
	d.mark = d.pos
	d.resetCaches()
}

// Peek returns the kind of the next value without reading it (after
// handling the codes that precede it). It returns KindInvalid after an
// error and for a code that starts no value; reading such a value reports
// ErrMalformed.
func (d *Decoder) Peek() Kind {
	c, ok := d.head()
	if !ok {
		return KindInvalid
	}
	return kinds[c]
}

// mismatch reads the value at d.pos, whose code c is not of the kind
// wanted, and then reports ErrType — unless reading it failed first, as
// Java's reader fails reading the object before it casts it.
func (d *Decoder) mismatch(want string, c byte) {
	at := d.pos
	d.skip()
	if d.err == nil {
		got := kinds[c].String()
		d.Fail(at, ErrType, "expected "+want+", got "+got)
	}
}

// ReadNull reads a null and reports true if the next value is null;
// otherwise it reads nothing and reports false.
func (d *Decoder) ReadNull() bool {
	c, ok := d.head()
	if ok && c == codeNull {
		d.pos++
		return true
	}
	return false
}

// ReadInt reads an integer (any of its forms).
func (d *Decoder) ReadInt() int64 {
	c, ok := d.head()
	if !ok {
		return 0
	}
	if kinds[c] != KindInt {
		d.mismatch("int", c)
		return 0
	}
	return d.intBody(c)
}

// intBody reads the integer whose code c is at d.pos.
func (d *Decoder) intBody(c byte) int64 {
	var n int // bytes after the code
	var hi int64
	switch {
	case c <= 0x3F:
		d.pos++
		return int64(c)
	case c == 0xFF:
		d.pos++
		return -1
	case c < 0x60:
		n, hi = 1, int64(c)-0x50
	case c < 0x70:
		n, hi = 2, int64(c)-0x68
	case c < 0x74:
		n, hi = 3, int64(c)-0x72
	case c < 0x78:
		n, hi = 4, int64(c)-0x76
	case c < 0x7C:
		n, hi = 5, int64(c)-0x7A
	case c < 0x80:
		n, hi = 6, int64(c)-0x7E
	default: // codeInt
		if !d.need(9) {
			return 0
		}
		v := int64(binary.BigEndian.Uint64(d.buf[d.pos+1:]))
		d.pos += 9
		return v
	}
	if !d.need(1 + n) {
		return 0
	}
	var u uint64
	for _, b := range d.buf[d.pos+1 : d.pos+1+n] {
		u = u<<8 | uint64(b)
	}
	d.pos += 1 + n
	return hi<<(8*n) | int64(u)
}

// readInt32 reads an integer that must fit in 32 bits (Java's readInt32:
// counts, cache indices, struct field counts).
func (d *Decoder) readInt32(what string) int {
	at := d.pos
	v := d.ReadInt()
	if d.err == nil && (v < math.MinInt32 || v > math.MaxInt32) {
		d.malformed(at, what+" "+i64toa(v)+" out of range for int")
		return 0
	}
	return int(v)
}

// readLength reads a count of bytes or items and checks it against max.
func (d *Decoder) readLength(what string, max int) int {
	at := d.pos
	n := d.readInt32(what)
	switch {
	case d.err != nil:
		return 0
	case n < 0:
		d.malformed(at, "negative "+what+" "+itoa(n))
		return 0
	case n > max:
		d.Fail(at, ErrLimit, what+" "+itoa(n)+" over the limit "+itoa(max))
		return 0
	}
	return n
}

// ReadBool reads a boolean.
func (d *Decoder) ReadBool() bool {
	c, ok := d.head()
	switch {
	case !ok:
		return false
	case c == codeTrue:
		d.pos++
		return true
	case c == codeFalse:
		d.pos++
		return false
	}
	d.mismatch("bool", c)
	return false
}

// ReadDouble reads a double (not a float: Java's readDouble).
func (d *Decoder) ReadDouble() float64 {
	c, ok := d.head()
	switch {
	case !ok:
		return 0
	case c == codeDouble0:
		d.pos++
		return 0
	case c == codeDouble1:
		d.pos++
		return 1
	case c == codeDouble:
		if !d.need(9) {
			return 0
		}
		v := math.Float64frombits(binary.BigEndian.Uint64(d.buf[d.pos+1:]))
		d.pos += 9
		return v
	}
	d.mismatch("double", c)
	return 0
}

// ReadFloat reads a float (not a double: Java's readFloat).
func (d *Decoder) ReadFloat() float32 {
	c, ok := d.head()
	if !ok {
		return 0
	}
	if c != codeFloat {
		d.mismatch("float", c)
		return 0
	}
	if !d.need(5) {
		return 0
	}
	v := math.Float32frombits(binary.BigEndian.Uint32(d.buf[d.pos+1:]))
	d.pos += 5
	return v
}

// ReadString reads a string or null (null reports isNull). The string
// does not alias the payload.
func (d *Decoder) ReadString() (s string, isNull bool) {
	c, ok := d.head()
	switch {
	case !ok:
		return "", false
	case c == codeNull:
		d.pos++
		return "", true
	case kinds[c] == KindString:
		b := d.stringBytes(c, true)
		return string(b), false
	}
	d.mismatch("string", c)
	return "", false
}

// stringBytes reads the string whose code c is at d.pos and returns its
// UTF-8, which aliases the payload or the scratch buffer (valid until the
// next read). Without build it only checks the string.
func (d *Decoder) stringBytes(c byte, build bool) []byte {
	if c >= codeStringPacked && c < codeStringChunk {
		d.pos++
		return d.stringPiece(int(c-codeStringPacked), build, false)
	}
	d.pos++
	n := d.readLength("string length", d.lim.MaxString)
	if c == codeString {
		return d.stringPiece(n, build, false)
	}
	// Chunks, then a last piece (packed or counted): their bytes are
	// joined before decoding, so that surrogate pairs may span chunks.
	d.scratch = d.scratch[:0]
	total := 0
	for d.err == nil {
		total += n
		if total > d.lim.MaxString {
			d.Fail(d.pos, ErrLimit, "string of more than "+itoa(d.lim.MaxString)+" bytes")
			return nil
		}
		d.stringPiece(n, false, build)
		if !d.need(1) {
			return nil
		}
		switch c := d.buf[d.pos]; {
		case c >= codeStringPacked && c < codeStringChunk:
			d.pos++
			n = int(c - codeStringPacked)
		case c == codeString:
			d.pos++
			n = d.readLength("string length", d.lim.MaxString)
		case c == codeStringChunk:
			d.pos++
			n = d.readLength("string length", d.lim.MaxString)
			continue
		default:
			d.malformed(d.pos, "expected the rest of a chunked string, got code "+hexByte(c))
			return nil
		}
		// The last piece.
		if total+n > d.lim.MaxString {
			d.Fail(d.pos, ErrLimit, "string of more than "+itoa(d.lim.MaxString)+" bytes")
			return nil
		}
		d.stringPiece(n, false, build)
		return d.finishChunked(build)
	}
	return nil
}

func (d *Decoder) finishChunked(build bool) []byte {
	if d.err != nil || !build {
		return nil
	}
	// The pieces were checked one by one; decode the joined bytes.
	joined := d.scratch
	if _, plain := cesuScan(joined); plain {
		return joined
	}
	out := appendCESU(make([]byte, 0, len(joined)), joined)
	return out
}

// stringPiece reads n bytes of string data and checks them as Java's
// reader decodes them. With build it returns the UTF-8 of the piece; with
// collect it appends the raw bytes to d.scratch.
func (d *Decoder) stringPiece(n int, build, collect bool) []byte {
	if !d.need(n) {
		return nil
	}
	b := d.buf[d.pos : d.pos+n]
	bad, plain := cesuScan(b)
	if bad >= 0 {
		d.malformed(d.pos+bad, "invalid UTF-8 lead byte "+hexByte(b[bad])+" or sequence cut by the end of the string")
		return nil
	}
	d.pos += n
	if collect {
		d.scratch = append(d.scratch, b...)
	}
	if !build || plain {
		return b
	}
	d.scratch = appendCESU(d.scratch[:0], b)
	return d.scratch
}

// ReadBytes reads a byte array (a copy) or null (nil).
func (d *Decoder) ReadBytes() []byte {
	c, ok := d.head()
	switch {
	case !ok:
		return nil
	case c == codeNull:
		d.pos++
		return nil
	case kinds[c] == KindBytes:
		return d.bytesBody(c, true)
	}
	d.mismatch("bytes", c)
	return nil
}

func (d *Decoder) bytesBody(c byte, build bool) []byte {
	d.pos++
	var out []byte
	piece := func(n int) {
		if !d.need(n) {
			return
		}
		if build {
			out = append(out, d.buf[d.pos:d.pos+n]...)
		}
		d.pos += n
	}
	switch {
	case c < codeBytesChunk:
		piece(int(c - codeBytesPacked))
	case c == codeBytes:
		piece(d.readLength("byte array length", d.lim.MaxString))
	default: // chunks, then a counted last piece
		total := 0
		for {
			n := d.readLength("byte array length", d.lim.MaxString)
			if total += n; total > d.lim.MaxString {
				d.Fail(d.pos, ErrLimit, "byte array of more than "+itoa(d.lim.MaxString)+" bytes")
			}
			piece(n)
			if !d.need(1) {
				break
			}
			c := d.buf[d.pos]
			d.pos++
			if c == codeBytes {
				n := d.readLength("byte array length", d.lim.MaxString)
				if total+n > d.lim.MaxString {
					d.Fail(d.pos, ErrLimit, "byte array of more than "+itoa(d.lim.MaxString)+" bytes")
				}
				piece(n)
				break
			}
			if c != codeBytesChunk {
				d.malformed(d.pos-1, "expected the rest of chunked bytes, got code "+hexByte(c))
				break
			}
		}
	}
	if d.err != nil {
		return nil
	}
	if build && out == nil {
		out = []byte{}
	}
	return out
}

// ListReader iterates over the items of a list, set, map or typed array.
type ListReader struct {
	d      *Decoder
	n      int  // items left of a counted list
	until  byte // 0: counted; codeBeginClosedList or codeBeginOpenList
	frames int  // replay depth when the list started
}

// Next reports whether another item follows; the caller then reads it.
// It returns false at the end of the list and after an error.
func (l *ListReader) Next() bool {
	d := l.d
	if d == nil || d.err != nil {
		return false
	}
	if l.until == 0 {
		if l.n == 0 {
			return false
		}
		l.n--
		return true
	}
	d.settle(l.frames)
	if d.pos >= d.end {
		if l.until == codeBeginOpenList && len(d.frames) == l.frames {
			return false // the end of the payload ends an open list
		}
		d.short()
		return false
	}
	if d.buf[d.pos] == codeEndCollection {
		d.pos++
		return false
	}
	return true
}

// Len returns the number of items left in a counted list, or -1 for a
// closed or open list (items until an end code).
func (l *ListReader) Len() int {
	if l.until != 0 {
		return -1
	}
	return l.n
}

// ReadList reads the head of a list; its items follow (ListReader.Next).
func (d *Decoder) ReadList() ListReader {
	c, ok := d.head()
	if !ok {
		return ListReader{}
	}
	if kinds[c] != KindList {
		d.mismatch("list", c)
		return ListReader{}
	}
	return d.listBody(c)
}

func (d *Decoder) listBody(c byte) ListReader {
	d.pos++
	switch {
	case c < codeList:
		return ListReader{d: d, n: int(c - codeListPacked)}
	case c == codeList:
		n := d.readLength("list length", d.lim.MaxCount)
		return ListReader{d: d, n: n}
	default:
		return ListReader{d: d, until: c, frames: len(d.frames)}
	}
}

// ReadMap reads the head of a map; its keys and values follow
// alternately (ListReader.Next before each). A map whose list has an odd
// number of items reports ErrMalformed at its end.
func (d *Decoder) ReadMap() ListReader {
	c, ok := d.head()
	if !ok {
		return ListReader{}
	}
	if c != codeMap {
		d.mismatch("map", c)
		return ListReader{}
	}
	d.pos++
	return d.ReadList()
}

// ReadStruct reads the head of a struct: its tag and the number of
// fields that follow (Options.FieldCount applied). A built-in tagged value
// (uuid, regex, …) reads as a struct with its tag.
func (d *Decoder) ReadStruct() (tag string, fields int) {
	c, ok := d.head()
	if !ok {
		return "", 0
	}
	if kinds[c] != KindStruct {
		d.mismatch("struct", c)
		return "", 0
	}
	return d.structHead(c)
}

func (d *Decoder) structHead(c byte) (tag string, fields int) {
	at := d.pos
	d.pos++
	var st structType
	switch {
	case c == codeStructType:
		if !d.enter() {
			return "", 0
		}
		st.tag = d.readTag()
		d.leave()
		st.fields = d.readInt32("struct field count")
		if d.err != nil {
			return "", 0
		}
		if d.fieldCount != nil {
			st.fields = d.fieldCount(st.tag, st.fields)
		}
		if !d.replaying() {
			if len(d.structs) >= d.lim.MaxCache {
				d.Fail(at, ErrLimit, "more than "+itoa(d.lim.MaxCache)+" struct cache entries")
				return "", 0
			}
			d.structs = append(d.structs, st)
		}
	case c == codeStruct || c < codeStructCachePacked+16 && c >= codeStructCachePacked:
		i := int(c - codeStructCachePacked)
		if c == codeStruct {
			if !d.enter() {
				return "", 0
			}
			i = d.readInt32("struct cache index")
			d.leave()
			if d.err != nil {
				return "", 0
			}
		}
		if i < 0 || i >= len(d.structs) {
			d.malformed(at, "struct cache index "+itoa(i)+" beyond the end of the cache ("+itoa(len(d.structs))+" entries)")
			return "", 0
		}
		st = d.structs[i]
	default:
		b := builtins[c]
		return b.tag, b.fields
	}
	n := st.fields
	switch {
	case n < 0:
		d.malformed(at, "negative field count "+itoa(n)+" of struct "+st.tag)
		return "", 0
	case n > d.lim.MaxCount:
		d.Fail(at, ErrLimit, "struct "+st.tag+" with "+itoa(n)+" fields, over the limit "+itoa(d.lim.MaxCount))
		return "", 0
	}
	return st.tag, n
}

// readTag reads a struct tag. Tags are interned: the same tag costs one
// string per Decoder. A tag that is not a string is read and skipped, and
// the struct has the empty tag.
func (d *Decoder) readTag() string {
	c, ok := d.head()
	if !ok {
		return ""
	}
	if kinds[c] != KindString {
		d.skip()
		return ""
	}
	b := d.stringBytes(c, true)
	if d.err != nil {
		return ""
	}
	if t, ok := d.tags[string(b)]; ok {
		return t
	}
	t := string(b)
	if len(d.tags) < maxTags {
		d.tags[t] = t
	}
	return t
}

// Skip reads the next value and forgets it.
func (d *Decoder) Skip() { d.skip() }

func (d *Decoder) skip() { d.value(false) }

// ReadValue reads the next value, whatever its kind. Strings and byte
// arrays do not alias the payload.
func (d *Decoder) ReadValue() Value { return d.value(true) }

func (d *Decoder) value(build bool) (v Value) {
	if !d.enter() {
		return Value{}
	}
	defer d.leave()
	c, ok := d.head()
	if !ok {
		return Value{}
	}
	v.Kind = kinds[c]
	switch v.Kind {
	case KindNull:
		d.pos++
	case KindBool:
		d.pos++
		v.Int = b2i(c == codeTrue)
	case KindInt:
		v.Int = d.intBody(c)
	case KindFloat:
		v.Float = float64(d.ReadFloat())
	case KindDouble:
		v.Float = d.ReadDouble()
	case KindString:
		b := d.stringBytes(c, build)
		if build {
			v.Str = string(b)
		}
	case KindBytes:
		v.Bytes = d.bytesBody(c, build)
	case KindList:
		l := d.listBody(c)
		v.Items, _ = d.items(&l, build)
	case KindMap, KindSet:
		d.pos++
		l := d.ReadList()
		var n int
		v.Items, n = d.items(&l, build)
		if v.Kind == KindMap && n%2 != 0 && d.err == nil {
			d.malformed(d.pos, "map with an odd number of items")
		}
	case KindStruct:
		var n int
		v.Tag, n = d.structHead(c)
		if build && n > 0 {
			v.Items = make([]Value, 0, min(n, d.end-d.pos))
		}
		for i := 0; i < n && d.err == nil; i++ {
			f := d.value(build)
			if build {
				v.Items = append(v.Items, f)
			}
		}
	case KindArray:
		v.Tag = arrayTags[c]
		d.pos++
		n := d.readLength("array length", d.lim.MaxCount)
		if build && n > 0 {
			v.Items = make([]Value, 0, min(n, d.end-d.pos))
		}
		for i := 0; i < n && d.err == nil; i++ {
			var e Value
			switch c {
			case codeIntArray:
				at := d.pos
				x := d.ReadInt()
				if x < math.MinInt32 || x > math.MaxInt32 {
					d.malformed(at, "int[] element "+i64toa(x)+" out of range for int")
				}
				e = Int(x)
			case codeLongArray:
				e = Int(d.ReadInt())
			case codeFloatArray:
				e = Float(d.ReadFloat())
			case codeDoubleArray:
				e = Double(d.ReadDouble())
			case codeBooleanArray:
				e = Bool(d.ReadBool())
			default:
				e = d.value(build)
			}
			if build {
				v.Items = append(v.Items, e)
			}
		}
	default:
		d.malformed(d.pos, "undefined code "+hexByte(c))
	}
	if d.err != nil {
		return Value{}
	}
	if !build {
		return Value{Kind: v.Kind}
	}
	return v
}

func (d *Decoder) items(l *ListReader, build bool) (items []Value, n int) {
	if build {
		if n := l.Len(); n > 0 {
			items = make([]Value, 0, min(n, d.end-d.pos))
		} else {
			items = []Value{}
		}
	}
	for l.Next() {
		it := d.value(build)
		if build {
			items = append(items, it)
		}
		n++
	}
	return items, n
}

func i64toa(v int64) string { return strconv.FormatInt(v, 10) }
