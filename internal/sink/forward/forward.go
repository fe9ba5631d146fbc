package forward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracebridge/tracebridge/internal/backoff"
	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Defaults of Config.
const (
	DefaultDialTimeout        = 5 * time.Second
	DefaultBackoffMin         = 100 * time.Millisecond
	DefaultBackoffMax         = 30 * time.Second
	DefaultBufferSize         = 64 << 10
	DefaultWriteTimeout       = 30 * time.Second
	DefaultMaxRegistryEntries = 500_000
)

// maxDialWait bounds how long a non-blocking Consume waits for the dial it
// started before it drops the batch; the dial goes on in the background.
const maxDialWait = time.Second

// Config configures a Sink. Zero values select the defaults.
type Config struct {
	// URL is the target: kieker-tcp://HOST:PORT or kdb-tcp://HOST:PORT.
	URL string
	// Mapping gives the KDB ids (kdb-tcp only); nil means
	// kdb.DefaultMapping(Catalog).
	Mapping *kdb.Mapping
	// Catalog builds the default mapping; nil means record.Builtin().
	Catalog *record.Catalog

	// DialTimeout bounds one connection attempt (default 5 s).
	DialTimeout time.Duration
	// BackoffMin and BackoffMax bound the wait between failed connection
	// attempts, which doubles from BackoffMin (default 100 ms) up to
	// BackoffMax (default 30 s).
	BackoffMin time.Duration
	BackoffMax time.Duration
	// BufferSize is the size in bytes at which encoded records are written
	// to the connection (default 64 KiB); Flush writes what is left.
	BufferSize int
	// WriteTimeout bounds one write: a peer that accepts nothing for that
	// long counts as lost (default 30 s; negative: no limit).
	WriteTimeout time.Duration
	// MaxRegistryEntries (kieker-tcp only) is the number of strings after
	// which a connection is replaced by a new one with an empty registry
	// (default 500000, half the default limit of tracebridge's receivers).
	MaxRegistryEntries int

	// Block makes Consume wait, retrying, until its batch is written (for
	// replay); otherwise a batch that cannot be sent is dropped.
	Block bool
}

// Settings are the sink's injected dependencies.
type Settings struct {
	// Logger hears about connection state changes and unsendable record
	// types; nil discards.
	Logger *slog.Logger
	// Metrics counts dropped records (Dropped). The sink does not call
	// Consumed: the caller that times Consume (the bridge) does.
	Metrics *metrics.Sink
}

var (
	// ErrDropped is wrapped by the errors of Consume and Flush when records
	// were dropped because the target could not be reached or the
	// connection was lost.
	ErrDropped = errors.New("dropped")
	// ErrClosed is returned by Consume after Close (and by a blocked
	// Consume that Close interrupted).
	ErrClosed = errors.New("forward sink closed")
)

// Stats count what a Sink did.
type Stats struct {
	// Sent is the number of records written to a connection (handed to
	// the operating system; see the package comment on delivery). In
	// Block mode a re-sent record counts again.
	Sent int64
	// Dropped is the number of records given up on: unsendable types, and
	// without Block the records that could not be sent.
	Dropped int64
	// Connects is the number of connections made.
	Connects int64
	// Unconfirmed is the number of records written to connections that the
	// receiver closed or reset before their stream ended (a lost
	// connection, or one whose end Close could not confirm): they may not
	// have arrived. In Block mode a batch being written when its
	// connection broke is sent again and counts only once it is lost again;
	// the records of earlier batches on that connection are not sent again.
	Unconfirmed int64
	// Confirmed is the number of records written to the last connection
	// when its receiver closed its end after Close ended the stream: it
	// read them all, so it speaks the protocol.
	Confirmed int64
}

