package logdir

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

// fuzzLimits keep each try small: 4 KiB buffers (so that entries and
// descriptors straddle buffer refills) and an 8 MiB xz dictionary (ours;
// Kieker's 64 MiB files stop at the limit).
var fuzzLimits = Limits{XZDict: 8 << 20, BufferSize: 4 << 10}

// fuzzMaxOut bounds the decompressed output of one try (bombs).
const fuzzMaxOut = 1 << 20

// smallXZ compresses with a 64 KiB dictionary, cheap to allocate per try.
func smallXZ(data []byte) []byte {
	var b bytes.Buffer
	w, _ := newXZWriter(&b, 64<<10, nil)
	w.Write(data)
	w.Close()
	return b.Bytes()
}

// FuzzOpen feeds arbitrary bytes as a data file: no panic, bounded memory,
// the same bytes and error whether the input arrives whole, byte by byte
// or in random chunks, and every compression round-trips the input.
func FuzzOpen(f *testing.F) {
	for _, s := range [][]byte{
		nil,
		[]byte("$0;1;x\n"),
		{0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		{0x1f}, {0x1f, 0x8b}, {0x78}, {0x78, 0x9c},
		{0xfd, '7', 'z', 'X', 'Z', 0},
		[]byte("BZh9"), []byte("PK\x03\x04"), []byte("PK\x05\x06"),
	} {
		f.Add(s)
	}
	ascii, bin := sampleASCII(30), sampleBinary(30)
	for _, c := range writable[1:] {
		for _, data := range [][]byte{ascii, bin} {
			full := smallXZ(data)
			if c != XZ {
				full = compress(f, c, data)
			}
			f.Add(full)
			f.Add(full[:len(full)/2])
		}
	}
	// A flushed, unfinished file of each compression.
	dir := f.TempDir()
	for _, c := range writable[1:] {
		w, err := NewFiles(Options{Dir: filepath.Join(dir, c.String()), Compression: c, Now: func() time.Time { return time.Unix(0, 0) }})
		if err != nil {
			f.Fatal(err)
		}
		w.Write(ascii, 30)
		w.Flush()
		f.Add(mustReadTB(f, w.Current()))
		w.Close()
	}
	for _, entries := range [][]rawEntry{
		{{name: "a.dat", data: "$0;1\n", descriptor: true}, {name: "kieker.map", data: "$0=x\n", deflate: true}},
		{{name: "a.dat", data: "$0;1\n", deflate: true, descriptor: true, noSig: true}},
		{{name: "a.dat", data: "$0;1\n", zip64: true, descriptor: true}},
	} {
		f.Add(buildZip(f, entries, true))
		f.Add(buildZip(f, entries, false))
	}
	// Kieker's own compressed files.
	files, _ := filepath.Glob(testcorpus.Path(f, "kieker-logs", "kieker-2.0-compressed", "*", "*", "kieker-*"))
	for _, p := range files {
		f.Add(mustReadTB(f, p))
	}

	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := checkChunkingMax(t, "fuzz", data, fuzzLimits, fuzzMaxOut)
		var e *Error
		if err != nil && err.Error() != "output over the test's limit" && !errors.As(err, &e) {
			t.Fatalf("error %v is no *Error", err)
		}
		// Round trip: the input as the content of a data file.
		if len(data) == 0 {
			return
		}
		c := writable[int(data[0])%len(writable)]
		var enc []byte
		if c == XZ {
			enc = smallXZ(data) // the default 8 MiB dictionary costs ~100 MB of encoder tables
		} else {
			enc = compress(t, c, data)
		}
		if c == None && Sniff(data) != None {
			return // plain data that looks compressed is read as compressed
		}
		s := NewStream(bytes.NewReader(enc), "roundtrip", fuzzLimits)
		got, err := io.ReadAll(s)
		if err != nil || !bytes.Equal(got, data) || s.Format.Compression != c {
			t.Fatalf("%v round trip: %d of %d bytes, format %v, error %v", c, len(got), len(data), s.Format, err)
		}
	})
}

func mustReadTB(tb testing.TB, path string) []byte {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
