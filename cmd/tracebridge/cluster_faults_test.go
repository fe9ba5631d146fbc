package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/pdata/ptrace/ptraceotlp"

	"github.com/tracebridge/tracebridge/internal/cluster"
	"github.com/tracebridge/tracebridge/internal/clusterstatus"
	"github.com/tracebridge/tracebridge/internal/objstore/objstoretest"
)

// The faults of issue 24 not covered by TestClusterKill9 and
// TestClusterExternalNATS: a network partition of one node, the object
// store unreachable for a minute, a slow (paused) partition owner. One
// cluster of three real binaries is shared by the subtests, each of which
// leaves it healthy again.

var s3Outage = flag.Duration("cluster-s3-outage", time.Minute, "how long TestClusterFaults keeps the object store unreachable (15 s under -short)")

// TestClusterFaults: three nodes on 127.0.0.1–3 (embedded NATS, R3), whose
// route connections all pass through proxies of the test, and versitygw.
func TestClusterFaults(t *testing.T) {
	srv := objstoretest.Start(t)
	c := srv.Bucket(t, "traces", "faults/")
	const partitions = 8
	links := newLinks(t, 3)
	nodes := embeddedClusterVia(t, c, 3, partitions, links.via)
	for _, nd := range nodes {
		nd.start(t)
	}
	waitOwned(t, nodes, partitions, 120*time.Second)

	ok := t.Run("partition", func(t *testing.T) { testPartition(t, nodes, links, partitions) }) &&
		t.Run("store-outage", func(t *testing.T) { testStoreOutage(t, nodes, srv, partitions) }) &&
		t.Run("pause", func(t *testing.T) { testPause(t, nodes, partitions) })
	if !ok {
		for _, nd := range nodes {
			t.Logf("node %s stderr:\n%s", nd.name, nd.p.Stderr())
		}
		return
	}
	for _, nd := range nodes {
		nd.p.Stop()
	}
}

