package serve

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/tracebridge/tracebridge/internal/cluster"
	"github.com/tracebridge/tracebridge/internal/config"
	"github.com/tracebridge/tracebridge/internal/engine"
	"github.com/tracebridge/tracebridge/internal/natsd"
	"github.com/tracebridge/tracebridge/internal/natslogin"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	storesink "github.com/tracebridge/tracebridge/internal/sink/store"
	streamsink "github.com/tracebridge/tracebridge/internal/sink/stream"
	"github.com/tracebridge/tracebridge/internal/stage/profile"
	tstore "github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// clusterPart is what a cluster node adds to a bridge (docs/CLUSTER.md):
// its embedded NATS server (none with an existing NATS cluster), the
// node, the store sink its partitions' traces go to (outside the
// engine: the engine's durable sink is the node's publisher) and the
// read-only view of the shared bucket the API answers from.
type clusterPart struct {
	srv    *natsd.Server
	node   *cluster.Node
	sink   *storesink.Sink
	reader *tstore.Store
	// login is the node's login to its NATS: the embedded server's
	// credentials, or to an existing NATS cluster nats_user and
	// nats_password, nats_token or nats_creds, and nats_tls, which the
	// live stream's connections present too.
	login natslogin.Login
	// live is the stream that takes the traces this node's owners
	// assemble (the top-level stream with traces: true), once built.
	live atomic.Pointer[streamsink.Sink]
}

// ownedTraces is what a node's owners hand their assembled traces to:
// the store sink, then the live stream when it publishes traces. So the
// stream's traces are whole (every span of a trace meets at its owner),
// each published once, by its owner.
type ownedTraces struct{ cp *clusterPart }

func (o ownedTraces) ConsumeTraces(ctx context.Context, ts []*trace.Trace) error {
	if err := o.cp.sink.ConsumeTraces(ctx, ts); err != nil {
		return err
	}
	if live := o.cp.live.Load(); live != nil {
		return live.ConsumeTraces(ctx, ts) // best-effort: never fails
	}
	return nil
}

// Cluster returns the bridge's cluster node (nil when not one).
func (s *Server) Cluster() *cluster.Node {
	if s.cl == nil {
		return nil
	}
	return s.cl.node
}

// clusterWAL is called before the store sink is built in a cluster: the
// write-ahead area of an earlier run as a cluster node is dropped, since
// what it held and was not yet in blocks is still in the stream (the
// stream is checkpointed only after the blocks are durable), and its
// next owner reads it again. The write-ahead area of a bridge that was
// not a node before (no <data_dir>/cluster yet) is kept: the store
// uploads it when it opens.
func clusterWAL(c *storesink.Config, dataDir string) error {
	if _, err := os.Stat(filepath.Join(dataDir, "cluster")); err != nil {
		return nil
	}
	path := c.Path
	if path == "" {
		path = filepath.Join(dataDir, "store")
	}
	if err := os.RemoveAll(filepath.Join(path, "wal")); err != nil {
		return fmt.Errorf("cluster: clearing the store's write-ahead area: %w", err)
	}
	return nil
}

