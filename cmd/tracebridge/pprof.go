package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
)

// pprofEnv names the loopback address where tracebridge serves Go's
// profiles (net/http/pprof's /debug/pprof/: the CPU profile, heap,
// allocations, goroutines, …) for performance work, e.g.
// `go tool pprof http://127.0.0.1:6060/debug/pprof/profile?seconds=10`
// during a load (bench/otlp -profile does). Off unless set; loopback only,
// since the profiles show the process's inner workings and cost CPU.
const pprofEnv = "TRACEBRIDGE_PPROF"

// servePprof serves the profiles on addr (a loopback host and a port,
// 0 for any) and writes where to stderr.
func servePprof(addr string, stderr io.Writer) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s=%q: %w", pprofEnv, addr, err)
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%s=%q: the profiles are served on a loopback address only", pprofEnv, addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s: %w", pprofEnv, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	fmt.Fprintf(stderr, "tracebridge: profiles on http://%s/debug/pprof/\n", ln.Addr())
	go http.Serve(ln, mux)
	return nil
}
