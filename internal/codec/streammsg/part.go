package streammsg

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"unsafe"

	"github.com/tracebridge/tracebridge/internal/codec/jsonl"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Limits of a data message: a decoder rejects a message beyond them.
const (
	MaxParts        = 1 << 16   // parts of one batch
	MaxPartRecords  = 1 << 20   // records of one message
	MaxBatchRecords = 1 << 24   // records of one batch
	MaxString       = 16 << 20  // bytes of one string
	MaxArray        = 1 << 16   // items of one array (codec/kieker's limit)
	MaxStrings      = 1 << 20   // distinct strings of one message
	maxHeaderBytes  = 256 << 10 // of a JSON message's header fields
)

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed stream message")

// magic starts a binary data message: "TB" and the format version: 1,
// or 2 for a message with a null string among its records' values
// (record.NullString). Version 2 differs only there: a string value is
// uvarint 0 for null, else version 1's code plus one. A message without
// null strings is written as version 1, so readers that know only that
// version read every message of sources without nulls.
var magic = [3]byte{'T', 'B', 1}

// nullVersion is the format version of messages with null strings.
const nullVersion = 2

// PartRef names one part of a batch: the type of its records (an id of
// the metadata) and their host.
type PartRef struct {
	TypeID uint32
	Host   string
}

// Header is what a data message says besides its records. A batch the
// bridge received is published as one message per (host, type) of its
// records, its parts, in order; the records of all parts together are
// the batch's, in the order received, and Positions say where this
// part's records were in it.
type Header struct {
	// Run counts the bridge's starts on the repository; Meta is the
	// metadata version that describes the part's type.
	Run, Meta uint64
	// Time is when the bridge published the batch (Unix ns).
	Time int64
	// Ordinal is the number, within the run, of the batch's first record;
	// BatchRecords counts the records of the whole batch.
	Ordinal      uint64
	BatchRecords uint32
	// Index is this part's index in Parts, which names every part of
	// the batch.
	Index uint32
	Parts []PartRef
	// SubjectOrdinal counts the records published on this message's
	// subject before it in this run: a subscriber that sees it jump has
	// missed records of that subject (retention overtook it, or the
	// bridge lost them, see Lost).
	SubjectOrdinal uint64
	// Lost counts the records the bridge could not publish in this run
	// before this message.
	Lost uint64
	// Origin is the batch's origin; Origin.Host is the part's host.
	Origin record.Origin
	// Positions are the positions, in the batch, of this part's records
	// (increasing); nil when the batch has one part (then they are 0…).
	Positions []uint32
	// Count is the number of records of the part.
	Count int
	// JSON says the message is in the JSON form.
	JSON bool
}

// TypeID returns the type id of the part's records.
func (h *Header) TypeID() uint32 { return h.Parts[h.Index].TypeID }

// Position returns the position in the batch of the part's record i.
func (h *Header) Position(i int) uint32 {
	if h.Positions == nil {
		return uint32(i)
	}
	return h.Positions[i]
}

// Encoder writes data messages. It is not safe for concurrent use; it
// allocates nothing once its tables have grown.
type Encoder struct {
	strs map[string]uint32
	// nulls: string values may be null (version 2); sawNull: a null was
	// met while writing version 1, so the message is written again.
	nulls, sawNull bool
	// seen caches the table index of recent strings by the address of
	// their bytes: decoders intern strings, so a record's strings are
	// mostly the very strings of the records before it, found without
	// hashing. gen tells this message's entries from older ones.
	seen [256]seenString
	gen  uint32
}

type seenString struct {
	p   *byte
	n   int
	gen uint32
	idx uint32
}

