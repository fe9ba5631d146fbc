package record

import "slices"

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

	arena []Value
}

const minArena = 256

// Len returns the number of records.
func (b *Batch) Len() int { return len(b.Records) }

// Reset empties the batch, keeping its memory for reuse.
func (b *Batch) Reset() {
	clear(b.Records) // drop type and string references held by stale records
	b.Records = b.Records[:0]
	clear(b.Done)
	b.Done = b.Done[:0]
	clear(b.arena)
	b.arena = b.arena[:0]
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

// AddRecord appends a copy of r (values copied into the batch's arena).
func (b *Batch) AddRecord(r *Record) {
	vals := b.values(len(r.Values))
	copy(vals, r.Values)
	b.Records = append(b.Records, Record{Type: r.Type, LoggingTimestamp: r.LoggingTimestamp, Values: vals})
}

// Truncate drops the records from index n on. Decoders use it to take back
// a record whose bytes turned out to be incomplete. The arena space of the
// dropped records is reclaimed by the next Reset.
func (b *Batch) Truncate(n int) {
	if n < len(b.Records) {
		clear(b.Records[n:])
		b.Records = b.Records[:n]
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
	return b.arena[start : start+n : start+n]
}
