package probe

import (
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// Kieker's record classes the probe writes.
const (
	classTraceMetadata = "kieker.common.record.flow.trace.TraceMetadata"
	classBefore        = "kieker.common.record.flow.trace.operation.BeforeOperationEvent"
	classAfter         = "kieker.common.record.flow.trace.operation.AfterOperationEvent"
	classFailed        = "kieker.common.record.flow.trace.operation.AfterOperationFailedEvent"
	classSplit         = "kieker.common.record.flow.trace.concurrency.SplitEvent"
	classJoin          = "kieker.common.record.flow.trace.concurrency.JoinEvent"
)

// Unknown names the operation and class of the zero Op.
const Unknown = "<unknown>"

// Overflow replaces a string (operation, class, cause, session id) that no
// longer fits the string table (Limits.MaxStrings).
const Overflow = "<probe: string table full>"

// Default limits of the string table.
const (
	DefaultMaxStrings   = 65536
	MaxMaxStrings       = 1 << 24
	DefaultMaxStringLen = 16384
)

// Limits bound the process-wide string table that backs Op handles, causes
// and session ids. Strings stay in the table for the life of the process
// (they are Kieker registry entries that every connection may need again),
// so the table is what keeps memory bounded when a program passes
// ever-new strings (error messages with ids in them, for example).
type Limits struct {
	// MaxStrings is the number of distinct strings the table holds
	// (DefaultMaxStrings when 0, at most MaxMaxStrings). Once it is full, new operations become
	// the Overflow operation and new causes and session ids become
	// Overflow; Stats.Overflowed counts them.
	MaxStrings int
	// MaxStringLen is the byte length beyond which a string is cut, at a
	// UTF-8 boundary (DefaultMaxStringLen when 0).
	MaxStringLen int
}

// SetLimits changes the limits of the string table. Strings already in
// the table stay. It is safe to call at any time, typically once at start.
func SetLimits(l Limits) {
	if l.MaxStrings <= 0 {
		l.MaxStrings = DefaultMaxStrings
	}
	l.MaxStrings = min(l.MaxStrings, MaxMaxStrings)
	if l.MaxStringLen <= 0 {
		l.MaxStringLen = DefaultMaxStringLen
	}
	names.mu.Lock()
	names.maxStrings = l.MaxStrings
	names.maxLen = l.MaxStringLen
	names.mu.Unlock()
}

// Op is a handle to a registered pair of operation signature and class
// signature. Register operations once (package-level variables are the
// usual place) and use the handle on the hot path: an event then carries
// only the handle's number, never a string.
//
// Op handles are process-wide: one handle works with every Writer. The
// zero Op stands for the operation Unknown of class Unknown.
type Op struct{ id uint32 }

// Reserved string and operation ids.
const (
	strEmpty uint32 = iota
	strUnknown
	strOverflow
	strTraceMetadata
	strBefore
	strAfter
	strFailed
	strSplit
	strJoin
	strInvocation
	numReservedStrings
)

const (
	opUnknown uint32 = iota
	opOverflow
)

type opKey struct{ op, cls string }

// opNames are the string ids of an operation.
type opNames struct{ op, cls uint32 }

// lookup is a map for lock-free reads: readers use an immutable snapshot;
// writers add to the full map under the table's mutex and publish a new
// snapshot once the misses since the last one outnumber a quarter of the
// entries, so the copying costs O(1) per miss on average.
type lookup[K comparable] struct {
	read   atomic.Pointer[map[K]uint32]
	all    map[K]uint32
	misses int
}

func (l *lookup[K]) get(k K) (uint32, bool) {
	if m := l.read.Load(); m != nil {
		id, ok := (*m)[k]
		return id, ok
	}
	return 0, false
}

// missed records a miss (the table's mutex held) and publishes a snapshot
// when due.
func (l *lookup[K]) missed() {
	l.misses++
	if l.misses > len(l.all)/4 {
		m := maps.Clone(l.all)
		l.read.Store(&m)
		l.misses = 0
	}
}

// table is the process-wide string and operation table.
type table struct {
	mu         sync.Mutex
	strs       []string  // string id → string
	ops        []opNames // op id → string ids
	strIDs     lookup[string]
	opIDs      lookup[opKey]
	maxStrings int
	maxLen     int
	overflowed atomic.Uint64
}

var names = newTable()

func newTable() *table {
	t := &table{maxStrings: DefaultMaxStrings, maxLen: DefaultMaxStringLen}
	t.strIDs.all = map[string]uint32{}
	t.opIDs.all = map[opKey]uint32{}
	for _, s := range []string{"", Unknown, Overflow, classTraceMetadata, classBefore, classAfter, classFailed, classSplit, classJoin, classInvocation} {
		t.strIDs.all[s] = uint32(len(t.strs))
		t.strs = append(t.strs, s)
	}
	t.ops = []opNames{{strUnknown, strUnknown}, {strOverflow, strOverflow}}
	t.opIDs.all[opKey{Unknown, Unknown}] = opUnknown
	t.opIDs.all[opKey{Overflow, Overflow}] = opOverflow
	t.strIDs.missed()
	t.opIDs.missed()
	return t
}

// NewOp registers the operation signature op of the class signature cls
// (Kieker's operationSignature and classSignature, e.g.
// "public int shop.Catalog.search(String)" and "shop.Catalog") and returns
// its handle. Registering the same pair again returns the same handle
// without allocating. It is safe for concurrent use.
func NewOp(op, cls string) Op {
	if id, ok := names.opIDs.get(opKey{op, cls}); ok {
		return Op{id}
	}
	return Op{names.addOp(op, cls)}
}

// Operation returns the operation signature of o.
func (o Op) Operation() string { return names.op(o.id).op }

// Class returns the class signature of o.
func (o Op) Class() string { return names.op(o.id).cls }

func (t *table) op(id uint32) opKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	if int(id) >= len(t.ops) {
		id = opUnknown
	}
	n := t.ops[id]
	return opKey{t.strs[n.op], t.strs[n.cls]}
}