// AppendBinary appends the binary message of part h holding the records
// recs[h.Positions[i]] (recs[i] for i < h.Count when Positions is nil),
// all of one type, and returns the extended slice.
//
// Layout (uvarint: unsigned LEB128; varint: zigzag then uvarint; string:
// see appendString):
//
//	'T' 'B' 0x01
//	uvarint run, uvarint meta, varint time, uvarint ordinal,
//	uvarint batchRecords, uvarint index, uvarint parts,
//	parts × (uvarint typeId, string host),
//	uvarint subjectOrdinal, uvarint lost,
//	string receiver, string peer, string service, string session,
//	uvarint count, [parts > 1: count × uvarint position delta],
//	count × record: varint loggingTimestamp, then each field by kind
func (e *Encoder) AppendBinary(dst []byte, h *Header, recs []record.Record) []byte {
	start := len(dst)
	e.nulls, e.sawNull = false, false
	dst = e.appendBinary(dst, h, recs)
	if e.sawNull {
		// Rare (JFR's null strings): written again as version 2.
		e.nulls = true
		dst = e.appendBinary(dst[:start], h, recs)
		dst[start+2] = nullVersion
	}
	return dst
}

func (e *Encoder) appendBinary(dst []byte, h *Header, recs []record.Record) []byte {
	if e.strs == nil {
		e.strs = make(map[string]uint32)
	}
	clear(e.strs)
	e.gen++
	if e.gen == 0 { // wrapped: forget every entry
		e.seen = [256]seenString{}
		e.gen = 1
	}
	dst = append(dst, magic[:]...)
	dst = binary.AppendUvarint(dst, h.Run)
	dst = binary.AppendUvarint(dst, h.Meta)
	dst = binary.AppendVarint(dst, h.Time)
	dst = binary.AppendUvarint(dst, h.Ordinal)
	dst = binary.AppendUvarint(dst, uint64(h.BatchRecords))
	dst = binary.AppendUvarint(dst, uint64(h.Index))
	dst = binary.AppendUvarint(dst, uint64(len(h.Parts)))
	for _, p := range h.Parts {
		dst = binary.AppendUvarint(dst, uint64(p.TypeID))
		dst = e.appendString(dst, p.Host, 0)
	}
	dst = binary.AppendUvarint(dst, h.SubjectOrdinal)
	dst = binary.AppendUvarint(dst, h.Lost)
	dst = e.appendString(dst, h.Origin.Receiver, 0)
	dst = e.appendString(dst, h.Origin.Peer, 0)
	dst = e.appendString(dst, h.Origin.Service, 0)
	dst = e.appendString(dst, h.Origin.Session, 0)
	dst = binary.AppendUvarint(dst, uint64(h.Count))
	if len(h.Parts) > 1 {
		prev := -1
		for i := range h.Count {
			p := int(h.Positions[i])
			dst = binary.AppendUvarint(dst, uint64(p-prev-1))
			prev = p
		}
	}
	for i := range h.Count {
		r := &recs[h.Position(i)]
		dst = binary.AppendVarint(dst, r.LoggingTimestamp)
		for j, f := range r.Type.Fields {
			var v record.Value
			if j < len(r.Values) {
				v = r.Values[j]
			}
			if f.Array {
				l := v.List()
				if l == nil {
					dst = append(dst, 0)
					continue
				}
				dst = binary.AppendUvarint(dst, uint64(len(l.Items)))
				for _, it := range l.Items {
					dst = e.appendValue(dst, f.Kind, it)
				}
				continue
			}
			dst = e.appendValue(dst, f.Kind, v)
		}
	}
	return dst
}

func (e *Encoder) appendValue(dst []byte, k record.Kind, v record.Value) []byte {
	switch k {
	case record.Bool, record.Byte:
		return append(dst, byte(v.Int()))
	case record.Short, record.Int, record.Long:
		return binary.AppendVarint(dst, v.Int())
	case record.Char:
		return binary.AppendUvarint(dst, uint64(uint16(v.Int())))
	case record.Float:
		return binary.LittleEndian.AppendUint32(dst, uint32(v.Bits()))
	case record.Double:
		return binary.LittleEndian.AppendUint64(dst, v.Bits())
	case record.String:
		if !e.nulls {
			e.sawNull = e.sawNull || v.IsNull()
			return e.appendString(dst, v.Str(), 0)
		}
		if v.IsNull() {
			return append(dst, 0)
		}
		return e.appendString(dst, v.Str(), 1)
	}
	return dst
}