// testPartition cuts the third node off from the other two (all its
// route links) under load, then heals the partition.
func testPartition(t *testing.T, nodes []*clusterNode, links *links, partitions int) {
	cut := nodes[2]
	from := logOffsets(nodes)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	o1 := &otlpSender{acked: map[string]bool{}, pace: 20 * time.Millisecond}
	o2 := &otlpSender{acked: map[string]bool{}, pace: 20 * time.Millisecond}
	probe := &otlpProbe{service: "edge"}
	wg.Go(func() { o1.run(t, nodes[0].p.Addr("otlp"), "shop", stop) })
	wg.Go(func() { o2.run(t, nodes[1].p.Addr("otlp"), "cart", stop) })
	wg.Go(func() { probe.run(cut.p.Addr("otlp"), stop) })
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	waitUntil(t, 60*time.Second, "traces acknowledged by every node", func() bool {
		return len(o1.ids()) >= 20 && len(o2.ids()) >= 20 && len(probe.ids()) >= 20
	})
	owned := cut.metric("tracebridge_cluster_owned_partitions")
	lost := cut.metric("tracebridge_cluster_leases_lost_total")
	if owned <= 0 {
		t.Fatalf("node %s owns %v partitions before the cut", cut.name, owned)
	}

	links.cut(2)
	cutAt := time.Now()
	t.Logf("node %s cut off, owning %v partitions", cut.name, owned)
	before := len(o1.ids()) + len(o2.ids())
	waitUntil(t, 90*time.Second, "ingest on the majority going on", func() bool { return len(o1.ids())+len(o2.ids()) >= before+100 })
	// The cut-off node loses its leases (fenced), the majority takes them.
	waitUntil(t, 60*time.Second, "the cut-off node fenced", func() bool {
		return cut.metric("tracebridge_cluster_owned_partitions") == 0 && cut.metric("tracebridge_cluster_leases_lost_total") >= lost+owned
	})
	waitUntil(t, 90*time.Second, "the majority owning every partition", func() bool {
		return nodes[0].metric("tracebridge_cluster_owned_partitions")+nodes[1].metric("tracebridge_cluster_owned_partitions") == float64(partitions)
	})
	t.Logf("the majority owns every partition %v after the cut", time.Since(cutAt).Round(100*time.Millisecond))
	// cluster status: the majority lists the cut-off node gone.
	var st clusterstatus.Status
	waitUntil(t, 60*time.Second, "the majority's status listing the cut-off node as gone", func() bool {
		st = clusterStatus(t, nodes[0])
		return slices.ContainsFunc(st.Nodes, func(n clusterstatus.Node) bool { return n.Name == cut.name && !n.Alive }) &&
			slices.ContainsFunc(st.Degraded, func(d string) bool { return strings.Contains(d, cut.name) })
	})
	r := runEnv(t, nil, "cluster", "status", "--url", nodes[0].base)
	t.Logf("cluster status on %s during the cut (exit %d):\n%s", nodes[0].name, r.code, r.stdout)
	if r.code != 1 {
		t.Errorf("cluster status on %s during the cut: exit %d, want 1 (degraded)", nodes[0].name, r.code)
	}
	// The cut-off node says it is degraded too (its stream does not
	// answer), and refuses its clients rather than hanging.
	waitUntil(t, 60*time.Second, "the cut-off node's status degraded", func() bool {
		return len(clusterStatus(t, cut).Degraded) > 0
	})
	r = runEnv(t, nil, "cluster", "status", "--url", cut.base)
	t.Logf("cluster status on %s during the cut (exit %d):\n%s%s", cut.name, r.code, r.stdout, r.stderr)
	if r.code == 0 {
		t.Errorf("cluster status on the cut-off node: exit 0, want degraded")
	}
	refusedFrom := cutAt.Add(time.Second)
	waitUntil(t, 90*time.Second, "the cut-off node answering its clients", func() bool { return len(probe.answeredSince(refusedFrom)) >= 3 })
	close(stop)
	wg.Wait()
	for _, a := range probe.answeredSince(refusedFrom) {
		if a.err != "" || a.code != http.StatusTooManyRequests && a.code != http.StatusServiceUnavailable {
			t.Errorf("cut-off node: a request sent %v after the cut: %d %s after %v, want 429 or 503", a.start.Sub(cutAt).Round(time.Millisecond), a.code, a.err, a.took)
		}
		if a.took > 30*time.Second {
			t.Errorf("cut-off node: a request answered after %v", a.took)
		}
	}
	t.Logf("cut-off node's answers since the cut: %s", probe.summary(refusedFrom))

	links.heal(2)
	healed := time.Now()
	waitUntil(t, 120*time.Second, "the healed node owning partitions again", func() bool {
		return cut.metric("tracebridge_cluster_owned_partitions") > 0
	})
	waitOwned(t, nodes, partitions, 120*time.Second)
	t.Logf("every partition owned and checkpointed %v after the heal", time.Since(healed).Round(100*time.Millisecond))
	ids := append(append(o1.ids(), o2.ids()...), probe.ids()...)
	for _, nd := range nodes {
		checkCluster(t, nd, ids, nil)
	}

	// Each fault event logged once, with node and partition; the cut-off
	// node stopped consuming each partition before another took it.
	logs := nodeLogs(nodes, from)
	fenced := map[string]logEntry{}
	for _, e := range logged(logs, cut.name, "cluster: partition lost") {
		p := e.attr["partition"]
		if _, dup := fenced[p]; dup {
			t.Errorf("node %s: partition %s lost twice in the cut: %s", cut.name, p, e.line)
		}
		fenced[p] = e
		if e.attr["node"] != cut.name {
			t.Errorf("fence logged without the node: %s", e.line)
		}
	}
	if float64(len(fenced)) != owned {
		t.Errorf("node %s: %d partitions logged lost, it owned %v", cut.name, len(fenced), owned)
	}
	for p, f := range fenced {
		taken := false
		for _, nd := range nodes[:2] {
			for _, e := range logged(logs, nd.name, "cluster: partition taken", "partition="+p) {
				if e.at.After(cutAt) && !e.at.After(healed) {
					taken = true
					if e.at.Before(f.at) {
						t.Errorf("partition %s taken by %s at %s before %s stopped reading it (%s): two owners", p, nd.name, e.at.Format(time.TimeOnly+".000"), cut.name, f.at.Format(time.TimeOnly+".000"))
					}
				}
			}
		}
		if !taken {
			t.Errorf("partition %s lost by %s and taken by no other node", p, cut.name)
		}
	}
	for _, nd := range nodes[:2] {
		if n := len(logged(logs, nd.name, goneMsg, "gone="+cut.name)); n != 1 {
			t.Errorf("node %s logged %s gone %d times, want once", nd.name, cut.name, n)
		}
		for _, e := range logged(logs, nd.name, goneMsg, "gone="+nd.name) {
			t.Errorf("node %s declared itself gone: %s", nd.name, e.line)
		}
	}
	checkLogRate(t, logs, 3)
}

