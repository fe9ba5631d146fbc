// Package zicotest plays a zorka 1.x agent for tests and benchmarks: an
// Agent that talks to a ZICO server as zorka's ZicoTraceOutput does, a
// Registry of agent-wide symbol ids, payload builders, and generated
// traces.
//
// Concurrency: an Agent and a Registry serve one goroutine at a time.
package zicotest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"time"

	"github.com/tracebridge/tracebridge/internal/backoff"
	"github.com/tracebridge/tracebridge/internal/codec/zico"
)

// Registry assigns agent-wide symbol ids to names in order of first use,
// from 1, as zorka's SymbolRegistry does; 0 is "<null>".
type Registry struct {
	ids   map[string]int32
	names []string
}

// NewRegistry returns a registry that knows only "<null>" (0).
func NewRegistry() *Registry {
	return &Registry{ids: map[string]int32{"<null>": 0}, names: []string{"<null>"}}
}

// ID returns the id of name, assigning the next one on first use.
func (r *Registry) ID(name string) int32 {
	if id, ok := r.ids[name]; ok {
		return id
	}
	id := int32(len(r.names))
	r.ids[name] = id
	r.names = append(r.names, name)
	return id
}

// Name returns the name of id ("" if unknown).
func (r *Registry) Name(id int32) string {
	if id >= 0 && int(id) < len(r.names) {
		return r.names[id]
	}
	return ""
}

// Intern sets the ids of the tree from its names: records' class, method
// and signature, attribute keys, markers' trace types, exceptions' and
// stack elements' classes, methods and files (an empty File is "<null>"),
// tagged values' tags.
func (r *Registry) Intern(rec *zico.TraceRecord) {
	rec.ClassID, rec.MethodID, rec.SignatureID = r.ID(rec.Class), r.ID(rec.Method), r.ID(rec.Signature)
	if rec.Marker != nil {
		rec.Marker.TraceID = r.ID(rec.Marker.TraceType)
	}
	for x := rec.Exception; x != nil; x = x.Cause {
		x.ClassID = r.ID(x.Class)
		for i := range x.Stack {
			s := &x.Stack[i]
			if s.File == "" {
				s.File = "<null>"
			}
			s.ClassID, s.MethodID, s.FileID = r.ID(s.Class), r.ID(s.Method), r.ID(s.File)
		}
	}
	for i := range rec.Attrs {
		a := &rec.Attrs[i]
		a.KeyID = r.ID(a.Key)
		for v := &a.Value; v != nil && v.Kind == zico.KindTagged; v = v.Elem {
			v.Int = int64(r.ID(v.Str))
		}
	}
	for i := range rec.Children {
		r.Intern(&rec.Children[i])
	}
}

// Payload builds DATA payloads as zorka's FressianTraceWriter writes them
// on one connection: a new Fressian writer per packet, symbols announced
// once per connection, before the record that first uses them.
type Payload struct {
	reg  *Registry
	enc  zico.Encoder
	sent map[int32]bool
}

// NewPayload returns a builder for a new connection.
func NewPayload(reg *Registry) *Payload {
	return &Payload{reg: reg, sent: make(map[int32]bool)}
}

// Reconnect forgets the symbols sent: a new connection begins.
func (p *Payload) Reconnect() { clear(p.sent) }

// Append appends the payload of one packet carrying recs (their ids
// interned) to dst.
func (p *Payload) Append(dst []byte, recs ...*zico.TraceRecord) []byte {
	p.enc.Reset()
	for _, r := range recs {
		p.reg.Intern(r)
		dst = p.enc.AppendNewSymbols(dst, r, p.sent, p.reg.Name)
		dst = p.enc.AppendRecord(dst, r)
	}
	return dst
}

// HelloPayload returns the payload of a HELLO.
func HelloPayload(hostname, auth string, now time.Time) []byte {
	var e zico.Encoder
	return e.AppendHello(nil, zico.HelloRequest{Time: now.UnixMilli(), Hostname: hostname, Auth: auth})
}

// ReplyError is a non-OK reply.
type ReplyError struct{ Reply zico.Type }

func (e *ReplyError) Error() string { return "zico server replied " + e.Reply.String() }

