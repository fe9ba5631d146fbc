package zico

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	codec "github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/hostauth"
	"github.com/tracebridge/tracebridge/internal/listenpolicy"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Type is the receiver type this package builds.
const Type = "zico"

// DefaultListen is where a zico receiver listens unless told otherwise
// (zico's port).
const DefaultListen = "127.0.0.1:8640"

// FactoryConfig is the YAML configuration of a zico receiver.
type FactoryConfig struct {
	// Listen is host:port (default 127.0.0.1:8640).
	Listen string `yaml:"listen"`
	// Security: hosts must exist in the host table (tracebridge hosts
	// add), connect from their address when one is set, and present
	// their secret. Off: a HELLO creates its host.
	Security bool `yaml:"security"`
	// TLS: a certificate and key make the receiver speak TLS.
	TLS pipeline.TLSFiles `yaml:"tls"`
	// Insecure lets the receiver take plain text off loopback
	// (internal/listenpolicy); it says so at start-up.
	Insecure       bool              `yaml:"insecure"`
	MaxConnections int               `yaml:"max_connections"`
	MaxPayload     int               `yaml:"max_payload"`
	IdleTimeout    pipeline.Duration `yaml:"idle_timeout"`
	// CommitTimeout bounds the wait for the sinks to store a DATA packet
	// before the agent is answered (default 30s): past it the agent is
	// told to send the packet again.
	CommitTimeout pipeline.Duration `yaml:"commit_timeout"`
}

// Validate checks the configuration.
func (c *FactoryConfig) Validate() error {
	if c.Listen == "" {
		c.Listen = DefaultListen
	}
	if err := c.TLS.Validate(); err != nil {
		return err
	}
	if err := listenpolicy.Check("listen", c.Listen, c.TLS.Enabled(), c.Insecure, "tls: {cert, key}"); err != nil {
		return err
	}
	if c.MaxConnections < 0 || c.MaxPayload < 0 || c.IdleTimeout < 0 || c.CommitTimeout < 0 {
		return errors.New("limits must not be negative")
	}
	return nil
}

// Factory returns the factory of zico receivers.
func Factory() pipeline.ReceiverFactory {
	return pipeline.NewReceiverFactory(Type, func() *FactoryConfig { return &FactoryConfig{Listen: DefaultListen} }, newReceiver)
}

// Receiver serves zorka agents and hands their traces on as span records
// (complete traces: the assembler does not wait for them), answering a
// DATA packet OK only once the durable sinks (the trace store) have its
// traces.
type Receiver struct {
	cfg    *FactoryConfig
	set    pipeline.Settings
	ln     net.Listener
	srv    *Server
	commit time.Duration
	mem    pipeline.Memory

	mu  sync.Mutex
	out pipeline.Consumer

	disabled sync.Map // session id → true: the host is disabled, its data is dropped
	closeOne sync.Once
}

func newReceiver(c *FactoryConfig, set pipeline.Settings) (pipeline.Receiver, error) {
	r := &Receiver{cfg: c, set: set, commit: time.Duration(c.CommitTimeout), mem: set.Shared.Memory()}
	if r.commit <= 0 {
		r.commit = 30 * time.Second
	}
	sc := ServerConfig{MaxConnections: c.MaxConnections}
	sc.Session.MaxPayload = c.MaxPayload
	sc.Session.IdleTimeout = time.Duration(c.IdleTimeout)
	tc, err := c.TLS.ServerConfig()
	if err != nil {
		return nil, err
	}
	sc.TLS = tc
	srv, err := NewServer(HandlerFuncs{HelloFunc: r.hello, DataFunc: r.data}, sc, Settings{Logger: set.Logger})
	if err != nil {
		return nil, pipeline.Classify(pipeline.ErrConfig, err)
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return nil, pipeline.Classify(pipeline.ErrComm, fmt.Errorf("cannot listen on %s: %w", c.Listen, err))
	}
	r.ln, r.srv = ln, srv
	listenpolicy.Warn(set.Logger, "receiver "+set.Name, ln.Addr().String(), tc != nil)
	return r, nil
}

// Where says where the receiver listens, and whether with TLS.
func (r *Receiver) Where() string {
	w := "listening on " + r.ln.Addr().String()
	if r.cfg.TLS.Enabled() {
		w += " (TLS)"
	}
	return w
}

