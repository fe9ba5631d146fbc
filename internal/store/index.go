package store

import (
	"encoding/binary"
	"math"
	"math/bits"

	"github.com/tracebridge/tracebridge/internal/store/block"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Index keys in Pebble (all integers big-endian; times are unix ns with
// the sign bit flipped, so they sort in time order):
//
//	'i' trace id (16)                          → where the trace is (and its start)
//	'h' host (4) start (8) trace id (16)       → ref: where, and the summary (once per
//	                                             host the trace touches)
//	'd' host (4) bucket (1) start (8) id (16)  → (empty) a duration index: bucket is
//	                                             ⌊log2(duration ns)⌋, for --min-duration
//	'e' host (4) start (8) id (16)             → (empty) the traces with an error
//	'n' host (4) name (4) start (8) id (16)    → (empty) by root operation (the partition
//	                                             host's symbol), for --name
//	'b' host (4) segment (4) offset (8)        → block: time range, trace count, bloom filter
//	's' host (4) symbol (4)                    → the symbol's string
//	'w' host (4)                               → segment (4) offset (8): indexed up to here
//	'C' 's'|'o'|'n' …                          → the catalogue of services, operations
//	                                             and trace names (catalog.go)
//	'H' host name                              → host record (JSON)
//	'M' "hosts"                                → next host id (4)
const (
	kTrace  = 'i'
	kHost   = 'h'
	kDur    = 'd'
	kErr    = 'e'
	kName   = 'n'
	kBlock  = 'b'
	kSymbol = 's'
	kMark   = 'w'
	kHostRc = 'H'
	kMeta   = 'M'
)

func timeKey(ns int64) uint64 { return uint64(ns) ^ (1 << 63) }

func keyTrace(id trace.ID) []byte {
	k := make([]byte, 17)
	k[0] = kTrace
	binary.BigEndian.PutUint64(k[1:], id.Hi)
	binary.BigEndian.PutUint64(k[9:], id.Lo)
	return k
}

func keyHost(host uint32, start int64, id trace.ID) []byte {
	k := make([]byte, 29)
	k[0] = kHost
	binary.BigEndian.PutUint32(k[1:], host)
	binary.BigEndian.PutUint64(k[5:], timeKey(start))
	binary.BigEndian.PutUint64(k[13:], id.Hi)
	binary.BigEndian.PutUint64(k[21:], id.Lo)
	return k
}

// timeRange returns the key bounds [lo, hi) of prefix's time index for
// [since, until].
func timeRange(prefix []byte, since, until int64) (lo, hi []byte) {
	lo = binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), timeKey(since))
	if until == math.MaxInt64 {
		hi = binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), math.MaxUint64)
		hi = append(hi, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
		return lo, hi
	}
	hi = binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), timeKey(until)+1)
	return lo, hi
}

func keyBlock(host, seg uint32, off int64) []byte {
	k := make([]byte, 17)
	k[0] = kBlock
	binary.BigEndian.PutUint32(k[1:], host)
	binary.BigEndian.PutUint32(k[5:], seg)
	binary.BigEndian.PutUint64(k[9:], uint64(off))
	return k
}

func keySymbol(host, id uint32) []byte {
	k := make([]byte, 9)
	k[0] = kSymbol
	binary.BigEndian.PutUint32(k[1:], host)
	binary.BigEndian.PutUint32(k[5:], id)
	return k
}

func keyMark(host uint32) []byte {
	k := make([]byte, 5)
	k[0] = kMark
	binary.BigEndian.PutUint32(k[1:], host)
	return k
}

func keyHostRecord(name string) []byte { return append([]byte{kHostRc}, name...) }

var keyNextHost = []byte{kMeta, 'h', 'o', 's', 't', 's'}

// location says where a trace is: the partition, segment, block offset and
// index within the block.
type location struct {
	host, seg uint32
	off       int64
	idx       uint32
}

// Ref is an index entry: where a trace is and its summary, enough to list
// and filter traces without reading them.
type Ref struct {
	ID       trace.ID
	loc      location
	Start    int64
	Duration int64
	Spans    int
	Errors   int
	Broken   bool
	// name and services are symbols of the partition host.
	name     uint32
	services []uint32
}

// marshalLocation writes what the id index keeps: the location and start.
func (r *Ref) marshalLocation(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(r.loc.host))
	dst = binary.AppendUvarint(dst, uint64(r.loc.seg))
	dst = binary.AppendUvarint(dst, uint64(r.loc.off))
	dst = binary.AppendUvarint(dst, uint64(r.loc.idx))
	return binary.AppendVarint(dst, r.Start)
}

