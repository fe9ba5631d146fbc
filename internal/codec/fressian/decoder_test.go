package fressian

import (
	"bytes"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestDecodeValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []Value
	}{
		{"ints", "00 3F FF 50 C8 4F FE 72 16 E3 60 7B 8B CF E5 68 00 F8 80 00 00 00 00 00 00 00",
			[]Value{Int(0), Int(63), Int(-1), Int(200), Int(-2), Int(1500000), Int(1700000000000), Int(math.MinInt64)}},
		{"scalars", "F5 F6 F7 FB FC FA 40 04 00 00 00 00 00 00 F9 3F C0 00 00",
			[]Value{Bool(true), Bool(false), Null(), Double(0), Double(1), Double(2.5), Float(1.5)}},
		{"strings", `DA DB "C" E3 08 "12345678" DB 00 DC C3 A9 E0 ED A0 BD ED BA 80`,
			[]Value{String(""), String("C"), String("12345678"), String("\x00"), String("é"), String("🚀")}},
		{"modified UTF-8 NUL and lone surrogates", `DC C0 80 DD ED A0 BD DD ED BA 80`,
			[]Value{String("\x00"), String("\uFFFD"), String("\uFFFD")}},
		{"unchecked continuation bytes", `DC C3 29`, []Value{String("é")}},
		{"chunked string", `E2 03 "abc" E2 02 "de" DB "f"`, []Value{String("abcdef")}},
		{"chunked string counted end", `E2 01 "a" E3 08 "bcdefghi"`, []Value{String("abcdefghi")}},
		{"surrogates split by a chunk", `E2 03 ED A0 BD E2 01 "x" DD ED BA 80`, []Value{String("\uFFFDx\uFFFD")}},
		{"pair across chunks", `E2 03 ED A0 BD DD ED BA 80`, []Value{String("🚀")}},
		{"bytes", `D0 D3 01 02 03 D9 08 0102030405060708 D8 02 AABB D8 01 CC D9 00`,
			[]Value{Bytes([]byte{}), Bytes([]byte{1, 2, 3}), Bytes([]byte{1, 2, 3, 4, 5, 6, 7, 8}), Bytes([]byte{0xAA, 0xBB, 0xCC})}},
		{"lists", `E4 E6 01 02 EC 02 03 04 ED 05 06 FD EE 07`,
			[]Value{List(), List(Int(1), Int(2)), List(Int(3), Int(4)), List(Int(5), Int(6)), List(Int(7))}},
		{"open list ends at the end", `EE`, []Value{List()}},
		{"map and set", `C0 E6 05 50 C8 C1 E5 DB "a" C0 ED FD`,
			[]Value{Map(Int(5), Int(200)), Set(String("a")), Map()}},
		{"struct cache", `EF DB "T" 02 01 02 A0 03 04 EF DB "U" 00 A1 F0 00 05 06`,
			[]Value{Struct("T", Int(1), Int(2)), Struct("T", Int(3), Int(4)), Struct("U"), Struct("U"), Struct("T", Int(5), Int(6))}},
		{"struct tag not a string", `EF 05 01 F7 A0 F6`, []Value{Struct("", Null()), Struct("", Bool(false))}},
		{"nested struct gets its index when read", `EF DB "A" 01 EF DB "B" 00 A1 A0 A1`,
			[]Value{Struct("A", Struct("B")), Struct("B"), Struct("A", Struct("B"))}},
		{"builtins", `C3 D0 C4 DB "r" C5 DB "u" C6 D1 05 C7 D1 05 02 C8 7B 8B CF E5 68 00 C9 F7 DB "s" CA DB "n" DB "k"`,
			[]Value{Struct("uuid", Bytes([]byte{})), Struct("regex", String("r")), Struct("uri", String("u")),
				Struct("bigint", Bytes([]byte{5})), Struct("bigdec", Bytes([]byte{5}), Int(2)),
				Struct("inst", Int(1700000000000)), Struct("sym", Null(), String("s")), Struct("key", String("n"), String("k"))}},
		{"arrays", `B3 02 01 FF B0 01 F8 7F FF FF FF FF FF FF FF B1 02 FB FC B4 01 F9 3F C0 00 00 B2 02 F5 F6 B5 02 DB "x" F7`,
			[]Value{Array("int[]", Int(1), Int(-1)), Array("long[]", Int(math.MaxInt64)), Array("double[]", Double(0), Double(1)),
				Array("float[]", Float(1.5)), Array("boolean[]", Bool(true), Bool(false)), Array("Object[]", String("x"), Null())}},
		{"priority cache", `CD DB "C" 80 80 CD E6 01 02 81 CC 00`,
			[]Value{String("C"), String("C"), String("C"), List(Int(1), Int(2)), List(Int(1), Int(2)), String("C")}},
		{"priority cache in a count", `CD 03 E3 80 "abc"`, []Value{Int(3), String("abc")}},
		{"cached struct replays without new cache entries", `CD EF DB "T" 01 01 80 EF DB "U" 00 A1 A0 02`,
			[]Value{Struct("T", Int(1)), Struct("T", Int(1)), Struct("U"), Struct("U"), Struct("T", Int(2))}},
		{"nested cache entries", `CD E6 CD DB "a" DB "b" 81 80`,
			[]Value{List(String("a"), String("b")), String("a"), List(String("a"), String("b"))}},
		{"reset caches", `EF DB "T" 00 FE EF DB "U" 00 A0`, []Value{Struct("T"), Struct("U"), Struct("U")}},
		{"cached reference in a closed list", `CD ED 01 FD E6 80 80`,
			[]Value{List(Int(1)), List(List(Int(1)), List(Int(1)))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := decodeAll(hx(t, tc.in), Options{})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestFooter(t *testing.T) {
	var e Encoder
	b := e.AppendStruct(nil, "T", 1)
	b = AppendInt(b, 1)
	b = AppendFooter(b, 0)
	e.Reset()
	start := len(b)
	b = e.AppendStruct(b, "U", 0)
	b = AppendFooter(b, start)
	b = append(b, 0xEF) // after a footer the caches are empty: A0 would fail
	b = AppendString(b, "V")
	b = append(b, 0x00, 0xA0)
	got, err := decodeAll(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Value{Struct("T", Int(1)), Struct("U"), Struct("V"), Struct("V")}
	if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
	// A0 right after a footer refers to a reset cache.
	bad := append(AppendFooter(e.AppendStruct(nil, "T", 0), 0), 0xA0)
	if _, err := decodeAll(bad, Options{}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("struct reference after a footer: %v", err)
	}
}

func TestDecodeErrors(t *testing.T) {
	okFooter := AppendFooter([]byte{0x01}, 0)
	badSum := bytes.Clone(okFooter)
	badSum[len(badSum)-1] ^= 1
	badLen := bytes.Clone(okFooter)
	badLen[8] = 9
	for _, tc := range []struct {
		name string
		in   []byte
		lim  Limits
		kind error
		msg  string
	}{
		{"undefined code", hx(t, "01 CE"), Limits{}, ErrMalformed, "offset 1: undefined code 0xCE"},
		{"end collection as value", hx(t, "FD"), Limits{}, ErrMalformed, "offset 0: undefined code 0xFD"},
		{"B6", hx(t, "E5 B6"), Limits{}, ErrMalformed, "offset 1: undefined code 0xB6"},
		{"bad lead byte", hx(t, `DC 41 80`), Limits{}, ErrMalformed, "offset 2: invalid UTF-8 lead byte 0x80 or sequence cut by the end of the string"},
		{"F0 lead byte", hx(t, `DB F0`), Limits{}, ErrMalformed, "offset 1: invalid UTF-8 lead byte 0xF0 or sequence cut by the end of the string"},
		{"cut sequence", hx(t, `DC 41 E2`), Limits{}, ErrMalformed, "offset 2: invalid UTF-8 lead byte 0xE2 or sequence cut by the end of the string"},
		{"negative string length", hx(t, `E3 FF`), Limits{}, ErrMalformed, "offset 1: negative string length -1"},
		{"string length over int32", hx(t, `E3 F8 00 00 00 01 00 00 00 00`), Limits{}, ErrMalformed, "offset 1: string length 4294967296 out of range for int"},
		{"string over the limit", hx(t, `E3 7A 7F FF FF FF FF`), Limits{}, ErrMalformed, "offset 1: string length 549755813887 out of range for int"},
		{"string of 2 GB", hx(t, `E3 76 7F FF FF FF`), Limits{}, ErrLimit, "offset 1: string length 2147483647 over the limit 16777216"},
		{"chunked string over the limit", hx(t, `E2 04 "abcd" E2 04 "efgh"`), Limits{MaxString: 6}, ErrLimit, "offset 8: string of more than 6 bytes"},
		{"chunked string bad end", hx(t, `E2 01 "a" 01`), Limits{}, ErrMalformed, "offset 3: expected the rest of a chunked string, got code 0x01"},
		{"chunked bytes bad end", hx(t, `D8 01 AA D0`), Limits{}, ErrMalformed, "offset 3: expected the rest of chunked bytes, got code 0xD0"},
		{"list over the limit", hx(t, `EC 05`), Limits{MaxCount: 4}, ErrLimit, "offset 1: list length 5 over the limit 4"},
		{"negative list length", hx(t, `EC FF`), Limits{}, ErrMalformed, "offset 1: negative list length -1"},
		{"odd map", hx(t, `C0 E5 01`), Limits{}, ErrMalformed, "offset 3: map with an odd number of items"},
		{"struct index beyond cache", hx(t, `A0`), Limits{}, ErrMalformed, "offset 0: struct cache index 0 beyond the end of the cache (0 entries)"},
		{"F0 index beyond cache", hx(t, `EF DB "T" 00 F0 05`), Limits{}, ErrMalformed, "offset 4: struct cache index 5 beyond the end of the cache (1 entries)"},
		{"negative field count", hx(t, `EF DB "T" FF`), Limits{}, ErrMalformed, "offset 0: negative field count -1 of struct T"},
		{"struct cache limit", hx(t, `EF DB "T" 00 EF DB "U" 00`), Limits{MaxCache: 1}, ErrLimit, "offset 4: more than 1 struct cache entries"},
		{"priority index beyond cache", hx(t, `81`), Limits{}, ErrMalformed, "offset 0: priority cache index 1 beyond the end of the cache (0 entries)"},
		{"reference to itself", hx(t, `CD E5 80`), Limits{}, ErrMalformed, "offset 2: reference to priority cache entry 0 inside its own value"},
		{"reset inside cached value", hx(t, `CD E5 FE 01`), Limits{}, ErrMalformed, "offset 2: RESET_CACHES inside a cached value"},
		{"footer inside cached value", append(hx(t, `CD E5`), okFooter[1:]...), Limits{}, ErrMalformed, "offset 2: footer inside a cached value"},
		{"footer bad magic", hx(t, `CF CF CF CE 00 00 00 00`), Limits{}, ErrMalformed, "offset 0: invalid footer magic"},
		{"footer bad length", badLen, Limits{}, ErrMalformed, "offset 1: footer length 9, expected 1"},
		{"footer bad checksum", badSum, Limits{}, ErrMalformed, "offset 1: footer checksum mismatch"},
		{"depth", bytes.Repeat([]byte{0xE5}, 10), Limits{MaxDepth: 5}, ErrLimit, "offset 5: values nested deeper than 5"},
		{"int[] element out of range", hx(t, `B3 01 F8 00 00 00 01 00 00 00 00`), Limits{}, ErrMalformed, "offset 2: int[] element 4294967296 out of range for int"},
		{"type: float for double", hx(t, `B1 01 F9 00 00 00 00`), Limits{}, ErrType, "offset 2: expected double, got float"},
		{"replay limit", hx(t, `CD E6 00 00 CD E6 80 80 CD E6 81 81 CD E6 82 82 83`), Limits{MaxReplay: 40}, ErrLimit, "offset 10: more than 40 bytes re-read through the priority cache"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := decodeAll(tc.in, Options{Limits: tc.lim})
			if !errors.Is(err, tc.kind) {
				t.Fatalf("err = %v, want kind %v", err, tc.kind)
			}
			if got := strings.TrimPrefix(err.Error(), "fressian: "); got != tc.msg {
				t.Fatalf("err = %q\nwant   %q", got, tc.msg)
			}
		})
	}
}

// TestTruncation: every proper prefix of a valid stream decodes the
// complete values before the cut and then reports ErrTruncated, never
// another error (Java's reader meets an EOFException there).
func TestTruncation(t *testing.T) {
	var e Encoder
	var b []byte
	var bounds []int
	for _, v := range []Value{
		Int(1700000000000), String("zorka 🚀"), String(strings.Repeat("x", 70000)),
		Bytes(bytes.Repeat([]byte{1}, 70000)),
		Struct("T", Int(1), Map(Int(5), Double(2.5), Int(6), Float(1)), List(Null(), Bool(true))),
		Struct("T", Int(2), Map(), List()), Array("int[]", Int(1), Int(300)),
		Struct("uuid", Bytes(make([]byte, 16))),
	} {
		bounds = append(bounds, len(b))
		b = e.AppendValue(b, v)
	}
	bounds = append(bounds, len(b))
	b = append(b, hx(t, `CD E6 DB "a" 01 80 ED 05 FD`)...)
	b = AppendFooter(b, 0)
	b = append(b, 0x07)
	want, err := decodeAll(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	near := func(n int) bool { // big strings: every prefix near a value boundary, a sample inside
		for _, x := range bounds {
			if n >= x-40 && n <= x+40 {
				return true
			}
		}
		return n%997 == 0 || n > bounds[len(bounds)-1]
	}
	for n := range len(b) {
		if !near(n) {
			continue
		}
		got, err := decodeAll(b[:n], Options{})
		if n == 0 {
			if err != nil || len(got) != 0 {
				t.Fatalf("empty: %v %v", got, err)
			}
			continue
		}
		if err != nil && !errors.Is(err, ErrTruncated) {
			t.Fatalf("prefix %d: %v", n, err)
		}
		if len(got) > 0 && !reflect.DeepEqual(want[:len(got)], got) { // cmp is slow on long byte slices
			t.Fatalf("prefix %d (-want +got):\n%s", n, cmp.Diff(want[:len(got)], got))
		}
	}
}

// TestSkipMatchesRead: Skip consumes exactly what ReadValue consumes.
func TestSkipMatchesRead(t *testing.T) {
	in := hx(t, `CD EF DB "T" 02 CD DB "a" 81 80 A0 01 02 FE EF DB "U" 01 C0 E6 01 ED 02 FD B3 02 01 02`)
	r, s := NewDecoder(Options{}), NewDecoder(Options{})
	r.Reset(in)
	s.Reset(in)
	for r.More() {
		r.ReadValue()
		if !s.More() {
			t.Fatal("Skip ended early")
		}
		s.Skip()
		if r.Offset() != s.Offset() || (r.Err() == nil) != (s.Err() == nil) {
			t.Fatalf("ReadValue at %d (%v), Skip at %d (%v)", r.Offset(), r.Err(), s.Offset(), s.Err())
		}
	}
	if r.Err() != nil || s.More() {
		t.Fatal(r.Err(), s.Err())
	}
}

func TestTypedReads(t *testing.T) {
	d := NewDecoder(Options{FieldCount: func(tag string, declared int) int {
		if tag == "Six" {
			return 6
		}
		return declared
	}})
	in := hx(t, `EF DD "Six" 04 01 02 03 04 05 06 F7 DB "s" C0 E6 05 DB "v" EC 02 F5 F6 CD 7B 8B CF E5 68 00 80`)
	d.Reset(in)
	tag, n := d.ReadStruct()
	if tag != "Six" || n != 6 {
		t.Fatalf("struct %q %d", tag, n)
	}
	for i := range 6 {
		if v := d.ReadInt(); v != int64(i+1) {
			t.Fatalf("field %d = %d", i, v)
		}
	}
	if !d.ReadNull() {
		t.Fatal("null")
	}
	if d.ReadNull() {
		t.Fatal("null again")
	}
	if s, null := d.ReadString(); s != "s" || null {
		t.Fatal(s, null)
	}
	m := d.ReadMap()
	if !m.Next() || d.ReadInt() != 5 || !m.Next() {
		t.Fatal("map key")
	}
	if s, _ := d.ReadString(); s != "v" || m.Next() {
		t.Fatal("map value", s)
	}
	l := d.ReadList()
	if l.Len() != 2 || !l.Next() || !d.ReadBool() || !l.Next() || d.ReadBool() || l.Next() {
		t.Fatal("list")
	}
	first, cached := d.ReadInt(), d.ReadInt()
	if first != 1700000000000 || cached != 1700000000000 || d.More() || d.Err() != nil {
		t.Fatal("cached int", d.Err())
	}

	// A mismatch reads the value, then reports the type error at its start.
	d.Reset(hx(t, `01 E6 DB "a" DB "b" 02`))
	d.ReadInt()
	if s, _ := d.ReadString(); s != "" {
		t.Fatal(s)
	}
	if err := d.Err(); !errors.Is(err, ErrType) || err.Error() != "fressian: offset 1: expected string, got list" {
		t.Fatal(err)
	}
	// A mismatch on a truncated value is truncation, as in Java.
	d.Reset(hx(t, `E6 DB "a"`))
	d.ReadInt()
	if err := d.Err(); !errors.Is(err, ErrTruncated) {
		t.Fatal(err)
	}
}
