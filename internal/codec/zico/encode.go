package zico

import "github.com/tracebridge/tracebridge/internal/codec/fressian"

// Encoder writes zorka's objects exactly as zorka's FressianTraceWriter
// and FressianTraceFormat write them: a struct's tag and field count at
// its first use in a payload, its cache index later. Call Reset before
// every payload (zorka makes a new FressianWriter for every packet). Its
// zero value is ready to use; it is not safe for concurrent use.
//
// Strings that are null in Java are "" here: the nullable string fields
// (hostname, auth, exception message) write "" as null.
type Encoder struct {
	f fressian.Encoder
}

// Reset starts a new payload.
func (e *Encoder) Reset() { e.f.Reset() }

func appendNullable(dst []byte, s string) []byte {
	if s == "" {
		return fressian.AppendNull(dst)
	}
	return fressian.AppendString(dst, s)
}

// AppendHello appends a HelloRequest_v1.
func (e *Encoder) AppendHello(dst []byte, h HelloRequest) []byte {
	dst = e.f.AppendStruct(dst, TagHello, 3)
	dst = fressian.AppendInt(dst, h.Time)
	dst = appendNullable(dst, h.Hostname)
	return appendNullable(dst, h.Auth)
}

// AppendSymbol appends a Symbol_v1.
func (e *Encoder) AppendSymbol(dst []byte, s Symbol) []byte {
	dst = e.f.AppendStruct(dst, TagSymbol, 2)
	dst = fressian.AppendInt(dst, int64(s.ID))
	return fressian.AppendString(dst, s.Name)
}

// AppendMarker appends a TraceMarker_v1.
func (e *Encoder) AppendMarker(dst []byte, m *TraceMarker) []byte {
	dst = e.f.AppendStruct(dst, TagMarker, 4)
	dst = fressian.AppendInt(dst, int64(m.TraceID))
	dst = fressian.AppendInt(dst, m.Clock)
	dst = fressian.AppendInt(dst, m.MinimumTime)
	return fressian.AppendInt(dst, int64(m.Flags))
}

// AppendRecord appends a TraceRecord_v1 with its tree. As zorka, it
// writes the marker only when the record has FlagTraceBegin (null
// otherwise), Attrs nil as a null map and Children nil as a null list.
// Names are not written: Symbols announce them (AppendNewSymbols).
func (e *Encoder) AppendRecord(dst []byte, r *TraceRecord) []byte {
	dst = e.f.AppendStruct(dst, TagRecord, 11)
	dst = fressian.AppendInt(dst, int64(r.ClassID))
	dst = fressian.AppendInt(dst, int64(r.MethodID))
	dst = fressian.AppendInt(dst, int64(r.SignatureID))
	dst = fressian.AppendInt(dst, int64(r.Flags))
	dst = fressian.AppendInt(dst, r.Time)
	dst = fressian.AppendInt(dst, r.Calls)
	dst = fressian.AppendInt(dst, r.Errors)
	if r.Marker != nil && r.Flags&FlagTraceBegin != 0 {
		dst = e.AppendMarker(dst, r.Marker)
	} else {
		dst = fressian.AppendNull(dst)
	}
	if r.Exception != nil {
		dst = e.AppendException(dst, r.Exception)
	} else {
		dst = fressian.AppendNull(dst)
	}
	if r.Attrs == nil {
		dst = fressian.AppendNull(dst)
	} else {
		dst = fressian.AppendMapHead(dst, len(r.Attrs))
		for i := range r.Attrs {
			dst = fressian.AppendInt(dst, int64(r.Attrs[i].KeyID))
			dst = e.AppendValue(dst, &r.Attrs[i].Value)
		}
	}
	if r.Children == nil {
		return fressian.AppendNull(dst)
	}
	dst = fressian.AppendListHead(dst, len(r.Children))
	for i := range r.Children {
		dst = e.AppendRecord(dst, &r.Children[i])
	}
	return dst
}

// AppendException appends a SymbolicException_v1 with its causes. The
// stack is never null (Java writes the stack trace array as a list).
func (e *Encoder) AppendException(dst []byte, x *Exception) []byte {
	dst = e.f.AppendStruct(dst, TagException, 4)
	dst = fressian.AppendInt(dst, int64(x.ClassID))
	dst = appendNullable(dst, x.Message)
	dst = fressian.AppendListHead(dst, len(x.Stack))
	for i := range x.Stack {
		s := &x.Stack[i]
		dst = e.f.AppendStruct(dst, TagStackElement, 4)
		dst = fressian.AppendInt(dst, int64(s.ClassID))
		dst = fressian.AppendInt(dst, int64(s.MethodID))
		dst = fressian.AppendInt(dst, int64(s.FileID))
		dst = fressian.AppendInt(dst, int64(s.Line))
	}
	if x.Cause == nil {
		return fressian.AppendNull(dst)
	}
	return e.AppendException(dst, x.Cause)
}

// AppendValue appends an attribute value.
func (e *Encoder) AppendValue(dst []byte, v *Value) []byte {
	switch v.Kind {
	case KindBool:
		return fressian.AppendBool(dst, v.Int != 0)
	case KindInt:
		return fressian.AppendInt(dst, v.Int)
	case KindFloat:
		return fressian.AppendFloat(dst, float32(v.Float))
	case KindDouble:
		return fressian.AppendDouble(dst, v.Float)
	case KindString:
		return fressian.AppendString(dst, v.Str)
	case KindTagged:
		dst = e.f.AppendStruct(dst, TagTagged, 2)
		dst = fressian.AppendInt(dst, v.Int)
		if v.Elem == nil {
			return fressian.AppendNull(dst)
		}
		return e.AppendValue(dst, v.Elem)
	case KindOther:
		if v.Other != nil {
			return e.f.AppendValue(dst, *v.Other)
		}
	}
	return fressian.AppendNull(dst)
}

// AppendNewSymbols appends a Symbol for every id the record tree uses that
// is not in sent, and adds it to sent, in the order zorka's
// FressianTraceWriter announces them before writing a record: class,
// method, signature; the exception chain (class, each stack element's
// class, method and file, then the cause); the attribute keys; the
// children, recursively; the marker's trace id last (only with
// FlagTraceBegin). Tagged values' tag ids are not announced (zorka does
// not). name returns the name of an id.
func (e *Encoder) AppendNewSymbols(dst []byte, r *TraceRecord, sent map[int32]bool, name func(int32) string) []byte {
	sym := func(id int32) {
		if !sent[id] {
			sent[id] = true
			dst = e.AppendSymbol(dst, Symbol{ID: id, Name: name(id)})
		}
	}
	var walk func(r *TraceRecord)
	walk = func(r *TraceRecord) {
		sym(r.ClassID)
		sym(r.MethodID)
		sym(r.SignatureID)
		for x := r.Exception; x != nil; x = x.Cause {
			sym(x.ClassID)
			for _, s := range x.Stack {
				sym(s.ClassID)
				sym(s.MethodID)
				sym(s.FileID)
			}
		}
		for _, a := range r.Attrs {
			sym(a.KeyID)
		}
		for i := range r.Children {
			walk(&r.Children[i])
		}
		if r.Marker != nil && r.Flags&FlagTraceBegin != 0 {
			sym(r.Marker.TraceID)
		}
	}
	walk(r)
	return dst
}
