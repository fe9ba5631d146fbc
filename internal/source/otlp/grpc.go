package otlp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	_ "google.golang.org/grpc/encoding/gzip" // clients may compress with gzip
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	otlpcodec "github.com/tracebridge/tracebridge/internal/codec/otlp"
	"github.com/tracebridge/tracebridge/internal/hostauth"
	"github.com/tracebridge/tracebridge/internal/listenpolicy"
	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// GRPC is the otlp-grpc receiver: OTLP's TraceService/Export over gRPC.
// Its service is registered raw (a codec of its own hands the handler the
// request's bytes, which are decoded in place, without generated types).
type GRPC struct {
	c     *core
	cfg   Config
	ln    net.Listener
	srv   *grpc.Server
	tls   bool
	ran   atomic.Bool
	close sync.Once
}

var _ pipeline.Receiver = (*GRPC)(nil)

// NewGRPC binds the listener and builds the server; Run serves.
func NewGRPC(cfg Config, set pipeline.Settings) (*GRPC, error) {
	if err := cfg.Validate(); err != nil {
		return nil, pipeline.Classify(pipeline.ErrConfig, err)
	}
	set = withDefaults(set)
	cfg = cfg.withDefaults(DefaultGRPCMessageSize)
	tc, err := cfg.TLS.config()
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return nil, pipeline.Classify(pipeline.ErrComm, fmt.Errorf("otlp-grpc: %w", err))
	}
	c := newCore(set.Name, set, cfg)
	g := &GRPC{c: c, cfg: cfg, ln: counted{Listener: ln, met: c.met}, tls: tc != nil}
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(cfg.MaxMessageSize),
		grpc.ForceServerCodecV2(rawCodec{}),
	}
	if tc != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tc)))
	}
	g.srv = grpc.NewServer(opts...)
	g.srv.RegisterService(&traceService, g)
	listenpolicy.Warn(set.Logger, "receiver "+set.Name, ln.Addr().String(), tc != nil)
	return g, nil
}

// Addr returns the bound address.
func (g *GRPC) Addr() net.Addr { return g.ln.Addr() }

// Where says where the receiver listens.
func (g *GRPC) Where() string {
	w := "listening on " + g.ln.Addr().String()
	if g.tls {
		w += " (TLS)"
	}
	return w
}

// Run serves until ctx is cancelled, then stops gracefully.
func (g *GRPC) Run(ctx context.Context, out pipeline.Consumer) error {
	g.ran.Store(true)
	g.c.start(out)
	defer g.c.stop()
	served := make(chan error, 1)
	go func() { served <- g.srv.Serve(g.ln) }()
	select {
	case err := <-served:
		g.srv.Stop()
		return pipeline.Classify(pipeline.ErrComm, fmt.Errorf("otlp-grpc: %w", err))
	case <-ctx.Done():
	}
	stopped := make(chan struct{})
	go func() {
		g.srv.GracefulStop() // stops accepting, waits for the requests in flight
		close(stopped)
	}()
	select {
	case <-stopped:
	case <-time.After(time.Duration(g.cfg.DrainTimeout)):
		g.c.log.Warn("otlp-grpc: requests still running at the drain timeout; stopping", "receiver", g.c.name)
		g.srv.Stop()
		<-stopped
	}
	<-served
	return nil
}

// Close releases the listener when Run is not going to run. It is safe
// to call twice, and a no-op after Run.
func (g *GRPC) Close() error {
	if g.ran.Load() {
		return nil
	}
	g.close.Do(func() {
		g.srv.Stop()
		g.ln.Close()
	})
	return nil
}

// traceService is OTLP's TraceService with a raw handler.
var traceService = grpc.ServiceDesc{
	ServiceName: "opentelemetry.proto.collector.trace.v1.TraceService",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Export",
		Handler: func(srv any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
			return srv.(*GRPC).export(ctx, dec)
		},
	}},
	Metadata: "opentelemetry/proto/collector/trace/v1/trace_service.proto",
}

