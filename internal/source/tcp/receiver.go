package tcp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracebridge/tracebridge/internal/backoff"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Receiver is a TCP source of the bridge (see the package comment).
type Receiver struct {
	cfg     Config
	log     *slog.Logger
	met     *metrics.Receiver
	faults  *rateLog // malformed streams, truncations, panics, consumer errors
	rejects *rateLog // connections over the limit
	ln      net.Listener
	regLn   net.Listener
	dual    *dualRegistry

	closeLn sync.Once
	mem     pipeline.Memory // nil: no memory limit

	mu      sync.Mutex // guards the run state below
	started bool
	closed  bool
	cancel  context.CancelFunc
	runDone chan struct{}

	cmu   sync.Mutex // guards the connection set
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup // connection goroutines

	// Draining (after cancel) and stopped (the consumer refused batches
	// for good) are set once, each before its channel is closed and the
	// open connections' read deadlines are set; connections check them
	// before every read.
	draining, stopped atomic.Bool
	drain, stop       chan struct{}
	stopOnce          sync.Once

	fmu   sync.Mutex
	fatal error // why the receiver stopped by itself (consumer closed)

	bytes, records, accepted, open, rejected, decodeErrors atomic.Int64
	sessions                                               atomic.Int64 // connections served, numbering their sessions
}

// Stats are a receiver's running totals.
type Stats struct {
	Bytes        int64 // bytes read
	Records      int64 // records handed on
	Connections  int64 // connections accepted or made
	Open         int64 // connections open now
	Rejected     int64 // connections closed at once (limit, single server busy)
	DecodeErrors int64 // connections closed for malformed input, truncation or a decoder panic
}

// New validates cfg and, for the listening modes, binds the listeners, so
// that Addr is known before Run. Errors wrap ErrConfig or ErrListen.
func New(cfg Config, set Settings) (*Receiver, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := set.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Receiver{
		cfg:     cfg,
		log:     log,
		met:     set.Metrics,
		mem:     set.Memory,
		faults:  newRateLog(log, cfg.Name, cfg.LogRate),
		rejects: newRateLog(log, cfg.Name, cfg.LogRate),
		conns:   make(map[net.Conn]struct{}),
		drain:   make(chan struct{}),
		stop:    make(chan struct{}),
	}
	if cfg.Mode == Client {
		return r, nil
	}
	if r.ln, err = r.listen(cfg.Address); err != nil {
		return nil, err
	}
	if cfg.Mode == Dual {
		if r.regLn, err = r.listen(cfg.RegistryAddress); err != nil {
			r.ln.Close()
			return nil, err
		}
		r.dual = newDualRegistry(cfg.Kieker)
	}
	return r, nil
}

func (r *Receiver) listen(addr string) (net.Listener, error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%w %s: %w", ErrListen, addr, err)
	}
	if r.cfg.TLS != nil {
		return tls.NewListener(ln, r.cfg.TLS), nil
	}
	return ln, nil
}

// Addr returns the bound address of the listener (records listener in
// Dual mode), or nil for a Client.
func (r *Receiver) Addr() net.Addr {
	if r.ln == nil {
		return nil
	}
	return r.ln.Addr()
}

// RegistryAddr returns the bound address of Dual's registry listener, or
// nil in the other modes.
func (r *Receiver) RegistryAddr() net.Addr {
	if r.regLn == nil {
		return nil
	}
	return r.regLn.Addr()
}

// Stats returns the running totals.
func (r *Receiver) Stats() Stats {
	return Stats{
		Bytes:        r.bytes.Load(),
		Records:      r.records.Load(),
		Connections:  r.accepted.Load(),
		Open:         r.open.Load(),
		Rejected:     r.rejected.Load(),
		DecodeErrors: r.decodeErrors.Load(),
	}
}

