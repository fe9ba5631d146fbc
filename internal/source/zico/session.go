package zico

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/fressian"
	codec "github.com/tracebridge/tracebridge/internal/codec/zico"
)

// Defaults of Config.
const (
	DefaultIdleTimeout  = 30 * time.Second // zico's zico.socket.timeout
	DefaultWriteTimeout = 10 * time.Second
)

// Config is what a session needs; zero fields take the defaults.
type Config struct {
	// MaxPayload bounds a frame's payload (codec.DefaultMaxPayload,
	// 16 MiB). A larger frame is answered BAD_REQUEST and the connection
	// closed; nothing is allocated for it.
	MaxPayload int
	// IdleTimeout closes a connection that sent nothing for so long
	// (30 s, as zico).
	IdleTimeout time.Duration
	// WriteTimeout bounds writing a reply (10 s).
	WriteTimeout time.Duration
	// Limits are the decoder's limits (records, attributes, stack
	// elements, nesting, strings …; see codec/zico.Limits).
	Limits codec.Limits
	// MaxSymbols and MaxSymbolBytes bound a connection's symbol table
	// (codec.DefaultMaxSymbols, codec.DefaultMaxSymbolBytes).
	MaxSymbols, MaxSymbolBytes int
}

// Validate reports a configuration error.
func (c Config) Validate() error {
	switch {
	case c.MaxPayload < 0:
		return fmt.Errorf("zico: negative max payload %d", c.MaxPayload)
	case c.IdleTimeout < 0:
		return fmt.Errorf("zico: negative idle timeout %v", c.IdleTimeout)
	case c.WriteTimeout < 0:
		return fmt.Errorf("zico: negative write timeout %v", c.WriteTimeout)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.MaxPayload == 0 {
		c.MaxPayload = codec.DefaultMaxPayload
	}
	if c.IdleTimeout == 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	if c.WriteTimeout == 0 {
		c.WriteTimeout = DefaultWriteTimeout
	}
	return c
}

// The kinds of session errors besides the frame errors of codec/zico,
// the decoding errors of codec/fressian and the hooks' errors.
var (
	// ErrIdle: the peer sent nothing for IdleTimeout at a frame boundary
	// (an idle agent; zico closes such connections too).
	ErrIdle = errors.New("idle timeout")
	// ErrRefused: a HELLO or DATA was refused (by a hook, or a null
	// hostname) and the connection closed.
	ErrRefused = errors.New("refused")
	// ErrPanic: a hook panicked; the connection is closed.
	ErrPanic = errors.New("panic in a hook")
)

// Error is how a session ended when it ended by a fault: the stream
// offset of the offending byte (a frame's, or inside its payload) and the
// reason (Err, matching the kinds with errors.Is).
type Error struct {
	Offset int64
	Err    error
}

func (e *Error) Error() string { return fmt.Sprintf("offset %d: %v", e.Offset, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// errStopped ends a read at a frame boundary when the session stops.
var errStopped = errors.New("session stopped")

// SessionStats are a session's totals.
type SessionStats struct {
	Bytes     int64 // bytes read
	Frames    int64 // frames read
	Traces    int64 // traces handed to Data and acknowledged OK
	Records   int64 // their records
	Truncated int64 // DATA or HELLO payloads that ended inside an object
}

// Session is the server side of one ZICO connection: it reads frames,
// answers them as zico's ZicoServerConnector does (ZICO.md §2) and calls
// the Handler. It knows nothing of stores.
//
// Serve runs it on the calling goroutine; Stop may be called from any
// goroutine.
type Session struct {
	conn net.Conn
	h    Handler
	cfg  Config

	fr      *codec.FrameReader
	dec     *codec.Decoder
	syms    *codec.SymbolMap
	info    Info
	baseCtx context.Context // Serve's
	hookCtx context.Context // baseCtx with info
	authed  bool
	traces  []Trace
	out     []byte

	mu       sync.Mutex // guards idle and stopping, and the read deadline with them
	idle     bool       // waiting for the first byte of a frame
	stopping bool

	bytes, frames, nTraces, records, truncated atomic.Int64
}

// NewSession returns a session on conn, which it closes when Serve
// returns.
func NewSession(conn net.Conn, h Handler, cfg Config) *Session {
	cfg = cfg.withDefaults()
	s := &Session{
		conn: conn,
		h:    h,
		cfg:  cfg,
		dec:  codec.NewDecoder(cfg.Limits),
		syms: codec.NewSymbolMap(cfg.MaxSymbols, cfg.MaxSymbolBytes),
		info: Info{Remote: conn.RemoteAddr()},
	}
	s.fr = codec.NewFrameReader(sessionReader{s}, cfg.MaxPayload)
	return s
}

// Stats returns the session's totals; safe for concurrent use.
func (s *Session) Stats() SessionStats {
	return SessionStats{Bytes: s.bytes.Load(), Frames: s.frames.Load(), Traces: s.nTraces.Load(),
		Records: s.records.Load(), Truncated: s.truncated.Load()}
}

// sessionReader reads from the connection with the idle timeout renewed
// before every read, as Java's socket timeout works, and lets Stop end a
// read that waits for a frame.
type sessionReader struct{ s *Session }

func (r sessionReader) Read(p []byte) (int, error) {
	s := r.s
	s.mu.Lock()
	if s.idle && s.stopping {
		s.mu.Unlock()
		return 0, errStopped
	}
	s.conn.SetReadDeadline(time.Now().Add(s.cfg.IdleTimeout))
	s.mu.Unlock()
	n, err := s.conn.Read(p)
	if n > 0 {
		s.bytes.Add(int64(n))
		s.mu.Lock()
		s.idle = false
		s.mu.Unlock()
	}
	return n, err
}

// Stop asks the session to end at the next frame boundary: a frame being
// read or handled is finished (its hook called and its reply sent), a
// wait for the next frame ends at once. Safe to call more than once and
// from any goroutine.
func (s *Session) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stopping = true
	if s.idle {
		s.conn.SetReadDeadline(time.Now())
	}
}

// Serve serves the connection until it ends and closes it. It returns
// nil when the peer closed the connection at a frame boundary (zico
// answers EOD then, and so does Serve) or Stop ended it; an *Error
// otherwise: a frame or payload fault (answered as zico answers it, or
// not), a refusal, the idle timeout (ErrIdle), a hook's panic (ErrPanic),
// or the end of ctx, which closes the connection at once and is also the
// context of the hooks.
func (s *Session) Serve(ctx context.Context) (err error) {
	defer s.conn.Close()
	stop := context.AfterFunc(ctx, func() { s.conn.Close() })
	defer stop()
	defer func() {
		if p := recover(); p != nil {
			err = &Error{Offset: s.fr.Offset(), Err: fmt.Errorf("%w: %v\n%s", ErrPanic, p, debug.Stack())}
		}
	}()
	s.baseCtx = ctx
	s.hookCtx = context.WithValue(ctx, infoKey{}, s.info)
	for {
		f, ok, err := s.next()
		if !ok {
			if ctx.Err() != nil {
				return &Error{Offset: s.fr.Offset(), Err: ctx.Err()}
			}
			return err
		}
		if err := s.handle(f); err != nil {
			if ctx.Err() != nil {
				return &Error{Offset: f.Offset, Err: ctx.Err()}
			}
			return err
		}
		s.mu.Lock()
		stopping := s.stopping
		s.mu.Unlock()
		if stopping {
			return nil
		}
	}
}

// next reads the next frame. When there is none it answers as zico does
// and reports how the session ends (ok false).
func (s *Session) next() (f codec.Frame, ok bool, err error) {
	s.mu.Lock()
	s.idle = s.fr.Buffered() == 0
	stopping := s.stopping
	s.mu.Unlock()
	if stopping {
		return f, false, nil
	}
	f, err = s.fr.Next()
	s.mu.Lock()
	idle := s.idle
	stopping = s.stopping
	s.idle = false
	s.mu.Unlock()
	if err == nil {
		s.frames.Add(1)
		return f, true, nil
	}
	var ne net.Error
	switch {
	case idle && stopping && (errors.Is(err, errStopped) || errors.As(err, &ne) && ne.Timeout()):
		return f, false, nil // Stop at a frame boundary
	case idle && errors.As(err, &ne) && ne.Timeout():
		return f, false, &Error{Offset: s.fr.Offset(), Err: fmt.Errorf("%w: nothing received for %v", ErrIdle, s.cfg.IdleTimeout)}
	}
	if reply, ok := codec.ReplyTo(err); ok {
		s.reply(reply)
	}
	if errors.Is(err, io.EOF) {
		return f, false, nil // the peer closed at a frame boundary
	}
	var fe *codec.FrameError
	if errors.As(err, &fe) {
		return f, false, &Error{Offset: fe.Offset, Err: fe}
	}
	return f, false, &Error{Offset: s.fr.Offset(), Err: err}
}

// reply sends a reply frame; a failure to send ends the session at its
// next read.
func (s *Session) reply(t codec.Type) error {
	s.out = codec.AppendFrame(s.out[:0], t, nil)
	s.conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	_, err := s.conn.Write(s.out)
	return err
}

// replyUnlessClosing replies to a hook's error, unless the error is
// Serve's context ending: then the connection is closed without a reply.
func (s *Session) replyUnlessClosing(t codec.Type) {
	if s.baseCtx.Err() == nil {
		s.reply(t)
	}
}

// handle answers one frame; an error ends the session.
func (s *Session) handle(f codec.Frame) error {
	switch f.Type {
	case codec.Ping:
		return s.replied(f, s.reply(codec.Pong))
	case codec.Hello:
		return s.hello(f)
	case codec.Data:
		return s.data(f)
	}
	return s.replied(f, s.reply(codec.BadRequest))
}

func (s *Session) replied(f codec.Frame, err error) error {
	if err != nil {
		return &Error{Offset: f.Offset, Err: fmt.Errorf("writing the reply: %w", err)}
	}
	return nil
}

// payloadError is a payload zico refuses by closing without a reply.
func (s *Session) payloadError(f codec.Frame, err error) error {
	off := f.Offset + codec.HeaderSize
	var fe *fressian.Error
	if errors.As(err, &fe) {
		off += int64(fe.Offset)
	}
	return &Error{Offset: off, Err: fmt.Errorf("%s payload: %w", f.Type, err)}
}

func (s *Session) hello(f codec.Frame) error {
	var req *HelloRequest
	first := true
	err := s.dec.DecodeData(f.Payload, nil, func(o codec.Object) error {
		if first {
			if h, ok := o.(*HelloRequest); ok {
				r := *h
				req = &r
			}
			first = false
		}
		return nil
	})
	if err != nil {
		if !errors.Is(err, codec.ErrFressianTruncated) {
			return s.payloadError(f, err)
		}
		s.truncated.Add(1)
	}
	if req == nil { // zico answers and keeps the connection (and an earlier login)
		return s.replied(f, s.reply(codec.BadRequest))
	}
	if req.Hostname == "" {
		s.reply(codec.BadRequest)
		return &Error{Offset: f.Offset, Err: fmt.Errorf("%w: HELLO with a null hostname", ErrRefused)}
	}
	if err := s.h.Hello(s.hookCtx, *req, s.info.Remote); err != nil {
		s.replyUnlessClosing(replyFor(err))
		return &Error{Offset: f.Offset, Err: fmt.Errorf("%w: HELLO of %q: %w", ErrRefused, req.Hostname, err)}
	}
	s.authed = true
	s.syms.Reset()
	s.info.Host = req.Hostname
	s.hookCtx = context.WithValue(s.baseCtx, infoKey{}, s.info)
	return s.replied(f, s.reply(codec.OK))
}

func (s *Session) data(f codec.Frame) error {
	if !s.authed { // zico answers and keeps the connection
		return s.replied(f, s.reply(codec.AuthError))
	}
	clear(s.traces)
	s.traces = s.traces[:0]
	records := 0
	err := s.dec.DecodeData(f.Payload, s.syms, func(o codec.Object) error {
		if t, ok := o.(*Trace); ok {
			s.traces = append(s.traces, *t)
			records += t.Records
		}
		return nil
	})
	if err != nil {
		if !errors.Is(err, codec.ErrFressianTruncated) {
			return s.payloadError(f, err)
		}
		s.truncated.Add(1)
	}
	if err := s.h.Data(s.hookCtx, s.info.Host, s.traces); err != nil {
		s.replyUnlessClosing(replyFor(err))
		return &Error{Offset: f.Offset, Err: fmt.Errorf("%w: DATA of %q: %w", ErrRefused, s.info.Host, err)}
	}
	if err := s.reply(codec.OK); err != nil {
		return s.replied(f, err)
	}
	s.nTraces.Add(int64(len(s.traces)))
	s.records.Add(int64(records))
	return nil
}
