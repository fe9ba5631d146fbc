package logdir

import (
	"bytes"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/ulikunitz/xz"

	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// sampleASCII returns n Kieker-like ASCII lines.
func sampleASCII(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, "$%d;-1;1700000000%09d;public void shop.Catalog.getBook(boolean);shop.Catalog;%d;\n", i%7, i, i*31%1000)
	}
	return b.Bytes()
}

// sampleBinary returns n binary frames (type id, logging timestamp, fields).
func sampleBinary(n int) []byte {
	var b []byte
	for i := range n {
		b = append(b, 0, 0, 0, byte(i%5))
		b = append(b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)
		b = append(b, 0, 0, 0x01, 0x8b, byte(i>>8), byte(i), 0, 0, 0, 0, 0, 3, 0, 0, 0, 4)
	}
	return b
}

// compress returns data compressed the way Files writes it.
func compress(t testing.TB, c Compression, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := newCompressor(c, &b, "entry.dat", time.Unix(0, 0), nil)
	if err != nil {
		t.Fatal(err)
	}
	if w == nil {
		return bytes.Clone(data)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

var writable = []Compression{None, Deflate, Gzip, Zip, XZ}

func TestRoundTripCompressions(t *testing.T) {
	for _, c := range writable {
		for _, text := range []bool{true, false} {
			data := sampleBinary(500)
			if text {
				data = sampleASCII(500)
			}
			t.Run(fmt.Sprintf("%v/text=%v", c, text), func(t *testing.T) {
				got, f, err := decodeBytes(t, "x", compress(t, c, data))
				if err != nil {
					t.Fatal(err)
				}
				if f != (Format{c, text}) {
					t.Errorf("format %v, want %v", f, Format{c, text})
				}
				if !bytes.Equal(got, data) {
					t.Errorf("got %d bytes, want %d", len(got), len(data))
				}
			})
		}
	}
}

// readChunked decodes data fed through r's chunking and read back in
// reads of the given size.
func readChunked(name string, r io.Reader, readSize int, lim Limits) ([]byte, error) {
	return readChunkedMax(name, r, readSize, lim, 64<<20)
}

// readChunkedMax stops with an error after maxOut bytes of output.
func readChunkedMax(name string, r io.Reader, readSize int, lim Limits, maxOut int) ([]byte, error) {
	s := NewStream(r, name, lim)
	var out []byte
	buf := make([]byte, readSize)
	for {
		n, err := s.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if len(out) > maxOut {
			return out, errors.New("output over the test's limit")
		}
	}
}

// splitReader returns its data in chunks of pseudo-random sizes.
type splitReader struct {
	data  []byte
	state uint64
}

func newSplitReader(data []byte) *splitReader {
	h := fnv.New64a()
	h.Write(data)
	return &splitReader{data: data, state: h.Sum64() | 1}
}

func (r *splitReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	r.state ^= r.state << 13
	r.state ^= r.state >> 7
	r.state ^= r.state << 17
	n := min(len(p), len(r.data), int(r.state%97)+1)
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// checkChunking decodes data whole, byte by byte and in random chunks and
// fails unless all give the same bytes and the same error.
func checkChunking(t testing.TB, name string, data []byte, lim Limits) ([]byte, error) {
	return checkChunkingMax(t, name, data, lim, 64<<20)
}

func checkChunkingMax(t testing.TB, name string, data []byte, lim Limits, maxOut int) ([]byte, error) {
	t.Helper()
	want, wantErr := readChunkedMax(name, bytes.NewReader(data), 1<<16, lim, maxOut)
	for i, r := range []io.Reader{iotest.OneByteReader(bytes.NewReader(data)), newSplitReader(data)} {
		got, err := readChunkedMax(name, r, 7+i*50, lim, maxOut)
		if !bytes.Equal(got, want) || fmt.Sprint(err) != fmt.Sprint(wantErr) {
			t.Fatalf("chunking %d: %d bytes, error %v; whole: %d bytes, error %v", i, len(got), err, len(want), wantErr)
		}
	}
	return want, wantErr
}

// TestTruncatedEverywhere cuts compressed files at every byte: decoding
// never panics, yields a prefix of the data, and reports ErrTruncated when
// data is missing.
func TestTruncatedEverywhere(t *testing.T) {
	data := sampleASCII(40)
	for _, c := range writable[1:] {
		t.Run(c.String(), func(t *testing.T) {
			full := compress(t, c, data)
			if c == XZ {
				// A small dictionary: every try allocates it.
				var b bytes.Buffer
				w, _ := newXZWriter(&b, 64<<10, nil)
				w.Write(data)
				w.Close()
				full = b.Bytes()
			}
			for cut := 1; cut < len(full); cut++ { // an empty file is an empty plain file
				got, err := checkChunking(t, "cut", full[:cut], Limits{})
				if !bytes.HasPrefix(data, got) {
					t.Fatalf("cut at %d: output is not a prefix of the data", cut)
				}
				if len(got) < len(data) && !errors.Is(err, ErrTruncated) {
					t.Fatalf("cut at %d: %d of %d bytes, error %v, want ErrTruncated", cut, len(got), len(data), err)
				}
			}
		})
	}
}

// TestTruncatedCorpus cuts Kieker's own compressed files.
func TestTruncatedCorpus(t *testing.T) {
	for _, sample := range []string{"bzip2-ascii", "deflate-binary", "gzip-ascii", "zip-binary", "xz-binary"} {
		t.Run(sample, func(t *testing.T) {
			logs, err := Discover(testcorpus.Path(t, "kieker-logs", "kieker-2.0-compressed", sample))
			if err != nil {
				t.Fatal(err)
			}
			d := logs[0].DataFiles()[0]
			full, err := os.ReadFile(d.Path)
			if err != nil {
				t.Fatal(err)
			}
			data, _ := readAll(t, d)
			// Every cut inside the first 64 bytes (the headers), then every
			// step-th: each xz try allocates Kieker's 64 MiB dictionary,
			// each bzip2 try a 3.6 MB block.
			step := 1
			switch {
			case strings.HasPrefix(sample, "xz"):
				step = 37
			case strings.HasPrefix(sample, "bzip2"):
				step = 7
			}
			for cut := 1; cut < len(full); cut += max(1, step*min(1, cut/64)) {
				got, err := readChunked("cut", bytes.NewReader(full[:cut]), 4096, Limits{})
				if !bytes.HasPrefix(data, got) {
					t.Fatalf("cut at %d: output is not a prefix of the data", cut)
				}
				if len(got) < len(data) && !errors.Is(err, ErrTruncated) {
					t.Fatalf("cut at %d: %d of %d bytes, error %v, want ErrTruncated", cut, len(got), len(data), err)
				}
			}
		})
	}
}

func TestCorruptData(t *testing.T) {
	data := sampleASCII(200)
	for _, c := range writable[1:] {
		t.Run(c.String(), func(t *testing.T) {
			full := compress(t, c, data)
			bad := bytes.Clone(full)
			bad[len(bad)/2] ^= 0x55
			got, err := checkChunking(t, "bad.file", bad, Limits{})
			var e *Error
			if !errors.Is(err, ErrCorrupt) || !errors.As(err, &e) || e.Path != "bad.file" {
				t.Fatalf("error %v (after %d bytes), want ErrCorrupt naming the file", err, len(got))
			}
			if !strings.Contains(err.Error(), fmt.Sprintf("bad.file: offset %d: corrupt data: ", e.Offset)) {
				t.Errorf("message %q", err)
			}
		})
	}
}

func TestTrailingData(t *testing.T) {
	full := append(compress(t, Deflate, sampleASCII(3)), "junk"...)
	if _, _, err := decodeBytes(t, "x.df", full); !errors.Is(err, ErrCorrupt) {
		t.Errorf("zlib with trailing data: %v, want ErrCorrupt", err)
	}
}

func TestGzipMembers(t *testing.T) {
	a, b := sampleASCII(10), sampleASCII(20)
	got, _, err := decodeBytes(t, "x.gz", append(compress(t, Gzip, a), compress(t, Gzip, b)...))
	if err != nil || !bytes.Equal(got, append(a, b...)) {
		t.Errorf("two members: %d bytes, %v", len(got), err)
	}
}

func TestXZInterop(t *testing.T) {
	data := sampleASCII(3000)
	// ulikunitz/xz reads ours.
	r, err := xz.NewReader(bytes.NewReader(compress(t, XZ, data)))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := io.ReadAll(r); err != nil || !bytes.Equal(got, data) {
		t.Errorf("xz.Reader on our stream: %d bytes, %v", len(got), err)
	}
	// We read ulikunitz/xz's, concatenated with stream padding, and with
	// other checks and block sizes.
	var all, want []byte
	for i, cfg := range []xz.WriterConfig{
		{},
		{CheckSum: xz.CRC32, BlockSize: 4096},
		{CheckSum: xz.SHA256},
		{NoCheckSum: true},
	} {
		var b bytes.Buffer
		w, err := cfg.NewWriter(&b)
		if err != nil {
			t.Fatal(err)
		}
		part := sampleASCII(100 * (i + 1))
		w.Write(part)
		w.Close()
		all = append(all, b.Bytes()...)
		all = append(all, 0, 0, 0, 0)
		want = append(want, part...)
	}
	got, err := checkChunking(t, "x.xz", all, Limits{})
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("concatenated xz.Writer streams: %d of %d bytes, %v", len(got), len(want), err)
	}
	// An empty stream of ours.
	if got, _, err := decodeBytes(t, "e.xz", compress(t, XZ, nil)); err != nil || len(got) != 0 {
		t.Errorf("empty xz: %d bytes, %v", len(got), err)
	}
	// Padding of a length that is not a multiple of 4.
	if _, _, err := decodeBytes(t, "p.xz", append(compress(t, XZ, data), 0, 0)); !errors.Is(err, ErrCorrupt) {
		t.Errorf("bad padding: %v, want ErrCorrupt", err)
	}
}

func TestXZDictLimit(t *testing.T) {
	full := compress(t, XZ, sampleASCII(10)) // 8 MiB dictionary
	_, _, err := func() ([]byte, Format, error) {
		s := NewStream(bytes.NewReader(full), "big.xz", Limits{XZDict: 1 << 20})
		b, err := io.ReadAll(s)
		return b, s.Format, err
	}()
	if !errors.Is(err, ErrLimit) {
		t.Errorf("error %v, want ErrLimit", err)
	}
}

func TestTextSniff(t *testing.T) {
	tests := []struct {
		name, file string
		data       string
		want       bool
	}{
		{"dollar", "x", "$0;1;a\n", true},
		{"blank lines first", "x", "\r\n\n  \n$0;1;a\n", true},
		{"legacy line", "x", "12;13;a;b\n", true},
		{"binary", "x.dat", "\x00\x00\x00\x01\xff\xff", false},
		{"empty .dat", "kieker-1.dat", "", true},
		{"empty .bin", "kieker-1.bin", "", false},
		{"empty compressed .bin", "kieker-1.bin.gz", "", false},
		{"empty unknown", "x", "", true},
		{"blank .bin", "x.bin", "\n\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []Compression{None, Gzip} {
				_, f, err := decodeBytes(t, tt.file, compress(t, c, []byte(tt.data)))
				if err != nil || f.Text != tt.want {
					t.Errorf("%v: Text %v, %v; want %v", c, f.Text, err, tt.want)
				}
			}
		})
	}
}

// TestIOError: a read error of the file is passed on, not called corrupt.
func TestIOError(t *testing.T) {
	boom := errors.New("disk on fire")
	full := compress(t, Gzip, sampleASCII(2000))
	r := io.MultiReader(bytes.NewReader(full[:len(full)/2]), iotest.ErrReader(boom))
	_, err := io.ReadAll(NewStream(r, "x.gz", Limits{}))
	var e *Error
	if !errors.Is(err, boom) || errors.Is(err, ErrCorrupt) || !errors.As(err, &e) {
		t.Errorf("error %v, want the I/O error", err)
	}
}

func TestStreamClose(t *testing.T) {
	path := t.TempDir() + "/x.dat"
	writeFile(t, path, "$0;1\n")
	s, err := OpenFile(path, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if _, err := s.Read(make([]byte, 1)); !errors.Is(err, ErrClosed) {
		t.Errorf("Read after Close: %v", err)
	}
}
