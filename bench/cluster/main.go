// Cluster is tracebridge's cluster benchmark (docs/CLUSTER.md): what a
// node of a three-node cluster costs per span against a single `serve`
// in the same run, how long a takeover takes after `kill -9`, and how
// long after its acknowledgement a trace is searchable on another node.
// It is run by hand (go run ./bench/cluster), never by CI.
//
// It builds tracebridge, starts versitygw (an S3 server; `go install
// github.com/versity/versitygw/cmd/versitygw@v1.8.0`) and three nodes on
// 127.0.0.1–3 with embedded NATS servers in one JetStream cluster, plus
// a single bridge with the same store settings; with -base-bin, a second
// three-node cluster of that binary beside it (another store prefix,
// other ports), measured in the same rounds. Phases:
//
//   - ingest, -ingest-rounds times: K clients post OTLP/JSON requests of
//     S spans (traces of 5 spans) for D to the single bridge, then the
//     same to each cluster's three nodes in turn (the order of the
//     targets turns each round); spans answered 200 per CPU-second
//     (utime+stime of the single bridge; of a cluster's three nodes
//     together, until every partition is checkpointed), less what each
//     target used while idle just before;
//   - profile (-profile DIR): one more ingest per cluster, not counted,
//     with a CPU profile of every node over it; DIR gets the profiles,
//     each cluster's top functions and the share of the embedded NATS
//     servers' code (github.com/nats-io/nats-server) in its samples;
//   - delay: a trace posted to node 1, then GET from node 3 every 50 ms
//     until found, N times;
//   - takeover: kill -9 of a node, then the time until the others own
//     every partition (their /metrics, every 100 ms); the node restarts
//     and the cluster settles before the next kill, N times in each
//     cluster (the clusters in turn), each kill noting whether the
//     victim led the lease bucket (-kill-leader: every other kill is of
//     that leader).
//
// Concurrency: one goroutine per client, one per profile being fetched;
// everything else on the main goroutine. The bridges and versitygw are
// child processes.
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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/natsd"
)

func main() {
	os.Exit(run())
}

type options struct {
	dur          time.Duration
	clients      int
	spans        int
	rounds       int
	ingestRounds int
	partitions   int
	keep         bool
	bin          string
	base         string
	profile      string
	killLeader   bool
}

func run() int {
	var o options
	flag.DurationVar(&o.dur, "duration", 15*time.Second, "ingest time per target")
	flag.IntVar(&o.clients, "clients", 16, "concurrent OTLP clients")
	flag.IntVar(&o.spans, "spans", 500, "spans per request (traces of 5)")
	flag.IntVar(&o.rounds, "rounds", 5, "kills and delay probes (0: none)")
	flag.IntVar(&o.ingestRounds, "ingest-rounds", 1, "ingest rounds (every target once a round)")
	flag.IntVar(&o.partitions, "partitions", 32, "partitions of the cluster")
	flag.BoolVar(&o.keep, "keep", false, "keep the work directory")
	flag.StringVar(&o.bin, "tracebridge", "", "the binary (default: built from this module)")
	flag.StringVar(&o.base, "base-bin", "", "a second tracebridge binary (e.g. main's): its own three-node cluster, measured in the same rounds")
	flag.StringVar(&o.profile, "profile", "", "after the ingest rounds, one more ingest per cluster with a CPU profile of each node, written to DIR")
	flag.BoolVar(&o.killLeader, "kill-leader", false, "every other kill is of the node leading the lease bucket's Raft group ("+leaseStream+"), the others of a node that does not")
	flag.StringVar(&logDir, "logs", "", "append each process's log to DIR/<node>.log (a takeover's timeline: the kills are logged with their time)")
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
	pprof  string // its /debug/pprof/ address ("" when not served)
	stderr *benchkit.Tail
	done   chan struct{}
}

// logDir (-logs) keeps every process's log, appended to DIR/NAME.log.
var logDir string

var httpLine = regexp.MustCompile(`^tracebridge: http on (http://\S+)/ `)
var otlpLine = regexp.MustCompile(`^tracebridge: receiver otlp \(otlp-http\) listening on (\S+)`)

