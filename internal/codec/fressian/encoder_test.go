package fressian

import (
	"bytes"
	"encoding/hex"
	"math"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestAppendInt(t *testing.T) {
	for _, tc := range []struct {
		v    int64
		want string
	}{
		{0, "00"}, {1, "01"}, {63, "3F"}, {-1, "FF"},
		{64, "50 40"}, {-2, "4F FE"}, {-64, "4F C0"}, {-65, "4F BF"},
		{200, "50 C8"}, {4095, "5F FF"}, {-4096, "40 00"},
		{4096, "68 10 00"}, {1<<19 - 1, "6F FF FF"}, {-(1 << 19), "60 00 00"},
		{1 << 19, "72 08 00 00"}, {1500000, "72 16 E3 60"}, {1<<25 - 1, "73 FF FF FF"}, {-(1 << 25), "70 00 00 00"},
		{1 << 25, "76 02 00 00 00"}, {1<<33 - 1, "77 FF FF FF FF"}, {-(1 << 33), "74 00 00 00 00"},
		{1 << 33, "7A 02 00 00 00 00"}, {1700000000000, "7B 8B CF E5 68 00"}, {1<<41 - 1, "7B FF FF FF FF FF"},
		{1 << 41, "7E 02 00 00 00 00 00"}, {1<<49 - 1, "7F FF FF FF FF FF FF"}, {-(1 << 49), "7C 00 00 00 00 00 00"},
		{1 << 49, "F8 00 02 00 00 00 00 00 00"},
		{math.MaxInt64, "F8 7F FF FF FF FF FF FF FF"}, {math.MinInt64, "F8 80 00 00 00 00 00 00 00"},
	} {
		got := AppendInt(nil, tc.v)
		if want := hx(t, tc.want); !bytes.Equal(got, want) {
			t.Errorf("AppendInt(%d) = % X, want % X", tc.v, got, want)
		}
		d := NewDecoder(Options{})
		d.Reset(got)
		if back := d.ReadInt(); back != tc.v || d.Err() != nil || d.More() {
			t.Errorf("ReadInt(% X) = %d, %v; want %d", got, back, d.Err(), tc.v)
		}
	}
}

// TestIntRoundTrip checks every bit length and sign.
func TestIntRoundTrip(t *testing.T) {
	d := NewDecoder(Options{})
	for b := 0; b < 64; b++ {
		for _, v := range []int64{1<<b - 1, 1 << b, -(1 << b), -(1 << b) - 1, 1<<b + 12345, -(1<<b + 6789)} {
			enc := AppendInt(nil, v)
			d.Reset(enc)
			if got := d.ReadInt(); got != v || d.Err() != nil || d.More() {
				t.Fatalf("%d: % X read as %d (%v)", v, enc, got, d.Err())
			}
		}
	}
}

func TestAppendString(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want string
	}{
		{"", "DA"},
		{"C", `DB "C"`},
		{"()V", `DD "()V"`},
		{"STATUS", `E0 "STATUS"`},
		{"1234567", `E1 "1234567"`},
		{"12345678", `E3 08 "12345678"`},
		{"com.jitlogic.zorka.Symbol_v1", `E3 1C "com.jitlogic.zorka.Symbol_v1"`},
		{"\x00", "DB 00"},
		{"é", "DC C3 A9"},
		{"€", "DD E2 82 AC"},
		{"🚀", "E0 ED A0 BD ED BA 80"},
		{"\xff", "DD EF BF BD"}, // invalid UTF-8 is written as U+FFFD
	} {
		got := AppendString(nil, tc.s)
		if want := hx(t, tc.want); !bytes.Equal(got, want) {
			t.Errorf("AppendString(%q) = % X, want % X", tc.s, got, want)
		}
	}
}

func TestAppendStringChunks(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s      string
		pieces []string // expected piece heads, hex
	}{
		{"exactly 65536", strings.Repeat("a", 65536), []string{"E3 69 00 00"}},
		{"65537", strings.Repeat("a", 65537), []string{"E2 69 00 00", "DB"}},
		{"3-byte units at the boundary", strings.Repeat("a", 65535) + "€€", []string{"E2 68 FF FF", "E0"}},
		{"surrogate pair split", strings.Repeat("a", 65533) + "🚀", []string{"E2 69 00 00", "DD"}},
		{"long tail", strings.Repeat("b", 2*65536+10), []string{"E2 69 00 00", "E2 69 00 00", "E3 0A"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc := AppendString(nil, tc.s)
			// Check the piece heads by walking them.
			rest := enc
			for i, h := range tc.pieces {
				head := hx(t, h)
				if !bytes.HasPrefix(rest, head) {
					t.Fatalf("piece %d starts % X, want % X", i, rest[:min(len(rest), 8)], head)
				}
				rest = rest[len(head):]
				d := NewDecoder(Options{})
				d.Reset(head[1:])
				n := int(head[0]) - codeStringPacked
				if head[0] >= codeStringChunk {
					n = int(d.ReadInt())
				}
				if len(rest) < n {
					t.Fatalf("piece %d: %d bytes left, want %d", i, len(rest), n)
				}
				rest = rest[n:]
			}
			if len(rest) != 0 {
				t.Fatalf("%d bytes after the pieces", len(rest))
			}
			d := NewDecoder(Options{})
			d.Reset(enc)
			got, null := d.ReadString()
			if got != tc.s || null || d.Err() != nil || d.More() {
				t.Fatalf("read back %d bytes (null %v, err %v)", len(got), null, d.Err())
			}
		})
	}
}

