package otlp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	otlpcodec "github.com/tracebridge/tracebridge/internal/codec/otlp"
	"github.com/tracebridge/tracebridge/internal/hostauth"
	"github.com/tracebridge/tracebridge/internal/lograte"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Errors of handing a request's spans on.
var (
	// ErrBusy: the pipeline did not take the spans within the emit
	// timeout (back-pressure); the client should retry later.
	ErrBusy = errors.New("pipeline busy")
	// ErrStopped: the receiver is not running (yet, or any more).
	ErrStopped = errors.New("receiver stopped")
	// ErrNoHostTable: security is on but the bridge keeps no host table
	// (internal/hostdb; serve opens one for every otlp receiver).
	ErrNoHostTable = errors.New("security is on but the bridge has no host table")
)

// keepBuffer is the largest request buffer kept for reuse.
const keepBuffer = 4 << 20

// worker is what one request needs: a decoder with its interner, and a
// buffer for the message.
type worker struct {
	dec *otlpcodec.Decoder
	buf []byte
}

// core is what both receivers share: decoding a request, handing its
// batches on within the emit timeout, counting.
type core struct {
	name    string
	log     *slog.Logger
	met     *metrics.Receiver
	opt     otlpcodec.Options
	wait    time.Duration // emit timeout
	workers sync.Pool
	batches sync.Pool
	next    func() *record.Batch // newBatch, made once
	faults  lograte.Limiter
	// unstored: the durable sinks not storing requests (a cluster node
	// cut off, a store away) fail every request until they recover:
	// logged once when it starts and once when it ends, after
	// unstoredSettle of stored requests.
	unstored lograte.Outage

	// security: requests need a host's bearer token (Config.Security),
	// checked against shared's host table.
	security bool
	shared   *pipeline.Shared

	// inflight bounds the request bytes being read and decoded.
	inflight budget
	// mem is the process's memory limit: near it, requests are refused
	// with the protocol's retryable answer.
	mem pipeline.Memory

	// mu is held for reading by every request while it decodes and
	// hands on, so stop (holding it for writing) waits for those in
	// flight; requests after stop find out nil.
	mu  sync.RWMutex
	out pipeline.Consumer
	em  pipeline.Emitter
}

func newCore(name string, set pipeline.Settings, cfg Config) *core {
	opt := cfg.codecOptions()
	opt.Strings = otlpcodec.NewStrings() // one copy of a string for all requests
	c := &core{name: name, log: set.Logger, met: set.Metrics.Receiver(name), opt: opt, wait: time.Duration(cfg.EmitTimeout),
		faults: lograte.Limiter{PerSecond: 5}, unstored: lograte.Outage{Settle: unstoredSettle}, security: cfg.Security, shared: set.Shared,
		inflight: budget{max: int64(cfg.MaxInflightBytes)}, mem: set.Shared.Memory()}
	c.workers.New = func() any { return &worker{dec: otlpcodec.NewDecoder(c.opt)} }
	c.next = c.newBatch
	return c
}

// budget counts bytes held by requests against a maximum
// (Config.MaxInflightBytes); it never grants more than that.
type budget struct {
	max  int64
	used atomic.Int64
	peak atomic.Int64 // the most ever granted at once
}

// acquire takes n bytes, false (taking nothing) when they would exceed max.
func (b *budget) acquire(n int) bool {
	for {
		cur := b.used.Load()
		next := cur + int64(n)
		if next > b.max {
			return false
		}
		if b.used.CompareAndSwap(cur, next) {
			for p := b.peak.Load(); next > p && !b.peak.CompareAndSwap(p, next); p = b.peak.Load() {
			}
			return true
		}
	}
}

func (b *budget) release(n int) { b.used.Add(-int64(n)) }

// start connects the core to the pipeline.
func (c *core) start(out pipeline.Consumer) {
	c.mu.Lock()
	c.out = out
	c.em, _ = out.(pipeline.Emitter)
	c.mu.Unlock()
}