// Sink forwards records to another receiver over TCP.
type Sink struct {
	cfg    Config
	target Target
	log    *slog.Logger
	met    *metrics.Sink
	mapped *kdb.Mapping
	kdbEnc *kdb.Encoder
	dial   func(ctx context.Context, network, addr string) (net.Conn, error)

	closeCtx context.Context // cancelled by Close: interrupts dials and waits
	cancel   context.CancelFunc
	wg       sync.WaitGroup // connection watchers and background dials

	cur         atomic.Pointer[link] // the connection, for Connected
	sent        atomic.Int64
	dropped     atomic.Int64
	connects    atomic.Int64
	unconfirmed atomic.Int64
	confirmed   atomic.Int64

	mu       sync.Mutex
	closed   bool
	link     *link
	buf      []byte // encoded records not yet written
	pending  int    // records in buf
	accepted int    // of them, records of batches whose Consume returned nil
	lost     int    // accepted records dropped since the last Flush
	lostErr  error  // why the first of them was dropped
	dialing  chan dialResult
	back     backoff.Exponential // wait after the next failed dial; Reset on a connect or a loss
	nextDial time.Time
	state    state
	lastErr  error     // why the target is down
	downAt   time.Time // when it went down
	downDrop int64     // records dropped while down
	warned   map[string]bool
}

type state uint8

const (
	stateIdle state = iota // never tried
	stateUp
	stateDown
)

// link is one connection.
type link struct {
	conn  net.Conn
	enc   *kieker.Encoder // kieker-tcp: the connection's string registry
	gone  atomic.Bool     // the peer closed it (or reading failed)
	err   error           // why; written before gone is set
	done  chan struct{}   // closed when watch returns
	wrote bool            // records were written on it; s.mu
	// records counts the records written on it whole (s.mu); a batch
	// being written when a write fails is not counted.
	records int64
}

type dialResult struct {
	conn net.Conn
	err  error
}

var _ pipeline.Sink = (*Sink)(nil)

