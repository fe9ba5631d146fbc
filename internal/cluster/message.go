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