// appendString writes a string as uvarint x: x even, a new string of
// x/2 bytes follows (it gets the next index of the message's string
// table); x odd, the string at index x/2 of the table.
// A version 2 message adds 1 (add) to the code of a record's string
// value, 0 being null there.
func (e *Encoder) appendString(dst []byte, s string, add uint64) []byte {
	var slot *seenString
	if len(s) > 0 {
		p := unsafe.StringData(s)
		slot = &e.seen[(uintptr(unsafe.Pointer(p))>>3^uintptr(len(s)))&255]
		if slot.p == p && slot.n == len(s) && slot.gen == e.gen {
			return binary.AppendUvarint(dst, uint64(slot.idx)<<1|1+add)
		}
	}
	if i, ok := e.strs[s]; ok {
		if slot != nil {
			*slot = seenString{p: unsafe.StringData(s), n: len(s), gen: e.gen, idx: i}
		}
		return binary.AppendUvarint(dst, uint64(i)<<1|1+add)
	}
	// Once the table is full, later strings are written out each time
	// (the decoder's table stops at the same size, so indexes agree).
	if len(e.strs) < MaxStrings {
		i := uint32(len(e.strs))
		e.strs[s] = i
		if slot != nil {
			*slot = seenString{p: unsafe.StringData(s), n: len(s), gen: e.gen, idx: i}
		}
	}
	dst = binary.AppendUvarint(dst, uint64(len(s))<<1+add)
	return append(dst, s...)
}

// AppendJSON appends the JSON message of part h (see AppendBinary for
// recs): one object whose records are in `tracebridge cat --json`'s
// shape,
//
//	{"format":"tracebridge-json/1","run":R,"meta":M,"time":NS,"ordinal":O,
//	 "batchRecords":N,"part":I,"parts":[{"typeId":T,"host":"H"},…],
//	 "subjectOrdinal":S,"lost":L,"origin":{"receiver":…,"peer":…,"host":…,
//	 "service":…,"session":…},"typeId":T,"positions":[…],
//	 "records":[{"type":"…","loggingTimestamp":N,"fields":{…}},…]}
//
// positions appears only when the batch has more than one part.
func (e *Encoder) AppendJSON(dst []byte, h *Header, recs []record.Record) []byte {
	dst = append(dst, `{"format":"tracebridge-json/1","run":`...)
	dst = strconv.AppendUint(dst, h.Run, 10)
	dst = append(dst, `,"meta":`...)
	dst = strconv.AppendUint(dst, h.Meta, 10)
	dst = append(dst, `,"time":`...)
	dst = strconv.AppendInt(dst, h.Time, 10)
	dst = append(dst, `,"ordinal":`...)
	dst = strconv.AppendUint(dst, h.Ordinal, 10)
	dst = append(dst, `,"batchRecords":`...)
	dst = strconv.AppendUint(dst, uint64(h.BatchRecords), 10)
	dst = append(dst, `,"part":`...)
	dst = strconv.AppendUint(dst, uint64(h.Index), 10)
	dst = append(dst, `,"parts":[`...)
	for i, p := range h.Parts {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"typeId":`...)
		dst = strconv.AppendUint(dst, uint64(p.TypeID), 10)
		dst = append(dst, `,"host":`...)
		dst = jsonl.AppendString(dst, p.Host)
		dst = append(dst, '}')
	}
	dst = append(dst, `],"subjectOrdinal":`...)
	dst = strconv.AppendUint(dst, h.SubjectOrdinal, 10)
	dst = append(dst, `,"lost":`...)
	dst = strconv.AppendUint(dst, h.Lost, 10)
	dst = append(dst, `,"origin":{"receiver":`...)
	dst = jsonl.AppendString(dst, h.Origin.Receiver)
	dst = append(dst, `,"peer":`...)
	dst = jsonl.AppendString(dst, h.Origin.Peer)
	dst = append(dst, `,"host":`...)
	dst = jsonl.AppendString(dst, h.Parts[h.Index].Host)
	dst = append(dst, `,"service":`...)
	dst = jsonl.AppendString(dst, h.Origin.Service)
	dst = append(dst, `,"session":`...)
	dst = jsonl.AppendString(dst, h.Origin.Session)
	dst = append(dst, `},"typeId":`...)
	dst = strconv.AppendUint(dst, uint64(h.TypeID()), 10)
	if len(h.Parts) > 1 {
		dst = append(dst, `,"positions":[`...)
		for i := range h.Count {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendUint(dst, uint64(h.Positions[i]), 10)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"records":[`...)
	for i := range h.Count {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = jsonl.AppendRecord(dst, &recs[h.Position(i)])
		dst = dst[:len(dst)-1] // AppendRecord ends the line
	}
	return append(dst, "]}"...)
}

