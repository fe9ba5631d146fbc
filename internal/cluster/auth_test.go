package cluster

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/natslogin"
	"github.com/tracebridge/tracebridge/internal/servicetest"

	"github.com/nats-io/jwt/v2"
	natsserver "github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/tlstest"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// The tests of a node on an existing NATS cluster that wants
// credentials and TLS: real nats-server/v2 servers in the test's
// process.

// startNATS starts the servers opts describe (a cluster when there are
// several: their routes are set here) and returns their client URLs.
func startNATS(t *testing.T, scheme string, opts ...*natsserver.Options) []string {
	t.Helper()
	routes := make([]int, len(opts))
	for i := range opts {
		routes[i] = servicetest.FreePort(t)
	}
	var urls []string
	for i, o := range opts {
		o.ServerName = "ext" + strconv.Itoa(i+1)
		o.Host, o.Port = "127.0.0.1", servicetest.FreePort(t)
		o.JetStream, o.StoreDir, o.NoSigs, o.NoLog = true, t.TempDir(), true, true
		if len(opts) > 1 {
			o.Cluster = natsserver.ClusterOpts{Name: "external", Host: "127.0.0.1", Port: routes[i]}
			var rs []string
			for j := range opts {
				if j != i {
					rs = append(rs, "nats-route://127.0.0.1:"+strconv.Itoa(routes[j]))
				}
			}
			o.Routes = natsserver.RoutesFromStr(strings.Join(rs, ","))
		}
		s, err := natsserver.NewServer(o)
		if err != nil {
			t.Fatal(err)
		}
		go s.Start()
		if !s.ReadyForConnections(30 * time.Second) {
			t.Fatalf("NATS server %d not ready", i+1)
		}
		t.Cleanup(s.Shutdown)
		urls = append(urls, scheme+"://127.0.0.1:"+strconv.Itoa(o.Port))
	}
	return urls
}

// runOwner runs a node with a sink on the NATS servers at url, publishes
// 20 traces of 2 spans through it and waits until the sink has them all
// and a checkpoint emptied the stream: its publisher, its owners (their
// consumers), its buckets (leases, heartbeats) and its status all use
// the connection opt describes.
func runOwner(t *testing.T, opt Options) {
	t.Helper()
	sink := &fakeSink{spans: map[trace.ID]int{}}
	opt.Node, opt.Partitions = "x1", 4
	if opt.Replicas == 0 {
		opt.Replicas = 1
	}
	opt.Traces = trace.Options{Window: 100 * time.Millisecond}
	opt.Sink, opt.Persist = sink, sink.persist
	opt.LeaseTTL, opt.CheckpointInterval = 3*time.Second, 200*time.Millisecond
	n, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- n.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, "every partition owned", func() bool {
		st := n.Status()
		for _, p := range st.Owners {
			if p.Owner != "x1" {
				return false
			}
		}
		return len(st.Owners) == 4
	})
	b := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "h"}}
	for i := range 20 {
		for k := range 2 {
			trace.AppendSpan(b, trace.ID{Hi: 5, Lo: uint64(i + 1)}, &trace.Span{SpanID: trace.SpanID(k + 1), Operation: "op", Start: 1, End: 2})
		}
	}
	if err := n.Publisher().Consume(ctx, b); err != nil {
		t.Fatal(err)
	}
	if err := n.Publisher().Flush(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "every trace at the sink", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		whole := 0
		for _, c := range sink.spans {
			if c == 2 {
				whole++
			}
		}
		return whole == 20
	})
	waitFor(t, "the stream emptied by a checkpoint and its nodes listed", func() bool {
		st := n.Status()
		return st.Stream.OK && st.Stream.Messages == 0 && !st.Store.LastCheckpoint.IsZero() && len(st.Nodes) == 1
	})
}

// TestExternalTLSAndPassword: three servers (R3) that speak only TLS,
// want a client certificate their CA signed, and a user and password.
func TestExternalTLSAndPassword(t *testing.T) {
	cert := tlstest.New(t)
	var opts []*natsserver.Options
	for range 3 {
		opts = append(opts, &natsserver.Options{
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert.TLS}, ClientCAs: cert.Pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12},
			TLSVerify: true, TLS: true,
			Users: []*natsserver.User{{Username: "tb", Password: "s3cret"}},
		})
	}
	urls := startNATS(t, "tls", opts...)
	url := strings.Join(urls, ",")
	client := &tls.Config{RootCAs: cert.Pool, Certificates: []tls.Certificate{cert.TLS}, MinVersion: tls.VersionTLS12}
	// The servers refuse a client without the password, and one without
	// the certificate: what follows works because the node presents both.
	if nc, err := nats.Connect(url, nats.Secure(client)); err == nil {
		nc.Close()
		t.Fatal("a client without the password connected")
	}
	if nc, err := nats.Connect(url, nats.UserInfo("tb", "s3cret"), nats.Secure(&tls.Config{RootCAs: cert.Pool, MinVersion: tls.VersionTLS12})); err == nil {
		nc.Close()
		t.Fatal("a client without a certificate connected")
	}
	// (A byte limit on an R3 stream: every server has room for it.)
	runOwner(t, Options{URL: url, Login: natslogin.Login{User: "tb", Password: "s3cret", TLS: client}, Replicas: 3, StreamMaxBytes: 64 << 20})
}