// stop waits for the requests in flight, then disconnects.
func (c *core) stop() {
	c.mu.Lock()
	c.out, c.em = nil, nil
	c.mu.Unlock()
}

func (c *core) newBatch() *record.Batch {
	if b, ok := c.batches.Get().(*record.Batch); ok {
		return b
	}
	return new(record.Batch)
}

func (c *core) recycle(b *record.Batch) {
	if b == nil {
		return
	}
	b.Reset()
	c.batches.Put(b)
}

func (c *core) getWorker() *worker { return c.workers.Get().(*worker) }

func (c *core) putWorker(w *worker) {
	if cap(w.buf) > keepBuffer {
		w.buf = nil
	}
	c.workers.Put(w)
}

// outcome is what became of a request.
type outcome struct {
	spans, rejected int
	reason          string
}

// admit checks a request's credentials (auth: the Authorization header or
// metadata) when security is on: it returns the host the spans belong to
// ("" with security off), whether to drop them (a disabled host), or an
// error wrapping hostauth.ErrUnauthorized, or ErrNoHostTable.
func (c *core) admit(ctx context.Context, auth string, remote net.Addr) (host string, drop bool, err error) {
	if !c.security {
		return "", false, nil
	}
	hosts := c.shared.Hosts()
	if hosts == nil {
		return "", false, ErrNoHostTable
	}
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		token, ok = strings.CutPrefix(auth, "bearer ")
	}
	if !ok || token == "" {
		return "", false, fmt.Errorf("%w: no bearer token", hostauth.ErrUnauthorized)
	}
	name, adm, err := hosts.HostByToken(ctx, strings.TrimSpace(token), remote)
	if err != nil {
		c.faults.Log(ctx, c.log, slog.LevelWarn, "OTLP request refused", "receiver", c.name, "peer", addrString(remote), "err", err)
		return "", false, err
	}
	switch adm {
	case hostauth.Admitted:
		return name, false, nil
	case hostauth.Disabled:
		return name, true, nil
	}
	return "", false, fmt.Errorf("%w: host %s is not admitted", hostauth.ErrUnauthorized, name)
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// handle decodes msg (protobuf, or JSON) from peer with w's decoder and
// hands its spans on; host, when not empty, is the host the request's
// token names (its spans become that host's); drop says to decode and
// count them, but not hand them on (a disabled host). It returns a *otlpcodec.Error for a malformed
// message, ErrBusy under back-pressure, ErrStopped when the pipeline is
// gone. ctx is the request's: a client that gives up stops the wait.
func (c *core) handle(ctx context.Context, w *worker, peer, host string, drop bool, msg []byte, json bool) (outcome, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.out == nil {
		return outcome{}, ErrStopped
	}
	c.met.Bytes(len(msg))
	b := c.newBatch()
	b.Origin = record.Origin{Receiver: c.name, Peer: peer, Host: host}
	var res otlpcodec.Result
	var err error
	if json {
		res, err = w.dec.DecodeJSON(msg, b, c.next)
	} else {
		res, err = w.dec.DecodeProto(msg, b, c.next)
	}
	if err != nil {
		c.met.DecodeError()
		for _, b := range res.Batches {
			c.recycle(b)
		}
		c.faults.Log(ctx, c.log, slog.LevelWarn, "malformed OTLP request", "receiver", c.name, "peer", peer, "err", err)
		return outcome{}, err
	}
	for range res.Rejected {
		c.met.DecodeError()
	}
	if res.Rejected > 0 {
		c.faults.Log(ctx, c.log, slog.LevelWarn, "OTLP spans rejected", "receiver", c.name, "peer", peer, "rejected", res.Rejected, "reason", res.Reason)
	}
	out := outcome{spans: res.Spans, rejected: res.Rejected, reason: res.Reason}
	if drop {
		for _, b := range res.Batches {
			c.recycle(b)
		}
		return out, nil
	}
	if host != "" {
		hv := record.StringValue(host)
		for _, b := range res.Batches {
			b.Origin.Host = host
			for i := range b.Records {
				b.Records[i].Values[trace.SpanHost] = hv
			}
		}
	}
	return out, c.emit(ctx, res.Batches)
}

