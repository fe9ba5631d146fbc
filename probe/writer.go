package probe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/bits"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults and bounds of Config.
const (
	DefaultAddr          = "127.0.0.1:10133"
	DefaultSessionID     = "<no-session-id>" // Kieker's
	DefaultHostname      = "<default-host>"  // when os.Hostname fails
	DefaultBufferEvents  = 65536
	MinBufferEvents      = 1024
	MaxBufferEvents      = 1 << 24
	MaxShards            = 64
	DefaultBatchBytes    = 64 << 10
	DefaultFlushInterval = 10 * time.Millisecond
	DefaultDialTimeout   = time.Second
	DefaultWriteTimeout  = 5 * time.Second
	DefaultReconnectMin  = 100 * time.Millisecond
	DefaultReconnectMax  = 5 * time.Second
	DefaultCloseTimeout  = time.Second
)

// Config configures a Writer. The zero value of every field selects its
// default.
type Config struct {
	// Addr is host:port of a Kieker single-socket TCP reader: a
	// tracebridge kieker-tcp receiver (DefaultAddr), or Kieker itself.
	Addr string
	// Hostname goes into every TraceMetadata (os.Hostname() by default).
	Hostname string
	// SessionID is the sessionId of traces started without one
	// (DefaultSessionID).
	SessionID string
	// NoInvocations turns the InvocationRecords off (see InvocationHeader):
	// for a reader that knows only Kieker's record types, such as Kieker's
	// own, which cannot skip a record it does not know. Work handed to
	// other goroutines is then linked by Kieker's records alone, and
	// InvocationHeader returns "".
	NoInvocations bool

	// BufferEvents is the number of records the buffer holds, rounded up
	// to a power of two (DefaultBufferEvents, at least MinBufferEvents, at
	// most MaxBufferEvents). Each record takes 32 bytes, a TraceMetadata
	// 64. When the buffer is full, new records are dropped and counted
	// (Stats.Rejected).
	BufferEvents int
	// Shards is the number of independent ring buffers the buffer is split
	// into, rounded up to a power of two (default: GOMAXPROCS, at most
	// MaxShards). A trace stays on one shard; more shards mean less
	// contention between goroutines tracing at the same time.
	Shards int
	// BatchBytes is the size at which the writer goroutine writes what it
	// has encoded (DefaultBatchBytes): one write system call per batch.
	BatchBytes int
	// FlushInterval is how long records may wait in the buffer before the
	// writer goroutine sends them (DefaultFlushInterval).
	FlushInterval time.Duration

	// DialTimeout bounds a connection attempt (DefaultDialTimeout).
	DialTimeout time.Duration
	// WriteTimeout bounds one write to the bridge (DefaultWriteTimeout); a
	// write that times out loses its batch and the connection is made
	// again.
	WriteTimeout time.Duration
	// ReconnectMin and ReconnectMax bound the back-off between connection
	// attempts, which doubles from min to max while the bridge is
	// unreachable (DefaultReconnectMin, DefaultReconnectMax).
	ReconnectMin, ReconnectMax time.Duration
	// CloseTimeout is the longest Close waits to send what is buffered
	// (DefaultCloseTimeout).
	CloseTimeout time.Duration

	// Logger hears about connection state changes (connected, unreachable,
	// lost), once per change, never per record. Nil logs nothing.
	Logger *slog.Logger
}

func (c *Config) setDefaults() error {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if _, _, err := net.SplitHostPort(c.Addr); err != nil {
		return fmt.Errorf("probe: address %q: %w", c.Addr, err)
	}
	if c.Hostname == "" {
		h, err := os.Hostname()
		if err != nil || h == "" {
			h = DefaultHostname
		}
		c.Hostname = h
	}
	if c.SessionID == "" {
		c.SessionID = DefaultSessionID
	}
	switch {
	case c.BufferEvents == 0:
		c.BufferEvents = DefaultBufferEvents
	case c.BufferEvents < 0 || c.BufferEvents > MaxBufferEvents:
		return fmt.Errorf("probe: buffer of %d records: want 1 to %d", c.BufferEvents, MaxBufferEvents)
	case c.BufferEvents < MinBufferEvents:
		c.BufferEvents = MinBufferEvents
	}
	c.BufferEvents = pow2(c.BufferEvents)
	switch {
	case c.Shards == 0:
		c.Shards = min(runtime.GOMAXPROCS(0), MaxShards)
	case c.Shards < 0 || c.Shards > MaxShards:
		return fmt.Errorf("probe: %d shards: want 1 to %d", c.Shards, MaxShards)
	}
	c.Shards = pow2(c.Shards)
	for c.Shards > 1 && c.BufferEvents/c.Shards < MinBufferEvents {
		c.Shards /= 2
	}
	if c.BatchBytes <= 0 {
		c.BatchBytes = DefaultBatchBytes
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&c.FlushInterval, DefaultFlushInterval)
	def(&c.DialTimeout, DefaultDialTimeout)
	def(&c.WriteTimeout, DefaultWriteTimeout)
	def(&c.ReconnectMin, DefaultReconnectMin)
	def(&c.ReconnectMax, DefaultReconnectMax)
	def(&c.CloseTimeout, DefaultCloseTimeout)
	if c.ReconnectMax < c.ReconnectMin {
		c.ReconnectMax = c.ReconnectMin
	}
	return nil
}