// Run receives records and hands them to out until ctx is cancelled (or
// Close is called), a SingleServer's connection ends, or a Client without
// Respawn loses its connection; then it drains and closes the open
// connections (see the package comment) and returns nil. It returns an
// error wrapping ErrConnect when a Client without Respawn cannot connect,
// and one wrapping pipeline.ErrClosed when out refused batches for good.
// Run may be called once.
func (r *Receiver) Run(ctx context.Context, out pipeline.Consumer) error {
	if out == nil {
		return fmt.Errorf("tcp receiver %s: %w: no consumer", r.cfg.Name, ErrConfig)
	}
	r.mu.Lock()
	if r.started || r.closed {
		r.mu.Unlock()
		return fmt.Errorf("tcp receiver %s: Run called after Run or Close", r.cfg.Name)
	}
	r.started = true
	ctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	r.runDone = make(chan struct{})
	r.mu.Unlock()
	defer close(r.runDone)
	defer cancel()

	em := newEmitter(context.WithoutCancel(ctx), out)
	var err error
	if r.cfg.Mode == Client {
		err = r.runClient(ctx, em)
	} else {
		r.runServer(ctx, cancel, em)
	}
	r.shutdown()
	r.faults.flush()
	r.rejects.flush()
	if err == nil {
		r.fmu.Lock()
		err = r.fatal
		r.fmu.Unlock()
	}
	return err
}

// Close stops a running Run as cancelling its context does and waits for
// it to return, that is for the drain (see the package comment); without
// Run it releases the listeners. It is safe to call
// twice. It must not be called from the consumer (Run waits for the
// consumer to return).
func (r *Receiver) Close() error {
	r.mu.Lock()
	r.closed = true
	cancel, done := r.cancel, r.runDone
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
		return nil
	}
	r.closeListeners()
	return nil
}

func (r *Receiver) closeListeners() {
	r.closeLn.Do(func() {
		if r.ln != nil {
			r.ln.Close()
		}
		if r.regLn != nil {
			r.regLn.Close()
		}
	})
}

// runServer accepts connections until ctx is done; a SingleServer cancels
// ctx itself when its connection ends.
func (r *Receiver) runServer(ctx context.Context, cancel context.CancelFunc, em *emitter) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		newDec, role := r.cfg.NewDecoder, ""
		if r.dual != nil {
			newDec, role = r.dual.records, "records"
		}
		r.accept(ctx, r.ln, newDec, role, em, cancel)
	}()
	if r.regLn != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.accept(ctx, r.regLn, r.dual.entries, "registry", em, cancel)
		}()
	}
	<-ctx.Done()
	// Connections the kernel already accepted (the listen backlog) belong
	// to clients that may have sent everything and gone: take them too,
	// then stop accepting. Accept returns them at once and fails at the
	// deadline.
	backlog := time.Now().Add(backlogGrace)
	for _, ln := range []net.Listener{r.ln, r.regLn} {
		if d, ok := ln.(interface{ SetDeadline(time.Time) error }); ok && ln != nil {
			d.SetDeadline(backlog)
		} else if ln != nil {
			ln.Close()
		}
	}
	wg.Wait()
	r.closeListeners()
}

// backlogGrace is how long a stopping server still accepts the connections
// waiting in its listen backlog.
const backlogGrace = 50 * time.Millisecond

// accept serves the connections of one listener until it is closed.
func (r *Receiver) accept(ctx context.Context, ln net.Listener, newDec func() Decoder, role string, em *emitter, cancel context.CancelFunc) {
	// Out of file descriptors and the like: back off as net/http does,
	// then go on.
	back := backoff.Exponential{Min: 5 * time.Millisecond, Max: time.Second}
	taken := false // SingleServer: the one connection came
	for {
		nc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) || errors.Is(err, os.ErrDeadlineExceeded) {
				return
			}
			r.rejects.warn("accept failed", slog.String("receiver", r.cfg.Name), slog.Any("err", err))
			if !backoff.Sleep(ctx, back.Next()) {
				return
			}
			continue
		}
		back.Reset()
		switch {
		case r.cfg.Mode == SingleServer && taken:
			r.reject(nc, "connection refused: the single server is serving another connection")
		case !r.tryOpen():
			r.reject(nc, "connection refused: connection limit reached")
		case r.cfg.Mode == SingleServer:
			taken = true
			r.start(nc, newDec(), role, em, cancel)
		default:
			r.start(nc, newDec(), role, em, nil)
		}
	}
}

