package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// A message of the cluster's stream holds records of one partition from
// one batch a receiver decoded:
//
//	0  "TBC1"
//	4  origin: receiver, peer, host, service, session; each uvarint
//	   length + UTF-8 (record.Origin)
//	.. records in Kieker's single-socket TCP encoding (the forward sink's
//	   kieker-tcp protocol): string registry entries -1 | id | length |
//	   bytes before the first frame that uses them, frames classId |
//	   loggingTimestamp | fields. Every message starts a new registry, so
//	   a message decodes on its own, on any node, in any order.
//
// Record types are found by class name in the catalogue (the built-in
// Kieker types, tracebridge's span and invocation types, the IRL
// libraries): every node of a cluster loads the same libraries.
const magic = "TBC1"

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

// appendOrigin appends the message header.
func appendOrigin(dst []byte, o *record.Origin) []byte {
	dst = append(dst, magic...)
	for _, s := range [...]string{o.Receiver, o.Peer, o.Host, o.Service, o.Session} {
		if len(s) > maxOriginString {
			s = s[:maxOriginString]
		}
		dst = binary.AppendUvarint(dst, uint64(len(s)))
		dst = append(dst, s...)
	}
	return dst
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

// Decode appends the records of msg to b and sets b's origin. An error
// wraps ErrMalformed and names the offset; the records before it stay in
// b.
func (d *Decoder) Decode(msg []byte, b *record.Batch) error {
	if len(msg) < len(magic) || string(msg[:len(magic)]) != magic {
		return fmt.Errorf("%w: offset 0: no %q header", ErrMalformed, magic)
	}
	off := len(magic)
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
	dec := kieker.NewDecoder(kieker.Options{Catalog: d.cat, Inline: true, MaxStringLen: maxStringLen, MaxRegistryBytes: -1})
	body := msg[off:]
	n, err := dec.Decode(body, b)
	if err != nil {
		return fmt.Errorf("%w: offset %d: %w", ErrMalformed, off+n, err)
	}
	if n < len(body) {
		return fmt.Errorf("%w: offset %d: a record cut short", ErrMalformed, off+n)
	}
	return nil
}

// Partitioner says which partition a record belongs to, and whether it
// is published at all: the records the trace assembly uses are (spans,
// Kieker trace events and metadata, OperationExecutionRecords,
// invocation records); the others (JFR events, Kieker's monitoring
// records) stay with the node's own record sinks. Used by one goroutine.
type Partitioner struct {
	n     uint64
	types trace.TypeCache
}

// NewPartitioner returns a partitioner over n partitions.
func NewPartitioner(n int) *Partitioner { return &Partitioner{n: uint64(n)} }

// Partition returns r's partition, or -1 when r is not published.
//
//   - A span (trace.SpanType) goes by its 128-bit trace id: all spans of
//     a trace meet at one owner, whichever node received them.
//   - An OperationExecutionRecord goes by its traceId (OER traces join
//     processes by it).
//   - Kieker trace events, TraceMetadata and invocation records go by
//     the host that sent them (the batch's origin host, else its peer):
//     a Kieker trace's threads (parentTraceId, Split/Join, invocation
//     identifiers) are linked within the records of one host, which so
//     meet at one owner.
func (p *Partitioner) Partition(r *record.Record, o *record.Origin) int {
	if r.Type == nil {
		return -1
	}
	ti := p.types.Get(r.Type)
	switch {
	case ti.Span:
		hi, lo := r.Values[trace.SpanTraceIDHigh].Int(), r.Values[trace.SpanTraceIDLow].Int()
		return int(trace.Mix(uint64(hi)*0x9e3779b97f4a7c15^uint64(lo)) % p.n)
	case ti.Role == trace.RoleOER && ti.TraceID >= 0:
		return int(trace.Mix(uint64(r.Values[ti.TraceID].Int())) % p.n)
	case ti.Role != trace.RoleNone:
		key := o.Host
		if key == "" {
			key = o.Receiver + "\x00" + o.Peer
		}
		return int(trace.Mix(fnv64(key)) % p.n)
	}
	return -1
}

// fnv64 is FNV-1a of s (stable across processes, unlike maphash).
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// Subject is the subject of partition p's messages.
func Subject(p int) string { return subjectPrefix + strconv.Itoa(p) }

const subjectPrefix = "tbc.p."

// StreamName is the JetStream stream of the cluster.
const StreamName = "TRACEBRIDGE_CLUSTER"
