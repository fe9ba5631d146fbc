package zico_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/codec/codectest"
	"github.com/tracebridge/tracebridge/internal/codec/zico"
)

// hx parses hex with spaces and quoted ASCII: `EF "abc" 02`.
func hx(tb testing.TB, s string) []byte { return codectest.Hex(tb, s) }

// decoded is what DecodeData visited, copied out of the decoder's memory.
type decoded struct {
	Objects []any
	Err     error
}

func decode(d *zico.Decoder, payload []byte, syms *zico.SymbolMap) decoded {
	var out decoded
	out.Err = d.DecodeData(payload, syms, func(o zico.Object) error {
		switch o := o.(type) {
		case *zico.Trace:
			t := *o
			root := clone(o.Root)
			t.Root = &root
			out.Objects = append(out.Objects, t)
		case *zico.Symbol:
			out.Objects = append(out.Objects, *o)
		case *zico.TraceMarker:
			out.Objects = append(out.Objects, *o)
		case *zico.HelloRequest:
			out.Objects = append(out.Objects, *o)
		case *zico.Unknown:
			out.Objects = append(out.Objects, *o)
		}
		return nil
	})
	return out
}

// clone deep-copies a record tree (the decoder reuses its memory).
func clone(r *zico.TraceRecord) zico.TraceRecord {
	c := *r
	if r.Marker != nil {
		m := *r.Marker
		c.Marker = &m
	}
	c.Exception = cloneException(r.Exception)
	if r.Attrs != nil {
		c.Attrs = make([]zico.Attr, len(r.Attrs))
		for i, a := range r.Attrs {
			a.Value = cloneValue(a.Value)
			c.Attrs[i] = a
		}
	}
	if r.Children != nil {
		c.Children = make([]zico.TraceRecord, len(r.Children))
		for i := range r.Children {
			c.Children[i] = clone(&r.Children[i])
		}
	}
	return c
}

func cloneException(x *zico.Exception) *zico.Exception {
	if x == nil {
		return nil
	}
	c := *x
	c.Stack = append([]zico.StackElement{}, x.Stack...)
	c.Cause = cloneException(x.Cause)
	return &c
}

func cloneValue(v zico.Value) zico.Value {
	if v.Elem != nil {
		e := cloneValue(*v.Elem)
		v.Elem = &e
	}
	return v
}

// dump formats decoded objects with everything pointers lead to.
func dump(d decoded) string {
	var b strings.Builder
	for _, o := range d.Objects {
		switch o := o.(type) {
		case zico.Trace:
			fmt.Fprintf(&b, "trace(%d records, %d unresolved) ", o.Records, o.Unresolved)
			dumpRecord(&b, o.Root)
		default:
			fmt.Fprintf(&b, "%+v", o)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "err %v\n", d.Err)
	return b.String()
}

func dumpRecord(b *strings.Builder, r *zico.TraceRecord) {
	fmt.Fprintf(b, "{%d:%s %d:%s %d:%s f%d t%d c%d e%d", r.ClassID, r.Class, r.MethodID, r.Method,
		r.SignatureID, r.Signature, r.Flags, r.Time, r.Calls, r.Errors)
	if r.Marker != nil {
		fmt.Fprintf(b, " marker%+v", *r.Marker)
	}
	for x := r.Exception; x != nil; x = x.Cause {
		fmt.Fprintf(b, " exc{%d:%s %q %+v}", x.ClassID, x.Class, x.Message, x.Stack)
	}
	if r.Attrs != nil {
		b.WriteString(" attrs[")
		for _, a := range r.Attrs {
			fmt.Fprintf(b, "%d:%s=%s:%s ", a.KeyID, a.Key, a.Value.Kind, a.Value.String())
		}
		b.WriteString("]")
	}
	if r.Children != nil {
		b.WriteString(" [")
		for i := range r.Children {
			dumpRecord(b, &r.Children[i])
		}
		b.WriteString("]")
	}
	b.WriteString("}")
}