// Addr returns the bound address.
func (r *Receiver) Addr() net.Addr { return r.ln.Addr() }

// Close releases the listener when Run never ran. It is safe to call twice.
func (r *Receiver) Close() error {
	r.closeOne.Do(func() { r.srv.Close(); r.ln.Close() })
	return nil
}

// Run serves agents until ctx is cancelled; then it stops accepting and
// lets the sessions finish the packet they are in.
func (r *Receiver) Run(ctx context.Context, out pipeline.Consumer) error {
	r.mu.Lock()
	r.out = out
	r.mu.Unlock()
	errc := make(chan error, 1)
	go func() { errc <- r.srv.Serve(r.ln) }()
	select {
	case <-ctx.Done():
	case err := <-errc:
		if err != nil && !errors.Is(err, ErrServerClosed) {
			return fmt.Errorf("zico receiver %s: %w", r.set.Name, err)
		}
		return nil
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := r.srv.Shutdown(sctx)
	<-errc
	if err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// hello admits an agent through the host table (internal/hostdb).
func (r *Receiver) hello(ctx context.Context, req HelloRequest, remote net.Addr) error {
	info, _ := InfoFromContext(ctx)
	r.disabled.Delete(info.ID)
	hosts := r.set.Shared.Hosts()
	if hosts == nil {
		if r.cfg.Security {
			return fmt.Errorf("%w: security is on but the bridge has no host table", ErrAuth)
		}
		return nil
	}
	adm, err := hosts.Admit(ctx, req.Hostname, remote, req.Auth, r.cfg.Security)
	switch adm {
	case hostauth.Admitted:
		return nil
	case hostauth.Disabled:
		r.disabled.Store(info.ID, true)
		return nil
	case hostauth.Deleted:
		return ErrEOD
	}
	return fmt.Errorf("%w: %v", ErrAuth, err)
}

// data hands a packet's traces on and waits until they are durable.
func (r *Receiver) data(ctx context.Context, host string, traces []Trace) error {
	info, _ := InfoFromContext(ctx)
	if hosts := r.set.Shared.Hosts(); hosts != nil {
		switch hosts.Status(host) {
		case hostauth.Deleted:
			return ErrEOD
		case hostauth.Disabled:
			return nil // dropped, answered OK (zico)
		}
	}
	if _, off := r.disabled.Load(info.ID); off || len(traces) == 0 {
		return nil
	}
	r.mu.Lock()
	out := r.out
	r.mu.Unlock()
	if out == nil {
		return errors.New("zico: receiver not running")
	}
	if err := r.admitMemory(ctx); err != nil {
		return err
	}
	var b record.Batch
	b.Origin = record.Origin{Receiver: r.set.Name, Host: host, Session: strconv.FormatUint(info.ID, 10)}
	if info.Remote != nil {
		b.Origin.Peer = info.Remote.String()
	}
	for i := range traces {
		r.appendTrace(&b, host, &traces[i])
	}
	done := make(chan error, 1)
	b.Done = append(b.Done, func(err error) { done <- err })
	r.set.Metrics.Receiver(r.set.Name).Records(&b)
	if err := out.Consume(ctx, &b); err != nil {
		return fmt.Errorf("zico: handing on: %w", err)
	}
	select {
	case err := <-done:
		return err
	case <-time.After(r.commit):
		return fmt.Errorf("zico: the sinks did not store the packet within %v", r.commit)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// memoryWait is how long a DATA packet waits for the process to fall
// below its memory limit before it is refused.
const memoryWait = time.Second

// ErrMemory: the bridge is near its memory limit; the packet is refused
// with INTERNAL_ERROR, and zorka's agent reconnects and sends it again
// after its back-off (ZICO.md §2).
var ErrMemory = errors.New("zico: near the memory limit (memory_limit), send again later")

// admitMemory lets a DATA packet in, waiting up to memoryWait while the
// process is near its memory limit (the agent waits for its reply
// meanwhile), then refuses it with ErrMemory.
func (r *Receiver) admitMemory(ctx context.Context) error {
	if r.mem.Admit() {
		return nil
	}
	r.set.Metrics.Receiver(r.set.Name).MemoryRefused()
	wctx, cancel := context.WithTimeout(ctx, memoryWait)
	defer cancel()
	if r.mem.Wait(wctx) != nil {
		return ErrMemory
	}
	return nil
}

// appendTrace adds a zorka trace to b as complete span records: the
// operation is class.method+signature, the component the class, the host
// the agent's; zorka sends a start time only for the trace (its marker's
// clock), so calls are placed one after the other from their caller's
// start (a lower bound, said in the root's zorka.start attribute).
func (r *Receiver) appendTrace(b *record.Batch, host string, t *Trace) {
	root := t.Root
	if root == nil {
		return
	}
	id := TraceID(host, t)
	var start int64
	if root.Marker != nil {
		start = root.Marker.Clock * int64(time.Millisecond)
	}
	var next trace.SpanID
	var add func(rec *TraceRecord, parent trace.SpanID, at int64, isRoot bool)
	add = func(rec *TraceRecord, parent trace.SpanID, at int64, isRoot bool) {
		next++
		sp := trace.Span{
			SpanID: next, ParentID: parent,
			Operation: rec.Operation(), Component: rec.Class,
			Host: host, Service: host,
			Start: at, End: at + rec.Time,
			Kind: trace.KindInternal,
		}
		if rec.Threw() {
			sp.Error = true
			sp.Status = trace.StatusError
			if ex := rec.FindException(); ex != nil {
				sp.StatusMessage = ex.Class
				sp.Events = []trace.Event{{Name: "exception", Time: sp.End, Attributes: exceptionAttrs(ex)}}
			}
		}
		for _, a := range rec.Attrs {
			sp.Attributes = append(sp.Attributes, attr(a))
		}
		if isRoot {
			if m := rec.Marker; m != nil {
				sp.Attributes = append(sp.Attributes, trace.Attr{Key: trace.TypeAttr, Value: m.TraceType, Type: trace.TypeString})
				if m.Flags&codec.MarkerOverflow != 0 {
					sp.Attributes = append(sp.Attributes, trace.Attr{Key: "zorka.overflow", Value: "true", Type: trace.TypeBool})
				}
				if m.Flags&codec.MarkerError != 0 {
					// ERROR_MARK: what zico's error filter selects (the
					// trace ended with an error, which no call may show).
					sp.Attributes = append(sp.Attributes, trace.Attr{Key: "zorka.error", Value: "true", Type: trace.TypeBool})
				}
			}
			sp.Attributes = append(sp.Attributes,
				trace.Attr{Key: "zorka.calls", Value: strconv.FormatInt(rec.Calls, 10), Type: trace.TypeInt},
				trace.Attr{Key: "zorka.start", Value: "calls placed one after the other from the trace's start (zorka sends durations only)", Type: trace.TypeString})
		}
		trace.AppendSpan(b, id, &sp)
		last := &b.Records[b.Len()-1]
		last.Values[trace.SpanFlags] = record.IntValue(trace.FlagComplete)
		self := next
		childAt := at
		for i := range rec.Children {
			add(&rec.Children[i], self, childAt, false)
			childAt += rec.Children[i].Time
		}
	}
	add(root, 0, start, true)
}

func attr(a Attr) trace.Attr {
	out := trace.Attr{Key: a.Key, Value: a.Value.String(), Type: trace.TypeString}
	switch a.Value.Kind {
	case codec.KindBool:
		out.Type = trace.TypeBool
	case codec.KindInt:
		out.Type = trace.TypeInt
	case codec.KindFloat, codec.KindDouble:
		out.Type = trace.TypeDouble
	}
	return out
}

// exceptionAttrs describes an exception as OpenTelemetry's semantic
// conventions do.
func exceptionAttrs(ex *Exception) []trace.Attr {
	var st strings.Builder
	for e := ex; e != nil; e = e.Cause {
		if e != ex {
			st.WriteString("Caused by: ")
		}
		st.WriteString(e.Class)
		if e.Message != "" {
			st.WriteString(": " + e.Message)
		}
		st.WriteByte('\n')
		for _, f := range e.Stack {
			fmt.Fprintf(&st, "\tat %s.%s(%s:%d)\n", f.Class, f.Method, f.File, f.Line)
		}
	}
	return []trace.Attr{
		{Key: "exception.type", Value: ex.Class, Type: trace.TypeString},
		{Key: "exception.message", Value: ex.Message, Type: trace.TypeString},
		{Key: "exception.stacktrace", Value: st.String(), Type: trace.TypeString},
	}
}
