package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	natsserver "github.com/nats-io/nats-server/v2/server"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/objstore/objstoretest"
	"github.com/tracebridge/tracebridge/internal/servicetest"
)

// The end-to-end proofs of cluster mode (issue 24, docs/CLUSTER.md): real
// binaries, each with its embedded NATS server in one JetStream cluster
// (or connected to an external one), a real S3 server for the blocks.

// clusterNode is one node of a test cluster.
type clusterNode struct {
	name, host, dir, cfg string
	nats                 string // its embedded NATS server's client address
	p                    *bridgetest.Process
	base                 string // its API's URL
}

// clusterYAML is a node with OTLP/HTTP and ZICO receivers, a trace
// window of 300 ms, the store in the bucket of c, and cluster (the
// cluster: section's keys, indented).
func clusterYAML(host string, c objstore.S3Config, cluster string) string {
	return nodeYAML(host, c, "300ms", []string{"otlp:otlp-http", "zico:zico"}, cluster)
}

// nodeYAML is a node (or, with cluster "", a single bridge) with
// receivers ("name:type", each on a free port of host), a trace window
// of window, the store in the bucket of c, and cluster (the cluster:
// section's keys, indented).
func nodeYAML(host string, c objstore.S3Config, window string, receivers []string, cluster string) string {
	var recv strings.Builder
	for _, r := range receivers {
		name, typ, _ := strings.Cut(r, ":")
		fmt.Fprintf(&recv, "  - {name: %s, type: %s, listen: \"%s:0\"}\n", name, typ, host)
	}
	y := fmt.Sprintf(`flush_interval: 100ms
traces: {window: %[2]s}
http: %[1]s:0
receivers:
%[3]ssinks:
  - type: store
    path: store
    backend: s3
    s3: {endpoint: %[4]q, bucket: %[5]q, prefix: %[6]q, access_key_file: %[7]q, secret_key_file: %[8]q, retry_wait: 20ms}
`, host, window, recv.String(), c.Endpoint, c.Bucket, c.Prefix, c.AccessKeyFile, c.SecretKeyFile)
	if cluster != "" {
		y += "cluster:\n" + cluster
	}
	return y
}

// embeddedCluster writes the configurations of n nodes on 127.0.0.1…n,
// each with its embedded NATS server routed to the others'.
func embeddedCluster(t *testing.T, c objstore.S3Config, n, partitions int) []*clusterNode {
	t.Helper()
	return embeddedClusterOf(t, c, n, partitions, clusterYAML, nil)
}

// embeddedClusterWith is embeddedCluster with the nodes' configuration
// made by yaml (clusterYAML's arguments).
func embeddedClusterWith(t *testing.T, c objstore.S3Config, n, partitions int, yaml func(host string, c objstore.S3Config, cluster string) string) []*clusterNode {
	t.Helper()
	return embeddedClusterOf(t, c, n, partitions, yaml, nil)
}

// embeddedClusterVia is embeddedCluster whose node from reaches node to's
// route port addr at via(from, to, addr) (nil: at addr).
func embeddedClusterVia(t *testing.T, c objstore.S3Config, n, partitions int, via func(from, to int, addr string) string) []*clusterNode {
	t.Helper()
	return embeddedClusterOf(t, c, n, partitions, clusterYAML, via)
}

// embeddedClusterOf is embeddedCluster with the nodes' configuration made
// by yaml and their routes by via (nil: direct).
func embeddedClusterOf(t *testing.T, c objstore.S3Config, n, partitions int, yaml func(host string, c objstore.S3Config, cluster string) string, via func(from, to int, addr string) string) []*clusterNode {
	t.Helper()
	nodes := make([]*clusterNode, n)
	routes := make([]string, n)
	clients := make([]string, n)
	for i := range nodes {
		host := "127.0.0." + strconv.Itoa(i+1)
		nodes[i] = &clusterNode{name: "n" + strconv.Itoa(i+1), host: host, dir: t.TempDir()}
		clients[i] = net.JoinHostPort(host, strconv.Itoa(servicetest.FreePortOn(t, host)))
		nodes[i].nats = clients[i]
		routes[i] = net.JoinHostPort(host, strconv.Itoa(servicetest.FreePortOn(t, host)))
	}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, nd := range nodes {
			if nd.p != nil {
				t.Logf("node %s stderr:\n%s", nd.name, nd.p.Stderr())
			}
		}
	})
	for i, nd := range nodes {
		var others []string
		for j := range nodes {
			if j == i {
				continue
			}
			r := routes[j]
			if via != nil {
				r = via(i, j, r)
			}
			others = append(others, strconv.Quote(r))
		}
		sec := fmt.Sprintf("  node: %s\n  nats_listen: %s\n  cluster_listen: %s\n  routes: [%s]\n  partitions: %d\n",
			nd.name, clients[i], routes[i], strings.Join(others, ", "), partitions)
		nd.cfg = bridgetest.WriteConfig(t, nd.dir, yaml(nd.host, c, sec))
	}
	return nodes
}

