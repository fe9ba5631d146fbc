package fressian

import (
	"encoding/binary"
	"hash/adler32"
	"math"
	"math/bits"
)

// AppendInt appends v in the shortest form, as Java's writeInt chooses it.
func AppendInt(dst []byte, v int64) []byte {
	u := uint64(v)
	if v < 0 {
		u = ^u
	}
	// Java's bitSwitch: the number of leading zeros of v (or of ^v).
	switch lz := bits.LeadingZeros64(u); {
	case lz <= 14:
		return binary.BigEndian.AppendUint64(append(dst, codeInt), uint64(v))
	case lz <= 22:
		return appendPacked(dst, 0x7E+v>>48, v, 6)
	case lz <= 30:
		return appendPacked(dst, 0x7A+v>>40, v, 5)
	case lz <= 38:
		return appendPacked(dst, 0x76+v>>32, v, 4)
	case lz <= 44:
		return appendPacked(dst, 0x72+v>>24, v, 3)
	case lz <= 51:
		return appendPacked(dst, 0x68+v>>16, v, 2)
	case lz <= 57:
		return appendPacked(dst, 0x50+v>>8, v, 1)
	case v < -1:
		return append(dst, byte(0x50+v>>8), byte(v))
	default: // 0..63, and -1 as 0xFF
		return append(dst, byte(v))
	}
}

// appendPacked appends the code and the low n bytes of v, big-endian.
func appendPacked(dst []byte, code, v int64, n int) []byte {
	dst = append(dst, byte(code))
	for i := n - 1; i >= 0; i-- {
		dst = append(dst, byte(v>>(8*i)))
	}
	return dst
}

// AppendNull appends null.
func AppendNull(dst []byte) []byte { return append(dst, codeNull) }

// AppendBool appends true or false.
func AppendBool(dst []byte, b bool) []byte {
	if b {
		return append(dst, codeTrue)
	}
	return append(dst, codeFalse)
}

// AppendDouble appends a double: 0.0 (also −0.0) and 1.0 as single codes,
// NaN in Java's canonical form.
func AppendDouble(dst []byte, v float64) []byte {
	switch {
	case v == 0:
		return append(dst, codeDouble0)
	case v == 1:
		return append(dst, codeDouble1)
	case math.IsNaN(v):
		return binary.BigEndian.AppendUint64(append(dst, codeDouble), 0x7FF8000000000000)
	}
	return binary.BigEndian.AppendUint64(append(dst, codeDouble), math.Float64bits(v))
}

// AppendFloat appends a float, NaN in Java's canonical form.
func AppendFloat(dst []byte, v float32) []byte {
	b := math.Float32bits(v)
	if v != v {
		b = 0x7FC00000
	}
	return binary.BigEndian.AppendUint32(append(dst, codeFloat), b)
}

// AppendString appends s as Java's writeString does: CESU-8 in one piece
// (packed below 8 bytes) when it takes at most 65536 bytes, otherwise in
// chunks of at most 65536 bytes that never split a UTF-16 code unit.
// Invalid UTF-8 in s is written as U+FFFD.
func AppendString(dst []byte, s string) []byte {
	n, plain := cesuLen(s)
	if n <= stringChunkSize {
		dst = appendStringHead(dst, codeString, n)
		if plain {
			return append(dst, s...)
		}
		return appendCESUString(dst, s)
	}
	b := []byte(s)
	if !plain {
		b = appendCESUString(make([]byte, 0, n), s)
	}
	for len(b) > stringChunkSize {
		cut := stringChunkSize
		for b[cut]&0xC0 == 0x80 { // a continuation byte: not a unit boundary
			cut--
		}
		dst = append(appendStringHead(dst, codeStringChunk, cut), b[:cut]...)
		b = b[cut:]
	}
	return append(appendStringHead(dst, codeString, len(b)), b...)
}

func appendStringHead(dst []byte, code byte, n int) []byte {
	if n < 8 {
		return append(dst, codeStringPacked+byte(n))
	}
	return AppendInt(append(dst, code), int64(n))
}

// AppendBytes appends a byte array: packed below 8 bytes, else in chunks
// of 65535 bytes and a counted last piece.
func AppendBytes(dst, b []byte) []byte {
	if len(b) < 8 {
		return append(append(dst, codeBytesPacked+byte(len(b))), b...)
	}
	for len(b) > bytesChunkSize {
		dst = AppendInt(append(dst, codeBytesChunk), bytesChunkSize)
		dst = append(dst, b[:bytesChunkSize]...)
		b = b[bytesChunkSize:]
	}
	return append(AppendInt(append(dst, codeBytes), int64(len(b))), b...)
}