// startCluster starts the embedded NATS server (unless the section names
// an existing cluster) and the node, and adds its publisher to the
// engine as the durable sink. sink is the store sink built from the
// configuration.
func (s *Server) startCluster(c *config.Config, sink *storesink.Sink, set Settings) error {
	cc := c.Cluster
	cp := &clusterPart{sink: sink}
	s.cl = cp
	url, user, pass, natsAddr := cc.NATS, cc.NATSUser, cc.NATSPassword, ""
	var storage int64
	if cc.NATS == "" {
		host, port, err := natsd.SplitListen(cc.NATSListen)
		if err != nil {
			return pipeline.Classify(ErrConfig, fmt.Errorf("cluster: nats_listen: %w", err))
		}
		ccfg := &natsd.ClusterConfig{ServerName: cc.Node, Name: "tracebridge", Routes: cc.Routes}
		if cc.ClusterListen != "" {
			h, p, err := net.SplitHostPort(cc.ClusterListen)
			if err != nil {
				return pipeline.Classify(ErrConfig, fmt.Errorf("cluster: cluster_listen: %w", err))
			}
			ccfg.Host = h
			ccfg.Port, _ = strconv.Atoi(p)
		}
		srv, err := natsd.Start(natsd.Config{Host: host, Port: port, StoreDir: filepath.Join(c.DataDir, "cluster", "jetstream"),
			CredentialsFile: natsd.CredentialsFile(c.DataDir), Logger: set.Logger, Cluster: ccfg})
		if err != nil {
			return pipeline.Classify(ErrComm, fmt.Errorf("cluster: %w (nats_listen and cluster_listen of the cluster: section)", err))
		}
		cp.srv = srv
		creds := srv.Credentials()
		url, user, pass, natsAddr = "nats://"+srv.Addr(), creds.User, creds.Password, srv.Addr()
		storage = srv.StorageMax()
	}
	tcfg, err := natsTLS(cc.NATSTLS)
	if err != nil {
		return pipeline.Classify(ErrConfig, err)
	}
	cp.login = natslogin.Login{User: user, Password: pass, Token: cc.NATSToken, CredsFile: cc.NATSCreds, TLS: tcfg}
	if cc.NATSCreds != "" {
		// Read at every (re)connection: a missing file would only show
		// as a node that never connects.
		if _, err := os.ReadFile(cc.NATSCreds); err != nil {
			return pipeline.Classify(ErrConfig, fmt.Errorf("cluster: nats_creds: %w", err))
		}
	}
	expected := 0
	if cc.NATS == "" {
		expected = len(cc.Routes) + 1
	}
	node, err := cluster.New(cluster.Options{
		Node: cc.Node, Partitions: cc.Partitions, Replicas: cc.Replicas, Expected: expected,
		URL: url, Login: cp.login,
		StreamMaxBytes: int64(cc.StreamMaxBytes), StreamMaxAge: time.Duration(cc.StreamMaxAge), StorageMax: storage,
		NATSAddr: natsAddr, HTTPAddr: s.HTTPAddr,
		Catalog: s.base.Catalog,
		Traces:  trace.Options{Window: time.Duration(c.Traces.Window), MaxOpenTraces: c.Traces.MaxOpenTraces, MaxSpans: c.Traces.MaxSpans, MaxHeldEvents: heldEvents(s.Memory)},
		Sink:    ownedTraces{cp}, Persist: sink.Store().Persist,
		Logger: set.Logger, Metrics: s.Metrics,
	})
	if err != nil {
		return pipeline.Classify(ErrComm, err)
	}
	cp.node = node
	// The API reads the shared bucket: every node's blocks, listed again
	// every second. The traces an owner has not yet made blocks (at most
	// a checkpoint interval and a trace window) are not in it.
	rdir := filepath.Join(c.DataDir, "cluster", "reader")
	if err := os.MkdirAll(rdir, 0o755); err != nil {
		return pipeline.Classify(ErrConfig, fmt.Errorf("cluster: %w", err))
	}
	reader, err := tstore.Open(rdir, tstore.Options{Bucket: sink.Store().Bucket(), ReadOnly: true, Refresh: time.Second, Node: cc.Node, Logger: set.Logger})
	if err != nil {
		return pipeline.Classify(ErrConfig, fmt.Errorf("cluster: %w", err))
	}
	cp.reader = reader
	pub := node.Publisher()
	s.Engine.AddSink("cluster", pub, engine.SinkOptions{Policy: pipeline.Durable})
	s.Sinks = append(s.Sinks, Endpoint{Name: "cluster", Type: "cluster", Where: pub.Where(), Policy: pipeline.Durable.String()})
	// OTLP answers once the stream has the spans.
	s.Shared.SetAckStored(true)
	return nil
}

// natsTLS is the TLS configuration of the node's connections to an
// existing NATS cluster (nil: none, or tls:// URLs with the system's
// CAs).
func natsTLS(t *config.ClusterTLS) (*tls.Config, error) {
	if t == nil {
		return nil, nil
	}
	c, err := pipeline.ClientConfig(t.CA, t.Cert, t.Key)
	if err != nil {
		return nil, fmt.Errorf("cluster: nats_tls: %w", err)
	}
	return c, nil
}

// runCluster runs the node beside the engine; stop ends it (a last
// checkpoint, the leases released), then closes what it holds.
func (cp *clusterPart) run(ctx context.Context) (stop func() error) {
	nctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- cp.node.Run(nctx) }()
	return func() error {
		cancel()
		err := <-done
		return err
	}
}

// close releases the node, the reader, the store sink and the server.
func (cp *clusterPart) close() error {
	var errs []error
	if cp.node != nil {
		errs = append(errs, cp.node.Close())
	}
	if cp.reader != nil {
		errs = append(errs, cp.reader.Close())
	}
	if cp.sink != nil {
		errs = append(errs, cp.sink.Close())
	}
	if cp.srv != nil {
		cp.srv.Shutdown()
	}
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

// clusterStage adapts a stage's configuration to a cluster node: the
// profile stage keeps the flame graphs, views and event browser of the
// JFR the node receives but attaches no samples to spans, which needs a
// host's samples and the spans of its traces on one node, while a node
// holds the samples of the JFR connections and uploads it receives and
// a trace is assembled by the owner of its partition, any node
// (docs/CLUSTER.md, "JFR on a cluster node").
func clusterStage(c pipeline.Config) {
	if pc, ok := c.(*profile.FactoryConfig); ok {
		pc.NoSpans = true
	}
}
