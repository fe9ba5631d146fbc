package main

import (
	"bufio"
	"fmt"
	"maps"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
)

// defaultListeners are the listeners of the embedded default: the flag
// that moves each, and what the message about a taken port must name
// besides the flag (the configuration file's key).
var defaultListeners = []struct {
	name, flag, key string
}{
	{"kieker-tcp", "--kieker-port", "receivers: [{name: kieker-tcp, type: kieker-tcp, listen: HOST:PORT}]"},
	{"tcp-server", "--kdb-port", "receivers: [{name: tcp-server, type: tcp-server, listen: HOST:PORT}]"},
	{"otlp-grpc", "--otlp-grpc", "receivers: [{name: otlp-grpc, type: otlp-grpc, listen: HOST:PORT}]"},
	{"otlp-http", "--otlp-http", "receivers: [{name: otlp-http, type: otlp-http, listen: HOST:PORT}]"},
	{"zico", "--zico", "receivers: [{name: zico, type: zico, listen: HOST:PORT}]"},
	{"http", "--http", "http: {listen: HOST:PORT}"},
	{"stream", "--stream", "stream: {listen: HOST:PORT}"},
}

// listenerArgs returns serve's flags that put each listener of the
// embedded default on the address of its name in addrs.
func listenerArgs(addrs map[string]string) []string {
	var args []string
	for _, l := range defaultListeners {
		args = append(args, l.flag, addrs[l.name])
	}
	return args
}

// freeAddrs returns an address on loopback per listener of the default,
// free when it returns.
func freeAddrs(t *testing.T) map[string]string {
	t.Helper()
	addrs := map[string]string{}
	for _, l := range defaultListeners {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs[l.name] = ln.Addr().String()
	}
	return addrs
}

// TestServeMovedListeners: the flags for the default's listeners
// (--kieker-port, --kdb-port, --otlp-grpc, --otlp-http, --zico, --http,
// --stream) move them, and the real binary listens there: Kieker TCP and
// KDB records sent to the moved ports arrive in the log, OTLP/HTTP and the
// HTTP API answer, the stream's address is a NATS server, and OTLP/gRPC
// and ZICO accept connections. -p alone moves the Kieker TCP receiver, and
// off turns a listener off.
func TestServeMovedListeners(t *testing.T) {
	addrs := freeAddrs(t)
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, append(listenerArgs(addrs), "--data-dir", "data")...)
	for _, name := range []string{"kieker-tcp", "tcp-server", "otlp-grpc", "otlp-http", "zico"} {
		if got := p.Receivers[name]; got != addrs[name] {
			t.Errorf("receiver %s on %q, want %s", name, got, addrs[name])
		}
	}
	if m := httpLine.FindStringSubmatch(p.Stdout()); m == nil || m[1] != "http://"+addrs["http"] {
		t.Errorf("http: %v, want http://%s", m, addrs["http"])
	}
	if m := streamLine.FindStringSubmatch(p.Stdout()); m == nil || m[1] != "nats://"+addrs["stream"] {
		t.Errorf("stream: %v, want nats://%s", m, addrs["stream"])
	}
	send(t, addrs["kieker-tcp"], kiekerEvents(t, 1, 50))
	send(t, addrs["tcp-server"], kdbEvents(t, 2, 0, 50))
	for _, name := range []string{"otlp-grpc", "zico"} {
		c, err := net.DialTimeout("tcp", addrs[name], 10*time.Second)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		c.Close()
	}
	resp, err := http.Post("http://"+addrs["otlp-http"]+"/v1/traces", "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("OTLP/HTTP on %s: %s", addrs["otlp-http"], resp.Status)
	}
	resp, err = http.Get("http://" + addrs["http"] + "/api/services")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HTTP API on %s: %s", addrs["http"], resp.Status)
	}
	c, err := net.DialTimeout("tcp", addrs["stream"], 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.HasPrefix(line, "INFO {") {
		t.Errorf("stream address %s: %q, %v; want a NATS server's INFO", addrs["stream"], line, err)
	}
	c.Close()
	// The records are in the log once the bridge has stopped (its last
	// flush).
	p.Stop()
	if traces := tracesIn(t, bridgetest.ReadLogSkipBad(t, p.LogDir)); traces[1] != 50 || traces[2] != 50 {
		t.Errorf("traces %v, want 50 records of traces 1 (Kieker TCP) and 2 (KDB)", traces)
	}

	// -p alone: the Kieker TCP receiver; off: no receiver.
	addrs = freeAddrs(t)
	_, port, _ := net.SplitHostPort(addrs["kieker-tcp"])
	p = bridgetest.Start(t, dir, "-p", port, "--kdb-port", addrs["tcp-server"], "--otlp-grpc", "off", "--otlp-http", "off", "--zico", "off",
		"--http", addrs["http"], "--stream", addrs["stream"], "--data-dir", "data2")
	if len(p.Receivers) != 2 || p.Receivers["kieker-tcp"] != addrs["kieker-tcp"] || p.Receivers["tcp-server"] != addrs["tcp-server"] {
		t.Errorf("-p %s with three listeners off: receivers %v", port, p.Receivers)
	}
	send(t, addrs["kieker-tcp"], kiekerEvents(t, 3, 20))
	p.Stop()
	if traces := tracesIn(t, bridgetest.ReadLogSkipBad(t, p.LogDir)); traces[3] != 20 {
		t.Errorf("-p %s: traces %v, want 20 records of trace 3", port, traces)
	}
}