// Message is a parsed data message: its header, and its records still
// encoded until Records decodes them. A Message is reused message after
// message; what it returns is valid until the next Parse.
type Message struct {
	Header
	data []byte // the whole message (JSON: for Records)
	body int    // offset of the records (binary)
	strs []string
	raw  jsonMessage
	// nulls: a version 2 message, whose string values may be null.
	nulls bool
}

// Parse reads the header of a data message (binary or JSON) into m. The
// records are decoded by Records, so a subscriber skips the messages of
// types it does not want for the cost of their header. m keeps data
// until the next Parse.
func (m *Message) Parse(data []byte) error {
	m.data = data
	m.strs = m.strs[:0]
	m.Positions = m.Positions[:0]
	m.Parts = m.Parts[:0]
	if len(data) > 0 && data[0] == '{' {
		return m.parseJSON(data)
	}
	m.JSON = false
	d := reader{p: data, m: m}
	if len(data) < 3 || data[0] != magic[0] || data[1] != magic[1] {
		return fmt.Errorf("%w: not a tracebridge data message", ErrMalformed)
	}
	if data[2] != magic[2] && data[2] != nullVersion {
		return fmt.Errorf("%w: format version %d (this decoder reads 1 and 2)", ErrMalformed, data[2])
	}
	m.nulls = data[2] == nullVersion
	d.off = 3
	m.Run = d.uvarint()
	m.Meta = d.uvarint()
	m.Time = d.varint()
	m.Ordinal = d.uvarint()
	m.BatchRecords = uint32(d.bounded(MaxBatchRecords, "batch records"))
	m.Index = uint32(d.uvarint())
	n := d.bounded(MaxParts, "parts")
	for range n {
		if d.err != nil {
			break
		}
		id := d.uvarint()
		if id > math.MaxUint32 {
			d.fail("type id %d", id)
		}
		m.Parts = append(m.Parts, PartRef{TypeID: uint32(id), Host: d.str()})
	}
	m.SubjectOrdinal = d.uvarint()
	m.Lost = d.uvarint()
	m.Origin.Receiver = d.str()
	m.Origin.Peer = d.str()
	m.Origin.Service = d.str()
	m.Origin.Session = d.str()
	m.Count = d.bounded(MaxPartRecords, "records")
	if d.err == nil && int(m.Index) >= len(m.Parts) {
		d.fail("part %d of %d", m.Index, len(m.Parts))
	}
	if d.err == nil {
		m.Origin.Host = m.Parts[m.Index].Host
	}
	if d.err == nil && len(m.Parts) > 1 {
		prev := int64(-1)
		for range m.Count {
			p := prev + 1 + int64(d.uvarint())
			if d.err != nil {
				break
			}
			if p >= int64(m.BatchRecords) {
				d.fail("position %d in a batch of %d records", p, m.BatchRecords)
				break
			}
			m.Positions = append(m.Positions, uint32(p))
			prev = p
		}
	} else {
		m.Positions = nil
		if d.err == nil && m.Count > int(m.BatchRecords) {
			d.fail("%d records in a batch of %d", m.Count, m.BatchRecords)
		}
	}
	if d.err != nil {
		return d.err
	}
	m.body = d.off
	return nil
}

// Records decodes the message's records, all of type t (the type its
// TypeID names in the metadata), appending them to b; strings are
// interned with in (nil: not interned). It fails, leaving b as it was,
// when the records do not fit t.
func (m *Message) Records(t *record.Type, b *record.Batch, in *record.Interner) error {
	start := b.Len()
	var err error
	if m.JSON {
		err = m.jsonRecords(t, b)
	} else {
		err = m.binaryRecords(t, b, in)
	}
	if err != nil {
		b.Truncate(start)
	}
	return err
}

