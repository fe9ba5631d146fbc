package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/zeebo/xxh3"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// A message of the cluster's stream holds records of one partition: one
// section per batch a receiver decoded (the publisher puts the sections
// of the batches consumed between two flushes into one message):
//
//	0  "TBC2"
//	4  sections, up to the end of the message; each:
//	     origin: receiver, peer, host, service, session; each uvarint
//	       length + UTF-8 (record.Origin)
//	     uvarint n: the length of the records
//	     n bytes: records in Kieker's single-socket TCP encoding (the
//	       forward sink's kieker-tcp protocol): string registry entries
//	       -1 | id | length | bytes before the first frame that uses them,
//	       frames classId | loggingTimestamp | fields. Every section
//	       starts a new registry, so a section decodes on its own, on any
//	       node, in any order.
//
// A section's id (SectionID) is a 128-bit XXH3 hash of its host, service
// and records: a client's retry of a batch gives the same id, which the
// owner drops (its window of ids seen, dedupeWindow). Messages of the
// first format, "TBC1" followed by one origin and the records up to the
// end (no length), still decode, as one section.
//
// Record types are found by class name in the catalogue (the built-in
// Kieker types, tracebridge's span and invocation types, the IRL
// libraries): every node of a cluster loads the same libraries.
const (
	magic  = "TBC2"
	magic1 = "TBC1"
)

// Limits of a message, checked by Decode.
const (
	maxOriginString = 64 << 10
	// MaxMessage is the largest message the publisher writes (it cuts a
	// partition's records into several) and Decode reads; the embedded
	// NATS server takes payloads of up to 8 MiB.
	MaxMessage = 4 << 20
	// maxStringLen is a string registry entry's largest size (OTLP
	// strings go up to 1 MiB; a span record's list of events or links
	// joins several).
	maxStringLen = 16 << 20
)

// ErrMalformed is wrapped by every error of Decode.
var ErrMalformed = errors.New("malformed cluster message")

