package record

import (
	"slices"
	"unsafe"
)

// Batch is a reusable group of records. Decoders append records to a batch;
// consumers read Records. The values of all records live in one arena that
// Reset recycles, so a batch that is reused allocates nothing per record
// once it has grown to its working size.
//
// Ownership: a batch belongs to whoever filled it. A consumer handed a batch
// may read it until it returns; to keep a record longer it must Clone it.
type Batch struct {
	Records []Record

	// Done holds callbacks a source attaches to learn the fate of the
	// batch's records: the pipeline calls each exactly once, with nil when
	// the records are durable in every sink (consumed and flushed), or
	// with the error that kept them from it. Broker sources acknowledge
	// messages in them. Reset drops callbacks that were not taken.
	Done []func(error)

	// Origin says where the records came from. Sources set it (the engine
	// fills in the receiver's name); stages and sinks read it. Reset
	// clears it.
	Origin Origin

	// Frames, when a decoder kept them (see Frames), are the bytes the
	// records were decoded from. Reset clears them.
	Frames Frames

	arena []Value
	lists []List // array values of the batch's records point into it
	// used counts the values carved out since the last Reset, in every
	// arena (Bytes).
	used int
}

// Origin is where a batch came from, in the spirit of OpenTelemetry's
// Resource: the receiver that decoded it, the peer it read from, and what
// the source knows of the monitored program (host, service, session). Any
// field may be empty when the source does not know it. A batch from one
// connection has one origin; a broker receiver's batch may mix messages of
// several publishers and then leaves Host empty.
type Origin struct {
	// Receiver is the name of the receiver (logs, metrics).
	Receiver string
	// Peer is the remote address, file or broker the records were read
	// from.
	Peer string
	// Host is the monitored host: Kieker's hostname (from the
	// KiekerMetadataRecord or TraceMetadata), a ZICO HELLO hostname, an
	// OTLP resource's host.name.
	Host string
	// Service is the monitored service or application (OTLP
	// service.name, Kieker's controller name).
	Service string
	// Session identifies the connection or session within the receiver.
	Session string
}

// Frames are the Kieker binary frames (int32 class id | int64 logging
// timestamp | fields, strings as int32 ids of the stream's registry) that
// a batch's records were decoded from, one per record, in order: a
// decoder keeps them (codec/kieker's Options.KeepFrames) so that a sink
// writing the same encoding (the binary Kieker log) copies the bytes and
// replaces the ids instead of encoding every value again. They are valid
// only while they match the records: Valid checks the count, and a
// decoder keeps them only where nothing changes records between it and
// the sinks (no stages, no receiver transform; see serve).
//
// Frames only: where no consumer reads the values at all (codec/kieker's
// Options.FramesOnly), a batch may hold its records as frames alone: then
// Records is empty, Types names the type of each frame (Counts tallies
// them) and Strings resolves the frames' string ids; Len counts the
// frames. A batch is
// either kind, never both. Only a sink that copies frames (a binary
// Kieker log) makes anything of such a batch; serve lets receivers
// produce them only when every sink is one and nothing else (stage,
// trace assembly of those types, stream) reads records.
type Frames struct {
	// Data holds the frames back to back; Ends[i] is the end of record
	// i's frame in Data (its start is Ends[i-1], or 0).
	Data []byte
	Ends []int
	// Source names the namespace of the frames' class and string ids
	// (one per decoder, that is per registry; never reused in a process);
	// 0 means no frames.
	Source uint64
	// Types, in a batch of frames only, holds the record type of each
	// frame (len(Types) == len(Ends)); nil otherwise.
	Types []*Type
	// Strings, in a batch of frames only, resolves the string ids of the
	// frames (the stream's registry as it was when they were decoded: it
	// holds at least every id they use and never changes).
	Strings FrameStrings
	// Counts, in a batch of frames only, counts its frames per type, each
	// type once, in the order first seen (AddFrame keeps it): what the
	// per-type metrics and a log's type descriptions need, without a pass
	// over Types.
	Counts []TypeCount
}

// TypeCount is a number of records of one type.
type TypeCount struct {
	Type *Type
	N    int
}

// AddFrame notes the next frame of a batch of frames only: where it ends
// in Data and its type.
func (f *Frames) AddFrame(end int, t *Type) {
	f.Ends = append(f.Ends, end)
	f.Types = append(f.Types, t)
	f.Count(t, 1)
}