// testStoreOutage stops the S3 server for *s3Outage under load, then
// starts it again on the same port and directory.
func testStoreOutage(t *testing.T, nodes []*clusterNode, srv *objstoretest.Server, partitions int) {
	outage := *s3Outage
	if testing.Short() {
		outage = min(outage, 15*time.Second)
	}
	from := logOffsets(nodes)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	o1 := &otlpSender{acked: map[string]bool{}, pace: 20 * time.Millisecond}
	o2 := &otlpSender{acked: map[string]bool{}, pace: 20 * time.Millisecond}
	probe := &otlpProbe{service: "edge"}
	wg.Go(func() { o1.run(t, nodes[0].p.Addr("otlp"), "shop", stop) })
	wg.Go(func() { o2.run(t, nodes[1].p.Addr("otlp"), "cart", stop) })
	wg.Go(func() { probe.run(nodes[2].p.Addr("otlp"), stop) })
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	count := func() int { return len(o1.ids()) + len(o2.ids()) + len(probe.ids()) }
	waitUntil(t, 60*time.Second, "traces acknowledged", func() bool { return count() >= 60 })

	lag := func() float64 {
		// Each node's lag as read after the call.
		since := float64(time.Now().UnixNano()) / 1e9
		waitUntil(t, 60*time.Second, "every node reading the lag", func() bool {
			for _, nd := range nodes {
				if nd.metric("tracebridge_cluster_partition_lag_timestamp_seconds") < since {
					return false
				}
			}
			return true
		})
		sum := 0.0
		for _, nd := range nodes {
			sum += nd.metric("tracebridge_cluster_partition_lag_messages")
		}
		return sum
	}
	srv.Stop()
	down := time.Now()
	before := count()
	lag0 := lag()
	// Ingest goes on into the stream; every node's checkpoints fail and
	// its status says the store is degraded.
	waitUntil(t, 60*time.Second, "every node's status saying the store is degraded", func() bool {
		for _, nd := range nodes {
			st := clusterStatus(t, nd)
			if st.Store.Healthy || !slices.ContainsFunc(st.Degraded, func(d string) bool { return strings.HasPrefix(d, "store") }) {
				return false
			}
		}
		return true
	})
	t.Logf("every node's store degraded %v after the outage began", time.Since(down).Round(100*time.Millisecond))
	r := runEnv(t, nil, "cluster", "status", "--url", nodes[1].base)
	t.Logf("cluster status during the outage (exit %d):\n%s", r.code, r.stdout)
	if r.code != 1 {
		t.Errorf("cluster status during the outage: exit %d, want 1", r.code)
	}
	if rest := time.Until(down.Add(outage)); rest > 0 {
		time.Sleep(rest) // the outage lasts as long as asked
	}
	if got := count(); got < before+100 {
		t.Errorf("%d traces acknowledged in %v without the store, want ingest to go on (≥ 100)", got-before, time.Since(down).Round(time.Second))
	}
	lag1 := lag()
	if lag1 <= lag0 {
		t.Errorf("lag %v at the end of the outage, %v when it began: the stream does not grow", lag1, lag0)
	}
	t.Logf("store away %v: %d traces acknowledged meanwhile, lag %v → %v", time.Since(down).Round(100*time.Millisecond), count()-before, lag0, lag1)
	srv.Restart()
	up := time.Now()
	waitUntil(t, 120*time.Second, "every node's store healthy again", func() bool {
		for _, nd := range nodes {
			if !clusterStatus(t, nd).Store.Healthy {
				return false
			}
		}
		return true
	})
	close(stop)
	wg.Wait()
	waitOwned(t, nodes, partitions, 120*time.Second)
	t.Logf("every partition checkpointed %v after the store came back", time.Since(up).Round(100*time.Millisecond))
	ids := append(append(o1.ids(), o2.ids()...), probe.ids()...)
	for _, nd := range nodes {
		checkCluster(t, nd, ids, nil)
	}
	logs := nodeLogs(nodes, from)
	for _, nd := range nodes {
		failed := len(logged(logs, nd.name, "cluster: checkpoint failed"))
		again := len(logged(logs, nd.name, "cluster: checkpoints succeed again"))
		// A checkpoint gives up after a minute: a shorter outage (-short)
		// may end before one fails; then neither is logged.
		once := failed == 1 && again == 1
		if !once && !(outage < time.Minute && failed == 0 && again == 0) {
			t.Errorf("node %s: checkpoint failure logged %d times and recovery %d times, want once each", nd.name, failed, again)
		}
	}
	checkLogRate(t, logs, 3)
}

