package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/objstore/objstoretest"
	"github.com/tracebridge/tracebridge/internal/testcorpus"
	"github.com/tracebridge/tracebridge/internal/trace"
	"github.com/tracebridge/tracebridge/stream"
)

// kiekerNodeYAML is a node (or, with cluster "", a single bridge) with
// Kieker TCP, KDB and ZICO receivers and the store in the bucket of c.
// The trace window is 2 s (open calls: 60 s), so that a caller's and
// its callees' streams, sent on different connections (to different
// nodes), meet in one trace however busy the machine is.
func kiekerNodeYAML(host string, c objstore.S3Config, cluster string) string {
	return nodeYAML(host, c, "2s", []string{"kieker:kieker-tcp", "kdb:kdb-tcp", "zico:zico"}, cluster)
}

// captured is what the connections to a capturing listener carried, one
// byte stream per connection, in the order they were accepted.
type captured struct {
	ln      net.Listener
	mu      sync.Mutex
	streams [][]byte
	wg      sync.WaitGroup
}

func capture(t *testing.T) *captured {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &captured{ln: ln}
	c.wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			c.mu.Lock()
			i := len(c.streams)
			c.streams = append(c.streams, nil)
			c.mu.Unlock()
			c.wg.Go(func() {
				defer conn.Close()
				b, _ := io.ReadAll(conn)
				c.mu.Lock()
				c.streams[i] = b
				c.mu.Unlock()
			})
		}
	})
	return c
}

// close stops listening and returns the streams.
func (c *captured) close() [][]byte {
	c.ln.Close()
	c.wg.Wait()
	return c.streams
}

