// Command store measures the trace store: ingest rate (spans/s) against a
// same-run baseline of writing the same bytes to a file, bytes per span on
// disk, the RSS after opening the store and during its searches, the
// latency (p50/p99) of the queries users run (a trace by id, host + last
// hour, min duration, errors only, trace name, attribute equality, EQL,
// full text and regex over all spans), the latency of catalogue reads and
// searches while a steady ingest runs, and the ingest rate while retention
// and compaction run; on a local directory or on S3 (a versitygw started
// on loopback).
//
//	go run ./bench/store [-spans 10000000] [-hosts 20] [-backend local|s3] [-dir DIR] [-keep]
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/eql"
	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

func main() {
	spans := flag.Int("spans", 10_000_000, "spans to store (10 per trace on average)")
	hosts := flag.Int("hosts", 20, "hosts")
	dir := flag.String("dir", "", "store directory (default: a temporary one)")
	keep := flag.Bool("keep", false, "keep the store")
	reps := flag.Int("reps", 50, "repetitions of each query")
	only := flag.String("only", "", "run only the queries whose name holds this text")
	cpuprofile := flag.String("cpuprofile", "", "write a CPU profile of the queries to this file")
	flag.StringVar(&ingestProfile, "ingestprofile", "", "write a CPU profile of the ingest (Append and Sync, and the blocks built meanwhile) to this file")
	resources := flag.Bool("resources", false, "give the spans OpenTelemetry resources and scopes as the Go SDK sends them")
	flag.StringVar(&backend, "backend", "local", "where the blocks live: local (DIR/store/blocks) or s3 (a versitygw on loopback, serving DIR/s3)")
	flag.StringVar(&versitygw, "versitygw", "", "the versitygw binary for -backend s3 (default: PATH, then GOPATH/bin)")
	flag.IntVar(&loadRate, "load-rate", 20000, "spans/s of the steady ingest under which the queries of the load phase run (0: skip the phase)")
	flag.DurationVar(&loadFor, "load-for", 20*time.Second, "length of the load phase and of the retention and compaction phase")
	flag.Parse()
	queryOnly, queryProfile, withResources = *only, *cpuprofile, *resources
	if err := run(*spans, *hosts, *dir, *keep, *reps); err != nil {
		fmt.Fprintln(os.Stderr, "store bench:", err)
		os.Exit(1)
	}
}

// gen makes realistic traces: a web request on one of the hosts calling
// services and a database, HTTP and DB attributes, user ids, 2 % errors.
type gen struct {
	rng   *rand.Rand
	hosts []string
	now   int64
	n     uint64
	// The resources (by host and service) and scopes (by component) of
	// -resources.
	res    map[string]*trace.Resource
	scopes map[string]*trace.Scope
}

var (
	routes = []string{"/api/orders", "/api/orders/{id}", "/api/cart", "/api/users/{id}", "/api/search", "/health", "/api/checkout", "/api/items/{id}"}
	tables = []string{"orders", "order_items", "users", "carts", "items", "payments"}
	ops    = []string{"OrderService.place", "CartService.get", "UserService.find", "SearchService.query", "PaymentClient.charge", "InventoryClient.reserve", "Json.serialize"}
)