// TestExternalToken: a server that wants a token.
func TestExternalToken(t *testing.T) {
	url := startNATS(t, "nats", &natsserver.Options{Authorization: "t0ken"})[0]
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("a client without the token connected")
	}
	runOwner(t, Options{URL: url, Login: natslogin.Login{Token: "t0ken"}})
}

// TestExternalCreds: a server in operator mode (decentralized JWT
// authentication); the node presents a .creds file of a user of an
// account with JetStream and a storage limit, which sizes the stream's
// byte limit (half of it).
func TestExternalCreds(t *testing.T) {
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	okp, err := nkeys.CreateOperator()
	must(err)
	opub, err := okp.PublicKey()
	must(err)
	oc := jwt.NewOperatorClaims(opub)
	account := func(js bool) (string, string, nkeys.KeyPair) {
		kp, err := nkeys.CreateAccount()
		must(err)
		pub, err := kp.PublicKey()
		must(err)
		ac := jwt.NewAccountClaims(pub)
		if js {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: 256 << 20, Streams: -1, Consumer: -1}
		}
		enc, err := ac.Encode(okp)
		must(err)
		return pub, enc, kp
	}
	spub, sjwt, _ := account(false)
	apub, ajwt, akp := account(true)
	resolver := &natsserver.MemAccResolver{}
	must(resolver.Store(spub, sjwt))
	must(resolver.Store(apub, ajwt))
	url := startNATS(t, "nats", &natsserver.Options{TrustedOperators: []*jwt.OperatorClaims{oc}, SystemAccount: spub, AccountResolver: resolver})[0]

	ukp, err := nkeys.CreateUser()
	must(err)
	upub, err := ukp.PublicKey()
	must(err)
	uc := jwt.NewUserClaims(upub)
	ujwt, err := uc.Encode(akp)
	must(err)
	seed, err := ukp.Seed()
	must(err)
	creds, err := jwt.FormatUserConfig(ujwt, seed)
	must(err)
	file := filepath.Join(t.TempDir(), "tb.creds")
	must(os.WriteFile(file, creds, 0o600))
	if nc, err := nats.Connect(url); err == nil {
		nc.Close()
		t.Fatal("a client without credentials connected")
	}
	runOwner(t, Options{URL: url, Login: natslogin.Login{CredsFile: file}})

	nc, err := nats.Connect(url, nats.UserCredentials(file))
	must(err)
	defer nc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	js, err := jetstream.New(nc)
	must(err)
	st, err := js.Stream(ctx, StreamName)
	must(err)
	if mb := st.CachedInfo().Config.MaxBytes; mb != 128<<20 {
		t.Errorf("stream max bytes %d, want 128 MiB (half the account's 256 MiB)", mb)
	}
}

// TestExternalWrongPassword: a node whose nats_password the servers
// refuse says so in its status (not "no quorum") and keeps trying past
// nats.go's default of giving up after two refusals (a fixed server
// configuration then lets it in without a restart).
func TestExternalWrongPassword(t *testing.T) {
	o := &natsserver.Options{Users: []*natsserver.User{{Username: "tb", Password: "s3cret"}}}
	url := startNATS(t, "nats", o)[0]
	n, err := New(Options{Node: "x1", Partitions: 1, Replicas: 1, URL: url, Login: natslogin.Login{User: "tb", Password: "wrong"}, StreamMaxBytes: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- n.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Error(err)
		}
	}()
	last := ""
	waitFor(t, "the refusal in the status", func() bool {
		if e := n.Status().Stream.Error; e != last {
			last = e
			t.Logf("status: %q (connected %v, last error %v, reconnects %d)", e, n.Conn().IsConnected(), n.Conn().LastError(), n.Conn().Stats().Reconnects)
		}
		return strings.Contains(last, "authorization violation")
	})
	// Well past nats.go's two refusals: the connection is not closed.
	waitFor(t, "five refused attempts", func() bool { return n.Conn().Stats().Reconnects >= 5 })
	if n.Conn().IsClosed() {
		t.Fatal("the node gave up its NATS connection after refused credentials")
	}
}