// tryOpen reserves a connection slot under MaxConnections.
func (r *Receiver) tryOpen() bool {
	for {
		n := r.open.Load()
		if n >= int64(r.cfg.MaxConnections) {
			return false
		}
		if r.open.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func (r *Receiver) reject(nc net.Conn, msg string) {
	r.rejects.warn(msg, slog.String("receiver", r.cfg.Name), slog.String("peer", nc.RemoteAddr().String()),
		slog.Int("max_connections", r.cfg.MaxConnections))
	r.rejected.Add(1)
	r.met.ConnRejected()
	nc.Close()
}

// runClient connects out, with Respawn again and again, until ctx is done.
func (r *Receiver) runClient(ctx context.Context, em *emitter) error {
	addr := r.cfg.Address
	back := backoff.Exponential{Min: r.cfg.BackoffMin, Max: r.cfg.BackoffMax}
	down := false // "cannot connect" was logged and no connect succeeded since
	dialer := net.Dialer{Timeout: r.cfg.DialTimeout}
	for {
		nc, err := dialer.DialContext(ctx, "tcp", addr)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !r.cfg.Respawn {
				return fmt.Errorf("tcp receiver %s: %w %s: %w", r.cfg.Name, ErrConnect, addr, err)
			}
			if !down {
				r.log.Warn("cannot connect; retrying with back-off", "receiver", r.cfg.Name, "peer", addr, "err", err)
				down = true
			}
			if !backoff.Sleep(ctx, back.Next()) {
				return nil
			}
			continue
		}
		down = false
		back.Reset()
		r.log.Info("connected", "receiver", r.cfg.Name, "peer", addr)
		r.open.Add(1)
		done := r.start(nc, r.cfg.NewDecoder(), "", em, nil)
		select {
		case <-done:
		case <-ctx.Done():
			return nil
		}
		if !r.cfg.Respawn || ctx.Err() != nil {
			return nil
		}
		r.log.Info("connection ended; reconnecting", "receiver", r.cfg.Name, "peer", addr)
		if !backoff.Sleep(ctx, back.Next()) {
			return nil
		}
	}
}

// start serves nc on a goroutine of its own; its slot in open is already
// taken. The returned channel is closed when the connection ended.
func (r *Receiver) start(nc net.Conn, dec Decoder, role string, em *emitter, onEnd func()) <-chan struct{} {
	r.cmu.Lock()
	r.conns[nc] = struct{}{}
	r.wg.Add(1)
	r.cmu.Unlock()
	r.accepted.Add(1)
	r.met.ConnOpened()
	done := make(chan struct{})
	go r.serve(nc, dec, role, em, onEnd, done)
	return done
}

func (r *Receiver) serve(nc net.Conn, dec Decoder, role string, em *emitter, onEnd func(), done chan struct{}) {
	defer r.wg.Done()
	defer func() {
		nc.Close()
		r.cmu.Lock()
		delete(r.conns, nc)
		r.cmu.Unlock()
		r.open.Add(-1)
		r.met.ConnClosed()
		close(done)
		if onEnd != nil {
			onEnd()
		}
	}()
	peer := nc.RemoteAddr().String()
	r.log.Debug("connection opened", "receiver", r.cfg.Name, "peer", peer, "role", role)
	// The batches' origin: this connection, and the monitored host once a
	// record names it.
	origin := record.Origin{Receiver: r.cfg.Name, Peer: peer, Session: strconv.FormatInt(r.sessions.Add(1), 10)}
	var hosts record.HostLearner
	s := &stream{
		rd:           nc,
		dec:          dec,
		bufSize:      r.cfg.ReadBuffer,
		transform:    r.cfg.Transform,
		registryWait: r.cfg.RegistryWait,
		drain:        r.drain,
		stop:         r.stop,
		idle:         r.cfg.DrainTimeout,
		onRead: func(n int) {
			r.bytes.Add(int64(n))
			r.met.Bytes(n)
		},
		beforeRead: func() {
			r.waitMemory()
			r.setDeadline(nc)
		},
		handOn: func(b *record.Batch) (*record.Batch, error) {
			hosts.Learn(&origin, b, 0)
			b.Origin = origin
			return r.handOn(em, peer, b)
		},
	}
	if e, ok := em.out.(interface{ NewBatch() *record.Batch }); ok {
		s.batch = e.NewBatch()
	}
	end := s.run()
	if end.kind == endConsumer {
		r.stopAll()
	}
	if end.kind == endDecode || end.kind == endPanic {
		// Refuse the stream with a reset, not the orderly close that ends
		// a stream: a sender that reads only the close (the forward sink,
		// replay) cannot tell it from having been read whole.
		if lc, ok := nc.(interface{ SetLinger(sec int) error }); ok {
			lc.SetLinger(0)
		}
	}
	unread := 0
	if end.kind == endDrained || end.kind == endConsumer {
		unread = probeUnread(nc, s.bufSize)
	}
	r.report(peer, role, end, s.off, unread)
}

// waitMemory holds a connection's next read while the process is near
// its memory limit (TCP back-pressure: the peer's sends fill the socket
// buffers, then block), until it takes data again or the receiver
// drains or stops. Each wait is counted as a refusal.
func (r *Receiver) waitMemory() {
	if r.mem == nil || r.mem.Admit() {
		return
	}
	r.met.MemoryRefused()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-r.drain:
		case <-r.stop:
		case <-ctx.Done():
		}
		cancel()
	}()
	r.mem.Wait(ctx)
}