// New validates cfg and returns a sink. It does not connect: the first
// Consume does.
func New(cfg Config, set Settings) (*Sink, error) {
	t, err := ParseURL(cfg.URL)
	if err != nil {
		return nil, err
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.BackoffMin == 0 {
		cfg.BackoffMin = DefaultBackoffMin
	}
	if cfg.BackoffMax == 0 {
		cfg.BackoffMax = max(DefaultBackoffMax, cfg.BackoffMin)
	}
	if cfg.BufferSize == 0 {
		cfg.BufferSize = DefaultBufferSize
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = DefaultWriteTimeout
	}
	if cfg.MaxRegistryEntries == 0 {
		cfg.MaxRegistryEntries = DefaultMaxRegistryEntries
	}
	switch {
	case cfg.DialTimeout < 0:
		return nil, fmt.Errorf("forward to %s: negative dial timeout %v", t, cfg.DialTimeout)
	case cfg.BackoffMin < 0:
		return nil, fmt.Errorf("forward to %s: negative back-off %v", t, cfg.BackoffMin)
	case cfg.BackoffMax < cfg.BackoffMin:
		return nil, fmt.Errorf("forward to %s: maximum back-off %v below the minimum %v", t, cfg.BackoffMax, cfg.BackoffMin)
	case cfg.BufferSize < 0:
		return nil, fmt.Errorf("forward to %s: negative buffer size %d", t, cfg.BufferSize)
	case cfg.MaxRegistryEntries < 0:
		return nil, fmt.Errorf("forward to %s: negative registry limit %d", t, cfg.MaxRegistryEntries)
	}
	s := &Sink{cfg: cfg, target: t, log: set.Logger, met: set.Metrics, dial: (&net.Dialer{}).DialContext,
		back: backoff.Exponential{Min: cfg.BackoffMin, Max: cfg.BackoffMax}}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if t.Protocol == KDB {
		s.mapped = cfg.Mapping
		if s.mapped == nil {
			cat := cfg.Catalog
			if cat == nil {
				cat = record.Builtin()
			}
			if s.mapped, err = kdb.DefaultMapping(cat); err != nil {
				return nil, fmt.Errorf("forward to %s: %w", t, err)
			}
		}
		s.kdbEnc = kdb.NewEncoder(s.mapped, kdb.Options{})
	}
	s.closeCtx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Target returns the parsed target.
func (s *Sink) Target() Target { return s.target }

// Connected reports whether the sink holds an open connection whose peer has
// not closed it. It never blocks.
func (s *Sink) Connected() bool {
	l := s.cur.Load()
	return l != nil && !l.gone.Load()
}

// Stats returns the counts so far. It never blocks.
func (s *Sink) Stats() Stats {
	return Stats{Sent: s.sent.Load(), Dropped: s.dropped.Load(), Connects: s.connects.Load(), Unconfirmed: s.unconfirmed.Load(), Confirmed: s.confirmed.Load()}
}

// Consume encodes b and sends it (see the package comment for when it is
// written, retried or dropped). It keeps nothing of b.
func (s *Sink) Consume(ctx context.Context, b *record.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.drop(b.Len())
		return fmt.Errorf("forward to %s: %d records dropped: %w", s.target, b.Len(), ErrClosed)
	}
	if s.cfg.Block {
		return s.consumeBlocking(ctx, b)
	}
	return s.consumeNow(ctx, b)
}

// consumeNow is Consume without Block. s.mu is held.
func (s *Sink) consumeNow(ctx context.Context, b *record.Batch) error {
	s.checkLink()
	if s.link == nil {
		s.connectAsync(ctx)
		if s.link == nil {
			n := b.Len()
			s.drop(n)
			s.downDrop += int64(n)
			return fmt.Errorf("forward to %s: not connected, %d records %w: %w", s.target, n, ErrDropped, s.downErr())
		}
	}
	skipped := 0
	for i := range b.Records {
		if !s.encode(&b.Records[i]) {
			skipped++
			continue
		}
		if len(s.buf) < s.cfg.BufferSize {
			continue
		}
		if err := s.write(); err != nil {
			return s.lostBatch(err, len(b.Records)-i-1, skipped)
		}
	}
	s.drop(skipped)
	if err := s.rotate(); err != nil {
		return s.lostBatch(err, 0, 0)
	}
	s.accepted = s.pending
	return nil
}

// lostBatch handles a failed write inside a non-blocking Consume: the
// connection is lost with the buffer, rest records of the batch were not
// encoded yet and skipped could not be encoded. The error counts the batch's
// own records; records of earlier batches in the buffer are reported by the
// next Flush.
func (s *Sink) lostBatch(err error, rest, skipped int) error {
	n, earlier := s.lose(err)
	n += rest
	s.drop(n + skipped)
	s.downDrop += int64(n)
	return fmt.Errorf("forward to %s: connection lost, %d records of the batch %w: %w", s.target, n-earlier, ErrDropped, err)
}

// consumeBlocking is Consume with Block. s.mu is held.
func (s *Sink) consumeBlocking(ctx context.Context, b *record.Batch) error {
	for {
		if err := s.interrupted(ctx); err != nil {
			s.drop(b.Len())
			return fmt.Errorf("forward to %s: %d records not sent: %w", s.target, b.Len(), err)
		}
		s.checkLink()
		if s.link == nil {
			if err := s.connectBlocking(ctx, false); err != nil {
				continue // interrupted (checked above) or failed (back-off)
			}
		}
		before := s.link.records
		skipped, err := s.sendWhole(b)
		if err == nil {
			s.drop(skipped)
			s.rotate() // the buffer is empty: it cannot fail
			return nil
		}
		s.link.records = before // the batch is sent again whole
		s.lose(err)
	}
}

// sendWhole encodes and writes all of b. On error the connection is broken
// and what was written of b is incomplete.
func (s *Sink) sendWhole(b *record.Batch) (skipped int, err error) {
	for i := range b.Records {
		if !s.encode(&b.Records[i]) {
			skipped++
			continue
		}
		if len(s.buf) >= s.cfg.BufferSize {
			if err := s.write(); err != nil {
				return skipped, err
			}
		}
	}
	if len(s.buf) > 0 {
		if err := s.write(); err != nil {
			return skipped, err
		}
	}
	return skipped, nil
}

// errDialing is the reason for a drop while the first connection attempt
// is still running.
var errDialing = errors.New("connection attempt in progress")

func (s *Sink) downErr() error {
	if s.lastErr == nil {
		return errDialing
	}
	return s.lastErr
}

// interrupted reports why a blocking Consume must stop, if it must.
func (s *Sink) interrupted(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closeCtx.Err() != nil {
		return ErrClosed
	}
	return nil
}

// encode appends r to the buffer and reports whether it could. A record
// that cannot be encoded is skipped and its type logged once.
func (s *Sink) encode(r *record.Record) bool {
	var err error
	if s.kdbEnc != nil {
		s.buf, err = s.kdbEnc.AppendBinary(s.buf, r)
		if errors.Is(err, kdb.ErrUnmapped) {
			s.warnOnce(r.Type, "record type has no id in the KDB mapping; its records are dropped", nil)
			return false
		}
	} else {
		s.buf, err = s.link.enc.Append(s.buf, r)
	}
	if err != nil {
		s.warnOnce(r.Type, "cannot encode a record of this type; such records are dropped", err)
		return false
	}
	s.pending++
	return true
}

func (s *Sink) warnOnce(t *record.Type, msg string, err error) {
	name := "<nil>"
	if t != nil {
		name = t.Name
	}
	if s.warned[name] {
		return
	}
	if s.warned == nil {
		s.warned = make(map[string]bool)
	}
	s.warned[name] = true
	attrs := []any{"target", s.target.String(), "type", name}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	s.log.Warn("forward: "+msg, attrs...)
}

// write writes the buffer to the connection.
func (s *Sink) write() error {
	l := s.link
	if l.gone.Load() {
		return fmt.Errorf("peer closed the connection: %w", l.err)
	}
	if s.cfg.WriteTimeout > 0 {
		if err := l.conn.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)); err != nil {
			return err
		}
	}
	if _, err := l.conn.Write(s.buf); err != nil {
		return err
	}
	l.wrote = true
	l.records += int64(s.pending)
	s.sent.Add(int64(s.pending))
	s.buf = s.buf[:0]
	s.pending, s.accepted = 0, 0
	return nil
}

