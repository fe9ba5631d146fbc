package logdir

import (
	"bytes"
	"io"
	"testing"
	"time"
)

func BenchmarkRead(b *testing.B) {
	data := sampleASCII(50000)
	for _, c := range writable {
		comp := compress(b, c, data)
		b.Run(c.String(), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				s := NewStream(bytes.NewReader(comp), "bench", Limits{})
				n, err := io.Copy(io.Discard, s)
				if err != nil || n != int64(len(data)) {
					b.Fatalf("%d bytes, %v", n, err)
				}
			}
		})
	}
}

func BenchmarkFilesWrite(b *testing.B) {
	data := sampleASCII(50000)
	const chunk = 64 << 10
	for _, c := range writable {
		b.Run(c.String(), func(b *testing.B) {
			b.SetBytes(int64(len(data)))
			b.ReportAllocs()
			for b.Loop() {
				f, err := NewFiles(Options{Dir: b.TempDir(), Compression: c, MaxEntriesInFile: -1})
				if err != nil {
					b.Fatal(err)
				}
				for p := data; len(p) > 0; {
					n := min(chunk, len(p))
					if err := f.Write(p[:n], 1); err != nil {
						b.Fatal(err)
					}
					p = p[n:]
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkFlush measures a Flush after a batch of 1000 records, with a
// clock that lets every xz Flush end its stream (the most it costs: the
// bridge flushes once a second, xz ends at most two streams a second).
func BenchmarkFlush(b *testing.B) {
	batch := sampleASCII(1000)
	for _, c := range writable {
		b.Run(c.String(), func(b *testing.B) {
			f, err := NewFiles(Options{Dir: b.TempDir(), Compression: c, MaxEntriesInFile: -1, Now: stepClock(time.Second)})
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if err := f.Write(batch, 1000); err != nil {
					b.Fatal(err)
				}
				if err := f.Flush(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