func pow2(n int) int {
	if n <= 1 {
		return 1
	}
	return 1 << bits.Len(uint(n-1))
}

// Errors a Writer reports.
var (
	// ErrClosed: the writer has been closed.
	ErrClosed = errors.New("probe: writer closed")
	// ErrNotConnected: Flush found no connection to the bridge; the
	// records stay buffered (as far as the buffer holds them).
	ErrNotConnected = errors.New("not connected")
	// ErrDropped: Close reports that records were dropped during the
	// writer's life (see Stats).
	ErrDropped = errors.New("records dropped")
)

// Stats count what a Writer did. Records are TraceMetadata and operation
// events alike.
type Stats struct {
	// Sent counts records written to a connection (handed to the
	// operating system; a bridge that goes away may not have read the
	// last batch).
	Sent uint64
	// Bytes counts the bytes written, registry entries included.
	Bytes uint64
	// Dropped is Rejected + Lost.
	Dropped uint64
	// Rejected counts records the probes could not buffer: the buffer was
	// full (the bridge is slow or unreachable) or the writer was closed.
	Rejected uint64
	// Lost counts records taken from the buffer but not delivered: their
	// write failed, or Close gave up on them.
	Lost uint64
	// Buffered is the number of records in the buffer now (a
	// TraceMetadata counts twice).
	Buffered uint64
	// Overflowed counts strings replaced by Overflow because the
	// process-wide string table was full (see Limits).
	Overflowed uint64
	// Connects, ConnectFailures and WriteFailures count connections made,
	// connection attempts that failed, and writes that failed.
	Connects, ConnectFailures, WriteFailures uint64
	// Connected tells whether the writer holds a connection now.
	Connected bool
}

// Writer buffers the records of its traces and sends them to a bridge from
// one background goroutine.
//
// Concurrency: every method is safe for concurrent use. The probes (the
// methods of Trace) never block and never allocate; the writer goroutine
// encodes what they buffered and writes it in batches, connecting and
// reconnecting as needed.
type Writer struct {
	cfg       Config
	shards    []shard
	shardMask uint64
	hostID    uint32
	node      string // the hostname as sent (the string table's copy)
	sessionID uint32

	stop      chan struct{}
	done      chan struct{}
	wake      chan struct{}
	flushReq  chan chan error
	ctx       context.Context
	cancel    context.CancelFunc
	closeOnce sync.Once
	closeErr  error

	sent, bytes, lost                        atomic.Uint64
	connects, connectFailures, writeFailures atomic.Uint64
	connected                                atomic.Bool

	// live is the current connection, guarded by connMu so that Close can
	// cut a write short; closeBy is Close's deadline (zero before Close).
	connMu  sync.Mutex
	live    net.Conn
	closeBy time.Time

	// State of the writer goroutine.
	clock    converter
	conn     net.Conn
	reg      registry
	buf      []byte
	pending  uint64 // records in buf
	backoff  time.Duration
	nextDial time.Time
	lastErr  error
	down     bool // the last connection attempt failed (logged once)
}

