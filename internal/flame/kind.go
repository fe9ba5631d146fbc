package flame

import (
	"fmt"
	"strings"
)

// A Kind is what a flame graph weighs: which JFR event types give stacks,
// the field that weighs each stack (none: each event counts 1) and the
// field whose value is drawn as the top frame, above the stack (the class
// allocated, the monitor waited on, the exception thrown).
type Kind struct {
	Name  string // cpu, alloc, …: the value of --kind and ?kind=
	Title string // the SVG's title
	Unit  string // what the weights are: samples, bytes, ns, throws
	// Events are the event types and how they weigh.
	Events []KindEvent
}

// KindEvent is one event type of a Kind.
type KindEvent struct {
	Type string
	// Weight is a numeric (long) field of the event; "" counts 1 per
	// event. Events whose weight is not positive add nothing.
	Weight string
	// Label is a string field drawn as the frame above the stack's top
	// ("" or a null value: none).
	Label string
}

// Kinds are the flame graphs of JFR recordings, by name. docs/jfr.md
// explains the choice of events.
var Kinds = []*Kind{
	{Name: "cpu", Title: "CPU samples", Unit: "samples", Events: []KindEvent{
		{Type: "jdk.ExecutionSample"},
	}},
	// jdk.ObjectAllocationSample's weight is the bytes the thread
	// allocated since its previous sample: the samples estimate every
	// allocation. The TLAB events estimate the same bytes another way;
	// adding both would count them twice, hence a kind of their own.
	{Name: "alloc", Title: "Allocations", Unit: "bytes", Events: []KindEvent{
		{Type: "jdk.ObjectAllocationSample", Weight: "weight", Label: "objectClass"},
	}},
	{Name: "alloc-tlab", Title: "Allocations (TLABs)", Unit: "bytes", Events: []KindEvent{
		{Type: "jdk.ObjectAllocationInNewTLAB", Weight: "tlabSize", Label: "objectClass"},
		{Type: "jdk.ObjectAllocationOutsideTLAB", Weight: "allocationSize", Label: "objectClass"},
	}},
	{Name: "lock", Title: "Lock waits", Unit: "ns", Events: []KindEvent{
		{Type: "jdk.JavaMonitorEnter", Weight: "duration", Label: "monitorClass"},
		{Type: "jdk.ThreadPark", Weight: "duration", Label: "parkedClass"},
	}},
	{Name: "io", Title: "File and socket I/O time", Unit: "ns", Events: []KindEvent{
		{Type: "jdk.FileRead", Weight: "duration"},
		{Type: "jdk.FileWrite", Weight: "duration"},
		{Type: "jdk.SocketRead", Weight: "duration"},
		{Type: "jdk.SocketWrite", Weight: "duration"},
	}},
	{Name: "io-bytes", Title: "File and socket I/O bytes", Unit: "bytes", Events: []KindEvent{
		{Type: "jdk.FileRead", Weight: "bytesRead"},
		{Type: "jdk.FileWrite", Weight: "bytesWritten"},
		{Type: "jdk.SocketRead", Weight: "bytesRead"},
		{Type: "jdk.SocketWrite", Weight: "bytesWritten"},
	}},
	// The JDK records a thrown Error as both jdk.JavaErrorThrow and
	// jdk.JavaExceptionThrow (its Throwable constructor runs too):
	// exceptions counts every Throwable once, errors the Errors only
	// (jdk.JavaErrorThrow is on by default; jdk.JavaExceptionThrow is not).
	{Name: "exceptions", Title: "Exceptions thrown", Unit: "throws", Events: []KindEvent{
		{Type: "jdk.JavaExceptionThrow", Label: "thrownClass"},
	}},
	{Name: "errors", Title: "Errors thrown", Unit: "throws", Events: []KindEvent{
		{Type: "jdk.JavaErrorThrow", Label: "thrownClass"},
	}},
}

// KindNames lists the kinds' names.
func KindNames() []string {
	out := make([]string, len(Kinds))
	for i, k := range Kinds {
		out[i] = k.Name
	}
	return out
}

// KindOf returns the kind of that name; an error lists the kinds.
func KindOf(name string) (*Kind, error) {
	for _, k := range Kinds {
		if k.Name == name {
			return k, nil
		}
	}
	return nil, fmt.Errorf("unknown flame graph kind %q (kinds: %s)", name, strings.Join(KindNames(), ", "))
}

// Types returns the kind's event types.
func (k *Kind) Types() []string {
	out := make([]string, 0, len(k.Events))
	for _, e := range k.Events {
		out = append(out, e.Type)
	}
	return out
}
