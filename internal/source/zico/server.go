package zico

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracebridge/tracebridge/internal/backoff"
	"github.com/tracebridge/tracebridge/internal/lograte"
)

// DefaultMaxConnections is the connection limit of a Server whose
// MaxConnections is zero.
const DefaultMaxConnections = 1024

// ErrServerClosed is returned by Serve after Shutdown or Close.
var ErrServerClosed = errors.New("zico: server closed")

// ServerConfig is what a Server needs; zero fields take the defaults.
type ServerConfig struct {
	// Session configures every session.
	Session Config
	// MaxConnections bounds the open connections (1024). A connection
	// over the limit is closed at once, without a reply; the agent
	// retries with back-off.
	MaxConnections int
	// TLS, if set, makes Serve accept TLS connections with it.
	TLS *tls.Config
	// LogRate bounds the connection-fault lines per second
	// (lograte.DefaultPerSecond).
	LogRate int
}

// Validate reports a configuration error.
func (c ServerConfig) Validate() error {
	if c.MaxConnections < 0 {
		return fmt.Errorf("zico: negative max connections %d", c.MaxConnections)
	}
	return c.Session.Validate()
}

// Settings are what a Server is given rather than configured with.
type Settings struct {
	// Logger receives one line per connection fault (nil: discard).
	Logger *slog.Logger
}

// Stats are a Server's totals.
type Stats struct {
	Connections int64 // accepted
	Open        int64 // open now
	Rejected    int64 // closed at once: over MaxConnections
	Faults      int64 // ended by a fault (see Session.Serve); idle timeouts are not faults
	Frames      int64 // frames read
	Bytes       int64 // bytes read
	Traces      int64 // traces acknowledged OK
	Records     int64 // their records
	Truncated   int64 // payloads that ended inside an object (answered as zico does)
}

// Server accepts ZICO connections and serves each with a Session on a
// goroutine of its own (see the package comment).
type Server struct {
	h    Handler
	cfg  ServerConfig
	log  *slog.Logger
	rate *lograte.Limiter

	ctx    context.Context // the hooks'; cancelled by Close
	cancel context.CancelFunc

	mu       sync.Mutex
	closing  bool // Shutdown or Close began
	lns      map[net.Listener]struct{}
	sessions map[*Session]struct{}
	wg       sync.WaitGroup // session goroutines
	lastID   uint64

	accepted, rejected, faults                atomic.Int64
	frames, bytes, traces, records, truncated atomic.Int64
}

// NewServer returns a server calling h.
func NewServer(h Handler, cfg ServerConfig, set Settings) (*Server, error) {
	if h == nil {
		return nil, errors.New("zico: no handler")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.MaxConnections == 0 {
		cfg.MaxConnections = DefaultMaxConnections
	}
	log := set.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{
		h: h, cfg: cfg, log: log, rate: &lograte.Limiter{PerSecond: cfg.LogRate},
		ctx: ctx, cancel: cancel,
		lns: make(map[net.Listener]struct{}), sessions: make(map[*Session]struct{}),
	}, nil
}

// Stats returns the server's totals, including the open sessions'.
func (s *Server) Stats() Stats {
	s.mu.Lock() // the totals of ended sessions move under it
	st := Stats{
		Connections: s.accepted.Load(), Rejected: s.rejected.Load(), Faults: s.faults.Load(),
		Frames: s.frames.Load(), Bytes: s.bytes.Load(), Traces: s.traces.Load(),
		Records: s.records.Load(), Truncated: s.truncated.Load(),
	}
	st.Open = int64(len(s.sessions))
	for sess := range s.sessions {
		ss := sess.Stats()
		st.Frames += ss.Frames
		st.Bytes += ss.Bytes
		st.Traces += ss.Traces
		st.Records += ss.Records
		st.Truncated += ss.Truncated
	}
	s.mu.Unlock()
	return st
}

// Serve accepts connections on ln (wrapped in TLS if configured) until
// Shutdown or Close, and then returns ErrServerClosed; it returns other
// errors of ln.Accept that are not temporary. It closes ln. Serve may be
// called for several listeners at once.
func (s *Server) Serve(ln net.Listener) error {
	if s.cfg.TLS != nil {
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		ln.Close()
		return ErrServerClosed
	}
	s.lns[ln] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.lns, ln)
		s.mu.Unlock()
		ln.Close()
	}()

	var wait backoff.Exponential
	wait.Min, wait.Max = 5*time.Millisecond, time.Second
	for {
		conn, err := ln.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return ErrServerClosed
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || errors.Is(err, errTooManyFiles) {
				s.rate.Log(context.Background(), s.log, slog.LevelWarn, "zico accept failed", "addr", ln.Addr().String(), "err", err)
				backoff.Sleep(s.ctx, wait.Next())
				continue
			}
			return fmt.Errorf("zico: accept on %s: %w", ln.Addr(), err)
		}
		wait.Reset()
		s.start(conn)
	}
}