// NewWriter returns a writer sending to cfg.Addr and starts its goroutine.
// It does not wait for a connection: a bridge that is not there yet only
// means records are buffered and, once the buffer is full, dropped. It
// returns an error only for an invalid configuration.
func NewWriter(cfg Config) (*Writer, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	w := &Writer{
		cfg:       cfg,
		shards:    make([]shard, cfg.Shards),
		shardMask: uint64(cfg.Shards - 1),
		hostID:    names.intern(cfg.Hostname),
		sessionID: names.intern(cfg.SessionID),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
		wake:      make(chan struct{}, 1),
		flushReq:  make(chan chan error),
		buf:       make([]byte, 0, cfg.BatchBytes+4096),
	}
	w.node = names.str(w.hostID)
	for i := range w.shards {
		w.shards[i].init(cfg.BufferEvents/cfg.Shards, w.wake)
	}
	w.ctx, w.cancel = context.WithCancel(context.Background())
	go w.run()
	return w, nil
}

// Stats returns the counts so far.
func (w *Writer) Stats() Stats {
	if w == nil {
		return Stats{}
	}
	s := Stats{
		Sent:            w.sent.Load(),
		Bytes:           w.bytes.Load(),
		Lost:            w.lost.Load(),
		Overflowed:      names.overflowed.Load(),
		Connects:        w.connects.Load(),
		ConnectFailures: w.connectFailures.Load(),
		WriteFailures:   w.writeFailures.Load(),
		Connected:       w.connected.Load(),
	}
	for i := range w.shards {
		s.Rejected += w.shards[i].rejected.Load()
		s.Buffered += w.shards[i].buffered()
	}
	s.Dropped = s.Rejected + s.Lost
	return s
}

