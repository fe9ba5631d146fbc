package jfrhttp

import (
	"bytes"
	"compress/flate"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
	"testing/iotest"

	codec "github.com/tracebridge/tracebridge/internal/codec/jfr"
	"github.com/tracebridge/tracebridge/internal/record"
)

// readUpload reads a body as the receiver does (no multipart) and
// returns the counts, the error and the records' type names in order.
func readUpload(body io.Reader) (result, []string, error) {
	return readUploadSeen(body, nil)
}

// readUploadSeen is readUpload skipping the chunks seen has of host "h".
func readUploadSeen(body io.Reader, seen *seenChunks) (result, []string, error) {
	var names []string
	lim := &limited{r: body, n: 8 << 20}
	rec, err := openRecording(lim, "", "")
	if err != nil {
		return result{}, nil, err
	}
	d := decoder{
		stream:    codec.NewStream(codec.Options{}),
		batchSize: 7,
		emit: func(b *record.Batch) (*record.Batch, error) {
			for i := range b.Records {
				names = append(names, b.Records[i].Type.Name)
			}
			b.Reset()
			return b, nil
		},
		seen: seen,
		host: "h",
	}
	res, err := d.decode(&chunkReader{r: &limited{r: rec, n: 8 << 20}, max: 1 << 20}, &record.Batch{})
	return res, names, err
}

// FuzzUpload: no body makes the receiver's reading panic, every failure is
// an *Error or a read error, and a body read a byte at a time gives what
// it gives read whole; a body read whole twice for the same host hands
// on nothing the second time (every chunk is a duplicate).
func FuzzUpload(f *testing.F) {
	data, err := os.ReadFile(filepath.Join("..", "..", "codec", "jfr", "testdata", "small.jfr"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data[:4096])
	f.Add(data[:codec.HeaderSize])
	f.Add([]byte("FLR\x00"))
	f.Add(gzipped(f, data[:2048]))
	f.Add([]byte{0x1f, 0x8b, 8, 0})
	f.Fuzz(func(t *testing.T, body []byte) {
		res, names, err := readUpload(bytes.NewReader(body))
		var e *Error
		if err != nil && !errors.As(err, &e) && !errors.Is(err, errTooLarge) && !isGzipErr(err) {
			t.Fatalf("error of an unexpected kind: %T %v", err, err)
		}
		res1, names1, err1 := readUpload(iotest.OneByteReader(bytes.NewReader(body)))
		if res != res1 || (err == nil) != (err1 == nil) || len(names) != len(names1) {
			t.Fatalf("whole: %+v %v %d records; a byte at a time: %+v %v %d records", res, err, len(names), res1, err1, len(names1))
		}
		if err != nil && err.Error() != err1.Error() {
			t.Fatalf("whole: %v; a byte at a time: %v", err, err1)
		}
		if err != nil {
			return
		}
		seen := &seenChunks{}
		first, _, err := readUploadSeen(bytes.NewReader(body), seen)
		if err != nil {
			t.Fatalf("read again with duplicates skipped: %v", err)
		}
		again, names2, err := readUploadSeen(bytes.NewReader(body), seen)
		if err != nil || again.Chunks != first.Chunks || again.Duplicates != again.Chunks || len(names2) != 0 {
			t.Fatalf("the same body twice: %+v, then %+v %v %d records", first, again, err, len(names2))
		}
	})
}

// isGzipErr reports a failure of gzip's reader inside the body.
func isGzipErr(err error) bool {
	var corrupt flate.CorruptInputError
	return errors.Is(err, gzip.ErrChecksum) || errors.Is(err, gzip.ErrHeader) || errors.As(err, &corrupt)
}