func (s *Sink) drop(n int) {
	if n > 0 {
		s.dropped.Add(int64(n))
		s.met.Dropped(n)
	}
}

// checkLink notices a connection whose peer has closed it. The records
// still buffered belong to earlier batches: the next Flush reports them.
func (s *Sink) checkLink() {
	if l := s.link; l != nil && l.gone.Load() {
		n, _ := s.lose(fmt.Errorf("peer closed the connection: %w", l.err))
		s.drop(n)
		s.downDrop += int64(n)
	}
}

// lose closes the broken connection and empties the buffer (see
// dropBuffer).
func (s *Sink) lose(err error) (n, earlier int) {
	if s.link != nil {
		s.unconfirmed.Add(s.link.records)
	}
	s.closeLink()
	n, earlier = s.dropBuffer(err)
	s.state = stateDown
	s.lastErr = err
	s.downAt = time.Now()
	s.downDrop = 0
	s.back.Reset()
	s.nextDial = time.Time{} // the first attempt after a loss is immediate
	s.log.Warn("forward: connection lost, reconnecting", "target", s.target.String(), "err", err)
	return n, earlier
}

// dropBuffer empties the buffer, which could not be written because of
// err. It returns the number of records that were in it and, of them, those
// of batches whose Consume had returned nil, which it remembers for the next
// Flush.
func (s *Sink) dropBuffer(err error) (n, earlier int) {
	n, earlier = s.pending, s.accepted
	if earlier > 0 {
		if s.lost == 0 {
			s.lostErr = err
		}
		s.lost += earlier
	}
	s.buf = s.buf[:0]
	s.pending, s.accepted = 0, 0
	return n, earlier
}

// takeLost returns an error wrapping ErrDropped when records of batches
// whose Consume had returned nil were dropped since the last call, and
// forgets them.
func (s *Sink) takeLost(when string) error {
	if s.lost == 0 {
		return nil
	}
	n, err := s.lost, s.lostErr
	s.lost, s.lostErr = 0, nil
	return fmt.Errorf("forward to %s: %s, %d records buffered since the last flush were %w: %w", s.target, when, n, ErrDropped, err)
}

// rotate replaces a kieker-tcp connection whose registry is full. The
// buffer is written first (in Block mode it is already empty); an error
// means that write failed and the connection was lost with the buffer.
func (s *Sink) rotate() error {
	l := s.link
	if l == nil || l.enc == nil || l.enc.Registry().Len() < s.cfg.MaxRegistryEntries {
		return nil
	}
	if len(s.buf) > 0 {
		if err := s.write(); err != nil {
			return err
		}
	}
	s.log.Debug("forward: new connection for a fresh string registry", "target", s.target.String(), "entries", l.enc.Registry().Len())
	s.closeLink()
	s.nextDial = time.Time{}
	return nil
}