// sendPaced writes b to addr in parts, one every 50 ms over about d.
func sendPaced(t *testing.T, addr string, b []byte, d time.Duration) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Error(err)
		return
	}
	defer conn.Close()
	parts := max(1, int(d/(50*time.Millisecond)))
	step := max(1, (len(b)+parts-1)/parts)
	for off := 0; off < len(b); off += step {
		if _, err := conn.Write(b[off:min(len(b), off+step)]); err != nil {
			t.Error(err)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kiekerInput is what the test sends: Kieker TCP streams of the probe's
// tasks example (a pool trace whose jobs are forked to a pooled
// goroutine, linked by invocation identifiers; requests whose callees run
// in other processes on another host), a real Kieker log replayed as
// Kieker TCP, another as KDB, and one zorka packet.
type kiekerInput struct {
	pool, caller []byte
	callees      [][]byte
}

func makeKiekerInput(t *testing.T) kiekerInput {
	bin := bridgetest.Build(t, "probe/example/tasks")
	var in kiekerInput
	for _, mode := range []string{"pool", "caller"} {
		c := capture(t)
		args := []string{"-mode", mode, "-addr", c.ln.Addr().String()}
		if mode == "pool" {
			args = append(args, "-jobs", "300", "-node", "pool-host")
		} else {
			args = append(args, "-requests", "4", "-node", "front")
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = bridgetest.CleanEnv()
		if r := bridgetest.Exec(t, cmd); r.Code != 0 || r.Stderr != "" {
			t.Fatalf("tasks -mode %s: exit %d\n%s\n%s", mode, r.Code, r.Stdout, r.Stderr)
		}
		streams := c.close()
		if mode == "pool" {
			in.pool = streams[0]
		} else {
			in.caller, in.callees = streams[0], streams[1:]
		}
	}
	if len(in.callees) != 4 {
		t.Fatalf("%d callee connections, want 4", len(in.callees))
	}
	return in
}

// feed sends the input: the pool stream and the real log over Kieker TCP
// to a, over about d; the caller and (after it) its callees to a and b,
// the second real log over KDB to b, and one zorka packet to both a and
// b (an agent that sent it again to another node after a lost OK).
// mid is called once the pool stream is half sent.
func feed(t *testing.T, in kiekerInput, a, b *bridgetest.Process, d time.Duration, mid func()) {
	var wg sync.WaitGroup
	half := len(in.pool) / 2
	wg.Go(func() {
		conn, err := net.Dial("tcp", a.Addr("kieker"))
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		parts := max(1, int(d/(50*time.Millisecond)))
		step := max(1, (len(in.pool)+parts-1)/parts)
		midDone := false
		for off := 0; off < len(in.pool); off += step {
			if _, err := conn.Write(in.pool[off:min(len(in.pool), off+step)]); err != nil {
				t.Error(err)
				return
			}
			if !midDone && off >= half {
				mid()
				midDone = true
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	wg.Go(func() {
		runArgs(t, "replay", testcorpus.Path(t, "kieker-logs", "kieker-1.10-binary-event-trace"), "--to", "kieker-tcp://"+a.Addr("kieker"), "--rate", strconv.Itoa(int(800/d.Seconds())))
	})
	wg.Go(func() {
		runArgs(t, "replay", testcorpus.Path(t, "kieker-logs", "kieker-2.0-binary-event-trace"), "--to", "kdb-tcp://"+b.Addr("kdb"), "--rate", strconv.Itoa(int(400/d.Seconds())))
	})
	wg.Go(func() {
		sendPaced(t, a.Addr("kieker"), in.caller, time.Second)
		var cw sync.WaitGroup
		for _, s := range in.callees {
			cw.Go(func() { sendPaced(t, b.Addr("kieker"), s, 0) })
		}
		cw.Wait()
	})
	wg.Go(func() {
		root := zicotest.Generate(rand.New(rand.NewPCG(5, 6)), 5, time.Unix(1_764_000_000, 0))
		for _, p := range []*bridgetest.Process{a, b} {
			agent := zicotest.NewAgent(p.Addr("zico"), "zorka-resend", "")
			if err := agent.Send(t.Context(), &root); err != nil {
				t.Errorf("zorka packet to %s: %v", p.Addr("zico"), err)
			}
			agent.Close()
		}
	})
	wg.Wait()
}

// runArgs runs the binary and fails the test unless it exits 0.
func runArgs(t *testing.T, args ...string) {
	cmd := exec.Command(bridgetest.Binary(t), args...)
	cmd.Env = bridgetest.CleanEnv()
	if r := bridgetest.Exec(t, cmd); r.Code != 0 {
		t.Errorf("tracebridge %s: exit %d\n%s\n%s", strings.Join(args, " "), r.Code, r.Stdout, r.Stderr)
	}
}

// traceShapes returns every trace through the API of base as its sorted
// span paths (operations from the root, with the host), its span count
// and broken reasons: what must be equal on a single bridge and every
// node of a cluster.
func traceShapes(t *testing.T, base string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, id := range searchAll(t, base, "") {
		code, b := apiGet(t, "GET", base+"/api/v1/traces/"+id, "", "")
		if code != 200 {
			t.Fatalf("GET trace %s: %d %s", id, code, b)
		}
		var tr struct {
			Spans []struct {
				SpanID    string  `json:"spanId"`
				Parent    *string `json:"parentSpanId"`
				Operation string  `json:"operation"`
				Host      string  `json:"host"`
			} `json:"spans"`
			Broken []string `json:"broken"`
		}
		if err := json.Unmarshal(b, &tr); err != nil {
			t.Fatal(err)
		}
		byID := map[string]int{}
		for i, sp := range tr.Spans {
			byID[sp.SpanID] = i
		}
		var paths []string
		for i := range tr.Spans {
			var ops []string
			for j, n := i, 0; n <= len(tr.Spans); n++ {
				ops = append(ops, tr.Spans[j].Operation+"@"+tr.Spans[j].Host)
				p := tr.Spans[j].Parent
				if p == nil {
					break
				}
				k, ok := byID[*p]
				if !ok {
					ops = append(ops, "(missing parent)")
					break
				}
				j = k
			}
			slices.Reverse(ops)
			paths = append(paths, strings.Join(ops, " | "))
		}
		slices.Sort(paths)
		out[id] = fmt.Sprintf("%d spans, broken %q\n%s", len(tr.Spans), tr.Broken, strings.Join(paths, "\n"))
	}
	return out
}

// graph returns the assembly-operation dependency graph of every trace
// through base, as JSON with its keys sorted.
func graph(t *testing.T, base string) string {
	t.Helper()
	code, b := apiGet(t, "GET", base+"/api/v1/analysis/graph?kind=assembly-operation", "", "")
	if code != 200 {
		t.Fatalf("graph: %d %s", code, b)
	}
	var v map[string]any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.MarshalIndent(v["graph"], "", " ")
	return string(out)
}

// TestClusterKieker: Kieker sources through a three-node cluster (each
// node's embedded NATS in one JetStream cluster, R3, blocks in one S3
// bucket) give the traces a single bridge assembles from the same input:
// the probe's tasks example (a pool trace of 300 jobs forked to a pooled
// goroutine, linked by invocation identifiers; requests whose callees
// run in other processes on another host, whose streams go to another
// node than the caller's), a real Kieker log replayed as Kieker TCP,
// another as KDB. The node owning Kieker's partition is killed (-9)
// mid-ingest while it leads the ingest stream and the lease and node
// buckets (each Raft group elects another leader meanwhile: the
// survivors' flushes wait or fail and their lease renewals may fence
// their owners); it received nothing itself, and the survivors' Kieker
// TCP and KDB receivers stop reading while they cannot publish, so
// everything sent reaches the stream. Afterwards every trace, its span tree and
// the dependency graph are the single bridge's through each surviving
// node's API: nothing lost, no cross-thread or cross-host trace split.
// A zorka packet sent to two nodes (an agent's resend after a lost OK)
// is one trace, its spans once.
func TestClusterKieker(t *testing.T) {
	in := makeKiekerInput(t)
	srv := objstoretest.Start(t)
	const d = 16 * time.Second

	// The single bridge's traces.
	single := bridgetest.WriteConfig(t, t.TempDir(), kiekerNodeYAML("127.0.0.1", srv.Bucket(t, "single", ""), ""))
	sp := bridgetest.Start(t, t.TempDir(), "-c", single)
	feed(t, in, sp, sp, d, func() {})
	sbase := httpURL(t, sp)
	// 100 traces of the Kieker 1.10 log, 31 of the 2.0 log, the pool's,
	// the 4 requests' and the zorka packet's.
	const traces = 100 + 31 + 1 + 4 + 1
	var want map[string]string
	waitUntil(t, 90*time.Second, "the single bridge's traces settled", func() bool {
		got := traceShapes(t, sbase)
		same := want != nil && cmp.Equal(got, want)
		want = got
		return same && len(got) >= traces
	})
	if len(want) != traces {
		t.Fatalf("the single bridge has %d traces, want %d", len(want), traces)
	}
	wantGraph := graph(t, sbase)
	sp.Stop()

	// The cluster.
	const partitions = 8
	nodes := embeddedClusterWith(t, srv.Bucket(t, "traces", "cluster/"), 3, partitions, kiekerNodeYAML)
	for _, nd := range nodes {
		nd.start(t)
	}
	waitOwned(t, nodes, partitions, 120*time.Second)
	// Every node owns its share (2 or 3 of 8), so that no rebalancing
	// hands Kieker's partition over before the kill: the node killed is
	// its owner.
	waitUntil(t, 60*time.Second, "the partitions balanced", func() bool {
		for _, nd := range nodes {
			if o := nd.metric("tracebridge_cluster_owned_partitions"); o < partitions/3 || o > (partitions+2)/3 {
				return false
			}
		}
		return true
	})
	kp := trace.Shard(trace.KiekerKey, partitions)
	// (A partition handed over while the nodes rebalance has no owner
	// for a moment.)
	var kOwner string
	waitUntil(t, 60*time.Second, "an owner of Kieker's partition", func() bool {
		kOwner = partitionOwner(t, nodes[0], kp)
		return kOwner != ""
	})
	var owner *clusterNode
	var others []*clusterNode
	for _, nd := range nodes {
		if nd.name == kOwner {
			owner = nd
		} else {
			others = append(others, nd)
		}
	}
	if owner == nil {
		t.Fatalf("no owner of Kieker's partition %d", kp)
	}
	// The victim leads the ingest stream and the lease and node buckets
	// when it is killed: the survivors cannot publish until JetStream has
	// elected a new leader (on a loaded machine for longer than a
	// flush's 10 s), and their owners may be fenced while the leases'
	// bucket elects one (a fenced node announces fewer partitions, and
	// the others may hand some over: Kieker's partition too, while its
	// traces are open). Kieker TCP and KDB have no acknowledgement to
	// withhold: the receivers must stop reading meanwhile and the
	// publisher keep what it could not store, and a partition handed
	// over must leave its open traces to the next owner, or the
	// comparison below fails.
	killed := false
	logged := make([]int, len(others)) // how much each survivor had logged at the kill
	feed(t, in, others[0].p, others[1].p, d, func() {
		if now := partitionOwner(t, others[0], kp); now != owner.name {
			t.Errorf("Kieker's partition %d is owned by %q, not %s, at the kill", kp, now, owner.name)
		}
		for _, name := range []string{clusterStream, "KV_tb_leases", "KV_tb_nodes"} {
			leadOn(t, others[0], name, owner.name)
		}
		for i, nd := range others {
			logged[i] = len(nd.p.Stderr())
		}
		owner.p.Kill()
		killed = true
	})
	if !killed {
		t.Fatal("the owner was not killed")
	}
	// What the kill did, for the record.
	for i, nd := range others {
		for _, what := range []string{"JetStream did not store published records", "partition lost", "partition handed over"} {
			if n := strings.Count(nd.p.Stderr()[logged[i]:], what); n > 0 {
				t.Logf("node %s: %q logged %d times", nd.name, what, n)
			}
		}
	}
	waitOwned(t, others, partitions, 120*time.Second)
	for _, nd := range others {
		// The node lists the bucket's new blocks every second: wait
		// (generously) until it shows what the single bridge did.
		var got map[string]string
		for deadline := time.Now().Add(120 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
			if got = traceShapes(t, nd.base); cmp.Equal(got, want) {
				break
			}
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("node %s: traces differ from the single bridge's (-single +cluster):\n%s", nd.name, diff)
			for _, o := range others {
				for l := range strings.Lines(o.p.Stderr()) {
					if strings.Contains(l, "cluster") && !strings.Contains(l, "INFO") {
						t.Logf("node %s: %s", o.name, strings.TrimSpace(l))
					}
				}
			}
		}
		if g := graph(t, nd.base); g != wantGraph {
			t.Errorf("node %s: dependency graph differs (-single +cluster):\n%s", nd.name, cmp.Diff(wantGraph, g))
		}
	}
	if t.Failed() {
		// Every node's whole log, the killed one's too, for the record.
		for _, nd := range nodes {
			path := filepath.Join(t.ArtifactDir(), nd.name+".log")
			if err := os.WriteFile(path, []byte(nd.p.Stderr()), 0o644); err == nil {
				t.Logf("node %s's log: %s", nd.name, path)
			}
		}
	}
	// What the comparison covers.
	spans, pool := 0, 0
	for _, s := range want {
		n, _ := strconv.Atoi(s[:strings.IndexByte(s, ' ')])
		spans += n
		if strings.Count(s, "Worker) Work(context.Context, int)@pool-host\n") == 300 {
			pool++
		}
	}
	zorka := 0
	for _, s := range want {
		if strings.Contains(s, "@zorka-resend") {
			zorka++
		}
	}
	if pool != 1 || zorka != 1 {
		t.Errorf("single bridge: %d pool traces with 300 jobs, %d zorka traces of the resent packet; want 1 and 1", pool, zorka)
	}
	t.Logf("%d traces, %d spans equal on the single bridge and every surviving node", len(want), spans)
	for _, nd := range others {
		nd.p.Stop()
	}
}

// partitionOwner returns the owner of partition p as nd's API tells.
func partitionOwner(t *testing.T, nd *clusterNode, p int) string {
	t.Helper()
	code, b := apiGet(t, "GET", nd.base+"/api/v1/cluster", "", "")
	if code != 200 {
		t.Fatalf("cluster status: %d %s", code, b)
	}
	var st struct {
		Partitions []struct {
			ID    int    `json:"id"`
			Owner string `json:"owner"`
		} `json:"partitions"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	for _, ps := range st.Partitions {
		if ps.ID == p {
			return ps.Owner
		}
	}
	return ""
}

// clusterStream is the cluster's ingest stream (cluster.StreamName).
const clusterStream = "TRACEBRIDGE_CLUSTER"

// leadOn makes node leader the leader of stream name's Raft group
// (asking through node via's NATS server: a leader stepdown with leader
// as the preferred placement, NATS 2.11+), and fails the test unless it
// leads within 60 s. (It may run on a goroutine other than the test's.)
func leadOn(t *testing.T, via *clusterNode, name, leader string) {
	t.Helper()
	user, pass, err := stream.ReadCredentials(credentialsFile(via.dir))
	if err != nil {
		t.Error(err)
		return
	}
	nc, err := nats.Connect("nats://"+via.nats, nats.UserInfo(user, pass))
	if err != nil {
		t.Error(err)
		return
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Error(err)
		return
	}
	req, _ := json.Marshal(map[string]any{"placement": map[string]string{"preferred": leader}})
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var now string
		st, err := js.Stream(ctx, name)
		if err == nil {
			var info *jetstream.StreamInfo
			if info, err = st.Info(ctx); err == nil && info.Cluster != nil {
				now = info.Cluster.Leader
			}
		}
		if now == leader {
			cancel()
			t.Logf("stream %s led by %s", name, leader)
			return
		}
		if err == nil && now != "" {
			_, _ = nc.RequestWithContext(ctx, "$JS.API.STREAM.LEADER.STEPDOWN."+name, req)
		}
		cancel()
		if time.Now().After(deadline) {
			t.Errorf("stream %s: led by %q (%v), not %s, after 60 s", name, now, err, leader)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}
