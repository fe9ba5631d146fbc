package kieker

import (
	"encoding/binary"
	"fmt"
	"math"
	"sync/atomic"
	"unicode/utf8"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Default limits of the decoders.
const (
	DefaultMaxStringLen = 1 << 20 // bytes of one string
	DefaultMaxArrayLen  = 65536   // elements of one array field
)

// Options configure a Decoder (and a RegistryDecoder).
type Options struct {
	// Catalog resolves class names to record types; nil means
	// record.Builtin().
	Catalog *record.Catalog

	// Strings is the string table. In file mode the caller fills it from
	// kieker.map; in dual-socket mode a RegistryDecoder fills it; in inline
	// mode the decoder fills it. Nil means a new table (see Strings()).
	Strings *Strings

	// MaxStringLen limits the byte length of a registry entry
	// (DefaultMaxStringLen when 0).
	MaxStringLen int
	// MaxArrayLen limits the element count of an array field
	// (DefaultMaxArrayLen when 0).
	MaxArrayLen int
	// MaxRegistryEntries limits the entries of the table the decoder
	// creates when Strings is nil (DefaultMaxRegistryEntries when 0).
	MaxRegistryEntries int
	// MaxRegistryBytes limits the total bytes of the strings of the table
	// the decoder creates when Strings is nil (DefaultMaxRegistryBytes when
	// 0, no limit when negative): the memory one inline TCP connection can
	// make the decoder hold. A table the caller gives is bounded by the
	// caller (Strings.SetMaxBytes).
	MaxRegistryBytes int

	// Inline selects single-socket TCP mode: registry entries
	// int32 -1 | int32 id | int32 length | bytes are interleaved with the
	// frames (Kieker's SingleSocketTcpWriter, the Python and C packs).
	Inline bool

	// DualSocket selects dual-socket TCP mode: strings arrive on a second
	// connection (RegistryDecoder); a frame using an id not registered yet
	// gives ErrUnknownString, is not consumed, and the error is not sticky.
	// Ignored when Inline is set.
	DualSocket bool

	// JavaCharCount reads the length of a registry entry as a count of
	// UTF-16 units instead of bytes, which is what Kieker's Java writers
	// (SingleSocketTcpWriter, DualSocketTcpWriter) send. Set it only for
	// streams known to come from Kieker's Java writers: for ASCII text both
	// readings agree, for non-ASCII text only this one decodes Java's
	// streams, and it mis-frames the byte counts other writers send.
	JavaCharCount bool

	// KeepFrames keeps the bytes of every frame decoded in the batch
	// beside its record (record.Batch.Frames), for a sink that writes
	// Kieker binary frames (Recoder). Set it only where nothing changes
	// the records before that sink (see record.Frames).
	KeepFrames bool

	// FramesOnly, when not nil, names the record types whose values no
	// consumer reads (it returns true for them): a record of such a type
	// that a Recoder can copy (no array fields, at most 8 string fields,
	// string ids it can map) is kept only as its frame, in a batch of
	// frames only (record.Frames: Types, Strings), without decoding its
	// values. Its string ids are checked all the same: a bad stream fails
	// at the same offset, with the same error. A batch is either kind:
	// Decode returns early, consuming less than it could, where the kind
	// changes, so the caller hands the batch on and calls again. Set it
	// only where nothing but such a sink reads the records (see
	// record.Frames).
	FramesOnly func(t *record.Type) bool
}

// sources numbers the decoders that keep frames: the namespace of their
// ids (record.Frames.Source).
var sources atomic.Uint64

// Decoder decodes Kieker binary record frames from a byte stream: a .bin
// file, or one TCP connection. It is resumable: Decode consumes every
// complete unit (frame or registry entry) of the buffer it is given and
// leaves an incomplete trailing unit for the next call, to which the caller
// passes the unconsumed bytes with more appended. The records are the same
// however the stream is split.
//
// Errors are sticky (every later call returns the same error), except
// ErrUnknownString in dual-socket mode. A Decoder is not safe for concurrent
// use.
type Decoder struct {
	strs      *Strings
	classes   classCache
	entries   entryReader
	maxArr    int
	inline    bool
	dual      bool
	javaCount bool
	source    uint64 // record.Frames.Source of the kept frames; 0: none kept
	only      func(*record.Type) bool
	view      *stringsView // the registry's view in the frames-only batches
	// The run of frames-only frames of the buffer being decoded that is
	// not yet copied into the batch: buf[runFrom:runTo] (runFrom -1:
	// none); at is where the unit being decoded starts in buf. Copied in
	// one piece when the run ends, and before Decode returns.
	buf                []byte
	at, runFrom, runTo int

	off     int64
	err     error
	pending bool
	suspect suspectEntry
}

// suspectEntry remembers the last inline registry entry that held
// non-ASCII text, until the next unit decoded cleanly.
type suspectEntry struct {
	set bool
	id  int32
	off int64
}

// NewDecoder returns a decoder configured by o.
func NewDecoder(o Options) *Decoder {
	d := &Decoder{
		strs:      o.Strings,
		maxArr:    o.MaxArrayLen,
		inline:    o.Inline,
		dual:      o.DualSocket && !o.Inline,
		javaCount: o.JavaCharCount,
	}
	if o.KeepFrames || o.FramesOnly != nil {
		d.source = sources.Add(1)
	}
	d.only = o.FramesOnly
	if d.strs == nil {
		d.strs = NewStrings(o.MaxRegistryEntries)
		d.strs.SetMaxBytes(o.registryBytes())
	}
	if d.maxArr <= 0 {
		d.maxArr = DefaultMaxArrayLen
	}
	d.classes.cat = o.Catalog
	if d.classes.cat == nil {
		d.classes.cat = record.Builtin()
	}
	d.entries = newEntryReader(o.MaxStringLen, o.JavaCharCount)
	return d
}

// registryBytes is the byte limit of a table made under o (0: none).
func (o Options) registryBytes() int {
	switch {
	case o.MaxRegistryBytes == 0:
		return DefaultMaxRegistryBytes
	case o.MaxRegistryBytes < 0:
		return 0
	}
	return o.MaxRegistryBytes
}

// Strings returns the decoder's string table.
func (d *Decoder) Strings() *Strings { return d.strs }

// Offset returns the absolute stream offset of the next byte to decode: the
// number of bytes consumed so far.
func (d *Decoder) Offset() int64 { return d.off }

// Pending reports whether the last Decode left an incomplete unit (or, after
// an error, unconsumed bytes): at the end of the stream it means a truncated
// file tail or a connection closed mid-record at Offset.
func (d *Decoder) Pending() bool { return d.pending }

// Err returns the sticky error, if any.
func (d *Decoder) Err() error { return d.err }

// Decode decodes every complete unit at the start of buf, appending records
// to b, and returns the number of bytes consumed. n < len(buf) with a nil
// error means the rest is an incomplete unit: call again with buf[n:] and
// more bytes appended. Records decoded before an error stay in b; the
// offending unit is not consumed.
func (d *Decoder) Decode(buf []byte, b *record.Batch) (n int, err error) {
	if d.err != nil {
		d.pending = len(buf) > 0
		return 0, d.err
	}
	pos := 0
	if d.only != nil {
		d.buf, d.runFrom = buf, -1
	}
	for len(buf)-pos >= 4 {
		if d.only != nil {
			// The common case first: a run of frames kept as frames only.
			if end := d.onlyRun(buf, pos, b); end > pos {
				pos = end
				continue
			}
		}
		p := buf[pos:]
		cid := int32(binary.BigEndian.Uint32(p))
		var used int
		if cid >= 0 {
			d.at = pos
			used, err = d.frame(p, cid, d.off+int64(pos), b)
		} else {
			used, err = d.unit(p, cid, d.off+int64(pos))
		}
		if err != nil || used == 0 {
			break
		}
		pos += used
	}
	if d.only != nil {
		d.copyRun(&b.Frames)
		d.buf = nil
	}
	d.off += int64(pos)
	d.pending = pos < len(buf)
	if err != nil && !(d.dual && isUnknownString(err)) {
		d.err = err
	}
	return pos, err
}

func isUnknownString(err error) bool {
	e, ok := err.(*Error)
	return ok && e.Is(ErrUnknownString)
}

// unit decodes a unit with a negative class id: an inline registry entry.
func (d *Decoder) unit(p []byte, cid int32, off int64) (int, error) {
	if cid != -1 || !d.inline {
		if cid == -1 {
			return 0, d.hint(offsetError(off, "class id -1 (a registry entry marker, valid only in single-socket TCP streams)", ErrMalformed))
		}
		return 0, d.hint(offsetError(off, fmt.Sprintf("negative class id %d", cid), ErrMalformed))
	}
	n, id, val, err := d.entries.read(p[4:], off)
	if err != nil {
		return 0, d.hint(err)
	}
	if n == 0 {
		return 0, nil
	}
	if err := d.strs.Set(id, string(val)); err != nil {
		return 0, d.hint(entryError(off, err))
	}
	if nonASCII(val) {
		d.suspect = suspectEntry{set: true, id: id, off: off}
	} else {
		d.suspect.set = false
	}
	return 4 + n, nil
}

// entryError wraps an error of the string table.
func entryError(off int64, err error) error {
	e := offsetError(off, "registry entry: "+err.Error())
	switch {
	case isErr(err, ErrConflict):
		e.kinds = []error{ErrConflict, ErrMalformed}
	case isErr(err, ErrLimit):
		e.kinds = []error{ErrLimit}
	}
	return e
}

// hint adds the likely cause to an error that follows an inline registry
// entry with non-ASCII text: Kieker's Java writers send the UTF-16 char
// count as the length, so the stream is mis-framed from there on.
func (d *Decoder) hint(err error) error {
	e, ok := err.(*Error)
	if !ok || !d.suspect.set || e.Is(ErrJavaCharCount) {
		return err
	}
	if d.javaCount {
		e.Msg += fmt.Sprintf("; the registry entry for id %d at offset %d holds non-ASCII text and JavaCharCount is set: if this stream comes from a writer that sends byte lengths (Kieker's Python or C pack), decode it without JavaCharCount", d.suspect.id, d.suspect.off)
	} else {
		e.Msg += fmt.Sprintf("; the registry entry for id %d at offset %d holds non-ASCII text: most likely the stream comes from Kieker's Java writer, which sends the UTF-16 char count instead of the byte count as the length and so mis-frames everything after it (decode such a stream with `java_char_count: true` on the receiver in the YAML configuration; in Go: JavaCharCount)", d.suspect.id, d.suspect.off)
	}
	e.kinds = append(e.kinds, ErrJavaCharCount)
	return e
}

// frame decodes one record frame. It returns 0 and no error when p holds
// only part of the frame.
func (d *Decoder) frame(p []byte, cid int32, off int64, b *record.Batch) (int, error) {
	ci := d.classes.get(cid)
	if ci == nil {
		if ci = d.classes.resolve(cid, d.strs); ci == nil {
			return 0, d.hint(offsetError(off, fmt.Sprintf("unknown string id %d (class name of record)", cid), ErrUnknownString))
		}
	}
	if ci.typ == nil {
		e := offsetError(off, fmt.Sprintf("class id %d names %s, which is not in the catalogue", cid, ci.name), ErrUnknownType)
		e.Class = ci.name
		return 0, d.hint(e)
	}
	if d.only != nil {
		if ci.only == onlyUnknown {
			ci.only = onlyNo
			if recodable(ci.typ) && d.only(ci.typ) {
				ci.only = onlyYes
			}
		}
		if ci.only == onlyYes {
			n := 12 + ci.size
			if len(p) < n {
				return 0, nil
			}
			switch used, err := d.frameOnly(p[:n], ci, off, b); {
			case err != nil || used > 0:
				return used, err
			case len(b.Records) > 0:
				return 0, nil // a batch of records: the caller hands it on first
			}
			// An id out of the view's range: decoded.
		}
		if b.Frames.Only() {
			return 0, nil // a batch of frames only: the caller hands it on first
		}
	}
	if ci.size < 0 {
		n, err := d.frameVar(p, ci, off, b)
		if n > 0 {
			d.suspect.set = false
			d.keep(b, p[:n])
		}
		return n, err
	}
	n := 12 + ci.size
	if len(p) < n {
		return 0, nil
	}
	vals := b.Add(ci.typ, int64(binary.BigEndian.Uint64(p[4:]))).Values
	vals = vals[:len(ci.ops)]
	strs := d.strs
	q := p[12:n]
	at := 0
	for i, op := range ci.ops {
		switch record.Kind(op) {
		case record.Long:
			vals[i] = record.IntValue(int64(binary.BigEndian.Uint64(q[at:])))
			at += 8
		case record.Int:
			vals[i] = record.IntValue(int64(int32(binary.BigEndian.Uint32(q[at:]))))
			at += 4
		case record.String:
			id := int32(binary.BigEndian.Uint32(q[at:]))
			s, ok := strs.Get(id)
			if !ok {
				b.Truncate(b.Len() - 1)
				return 0, d.hint(d.unknownField(off, id, ci, i))
			}
			vals[i] = record.StringValue(s)
			at += 4
		case record.Double:
			vals[i] = record.DoubleValue(math.Float64frombits(binary.BigEndian.Uint64(q[at:])))
			at += 8
		case record.Bool:
			vals[i] = record.BoolValue(q[at] == 1)
			at++
		case record.Byte:
			vals[i] = record.IntValue(int64(int8(q[at])))
			at++
		case record.Short:
			vals[i] = record.IntValue(int64(int16(binary.BigEndian.Uint16(q[at:]))))
			at += 2
		case record.Char:
			vals[i] = record.IntValue(int64(binary.BigEndian.Uint16(q[at:])))
			at += 2
		case record.Float:
			vals[i] = record.FloatValue(math.Float32frombits(binary.BigEndian.Uint32(q[at:])))
			at += 4
		}
	}
	d.suspect.set = false
	d.keep(b, p[:n])
	return n, nil
}

// frameOnly keeps frame, of a type whose records the decoder keeps as
// frames only, in b (a batch of frames only, or empty) after checking its
// string ids. It returns 0 and no error when it cannot: b holds records,
// or an id is one a Recoder cannot map (then the record is decoded).
func (d *Decoder) frameOnly(frame []byte, ci *classInfo, off int64, b *record.Batch) (int, error) {
	if len(b.Records) > 0 {
		return 0, nil
	}
	strs := d.strs
	dense := strs.dense
	for _, at := range ci.strs {
		id := binary.BigEndian.Uint32(frame[at:])
		if id < uint32(len(dense)) && id < recodeMaxID && dense[id].ok {
			continue // registered, and an id a Recoder maps: the common case in one test
		}
		if _, ok := strs.Get(int32(id)); !ok {
			return 0, d.hint(d.unknownField(off, int32(id), ci, ci.strField(at)))
		}
		return 0, nil // registered, but not an id a Recoder maps: decoded
	}
	f := &b.Frames
	if f.Source != 0 && f.Source != d.source {
		return 0, nil
	}
	if d.view == nil || d.view.n != strs.n {
		d.view = strs.view()
	}
	f.Source, f.Strings = d.source, d.view
	if d.runFrom < 0 || d.runTo != d.at {
		d.copyRun(f)
		d.runFrom = d.at
	}
	d.runTo = d.at + len(frame)
	f.AddFrame(len(f.Data)+d.runTo-d.runFrom, ci.typ)
	d.suspect.set = false
	return len(frame), nil
}

// onlyRun keeps the frames from buf[pos:] on that frameOnly would keep
// without a second thought — complete frames of classes known to be
// kept as frames only, every string id registered in the dense table
// and in the Recoder's range — in b, and returns where it stopped (pos:
// none). What holds for the whole run is checked once (b holds no
// records and no other source's frames, the registry's view, where the
// run continues), the types are tallied at its end. Whatever it stops at
// (another class, a registry entry, an unknown id, a partial frame) is
// left to frame, which decides or fails as ever.
func (d *Decoder) onlyRun(buf []byte, pos int, b *record.Batch) int {
	f := &b.Frames
	if len(b.Records) > 0 || f.Source != 0 && f.Source != d.source {
		return pos
	}
	dense := d.strs.dense
	// The run's tally: Before and After events alternate, so two slots
	// cover most runs; a third type ends the run (frame goes on).
	var types [2]*classInfo
	var counts [2]int
	if d.runFrom >= 0 && d.runTo != pos {
		d.copyRun(f) // the pending run ended before pos
	}
	// A frame ending at e in buf ends at base+e in f.Data once the run
	// (the pending one continued, or one starting at pos) is copied.
	base := len(f.Data) - pos
	if d.runFrom >= 0 {
		base = len(f.Data) - d.runFrom
	}
	start, end := pos, pos
	for len(buf)-end >= 4 {
		cid := binary.BigEndian.Uint32(buf[end:])
		if cid >= uint32(len(d.classes.dense)) {
			break
		}
		ci := d.classes.dense[cid]
		if ci == nil || ci.only != onlyYes || len(buf)-end < 12+ci.size {
			break
		}
		var k int
		switch ci {
		case types[0]:
		case types[1]:
			k = 1
		default:
			if types[0] == nil {
				types[0] = ci
			} else if types[1] == nil {
				types[1], k = ci, 1
			} else {
				k = -1
			}
		}
		if k < 0 {
			break // a third type
		}
		frame := buf[end : end+12+ci.size]
		ok := true
		for _, at := range ci.strs {
			id := binary.BigEndian.Uint32(frame[at:])
			if id >= uint32(len(dense)) || id >= recodeMaxID || !dense[id].ok {
				ok = false
				break
			}
		}
		if !ok {
			break
		}
		end += len(frame)
		counts[k]++
		f.Ends = append(f.Ends, base+end)
		f.Types = append(f.Types, ci.typ)
	}
	if end == start {
		return pos
	}
	for k, ci := range types {
		if counts[k] > 0 {
			f.Count(ci.typ, counts[k])
		}
	}
	if d.view == nil || d.view.n != d.strs.n {
		d.view = d.strs.view()
	}
	f.Source, f.Strings = d.source, d.view
	if d.runFrom < 0 {
		d.runFrom = start
	}
	d.runTo = end
	d.suspect.set = false
	return end
}

// copyRun copies the run of frames not copied yet into f.
func (d *Decoder) copyRun(f *record.Frames) {
	if d.runFrom >= 0 {
		f.Data = append(f.Data, d.buf[d.runFrom:d.runTo]...)
		d.runFrom = -1
	}
}

// keep appends the frame of the record just added to b to its frames,
// when the decoder keeps frames and b's frames still match its records.
func (d *Decoder) keep(b *record.Batch, frame []byte) {
	if d.source == 0 {
		return
	}
	f := &b.Frames
	if len(f.Ends) != b.Len()-1 || f.Source != 0 && f.Source != d.source {
		return // records of another origin: the frames no longer match
	}
	f.Source = d.source
	f.Data = append(f.Data, frame...)
	f.Ends = append(f.Ends, len(f.Data))
}

func (d *Decoder) unknownField(off int64, id int32, ci *classInfo, field int) error {
	return offsetError(off, fmt.Sprintf("string id %d not registered (field %s of %s)", id, ci.typ.Fields[field].Name, ci.typ.Name), ErrUnknownString)
}

// frameVar decodes a frame whose type has array fields. It first walks the
// layout to find the frame's length (checking the array lengths), so that
// nothing is decoded until the whole frame is there.
func (d *Decoder) frameVar(p []byte, ci *classInfo, off int64, b *record.Batch) (int, error) {
	if len(p) < 12 {
		return 0, nil
	}
	pos := 12
	for i, op := range ci.ops {
		size := binarySize(record.Kind(op &^ opArray))
		if op&opArray == 0 {
			pos += size
			continue
		}
		if len(p)-pos < 4 {
			return 0, nil
		}
		count := int32(binary.BigEndian.Uint32(p[pos:]))
		f := ci.typ.Fields[i].Name
		if count < 0 {
			return 0, d.hint(offsetError(off, fmt.Sprintf("array length %d (field %s of %s)", count, f, ci.typ.Name), ErrMalformed))
		}
		if int(count) > d.maxArr {
			return 0, d.hint(offsetError(off, fmt.Sprintf("array length %d over the limit %d (field %s of %s)", count, d.maxArr, f, ci.typ.Name), ErrLimit))
		}
		pos += 4 + int(count)*size
		if len(p) < pos {
			return 0, nil
		}
	}
	if len(p) < pos {
		return 0, nil
	}
	n := pos

	mark := b.Len()
	vals := b.Add(ci.typ, int64(binary.BigEndian.Uint64(p[4:]))).Values
	pos = 12
	for i, op := range ci.ops {
		k := record.Kind(op &^ opArray)
		size := binarySize(k)
		if op&opArray == 0 {
			v, err := d.scalar(k, p[pos:], off, ci, i)
			if err != nil {
				b.Truncate(mark)
				return 0, d.hint(err)
			}
			vals[i] = v
			pos += size
			continue
		}
		count := int(binary.BigEndian.Uint32(p[pos:]))
		pos += 4
		list := b.NewList(k, count)
		items := list.List().Items
		for j := range items {
			v, err := d.scalar(k, p[pos:], off, ci, i)
			if err != nil {
				b.Truncate(mark)
				return 0, d.hint(err)
			}
			items[j] = v
			pos += size
		}
		vals[i] = list
	}
	return n, nil
}

// scalar decodes one value of kind k from the start of q, which holds at
// least binarySize(k) bytes.
func (d *Decoder) scalar(k record.Kind, q []byte, off int64, ci *classInfo, field int) (record.Value, error) {
	switch k {
	case record.Bool:
		return record.BoolValue(q[0] == 1), nil
	case record.Byte:
		return record.IntValue(int64(int8(q[0]))), nil
	case record.Short:
		return record.IntValue(int64(int16(binary.BigEndian.Uint16(q)))), nil
	case record.Char:
		return record.IntValue(int64(binary.BigEndian.Uint16(q))), nil
	case record.Int:
		return record.IntValue(int64(int32(binary.BigEndian.Uint32(q)))), nil
	case record.Long:
		return record.IntValue(int64(binary.BigEndian.Uint64(q))), nil
	case record.Float:
		return record.FloatValue(math.Float32frombits(binary.BigEndian.Uint32(q))), nil
	case record.Double:
		return record.DoubleValue(math.Float64frombits(binary.BigEndian.Uint64(q))), nil
	case record.String:
		id := int32(binary.BigEndian.Uint32(q))
		s, ok := d.strs.Get(id)
		if !ok {
			return record.Value{}, d.unknownField(off, id, ci, field)
		}
		return record.StringValue(s), nil
	}
	return record.Value{}, nil
}

func nonASCII(b []byte) bool {
	for _, c := range b {
		if c >= utf8.RuneSelf {
			return true
		}
	}
	return false
}