// Agent sends traces to a ZICO server as zorka's ZicoTraceOutput does: it
// connects and sends HELLO, then one DATA packet per Send, waiting for
// the reply to each. On a non-OK reply or an I/O error it closes,
// reconnects, sends HELLO again (its symbols count as unsent) and sends
// the whole batch again, waiting Backoff, then twice as long, … between
// tries, up to Retries tries.
type Agent struct {
	Addr     string
	Hostname string
	Auth     string
	// Registry holds the agent's symbol ids; NewAgent makes one.
	Registry *Registry
	// Dial connects (for TLS, or a proxy); nil dials TCP.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Retries is the number of tries of a batch (zorka: 10); Backoff the
	// first wait (zorka: 125 ms); Timeout bounds each exchange (10 s).
	Retries int
	Backoff time.Duration
	Timeout time.Duration

	conn    net.Conn
	fr      *zico.FrameReader
	payload *Payload
	buf     []byte

	// Connects counts the connections made (successful HELLOs); Tries
	// the DATA packets sent.
	Connects, Tries int
}

// NewAgent returns an agent with zorka's defaults.
func NewAgent(addr, hostname, auth string) *Agent {
	return &Agent{Addr: addr, Hostname: hostname, Auth: auth, Registry: NewRegistry(),
		Retries: 10, Backoff: 125 * time.Millisecond, Timeout: 10 * time.Second}
}

// Connect connects and sends HELLO; it fails unless the reply is OK.
func (a *Agent) Connect(ctx context.Context) error {
	a.Close()
	dial := a.Dial
	if dial == nil {
		dial = func(ctx context.Context, addr string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "tcp", addr)
		}
	}
	conn, err := dial(ctx, a.Addr)
	if err != nil {
		return err
	}
	a.conn, a.fr = conn, zico.NewFrameReader(conn, 0)
	if a.payload == nil {
		a.payload = NewPayload(a.Registry)
	}
	a.payload.Reconnect()
	reply, err := a.Exchange(ctx, zico.Hello, HelloPayload(a.Hostname, a.Auth, time.Now()))
	if err == nil && reply != zico.OK {
		err = &ReplyError{reply}
	}
	if err != nil {
		a.Close()
		return fmt.Errorf("zico hello: %w", err)
	}
	a.Connects++
	return nil
}

// Exchange sends one frame on the open connection and reads the reply.
func (a *Agent) Exchange(ctx context.Context, t zico.Type, payload []byte) (zico.Type, error) {
	if a.conn == nil {
		return 0, errors.New("zico agent: not connected")
	}
	deadline := time.Now().Add(a.timeout())
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	a.conn.SetDeadline(deadline)
	// The connection itself, not a.conn: the cancellation may run after
	// a Close has cleared a.conn (stop does not wait for a running func).
	conn := a.conn
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	a.buf = zico.AppendFrame(a.buf[:0], t, payload)
	if _, err := a.conn.Write(a.buf); err != nil {
		return 0, err
	}
	f, err := a.fr.Next()
	if err != nil {
		return 0, err
	}
	return f.Type, nil
}

func (a *Agent) timeout() time.Duration {
	if a.Timeout <= 0 {
		return 10 * time.Second
	}
	return a.Timeout
}

// Send sends recs in one DATA packet until the server answers OK (see
// Agent). It returns the last error when every try failed. The records'
// ids are set from their names (Registry.Intern).
func (a *Agent) Send(ctx context.Context, recs ...*zico.TraceRecord) error {
	tries := max(a.Retries, 1)
	b := backoff.Exponential{Min: a.Backoff, Max: time.Hour}
	if b.Min <= 0 {
		b.Min = 125 * time.Millisecond
	}
	var err error
	for try := 0; try < tries; try++ {
		if try > 0 && !backoff.Sleep(ctx, b.Next()) {
			return errors.Join(ctx.Err(), err)
		}
		if a.conn == nil {
			if err = a.Connect(ctx); err != nil {
				continue
			}
		}
		payload := a.payload.Append(nil, recs...)
		a.Tries++
		var reply zico.Type
		reply, err = a.Exchange(ctx, zico.Data, payload)
		if err == nil && reply == zico.OK {
			return nil
		}
		if err == nil {
			err = &ReplyError{reply}
		}
		a.Close()
	}
	return fmt.Errorf("zico agent: %d tries: %w", tries, err)
}

// Close closes the connection, if any.
func (a *Agent) Close() error {
	if a.conn == nil {
		return nil
	}
	err := a.conn.Close()
	a.conn, a.fr = nil, nil
	return err
}