// AppendListHead appends the head of a list of n items (Java's writeList:
// packed below 8 items, else counted). The items follow.
func AppendListHead(dst []byte, n int) []byte {
	if n < 8 {
		return append(dst, codeListPacked+byte(n))
	}
	return AppendInt(append(dst, codeList), int64(n))
}

// AppendMapHead appends the head of a map of n entries (Java's map
// handler: the tag, then a list of 2n items). Keys and values follow
// alternately.
func AppendMapHead(dst []byte, n int) []byte {
	return AppendListHead(append(dst, codeMap), 2*n)
}

// AppendSetHead appends the head of a set of n items.
func AppendSetHead(dst []byte, n int) []byte {
	return AppendListHead(append(dst, codeSet), n)
}

// AppendFooter appends a footer for the bytes dst[start:] (the stream
// since its start or its last footer): magic, byte count, Adler-32. The
// reader resets its caches after it; so must the writer (Encoder.Reset).
func AppendFooter(dst []byte, start int) []byte {
	n := len(dst) - start
	dst = binary.BigEndian.AppendUint32(dst, footerMagic)
	dst = binary.BigEndian.AppendUint32(dst, uint32(n))
	return binary.BigEndian.AppendUint32(dst, adler32.Checksum(dst[start:]))
}

// Encoder appends structs with the struct cache of one stream, as one
// Java FressianWriter does: the first use of a tag writes it with its field
// count, later uses write its cache index. Its zero value is ready to use.
type Encoder struct {
	structs map[string]int
}

// Reset empties the struct cache: the next stream (a new zorka packet)
// starts.
func (e *Encoder) Reset() { clear(e.structs) }

// AppendResetCaches appends RESET_CACHES and empties the struct cache.
func (e *Encoder) AppendResetCaches(dst []byte) []byte {
	e.Reset()
	return append(dst, codeResetCaches)
}

// AppendStruct appends the head of a struct (Java's writeTag); its fields
// follow. The built-in tags (map, set, uuid, …, int[] …) get their codes.
func (e *Encoder) AppendStruct(dst []byte, tag string, fields int) []byte {
	if c, ok := builtinCodes[tag]; ok {
		return append(dst, c)
	}
	if c, ok := arrayCode(tag); ok {
		return append(dst, c)
	}
	switch tag {
	case "map":
		return append(dst, codeMap)
	case "set":
		return append(dst, codeSet)
	}
	if i, ok := e.structs[tag]; ok {
		if i < 16 {
			return append(dst, codeStructCachePacked+byte(i))
		}
		return AppendInt(append(dst, codeStruct), int64(i))
	}
	if e.structs == nil {
		e.structs = make(map[string]int)
	}
	e.structs[tag] = len(e.structs)
	dst = AppendString(append(dst, codeStructType), tag)
	return AppendInt(dst, int64(fields))
}

// AppendValue appends any value as Java's writer writes the equivalent
// Java object (lists counted, maps as the map tag and a list).
func (e *Encoder) AppendValue(dst []byte, v Value) []byte {
	switch v.Kind {
	case KindNull:
		return AppendNull(dst)
	case KindBool:
		return AppendBool(dst, v.Int != 0)
	case KindInt:
		return AppendInt(dst, v.Int)
	case KindFloat:
		return AppendFloat(dst, float32(v.Float))
	case KindDouble:
		return AppendDouble(dst, v.Float)
	case KindString:
		return AppendString(dst, v.Str)
	case KindBytes:
		if v.Bytes == nil {
			return AppendNull(dst)
		}
		return AppendBytes(dst, v.Bytes)
	case KindList:
		dst = AppendListHead(dst, len(v.Items))
	case KindMap:
		dst = AppendListHead(append(dst, codeMap), len(v.Items))
	case KindSet:
		dst = AppendSetHead(dst, len(v.Items))
	case KindArray:
		c, ok := arrayCode(v.Tag)
		if !ok {
			c = codeObjectArray
		}
		dst = AppendInt(append(dst, c), int64(len(v.Items)))
		for _, it := range v.Items {
			switch c {
			case codeIntArray, codeLongArray:
				dst = AppendInt(dst, it.Int)
			case codeFloatArray:
				dst = AppendFloat(dst, float32(it.Float))
			case codeDoubleArray:
				dst = AppendDouble(dst, it.Float)
			case codeBooleanArray:
				dst = AppendBool(dst, it.Int != 0)
			default:
				dst = e.AppendValue(dst, it)
			}
		}
		return dst
	case KindStruct:
		dst = e.AppendStruct(dst, v.Tag, len(v.Items))
	default:
		return AppendNull(dst)
	}
	for _, it := range v.Items {
		dst = e.AppendValue(dst, it)
	}
	return dst
}
