package zico

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/zeebo/xxh3"

	codec "github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// TraceID is the trace id of a zorka trace sent by host: a 128-bit hash
// (XXH3) of the host and the trace's content — its marker (trace type,
// the agent's wall clock in ms when it began, minimum time, flags) and
// every call of its tree in order (class, method, signature, flags,
// duration in ns, calls, errors, exception, attributes, number of
// children). Zorka's agent sends no id of its own, so the id is what it
// sent: a packet sent again after a lost OK — to this node, or to
// another node of a cluster — gives its traces the ids they got the
// first time, and the store keeps each span once (by trace id and span
// id). Two traces of one host with the same type, the same start
// millisecond and the same calls with the same durations to the
// nanosecond get one id (and are shown as one). The high half's top bit
// is set, so that no zorka id is a Kieker trace's (trace.KiekerID: high
// half 0). Names are hashed, not the connection's symbol ids, which a
// new connection numbers again.
func TraceID(host string, t *Trace) trace.ID {
	h := hashers.Get().(*idHasher)
	defer hashers.Put(h)
	h.Reset()
	h.str(host)
	if t.Root != nil {
		h.record(t.Root)
	}
	s := h.Sum128()
	return trace.ID{Hi: s.Hi | 1<<63, Lo: s.Lo}
}

var hashers = sync.Pool{New: func() any { return &idHasher{Hasher: xxh3.New()} }}

// idHasher writes the fields of a trace into an XXH3 hasher without
// allocating.
type idHasher struct {
	*xxh3.Hasher
	buf [8]byte
}

func (h *idHasher) int(v int64) {
	binary.LittleEndian.PutUint64(h.buf[:], uint64(v))
	_, _ = h.Write(h.buf[:])
}

// str writes s with its length (so that "ab"+"c" ≠ "a"+"bc").
func (h *idHasher) str(s string) {
	h.int(int64(len(s)))
	_, _ = h.WriteString(s)
}

func (h *idHasher) record(r *TraceRecord) {
	h.str(r.Class)
	h.str(r.Method)
	h.str(r.Signature)
	h.int(int64(r.Flags))
	h.int(r.Time)
	h.int(r.Calls)
	h.int(r.Errors)
	if m := r.Marker; m != nil {
		h.int(1)
		h.str(m.TraceType)
		h.int(m.Clock)
		h.int(m.MinimumTime)
		h.int(int64(m.Flags))
	} else {
		h.int(0)
	}
	for e := r.Exception; e != nil; e = e.Cause {
		h.int(1)
		h.str(e.Class)
		h.str(e.Message)
		h.int(int64(len(e.Stack)))
	}
	h.int(0)
	h.int(int64(len(r.Attrs)))
	for i := range r.Attrs {
		h.str(r.Attrs[i].Key)
		h.value(&r.Attrs[i].Value)
	}
	h.int(int64(len(r.Children)))
	for i := range r.Children {
		h.record(&r.Children[i])
	}
}

func (h *idHasher) value(v *codec.Value) {
	h.int(int64(v.Kind))
	switch v.Kind {
	case codec.KindBool, codec.KindInt:
		h.int(v.Int)
	case codec.KindFloat, codec.KindDouble:
		h.int(int64(math.Float64bits(v.Float)))
	case codec.KindString:
		h.str(v.Str)
	case codec.KindTagged:
		h.str(v.Str)
		if v.Elem != nil {
			h.value(v.Elem)
		}
	case codec.KindNull:
	default:
		h.str(v.String())
	}
}