// emit hands the batches on (taking ownership of each), waiting at most
// the emit timeout in all. The caller holds c.mu for reading, and c.out
// is set.
func (c *core) emit(ctx context.Context, batches []*record.Batch) error {
	ectx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	// A cluster node answers once its durable sink (the replicated
	// stream) has every batch (pipeline.Shared.AckStored).
	var stored chan error
	waiting := 0
	if c.shared.AckStored() {
		stored = make(chan error, len(batches))
	}
	for i, b := range batches {
		if b.Len() == 0 {
			c.recycle(b)
			continue
		}
		if stored != nil {
			b.Done = append(b.Done, func(err error) { stored <- err })
			waiting++
		}
		c.met.Records(b)
		var err error
		if c.em != nil {
			var nb *record.Batch
			nb, err = c.em.Emit(ectx, b)
			if err == nil {
				c.recycle(nb)
			}
		} else {
			err = c.out.Consume(ectx, b)
			if err == nil {
				c.recycle(b)
			}
		}
		if err != nil {
			for _, rest := range batches[i:] {
				c.recycle(rest)
			}
			switch {
			case errors.Is(err, pipeline.ErrClosed):
				return ErrStopped
			case ectx.Err() != nil && ctx.Err() == nil:
				return ErrBusy
			case ctx.Err() != nil:
				return ctx.Err()
			}
			return err
		}
	}
	return c.awaitStored(ctx, stored, waiting)
}

// unstoredSettle is how long requests must be stored again before the
// end of an outage is logged: a cluster that heals may store one request
// and refuse the next while its streams elect leaders, which is the same
// outage.
const unstoredSettle = 2 * time.Second

// storedTimeout bounds the wait for the durable sinks (AckStored); the
// client is then answered busy and retries (a cluster deduplicates what
// was stored after all).
const storedTimeout = 15 * time.Second

// awaitStored waits for n Done callbacks on stored.
func (c *core) awaitStored(ctx context.Context, stored <-chan error, n int) error {
	if n == 0 {
		return nil
	}
	t := time.NewTimer(storedTimeout)
	defer t.Stop()
	for range n {
		select {
		case err := <-stored:
			if err != nil {
				c.notStored(err)
				return ErrBusy
			}
		case <-t.C:
			c.notStored(fmt.Errorf("not stored within %v", storedTimeout))
			return ErrBusy
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if failed := c.unstored.Recover(); failed > 0 {
		c.log.Info("OTLP spans stored again", "receiver", c.name, "failures", failed)
	}
	return nil
}

// notStored notes a request whose spans the durable sinks did not store:
// logged when such requests start.
func (c *core) notStored(err error) {
	if c.unstored.Fail() {
		c.log.Warn("OTLP spans not stored; clients are answered busy until they are", "receiver", c.name, "err", err)
	}
}

// admitMemory reports whether the process may take a request now (false
// near the memory limit: counted; the caller answers 429 /
// RESOURCE_EXHAUSTED with a retry delay).
func (c *core) admitMemory() bool {
	if c.mem.Admit() {
		return true
	}
	c.met.MemoryRefused()
	return false
}

// memoryMessage is the refusal's message near the memory limit.
const memoryMessage = "the bridge is near its memory limit (memory_limit); retry later"

// counted counts a listener's connections in the receiver's metrics.
type counted struct {
	net.Listener
	met *metrics.Receiver
}

func (l counted) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	l.met.ConnOpened()
	return &countedConn{Conn: nc, met: l.met}, nil
}

type countedConn struct {
	net.Conn
	met  *metrics.Receiver
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(c.met.ConnClosed)
	return c.Conn.Close()
}
