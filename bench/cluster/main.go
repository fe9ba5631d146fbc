// Cluster is tracebridge's cluster benchmark (docs/CLUSTER.md): what a
// node of a three-node cluster costs per span against a single `serve`
// in the same run, how long a takeover takes after `kill -9`, and how
// long after its acknowledgement a trace is searchable on another node.
// It is run by hand (go run ./bench/cluster), never by CI.
//
// It builds tracebridge, starts versitygw (an S3 server; `go install
// github.com/versity/versitygw/cmd/versitygw@v1.8.0`) and three nodes on
// 127.0.0.1–3 with embedded NATS servers in one JetStream cluster, plus
// a single bridge with the same store settings. Phases:
//
//   - ingest: K clients post OTLP/JSON requests of S spans (traces of 5
//     spans) for D to the single bridge, then the same to the cluster's
//     three nodes in turn; spans answered 200 per CPU-second (utime+stime
//     of the single bridge; of the three nodes together, until every
//     partition is checkpointed);
//   - delay: a trace posted to node 1, then GET from node 3 every 50 ms
//     until found, N times;
//   - takeover: kill -9 of a node, then the time until the others own
//     every partition (their /metrics, every 100 ms); the node restarts
//     and the cluster settles before the next kill, N times.
//
// Concurrency: one goroutine per client; everything else on the main
// goroutine. The bridges and versitygw are child processes.
package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
)

func main() {
	os.Exit(run())
}

type options struct {
	dur        time.Duration
	clients    int
	spans      int
	rounds     int
	partitions int
	keep       bool
	bin        string
}

func run() int {
	var o options
	flag.DurationVar(&o.dur, "duration", 15*time.Second, "ingest time per target")
	flag.IntVar(&o.clients, "clients", 16, "concurrent OTLP clients")
	flag.IntVar(&o.spans, "spans", 500, "spans per request (traces of 5)")
	flag.IntVar(&o.rounds, "rounds", 5, "kills and delay probes")
	flag.IntVar(&o.partitions, "partitions", 32, "partitions of the cluster")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory")
	flag.StringVar(&o.bin, "tracebridge", "", "the binary (default: built from this module)")
	flag.Parse()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logf := benchkit.Logf(os.Stderr, "cluster")
	dir, bin, done, err := benchkit.Setup(ctx, "tb-bench-cluster-", o.bin, o.keep, logf)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer done()
	if err := bench(ctx, o, dir, bin, logf); err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		return 1
	}
	return 0
}

// proc is a running child.
type proc struct {
	cmd    *exec.Cmd
	http   string
	stderr *benchkit.Tail
	done   chan struct{}
}

var httpLine = regexp.MustCompile(`^tracebridge: http on (http://\S+)/ `)
var otlpLine = regexp.MustCompile(`^tracebridge: receiver otlp \(otlp-http\) listening on (\S+)`)

// startServe starts bin serve -c cfg in dir and waits for ready; it
// returns the process with its API's URL, and the OTLP address.
func startServe(ctx context.Context, bin, dir, cfg string) (*proc, string, error) {
	p := &proc{stderr: benchkit.NewTail(64 << 10), done: make(chan struct{})}
	p.cmd = exec.CommandContext(ctx, bin, "serve", "-c", cfg)
	p.cmd.Dir = dir
	p.cmd.Stderr = p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, "", err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, "", err
	}
	go func() { p.cmd.Wait(); close(p.done) }()
	sc := bufio.NewScanner(out)
	var otlp string
	for sc.Scan() {
		l := sc.Text()
		if m := httpLine.FindStringSubmatch(l); m != nil {
			p.http = m[1]
		}
		if m := otlpLine.FindStringSubmatch(l); m != nil {
			otlp = m[1]
		}
		if l == "tracebridge: ready" {
			go io.Copy(io.Discard, out)
			return p, otlp, nil
		}
	}
	return nil, "", fmt.Errorf("serve in %s ended before ready: %s", dir, p.stderr)
}

func (p *proc) kill() { p.cmd.Process.Kill(); <-p.done }

func (p *proc) stop() {
	p.cmd.Process.Signal(os.Interrupt)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		p.kill()
	}
}

