package store

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/objstore/objstoretest"
	"github.com/tracebridge/tracebridge/internal/store/block"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// BenchmarkListShared measures the listing of a shared bucket of 10,000
// blocks (20,000 objects) on a real S3 server (versitygw): "open" is a
// store's first listing (a List and a Get of every meta), "relist" the
// periodic full one of a store that has read the metas (the List alone),
// "announced" the one of every Refresh: the announcements of the last
// 200 blocks.
// The blocks are copies of one small block written into the server's
// directory (its posix backend) under new ids.
func BenchmarkListShared(b *testing.B) {
	const blocks, announced = 10_000, 200
	srv := objstoretest.Start(b)
	cfg := srv.Bucket(b, "traces", "prod/")
	// One block, made by a store in a directory of its own.
	src, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := src.Append([]*trace.Trace{mkTrace(1, "h", 3, 100, 10, false)}); err != nil {
		b.Fatal(err)
	}
	if err := src.Flush(context.Background()); err != nil {
		b.Fatal(err)
	}
	var data []byte
	var meta *block.Meta
	for _, p := range src.partitions() {
		for _, r := range p.blocks {
			meta = r.meta
			if data, err = src.bucket.Get(context.Background(), r.key); err != nil {
				b.Fatal(err)
			}
		}
	}
	src.Close()
	root := filepath.Join(srv.Dir, "traces", "prod")
	now := time.Now()
	for i := range blocks {
		m := *meta
		m.ID = block.NewID(now.Add(time.Duration(i) * time.Millisecond))
		m.Host = []string{"alpha", "beta", "gamma", "delta"}[i%4]
		mb, err := block.MarshalMeta(&m)
		if err != nil {
			b.Fatal(err)
		}
		dir := filepath.Join(root, filepath.FromSlash(block.Dir(m.Host, m.ID)))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, block.DataName), data, 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, block.MetaName), mb, 0o644); err != nil {
			b.Fatal(err)
		}
		if i >= blocks-announced {
			if err := os.MkdirAll(filepath.Join(root, announcePrefix), 0o755); err != nil {
				b.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(root, announcePrefix, m.ID), mb, 0o644); err != nil {
				b.Fatal(err)
			}
		}
	}
	bucket, err := objstore.NewS3(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer bucket.Close()
	open := func(b *testing.B) *Store {
		s, err := Open(b.TempDir(), Options{Bucket: bucket, Node: "bench", Refresh: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	b.Run("open", func(b *testing.B) {
		cpu0 := cpuTime()
		for b.Loop() {
			s := open(b)
			if n := s.listedBlocks(); n != blocks {
				b.Fatalf("%d blocks listed, want %d", n, blocks)
			}
			s.Close()
		}
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "client-CPU-ms/op")
		b.ReportMetric(blocks, "blocks")
	})
	b.Run("relist", func(b *testing.B) {
		s := open(b)
		defer s.Close()
		b.ReportAllocs()
		cpu0 := cpuTime()
		for b.Loop() {
			if err := s.relistNow(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "client-CPU-ms/op")
		if n := s.listedBlocks(); n != blocks {
			b.Fatalf("%d blocks listed, want %d", n, blocks)
		}
		b.ReportMetric(blocks, "blocks")
	})
	b.Run("announced", func(b *testing.B) {
		s := open(b)
		defer s.Close()
		b.ReportAllocs()
		cpu0 := cpuTime()
		for b.Loop() {
			if err := s.relistAnnounced(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e6, "client-CPU-ms/op")
		b.ReportMetric(announced, "announcements")
	})
}
