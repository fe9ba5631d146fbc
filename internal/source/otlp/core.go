package otlp

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	otlpcodec "github.com/tracebridge/tracebridge/internal/codec/otlp"
	"github.com/tracebridge/tracebridge/internal/lograte"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Errors of handing a request's spans on.
var (
	// ErrBusy: the pipeline did not take the spans within the emit
	// timeout (back-pressure); the client should retry later.
	ErrBusy = errors.New("pipeline busy")
	// ErrStopped: the receiver is not running (yet, or any more).
	ErrStopped = errors.New("receiver stopped")
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

	// mu is held for reading by every request while it decodes and
	// hands on, so stop (holding it for writing) waits for those in
	// flight; requests after stop find out nil.
	mu  sync.RWMutex
	out pipeline.Consumer
	em  pipeline.Emitter
}

func newCore(name string, set pipeline.Settings, opt otlpcodec.Options, wait time.Duration) *core {
	opt.Strings = otlpcodec.NewStrings() // one copy of a string for all requests
	c := &core{name: name, log: set.Logger, met: set.Metrics.Receiver(name), opt: opt, wait: wait,
		faults: lograte.Limiter{PerSecond: 5}}
	c.workers.New = func() any { return &worker{dec: otlpcodec.NewDecoder(c.opt)} }
	c.next = c.newBatch
	return c
}

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

// handle decodes msg (protobuf, or JSON) from peer with w's decoder and
// hands its spans on. It returns a *otlpcodec.Error for a malformed
// message, ErrBusy under back-pressure, ErrStopped when the pipeline is
// gone. ctx is the request's: a client that gives up stops the wait.
func (c *core) handle(ctx context.Context, w *worker, peer string, msg []byte, json bool) (outcome, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.out == nil {
		return outcome{}, ErrStopped
	}
	c.met.Bytes(len(msg))
	b := c.newBatch()
	b.Origin = record.Origin{Receiver: c.name, Peer: peer}
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
	return out, c.emit(ctx, res.Batches)
}

// emit hands the batches on (taking ownership of each), waiting at most
// the emit timeout in all. The caller holds c.mu for reading, and c.out
// is set.
func (c *core) emit(ctx context.Context, batches []*record.Batch) error {
	ectx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	for i, b := range batches {
		if b.Len() == 0 {
			c.recycle(b)
			continue
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
	return nil
}

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