// startServe starts bin serve -c cfg in dir and waits for ready; it
// returns the process with its API's URL, and the OTLP address. With
// pprof (a loopback HOST:PORT) the process serves its profiles there.
func startServe(ctx context.Context, bin, dir, cfg, pprof string) (*proc, string, error) {
	p := &proc{stderr: benchkit.NewTail(64 << 10), done: make(chan struct{}), pprof: pprof}
	p.cmd = exec.CommandContext(ctx, bin, "serve", "-c", cfg)
	p.cmd.Dir = dir
	p.cmd.Stderr = p.stderr
	if logDir != "" {
		if f, err := os.OpenFile(filepath.Join(logDir, filepath.Base(dir)+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644); err == nil {
			p.cmd.Stderr = io.MultiWriter(p.stderr, f)
		}
	}
	if pprof != "" {
		p.cmd.Env = append(os.Environ(), "TRACEBRIDGE_PPROF="+pprof)
	}
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

const commonYAML = "traces: {window: 1s}\nreceivers:\n  - {name: otlp, type: otlp-http, listen: \"%s:0\"}\nhttp: %s:0\n"

// node is one node of a cluster.
type node struct {
	dir, cfg, otlp, pprof string
	nats                  string // its embedded NATS server's client address
	p                     *proc
}

// cluster is three nodes of one binary on 127.0.0.1–3.
type cluster struct {
	name  string
	bin   string
	nodes []*node
}

// newCluster writes the node files of a three-node cluster of bin under
// dir/<name>N, its blocks under the store prefix name/, and starts it.
func newCluster(ctx context.Context, name, bin, dir, endpoint, access, secret string, o options) (*cluster, error) {
	c := &cluster{name: name, bin: bin, nodes: make([]*node, 3)}
	client, route := make([]string, 3), make([]string, 3)
	for i := range c.nodes {
		h := "127.0.0." + strconv.Itoa(i+1)
		client[i] = net.JoinHostPort(h, strconv.Itoa(freePort(h)))
		route[i] = net.JoinHostPort(h, strconv.Itoa(freePort(h)))
	}
	for i := range c.nodes {
		h := "127.0.0." + strconv.Itoa(i+1)
		var others []string
		for j := range c.nodes {
			if j != i {
				others = append(others, strconv.Quote(route[j]))
			}
		}
		nd := &node{dir: filepath.Join(dir, name+strconv.Itoa(i+1)), nats: client[i]}
		if o.profile != "" {
			nd.pprof = net.JoinHostPort(h, strconv.Itoa(freePort(h)))
		}
		os.MkdirAll(nd.dir, 0o755)
		nd.cfg = filepath.Join(nd.dir, "tracebridge.yaml")
		yaml := fmt.Sprintf(commonYAML, h, h) + fmt.Sprintf(storeYAML, endpoint, name+"/", access, secret) +
			fmt.Sprintf("cluster: {node: n%d, nats_listen: %q, cluster_listen: %q, routes: [%s], partitions: %d}\n", i+1, client[i], route[i], strings.Join(others, ", "), o.partitions)
		os.WriteFile(nd.cfg, []byte(yaml), 0o644)
		c.nodes[i] = nd
	}
	for _, nd := range c.nodes {
		var err error
		if nd.p, nd.otlp, err = startServe(ctx, bin, nd.dir, nd.cfg, nd.pprof); err != nil {
			c.stop()
			return nil, err
		}
	}
	return c, nil
}

// procs returns the processes of nodes which (all without).
func (c *cluster) procs(which ...int) []*proc {
	if len(which) == 0 {
		which = []int{0, 1, 2}
	}
	var out []*proc
	for _, i := range which {
		out = append(out, c.nodes[i].p)
	}
	return out
}

func (c *cluster) otlps() []string {
	var out []string
	for _, nd := range c.nodes {
		out = append(out, nd.otlp)
	}
	return out
}

func (c *cluster) stop() {
	for _, nd := range c.nodes {
		if nd.p != nil {
			nd.p.stop()
		}
	}
}

// target is what one ingest phase loads: a single bridge or a cluster.
type target struct {
	name    string
	procs   []*proc
	otlp    []string
	settle  func() error // waits until what was acknowledged is in durable blocks
	samples []sample
}

// sample is one ingest phase of a target.
type sample struct {
	spans    int64
	raw, net float64 // CPU-seconds: all of it, and less the idle rate
}

func (s sample) perCPU() float64 { return float64(s.spans) / s.net }

// perRaw counts the idle CPU too: noisier than nothing, since a busy
// machine delays a phase's trailing work (checkpoints, compactions) into
// the next phase's idle measurement.
func (s sample) perRaw() float64 { return float64(s.spans) / s.raw }

func cpuOf(ps []*proc) time.Duration {
	var sum time.Duration
	for _, p := range ps {
		c, _ := benchkit.CPU(p.cmd.Process.Pid)
		sum += c
	}
	return sum
}

// measure runs one ingest phase of t. Its CPU while idle (heartbeats,
// leases, checkpoints, Raft) is measured first, for 5 s, and taken off
// its CPU under load.
func measure(ctx context.Context, t *target, body func() []byte, o options) (sample, error) {
	c0, t0 := cpuOf(t.procs), time.Now()
	time.Sleep(5 * time.Second)
	rate := (cpuOf(t.procs) - c0).Seconds() / time.Since(t0).Seconds()
	c0, t0 = cpuOf(t.procs), time.Now()
	spans := load(ctx, t.otlp, body, o)
	if err := t.settle(); err != nil {
		return sample{}, fmt.Errorf("%s: %w", t.name, err)
	}
	raw := (cpuOf(t.procs) - c0).Seconds()
	return sample{spans: spans, raw: raw, net: raw - rate*time.Since(t0).Seconds()}, nil
}

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

	// The single bridge.
	sdir := filepath.Join(dir, "single")
	os.MkdirAll(sdir, 0o755)
	scfg := filepath.Join(sdir, "tracebridge.yaml")
	os.WriteFile(scfg, []byte(fmt.Sprintf(commonYAML, "127.0.0.1", "127.0.0.1")+fmt.Sprintf(storeYAML, endpoint, "single/", access, secret)), 0o644)
	single, sotlp, err := startServe(ctx, bin, sdir, scfg, "")
	if err != nil {
		return err
	}
	defer single.stop()

	// The clusters.
	clusters := []*cluster{}
	defer func() {
		for _, c := range clusters {
			c.stop()
		}
	}()
	tested, err := newCluster(ctx, "n", bin, dir, endpoint, access, secret, o)
	if err != nil {
		return err
	}
	clusters = append(clusters, tested)
	if o.base != "" {
		base, err := newCluster(ctx, "b", o.base, dir, endpoint, access, secret, o)
		if err != nil {
			return fmt.Errorf("base cluster: %w", err)
		}
		clusters = append(clusters, base)
	}
	for _, c := range clusters {
		if err := settle(c.procs(), o.partitions, 3*time.Minute); err != nil {
			return err
		}
	}
	logf("clusters ready")

	// Ingest.
	targets := []*target{{name: "single serve", procs: []*proc{single}, otlp: []string{sotlp}, settle: func() error {
		time.Sleep(3 * time.Second) // its window and a sync: the spans stored
		return nil
	}}}
	for _, c := range clusters {
		name := "cluster (3 nodes, R3)"
		if o.base != "" {
			name = "cluster " + filepath.Base(c.bin)
		}
		targets = append(targets, &target{name: name, procs: c.procs(), otlp: c.otlps(), settle: func() error {
			return settle(c.procs(), o.partitions, 3*time.Minute) // every span in durable blocks
		}})
	}
	body := otlpBody(o.spans)
	fmt.Printf("ingest (%v, %d clients, %d spans a request; CPU less each target's idle CPU; clusters: the 3 nodes together)\n", o.dur, o.clients, o.spans)
	for r := range o.ingestRounds {
		for k := range targets {
			t := targets[(k+r)%len(targets)]
			s, err := measure(ctx, t, body, o)
			if err != nil {
				return err
			}
			t.samples = append(t.samples, s)
			fmt.Printf("  round %d %-24s %9d spans (%7.0f/s), %6.1f CPU-s (%5.1f raw), %9.0f spans/CPU-s (%7.0f raw)\n",
				r+1, t.name+":", s.spans, float64(s.spans)/o.dur.Seconds(), s.net, s.raw, s.perCPU(), s.perRaw())
		}
		line := fmt.Sprintf("  round %d: the single's CPU per span ×", r+1)
		for _, t := range targets[1:] {
			line += fmt.Sprintf(" %.2f (%s)", targets[0].samples[r].perCPU()/t.samples[r].perCPU(), t.name)
		}
		if len(targets) == 3 {
			line += fmt.Sprintf("; %s ÷ %s spans per CPU-second: %.2f (raw %.2f)", targets[1].name, targets[2].name,
				targets[1].samples[r].perCPU()/targets[2].samples[r].perCPU(), targets[1].samples[r].perRaw()/targets[2].samples[r].perRaw())
		}
		fmt.Println(line)
	}
	if o.ingestRounds > 1 {
		fmt.Printf("median of %d rounds:\n", o.ingestRounds)
		for _, t := range targets {
			m := medianOf(t.samples, sample.perCPU)
			fmt.Printf("  %-24s %9.0f spans/s, %9.0f spans/CPU-s (%7.0f raw): %.2f× the single's CPU per span\n", t.name+":",
				medianOf(t.samples, func(s sample) float64 { return float64(s.spans) / o.dur.Seconds() }), m, medianOf(t.samples, sample.perRaw), medianOf(targets[0].samples, sample.perCPU)/m)
		}
		if len(targets) == 3 {
			ratios, raws := make([]float64, o.ingestRounds), make([]float64, o.ingestRounds)
			for r := range ratios {
				ratios[r] = targets[1].samples[r].perCPU() / targets[2].samples[r].perCPU()
				raws[r] = targets[1].samples[r].perRaw() / targets[2].samples[r].perRaw()
			}
			slices.Sort(ratios)
			slices.Sort(raws)
			fmt.Printf("  %s ÷ %s spans per CPU-second, each round: %.2f (median %.2f); raw: %.2f (median %.2f)\n", targets[1].name, targets[2].name, ratios, ratios[len(ratios)/2], raws, raws[len(raws)/2])
		}
	}
	if o.profile != "" {
		for i, c := range clusters {
			if err := profileCluster(ctx, c, targets[1+i], body, o, logf); err != nil {
				return err
			}
		}
	}
	if o.rounds == 0 {
		return nil
	}
	nodes := tested.nodes

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

	// Takeover after kill -9, in each cluster in turn.
	type kills struct {
		all, led, other []time.Duration
	}
	per := make([]kills, len(clusters))
	for r := range o.rounds {
		for i, c := range clusters {
			d, led, err := killOne(ctx, c, r, o, logf)
			if err != nil {
				return fmt.Errorf("cluster %s: %w", filepath.Base(c.bin), err)
			}
			per[i].all = append(per[i].all, d)
			if led {
				per[i].led = append(per[i].led, d)
			} else {
				per[i].other = append(per[i].other, d)
			}
		}
	}
	for i, c := range clusters {
		k := per[i]
		fmt.Printf("takeover after kill -9, %s: p50 %v, max %v (%d kills: %s)", filepath.Base(c.bin), p50(k.all).Round(10*time.Millisecond), slices.Max(k.all).Round(10*time.Millisecond), len(k.all), durations(k.all))
		if len(k.led) > 0 {
			fmt.Printf("; victim led %s: %s", leaseStream, durations(k.led))
		}
		if len(k.other) > 0 {
			fmt.Printf("; it did not: %s", durations(k.other))
		}
		fmt.Println()
	}
	return nil
}

// leaseStream is the stream of the cluster's lease bucket (tb_leases).
const leaseStream = "KV_tb_leases"

// killOne kills a node of c with SIGKILL and measures the time until the
// other two own every partition; then it starts the node again and waits
// for the cluster to settle. With -kill-leader, every other kill (round
// r even) is of the node that leads the lease bucket's Raft group, the
// others of a node that does not; without, node r%3. It reports whether
// the victim led the lease bucket.
func killOne(ctx context.Context, c *cluster, r int, o options, logf func(string, ...any)) (time.Duration, bool, error) {
	nodes := c.nodes
	leader := c.leader(ctx, leaseStream)
	victim := r % 3
	if o.killLeader && leader >= 0 {
		if r%2 == 0 {
			victim = leader
		} else if victim == leader {
			victim = (victim + 1) % 3
		}
	}
	var rest []*proc
	for i, nd := range nodes {
		if i != victim {
			rest = append(rest, nd.p)
		}
	}
	led := victim == leader
	nodes[victim].p.kill()
	t0 := time.Now()
	logf("%s: kill -9 of node %d at %s (it led %s: %v; leader %d)", c.name, victim+1, t0.UTC().Format("15:04:05.000"), leaseStream, led, leader+1)
	for owned(rest) != o.partitions {
		if time.Since(t0) > 2*time.Minute {
			return 0, led, fmt.Errorf("partitions not taken over after 2 minutes")
		}
		time.Sleep(100 * time.Millisecond)
	}
	d := time.Since(t0)
	logf("%s: kill %d (node %d, led %s: %v): taken over in %v", c.name, r+1, victim+1, leaseStream, led, d.Round(10*time.Millisecond))
	var err error
	if nodes[victim].p, nodes[victim].otlp, err = startServe(ctx, c.bin, nodes[victim].dir, nodes[victim].cfg, nodes[victim].pprof); err != nil {
		return d, led, err
	}
	if err := settle(c.procs(), o.partitions, 3*time.Minute); err != nil {
		return d, led, err
	}
	for metric(nodes[victim].p, "tracebridge_cluster_owned_partitions") < 1 {
		time.Sleep(200 * time.Millisecond)
	}
	return d, led, nil
}

// leader is the index of the node whose server leads stream's Raft group
// (-1 when no node can tell), asked through node 1's embedded server (or
// another's) with its credential.
func (c *cluster) leader(ctx context.Context, stream string) int {
	for _, nd := range c.nodes {
		creds, err := natsd.ReadCredentials(natsd.CredentialsFile(filepath.Join(nd.dir, "tracebridge-data")))
		if err != nil {
			continue
		}
		nc, err := nats.Connect("nats://"+nd.nats, nats.UserInfo(creds.User, creds.Password), nats.Timeout(5*time.Second))
		if err != nil {
			continue
		}
		name := func() string {
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return ""
			}
			cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			st, err := js.Stream(cctx, stream)
			if err != nil {
				return ""
			}
			if ci := st.CachedInfo().Cluster; ci != nil {
				return ci.Leader
			}
			return ""
		}()
		for i := range c.nodes {
			if name == "n"+strconv.Itoa(i+1) {
				return i
			}
		}
	}
	return -1
}