func TestAppendBytes(t *testing.T) {
	for _, n := range []int{0, 7, 8, 65535, 65536, 2*65535 + 1} {
		b := bytes.Repeat([]byte{0xAB}, n)
		enc := AppendBytes(nil, b)
		var head []byte
		switch {
		case n < 8:
			head = []byte{byte(0xD0 + n)}
		case n <= 65535:
			head = AppendInt([]byte{0xD9}, int64(n))
		default:
			head = AppendInt([]byte{0xD8}, 65535)
		}
		if !bytes.HasPrefix(enc, head) {
			t.Errorf("%d bytes: head % X, want % X", n, enc[:min(len(enc), 8)], head)
		}
		d := NewDecoder(Options{})
		d.Reset(enc)
		if got := d.ReadBytes(); !bytes.Equal(got, b) || got == nil || d.Err() != nil || d.More() {
			t.Errorf("%d bytes: read back %d (%v)", n, len(got), d.Err())
		}
	}
}

func TestAppendScalars(t *testing.T) {
	for _, tc := range []struct {
		name string
		got  []byte
		want string
	}{
		{"null", AppendNull(nil), "F7"},
		{"true", AppendBool(nil, true), "F5"},
		{"false", AppendBool(nil, false), "F6"},
		{"0.0", AppendDouble(nil, 0), "FB"},
		{"-0.0", AppendDouble(nil, math.Copysign(0, -1)), "FB"},
		{"1.0", AppendDouble(nil, 1), "FC"},
		{"2.5", AppendDouble(nil, 2.5), "FA 40 04 00 00 00 00 00 00"},
		{"NaN", AppendDouble(nil, math.Float64frombits(0x7FF0000000000001)), "FA 7F F8 00 00 00 00 00 00"},
		{"float 1.5", AppendFloat(nil, 1.5), "F9 3F C0 00 00"},
		{"float NaN", AppendFloat(nil, float32(math.NaN())), "F9 7F C0 00 00"},
		{"list 0", AppendListHead(nil, 0), "E4"},
		{"list 7", AppendListHead(nil, 7), "EB"},
		{"list 8", AppendListHead(nil, 8), "EC 08"},
		{"map 1", AppendMapHead(nil, 1), "C0 E6"},
		{"map 4", AppendMapHead(nil, 4), "C0 EC 08"},
		{"set 2", AppendSetHead(nil, 2), "C1 E6"},
	} {
		if want := hx(t, tc.want); !bytes.Equal(tc.got, want) {
			t.Errorf("%s: % X, want % X", tc.name, tc.got, want)
		}
	}
}

func TestEncoderStructCache(t *testing.T) {
	var e Encoder
	var b []byte
	b = e.AppendStruct(b, "T", 2)
	b = e.AppendStruct(b, "U", 1)
	b = e.AppendStruct(b, "T", 2)
	for i := 0; i < 16; i++ {
		b = e.AppendStruct(b, "x"+string(rune('a'+i)), 0)
	}
	b = e.AppendStruct(b, "y", 0) // index 18: EF
	b = e.AppendStruct(b, "y", 0) // index 18: F0 int(18)
	b = e.AppendStruct(b, "uuid", 1)
	b = e.AppendStruct(b, "int[]", 2)
	want := `EF DB "T" 02 EF DB "U" 01 A0`
	for i := 0; i < 16; i++ {
		want += ` EF DC "x` + string(rune('a'+i)) + `" 00`
	}
	want += ` EF DB "y" 00 F0 12 C3 B3`
	if w := hx(t, want); !bytes.Equal(b, w) {
		t.Fatalf("got\n%s\nwant\n%s", hex.Dump(b), hex.Dump(w))
	}
	e.Reset()
	if got := e.AppendStruct(nil, "T", 2); !bytes.Equal(got, hx(t, `EF DB "T" 02`)) {
		t.Fatalf("after Reset: % X", got)
	}
}

func TestValueRoundTrip(t *testing.T) {
	vals := []Value{
		Null(), Bool(true), Bool(false), Int(0), Int(-1), Int(1 << 40), Int(math.MinInt64),
		Double(0), Double(1), Double(-2.75), Float(3.5), String(""), String("zorka ✓ 🚀"),
		Bytes([]byte{}), Bytes([]byte("0123456789")),
		List(), List(Int(1), String("a"), Null()),
		List(Int(0), Int(1), Int(2), Int(3), Int(4), Int(5), Int(6), Int(7), Int(8)),
		Map(Int(5), Int(200), String("k"), List(Bool(true))),
		Set(String("a"), String("b")),
		Struct("com.jitlogic.zorka.Symbol_v1", Int(1), String("C")),
		Struct("com.jitlogic.zorka.Symbol_v1", Int(2), String("m")),
		Struct("uuid", Bytes(make([]byte, 16))),
		Struct("bigdec", Bytes([]byte{1}), Int(2)),
		Array("int[]", Int(1), Int(-2)), Array("long[]", Int(1<<50)), Array("double[]", Double(0.5)),
		Array("float[]", Float(0.25)), Array("boolean[]", Bool(true), Bool(false)),
		Array("Object[]", String("x"), Null()),
	}
	var e Encoder
	var b []byte
	for _, v := range vals {
		b = e.AppendValue(b, v)
	}
	got, err := decodeAll(b, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(vals, got, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("round trip (-want +got):\n%s", diff)
	}
}
