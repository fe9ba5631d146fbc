package jsonstr

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// reference is s as encoding/json writes it without HTML escaping.
func reference(t testing.TB, s string) string {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return string(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
}

func TestAppendString(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{`quote" back\slash`, `"quote\" back\\slash"`},
		{"\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"nul\x00 us\x1f del\x7f", `"nul\u0000 us\u001f del` + "\x7f" + `"`},
		{"<html>&amp;", `"<html>&amp;"`},
		{"line\u2028para\u2029", `"line\u2028para\u2029"`},
		{"bad\xff\xfe utf8", `"bad\ufffd\ufffd utf8"`},
		{"truncated \xe2\x82", `"truncated \ufffd\ufffd"`},
		{"literal \ufffd", "\"literal \ufffd\""},
		{"ünïcödé ✓ 日本 😀", `"ünïcödé ✓ 日本 😀"`},
	} {
		t.Run(tc.in, func(t *testing.T) {
			if got := string(AppendString(nil, tc.in)); got != tc.want {
				t.Errorf("AppendString(%q) = %s, want %s", tc.in, got, tc.want)
			}
			if got := string(AppendBytes([]byte("x"), []byte(tc.in))); got != "x"+tc.want {
				t.Errorf("AppendBytes(%q) = %s, want x%s", tc.in, got, tc.want)
			}
			if ref := reference(t, tc.in); ref != tc.want {
				t.Errorf("encoding/json writes %s, the table says %s", ref, tc.want)
			}
		})
	}
}

func TestAppendStringAllocs(t *testing.T) {
	s := "a \"quoted\"\n<string> with \u2028 and \xff"
	dst := make([]byte, 0, 128)
	if n := testing.AllocsPerRun(100, func() { dst = AppendString(dst[:0], s) }); n != 0 {
		t.Errorf("AppendString allocates %v times, want 0", n)
	}
	b := []byte(s)
	if n := testing.AllocsPerRun(100, func() { dst = AppendBytes(dst[:0], b) }); n != 0 {
		t.Errorf("AppendBytes allocates %v times, want 0", n)
	}
}

// FuzzAppendString checks the output against encoding/json's: the same
// bytes, valid JSON, and for valid UTF-8 a round trip to the same string.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", "\"\\/", "\b\f\n\r\t\x00\x1f\x7f", "<>&", "\u2028\u2029", "\xff\xe2\x82", "\ufffd", "日本 😀"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := AppendString(nil, s)
		if want := reference(t, s); string(got) != want {
			t.Fatalf("AppendString(%q) = %s, encoding/json writes %s", s, got, want)
		}
		if !json.Valid(got) {
			t.Fatalf("AppendString(%q) = %s: not valid JSON", s, got)
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("AppendString(%q) = %s: %v", s, got, err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("AppendString(%q) reads back as %q", s, back)
		}
	})
}

func BenchmarkAppendString(b *testing.B) {
	s := "GET /api/orders/{id} \"quoted\" ünïcödé ✓ 日本\n"
	dst := make([]byte, 0, 128)
	b.SetBytes(int64(len(s)))
	b.ReportAllocs()
	for b.Loop() {
		dst = AppendString(dst[:0], s)
	}
}