func (g *gen) trace() *trace.Trace {
	g.n++
	id := trace.ID{Hi: g.rng.Uint64(), Lo: g.rng.Uint64()}
	host := g.hosts[g.rng.IntN(len(g.hosts))]
	svc := "shop-" + strconv.Itoa(int(g.n%7))
	route := routes[g.rng.IntN(len(routes))]
	start := g.now - int64(g.rng.IntN(int(2*time.Hour)))
	n := 2 + g.rng.IntN(17) // 2..18 spans, 10 on average
	t := &trace.Trace{ID: id}
	errTrace := g.rng.IntN(50) == 0
	user := "user-" + strconv.Itoa(g.rng.IntN(20000))
	dur := int64(200_000 + g.rng.ExpFloat64()*5e6)
	t.Spans = append(t.Spans, trace.Span{SpanID: 1, Parent: -1, Operation: "GET " + route, Component: "http.server",
		Host: host, Service: svc, Thread: "http-nio-" + strconv.Itoa(g.rng.IntN(200)), Start: start, End: start + dur,
		Kind: trace.KindServer, Error: errTrace, Source: trace.FromSpan, OrderIndex: -1, EOI: -1, ESS: -1,
		Attributes: []trace.Attr{
			{Key: "http.method", Value: "GET", Type: trace.TypeString},
			{Key: "http.route", Value: route, Type: trace.TypeString},
			{Key: "http.status_code", Value: map[bool]string{true: "500", false: "200"}[errTrace], Type: trace.TypeInt},
			{Key: "user.id", Value: user, Type: trace.TypeString},
		}})
	at := start + 1000
	for j := 1; j < n; j++ {
		parent := int32(g.rng.IntN(j))
		d := int64(10_000 + g.rng.ExpFloat64()*300_000)
		s := trace.Span{SpanID: trace.SpanID(j + 1), ParentID: trace.SpanID(parent + 1), Parent: parent, Depth: t.Spans[parent].Depth + 1,
			Host: host, Service: svc, Thread: t.Spans[0].Thread, Start: at, End: at + d, Kind: trace.KindInternal,
			Source: trace.FromSpan, OrderIndex: -1, EOI: -1, ESS: -1}
		if g.rng.IntN(3) == 0 {
			tb := tables[g.rng.IntN(len(tables))]
			s.Operation, s.Component, s.Kind = "SELECT "+tb, "jdbc", trace.KindClient
			s.Attributes = []trace.Attr{{Key: "db.system", Value: "postgresql", Type: trace.TypeString},
				{Key: "db.statement", Value: "SELECT * FROM " + tb + " WHERE id = $1 LIMIT " + strconv.Itoa(1+g.rng.IntN(50)), Type: trace.TypeString}}
		} else {
			op := ops[g.rng.IntN(len(ops))]
			s.Operation, s.Component = op, "com.acme."+op[:len(op)-len(".place")]
			s.Attributes = []trace.Attr{{Key: "code.function", Value: op, Type: trace.TypeString}}
		}
		if errTrace && j == n-1 {
			s.Error = true
			s.StatusMessage = "java.sql.SQLTimeoutException"
			s.Events = []trace.Event{{Name: "exception", Time: s.End, Attributes: []trace.Attr{
				{Key: "exception.type", Value: "java.sql.SQLTimeoutException", Type: trace.TypeString},
				{Key: "exception.message", Value: "canceling statement due to statement timeout", Type: trace.TypeString}}}}
		}
		t.Spans = append(t.Spans, s)
		at += d / 3
	}
	if withResources {
		g.resources(t)
	}
	return t
}

// resources gives t's spans the resource of their host and service and
// the scope of their component, in tables of the trace; the traces of one
// resource share it, as the assembler's do.
func (g *gen) resources(t *trace.Trace) {
	str := func(k, v string) trace.Attr { return trace.Attr{Key: k, Value: v, Type: trace.TypeString} }
	if g.res == nil {
		g.res, g.scopes = map[string]*trace.Resource{}, map[string]*trace.Scope{}
	}
	res, scopes := g.res, g.scopes
	inTrace := map[any]bool{}
	for i := range t.Spans {
		s := &t.Spans[i]
		r, ok := res[s.Host+"/"+s.Service]
		if !ok {
			pid := strconv.Itoa(1000 + len(s.Host)*37 + len(s.Service))
			r = &trace.Resource{Attributes: []trace.Attr{str("service.name", s.Service), str("service.version", "2.4."+s.Service[len(s.Service)-1:]),
				str("host.name", s.Host), str("deployment.environment", "prod"), {Key: "process.pid", Value: pid, Type: trace.TypeInt},
				str("process.executable.name", s.Service), str("process.runtime.name", "go"), str("process.runtime.version", "go1.26.0"),
				str("telemetry.sdk.language", "go"), str("telemetry.sdk.name", "opentelemetry"), str("telemetry.sdk.version", "1.47.0")}}
			res[s.Host+"/"+s.Service] = r
		}
		if !inTrace[r] {
			inTrace[r] = true
			t.Resources = append(t.Resources, r)
		}
		c, ok := scopes[s.Component]
		if !ok {
			c = &trace.Scope{Name: s.Component, Version: "1.0.0"}
			scopes[s.Component] = c
		}
		if !inTrace[c] {
			inTrace[c] = true
			t.Scopes = append(t.Scopes, c)
		}
		s.Resource, s.Scope = r, c
	}
}

