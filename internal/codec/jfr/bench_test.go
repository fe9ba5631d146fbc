package jfr

import (
	"bytes"
	"os"
	"testing"

	"github.com/tracebridge/tracebridge/internal/codec/jsonl"
	"github.com/tracebridge/tracebridge/internal/record"
)

// benchFile is testdata/small.jfr, or the recording named by
// TRACEBRIDGE_JFR_BENCH (bench/jfr -keep leaves a large one).
func benchFile(b *testing.B) []byte {
	path := os.Getenv("TRACEBRIDGE_JFR_BENCH")
	if path == "" {
		path = smallFile
	}
	data, err := os.ReadFile(path)
	if err != nil {
		b.Fatal(err)
	}
	return data
}

func decodeBench(b *testing.B, data []byte, o Options, each func(*record.Batch)) {
	r := bytes.NewReader(data)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		readChunks(NewStream(o), r, int64(len(data)), 1024, func(_ int64, batch *record.Batch) {
			if each != nil {
				each(batch)
			}
		}, func(_ int64, err error) { b.Fatal(err) })
	}
}

func BenchmarkDecode(b *testing.B) {
	decodeBench(b, benchFile(b), Options{}, nil)
}

func BenchmarkDecodeJSON(b *testing.B) {
	var out []byte
	decodeBench(b, benchFile(b), Options{}, func(batch *record.Batch) {
		for i := range batch.Records {
			out = jsonl.AppendRecord(out[:0], &batch.Records[i])
		}
	})
}

func BenchmarkDecodeFiltered(b *testing.B) {
	f, _ := NewFilter("jdk.ExecutionSample")
	decodeBench(b, benchFile(b), Options{Filter: f}, nil)
}