func durations(ds []time.Duration) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = fmt.Sprintf("%.2f", d.Seconds())
	}
	return strings.Join(parts, ", ")
}

func medianOf(ss []sample, f func(sample) float64) float64 {
	v := make([]float64, len(ss))
	for i, s := range ss {
		v[i] = f(s)
	}
	slices.Sort(v)
	return v[len(v)/2]
}

func p50(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// settle waits until ps own every partition and nothing waits in the
// stream, as read after the call. It reads each node's /metrics once
// every 500 ms (scraping costs the nodes CPU, which is measured).
func settle(ps []*proc, partitions int, limit time.Duration) error {
	since := float64(time.Now().UnixNano()) / 1e9
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		owned, ok := 0, true
		for _, p := range ps {
			m := metrics(p, "tracebridge_cluster_owned_partitions", "tracebridge_cluster_partition_lag_timestamp_seconds", "tracebridge_cluster_partition_lag_messages")
			owned += int(m[0])
			if m[1] < since || m[2] != 0 {
				ok = false
			}
		}
		if ok && owned == partitions {
			return nil
		}
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
func metric(p *proc, name string) float64 { return metrics(p, name)[0] }

// metrics sums each metric's samples on p's /metrics (-1 when
// unreachable), reading it once.
func metrics(p *proc, names ...string) []float64 {
	sums := make([]float64, len(names))
	resp, err := http.Get(p.http + "/metrics")
	if err != nil {
		for i := range sums {
			sums[i] = -1
		}
		return sums
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		l := sc.Text()
		for i, name := range names {
			if !strings.HasPrefix(l, name) || len(l) > len(name) && l[len(name)] != ' ' && l[len(name)] != '{' {
				continue
			}
			if v, err := strconv.ParseFloat(l[strings.LastIndexByte(l, ' ')+1:], 64); err == nil {
				sums[i] += v
			}
		}
	}
	return sums
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