// retryDelay is the delay a client is told to wait under back-pressure.
const retryDelay = time.Second

func (g *GRPC) export(ctx context.Context, dec func(any) error) (any, error) {
	var remote net.Addr
	if p, ok := peer.FromContext(ctx); ok {
		remote = p.Addr
	}
	auth := ""
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if v := md.Get("authorization"); len(v) > 0 {
			auth = v[0]
		}
	}
	host, drop, err := g.c.admit(ctx, auth, remote)
	switch {
	case errors.Is(err, hostauth.ErrUnauthorized):
		return nil, status.Error(codes.Unauthenticated, "otlp-grpc: "+err.Error())
	case err != nil:
		return nil, status.Error(codes.Unavailable, "otlp-grpc: "+err.Error())
	}
	if !g.c.admitMemory() {
		return nil, retryLater("otlp-grpc: " + memoryMessage)
	}
	var req rawRequest
	if err := dec(&req); err != nil {
		return nil, err
	}
	defer req.free()
	held := req.data.Len()
	if len(req.data) > 1 {
		held *= 2 // bytes copies it into one buffer
	}
	if !g.c.inflight.acquire(held) {
		return nil, retryLater(fmt.Sprintf("otlp-grpc: more than max_inflight_bytes %d bytes of requests in flight; retry later", g.c.inflight.max))
	}
	defer g.c.inflight.release(held)
	w := g.c.getWorker()
	defer g.c.putWorker(w)
	msg := req.bytes(&w.buf)
	o, err := g.c.handle(ctx, w, addrString(remote), host, drop, msg, false)
	if err == nil {
		return &rawResponse{b: appendResponse(nil, o)}, nil
	}
	var bad *otlpcodec.Error
	switch {
	case errors.As(err, &bad):
		return nil, status.Error(codes.InvalidArgument, err.Error())
	case errors.Is(err, ErrBusy):
		return nil, retryLater("otlp-grpc: the pipeline is busy (back-pressure); retry later")
	case errors.Is(err, ErrStopped):
		return nil, status.Error(codes.Unavailable, "otlp-grpc: the receiver is stopping")
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return nil, status.FromContextError(err).Err()
	}
	return nil, status.Error(codes.Internal, err.Error())
}

// retryLater is RESOURCE_EXHAUSTED with RetryInfo: the client should
// send again after retryDelay.
func retryLater(msg string) error {
	st := status.New(codes.ResourceExhausted, msg)
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryDelay)}); err == nil {
		st = d
	}
	return st.Err()
}

// rawRequest holds a request's bytes as gRPC received them (referenced,
// not copied).
type rawRequest struct {
	data mem.BufferSlice
}

// bytes returns the message: the received buffer itself when it is one,
// else a copy into *scratch.
func (r *rawRequest) bytes(scratch *[]byte) []byte {
	if len(r.data) == 1 {
		return r.data[0].ReadOnlyData()
	}
	n := r.data.Len()
	if cap(*scratch) < n {
		*scratch = make([]byte, n)
	}
	b := (*scratch)[:n]
	r.data.CopyTo(b)
	return b
}

func (r *rawRequest) free() { r.data.Free() }

// rawResponse is an encoded ExportTraceServiceResponse.
type rawResponse struct{ b []byte }

// rawCodec passes request bytes through to the handler and encoded
// responses out; it is forced on the server, so it is named "proto" as
// the content subtype clients send.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	r, ok := v.(*rawResponse)
	if !ok {
		return nil, fmt.Errorf("otlp-grpc codec: cannot marshal %T", v)
	}
	return mem.BufferSlice{mem.SliceBuffer(r.b)}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	r, ok := v.(*rawRequest)
	if !ok {
		return fmt.Errorf("otlp-grpc codec: cannot unmarshal into %T", v)
	}
	data.Ref() // kept until the handler is done with it
	r.data = data
	return nil
}

// withDefaults fills in what the factory would.
func withDefaults(set pipeline.Settings) pipeline.Settings {
	if set.Logger == nil {
		set.Logger = discard
	}
	return set
}