// testPause stops the second node (SIGSTOP) for less than the lease TTL,
// then for longer, under load on the others.
func testPause(t *testing.T, nodes []*clusterNode, partitions int) {
	slow := nodes[1]
	from := logOffsets(nodes)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	o1 := &otlpSender{acked: map[string]bool{}, pace: 20 * time.Millisecond}
	o3 := &otlpSender{acked: map[string]bool{}, pace: 20 * time.Millisecond}
	wg.Go(func() { o1.run(t, nodes[0].p.Addr("otlp"), "shop", stop) })
	wg.Go(func() { o3.run(t, nodes[2].p.Addr("otlp"), "cart", stop) })
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}()
	count := func() int { return len(o1.ids()) + len(o3.ids()) }
	waitUntil(t, 60*time.Second, "traces acknowledged", func() bool { return count() >= 40 })

	// Paused for less than the TTL: it keeps its leases.
	lost := slow.metric("tracebridge_cluster_leases_lost_total")
	owned := slow.metric("tracebridge_cluster_owned_partitions")
	if owned <= 0 {
		t.Fatalf("node %s owns %v partitions before the pause", slow.name, owned)
	}
	short := cluster.DefaultLeaseTTL / 3
	slow.p.Signal(syscall.SIGSTOP)
	time.Sleep(short) // the fault: a pause this long
	slow.p.Signal(syscall.SIGCONT)
	resumed := float64(time.Now().UnixNano()) / 1e9
	// Once its lag is read again (its checkpoints run), its renewals have
	// run too.
	waitUntil(t, 60*time.Second, "the paused node checkpointing again", func() bool {
		return slow.metric("tracebridge_cluster_partition_lag_timestamp_seconds") > resumed+float64(cluster.DefaultLeaseTTL/time.Second)/4
	})
	if l := slow.metric("tracebridge_cluster_leases_lost_total"); l != lost {
		t.Errorf("node %s paused %v (less than the lease TTL %v) lost %v leases", slow.name, short, cluster.DefaultLeaseTTL, l-lost)
	}

	// Paused for longer than the TTL: the others take its partitions; when
	// it resumes it is fenced, then rejoins.
	owned = slow.metric("tracebridge_cluster_owned_partitions")
	lost = slow.metric("tracebridge_cluster_leases_lost_total")
	slow.p.Signal(syscall.SIGSTOP)
	paused := time.Now()
	before := count()
	waitUntil(t, 90*time.Second, "the others owning every partition", func() bool {
		return nodes[0].metric("tracebridge_cluster_owned_partitions")+nodes[2].metric("tracebridge_cluster_owned_partitions") == float64(partitions)
	})
	waitUntil(t, 60*time.Second, "ingest going on without the paused node", func() bool { return count() >= before+100 })
	if rest := time.Until(paused.Add(cluster.DefaultLeaseTTL + 4*time.Second)); rest > 0 {
		time.Sleep(rest) // the fault: a pause longer than the TTL
	}
	slow.p.Signal(syscall.SIGCONT)
	t.Logf("node %s paused %v, owning %v partitions", slow.name, time.Since(paused).Round(100*time.Millisecond), owned)
	waitUntil(t, 60*time.Second, "the resumed node fenced", func() bool {
		return slow.metric("tracebridge_cluster_leases_lost_total") >= lost+owned
	})
	waitUntil(t, 120*time.Second, "the resumed node owning partitions again", func() bool {
		return slow.metric("tracebridge_cluster_owned_partitions") > 0
	})
	close(stop)
	wg.Wait()
	waitOwned(t, nodes, partitions, 120*time.Second)
	ids := append(o1.ids(), o3.ids()...)
	for _, nd := range nodes {
		checkCluster(t, nd, ids, nil)
	}
	logs := nodeLogs(nodes, from)
	fenced := map[string]int{}
	for _, e := range logged(logs, slow.name, "cluster: partition lost") {
		fenced[e.attr["partition"]]++
	}
	if float64(len(fenced)) != owned {
		t.Errorf("node %s: partitions logged lost %v, it owned %v", slow.name, fenced, owned)
	}
	for p, n := range fenced {
		if n != 1 {
			t.Errorf("node %s: partition %s logged lost %d times", slow.name, p, n)
		}
	}
	checkLogRate(t, logs, 3)
}