// Flush asks the writer goroutine to send everything buffered now and
// waits until it has, or until ctx is done. It returns an error wrapping
// ErrNotConnected (and the reason) when there is no connection to send on.
// Events a trace has not published yet (see Trace.End) are not buffered.
func (w *Writer) Flush(ctx context.Context) error {
	if w == nil {
		return ErrClosed
	}
	reply := make(chan error, 1)
	select {
	case w.flushReq <- reply:
	case <-w.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops the probes of this writer (later records are rejected),
// sends what is buffered, waiting at most Config.CloseTimeout, and stops
// the writer goroutine. It returns an error wrapping ErrDropped when
// records were dropped during the writer's life. It is safe to call more
// than once; later calls return the first call's result.
func (w *Writer) Close() error {
	if w == nil {
		return nil
	}
	w.closeOnce.Do(func() {
		for i := range w.shards {
			w.shards[i].closed.Store(true)
		}
		by := time.Now().Add(w.cfg.CloseTimeout)
		w.connMu.Lock()
		w.closeBy = by
		if w.live != nil {
			w.live.SetWriteDeadline(by)
		}
		w.connMu.Unlock()
		stopDial := time.AfterFunc(w.cfg.CloseTimeout, w.cancel)
		close(w.stop)
		<-w.done
		stopDial.Stop()
		w.cancel()
		st := w.Stats()
		if st.Dropped > 0 {
			reason := ""
			if w.lastErr != nil {
				reason = fmt.Sprintf("; last error: %v", w.lastErr)
			}
			w.closeErr = fmt.Errorf("probe %s: %w: %d of %d (%d rejected, %d lost)%s",
				w.cfg.Addr, ErrDropped, st.Dropped, st.Dropped+st.Sent, st.Rejected, st.Lost, reason)
		}
	})
	return w.closeErr
}

// alwaysReady is a closed channel: selecting on it never waits.
var alwaysReady = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

func (w *Writer) run() {
	defer close(w.done)
	tick := time.NewTicker(w.cfg.FlushInterval)
	defer tick.Stop()
	for {
		var again <-chan struct{}
		if w.pump() {
			again = alwaysReady
		}
		select {
		case <-w.stop:
			w.finish()
			return
		case reply := <-w.flushReq:
			reply <- w.flush()
		case <-tick.C:
		case <-w.wake:
		case <-again:
		}
	}
}

// pump connects when due, then moves buffered records to the connection,
// one pass over the shards taking at most a buffer's worth. It reports
// whether records remain.
func (w *Writer) pump() bool {
	if w.conn == nil && !w.connect(w.ctx, false) {
		return false
	}
	w.clock.update()
	more := false
	quota := w.cfg.BufferEvents / len(w.shards)
	for i := range w.shards {
		if w.drain(&w.shards[i], quota) {
			more = true
		}
		if w.conn == nil {
			return false
		}
	}
	w.write()
	return more && w.conn != nil
}

// drain encodes up to quota records of s, writing whenever a batch is
// full. It reports whether s still had records when the quota ran out.
func (w *Writer) drain(s *shard, quota int) bool {
	var ev, ext event
	defer s.release()
	for n := 0; n < quota; n++ {
		if !s.pop(&ev) {
			return false
		}
		if paired(ev.kind) {
			if !s.pop(&ext) { // published with ev, in a moment
				s.unpop()
				return false
			}
			if ext.kind != ev.kind+1 { // not written by this package
				s.unpop()
				ext = event{trace: ev.trace}
			}
		}
		ev.ts = w.clock.toNs(ev.ts)
		w.buf = w.reg.appendEvent(w.buf, &ev, &ext, w.hostID)
		w.pending++
		if len(w.buf) >= w.cfg.BatchBytes {
			s.release()
			w.write()
			if w.conn == nil {
				return true
			}
		}
	}
	return true
}

// flush sends everything buffered and reports whether it could.
func (w *Writer) flush() error {
	for range 4 * len(w.shards) {
		if !w.pump() {
			break
		}
	}
	if w.conn == nil {
		if w.lastErr != nil {
			return fmt.Errorf("probe %s: %w: %w", w.cfg.Addr, ErrNotConnected, w.lastErr)
		}
		return fmt.Errorf("probe %s: %w", w.cfg.Addr, ErrNotConnected)
	}
	return nil
}

// finish runs when Close was called: one last connection attempt if there
// is none, then everything buffered goes out before Close's deadline, and
// what remains is counted as lost.
func (w *Writer) finish() {
	if w.conn == nil {
		w.connect(w.ctx, true)
	}
	for w.conn != nil && w.pump() {
	}
	var ev event
	for i := range w.shards {
		for w.shards[i].pop(&ev) {
			if !second(ev.kind) {
				w.lost.Add(1)
			}
		}
		w.shards[i].release()
	}
	w.disconnect(nil)
}

// write sends the encoded batch.
func (w *Writer) write() {
	if len(w.buf) == 0 || w.conn == nil {
		return
	}
	w.connMu.Lock()
	by := time.Now().Add(w.cfg.WriteTimeout)
	if !w.closeBy.IsZero() && w.closeBy.Before(by) {
		by = w.closeBy
	}
	w.conn.SetWriteDeadline(by)
	w.connMu.Unlock()
	_, err := w.conn.Write(w.buf)
	if err != nil {
		w.writeFailures.Add(1)
		w.lost.Add(w.pending)
		w.disconnect(fmt.Errorf("write: %w", err))
	} else {
		w.sent.Add(w.pending)
		w.bytes.Add(uint64(len(w.buf)))
	}
	w.buf = w.buf[:0]
	w.pending = 0
}

// connect dials the bridge unless the back-off says to wait (force ignores
// it). A new connection starts a new registry.
func (w *Writer) connect(ctx context.Context, force bool) bool {
	if !force && time.Now().Before(w.nextDial) {
		return false
	}
	if ctx.Err() != nil {
		return false
	}
	d := net.Dialer{Timeout: w.cfg.DialTimeout}
	c, err := d.DialContext(ctx, "tcp", w.cfg.Addr)
	if err != nil {
		w.connectFailures.Add(1)
		w.lastErr = err
		if w.backoff == 0 {
			w.backoff = w.cfg.ReconnectMin
		} else {
			w.backoff = min(2*w.backoff, w.cfg.ReconnectMax)
		}
		w.nextDial = time.Now().Add(w.backoff)
		if !w.down {
			w.down = true
			w.log("probe cannot reach the bridge", "addr", w.cfg.Addr, "err", err.Error())
		}
		return false
	}
	w.connMu.Lock()
	w.conn, w.live = c, c
	w.connMu.Unlock()
	w.reg.reset()
	w.backoff = 0
	w.down = false
	w.connects.Add(1)
	w.connected.Store(true)
	w.log("probe connected", "addr", w.cfg.Addr)
	return true
}

// disconnect closes the connection; err says why (nil at Close).
func (w *Writer) disconnect(err error) {
	if w.conn == nil {
		return
	}
	w.connMu.Lock()
	w.conn.Close()
	w.conn, w.live = nil, nil
	w.connMu.Unlock()
	w.connected.Store(false)
	if err != nil {
		w.lastErr = err
		w.backoff = w.cfg.ReconnectMin
		w.nextDial = time.Now().Add(w.backoff)
		w.log("probe lost the connection to the bridge", "addr", w.cfg.Addr, "err", err.Error())
	}
}

func (w *Writer) log(msg string, args ...any) {
	if w.cfg.Logger != nil {
		w.cfg.Logger.Info(msg, args...)
	}
}
