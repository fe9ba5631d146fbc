package tcp

import (
	"errors"
	"sync"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Decoder decodes the byte stream of one connection. A Receiver gets one
// from Config.NewDecoder per connection and uses it from that connection's
// goroutine only.
type Decoder interface {
	// Decode decodes every complete unit (record, registry entry) at the
	// start of buf, appends the records to b and returns the number of
	// bytes consumed. An incomplete trailing unit is not an error: the
	// receiver calls again with the unconsumed bytes followed by new ones.
	// On error the records of the units before the bad one are in b and n
	// counts their bytes; the error is final for the connection. Decode
	// must not keep buf.
	Decode(buf []byte, b *record.Batch) (n int, err error)
	// MaxUnit is the size in bytes of the largest unit the decoder
	// accepts. The receiver grows a connection's read buffer up to it, and
	// an incomplete unit that fills that much is an error.
	MaxUnit() int
}

// KiekerDecoder returns a factory of decoders for Kieker's single-socket TCP
// protocol (SingleSocketTcpWriter, the Python and C language packs):
// o with Inline set. Each decoder has its own string registry (o.Strings is
// ignored); o.Catalog, the limits and JavaCharCount are shared.
func KiekerDecoder(o kieker.Options) func() Decoder {
	o.Inline = true
	o.DualSocket = false
	o.Strings = nil
	maxUnit := kiekerMaxUnit(o, true)
	return func() Decoder {
		return &kiekerDecoder{Decoder: kieker.NewDecoder(o), maxUnit: maxUnit}
	}
}

type kiekerDecoder struct {
	*kieker.Decoder
	maxUnit int
}

func (d *kiekerDecoder) MaxUnit() int { return d.maxUnit }

// KDBDecoder returns a factory of decoders for the KDB binary dialect under
// the mapping m. Each decoder has its own string interner (o.Interner is
// ignored); the limits of o apply, and MaxUnit is o.MaxRecordSize.
func KDBDecoder(m *kdb.Mapping, o kdb.Options) func() Decoder {
	o.Interner = nil
	maxUnit := o.MaxRecordSize
	if maxUnit <= 0 {
		maxUnit = kdb.DefaultMaxRecordSize
	}
	return func() Decoder {
		return &kdbDecoder{Decoder: kdb.NewDecoder(m, o), maxUnit: maxUnit}
	}
}

type kdbDecoder struct {
	*kdb.Decoder
	maxUnit int
}

func (d *kdbDecoder) MaxUnit() int { return d.maxUnit }

// kiekerMaxUnit is the largest unit a Kieker binary decoder with options o
// accepts: a registry entry of the longest string, or the frame of the
// catalogue's largest type with every array at its longest.
func kiekerMaxUnit(o kieker.Options, marker bool) int {
	unit := entryMaxUnit(o)
	if marker {
		unit += 4 // the -1 before an inline entry
	}
	maxArr := o.MaxArrayLen
	if maxArr <= 0 {
		maxArr = kieker.DefaultMaxArrayLen
	}
	cat := o.Catalog
	if cat == nil {
		cat = record.Builtin()
	}
	for _, t := range cat.Types() {
		size := 12 // class id | logging timestamp
		for _, f := range t.Fields {
			v := f.Kind.Size()
			if f.Kind == record.String {
				v = 4 // a registry id
			}
			if f.Array {
				v = 4 + maxArr*v
			}
			size += v
		}
		unit = max(unit, size)
	}
	return unit
}

// entryMaxUnit is the largest registry entry id | length | bytes that a
// decoder with options o accepts.
func entryMaxUnit(o kieker.Options) int {
	maxStr := o.MaxStringLen
	if maxStr <= 0 {
		maxStr = kieker.DefaultMaxStringLen
	}
	if o.JavaCharCount {
		// The length counts UTF-16 units; the decoder scans up to three
		// bytes per unit before it can tell the string is too long.
		maxStr *= 3
	}
	return 8 + maxStr
}

// dualRegistry is the string registry that every connection of a Dual
// receiver shares, as Kieker's dual-socket reader shares one. mu is held
// around every Decode of every connection; changed is closed (and
// replaced) whenever a registry connection registered entries.
type dualRegistry struct {
	mu      sync.Mutex
	strs    *kieker.Strings
	changed chan struct{}
	opts    kieker.Options
	recUnit int
	regUnit int
}

func newDualRegistry(o kieker.Options) *dualRegistry {
	o.Inline = false
	o.DualSocket = true
	o.Strings = kieker.NewStrings(o.MaxRegistryEntries)
	maxBytes := o.MaxRegistryBytes
	if maxBytes == 0 {
		maxBytes = kieker.DefaultMaxRegistryBytes
	}
	o.Strings.SetMaxBytes(maxBytes)
	return &dualRegistry{
		strs:    o.Strings,
		changed: make(chan struct{}),
		opts:    o,
		recUnit: kiekerMaxUnit(o, false),
		regUnit: entryMaxUnit(o),
	}
}

// records returns a decoder for a records connection.
func (r *dualRegistry) records() Decoder {
	return &dualRecords{reg: r, dec: kieker.NewDecoder(r.opts)}
}

// entries returns a decoder for a registry connection.
func (r *dualRegistry) entries() Decoder {
	return &dualEntries{reg: r, dec: kieker.NewRegistryDecoder(r.strs, r.opts)}
}

// errWaitRegistry is returned by a records connection's Decode when a frame
// uses a string the registry has not delivered yet: the caller waits for
// changed (or gives up after Config.RegistryWait, reporting err) and
// retries the same bytes.
type errWaitRegistry struct {
	changed <-chan struct{}
	err     error
}

func (e *errWaitRegistry) Error() string { return e.err.Error() }
func (e *errWaitRegistry) Unwrap() error { return e.err }

type dualRecords struct {
	reg *dualRegistry
	dec *kieker.Decoder
}

func (d *dualRecords) MaxUnit() int { return d.reg.recUnit }

func (d *dualRecords) Decode(buf []byte, b *record.Batch) (int, error) {
	d.reg.mu.Lock()
	n, err := d.dec.Decode(buf, b)
	var changed chan struct{}
	if err != nil && errors.Is(err, kieker.ErrUnknownString) && d.dec.Err() == nil {
		changed = d.reg.changed
	}
	d.reg.mu.Unlock()
	if changed != nil {
		return n, &errWaitRegistry{changed: changed, err: err}
	}
	return n, err
}

type dualEntries struct {
	reg *dualRegistry
	dec *kieker.RegistryDecoder
}

func (d *dualEntries) MaxUnit() int { return d.reg.regUnit }

func (d *dualEntries) Decode(buf []byte, _ *record.Batch) (int, error) {
	d.reg.mu.Lock()
	defer d.reg.mu.Unlock()
	n, err := d.dec.Decode(buf)
	if n > 0 {
		close(d.reg.changed)
		d.reg.changed = make(chan struct{})
	}
	return n, err
}