func (s *Sink) closeLink() {
	if s.link != nil {
		s.link.conn.Close()
		s.link = nil
		s.cur.Store(nil)
	}
}

// install makes c the connection.
func (s *Sink) install(c net.Conn) {
	l := &link{conn: c, done: make(chan struct{})}
	if s.target.Protocol == Kieker {
		l.enc = kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
	}
	s.link = l
	s.cur.Store(l)
	s.connects.Add(1)
	s.back.Reset()
	s.wg.Add(1)
	go s.watch(l)
	switch s.state {
	case stateIdle:
		s.log.Info("forward: connected", "target", s.target.String())
	case stateDown:
		s.log.Info("forward: reconnected", "target", s.target.String(),
			"down_for", time.Since(s.downAt).Round(time.Millisecond).String(), "dropped", s.downDrop)
	}
	s.state = stateUp
	s.lastErr = nil
}

// watch reads from the connection until it fails, to notice at once when
// the peer closes it. Whatever the peer sends is discarded.
func (s *Sink) watch(l *link) {
	defer s.wg.Done()
	defer close(l.done)
	var buf [512]byte
	for {
		if _, err := l.conn.Read(buf[:]); err != nil {
			l.err = err
			l.gone.Store(true)
			return
		}
	}
}

// dialFailed schedules the next attempt.
func (s *Sink) dialFailed(err error) {
	s.nextDial = time.Now().Add(s.back.Next())
	s.lastErr = err
	if s.state != stateDown { // never connected, or a rotation's new connection failed
		s.state = stateDown
		s.downAt = time.Now()
		s.log.Warn("forward: target unreachable; retrying in the background", "target", s.target.String(), "err", err)
	}
}

func (s *Sink) dialed(r dialResult) {
	if r.err != nil {
		if s.closeCtx.Err() != nil { // interrupted by Close, not a failure
			s.lastErr = ErrClosed
			return
		}
		s.dialFailed(r.err)
		return
	}
	s.install(r.conn)
}

// connectAsync starts a background dial when one is due and waits for it
// briefly, or picks up the result of an earlier one. s.mu is held.
func (s *Sink) connectAsync(ctx context.Context) {
	if s.dialing != nil {
		select {
		case r := <-s.dialing:
			s.dialing = nil
			s.dialed(r)
		default:
		}
		return
	}
	if time.Now().Before(s.nextDial) {
		return
	}
	ch := make(chan dialResult, 1)
	s.dialing = ch
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		dctx, cancel := context.WithTimeout(s.closeCtx, s.cfg.DialTimeout)
		defer cancel()
		c, err := s.dial(dctx, "tcp", s.target.Addr)
		ch <- dialResult{c, err}
	}()
	t := time.NewTimer(maxDialWait)
	defer t.Stop()
	select {
	case r := <-ch:
		s.dialing = nil
		s.dialed(r)
	case <-t.C:
	case <-ctx.Done():
	}
}

// connectBlocking waits for the next attempt and dials. quiet (Connect's
// first attempt, whose caller reports the outcome) logs neither the
// connection nor the failure, and a failure leaves the sink idle. s.mu is
// held.
func (s *Sink) connectBlocking(ctx context.Context, quiet bool) error {
	if d := time.Until(s.nextDial); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-s.closeCtx.Done():
			t.Stop()
			return ErrClosed
		}
	}
	dctx, cancel := context.WithTimeout(ctx, s.cfg.DialTimeout)
	stop := context.AfterFunc(s.closeCtx, cancel)
	c, err := s.dial(dctx, "tcp", s.target.Addr)
	stop()
	cancel()
	if err != nil {
		switch {
		case s.interrupted(ctx) != nil:
		case quiet:
			s.nextDial, s.lastErr = time.Now().Add(s.back.Next()), err
		default:
			s.dialFailed(err)
		}
		return err
	}
	if quiet {
		s.state = stateUp // install logs nothing
	}
	s.install(c)
	return nil
}