// clusterStatus is a node's GET /api/v1/cluster (zero when it does not
// answer 200).
func clusterStatus(t *testing.T, nd *clusterNode) clusterstatus.Status {
	var st clusterstatus.Status
	resp, err := probeClient.Get(nd.base + "/api/v1/cluster")
	if err != nil {
		return st
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			t.Errorf("node %s: /api/v1/cluster: %v", nd.name, err)
		}
	}
	return st
}

// links are TCP proxies for every route connection between the nodes:
// p[from][to] carries node from's connections to node to's route port.
type links struct {
	t *testing.T
	p [][]*linkProxy
}

func newLinks(t *testing.T, n int) *links {
	l := &links{t: t, p: make([][]*linkProxy, n)}
	for i := range l.p {
		l.p[i] = make([]*linkProxy, n)
	}
	return l
}

// via starts the proxy from → to on node from's address.
func (l *links) via(from, to int, addr string) string {
	p := startLinkProxy(l.t, "127.0.0."+strconv.Itoa(from+1), addr)
	l.p[from][to] = p
	return p.addr()
}

// cut severs every link of node k and refuses new ones; heal lets them
// be made again.
func (l *links) cut(k int)  { l.set(k, true) }
func (l *links) heal(k int) { l.set(k, false) }

func (l *links) set(k int, cut bool) {
	for i := range l.p {
		for _, p := range []*linkProxy{l.p[i][k], l.p[k][i]} {
			if p != nil {
				p.setCut(cut)
			}
		}
	}
}

// proxySource is the address proxies dial from. A NATS server learns a
// peer's route address from the connection's remote address and tells
// the others (implicit routes): from here, nothing listens on it, so
// every route between the nodes passes through a proxy.
var proxySource = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 9)}

// linkProxy forwards the connections it accepts to target, until cut.
type linkProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

func startLinkProxy(t *testing.T, host, target string) *linkProxy {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	p := &linkProxy{ln: ln, target: target, conns: map[net.Conn]bool{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(func() {
		ln.Close()
		p.setCut(true)
		p.wg.Wait()
	})
	return p
}

func (p *linkProxy) addr() string { return p.ln.Addr().String() }

func (p *linkProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
	}
}

// track adds c to the live connections, false (closing c) when cut.
func (p *linkProxy) track(c net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		c.Close()
		return false
	}
	p.conns[c] = true
	return true
}

func (p *linkProxy) untrack(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.conns, c)
	c.Close()
}

func (p *linkProxy) accept() {
	defer p.wg.Done()
	for {
		in, err := p.ln.Accept()
		if err != nil {
			return
		}
		if !p.track(in) {
			continue
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			defer p.untrack(in)
			d := net.Dialer{LocalAddr: proxySource, Timeout: 2 * time.Second}
			out, err := d.Dial("tcp", p.target)
			if err != nil || !p.track(out) {
				return
			}
			defer p.untrack(out)
			done := make(chan struct{}, 2)
			go func() { io.Copy(out, in); done <- struct{}{} }()
			go func() { io.Copy(in, out); done <- struct{}{} }()
			<-done
			in.Close()
			out.Close()
			<-done
		}()
	}
}

// otlpProbe sends OTLP/HTTP (protobuf) requests of one trace of 5 spans
// each, one at a time, and records every answer: how a node answers its
// clients while it is cut off.
type otlpProbe struct {
	service string
	mu      sync.Mutex
	acked   []string
	answers []probeAnswer
}

