package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// s3Server is a versitygw serving a directory on a loopback port.
type s3Server struct {
	cmd *exec.Cmd
	dir string
}

func (s *s3Server) stop() {
	s.cmd.Process.Kill()
	s.cmd.Wait()
}

// startS3 runs versitygw (the S3 server of internal/objstore's tests) on
// DIR/s3 and creates the bucket the store uses.
func startS3(dir string) (*s3Server, objstore.S3Config, error) {
	const access, secret, bucket = "bench-access", "bench-secret-key", "traces"
	bin := versitygw
	if bin == "" {
		if p, err := exec.LookPath("versitygw"); err == nil {
			bin = p
		} else if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
			bin = filepath.Join(strings.TrimSpace(strings.Split(string(out), string(filepath.ListSeparator))[0]), "bin", "versitygw")
		}
	}
	if _, err := os.Stat(bin); err != nil {
		return nil, objstore.S3Config{}, fmt.Errorf("versitygw not found (go install github.com/versity/versitygw/cmd/versitygw@v1.8.0): %w", err)
	}
	sdir := filepath.Join(dir, "s3")
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		return nil, objstore.S3Config{}, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, objstore.S3Config{}, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, "--access", access, "--secret", secret, "--port", addr, "--quiet", "posix", sdir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, objstore.S3Config{}, err
	}
	srv := &s3Server{cmd: cmd, dir: sdir}
	c, err := minio.New(addr, &minio.Options{Creds: credentials.NewStaticV4(access, secret, ""), Region: objstore.DefaultRegion, BucketLookup: minio.BucketLookupPath})
	if err != nil {
		srv.stop()
		return nil, objstore.S3Config{}, err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = c.MakeBucket(ctx, bucket, minio.MakeBucketOptions{Region: objstore.DefaultRegion})
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			srv.stop()
			return nil, objstore.S3Config{}, fmt.Errorf("versitygw on %s: make bucket: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ak, sk := filepath.Join(dir, "s3-access"), filepath.Join(dir, "s3-secret")
	if err := errors.Join(os.WriteFile(ak, []byte(access), 0o600), os.WriteFile(sk, []byte(secret), 0o600)); err != nil {
		srv.stop()
		return nil, objstore.S3Config{}, err
	}
	return srv, objstore.S3Config{Endpoint: "http://" + addr, Bucket: bucket, Prefix: "bench/", AccessKeyFile: ak, SecretKeyFile: sk}, nil
}

// rss returns the process's resident set size (bytes; 0 where /proc is
// missing).
func rss() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }

func heapInUse() int64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapInuse)
}

// rssSampler keeps the largest RSS seen until stopped.
type rssSampler struct {
	max  atomic.Int64
	done chan struct{}
	wg   sync.WaitGroup
}

func startRSSSampler() *rssSampler {
	r := &rssSampler{done: make(chan struct{})}
	r.max.Store(rss())
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-r.done:
				return
			case <-t.C:
				if v := rss(); v > r.max.Load() {
					r.max.Store(v)
				}
			}
		}
	}()
	return r
}

func (r *rssSampler) stop() int64 {
	close(r.done)
	r.wg.Wait()
	return r.max.Load()
}

// batch generates traces of about n spans, starting now or up to two
// hours before.
func (g *gen) batch(n int) ([]*trace.Trace, int) {
	g.now = time.Now().UnixNano()
	var ts []*trace.Trace
	spans := 0
	for spans < n {
		t := g.trace()
		ts = append(ts, t)
		spans += len(t.Spans)
	}
	return ts, spans
}

func percentiles(lat []time.Duration) (p50, p99, mx time.Duration) {
	slices.Sort(lat)
	return lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond)
}