// Flush writes the buffered records to the connection. Without a
// connection there is nothing buffered. It returns an error wrapping
// ErrDropped when records of batches whose Consume returned nil since the
// last Flush were dropped: by a failed write now (which loses the
// connection), or earlier, when the connection was lost with them in the
// buffer. A nil error means every such record was written to a connection.
func (s *Sink) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	if s.link != nil && len(s.buf) > 0 {
		if err := s.write(); err != nil {
			n, _ := s.lose(err)
			s.drop(n)
			s.downDrop += int64(n)
		}
	}
	return s.takeLost("flush")
}

// closeWait bounds how long Close waits for the receiver to close its end
// of the connection after the sink closed its own for writing.
const closeWait = 2 * time.Second

// endStream closes l for writing and waits, up to closeWait, until the
// receiver closes its end, as receivers do once they have read everything.
// A receiver that had closed its end already, or that resets the
// connection, may not have read every record written: that is an error,
// and the records written on l count as Unconfirmed. A receiver that keeps
// its end open tells nothing; that is not.
func (s *Sink) endStream(l *link) error {
	// l.err is watch's only once gone says so (it is stored after).
	gone := l.gone.Load()
	if gone || peerEnded(l.conn) {
		var why error
		if gone {
			why = l.err
		}
		if why == nil {
			why = errors.New("its end was closed")
		}
		s.unconfirmed.Add(l.records)
		return fmt.Errorf("forward to %s: %d records may be %w: the receiver closed the connection before the end of the stream (%v), so it may not have read them all", s.target, l.records, ErrDropped, why)
	}
	cw, ok := l.conn.(interface{ CloseWrite() error })
	if !ok {
		return nil
	}
	if err := cw.CloseWrite(); err != nil {
		s.unconfirmed.Add(l.records)
		return fmt.Errorf("forward to %s: %d records may be %w: ending the stream: %w", s.target, l.records, ErrDropped, err)
	}
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-l.done:
	case <-t.C:
		return nil
	}
	if errors.Is(l.err, io.EOF) {
		s.confirmed.Add(l.records)
		return nil
	}
	s.unconfirmed.Add(l.records)
	return fmt.Errorf("forward to %s: %d records may be %w: the receiver reset the connection at the end of the stream (%v), so it may not have read them all", s.target, l.records, ErrDropped, l.err)
}

// Connect dials the target now, unless the sink holds an open connection,
// and returns the dial's error: for callers that want to fail at once when
// nobody listens (later outages are handled as the package comment says).
// The outcome of a first connection is the caller's to report: it is not
// logged.
func (s *Sink) Connect(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return fmt.Errorf("forward to %s: %w", s.target, ErrClosed)
	}
	s.checkLink()
	if s.link != nil {
		return nil
	}
	s.nextDial = time.Time{}
	if err := s.connectBlocking(ctx, s.state == stateIdle); err != nil {
		return fmt.Errorf("forward to %s: %w", s.target, err)
	}
	return nil
}

// Close flushes, closes the connection and stops the sink's goroutines. It
// interrupts a Consume blocked waiting for the target. Like Flush, it
// returns an error wrapping ErrDropped when records of batches whose
// Consume returned nil were dropped since the last Flush. It ends the
// stream with a half-close and waits up to closeWait for the receiver to
// close its end; a receiver that hung up before the end or resets the
// connection is an error wrapping ErrDropped too (see endStream). It is
// safe to call twice; the second call does nothing.
func (s *Sink) Close() error {
	s.cancel()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	if s.link != nil && len(s.buf) > 0 {
		if werr := s.write(); werr != nil {
			n, _ := s.dropBuffer(werr)
			s.drop(n)
		}
	}
	err := s.takeLost("closing")
	if l := s.link; l != nil && l.wrote {
		err = errors.Join(err, s.endStream(l))
	}
	s.buf, s.pending, s.accepted = nil, 0, 0
	s.closeLink()
	if s.dialing != nil {
		if r := <-s.dialing; r.conn != nil {
			r.conn.Close()
		}
		s.dialing = nil
	}
	s.mu.Unlock()
	s.wg.Wait()
	return err
}
