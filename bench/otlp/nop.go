package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	httppprof "net/http/pprof"
	"os"
	"os/signal"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/tracebridge/tracebridge/internal/engine"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/otlp"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// roleEnv makes this program the sink-less bridge: tracebridge's engine
// with the two OTLP receivers (as serve builds them) and a sink that
// counts and drops — the Collector's OTLP receiver → nop exporter,
// measured the same way, in a process of its own.
const roleEnv = "TRACEBRIDGE_OTLP_BENCH_ROLE"

// nopSink counts records and drops them.
type nopSink struct{ n atomic.Int64 }

var _ pipeline.Sink = (*nopSink)(nil)

func (s *nopSink) Consume(_ context.Context, b *record.Batch) error {
	s.n.Add(int64(b.Len()))
	return nil
}
func (s *nopSink) Flush() error { return nil }
func (s *nopSink) Close() error { return nil }

// assembleSink takes assembled traces as the store sink does (packed,
// traces only, every source), reads each once through a trace.Unpacker
// as store.Append does, counts its spans and drops it: decoding and
// assembly without a store, the floor under tb-store's cost.
type assembleSink struct {
	n  atomic.Int64
	mu sync.Mutex // the Unpacker, in case traces come from several goroutines
	u  trace.Unpacker
}

var (
	_ pipeline.PackedTraceConsumer = (*assembleSink)(nil)
	_ pipeline.TracesOnly          = (*assembleSink)(nil)
)

func (s *assembleSink) Consume(context.Context, *record.Batch) error { return nil }
func (s *assembleSink) Flush() error                                 { return nil }
func (s *assembleSink) Close() error                                 { return nil }
func (s *assembleSink) TracesOnly() bool                             { return true }
func (s *assembleSink) PackedTraces() bool                           { return true }
func (s *assembleSink) TraceSources() trace.Sources                  { return trace.AllSources }

func (s *assembleSink) ConsumeTraces(_ context.Context, ts []*trace.Trace) error {
	n := 0
	s.mu.Lock()
	for _, t := range ts {
		n += len(s.u.Trace(t).Spans)
	}
	s.u.Release()
	s.mu.Unlock()
	s.n.Add(int64(n))
	return nil
}

// takenCounter is what both sinks answer GET with.
type takenCounter interface {
	pipeline.Sink
	count() int64
}

func (s *nopSink) count() int64      { return s.n.Load() }
func (s *assembleSink) count() int64 { return s.n.Load() }

// nopBridge runs until SIGTERM as the role role names ("nop": the
// counting sink; "assemble": the assembling one). It prints the
// receivers' addresses and the address where GET answers the number of
// records (spans) the sink took, then "ready".
func nopBridge(role string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// TRACEBRIDGE_CPUPROFILE=FILE profiles it as it does tracebridge
	// (FILE.nop).
	if p := os.Getenv("TRACEBRIDGE_CPUPROFILE"); p != "" {
		if f, err := os.Create(p + ".nop"); err == nil {
			pprof.StartCPUProfile(f)
			defer pprof.StopCPUProfile()
		}
	}
	// TRACEBRIDGE_PPROF=HOST:PORT serves its profiles as tracebridge does.
	if a := os.Getenv(pprofEnv); a != "" {
		ln, err := net.Listen("tcp", a)
		if err != nil {
			return err
		}
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", httppprof.Index)
		mux.HandleFunc("/debug/pprof/profile", httppprof.Profile)
		go http.Serve(ln, mux)
	}
	reg := metrics.New()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	g, err := otlp.NewGRPC(otlp.Config{Listen: "127.0.0.1:0", MaxMessageSize: 16 << 20}, pipeline.Settings{Name: "grpc", Logger: log, Metrics: reg})
	if err != nil {
		return err
	}
	h, err := otlp.NewHTTP(otlp.Config{Listen: "127.0.0.1:0"}, pipeline.Settings{Name: "http", Logger: log, Metrics: reg})
	if err != nil {
		return err
	}
	var sink takenCounter = &nopSink{}
	if role == "assemble" {
		// The assembly as serve builds it by default: the 2 s window.
		sink = &assembleSink{}
	}
	e := engine.New(engine.Settings{Logger: log, Metrics: reg})
	e.AddSource("grpc", g)
	e.AddSource("http", h)
	e.AddSink("nop", sink)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, sink.count())
	}))
	fmt.Printf("grpc %s\nhttp %s\ncount %s\nready\n", g.Addr(), h.Addr(), ln.Addr())
	return e.Run(ctx)
}

// startNop starts this program again as the sink-less bridge (name
// tb-no-sink, role nop) or the assembling one (tb-assemble, assemble).
func startNop(ctx context.Context, name, role, pprof string) (*target, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	env := []string{roleEnv + "=" + role}
	if pprof != "" {
		env = append(env, pprofEnv+"="+pprof)
	}
	srv, err := startServerEnv(ctx, name, self, env)
	if err != nil {
		return nil, err
	}
	t := newTarget(name, srv)
	t.pprof = pprof
	for ready := false; !ready; {
		select {
		case l := <-srv.lines:
			k, v, _ := cutSpace(l)
			switch k {
			case "grpc":
				t.grpc = v
			case "http":
				t.http = v
			case "count":
				t.metrics = v
			}
			ready = l == "ready"
		case <-srv.exited:
			return nil, fmt.Errorf("%s exited at start (%v): %s", name, srv.waitErr, srv.stderr)
		}
	}
	client := &http.Client{}
	t.taken = func() (int64, error) {
		resp, err := client.Get("http://" + t.metrics + "/")
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var b [32]byte
		n, _ := resp.Body.Read(b[:])
		return strconv.ParseInt(string(b[:n]), 10, 64)
	}
	return t, nil
}

func cutSpace(l string) (string, string, bool) {
	for i := range l {
		if l[i] == ' ' {
			return l[:i], l[i+1:], true
		}
	}
	return l, "", false
}