func run(spans, nhosts int, dir string, keep bool, reps int) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "tracebridge-store-bench-")
		if err != nil {
			return err
		}
		dir = d
	}
	if !keep {
		defer os.RemoveAll(dir)
	}
	g := &gen{rng: rand.New(rand.NewPCG(1, 2)), now: time.Now().UnixNano()}
	for i := range nhosts {
		g.hosts = append(g.hosts, fmt.Sprintf("node-%02d.prod.acme.example", i))
	}
	fmt.Printf("tracebridge store benchmark: %d spans on %d hosts, %s, GOMAXPROCS %d\n", spans, nhosts, runtime.Version(), runtime.GOMAXPROCS(0))

	// Generate first (not timed), so that ingest and the baseline see the
	// same traces.
	var traces []*trace.Trace
	total := 0
	for total < spans {
		t := g.trace()
		traces = append(traces, t)
		total += len(t.Spans)
	}
	// Baseline: the traces' JSON (what an exporter would send) written to
	// a file, synced.
	base := filepath.Join(dir, "baseline.json")
	f, err := os.Create(base)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	var jsonBytes int64
	t0 := time.Now()
	var buf []byte
	for _, t := range traces {
		buf = trace.AppendJSON(buf[:0], t)
		bw.Write(buf)
		jsonBytes += int64(len(buf))
	}
	bw.Flush()
	f.Sync()
	f.Close()
	baseDur := time.Since(t0)
	os.Remove(base)

	sdir := filepath.Join(dir, "store")
	opts := store.Options{}
	if backend == "s3" {
		srv, cfg, err := startS3(dir)
		if err != nil {
			return err
		}
		defer srv.stop()
		b, err := objstore.NewS3(cfg)
		if err != nil {
			return err
		}
		opts.Bucket = b
		fmt.Printf("backend: S3 (versitygw %s, posix directory %s)\n", cfg.Endpoint, srv.dir)
	} else {
		fmt.Printf("backend: local directory %s\n", sdir)
	}
	s, err := store.Open(sdir, opts)
	if err != nil {
		return err
	}
	if ingestProfile != "" {
		pf, err := os.Create(ingestProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
	}
	t0 = time.Now()
	for i := 0; i < len(traces); i += 1000 {
		if _, err := s.Append(traces[i:min(i+1000, len(traces))]); err != nil {
			return err
		}
		if i%100_000 == 0 {
			if err := s.Sync(); err != nil {
				return err
			}
		}
	}
	if err := s.Sync(); err != nil {
		return err
	}
	ingest := time.Since(t0)
	if ingestProfile != "" {
		pprof.StopCPUProfile()
	}
	t0 = time.Now()
	if err := s.Flush(context.Background()); err != nil {
		return err
	}
	cut := time.Since(t0)
	size := s.Size()
	wal := dirSize(filepath.Join(sdir, "wal"))
	fmt.Printf("ingest: %d traces, %d spans in %.1f s = %.0f spans/s; baseline (JSON of the same traces written to a file) %.1f s = %.0f spans/s; ratio %.2f\n",
		len(traces), total, ingest.Seconds(), float64(total)/ingest.Seconds(), baseDur.Seconds(), float64(total)/baseDur.Seconds(), baseDur.Seconds()/ingest.Seconds())
	fmt.Printf("cutting the last heads into blocks after the ingest: %.1f s (not in the ingest rate)\n", cut.Seconds())
	fmt.Printf("disk: %.1f MB = %.1f bytes per span (blocks; write-ahead left %.1f MB; the JSON: %.0f bytes per span)\n", float64(size)/1e6, float64(size)/float64(total),
		float64(wal)/1e6, float64(jsonBytes)/float64(total))

	// Queries see the store as a bridge that has been running would: the
	// generated traces are let go (a 10 M-span heap would make every GC
	// cycle scan gigabytes while the queries run).
	ids := make([]trace.ID, len(traces))
	for i, t := range traces {
		ids[i] = t.ID
	}
	traces = nil
	// RSS after open: the store closed and opened again, as a bridge
	// restarted on this data would be.
	if err := s.Close(); err != nil {
		return err
	}
	runtime.GC()
	debug.FreeOSMemory()
	rssBefore := rss()
	t0 = time.Now()
	if s, err = store.Open(sdir, opts); err != nil {
		return err
	}
	openDur := time.Since(t0)
	runtime.GC()
	fmt.Printf("open: %.2f s; RSS before open %.1f MiB, after open %.1f MiB (Go heap in use %.1f MiB)\n", openDur.Seconds(), mib(rssBefore), mib(rss()), mib(heapInUse()))
	sampler := startRSSSampler()

	rng := rand.New(rand.NewPCG(7, 8))
	pick := func() trace.ID { return ids[rng.IntN(len(ids))] }
	hour := time.Now().Add(-time.Hour).UnixNano()
	stmt := regexp.MustCompile(`FROM payments WHERE id = \$1 LIMIT 4[0-9]`)
	type bench struct {
		name string
		q    func() (int, error)
	}
	search := func(q store.Query) (int, error) {
		p, err := s.Search(q)
		return len(p.Traces), err
	}
	expr, err := eql.Parse(`time > 20ms and http.status_code = 500`)
	if err != nil {
		return err
	}
	benches := []bench{
		{"trace by id", func() (int, error) {
			_, err := s.Get(pick())
			return 1, err
		}},
		{"host + last hour", func() (int, error) {
			return search(store.Query{Hosts: []string{g.hosts[rng.IntN(len(g.hosts))]}, Since: hour})
		}},
		{"min duration 40ms", func() (int, error) { return search(store.Query{MinDuration: 40 * time.Millisecond}) }},
		{"errors only", func() (int, error) { return search(store.Query{Errors: true}) }},
		{"trace name", func() (int, error) { return search(store.Query{Name: "GET " + routes[rng.IntN(len(routes))]}) }},
		{"attribute equality (user.id)", func() (int, error) {
			return search(store.Query{Attrs: []trace.Attr{{Key: "user.id", Value: "user-" + strconv.Itoa(rng.IntN(20000))}}})
		}},
		{"EQL", func() (int, error) {
			q := store.Query{}
			q.SetEQL(expr)
			return search(q)
		}},
		{"full text, every span (absent)", func() (int, error) { return search(store.Query{Text: "no such text anywhere", Deep: true}) }},
		{"full text, every span", func() (int, error) { return search(store.Query{Text: "statement timeout", Deep: true}) }},
		{"regex, every span", func() (int, error) { return search(store.Query{Regex: stmt, Deep: true}) }},
	}
	fmt.Printf("%-34s %10s %10s %10s %8s\n", "query (newest first, limit 20)", "p50", "p99", "max", "hits")
	if queryProfile != "" {
		pf, err := os.Create(queryProfile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	for _, b := range benches {
		if !strings.Contains(b.name, queryOnly) {
			continue
		}
		var lat []time.Duration
		hits := 0
		n := reps
		if strings.HasPrefix(b.name, "full") || strings.HasPrefix(b.name, "regex") {
			n = min(reps, 5)
		}
		for range 2 { // warm-up: the first query of a kind reads block indexes from disk
			if _, err := b.q(); err != nil {
				return fmt.Errorf("%s: %w", b.name, err)
			}
		}
		for range n {
			t0 := time.Now()
			h, err := b.q()
			if err != nil {
				return fmt.Errorf("%s: %w", b.name, err)
			}
			lat = append(lat, time.Since(t0))
			hits += h
		}
		slices.Sort(lat)
		fmt.Printf("%-34s %10s %10s %10s %8.1f\n", b.name, lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)*99/100].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond), float64(hits)/float64(n))
	}
	if queryProfile != "" {
		pprof.StopCPUProfile()
	}
	fmt.Printf("RSS during the searches: max %.1f MiB (sampled every 10 ms)\n", mib(sampler.stop()))
	if loadRate > 0 && loadFor > 0 {
		if err := loadPhase(s, g); err != nil {
			return err
		}
		if err := s.Close(); err != nil {
			return err
		}
		// Retention and compaction: the store opened again with bounds
		// that make retention delete a quarter of it and compaction
		// merge the blocks the ingest cuts (small heads).
		ro := opts
		ro.MaxSize = size * 3 / 4
		ro.HeadSize = 1 << 20
		ro.CompactBelow = 4 << 20
		ro.CompactTo = 16 << 20
		if s, err = store.Open(sdir, ro); err != nil {
			return err
		}
		if err := retentionPhase(s, g); err != nil {
			return err
		}
	}
	return s.Close()
}

// queryOnly, queryProfile and ingestProfile are the -only, -cpuprofile
// and -ingestprofile flags.
var queryOnly, queryProfile, ingestProfile string

// The -backend, -versitygw, -load-rate and -load-for flags.
var (
	backend, versitygw string
	loadRate           int
	loadFor            time.Duration
)

// withResources: spans have the resource of their host and service (the
// Go SDK's attributes, deployment.environment, service.version) and the
// scope of their component, as the OTLP receiver keeps them.
var withResources bool

func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}