func unmarshalLocation(id trace.ID, p []byte) (Ref, bool) {
	d := &decoder{p: p}
	r := Ref{ID: id}
	d.location(&r)
	return r, d.err == nil
}

// location reads what marshalLocation wrote.
func (d *decoder) location(r *Ref) {
	r.loc.host = uint32(d.uvarint())
	r.loc.seg = uint32(d.uvarint())
	r.loc.off = int64(d.uvarint())
	r.loc.idx = uint32(d.uvarint())
	r.Start = d.varint()
}

// marshal writes the location, then the summary.
func (r *Ref) marshal(dst []byte) []byte {
	dst = r.marshalLocation(dst)
	dst = binary.AppendVarint(dst, r.Duration)
	dst = binary.AppendUvarint(dst, uint64(r.Spans))
	dst = binary.AppendUvarint(dst, uint64(r.Errors))
	flags := uint64(0)
	if r.Broken {
		flags = 1
	}
	dst = binary.AppendUvarint(dst, flags)
	dst = binary.AppendUvarint(dst, uint64(r.name))
	dst = binary.AppendUvarint(dst, uint64(len(r.services)))
	for _, s := range r.services {
		dst = binary.AppendUvarint(dst, uint64(s))
	}
	return dst
}

func unmarshalRef(id trace.ID, p []byte) (Ref, bool) {
	d := &decoder{p: p}
	r := Ref{ID: id}
	d.location(&r)
	r.Duration = d.varint()
	r.Spans = int(d.uvarint())
	r.Errors = int(d.uvarint())
	r.Broken = d.uvarint()&1 != 0
	r.name = uint32(d.uvarint())
	n := d.count(1024, "service")
	for range n {
		r.services = append(r.services, uint32(d.uvarint()))
	}
	return r, d.err == nil
}

// idFromKey reads the trace id at the end of a time-index key.
func idFromKey(k []byte) trace.ID {
	n := len(k)
	return trace.ID{Hi: binary.BigEndian.Uint64(k[n-16:]), Lo: binary.BigEndian.Uint64(k[n-8:])}
}

// startFromKey reads the start time of a time-index key (any of them: the
// start and id are the last 24 bytes).
func startFromKey(k []byte) int64 {
	return int64(binary.BigEndian.Uint64(k[len(k)-24:]) ^ (1 << 63))
}

// secondary returns the key of a value-less index: prefix, then start and
// id.
func secondary(prefix []byte, start int64, id trace.ID) []byte {
	k := binary.BigEndian.AppendUint64(append(make([]byte, 0, len(prefix)+24), prefix...), timeKey(start))
	k = binary.BigEndian.AppendUint64(k, id.Hi)
	return binary.BigEndian.AppendUint64(k, id.Lo)
}

func durPrefix(host uint32, bucket uint8) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{kDur}, host), bucket)
}

func errPrefix(host uint32) []byte { return binary.BigEndian.AppendUint32([]byte{kErr}, host) }

func namePrefix(host, name uint32) []byte {
	return binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32([]byte{kName}, host), name)
}

func hostPrefix(host uint32) []byte { return binary.BigEndian.AppendUint32([]byte{kHost}, host) }

// durBucket is the duration index's bucket of d ns.
func durBucket(d int64) uint8 {
	if d <= 0 {
		return 0
	}
	return uint8(63 - bits.LeadingZeros64(uint64(d)))
}

// blockMeta is what the index knows of a block.
type blockMeta struct {
	host, seg        uint32
	off              int64
	size             int64
	count            uint32
	minStart, maxEnd int64
	filter           *block.Bloom
}

func (m *blockMeta) marshal(dst []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(m.size))
	dst = binary.AppendUvarint(dst, uint64(m.count))
	dst = binary.AppendVarint(dst, m.minStart)
	dst = binary.AppendVarint(dst, m.maxEnd)
	return m.filter.Marshal(dst)
}

func unmarshalBlockMeta(k, v []byte) (*blockMeta, bool) {
	if len(k) != 17 {
		return nil, false
	}
	m := &blockMeta{host: binary.BigEndian.Uint32(k[1:]), seg: binary.BigEndian.Uint32(k[5:]), off: int64(binary.BigEndian.Uint64(k[9:]))}
	d := &decoder{p: v}
	m.size = int64(d.uvarint())
	m.count = uint32(d.uvarint())
	m.minStart = d.varint()
	m.maxEnd = d.varint()
	if d.err != nil {
		return nil, false
	}
	f, _, ok := block.UnmarshalBloom(v[d.off:])
	if !ok {
		return nil, false
	}
	m.filter = f
	return m, true
}
