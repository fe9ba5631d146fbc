package otlp

import (
	"bytes"
	"encoding/base64"
	"math"
	"slices"
	"strconv"

	"github.com/tracebridge/tracebridge/internal/jsonstr"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// nodeKind is the type of an attribute value (OTLP's AnyValue).
type nodeKind uint8

const (
	nEmpty nodeKind = iota // no value set
	nString
	nBool
	nInt
	nDouble
	nBytes
	nArray
	nList // a key-value list
)

// node is one attribute value in the Decoder's arena. Strings and bytes
// point into the message or into Decoder.strs; children are linked by
// index.
type node struct {
	kind              nodeKind
	key               []byte // member key in a key-value list
	str               []byte // string or bytes value
	num               uint64 // bool (0/1), int64, double bits
	first, last, next int32  // children and the next sibling; -1: none
}

// newNode adds a node of kind k to the arena and returns its index.
func (d *Decoder) newNode(k nodeKind) int32 {
	d.nodes = append(d.nodes, node{kind: k, first: -1, last: -1, next: -1})
	return int32(len(d.nodes) - 1)
}

// addChild appends child to parent's children.
func (d *Decoder) addChild(parent, child int32) {
	p := &d.nodes[parent]
	if p.last < 0 {
		p.first = child
	} else {
		d.nodes[p.last].next = child
	}
	p.last = child
}

// resetNodes empties the arena.
func (d *Decoder) resetNodes() {
	clear(d.nodes)
	d.nodes = d.nodes[:0]
	d.strs = d.strs[:0]
}

// text returns the value of node i as an attribute's text and type, and
// whether the text was interned before.
func (d *Decoder) text(i int32) (string, trace.ValueType, bool) {
	n := &d.nodes[i]
	var t trace.ValueType
	switch n.kind {
	case nString:
		s, seen := d.intern(n.str)
		return s, trace.TypeString, seen
	case nBool:
		if n.num != 0 {
			return "true", trace.TypeBool, true
		}
		return "false", trace.TypeBool, true
	case nInt:
		d.buf = strconv.AppendInt(d.buf[:0], int64(n.num), 10)
		t = trace.TypeInt
	case nDouble:
		d.buf = appendFloat(d.buf[:0], math.Float64frombits(n.num))
		t = trace.TypeDouble
	case nBytes:
		d.buf = base64.StdEncoding.AppendEncode(d.buf[:0], n.str)
		t = trace.TypeBytes
	case nArray, nList:
		d.buf = d.appendJSON(d.buf[:0], i)
		t = trace.TypeJSON
	default:
		return "", trace.TypeString, true
	}
	s, seen := d.intern(d.buf)
	return s, t, seen
}

// appendJSON appends node i as JSON: key-value lists as objects with
// their keys sorted and a repeated key's last value (what encoding/json
// makes of pdata's AsRaw), doubles that are not finite as strings.
func (d *Decoder) appendJSON(dst []byte, i int32) []byte {
	n := &d.nodes[i]
	switch n.kind {
	case nString:
		return jsonstr.AppendBytes(dst, n.str)
	case nBool:
		if n.num != 0 {
			return append(dst, "true"...)
		}
		return append(dst, "false"...)
	case nInt:
		return strconv.AppendInt(dst, int64(n.num), 10)
	case nDouble:
		f := math.Float64frombits(n.num)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			dst = append(dst, '"')
			dst = appendFloat(dst, f)
			return append(dst, '"')
		}
		return appendFloat(dst, f)
	case nBytes:
		dst = append(dst, '"')
		dst = base64.StdEncoding.AppendEncode(dst, n.str)
		return append(dst, '"')
	case nArray:
		dst = append(dst, '[')
		for c := n.first; c >= 0; c = d.nodes[c].next {
			if c != n.first {
				dst = append(dst, ',')
			}
			dst = d.appendJSON(dst, c)
		}
		return append(dst, ']')
	case nList:
		return d.appendObject(dst, i)
	}
	return append(dst, "null"...)
}

// appendObject appends the members of list node i as a JSON object.
func (d *Decoder) appendObject(dst []byte, i int32) []byte {
	base := len(d.order)
	for c := d.nodes[i].first; c >= 0; c = d.nodes[c].next {
		d.order = append(d.order, c)
	}
	members := d.order[base:]
	slices.SortStableFunc(members, func(a, b int32) int { return bytes.Compare(d.nodes[a].key, d.nodes[b].key) })
	dst = append(dst, '{')
	first := true
	for k, c := range members {
		key := d.nodes[c].key
		if k+1 < len(members) && bytes.Equal(d.nodes[members[k+1]].key, key) {
			continue // a later member of the same key wins
		}
		if !first {
			dst = append(dst, ',')
		}
		first = false
		dst = jsonstr.AppendBytes(dst, key)
		dst = append(dst, ':')
		dst = d.appendJSON(dst, c)
	}
	d.order = d.order[:base]
	return append(dst, '}')
}

// appendFloat appends f as JavaScript (and encoding/json, and pdata's
// AsString) print numbers: the shortest digits that read back as f, with
// an exponent below 1e-6 and from 1e21; NaN, Infinity, -Infinity.
func appendFloat(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	start := len(dst)
	dst = strconv.AppendFloat(dst, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9
		n := len(dst) - start
		if n >= 4 && dst[len(dst)-4] == 'e' && dst[len(dst)-3] == '-' && dst[len(dst)-2] == '0' {
			dst[len(dst)-2] = dst[len(dst)-1]
			dst = dst[:len(dst)-1]
		}
	}
	return dst
}

const hexDigits = "0123456789abcdef"

// appendIDHex appends the 16 or 32 hex digits of an id held as numbers.
func appendIDHex(dst []byte, words ...uint64) []byte {
	for _, w := range words {
		for s := 60; s >= 0; s -= 4 {
			dst = append(dst, hexDigits[(w>>uint(s))&0xF])
		}
	}
	return dst
}

// beUint64 reads 8 bytes big-endian (ids are sent in network order).
func beUint64(b []byte) uint64 {
	_ = b[7]
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}