// start serves conn on a new goroutine, or closes it if the server is
// full or closing.
func (s *Server) start(conn net.Conn) {
	s.accepted.Add(1)
	s.mu.Lock()
	if s.closing || len(s.sessions) >= s.cfg.MaxConnections {
		closing := s.closing
		s.mu.Unlock()
		conn.Close()
		if !closing {
			s.rejected.Add(1)
			s.rate.Log(context.Background(), s.log, slog.LevelWarn, "zico connection refused: too many connections",
				"peer", conn.RemoteAddr().String(), "max_connections", s.cfg.MaxConnections)
		}
		return
	}
	sess := NewSession(conn, s.h, s.cfg.Session)
	s.lastID++
	sess.info.ID = s.lastID
	s.sessions[sess] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	go s.run(sess)
}

func (s *Server) run(sess *Session) {
	defer s.wg.Done()
	err := sess.Serve(s.ctx)

	attrs := []any{"peer", sess.info.Remote.String(), "session", sess.info.ID}
	if sess.info.Host != "" {
		attrs = append(attrs, "host", sess.info.Host)
	}
	var se *Error
	switch {
	case err == nil:
		s.log.Debug("zico connection closed", attrs...)
	case errors.Is(err, ErrIdle), s.ctx.Err() != nil:
		s.log.Debug("zico connection closed", append(attrs, "err", err)...)
	case errors.As(err, &se):
		s.faults.Add(1)
		s.rate.Log(context.Background(), s.log, slog.LevelWarn, "zico connection failed",
			append(attrs, "offset", se.Offset, "err", se.Err)...)
	default:
		s.faults.Add(1)
		s.rate.Log(context.Background(), s.log, slog.LevelWarn, "zico connection failed", append(attrs, "err", err)...)
	}

	st := sess.Stats()
	s.mu.Lock()
	delete(s.sessions, sess)
	s.frames.Add(st.Frames)
	s.bytes.Add(st.Bytes)
	s.traces.Add(st.Traces)
	s.records.Add(st.Records)
	s.truncated.Add(st.Truncated)
	s.mu.Unlock()
}

// Shutdown stops accepting, lets every session finish the frame it is
// reading or handling (its hook returns and its reply is sent) and
// closes it, and waits for the sessions to end. When ctx ends first, it
// closes the remaining connections and cancels the hooks' context as
// Close does, waits for the sessions, and returns ctx's error. Safe to
// call more than once, also without Serve.
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginClose()
	s.mu.Lock()
	for sess := range s.sessions {
		sess.Stop()
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.cancel()
		<-done
		return ctx.Err()
	}
}

// Close stops accepting, closes every connection at once (a hook being
// called sees its context cancelled; its session replies nothing) and
// waits for the sessions to end. Safe to call more than once, also
// without Serve.
func (s *Server) Close() error {
	s.beginClose()
	s.cancel()
	s.wg.Wait()
	return nil
}

func (s *Server) beginClose() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closing = true
	for ln := range s.lns {
		ln.Close()
	}
}