func (t *table) addOp(op, cls string) uint32 {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := opKey{op, cls}
	if id, ok := t.opIDs.all[k]; ok {
		t.opIDs.missed()
		return id
	}
	// An operation takes a slot of the string table too, so that the
	// number of operations is bounded by the same limit.
	if len(t.ops) >= t.maxStrings {
		t.overflowed.Add(1)
		return opOverflow
	}
	n := opNames{t.internLocked(op), t.internLocked(cls)}
	if n.op == strOverflow || n.cls == strOverflow {
		return opOverflow
	}
	id := uint32(len(t.ops))
	t.ops = append(t.ops, n)
	t.opIDs.all[k] = id
	t.opIDs.missed()
	return id
}

// intern returns the id of s, adding it to the table when it is new.
func (t *table) intern(s string) uint32 {
	if id, ok := t.strIDs.get(s); ok {
		return id
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.internLocked(s)
}

func (t *table) internLocked(s string) uint32 {
	if id, ok := t.strIDs.all[s]; ok {
		t.strIDs.missed()
		return id
	}
	// Kieker strings are UTF-8 (the bridge rejects anything else) and the
	// table keeps at most maxLen bytes of one: a string that is neither is
	// stored repaired (U+FFFD for bad bytes) and cut at a rune boundary,
	// under its new form only, so that the table does not keep a long
	// string alive for its prefix. Such a string takes this locked path
	// every time.
	if len(s) > t.maxLen || !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
		if len(s) > t.maxLen {
			n := t.maxLen
			for n > 0 && !utf8.RuneStart(s[n]) {
				n--
			}
			s = s[:n]
		}
		s = strings.Clone(s)
		if id, ok := t.strIDs.all[s]; ok {
			t.strIDs.missed()
			return id
		}
	}
	if len(t.strs) >= t.maxStrings {
		t.overflowed.Add(1)
		return strOverflow
	}
	id := uint32(len(t.strs))
	t.strs = append(t.strs, s)
	t.strIDs.all[s] = id
	t.strIDs.missed()
	return id
}

// str returns the string of id (Unknown for an id not in the table).
func (t *table) str(id uint32) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if int(id) >= len(t.strs) {
		return Unknown
	}
	return t.strs[id]
}

// copyOps appends the operations from len(dst) on to dst.
func (t *table) copyOps(dst []opNames) []opNames {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append(dst, t.ops[len(dst):]...)
}

// copyStrs appends the strings from len(dst) on to dst.
func (t *table) copyStrs(dst []string) []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append(dst, t.strs[len(dst):]...)
}
