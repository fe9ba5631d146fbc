package sharedstate

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/tracebridge/tracebridge/internal/clusterstatus"
	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	"github.com/tracebridge/tracebridge/internal/control"
	"github.com/tracebridge/tracebridge/internal/hostdb"
	"github.com/tracebridge/tracebridge/internal/logtest"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/servicetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// deadline is how long a change may take to reach every node (generous:
// the machine is shared and busy).
const deadline = 30 * time.Second

// startCluster starts n NATS servers with JetStream in one routed
// cluster, on 127.0.0.1, 127.0.0.2, … (all loopback), and returns their
// client URLs once JetStream has a meta leader.
func startCluster(t *testing.T, n int) []string {
	t.Helper()
	hosts := make([]string, n)
	routePorts := make([]int, n)
	for i := range n {
		hosts[i] = fmt.Sprintf("127.0.0.%d", i+1)
		routePorts[i] = servicetest.FreePortOn(t, hosts[i])
	}
	var urls []string
	for i := range n {
		var routes []*url.URL
		for j := range n {
			if j != i {
				routes = append(routes, &url.URL{Scheme: "nats", Host: net.JoinHostPort(hosts[j], strconv.Itoa(routePorts[j]))})
			}
		}
		opts := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1), Host: hosts[i], Port: server.RANDOM_PORT,
			JetStream: true, StoreDir: filepath.Join(t.TempDir(), "js"), NoSigs: true, NoLog: true,
			Cluster: server.ClusterOpts{Name: "tracebridge", Host: hosts[i], Port: routePorts[i]},
			Routes:  routes,
		}
		ns, err := server.NewServer(opts)
		if err != nil {
			t.Fatal(err)
		}
		go ns.Start()
		t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
		if !ns.ReadyForConnections(deadline) {
			t.Fatalf("server %d not ready", i+1)
		}
		urls = append(urls, ns.ClientURL())
	}
	// JetStream answers once its meta group has a leader.
	nc := connect(t, urls[0])
	js, _ := jetstream.New(nc)
	waitFor(t, "a JetStream meta leader", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
	return urls
}

func connect(t *testing.T, u string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(u, nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond),
		nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {})) // the tests stop servers on purpose
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	servicetest.WaitFor(t, deadline, what, cond)
}

// node is one tracebridge node's shared state: its own host table and
// controller, synced through the NATS server at url.
type node struct {
	name string
	db   *hostdb.DB
	ctl  *control.Controller
	sync *Sync
	stop context.CancelFunc
	logs *logtest.Buffer
}