func freePort(host string) int {
	ln, err := net.Listen("tcp", host+":0")
	if err != nil {
		return 0
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

const storeYAML = `sinks:
  - type: store
    path: store
    backend: s3
    s3: {endpoint: %q, bucket: traces, prefix: %q, access_key_file: %q, secret_key_file: %q}
`

func bench(ctx context.Context, o options, dir, bin string, logf func(string, ...any)) error {
	// The S3 server.
	gw, err := exec.LookPath("versitygw")
	if err != nil {
		gw = filepath.Join(os.Getenv("HOME"), "go", "bin", "versitygw")
	}
	s3dir := filepath.Join(dir, "s3")
	os.MkdirAll(filepath.Join(s3dir, "traces"), 0o755)
	access, secret := filepath.Join(dir, "access"), filepath.Join(dir, "secret")
	os.WriteFile(access, []byte("bench-access"), 0o600)
	os.WriteFile(secret, []byte("bench-secret-key"), 0o600)
	s3port := freePort("127.0.0.1")
	endpoint := "http://127.0.0.1:" + strconv.Itoa(s3port)
	s3 := exec.CommandContext(ctx, gw, "--access", "bench-access", "--secret", "bench-secret-key", "--port", "127.0.0.1:"+strconv.Itoa(s3port), "--quiet", "posix", s3dir)
	if err := s3.Start(); err != nil {
		return fmt.Errorf("versitygw: %w", err)
	}
	defer func() { s3.Process.Kill(); s3.Wait() }()
	time.Sleep(time.Second)
	common := "traces: {window: 1s}\nreceivers:\n  - {name: otlp, type: otlp-http, listen: \"%s:0\"}\nhttp: %s:0\n"

	// The single bridge.
	sdir := filepath.Join(dir, "single")
	os.MkdirAll(sdir, 0o755)
	scfg := filepath.Join(sdir, "tracebridge.yaml")
	os.WriteFile(scfg, []byte(fmt.Sprintf(common, "127.0.0.1", "127.0.0.1")+fmt.Sprintf(storeYAML, endpoint, "single/", access, secret)), 0o644)
	single, sotlp, err := startServe(ctx, bin, sdir, scfg)
	if err != nil {
		return err
	}

	// The cluster.
	type node struct {
		dir, cfg, otlp string
		p              *proc
	}
	nodes := make([]*node, 3)
	client, route := make([]string, 3), make([]string, 3)
	for i := range nodes {
		h := "127.0.0." + strconv.Itoa(i+1)
		client[i] = net.JoinHostPort(h, strconv.Itoa(freePort(h)))
		route[i] = net.JoinHostPort(h, strconv.Itoa(freePort(h)))
	}
	for i := range nodes {
		h := "127.0.0." + strconv.Itoa(i+1)
		var others []string
		for j := range nodes {
			if j != i {
				others = append(others, strconv.Quote(route[j]))
			}
		}
		nd := &node{dir: filepath.Join(dir, "n"+strconv.Itoa(i+1))}
		os.MkdirAll(nd.dir, 0o755)
		nd.cfg = filepath.Join(nd.dir, "tracebridge.yaml")
		yaml := fmt.Sprintf(common, h, h) + fmt.Sprintf(storeYAML, endpoint, "cluster/", access, secret) +
			fmt.Sprintf("cluster: {node: n%d, nats_listen: %q, cluster_listen: %q, routes: [%s], partitions: %d}\n", i+1, client[i], route[i], strings.Join(others, ", "), o.partitions)
		os.WriteFile(nd.cfg, []byte(yaml), 0o644)
		nodes[i] = nd
	}
	for _, nd := range nodes {
		if nd.p, nd.otlp, err = startServe(ctx, bin, nd.dir, nd.cfg); err != nil {
			return err
		}
	}
	defer func() {
		for _, nd := range nodes {
			nd.p.stop()
		}
		single.stop()
	}()
	procs := func(which ...int) []*proc {
		var out []*proc
		for _, i := range which {
			out = append(out, nodes[i].p)
		}
		return out
	}
	if err := settle(procs(0, 1, 2), o.partitions, 3*time.Minute); err != nil {
		return err
	}
	logf("cluster ready")

	// Ingest.
	body := otlpBody(o.spans)
	cpu := func(ps []*proc) time.Duration {
		var sum time.Duration
		for _, p := range ps {
			c, _ := benchkit.CPU(p.cmd.Process.Pid)
			sum += c
		}
		return sum
	}
	// Each target's CPU while idle (heartbeats, leases, checkpoints,
	// Raft) is measured first and taken off its CPU under load.
	idle := func(ps []*proc) float64 {
		c0, t0 := cpu(ps), time.Now()
		time.Sleep(5 * time.Second)
		return (cpu(ps) - c0).Seconds() / time.Since(t0).Seconds()
	}
	measure := func(ps []*proc, targets []string, wait func() error) (spans int64, raw, net float64, err error) {
		rate := idle(ps)
		c0, t0 := cpu(ps), time.Now()
		spans = load(ctx, targets, body, o)
		if err := wait(); err != nil {
			return 0, 0, 0, err
		}
		raw = (cpu(ps) - c0).Seconds()
		return spans, raw, raw - rate*time.Since(t0).Seconds(), nil
	}
	sSpans, sRaw, sNet, err := measure([]*proc{single}, []string{sotlp}, func() error {
		time.Sleep(3 * time.Second) // its window and a sync: the spans stored
		return nil
	})
	if err != nil {
		return err
	}
	all := procs(0, 1, 2)
	cSpans, cRaw, cNet, err := measure(all, []string{nodes[0].otlp, nodes[1].otlp, nodes[2].otlp}, func() error {
		return settle(all, o.partitions, 3*time.Minute) // every span in durable blocks
	})
	if err != nil {
		return err
	}
	sRate, cRate := float64(sSpans)/sNet, float64(cSpans)/cNet
	fmt.Printf("ingest (%v, %d clients, %d spans a request; CPU less each target's idle CPU)\n", o.dur, o.clients, o.spans)
	fmt.Printf("  single serve:          %9d spans (%7.0f/s), %6.1f CPU-s (%5.1f raw), %9.0f spans/CPU-s\n", sSpans, float64(sSpans)/o.dur.Seconds(), sNet, sRaw, sRate)
	fmt.Printf("  cluster (3 nodes, R3): %9d spans (%7.0f/s), %6.1f CPU-s (%5.1f raw), %9.0f spans/CPU-s over the 3 nodes: %.2f× the single's CPU per span\n",
		cSpans, float64(cSpans)/o.dur.Seconds(), cNet, cRaw, cRate, sRate/cRate)

	// Delay from acknowledgement to searchable on another node.
	var delays []time.Duration
	for r := range o.rounds {
		id := fmt.Sprintf("%016x%016x", time.Now().UnixNano(), r+1)
		if err := post(nodes[0].otlp, otlpTrace(id, 5)); err != nil {
			return err
		}
		t0 := time.Now()
		for {
			resp, err := http.Get(nodes[2].p.http + "/api/v1/traces/" + id)
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			if time.Since(t0) > time.Minute {
				return fmt.Errorf("trace %s not searchable on node 3 after a minute", id)
			}
			time.Sleep(50 * time.Millisecond)
		}
		delays = append(delays, time.Since(t0))
	}
	fmt.Printf("ack → searchable on another node: p50 %v, max %v (%d probes)\n", p50(delays), slices.Max(delays), len(delays))

	// Takeover after kill -9.
	var takeovers []time.Duration
	for r := range o.rounds {
		victim := r % 3
		var rest []*proc
		for i, nd := range nodes {
			if i != victim {
				rest = append(rest, nd.p)
			}
		}
		nodes[victim].p.kill()
		t0 := time.Now()
		for owned(rest) != o.partitions {
			if time.Since(t0) > 2*time.Minute {
				return fmt.Errorf("partitions not taken over after 2 minutes")
			}
			time.Sleep(100 * time.Millisecond)
		}
		takeovers = append(takeovers, time.Since(t0))
		logf("kill %d (node %d): taken over in %v", r+1, victim+1, takeovers[r].Round(10*time.Millisecond))
		if nodes[victim].p, nodes[victim].otlp, err = startServe(ctx, bin, nodes[victim].dir, nodes[victim].cfg); err != nil {
			return err
		}
		if err := settle(procs(0, 1, 2), o.partitions, 3*time.Minute); err != nil {
			return err
		}
		for metric(nodes[victim].p, "tracebridge_cluster_owned_partitions") < 1 {
			time.Sleep(200 * time.Millisecond)
		}
	}
	fmt.Printf("takeover after kill -9: p50 %v, max %v (%d kills)\n", p50(takeovers).Round(10*time.Millisecond), slices.Max(takeovers).Round(10*time.Millisecond), len(takeovers))
	return nil
}

func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// settle waits until ps own every partition and nothing waits in the
// stream, as read after the call.
func settle(ps []*proc, partitions int, limit time.Duration) error {
	since := float64(time.Now().UnixNano()) / 1e9
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		ok := owned(ps) == partitions
		for _, p := range ps {
			if metric(p, "tracebridge_cluster_partition_lag_timestamp_seconds") < since || metric(p, "tracebridge_cluster_partition_lag_messages") != 0 {
				ok = false
			}
		}
		if ok {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the cluster did not settle within %v", limit)
}

func owned(ps []*proc) int {
	n := 0
	for _, p := range ps {
		n += int(metric(p, "tracebridge_cluster_owned_partitions"))
	}
	return n
}

// metric sums a metric's samples on p's /metrics (-1 when unreachable).
func metric(p *proc, name string) float64 {
	resp, err := http.Get(p.http + "/metrics")
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		if !strings.HasPrefix(l, name) || len(l) > len(name) && l[len(name)] != ' ' && l[len(name)] != '{' {
			continue
		}
		if v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64); err == nil {
			sum += v
		}
	}
	return sum
}

var seq atomic.Int64

// otlpTrace is one OTLP/JSON request of a trace of n spans.
func otlpTrace(id string, n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"bench"}},{"key":"host.name","value":{"stringValue":"bench-host"}}]},"scopeSpans":[{"spans":[`)
	now := time.Now().UnixNano()
	for k := range n {
		if k > 0 {
			b.WriteByte(',')
		}
		parent := ""
		if k > 0 {
			parent = `,"parentSpanId":"0000000000000001"`
		}
		fmt.Fprintf(&b, `{"traceId":%q,"spanId":"%016x"%s,"name":"op-%d","startTimeUnixNano":"%d","endTimeUnixNano":"%d","attributes":[{"key":"k","value":{"stringValue":"v%d"}}]}`,
			id, k+1, parent, k, now, now+1000, k)
	}
	b.WriteString(`]}]}]}`)
	return b.Bytes()
}

// otlpBody returns a function making a request of n spans (traces of 5)
// with fresh trace ids.
func otlpBody(n int) func() []byte {
	return func() []byte {
		var b bytes.Buffer
		b.WriteString(`{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"bench"}}]},"scopeSpans":[{"spans":[`)
		now := time.Now().UnixNano()
		for k := range n {
			if k > 0 {
				b.WriteByte(',')
			}
			if k%5 == 0 {
				seq.Add(1)
			}
			parent := ""
			if k%5 > 0 {
				parent = `,"parentSpanId":"0000000000000001"`
			}
			fmt.Fprintf(&b, `{"traceId":"%016x%016x","spanId":"%016x"%s,"name":"op-%d","startTimeUnixNano":"%d","endTimeUnixNano":"%d"}`,
				now, seq.Load(), k%5+1, parent, k%5, now, now+1000)
		}
		b.WriteString(`]}]}]}`)
		return b.Bytes()
	}
}

func post(addr string, body []byte) error {
	resp, err := http.Post("http://"+addr+"/v1/traces", "application/json", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, resp.Body)
	if resp.StatusCode != 200 {
		return fmt.Errorf("POST %s: %s", addr, resp.Status)
	}
	return nil
}

// load posts requests from o.clients clients to targets in turn for
// o.dur and returns the spans answered 200.
func load(ctx context.Context, targets []string, body func() []byte, o options) int64 {
	var spans atomic.Int64
	var wg sync.WaitGroup
	end := time.Now().Add(o.dur)
	for c := range o.clients {
		wg.Go(func() {
			for i := c; time.Now().Before(end) && ctx.Err() == nil; i++ {
				if post(targets[i%len(targets)], body()) == nil {
					spans.Add(int64(o.spans))
				} else {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	return spans.Load()
}
