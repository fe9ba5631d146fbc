package irl

import (
	"os"
	"testing"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

func BenchmarkParse(b *testing.B) {
	var srcs [][]byte
	var size int64
	for _, name := range corpusFiles(b) {
		src, err := os.ReadFile(name)
		if err != nil {
			b.Fatal(err)
		}
		srcs = append(srcs, src)
		size += int64(len(src))
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		for _, src := range srcs {
			if _, err := Parse("bench.irl", src); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkLoadInto(b *testing.B) {
	dir := testcorpus.Path(b, "kieker-irl")
	var size int64
	for _, name := range corpusFiles(b) {
		fi, err := os.Stat(name)
		if err != nil {
			b.Fatal(err)
		}
		size += fi.Size()
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadInto(record.Builtin(), dir); err != nil {
			b.Fatal(err)
		}
	}
}