// TestServeTakenPortNamesFlag: when another program holds the port of a
// listener of the embedded default, serve exits 3 and names the flag that
// moves that listener and the configuration file's key, for each listener
// in turn (the others moved to free ports, the taken one held here). With
// -t the message names -p; with -c, the file; a taken --metrics port names
// --metrics.
func TestServeTakenPortNamesFlag(t *testing.T) {
	dir := t.TempDir()
	type check struct {
		args []string
		want []string
	}
	var checks []check
	for _, l := range defaultListeners {
		addrs := freeAddrs(t)
		checks = append(checks, check{append(listenerArgs(addrs), "--data-dir", "data"), []string{addrs[l.name], l.flag + " ", l.key}})
		if l.name == "kieker-tcp" {
			// -p alone moves it too: the message says so.
			checks[len(checks)-1].want = append(checks[len(checks)-1].want, " or -p PORT")
		}
	}
	addrs := freeAddrs(t)
	checks = append(checks, check{[]string{"-t", "kieker-tcp", "-p", port(t, addrs["kieker-tcp"]), "--data-dir", "data"},
		[]string{addrs["kieker-tcp"], "-p PORT", "receivers: [{name: kieker-tcp, type: kieker-tcp, listen: HOST:PORT}]"}})
	// --metrics on a taken port, the default's listeners on free ones.
	addrs = freeAddrs(t)
	// Another call may hand out a port of the first again (each is
	// free once its probe closes): metrics must be none of addrs.
	metrics := freeAddrs(t)["http"]
	for slices.Contains(slices.Collect(maps.Values(addrs)), metrics) {
		metrics = freeAddrs(t)["http"]
	}
	checks = append(checks, check{append(listenerArgs(addrs), "--metrics", metrics, "--data-dir", "data"),
		[]string{metrics, "--metrics HOST:PORT", "metrics: HOST:PORT"}})
	// A configuration file: its listen key, and the flag of the one
	// receiver of its type.
	addrs = freeAddrs(t)
	cfg := bridgetest.WriteConfig(t, dir, fmt.Sprintf("receivers: [{name: otel, type: otlp-grpc, listen: %q}]\nsinks: [{type: kieker-log, path: logs}]\nhttp: {listen: %q}\n", addrs["otlp-grpc"], addrs["http"]))
	checks = append(checks,
		check{[]string{"-c", cfg}, []string{addrs["otlp-grpc"], "--otlp-grpc ", "its listen: key in " + cfg, "{name: otel, type: otlp-grpc"}},
	)
	cfg2 := filepath.Join(dir, "http.yaml")
	writeFile(t, cfg2, fmt.Sprintf("receivers: [{type: kieker-tcp, listen: %q}]\nsinks: [{type: kieker-log, path: logs}]\nhttp: {listen: %q}\n", freeAddrs(t)["kieker-tcp"], addrs["stream"]))
	checks = append(checks, check{[]string{"-c", cfg2}, []string{addrs["stream"], "--http HOST:PORT", "in " + cfg2 + " with http: {listen: HOST:PORT}"}})

	for _, c := range checks {
		taken := c.want[0]
		ln, err := net.Listen("tcp", taken)
		if err != nil {
			t.Fatalf("holding %s: %v", taken, err)
		}
		r := runIn(t, dir, nil, append([]string{"serve"}, c.args...)...)
		ln.Close()
		if r.code != exitComm || !strings.Contains(r.stderr, taken+": bind: address already in use") {
			t.Errorf("serve %v with %s taken: exit %d, want %d and the address; stderr:\n%s", c.args, taken, r.code, exitComm, r.stderr)
			continue
		}
		for _, w := range c.want[1:] {
			if !strings.Contains(r.stderr, w) {
				t.Errorf("serve %v with %s taken: the message lacks %q:\n%s", c.args, taken, w, r.stderr)
			}
		}
	}
}

// port returns the port of addr.
func port(t *testing.T, addr string) string {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