// start starts the node's binary.
func (nd *clusterNode) start(t *testing.T) {
	t.Helper()
	nd.p = bridgetest.Start(t, nd.dir, "-c", nd.cfg)
	nd.base = httpURL(t, nd.p)
}

// metric returns the sum of a metric's samples on the node's /metrics
// (-1 when the node does not answer).
func (nd *clusterNode) metric(name string) float64 {
	resp, err := probeClient.Get(nd.base + "/metrics")
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

// probeClient asks nodes for their metrics and status: a node paused
// (SIGSTOP) must not hold the test.
var probeClient = &http.Client{Timeout: 5 * time.Second}

// waitOwned waits until the nodes own every partition between them and
// nothing waits in the stream, as each node read the stream after the
// call.
func waitOwned(t *testing.T, nodes []*clusterNode, partitions int, limit time.Duration) {
	t.Helper()
	since := float64(time.Now().UnixNano()) / 1e9
	var last string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last seen: %s", last)
		}
	})
	waitUntil(t, limit, "every partition owned and checkpointed", func() bool {
		owned, lag := 0.0, 0.0
		last = ""
		for _, nd := range nodes {
			o := nd.metric("tracebridge_cluster_owned_partitions")
			l := nd.metric("tracebridge_cluster_partition_lag_messages")
			last += fmt.Sprintf("%s owns %v, lag %v; ", nd.name, o, l)
			if o < 0 || nd.metric("tracebridge_cluster_partition_lag_timestamp_seconds") < since {
				return false
			}
			owned += o
			lag = max(lag, l)
		}
		return int(owned) == partitions && lag == 0
	})
}

// otlpSender sends traces of 5 spans with the OpenTelemetry SDK's
// OTLP/HTTP exporter, one export per trace, no retries; acked holds the
// trace ids whose export succeeded.
type otlpSender struct {
	mu    sync.Mutex
	acked map[string]bool
	// pace is the pause between two traces (0: none).
	pace time.Duration
}

func (s *otlpSender) run(t *testing.T, addr, service string, stop <-chan struct{}) {
	ctx := context.Background()
	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpoint(addr), otlptracehttp.WithInsecure(),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}), otlptracehttp.WithTimeout(20*time.Second))
	if err != nil {
		t.Error(err)
		return
	}
	defer exp.Shutdown(ctx)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(resource.NewWithAttributes(semconv.SchemaURL, semconv.ServiceName(service), semconv.HostName(service+"-host"))),
		sdktrace.WithSpanProcessor(rec))
	defer tp.Shutdown(ctx)
	tr := tp.Tracer("cluster-test")
	done := 0
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		rctx, root := tr.Start(ctx, "GET /item", sdktracerAttrs(i)...)
		for k := range 4 {
			_, c := tr.Start(rctx, "step-"+strconv.Itoa(k))
			c.End()
		}
		root.End()
		ended := rec.Ended()
		spans := ended[done:]
		done = len(ended)
		if err := exp.ExportSpans(ctx, spans); err != nil {
			time.Sleep(50 * time.Millisecond) // a node killed, or busy
			continue
		}
		s.mu.Lock()
		s.acked[root.SpanContext().TraceID().String()] = true
		s.mu.Unlock()
		if s.pace > 0 {
			select {
			case <-stop:
				return
			case <-time.After(s.pace):
			}
		}
	}
}

func sdktracerAttrs(i int) []oteltrace.SpanStartOption {
	return []oteltrace.SpanStartOption{oteltrace.WithAttributes(attribute.Int("request", i))}
}