// setDeadline sets nc's read deadline before a read: none while running,
// DrainTimeout from now while draining (an idle timeout: the peer has that
// long to send more), and one in the past once the receiver stopped.
func (r *Receiver) setDeadline(nc net.Conn) {
	if r.stopped.Load() {
		nc.SetReadDeadline(aLongTimeAgo)
		return
	}
	if !r.draining.Load() {
		return
	}
	nc.SetReadDeadline(time.Now().Add(r.cfg.DrainTimeout))
	if r.stopped.Load() { // stopAll may have set its deadline before ours
		nc.SetReadDeadline(aLongTimeAgo)
	}
}

// aLongTimeAgo is a read deadline that has passed: the read fails at once.
var aLongTimeAgo = time.Unix(1, 0)

// probeWait is how long probeUnread reads.
const probeWait = 20 * time.Millisecond

// probeUnread reads and discards for probeWait what the peer of a
// connection that is about to be closed had sent and was not read, and
// returns how many bytes that was (a lower bound when the peer goes on
// sending).
func probeUnread(nc net.Conn, size int) int {
	if err := nc.SetReadDeadline(time.Now().Add(probeWait)); err != nil {
		return 0
	}
	buf := make([]byte, size)
	total := 0
	for {
		n, err := nc.Read(buf)
		total += n
		if err != nil {
			return total
		}
	}
}

// handOn counts b and passes it on. Consumer errors other than
// pipeline.ErrClosed drop the batch and are logged; ErrClosed stops the
// receiver.
func (r *Receiver) handOn(em *emitter, peer string, b *record.Batch) (*record.Batch, error) {
	n := b.Len()
	r.met.Records(b)
	r.records.Add(int64(n))
	next, err := em.emit(b)
	if err == nil {
		return next, nil
	}
	if errors.Is(err, pipeline.ErrClosed) {
		return next, err
	}
	r.faults.warn("consumer refused a batch; records dropped", slog.String("receiver", r.cfg.Name),
		slog.String("peer", peer), slog.Int("records", n), slog.Any("err", err))
	return next, nil
}