// Count adds n to the tally of t (Counts), for a decoder that appends n
// frames of type t to Ends and Types itself.
func (f *Frames) Count(t *Type, n int) {
	for i := range f.Counts { // a batch holds few types
		if f.Counts[i].Type == t {
			f.Counts[i].N += n
			return
		}
	}
	f.Counts = append(f.Counts, TypeCount{Type: t, N: n})
}

// FrameStrings resolves the string ids of frames: an immutable view of a
// stream's string registry, safe for concurrent use.
type FrameStrings interface {
	String(id int32) (string, bool)
}

// Valid reports whether f holds one frame for each of n records.
func (f *Frames) Valid(n int) bool { return f.Source != 0 && len(f.Ends) == n }

// Only reports whether f holds a batch's records as frames alone (see
// Frames).
func (f *Frames) Only() bool { return len(f.Types) > 0 }

// Frame returns the frame of record i (Valid must hold).
func (f *Frames) Frame(i int) []byte {
	start := 0
	if i > 0 {
		start = f.Ends[i-1]
	}
	return f.Data[start:f.Ends[i]]
}

// Drop forgets the frames: whoever changes records in place calls it. A
// decoder keeps no more frames in the batch until Reset (its records no
// longer match). A batch of frames only must not be dropped (its records
// would be lost): it has no values to change.
func (f *Frames) Drop() {
	if !f.Only() {
		f.reset()
	}
}

func (f *Frames) reset() {
	clear(f.Types) // drop the type references
	clear(f.Counts)
	f.Data, f.Ends, f.Source, f.Types, f.Strings, f.Counts = f.Data[:0], f.Ends[:0], 0, f.Types[:0], nil, f.Counts[:0]
}

// AddFrames appends the frames of a batch of frames only (src.Only) to b,
// which holds no records, or frames only of the same source: the copy of
// src's records. Other frames are not copied (they only accompany their
// records).
func (b *Batch) AddFrames(src *Frames) {
	if !src.Only() || len(b.Records) > 0 || b.Frames.Source != 0 && b.Frames.Source != src.Source {
		return
	}
	f := &b.Frames
	base := len(f.Data)
	f.Data = append(f.Data, src.Data...)
	for _, e := range src.Ends {
		f.Ends = append(f.Ends, base+e)
	}
	f.Types = append(f.Types, src.Types...)
	for _, c := range src.Counts {
		f.Count(c.Type, c.N)
	}
	f.Source, f.Strings = src.Source, src.Strings
}

// Copy appends copies of src's records to b: its records (AddRecord) or
// its frames (AddFrames).
func (b *Batch) Copy(src *Batch) {
	for i := range src.Records {
		b.AddRecord(&src.Records[i])
	}
	b.AddFrames(&src.Frames)
}

const minArena = 256

// Len returns the number of records: Records, or the frames of a batch of
// frames only.
func (b *Batch) Len() int { return len(b.Records) + len(b.Frames.Types) }

// Sizes of the parts of a batch Bytes counts.
const (
	valueBytes  = int(unsafe.Sizeof(Value{}))
	recordBytes = int(unsafe.Sizeof(Record{}))
	listBytes   = int(unsafe.Sizeof(List{}))
)

// Bytes returns about how much memory the batch's records hold: their
// values (array items included) and the records and lists themselves,
// not the strings they share or the room kept for reuse. Queues bound
// the decoded data they hold by it; it costs no walk over the records.
func (b *Batch) Bytes() int {
	return b.used*valueBytes + len(b.Records)*recordBytes + len(b.lists)*listBytes + len(b.Frames.Data)
}

// Reset empties the batch, keeping its memory for reuse.
func (b *Batch) Reset() {
	clear(b.Records) // drop type and string references held by stale records
	b.Records = b.Records[:0]
	clear(b.Done)
	b.Done = b.Done[:0]
	clear(b.arena)
	b.arena = b.arena[:0]
	clear(b.lists)
	b.lists = b.lists[:0]
	b.used = 0
	b.Origin = Origin{}
	b.Frames.reset()
}

// TakeDone removes the batch's Done callbacks and returns them.
func (b *Batch) TakeDone() []func(error) {
	if len(b.Done) == 0 {
		return nil
	}
	d := slices.Clone(b.Done)
	clear(b.Done)
	b.Done = b.Done[:0]
	return d
}

// Add appends a record of type t with zero values and returns it for the
// caller to fill. The pointer is valid until the next Add or Reset.
func (b *Batch) Add(t *Type, loggingTimestamp int64) *Record {
	n := len(t.Fields)
	b.Records = append(b.Records, Record{Type: t, LoggingTimestamp: loggingTimestamp, Values: b.values(n)})
	return &b.Records[len(b.Records)-1]
}