func (s *otlpSender) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.acked))
	for id := range s.acked {
		out = append(out, id)
	}
	return out
}

// checkCluster checks, through one node's API, that every acknowledged
// OTLP trace is there whole (5 spans, each once) and every acknowledged
// zorka trace once (checkAcked).
func checkCluster(t *testing.T, nd *clusterNode, otlp []string, zico map[int]bool) {
	t.Helper()
	// The node's reader lists the bucket's new blocks every second: wait
	// (generously, the machine may be busy) until every acknowledged OTLP
	// trace is whole through it, then check everything.
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) && !otlpWhole(t, nd, otlp) {
		time.Sleep(500 * time.Millisecond)
	}
	bad := 0
	for _, id := range otlp {
		tr, ok := tryTrace(t, nd.base, id)
		spans := map[string]bool{}
		for _, sp := range tr.Spans {
			spans[sp.SpanID] = true
		}
		if !ok || len(tr.Spans) != 5 || len(spans) != 5 {
			bad++
			if bad <= 5 {
				t.Errorf("node %s: acknowledged OTLP trace %s: found %v, %d spans (%d distinct), want 5", nd.name, id, ok, len(tr.Spans), len(spans))
			}
		}
	}
	if bad > 0 {
		t.Errorf("node %s: %d of %d acknowledged OTLP traces not whole and once", nd.name, bad, len(otlp))
	}
	n := checkAcked(t, nd.base, zico)
	t.Logf("node %s: %d OTLP and %d zorka traces acknowledged; %d traces in the search", nd.name, len(otlp), len(zico), n)
}

// otlpWhole says whether every trace of ids has its 5 spans, each once,
// through nd's API.
func otlpWhole(t *testing.T, nd *clusterNode, ids []string) bool {
	for _, id := range ids {
		tr, ok := tryTrace(t, nd.base, id)
		spans := map[string]bool{}
		for _, sp := range tr.Spans {
			spans[sp.SpanID] = true
		}
		if !ok || len(tr.Spans) != 5 || len(spans) != 5 {
			return false
		}
	}
	return true
}

// TestClusterKill9: three nodes on 127.0.0.1–3, each with its embedded
// NATS server in one JetStream cluster (R3), blocks in one S3 bucket;
// the OpenTelemetry SDK sends to two nodes, a zorka agent to the third;
// one node is killed (-9) in the middle. Every acknowledged trace is
// then found whole and once through each surviving node's API; the
// killed node comes back, takes partitions again and finds everything
// too.
func TestClusterKill9(t *testing.T) {
	srv := objstoretest.Start(t)
	c := srv.Bucket(t, "traces", "cluster/")
	const partitions = 8
	nodes := embeddedCluster(t, c, 3, partitions)
	for _, nd := range nodes {
		nd.start(t)
	}
	waitOwned(t, nodes, partitions, 120*time.Second)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	o1, o2 := &otlpSender{acked: map[string]bool{}}, &otlpSender{acked: map[string]bool{}}
	wg.Go(func() { o1.run(t, nodes[0].p.Addr("otlp"), "shop", stop) })
	wg.Go(func() { o2.run(t, nodes[1].p.Addr("otlp"), "cart", stop) })
	zs := newSender()
	wg.Go(func() { zs.run(nodes[2].p.Addr("zico"), "zorka-host", 7, 100, 30*time.Second, stop) })
	waitUntil(t, 60*time.Second, "traces acknowledged by every node", func() bool {
		return len(o1.ids()) >= 50 && len(o2.ids()) >= 50 && zs.n.Load() >= 50
	})
	// Mid-ingest: the second node goes, with the partitions it owns.
	nodes[1].p.Kill()
	killed := time.Now()
	before := len(o1.ids()) + int(zs.n.Load())
	waitUntil(t, 60*time.Second, "ingest going on after the kill", func() bool { return len(o1.ids())+int(zs.n.Load()) >= before+100 })
	close(stop)
	wg.Wait()
	alive := []*clusterNode{nodes[0], nodes[2]}
	waitOwned(t, alive, partitions, 120*time.Second)
	t.Logf("every partition owned and checkpointed %v after the kill (ingest went on for part of it)", time.Since(killed).Round(100*time.Millisecond))
	otlp := append(o1.ids(), o2.ids()...)
	zico := zs.ackedIDs()
	for _, nd := range alive {
		checkCluster(t, nd, otlp, zico)
	}

	// The killed node comes back: it rejoins, takes its share again and
	// sees everything.
	nodes[1].start(t)
	waitOwned(t, nodes, partitions, 120*time.Second)
	waitUntil(t, 60*time.Second, "the restarted node owning partitions", func() bool {
		return nodes[1].metric("tracebridge_cluster_owned_partitions") > 0
	})
	checkCluster(t, nodes[1], otlp, zico)
	for _, nd := range []*clusterNode{nodes[0], nodes[1], nodes[2]} {
		nd.p.Stop()
	}
}