type probeAnswer struct {
	start time.Time
	took  time.Duration
	code  int
	err   string
}

func (p *otlpProbe) run(addr string, stop <-chan struct{}) {
	client := &http.Client{Timeout: time.Minute}
	for {
		select {
		case <-stop:
			return
		default:
		}
		id, body := probeTrace(p.service)
		t0 := time.Now()
		a := probeAnswer{start: t0}
		resp, err := client.Post("http://"+addr+"/v1/traces", "application/x-protobuf", bytes.NewReader(body))
		if err != nil {
			a.err = err.Error()
		} else {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			a.code = resp.StatusCode
		}
		a.took = time.Since(t0)
		p.mu.Lock()
		p.answers = append(p.answers, a)
		if a.code == http.StatusOK {
			p.acked = append(p.acked, id)
		}
		p.mu.Unlock()
		wait := 20 * time.Millisecond
		if a.code != http.StatusOK {
			wait = 200 * time.Millisecond
		}
		select {
		case <-stop:
			return
		case <-time.After(wait):
		}
	}
}

func (p *otlpProbe) ids() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.acked)
}

// answeredSince are the answers to requests sent at t or later.
func (p *otlpProbe) answeredSince(t time.Time) []probeAnswer {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []probeAnswer
	for _, a := range p.answers {
		if !a.start.Before(t) {
			out = append(out, a)
		}
	}
	return out
}

// summary counts the answers since t by status, with the longest wait.
func (p *otlpProbe) summary(t time.Time) string {
	codes := map[string]int{}
	var longest time.Duration
	for _, a := range p.answeredSince(t) {
		k := strconv.Itoa(a.code)
		if a.err != "" {
			k = "error"
		}
		codes[k]++
		longest = max(longest, a.took)
	}
	return fmt.Sprintf("%v, longest %v", codes, longest.Round(time.Millisecond))
}

// probeTrace is a request of one trace of 5 spans and its trace id.
func probeTrace(service string) (string, []byte) {
	td := ptrace.NewTraces()
	rs := td.ResourceSpans().AppendEmpty()
	rs.Resource().Attributes().PutStr("service.name", service)
	rs.Resource().Attributes().PutStr("host.name", service+"-host")
	ss := rs.ScopeSpans().AppendEmpty()
	var tid pcommon.TraceID
	rand.Read(tid[:])
	now := time.Now()
	var root pcommon.SpanID
	for i := range 5 {
		sp := ss.Spans().AppendEmpty()
		var sid pcommon.SpanID
		rand.Read(sid[:])
		sp.SetTraceID(tid)
		sp.SetSpanID(sid)
		if i == 0 {
			root = sid
			sp.SetName("GET /edge")
		} else {
			sp.SetParentSpanID(root)
			sp.SetName("step-" + strconv.Itoa(i))
		}
		sp.SetStartTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Duration(i) * time.Millisecond)))
		sp.SetEndTimestamp(pcommon.NewTimestampFromTime(now.Add(time.Duration(i+1) * time.Millisecond)))
	}
	body, _ := ptraceotlp.NewExportRequestFromTraces(td).MarshalProto()
	return tid.String(), body
}

// logEntry is one line of a node's log (slog's text format).
type logEntry struct {
	at         time.Time
	level, msg string
	attr       map[string]string
	line       string
}

// parseLog reads slog's text lines (key=value, values quoted when
// needed); other lines are skipped.
func parseLog(s string) []logEntry {
	var out []logEntry
	for _, line := range strings.Split(s, "\n") {
		e := logEntry{attr: map[string]string{}, line: line}
		rest := line
		for rest != "" {
			k, v, ok := strings.Cut(rest, "=")
			if !ok || strings.ContainsAny(k, " \"") {
				break
			}
			if strings.HasPrefix(v, `"`) {
				q, err := strconv.QuotedPrefix(v)
				if err != nil {
					break
				}
				rest = strings.TrimPrefix(v[len(q):], " ")
				v, _ = strconv.Unquote(q)
			} else {
				v, rest, _ = strings.Cut(v, " ")
			}
			e.attr[k] = v
		}
		t, err := time.Parse(time.RFC3339Nano, e.attr["time"])
		if err != nil {
			continue
		}
		e.at, e.level, e.msg = t, e.attr["level"], e.attr["msg"]
		out = append(out, e)
	}
	return out
}

