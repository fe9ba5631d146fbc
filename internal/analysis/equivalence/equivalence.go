// Package equivalence groups execution traces into Kieker's trace
// equivalence classes (TraceEquivalenceClassFilter): two traces are
// equivalent when their executions, in eoi order, agree in operation,
// eoi, ess and assembly component (assembly equivalence) or allocation
// component (allocation equivalence, which Kieker's tool calls
// "deployment"). A class counts its traces; its representative is the
// first trace of the class; it is written as Kieker's EquivalenceClassWriter
// writes it, in Kieker's order.
//
// Kieker's order is the iteration order of two java.util.concurrent.
// ConcurrentHashMaps: the classes keyed by the hash of their executions,
// then the representatives keyed by their traceId's hash. javaMap
// reproduces it (table sizes, bins, the order a resize leaves a bin in);
// it is exact while no bin holds more than 8 entries (Java then
// turns the bin into a tree or grows the table early: a log with
// very many classes).
//
// A Classifier is used by one goroutine. Memory grows with the number of
// classes, not of traces.
package equivalence

import (
	"encoding/binary"
	"fmt"
	"hash/maphash"
	"io"
	"strconv"

	"github.com/tracebridge/tracebridge/internal/analysis/sysmodel"
)

// Mode is which component an execution is compared by.
type Mode uint8

// The modes.
const (
	Assembly Mode = iota + 1
	Allocation
)

// ParseMode parses "assembly", or "deployment"/"allocation".
func ParseMode(s string) (Mode, error) {
	switch s {
	case "assembly":
		return Assembly, nil
	case "deployment", "allocation":
		return Allocation, nil
	}
	return 0, fmt.Errorf("unknown equivalence %q (want assembly or deployment)", s)
}

// String returns the mode's name as the analyze command spells it.
func (m Mode) String() string {
	if m == Assembly {
		return "assembly"
	}
	return "deployment"
}

// Class is an equivalence class.
type Class struct {
	// Representative is what the class keeps of its first trace.
	Representative Representative
	// Count is the number of traces in the class (Kieker's cardinality).
	Count int
	hash  int32
}

// Representative is what Kieker's EquivalenceClassWriter prints of a
// class's first trace: its id (KID the Kieker traceId that orders the
// classes), its number of executions and its deepest ess.
type Representative struct {
	ID     string
	KID    int64
	Execs  int
	MaxESS int
}

// Classifier collects the classes. It keeps a 128-bit hash of each
// class's executions (component, operation, eoi and ess of each), not the
// traces, so its memory grows with the classes alone.
type Classifier struct {
	mode   Mode
	index  map[[2]uint64]*Class
	order  []*Class // by first trace
	seeds  [2]maphash.Seed
	key    []byte
	traces int
}

// New returns a classifier comparing by mode.
func New(mode Mode) *Classifier {
	return &Classifier{mode: mode, index: map[[2]uint64]*Class{}, seeds: [2]maphash.Seed{maphash.MakeSeed(), maphash.MakeSeed()}}
}

// Add puts t (its entities numbered) into its class.
func (c *Classifier) Add(t *sysmodel.ExecutionTrace) {
	c.traces++
	c.key = c.key[:0]
	h := int32(1) // Java's int arithmetic, wrapping
	for i := range t.Execs {
		e := &t.Execs[i]
		comp := e.Alloc.ID
		if c.mode == Assembly {
			comp = e.Alloc.Assembly.ID
		}
		for _, v := range [4]int{e.Op.ID, comp, e.EOI, e.ESS} {
			h = 31*h + int32(v)
			c.key = binary.AppendUvarint(c.key, uint64(v))
		}
	}
	k := [2]uint64{maphash.Bytes(c.seeds[0], c.key), maphash.Bytes(c.seeds[1], c.key)}
	if cl := c.index[k]; cl != nil {
		cl.Count++
		return
	}
	cl := &Class{Representative: Representative{ID: t.ID, KID: t.KID, Execs: len(t.Execs), MaxESS: t.MaxESS()}, Count: 1, hash: h}
	c.index[k] = cl
	c.order = append(c.order, cl)
}

// Traces returns the number of traces added.
func (c *Classifier) Traces() int { return c.traces }

// Classes returns the classes in Kieker's order (the order of
// EquivalenceClassWriter's lines).
func (c *Classifier) Classes() []Class {
	var byClass javaMap[*Class]
	for _, cl := range c.order {
		byClass.put(cl.hash, cl)
	}
	var byTrace javaMap[*Class]
	byClass.each(func(cl *Class) {
		kid := cl.Representative.KID
		byTrace.put(int32(kid^int64(uint64(kid)>>32)), cl) // Long.hashCode
	})
	out := make([]Class, 0, len(c.order))
	byTrace.each(func(cl *Class) { out = append(out, *cl) })
	return out
}

// Write writes classes as Kieker's EquivalenceClassWriter does:
//
//	Class 0; cardinality: 3; # executions: 5; representative: 42; max. stack depth: 2
func Write(w io.Writer, classes []Class) error {
	var b []byte
	for i, cl := range classes {
		t := cl.Representative
		b = append(b, "Class "...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, "; cardinality: "...)
		b = strconv.AppendInt(b, int64(cl.Count), 10)
		b = append(b, "; # executions: "...)
		b = strconv.AppendInt(b, int64(t.Execs), 10)
		b = append(b, "; representative: "...)
		b = append(b, t.ID...)
		b = append(b, "; max. stack depth: "...)
		b = strconv.AppendInt(b, int64(t.MaxESS), 10)
		b = append(b, '\n')
	}
	_, err := w.Write(b)
	return err
}

// ClassJSON is a class in JSON.
type ClassJSON struct {
	Class          int    `json:"class"`
	Cardinality    int    `json:"cardinality"`
	Executions     int    `json:"executions"`
	Representative string `json:"representative"`
	MaxStackDepth  int    `json:"maxStackDepth"`
}

// ClassesJSON is the classes of one mode in JSON.
type ClassesJSON struct {
	Mode    string      `json:"mode"`
	Classes []ClassJSON `json:"classes"`
}

// JSON returns classes in JSON form.
func JSON(mode Mode, classes []Class) ClassesJSON {
	out := ClassesJSON{Mode: mode.String(), Classes: make([]ClassJSON, len(classes))}
	for i, cl := range classes {
		out.Classes[i] = ClassJSON{Class: i, Cardinality: cl.Count, Executions: cl.Representative.Execs,
			Representative: cl.Representative.ID, MaxStackDepth: cl.Representative.MaxESS}
	}
	return out
}