// appendOrigin appends a section's origin.
func appendOrigin(dst []byte, o *record.Origin) []byte {
	for _, s := range [...]string{o.Receiver, o.Peer, o.Host, o.Service, o.Session} {
		if len(s) > maxOriginString {
			s = s[:maxOriginString]
		}
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	return dst
}

// appendSection appends a section of records (already encoded) from o.
func appendSection(dst []byte, o *record.Origin, records []byte) []byte {
	dst = appendOrigin(dst, o)
	dst = binary.AppendUvarint(dst, uint64(len(records)))
	return append(dst, records...)
}

// SectionID identifies a section's content (see the format above).
type SectionID [16]byte

// sectionID hashes a section's host, service and records (not the peer
// or the session: a retry on a new connection, or to another node, is the
// same section).
func sectionID(host, service string, records []byte) SectionID {
	h := xxh3.New()
	for _, s := range [...]string{host, service} {
		var n [binary.MaxVarintLen64]byte
		_, _ = h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		_, _ = h.WriteString(s)
	}
	_, _ = h.Write(records)
	return h.Sum128().Bytes()
}

// Decoder decodes messages into batches. It keeps a string table it
// reuses; it is used by one goroutine.
type Decoder struct {
	cat *record.Catalog
	in  record.Interner
}

// NewDecoder returns a decoder resolving record types in cat.
func NewDecoder(cat *record.Catalog) *Decoder {
	if cat == nil {
		cat = trace.Types()
	}
	return &Decoder{cat: cat}
}

// Decode decodes msg section by section: for each it resets b, decodes
// the section's origin and records into it and calls each with the
// section's id and b (b is the caller's again when each returns). An
// error wraps ErrMalformed and names the offset; the sections before it
// were handed to each, the records of the broken one read before the
// error stay in b.
func (d *Decoder) Decode(msg []byte, b *record.Batch, each func(SectionID, *record.Batch)) error {
	one := len(msg) >= len(magic1) && string(msg[:len(magic1)]) == magic1
	if !one && (len(msg) < len(magic) || string(msg[:len(magic)]) != magic) {
		return fmt.Errorf("%w: offset 0: no %q header", ErrMalformed, magic)
	}
	off := len(magic)
	for off < len(msg) || one {
		b.Reset()
		var fields [5]string
		for i := range fields {
			n, w := binary.Uvarint(msg[off:])
			if w <= 0 || n > maxOriginString || n > uint64(len(msg)-off-w) {
				return fmt.Errorf("%w: offset %d: origin string", ErrMalformed, off)
			}
			off += w
			fields[i] = d.in.Bytes(msg[off : off+int(n)])
			off += int(n)
		}
		b.Origin = record.Origin{Receiver: fields[0], Peer: fields[1], Host: fields[2], Service: fields[3], Session: fields[4]}
		end := len(msg)
		if !one {
			n, w := binary.Uvarint(msg[off:])
			if w <= 0 || n > uint64(len(msg)-off-w) {
				return fmt.Errorf("%w: offset %d: section length", ErrMalformed, off)
			}
			off += w
			end = off + int(n)
		}
		body := msg[off:end]
		dec := kieker.NewDecoder(kieker.Options{Catalog: d.cat, Inline: true, MaxStringLen: maxStringLen, MaxRegistryBytes: -1})
		n, err := dec.Decode(body, b)
		if err != nil {
			return fmt.Errorf("%w: offset %d: %w", ErrMalformed, off+n, err)
		}
		if n < len(body) {
			return fmt.Errorf("%w: offset %d: a record cut short", ErrMalformed, off+n)
		}
		each(sectionID(b.Origin.Host, b.Origin.Service, body), b)
		off = end
		one = false
	}
	return nil
}

// Partitioner says which partition a record belongs to, and whether it
// is published at all: the records the trace assembly uses are (spans,
// Kieker trace events and metadata, OperationExecutionRecords,
// invocation records); the others (JFR events, Kieker's monitoring
// records) stay with the node's own record sinks. Used by one goroutine.
type Partitioner struct {
	n  int
	rt trace.Router
}

// NewPartitioner returns a partitioner over n partitions.
func NewPartitioner(n int) *Partitioner { return &Partitioner{n: n} }

// Partition returns r's partition, or -1 when r is not published. It is
// the rule by which one bridge shards its own assembly (trace.RouteKey,
// trace.Shard), so that an owner's assembler sees whole traces:
//
//   - a span (trace.SpanType) goes by its 128-bit trace id: all spans of
//     a trace meet at one owner, whichever node received them;
//   - every Kieker trace record (events, TraceMetadata,
//     OperationExecutionRecords, invocation identifiers) goes to one
//     partition: Kieker links traces of different ids (parentTraceId,
//     invocation identifiers across threads, processes and hosts) as it
//     assembles them, so no smaller key keeps what it links together.
//
// o is not used: a record's partition depends on the record alone.
func (p *Partitioner) Partition(r *record.Record, _ *record.Origin) int {
	key, ok := p.rt.Key(r)
	if !ok {
		return -1
	}
	return trace.Shard(key, p.n)
}

// Subject is the subject of partition p's messages.
func Subject(p int) string { return subjectPrefix + strconv.Itoa(p) }

const subjectPrefix = "tbc.p."

// StreamName is the JetStream stream of the cluster.
const StreamName = "TRACEBRIDGE_CLUSTER"

// Owners drop a section whose id they saw within dedupeWindow (the
// stream's duplicate window: JetStream drops a message whose id it saw
// within it), remembering at most maxSeen ids per partition (the oldest
// go first beyond it).
const (
	dedupeWindow = 2 * time.Minute
	maxSeen      = 1 << 18
)

// dedupe is an owner's window of section ids seen. The zero value is
// ready; it is used by one goroutine.
type dedupe struct {
	ids  map[SectionID]struct{}
	fifo []seenID // in the order seen, from head on
	head int
}

type seenID struct {
	id SectionID
	at int64
}

// add reports whether id is new, and remembers it as seen at now (unix
// nanoseconds, not decreasing).
func (d *dedupe) add(id SectionID, now int64) bool {
	if d.ids == nil {
		d.ids = map[SectionID]struct{}{}
	}
	for d.head < len(d.fifo) && (d.fifo[d.head].at < now-int64(dedupeWindow) || len(d.fifo)-d.head >= maxSeen) {
		delete(d.ids, d.fifo[d.head].id)
		d.head++
	}
	if d.head > len(d.fifo)/2 && d.head > 1024 {
		d.fifo = append(d.fifo[:0], d.fifo[d.head:]...)
		d.head = 0
	}
	if _, ok := d.ids[id]; ok {
		return false
	}
	d.ids[id] = struct{}{}
	d.fifo = append(d.fifo, seenID{id, now})
	return true
}