// logOffsets is how much each node has logged so far.
func logOffsets(nodes []*clusterNode) map[string]int {
	m := map[string]int{}
	for _, nd := range nodes {
		m[nd.name] = len(nd.p.Stderr())
	}
	return m
}

// nodeLogs are the nodes' log entries since from.
func nodeLogs(nodes []*clusterNode, from map[string]int) map[string][]logEntry {
	m := map[string][]logEntry{}
	for _, nd := range nodes {
		s := nd.p.Stderr()
		m[nd.name] = parseLog(s[min(from[nd.name], len(s)):])
	}
	return m
}

// goneMsg begins the line a node logs when another's heartbeat expired.
const goneMsg = "cluster: a node's heartbeat expired"

// logged returns node's entries in logs whose message begins with prefix
// and that have every attribute of attrs ("key=value"), in their order.
func logged(logs map[string][]logEntry, node, prefix string, attrs ...string) []logEntry {
	var out []logEntry
	for _, e := range logs[node] {
		if strings.HasPrefix(e.msg, prefix) && !slices.ContainsFunc(attrs, func(kv string) bool {
			k, v, _ := strings.Cut(kv, "=")
			return e.attr[k] != v
		}) {
			out = append(out, e)
		}
	}
	return out
}

// TestLogged checks the selection of log entries the fault checks count.
func TestLogged(t *testing.T) {
	logs := map[string][]logEntry{"n1": parseLog(`time=2026-11-28T10:00:00.000Z level=WARN msg="cluster: a node's heartbeat expired: it is gone (killed or cut off)" node=n1 gone=n3
time=2026-11-28T10:00:01.000Z level=ERROR msg="cluster: partition lost: another node holds its lease now; stopping" node=n1 partition=4 err="wrong last sequence"
time=2026-11-28T10:00:02.000Z level=INFO msg="cluster: partition taken" node=n1 partition=4
time=2026-11-28T10:00:03.000Z level=INFO msg="cluster: partition taken" node=n1 partition=7
not a log line
`)}
	for _, c := range []struct {
		node, prefix string
		attrs        []string
		want         []string // the entries' times
	}{
		{"n1", "cluster: partition taken", nil, []string{"10:00:02", "10:00:03"}},
		{"n1", "cluster: partition taken", []string{"partition=7"}, []string{"10:00:03"}},
		{"n1", "cluster: partition taken", []string{"partition=7", "node=n2"}, nil},
		{"n1", goneMsg, []string{"gone=n3"}, []string{"10:00:00"}},
		{"n1", goneMsg, []string{"gone=n1"}, nil},
		{"n1", "cluster: partition lost", []string{"err=wrong last sequence"}, []string{"10:00:01"}},
		{"n2", "cluster:", nil, nil},
	} {
		var got []string
		for _, e := range logged(logs, c.node, c.prefix, c.attrs...) {
			got = append(got, e.at.Format(time.TimeOnly))
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("logged(%s, %q, %q) = %v, want %v", c.node, c.prefix, c.attrs, got, c.want)
		}
	}
}

// checkLogRate checks that no warning or error of the cluster, the
// store, the shared state, a sink or the OTLP receivers' storing was
// logged more than most times by a node for one partition, node, sink
// operation or receiver: a fault is logged once per event, not per
// attempt, per request or per record. The others' (NATS's own) are
// listed.
func checkLogRate(t *testing.T, logs map[string][]logEntry, most int) {
	t.Helper()
	checked := []string{"cluster:", "store:", "shared state:", "sink failed", "OTLP spans not stored"}
	for node, es := range logs {
		n := map[string]int{}
		for _, e := range es {
			if e.level != "WARN" && e.level != "ERROR" {
				continue
			}
			n[e.msg+" partition="+e.attr["partition"]+" gone="+e.attr["gone"]+" op="+e.attr["op"]+" receiver="+e.attr["receiver"]]++
		}
		for k, c := range n {
			if c > most && slices.ContainsFunc(checked, func(p string) bool { return strings.HasPrefix(k, p) }) {
				t.Errorf("node %s logged %d times: %s", node, c, k)
			}
		}
		for k, c := range n {
			t.Logf("node %s: %d× %s", node, c, k)
		}
	}
}