// loadPhase runs what a user's screen asks (the service catalogue, a
// service search, a tag search) while a steady ingest (loadRate spans/s
// in batches every 50 ms, each synced as the OTLP receiver does) runs.
func loadPhase(s *store.Store, g *gen) error {
	ctx, cancel := context.WithTimeout(context.Background(), loadFor)
	defer cancel()
	var ingested atomic.Int64
	errc := make(chan error, 1)
	go func() {
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				errc <- nil
				return
			case <-t.C:
			}
			ts, n := g.batch(loadRate / 20)
			if _, err := s.Append(ts); err != nil {
				errc <- err
				return
			}
			if err := s.Sync(); err != nil {
				errc <- err
				return
			}
			ingested.Add(int64(n))
		}
	}()
	rng := rand.New(rand.NewPCG(9, 10))
	kinds := []struct {
		name string
		q    func() error
	}{
		{"catalogue (services, operations)", func() error {
			svcs := s.Services()
			if len(svcs) == 0 {
				return errors.New("no services")
			}
			s.Operations(svcs[rng.IntN(len(svcs))])
			return nil
		}},
		{"service search", func() error {
			_, err := s.Search(store.Query{Service: "shop-" + strconv.Itoa(rng.IntN(7))})
			return err
		}},
		{"tag search (http.status_code=500)", func() error {
			_, err := s.Search(store.Query{Attrs: []trace.Attr{{Key: "http.status_code", Value: "500"}}})
			return err
		}},
	}
	lat := make([][]time.Duration, len(kinds))
	began := time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for i := 0; ctx.Err() == nil; i++ {
		k := i % len(kinds)
		t0 := time.Now()
		if err := kinds[k].q(); err != nil {
			return fmt.Errorf("%s under load: %w", kinds[k].name, err)
		}
		lat[k] = append(lat[k], time.Since(t0))
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
	if err := <-errc; err != nil {
		return err
	}
	el := time.Since(began)
	fmt.Printf("queries while ingesting %d spans/s (asked; %.0f reached) for %s:\n", loadRate, float64(ingested.Load())/el.Seconds(), loadFor)
	fmt.Printf("%-34s %10s %10s %10s %8s\n", "query", "p50", "p99", "max", "runs")
	for k := range kinds {
		p50, p99, mx := percentiles(lat[k])
		fmt.Printf("%-34s %10s %10s %10s %8d\n", kinds[k].name, p50, p99, mx, len(lat[k]))
	}
	return nil
}

// retentionPhase ingests as fast as it can for loadFor while retention
// (a size bound below the store's size) and compaction run in a loop, and
// reports the rate of the store's own time (Append and Sync; generating
// the traces is not counted).
func retentionPhase(s *store.Store, g *gen) error {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var dropped, merged, rounds atomic.Int64
	var bgErr atomic.Pointer[error]
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			d, err := s.Retain()
			if err == nil {
				var m int
				m, err = s.Compact()
				merged.Add(int64(m))
			}
			if err != nil {
				bgErr.Store(&err)
				return
			}
			dropped.Add(int64(d))
			rounds.Add(1)
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
		}
	}()
	var spent time.Duration
	spans := 0
	began := time.Now()
	for i := 0; time.Since(began) < loadFor; i++ {
		ts, n := g.batch(10_000)
		t0 := time.Now()
		if _, err := s.Append(ts); err != nil {
			close(stop)
			wg.Wait()
			return err
		}
		if i%10 == 9 {
			if err := s.Sync(); err != nil {
				close(stop)
				wg.Wait()
				return err
			}
		}
		spent += time.Since(t0)
		spans += n
	}
	close(stop)
	wg.Wait()
	if e := bgErr.Load(); e != nil {
		return fmt.Errorf("retention or compaction: %w", *e)
	}
	fmt.Printf("ingest while retention and compaction run: %d spans in %.1f s of Append and Sync = %.0f spans/s; %d rounds deleted %d blocks and merged %d away\n",
		spans, spent.Seconds(), float64(spans)/spent.Seconds(), rounds.Load(), dropped.Load(), merged.Load())
	return nil
}