// Record returns a record of the call class.method(signature) that took
// ns nanoseconds, with the children; Calls and Errors are computed as
// zorka does (1 plus the children's; 1 if it threw plus the children's).
func Record(class, method, signature string, ns int64, children ...zico.TraceRecord) zico.TraceRecord {
	r := zico.TraceRecord{Class: class, Method: method, Signature: signature, Time: ns, Children: children, Calls: 1}
	for _, c := range children {
		r.Calls += c.Calls
		r.Errors += c.Errors
	}
	return r
}

// Root makes r the root of a trace of the type that began at clock.
func Root(r zico.TraceRecord, traceType string, clock time.Time) zico.TraceRecord {
	r.Flags |= zico.FlagTraceBegin
	r.Marker = &zico.TraceMarker{TraceType: traceType, Clock: clock.UnixMilli()}
	return r
}

// Names used by Generate: a small application's classes and methods.
var (
	genClasses    = []string{"com.acme.shop.CartService", "com.acme.shop.OrderDao", "com.acme.web.Controller", "org.hibernate.SessionImpl", "java.sql.PreparedStatement", "com.acme.util.Json"}
	genMethods    = []string{"get", "put", "execute", "executeQuery", "handle", "serialize", "load", "commit"}
	genSignatures = []string{"()V", "(Ljava/lang/String;)V", "(J)Ljava/lang/Object;", "(Ljava/util/Map;I)Ljava/util/List;"}
)

// Generate returns a trace of n records (n ≥ 1) drawn from rng: a root
// with a marker, nested calls up to depth 12, a few attributes (strings,
// ints, doubles, booleans, a tagged value) and exceptions with stack
// traces and causes. Names repeat, as they do in an application.
func Generate(rng *rand.Rand, n int, clock time.Time) zico.TraceRecord {
	g := generator{rng: rng, left: n - 1}
	root := g.record(0)
	root = Root(root, []string{"HTTP", "EJB", "JMS"}[rng.IntN(3)], clock)
	root.Attrs = append(root.Attrs,
		zico.Attr{Key: "URI", Value: zico.Value{Kind: zico.KindString, Str: "/shop/cart/" + strconv.Itoa(rng.IntN(1000))}},
		zico.Attr{Key: "STATUS", Value: zico.Value{Kind: zico.KindInt, Int: 200}})
	if root.Threw() {
		root.Marker.Flags |= zico.MarkerError
	}
	return root
}

type generator struct {
	rng  *rand.Rand
	left int
}

func (g *generator) record(depth int) zico.TraceRecord {
	rng := g.rng
	var kids []zico.TraceRecord
	if depth < 12 {
		// The root takes children until the records are used up.
		for g.left > 0 && (depth == 0 || rng.IntN(4) > 0) {
			g.left--
			kids = append(kids, g.record(depth+1))
		}
	}
	r := Record(genClasses[rng.IntN(len(genClasses))], genMethods[rng.IntN(len(genMethods))],
		genSignatures[rng.IntN(len(genSignatures))], int64(1000+rng.IntN(5_000_000)), kids...)
	for _, c := range kids {
		r.Time += c.Time
	}
	switch rng.IntN(8) {
	case 0:
		r.Attrs = []zico.Attr{{Key: "SQL", Value: zico.Value{Kind: zico.KindString, Str: "select * from orders where id = ?"}},
			{Key: "ROWS", Value: zico.Value{Kind: zico.KindInt, Int: int64(rng.IntN(100))}}}
	case 1:
		r.Attrs = []zico.Attr{{Key: "USER", Value: zico.Value{Kind: zico.KindTagged, Str: "PRINCIPAL",
			Elem: &zico.Value{Kind: zico.KindString, Str: "user" + strconv.Itoa(rng.IntN(50))}}},
			{Key: "DB", Value: zico.Value{Kind: zico.KindDouble, Float: rng.Float64()}},
			{Key: "ROWS", Value: zico.Value{Kind: zico.KindBool, Int: 1}}}
	}
	if rng.IntN(40) == 0 {
		r.Exception = &zico.Exception{Class: "java.sql.SQLException", Message: "deadlock " + strconv.Itoa(rng.IntN(9)),
			Stack: []zico.StackElement{
				{Class: "com.acme.shop.OrderDao", Method: "load", File: "OrderDao.java", Line: 42},
				{Class: "com.acme.web.Controller", Method: "handle", File: "Controller.java", Line: 7},
				{Class: "sun.reflect.NativeMethodAccessorImpl", Method: "invoke0", Line: -2}},
			Cause: &zico.Exception{Class: "java.io.IOException", Stack: []zico.StackElement{}}}
		r.Errors++
	}
	return r
}