func startNode(t *testing.T, name, natsURL string, dir string, replicas int) *node {
	t.Helper()
	db, err := hostdb.Open(filepath.Join(dir, "hosts"), hostdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := control.Open(control.Options{StateFile: filepath.Join(dir, "control.json")})
	if err != nil {
		t.Fatal(err)
	}
	js, err := jetstream.New(connect(t, natsURL))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var logs logtest.Buffer
	s, err := Start(ctx, js, Options{Node: name, Logger: logs.Logger(), Hosts: db, Control: ctl, Replicas: replicas,
		RetryInterval: 100 * time.Millisecond, StartTimeout: deadline})
	if err != nil {
		cancel()
		db.Close()
		t.Fatal(err)
	}
	n := &node{name: name, db: db, ctl: ctl, sync: s, stop: cancel, logs: &logs}
	t.Cleanup(n.close)
	return n
}

func (n *node) close() {
	n.stop()
	<-n.sync.Done()
	n.db.Close()
}

func hostNames(db *hostdb.DB) []string {
	var out []string
	for _, h := range db.Hosts() {
		out = append(out, h.Name)
	}
	return out
}

// TestHostsAcrossCluster: three nodes, each with its own host table and
// its own NATS server of one routed cluster (buckets R3): the host a node
// had seeds the cluster; a host added, changed or deleted on one node
// is so on every node within the deadline (secret hash included); hosts
// created by their data on two nodes at once and changes of one host on
// two nodes at once end the same everywhere; a node that was stopped
// takes what changed meanwhile (a deletion too) and seeds what it alone
// had.
func TestHostsAcrossCluster(t *testing.T) {
	urls := startCluster(t, 3)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	// Node a has a host before it joins: it seeds the cluster.
	pre, err := hostdb.Open(filepath.Join(dirs[0], "hosts"), hostdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pre.Add(hostdb.Host{Name: "seed", Group: "old"}, "seed-secret"); err != nil {
		t.Fatal(err)
	}
	pre.Close()
	a := startNode(t, "a", urls[0], dirs[0], 3)
	b := startNode(t, "b", urls[1], dirs[1], 3)
	c := startNode(t, "c", urls[2], dirs[2], 3)
	nodes := []*node{a, b, c}
	// same waits until every node has host name as want says (nil: no
	// such host).
	same := func(what, name string, want func(h hostdb.Host) bool) {
		t.Helper()
		for _, n := range nodes {
			waitFor(t, what+" on node "+n.name, func() bool {
				h, err := n.db.Host(name)
				if want == nil {
					return err != nil
				}
				return err == nil && want(h)
			})
		}
	}
	seed, _ := a.db.Host("seed")
	same("the seeded host", "seed", func(h hostdb.Host) bool { return h.Secret == seed.Secret && h.Group == "old" })

	added, err := a.db.Add(hostdb.Host{Name: "shop-1", Addr: "10.0.0.5", Group: "prod", MaxSize: 1 << 30}, "s3cr3t")
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Now() // after argon2id hashed the secret
	same("an added host", "shop-1", func(h hostdb.Host) bool {
		return h.Secret == added.Secret && h.Addr == "10.0.0.5" && h.MaxSize == 1<<30 && h.Created.Equal(added.Created)
	})
	// A figure for docs/CLUSTER.md, not a check: it depends on the load.
	t.Logf("a host added on node a was on all three nodes %v after the add returned", time.Since(t0).Round(time.Millisecond))
	// Its secret authenticates on another node.
	if name, _, err := b.db.Auth().HostByToken(context.Background(), "s3cr3t", &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 4000}); err != nil || name != "shop-1" {
		t.Errorf("the secret set on node a does not authenticate on node b: %q, %v", name, err)
	}
	if _, err := c.db.Update("shop-1", func(h *hostdb.Host) error { h.Disabled = true; h.Comment = "by c"; return nil }); err != nil {
		t.Fatal(err)
	}
	same("a changed host", "shop-1", func(h hostdb.Host) bool { return h.Disabled && h.Comment == "by c" })
	if err := b.db.Delete("shop-1"); err != nil {
		t.Fatal(err)
	}
	same("a deleted host", "shop-1", nil)

	// Data of one unknown host reaches two nodes at once.
	a.db.Contact("auto", time.Now())
	b.db.Contact("auto", time.Now())
	same("a host created by its data", "auto", func(hostdb.Host) bool { return true })
	// Two nodes change one host at once: one change wins, everywhere.
	done := make(chan error, 2)
	for i, n := range []*node{a, b} {
		go func() {
			_, err := n.db.Update("seed", func(h *hostdb.Host) error { h.Comment = fmt.Sprint("race ", i); return nil })
			done <- err
		}()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "one record of the host changed twice at once", func() bool {
		var comments []string
		for _, n := range nodes {
			h, _ := n.db.Host("seed")
			comments = append(comments, h.Comment)
		}
		return comments[0] != "old" && comments[0] != "" && comments[0] == comments[1] && comments[1] == comments[2]
	})

	// Node c stops; meanwhile a host is added and one deleted, and c's
	// table gets a host of its own (`tracebridge hosts add` while no serve
	// runs).
	c.close()
	if _, err := a.db.Add(hostdb.Host{Name: "late"}, ""); err != nil {
		t.Fatal(err)
	}
	if err := b.db.Delete("auto"); err != nil {
		t.Fatal(err)
	}
	offline, err := hostdb.Open(filepath.Join(dirs[2], "hosts"), hostdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := offline.Add(hostdb.Host{Name: "offline"}, ""); err != nil {
		t.Fatal(err)
	}
	offline.Close()
	waitFor(t, "the new host on node b", func() bool { _, err := b.db.Host("late"); return err == nil })
	c = startNode(t, "c", urls[2], dirs[2], 3)
	nodes[2] = c
	// Start returns with c's table in the cluster's state.
	if _, err := c.db.Host("late"); err != nil {
		t.Errorf("node c after a restart: %v", err)
	}
	if _, err := c.db.Host("auto"); err == nil {
		t.Error("node c after a restart: a host deleted meanwhile is still there")
	}
	same("the host node c had alone", "offline", func(hostdb.Host) bool { return true })
	for _, n := range nodes {
		if got := hostNames(n.db); !slices.Equal(got, []string{"late", "offline", "seed"}) {
			t.Errorf("node %s: hosts %q", n.name, got)
		}
	}
}

// TestControlAcrossCluster: a control command on one node (enable,
// disable, sample) applies on every node; the first node seeds the
// cluster's settings, a node that joins later takes the cluster's in
// place of its own.
func TestControlAcrossCluster(t *testing.T) {
	urls := startCluster(t, 3)
	const meta = "kieker.common.record.flow.trace.TraceMetadata"
	const before = "kieker.common.record.flow.trace.operation.BeforeOperationEvent"
	// Node a starts with a type switched off: it seeds the cluster.
	dirA := t.TempDir()
	pre, err := control.Open(control.Options{StateFile: filepath.Join(dirA, "control.json")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pre.Apply(streammsg.ControlRequest{Op: streammsg.OpDisable, Type: "BeforeOperationEvent"}); err != nil {
		t.Fatal(err)
	}
	a := startNode(t, "a", urls[0], dirA, 3)
	b := startNode(t, "b", urls[1], t.TempDir(), 3)
	nodes := []*node{a, b}
	everywhere := func(what string, cond func(r *control.Rules) bool) {
		t.Helper()
		for _, n := range nodes {
			waitFor(t, what+" on node "+n.name, func() bool { return cond(n.ctl.Rules()) })
		}
	}
	everywhere("the seeded setting", func(r *control.Rules) bool { return r.Types[before] })

	t0 := time.Now()
	if _, err := a.ctl.Apply(streammsg.ControlRequest{Op: streammsg.OpDisable, Type: "TraceMetadata"}); err != nil {
		t.Fatal(err)
	}
	everywhere("a type switched off", func(r *control.Rules) bool { return r.Types[meta] })
	// A figure for docs/CLUSTER.md, not a check.
	t.Logf("a type switched off on node a was off on both nodes after %v", time.Since(t0).Round(time.Millisecond))
	if _, err := b.ctl.Apply(streammsg.ControlRequest{Op: streammsg.OpSample, Type: before, Rate: 0.25}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.ctl.Apply(streammsg.ControlRequest{Op: streammsg.OpDisable, Host: "noisy-host"}); err != nil {
		t.Fatal(err)
	}
	everywhere("the settings of two nodes", func(r *control.Rules) bool {
		return r.Types[meta] && r.Types[before] && r.Samples[before] == 0.25 && r.Hosts["noisy-host"]
	})
	if _, err := b.ctl.Apply(streammsg.ControlRequest{Op: streammsg.OpEnable, Type: before}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ctl.Apply(streammsg.ControlRequest{Op: streammsg.OpEnable, Host: "noisy-host"}); err != nil {
		t.Fatal(err)
	}
	everywhere("settings undone", func(r *control.Rules) bool {
		return r.Types[meta] && !r.Types[before] && !r.Hosts["noisy-host"] && r.Samples[before] == 0.25
	})

	// Node c joins late with a setting of its own: the cluster's win.
	dirC := t.TempDir()
	pre, err = control.Open(control.Options{StateFile: filepath.Join(dirC, "control.json")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pre.Apply(streammsg.ControlRequest{Op: streammsg.OpDisable, Host: "only-c"}); err != nil {
		t.Fatal(err)
	}
	c := startNode(t, "c", urls[2], dirC, 3)
	nodes = append(nodes, c)
	if r := c.ctl.Rules(); !r.Types[meta] || r.Hosts["only-c"] || r.Samples[before] != 0.25 {
		t.Errorf("node c after joining: %+v", r)
	}
	if _, err := c.ctl.Apply(streammsg.ControlRequest{Op: streammsg.OpSample, Type: before, Rate: 1}); err != nil {
		t.Fatal(err)
	}
	everywhere("sampling ended on node c", func(r *control.Rules) bool { _, ok := r.Samples[before]; return !ok && r.Types[meta] })
	// The settings survive in each node's state file.
	again, err := control.Open(control.Options{StateFile: filepath.Join(dirC, "control.json")})
	if err != nil {
		t.Fatal(err)
	}
	if r := again.Rules(); !r.Types[meta] || r.Hosts["only-c"] {
		t.Errorf("node c's state file: %+v", r)
	}
}

// TestStartShared: two bridges' shared services (pipeline.Shared: host
// table, controller) on one NATS server (buckets R1) stay in sync; a
// bridge without either replicates nothing.
func TestStartShared(t *testing.T) {
	ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true, StoreDir: t.TempDir(), NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go ns.Start()
	t.Cleanup(func() { ns.Shutdown(); ns.WaitForShutdown() })
	if !ns.ReadyForConnections(deadline) {
		t.Fatal("server not ready")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var dbs []*hostdb.DB
	var ctls []*control.Controller
	var syncs []*Sync
	for i := range 2 {
		var sh pipeline.Shared
		db, err := hostdb.Open(t.TempDir(), hostdb.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		sh.SetHostDB(db)
		ctl, err := control.Shared(&sh, control.Options{})
		if err != nil {
			t.Fatal(err)
		}
		js, _ := jetstream.New(connect(t, ns.ClientURL()))
		s, err := StartShared(ctx, js, fmt.Sprint("n", i), &sh, nil, 1)
		if err != nil || s == nil {
			t.Fatalf("StartShared: %v, %v", s, err)
		}
		dbs, ctls, syncs = append(dbs, db), append(ctls, ctl), append(syncs, s)
	}
	if _, err := dbs[0].Add(hostdb.Host{Name: "h"}, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := ctls[1].Apply(streammsg.ControlRequest{Op: streammsg.OpDisable, Host: "h"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the host on the other bridge", func() bool { _, err := dbs[1].Host("h"); return err == nil })
	waitFor(t, "the setting on the other bridge", func() bool { return ctls[0].Rules().Hosts["h"] })
	js, _ := jetstream.New(connect(t, ns.ClientURL()))
	if s, err := StartShared(ctx, js, "none", &pipeline.Shared{}, nil, 1); s != nil || err != nil {
		t.Errorf("a bridge without host table or controller: %v, %v", s, err)
	}
	cancel()
	for _, s := range syncs {
		<-s.Done()
	}
}

// TestTypesAcrossCluster: three nodes name record types at once, some
// the same: every name gets one id, the same on every node, no id names
// two types, and a node resolves an id another node gave.
func TestTypesAcrossCluster(t *testing.T) {
	urls := startCluster(t, 3)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var regs []*Types
	for _, u := range urls {
		js, _ := jetstream.New(connect(t, u))
		r, err := StartTypes(ctx, js, Options{Replicas: 3, StartTimeout: deadline, OpTimeout: deadline})
		if err != nil {
			t.Fatal(err)
		}
		regs = append(regs, r)
	}
	names := func(node int) []string {
		var out []string
		for i := range 12 {
			out = append(out, fmt.Sprintf("org.example.Shared%d", i)) // every node
		}
		for i := range 4 {
			out = append(out, fmt.Sprintf("org.example.Node%dOnly%d", node, i))
		}
		return out
	}
	ids := make([]map[string]uint32, len(regs))
	errs := make(chan error, len(regs))
	for i, r := range regs {
		ids[i] = map[string]uint32{}
		go func() {
			for _, n := range names(i) {
				id, err := r.ID(ctx, n, []byte("desc of "+n))
				if err != nil {
					errs <- err
					return
				}
				ids[i][n] = id
			}
			errs <- nil
		}()
	}
	for range regs {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	byID := map[uint32]string{}
	for i := range regs {
		for n, id := range ids[i] {
			if other, ok := byID[id]; ok && other != n {
				t.Errorf("id %d names %s and %s", id, other, n)
			}
			byID[id] = n
			for j := range regs {
				if got, ok := ids[j][n]; ok && got != id {
					t.Errorf("%s: id %d on node %d, %d on node %d", n, id, i, got, j)
				}
			}
		}
	}
	if len(byID) != 12+3*4 {
		t.Errorf("%d ids for %d names", len(byID), 12+3*4)
	}
	// Node 0 resolves what node 2 alone named, and a second ID call is a
	// cache hit.
	want := ids[2]["org.example.Node2Only3"]
	name, te, err := regs[0].Resolve(ctx, want)
	if err != nil || name != "org.example.Node2Only3" || string(te.Desc) != "desc of org.example.Node2Only3" {
		t.Errorf("resolve %d on node 0: %q %q %v", want, name, te.Desc, err)
	}
	if id, err := regs[1].ID(ctx, "org.example.Shared3", nil); err != nil || id != ids[0]["org.example.Shared3"] {
		t.Errorf("ID again: %d %v", id, err)
	}
	waitFor(t, "every node's cache to hold every type", func() bool {
		for _, r := range regs {
			for id, n := range byID {
				if got, _, ok := r.Lookup(id); !ok || got != n {
					return false
				}
			}
		}
		return true
	})
	cancel()
	for _, r := range regs {
		<-r.Done()
	}
}

// TestChangeWhileNATSIsAway: a host added and a type switched off while
// the node's NATS server is down stay local, are written once it is
// back, and reach a node that joins afterwards. The failed writes are
// logged once when they start and once when they end, not per try.
func TestChangeWhileNATSIsAway(t *testing.T) {
	port := servicetest.FreePortOn(t, "127.0.0.1")
	store := t.TempDir()
	start := func() *server.Server {
		ns, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: port, JetStream: true, StoreDir: store, NoSigs: true, NoLog: true})
		if err != nil {
			t.Fatal(err)
		}
		go ns.Start()
		if !ns.ReadyForConnections(deadline) {
			t.Fatal("server not ready")
		}
		return ns
	}
	ns := start()
	a := startNode(t, "a", ns.ClientURL(), t.TempDir(), 1)
	ns.Shutdown()
	ns.WaitForShutdown()

	if _, err := a.db.Add(hostdb.Host{Name: "while-away"}, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := a.ctl.Apply(streammsg.ControlRequest{Op: streammsg.OpDisable, Host: "while-away"}); err != nil {
		t.Fatal(err)
	}
	// The node says what is degraded, for the cluster's status.
	waitFor(t, "the node saying its changes cannot be written", func() bool {
		d := a.sync.Degraded()
		return len(d) == 2 && strings.Contains(d[0], "shared state: writing local changes to tracebridge_hosts fails since") &&
			strings.Contains(d[1], "tracebridge_control")
	})
	// The cluster's status lists it with what the cluster finds.
	status := a.sync.Status(clusterstatus.SourceFunc(func(context.Context) (clusterstatus.Status, error) {
		return clusterstatus.Status{Node: "a", Degraded: []string{"partition 3 has no owner"}}, nil
	}))
	if st, err := status.ClusterStatus(context.Background()); err != nil || len(st.Degraded) != 3 || st.Degraded[0] != "partition 3 has no owner" {
		t.Errorf("cluster status: %q, %v", st.Degraded, err)
	}
	// Several tries fail before NATS comes back.
	writeFailures := func() (hosts, control int64) {
		for _, wl := range a.sync.loops {
			switch l := wl.loop.(type) {
			case *hostSync:
				hosts = l.writes.Failures()
			case *controlSync:
				control = l.writes.Failures()
			}
		}
		return hosts, control
	}
	waitFor(t, "several failed tries to write each change", func() bool {
		h, c := writeFailures()
		return h >= 3 && c >= 3
	})
	ns = start()
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	// Node a's connection comes back by itself and its changes are
	// written; a node that starts now finds them in the buckets.
	js, _ := jetstream.New(connect(t, ns.ClientURL()))
	waitFor(t, "the change made while NATS was away in the bucket", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		kv, err := js.KeyValue(ctx, HostsBucket)
		if err != nil {
			return false
		}
		_, err = kv.Get(ctx, nameKey(hostPrefix, "while-away"))
		return err == nil
	})
	waitFor(t, "nothing degraded once NATS is back", func() bool { return len(a.sync.Degraded()) == 0 })
	waitFor(t, "the writes' recovery logged", func() bool {
		s := a.logs.String()
		return strings.Contains(s, "host changes are written to the cluster again") && strings.Contains(s, "control settings are written to the cluster again")
	})
	if h, c := writeFailures(); h != 0 || c != 0 {
		t.Errorf("failures %d (hosts) and %d (control) after the recovery, want none", h, c)
	}
	count := map[string]int{}
	for _, l := range a.logs.Lines(t) {
		msg, _ := l["msg"].(string)
		if l["level"] == "WARN" || strings.Contains(msg, "again") {
			count[msg]++
		}
		if f, ok := l["failures"].(float64); ok && f < 3 {
			t.Errorf("recovery after %v failures, want at least 3: %v", f, l)
		}
		if l["node"] != "a" {
			t.Errorf("logged without the node: %v", l)
		}
	}
	for _, msg := range []string{
		"shared state: writing a host change to the cluster failed; trying again until it succeeds",
		"shared state: host changes are written to the cluster again",
		"shared state: writing a control setting to the cluster failed; trying again until it succeeds",
		"shared state: control settings are written to the cluster again",
	} {
		if count[msg] != 1 {
			t.Errorf("logged %d times, want once: %s", count[msg], msg)
		}
	}
	for msg, n := range count {
		if n > 1 {
			t.Errorf("logged %d times, want at most once: %s", n, msg)
		}
	}
	b := startNode(t, "b", ns.ClientURL(), t.TempDir(), 1)
	waitFor(t, "the setting made while NATS was away on node b", func() bool { return b.ctl.Rules().Hosts["while-away"] })
	if _, err := b.db.Host("while-away"); err != nil {
		t.Errorf("node b: %v", err)
	}
}
