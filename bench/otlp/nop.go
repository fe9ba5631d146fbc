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
	"sync/atomic"
	"syscall"

	"github.com/tracebridge/tracebridge/internal/engine"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/source/otlp"
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

// nopBridge runs until SIGTERM. It prints the receivers' addresses and
// the address where GET answers the number of records the sink took,
// then "ready".
func nopBridge() error {
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
	sink := &nopSink{}
	e := engine.New(engine.Settings{Logger: log, Metrics: reg})
	e.AddSource("grpc", g)
	e.AddSource("http", h)
	e.AddSink("nop", sink)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, sink.n.Load())
	}))
	fmt.Printf("grpc %s\nhttp %s\ncount %s\nready\n", g.Addr(), h.Addr(), ln.Addr())
	return e.Run(ctx)
}

// startNop starts this program again as the sink-less bridge.
func startNop(ctx context.Context, pprof string) (*target, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	env := []string{roleEnv + "=nop"}
	if pprof != "" {
		env = append(env, pprofEnv+"="+pprof)
	}
	srv, err := startServerEnv(ctx, "tb-no-sink", self, env)
	if err != nil {
		return nil, err
	}
	t := newTarget("tb-no-sink", srv)
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
			return nil, fmt.Errorf("sink-less bridge exited at start (%v): %s", srv.waitErr, srv.stderr)
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
