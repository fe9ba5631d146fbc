package objstore

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
)

// TestPartsReader: parts (empty ones among them) read as their
// concatenation, by Read, ReadAt at every offset and Seek, as
// bytes.Reader reads it.
func TestPartsReader(t *testing.T) {
	parts := [][]byte{[]byte("head"), nil, []byte("0123456789"), {}, []byte("x"), []byte("tail and footer")}
	want := bytes.Join(parts, nil)
	if err := iotest.TestReader(newPartsReader(parts), want); err != nil {
		t.Fatal(err)
	}
	r := newPartsReader(parts)
	if r.size != int64(len(want)) {
		t.Fatalf("size %d, want %d", r.size, len(want))
	}
	for off := range len(want) + 2 {
		for n := range len(want) + 2 {
			b := make([]byte, n)
			got, err := r.ReadAt(b, int64(off))
			wb := make([]byte, n)
			wgot, werr := bytes.NewReader(want).ReadAt(wb, int64(off))
			if got != wgot || (err == nil) != (werr == nil) || !bytes.Equal(b[:got], wb[:wgot]) {
				t.Fatalf("ReadAt(%d bytes, %d) = %d, %v; bytes.Reader: %d, %v", n, off, got, err, wgot, werr)
			}
		}
	}
	if _, err := r.Seek(5, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(rest, want[5:]) {
		t.Fatalf("after Seek(5): %q, %v", rest, err)
	}
	if pos, err := r.Seek(-3, io.SeekEnd); err != nil || pos != int64(len(want)-3) {
		t.Fatalf("Seek(-3, end) = %d, %v", pos, err)
	}
	if _, err := r.Seek(-1, io.SeekStart); err == nil {
		t.Fatal("Seek to -1: no error")
	}
}