// AddRecord appends a copy of r (values, array items included, copied
// into the batch's arena), so the copy lives as long as the batch whatever
// becomes of r.
func (b *Batch) AddRecord(r *Record) {
	vals := b.values(len(r.Values))
	copy(vals, r.Values)
	for i := range vals {
		if l := vals[i].list; l != nil {
			vals[i] = b.NewList(l.Elem, len(l.Items))
			copy(vals[i].list.Items, l.Items)
		}
	}
	b.Records = append(b.Records, Record{Type: r.Type, LoggingTimestamp: r.LoggingTimestamp, Values: vals})
}

// NewList returns an array value of n zero items of kind elem for the
// caller to fill through List().Items. The list and its items live in the
// batch's arena (valid until Reset), so decoding array fields allocates
// nothing per record once the batch has grown to its working size.
func (b *Batch) NewList(elem Kind, n int) Value {
	if len(b.lists) == cap(b.lists) {
		// A new block; lists handed out keep the old one alive until
		// the next Reset, so their addresses never change.
		b.lists = make([]List, 0, max(minLists, 2*cap(b.lists)))
	}
	var items []Value
	if n > 0 {
		items = b.values(n)
	}
	b.lists = append(b.lists, List{Elem: elem, Items: items})
	return Value{list: &b.lists[len(b.lists)-1]}
}

const minLists = 16

// Truncate drops the records from index n on. Decoders use it to take back
// a record whose bytes turned out to be incomplete. The arena space of the
// dropped records is reclaimed by the next Reset.
func (b *Batch) Truncate(n int) {
	if n < len(b.Records) {
		clear(b.Records[n:])
		b.Records = b.Records[:n]
	}
	if n < len(b.Frames.Ends) {
		b.Frames.Ends = b.Frames.Ends[:n]
		end := 0
		if n > 0 {
			end = b.Frames.Ends[n-1]
		}
		b.Frames.Data = b.Frames.Data[:end]
	}
	if f := &b.Frames; n < len(f.Types) {
		clear(f.Types[n:])
		f.Types = f.Types[:n]
		clear(f.Counts)
		f.Counts = f.Counts[:0]
		for _, t := range f.Types {
			f.Count(t, 1)
		}
	}
}

// values carves n zeroed values out of the arena. When the arena is full a
// new one is started; records already added keep the old one alive until
// the next Reset, so their values never move.
func (b *Batch) values(n int) []Value {
	if len(b.arena)+n > cap(b.arena) {
		size := 2 * cap(b.arena)
		if size < minArena {
			size = minArena
		}
		for size < n {
			size *= 2
		}
		b.arena = make([]Value, 0, size)
	}
	// The arena is zero beyond its length: new arenas start zeroed and
	// Reset clears what was used.
	start := len(b.arena)
	b.arena = b.arena[:start+n]
	b.used += n
	return b.arena[start : start+n : start+n]
}

// hostTypes are the built-in types that name the monitored host in a
// string field hostname.
var hostTypes = map[string]bool{
	KiekerMetadataRecord: true, TraceMetadata: true, ApplicationTraceMetadata: true,
	OperationExecutionRecord: true, Prefix + "misc.ThreadMetaData": true, Prefix + "misc.HostApplicationMetaData": true,
}

// HostLearner finds the monitored host of a connection in its records
// (Kieker's metadata record, TraceMetadata, an OperationExecutionRecord).
// It remembers types that do not name a host, so a stream of such records
// costs a pointer comparison per record; once the host is found it costs
// nothing. One learner serves one connection.
type HostLearner struct {
	no    [8]*Type // types without a hostname, most recent first
	found bool
}

// Learn sets o.Host from the first record of b (from index from on) that
// names its host, unless the host is already known.
func (h *HostLearner) Learn(o *Origin, b *Batch, from int) {
	if h.found {
		return
	}
	for i := from; i < len(b.Records); i++ {
		r := &b.Records[i]
		if h.skip(r.Type) {
			continue
		}
		if !hostTypes[r.Type.Name] {
			copy(h.no[1:], h.no[:])
			h.no[0] = r.Type
			continue
		}
		if j := r.Type.FieldIndex("hostname"); j >= 0 && j < len(r.Values) && r.Type.Fields[j].Kind == String {
			if host := r.Values[j].Str(); host != "" {
				o.Host = host
				h.found = true
				return
			}
		}
	}
}

func (h *HostLearner) skip(t *Type) bool {
	for _, n := range h.no {
		if n == t {
			return true
		}
	}
	return false
}
