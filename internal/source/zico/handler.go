package zico

import (
	"context"
	"errors"
	"net"

	codec "github.com/tracebridge/tracebridge/internal/codec/zico"
)

// The types of the hooks, from package codec/zico, so that a collector
// needs one import.
type (
	HelloRequest = codec.HelloRequest
	Trace        = codec.Trace
	TraceRecord  = codec.TraceRecord
	TraceMarker  = codec.TraceMarker
	Exception    = codec.Exception
	StackElement = codec.StackElement
	Attr         = codec.Attr
	Value        = codec.Value
)

// Errors a hook returns (wrapped or not) to choose the session's reply.
// After each of them the session closes the connection, as zico does.
// Any other error of a hook is answered INTERNAL_ERROR, and the session
// closes; the agent reconnects and sends its batch again.
var (
	// ErrAuth: the agent may not log in (unknown host, wrong address or
	// secret): AUTH_ERROR.
	ErrAuth = errors.New("zico: not authorized")
	// ErrBadRequest: the request is refused (BAD_REQUEST).
	ErrBadRequest = errors.New("zico: bad request")
	// ErrEOD: the session must start over (EOD): zico's answer when the
	// host was deleted, or re-enabled with a stale symbol map.
	ErrEOD = errors.New("zico: end of data, reconnect")
)

// replyFor is the reply to a hook's error.
func replyFor(err error) codec.Type {
	switch {
	case errors.Is(err, ErrAuth):
		return codec.AuthError
	case errors.Is(err, ErrBadRequest):
		return codec.BadRequest
	case errors.Is(err, ErrEOD):
		return codec.EOD
	}
	return codec.InternalError
}

// Handler is the collector behind the sessions: it decides who may log in
// and commits what they send. Its methods are called from the session
// goroutines, concurrently for different connections, one call at a time
// per connection.
type Handler interface {
	// Hello is called for a HELLO whose first object is a
	// HelloRequest_v1 with a hostname (a null hostname is answered
	// BAD_REQUEST without calling Hello). remote is the peer's address.
	// nil logs the agent in as req.Hostname (OK); ErrAuth, ErrBadRequest,
	// ErrEOD or another error refuse it and close the connection.
	// A connection may send HELLO again: a successful one replaces the
	// host and empties the connection's symbol table.
	Hello(ctx context.Context, req HelloRequest, remote net.Addr) error

	// Data is called for every DATA packet after a successful HELLO,
	// with the traces the packet holds in order (possibly none: a
	// packet of symbols only), their symbols resolved. The session
	// replies OK only after Data returned nil — the agent then forgets
	// the traces, so Data must have committed them. An error is
	// answered as for Hello and closes the connection; the agent sends
	// the whole batch again on a new connection.
	//
	// traces and everything they point to belong to the session and are
	// valid until Data returns (the session reuses their memory); the
	// strings in them may be kept. ctx carries the session's Info.
	Data(ctx context.Context, host string, traces []Trace) error
}

// HandlerFuncs adapts functions to a Handler, as http.HandlerFunc does.
// A nil HelloFunc accepts every HELLO; a nil DataFunc drops the data
// and lets the session reply OK.
type HandlerFuncs struct {
	HelloFunc func(ctx context.Context, req HelloRequest, remote net.Addr) error
	DataFunc  func(ctx context.Context, host string, traces []Trace) error
}

var _ Handler = HandlerFuncs{}

// Hello calls HelloFunc.
func (h HandlerFuncs) Hello(ctx context.Context, req HelloRequest, remote net.Addr) error {
	if h.HelloFunc == nil {
		return nil
	}
	return h.HelloFunc(ctx, req, remote)
}

// Data calls DataFunc.
func (h HandlerFuncs) Data(ctx context.Context, host string, traces []Trace) error {
	if h.DataFunc == nil {
		return nil
	}
	return h.DataFunc(ctx, host, traces)
}

// Info describes the session a hook is called for.
type Info struct {
	// ID numbers the sessions of a Server from 1 (0 for a Session
	// served on its own).
	ID uint64
	// Remote is the peer's address.
	Remote net.Addr
	// Host is the hostname of the last successful HELLO ("" before).
	Host string
}

type infoKey struct{}

// InfoFromContext returns the Info of the session whose hook got ctx.
func InfoFromContext(ctx context.Context) (Info, bool) {
	i, ok := ctx.Value(infoKey{}).(Info)
	return i, ok
}