func (m *Message) binaryRecords(t *record.Type, b *record.Batch, in *record.Interner) error {
	d := reader{p: m.data, off: m.body, m: m, in: in}
	// Every record and array item takes a byte at least: counts beyond
	// what is left are malformed, found before memory is given to them.
	if m.Count > len(m.data)-m.body {
		d.fail("%d records in %d bytes", m.Count, len(m.data)-m.body)
	}
	for i := 0; i < m.Count && d.err == nil; i++ {
		r := b.Add(t, d.varint())
		for j, f := range t.Fields {
			if f.Array {
				n := d.bounded(MaxArray, "array items")
				if n > len(d.p)-d.off {
					d.fail("%d array items in %d bytes", n, len(d.p)-d.off)
				}
				if d.err != nil {
					break
				}
				v := b.NewList(f.Kind, n)
				items := v.List().Items
				for k := range items {
					items[k] = d.value(f.Kind)
				}
				r.Values[j] = v
				continue
			}
			r.Values[j] = d.value(f.Kind)
		}
	}
	if d.err == nil && d.off != len(m.data) {
		d.fail("%d bytes after the last record", len(m.data)-d.off)
	}
	if d.err != nil {
		return fmt.Errorf("%w (type %s)", d.err, t.Name)
	}
	return nil
}

// reader reads a binary message; its first error sticks.
type reader struct {
	p   []byte
	off int
	err error
	m   *Message
	in  *record.Interner
}

func (d *reader) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: at byte %d: %s", ErrMalformed, d.off, fmt.Sprintf(format, args...))
	}
}

func (d *reader) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.p[d.off:])
	if n <= 0 {
		d.fail("bad or missing number")
		return 0
	}
	d.off += n
	return v
}

func (d *reader) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.p[d.off:])
	if n <= 0 {
		d.fail("bad or missing number")
		return 0
	}
	d.off += n
	return v
}

func (d *reader) bounded(limit int, what string) int {
	v := d.uvarint()
	if v > uint64(limit) {
		d.fail("%d %s (limit %d)", v, what, limit)
		return 0
	}
	return int(v)
}

func (d *reader) bytes(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n > len(d.p)-d.off {
		d.fail("%d bytes wanted, %d left", n, len(d.p)-d.off)
		return nil
	}
	b := d.p[d.off : d.off+n]
	d.off += n
	return b
}

func (d *reader) str() string {
	x := d.uvarint()
	if d.err != nil {
		return ""
	}
	return d.strCode(x)
}

// strCode returns the string of code x (see Encoder.appendString).
func (d *reader) strCode(x uint64) string {
	if x&1 == 1 {
		i := x >> 1
		if i >= uint64(len(d.m.strs)) {
			d.fail("string %d of %d", i, len(d.m.strs))
			return ""
		}
		return d.m.strs[i]
	}
	n := x >> 1
	if n > MaxString {
		d.fail("string of %d bytes (limit %d)", n, MaxString)
		return ""
	}
	b := d.bytes(int(n))
	if d.err != nil {
		return ""
	}
	var s string
	if d.in != nil {
		s = d.in.Bytes(b)
	} else {
		s = string(b)
	}
	if len(d.m.strs) < MaxStrings {
		d.m.strs = append(d.m.strs, s)
	}
	return s
}

func (d *reader) value(k record.Kind) record.Value {
	switch k {
	case record.Bool, record.Byte:
		b := d.bytes(1)
		if b == nil {
			return record.Value{}
		}
		if k == record.Bool {
			return record.BoolValue(b[0] != 0)
		}
		return record.IntValue(int64(int8(b[0])))
	case record.Short, record.Int, record.Long:
		return record.IntValue(d.varint())
	case record.Char:
		return record.IntValue(int64(uint16(d.uvarint())))
	case record.Float:
		b := d.bytes(4)
		if b == nil {
			return record.Value{}
		}
		return record.FloatValue(math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case record.Double:
		b := d.bytes(8)
		if b == nil {
			return record.Value{}
		}
		return record.DoubleValue(math.Float64frombits(binary.LittleEndian.Uint64(b)))
	case record.String:
		if !d.m.nulls {
			return record.StringValue(d.str())
		}
		x := d.uvarint()
		if d.err != nil {
			return record.Value{}
		}
		if x == 0 {
			return record.NullString()
		}
		return record.StringValue(d.strCode(x - 1))
	}
	d.fail("field of kind %v", k)
	return record.Value{}
}