// report logs and counts how a connection ended; unread is the number of
// bytes found still unread after a drain or a stop. Faults are counted after
// they are logged, so whoever sees the count finds the line.
func (r *Receiver) report(peer, role string, end streamEnd, consumed int64, unread int) {
	attrs := func(extra ...slog.Attr) []slog.Attr {
		a := []slog.Attr{slog.String("receiver", r.cfg.Name), slog.String("peer", peer)}
		if role != "" {
			a = append(a, slog.String("role", role))
		}
		return append(a, extra...)
	}
	switch end.kind {
	case endEOF, endReadError:
		r.log.LogAttrs(context.Background(), slog.LevelDebug, "connection closed",
			attrs(slog.Int64("bytes", consumed), slog.Any("err", end.err))...)
	case endTruncated:
		defer r.decodeError()
		msg := "connection closed inside a record"
		if end.err != nil {
			msg = "connection failed inside a record"
		}
		r.faults.warn(msg, attrs(slog.Int64("offset", end.offset), slog.Int("dropped_bytes", end.dropped),
			slog.Any("err", fmt.Errorf("offset %d: stream ended inside a unit, %d bytes dropped", end.offset, end.dropped)))...)
	case endDecode:
		defer r.decodeError()
		r.faults.warn("malformed stream; connection closed", attrs(slog.Int64("offset", end.offset), slog.Any("err", end.err))...)
	case endPanic:
		defer r.decodeError()
		r.faults.warn("panic while decoding; connection closed", attrs(slog.Int64("offset", end.offset), slog.Any("err", end.err))...)
	case endDrained:
		lost := attrs(slog.Int64("offset", end.offset), slog.Int("dropped_bytes", end.dropped), slog.Int("unread_bytes", unread))
		switch {
		case r.stopped.Load() && (end.dropped > 0 || unread > 0):
			r.faults.warn("receiver stopped (consumer closed); bytes dropped", lost...)
		case end.dropped > 0:
			r.faults.warn("drain idle timeout inside a record; bytes dropped", lost...)
		case unread > 0:
			r.faults.warn("drain idle timeout with bytes unread; bytes dropped", lost...)
		case r.stopped.Load():
			r.log.LogAttrs(context.Background(), slog.LevelDebug, "connection closed: receiver stopped", attrs()...)
		default:
			r.log.LogAttrs(context.Background(), slog.LevelDebug, "connection closed while draining: idle", attrs()...)
		}
	case endConsumer:
		r.faults.warn("consumer closed; records and bytes dropped", attrs(slog.Int64("offset", end.offset),
			slog.Int("records", end.records), slog.Int("dropped_bytes", end.dropped), slog.Int("unread_bytes", unread),
			slog.Any("err", end.err))...)
		r.fmu.Lock()
		if r.fatal == nil {
			r.fatal = fmt.Errorf("tcp receiver %s: consumer: %w", r.cfg.Name, end.err)
		}
		r.fmu.Unlock()
		r.mu.Lock()
		cancel := r.cancel
		r.mu.Unlock()
		cancel()
	}
}

// stopAll ends every connection at once: the consumer refused a batch for
// good, so nothing more can be handed on.
func (r *Receiver) stopAll() {
	r.stopOnce.Do(func() {
		r.stopped.Store(true)
		close(r.stop)
		r.cmu.Lock()
		for nc := range r.conns {
			nc.SetReadDeadline(aLongTimeAgo)
		}
		r.cmu.Unlock()
	})
}

func (r *Receiver) decodeError() {
	r.decodeErrors.Add(1)
	r.met.DecodeError()
}

// shutdown closes the listeners, lets the open connections drain and waits
// for every connection goroutine. A connection drains until EOF, until its
// peer has sent nothing for DrainTimeout (renewed before every read, see
// setDeadline), or until the receiver stops. There is no bound on the whole:
// a slow consumer is read for as long as it accepts batches.
func (r *Receiver) shutdown() {
	r.closeListeners()
	r.draining.Store(true)
	close(r.drain)
	r.cmu.Lock()
	if !r.stopped.Load() { // else stopAll has set deadlines in the past
		idle := time.Now().Add(r.cfg.DrainTimeout)
		for nc := range r.conns {
			nc.SetReadDeadline(idle) // wakes reads that wait without a deadline
		}
	}
	r.cmu.Unlock()
	r.wg.Wait()
}

// emitter hands batches to the consumer: with Emit when it is a
// pipeline.Emitter (the batch is handed over, an empty one comes back),
// else with Consume (the batch is reset and reused).
type emitter struct {
	ctx context.Context
	out pipeline.Consumer
	em  pipeline.Emitter
}

func newEmitter(ctx context.Context, out pipeline.Consumer) *emitter {
	e := &emitter{ctx: ctx, out: out}
	e.em, _ = out.(pipeline.Emitter)
	return e
}

func (e *emitter) emit(b *record.Batch) (*record.Batch, error) {
	if e.em != nil {
		next, err := e.em.Emit(e.ctx, b)
		if next == nil {
			next = new(record.Batch)
		}
		if err != nil {
			next.Reset()
		}
		return next, err
	}
	err := e.out.Consume(e.ctx, b)
	b.Reset()
	return b, err
}