// natsCluster starts n NATS servers (nats-server/v2, in the test's
// process) in one cluster with JetStream, on 127.0.0.1, and returns their
// client URLs and the servers.
func natsCluster(t *testing.T, n int) ([]string, []*natsserver.Server) {
	t.Helper()
	client, route := make([]int, n), make([]int, n)
	for i := range n {
		client[i], route[i] = servicetest.FreePortOn(t, "127.0.0.1"), servicetest.FreePortOn(t, "127.0.0.1")
	}
	var urls []string
	var servers []*natsserver.Server
	for i := range n {
		var routes []string
		for j := range n {
			if j != i {
				routes = append(routes, "nats-route://127.0.0.1:"+strconv.Itoa(route[j]))
			}
		}
		s, err := natsserver.NewServer(&natsserver.Options{ServerName: "ext" + strconv.Itoa(i+1), Host: "127.0.0.1", Port: client[i],
			JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true,
			Cluster: natsserver.ClusterOpts{Name: "external", Host: "127.0.0.1", Port: route[i]},
			Routes:  natsserver.RoutesFromStr(strings.Join(routes, ","))})
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		if !s.ReadyForConnections(30 * time.Second) {
			t.Fatalf("NATS server %d not ready", i+1)
		}
		t.Cleanup(s.Shutdown)
		urls = append(urls, "nats://127.0.0.1:"+strconv.Itoa(client[i]))
		servers = append(servers, s)
	}
	return urls, servers
}

// TestClusterExternalNATS: two nodes configured with `nats:` on an
// existing three-server NATS cluster (no embedded servers); one NATS
// server is lost mid-ingest. Every acknowledged trace is found whole and
// once through both nodes.
func TestClusterExternalNATS(t *testing.T) {
	srv := objstoretest.Start(t)
	c := srv.Bucket(t, "traces", "external/")
	urls, servers := natsCluster(t, 3)
	const partitions = 8
	nodes := []*clusterNode{{name: "e1", host: "127.0.0.1"}, {name: "e2", host: "127.0.0.2"}}
	for _, nd := range nodes {
		nd.dir = t.TempDir()
		sec := fmt.Sprintf("  node: %s\n  nats: %s\n  partitions: %d\n", nd.name, strings.Join(urls, ","), partitions)
		nd.cfg = bridgetest.WriteConfig(t, nd.dir, clusterYAML(nd.host, c, sec))
		nd.start(t)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, nd := range nodes {
				t.Logf("node %s stderr:\n%s", nd.name, nd.p.Stderr())
			}
		}
	})
	waitOwned(t, nodes, partitions, 120*time.Second)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	o := &otlpSender{acked: map[string]bool{}}
	wg.Go(func() { o.run(t, nodes[0].p.Addr("otlp"), "shop", stop) })
	zs := newSender()
	wg.Go(func() { zs.run(nodes[1].p.Addr("zico"), "zorka-host", 11, 100, 30*time.Second, stop) })
	waitUntil(t, 60*time.Second, "traces acknowledged", func() bool { return len(o.ids()) >= 50 && zs.n.Load() >= 50 })
	// A NATS server of the cluster goes (the first of every node's list).
	servers[0].Shutdown()
	before := len(o.ids()) + int(zs.n.Load())
	waitUntil(t, 90*time.Second, "ingest going on after a NATS server went", func() bool { return len(o.ids())+int(zs.n.Load()) >= before+100 })
	close(stop)
	wg.Wait()
	waitOwned(t, nodes, partitions, 120*time.Second)
	for _, nd := range nodes {
		checkCluster(t, nd, o.ids(), zs.ackedIDs())
	}
	for _, nd := range nodes {
		nd.p.Stop()
	}
}
