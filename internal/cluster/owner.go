package cluster

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/lograte"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// owner consumes one partition this node holds the lease of: it reads
// the partition's messages from the first one in the stream, assembles
// their traces and hands them to the node's sink. Its goroutine alone
// touches the assembler; the node asks it for its safe point (safe) and
// stops it (stop) through channels.
type owner struct {
	n     *Node
	p     int
	value []byte // the lease's value
	since time.Time

	// The lease (the node's lease goroutine only).
	rev     uint64
	renewed time.Time

	// purged is the last sequence removed from the stream.
	purged atomic.Uint64

	asks  chan chan uint64
	quit  chan bool     // true: hand on what is assembled; false: drop it
	done  chan struct{} // closed when run has returned
	final uint64        // the last sequence handed on at the end (0: dropped)
	once  sync.Once
	last  uint64

	faults lograte.Limiter
}

func newOwner(n *Node, p int, value []byte, rev uint64, at time.Time) *owner {
	return &owner{n: n, p: p, value: value, since: at, rev: rev, renewed: at,
		asks: make(chan chan uint64), quit: make(chan bool, 1), done: make(chan struct{}), faults: lograte.Limiter{PerSecond: 1}}
}

// seqAt is a message consumed: its stream sequence and the clock reading
// after the assembler took its records.
type seqAt struct {
	seq uint64
	at  int64
}

// tickEvery is how often the assembler completes traces whose window
// passed (as the engine's stage tick).
const tickEvery = 100 * time.Millisecond

// run consumes until stopped (or ctx ends: then it hands on what it
// assembled, for the node's last checkpoint).
func (o *owner) run(ctx context.Context) {
	n := o.n
	var out []*trace.Trace
	opts := n.opt.Traces
	opts.Clock = trace.WallClock
	if opts.MaxOpenTraces > 0 {
		// The node's bound, shared among the partitions it owns.
		opts.MaxOpenTraces = max(1000, opts.MaxOpenTraces/max(1, n.share()))
	}
	opts.Emit = func(t *trace.Trace) { out = append(out, t) }
	asm := trace.NewAssembler(opts)
	dec := NewDecoder(n.opt.Catalog)
	var seqs []seqAt
	b := &record.Batch{}
	hand := func() {
		if len(out) == 0 {
			return
		}
		for {
			err := n.opt.Sink.ConsumeTraces(ctx, out)
			if err == nil {
				break
			}
			// The store refuses (closed, disk full): the traces are not
			// lost, their messages stay in the stream; try again.
			o.faults.Log(ctx, n.log, slog.LevelError, "cluster: the store did not take a partition's traces; retrying", "node", n.opt.Node, "partition", o.p, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		clear(out)
		out = out[:0]
	}
	// safe: the last sequence all of whose records are in traces handed
	// on (no trace begun before or at its reading is still open).
	safe := func() uint64 {
		oldest, open := asm.OldestOpen()
		if !open {
			if len(seqs) > 0 {
				seqs = seqs[:0]
			}
			return o.last
		}
		i := 0
		for i < len(seqs) && seqs[i].at < oldest {
			i++
		}
		var s uint64
		if i > 0 {
			s = seqs[i-1].seq
			seqs = append(seqs[:0], seqs[i:]...)
		} else {
			s = o.purged.Load()
			if len(seqs) > 0 && seqs[0].seq > 0 {
				s = max(s, seqs[0].seq-1)
			}
		}
		return s
	}
	finish := func(handOn bool) {
		if handOn {
			asm.Flush()
			hand()
			o.final = o.last
		}
		close(o.done)
	}

	var it jetstream.MessagesContext
	for it == nil {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cons, err := n.js.OrderedConsumer(cctx, StreamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{Subject(o.p)}, DeliverPolicy: jetstream.DeliverAllPolicy})
		cancel()
		if err == nil {
			it, err = cons.Messages(jetstream.PullMaxMessages(256))
		}
		if err != nil {
			o.faults.Log(ctx, n.log, slog.LevelWarn, "cluster: cannot read a partition yet; retrying", "node", n.opt.Node, "partition", o.p, "err", err)
			select {
			case handOn := <-o.quit:
				finish(handOn)
				return
			case <-ctx.Done():
				finish(true)
				return
			case <-time.After(time.Second):
			}
		}
	}
	defer it.Stop()
	lastTick := time.Now()
	for {
		select {
		case handOn := <-o.quit:
			finish(handOn)
			return
		case <-ctx.Done():
			finish(true)
			return
		case reply := <-o.asks:
			reply <- safe()
			continue
		default:
		}
		if time.Since(lastTick) >= tickEvery {
			asm.Tick()
			hand()
			lastTick = time.Now()
		}
		msg, err := it.Next(jetstream.NextMaxWait(tickEvery))
		if err != nil {
			if errors.Is(err, nats.ErrTimeout) {
				continue
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				o.faults.Log(ctx, n.log, slog.LevelWarn, "cluster: a partition's reader closed; reading again", "node", n.opt.Node, "partition", o.p, "err", err)
				if !o.reopen(ctx, &it) {
					finish(true)
					return
				}
				continue
			}
			o.faults.Log(ctx, n.log, slog.LevelWarn, "cluster: reading a partition failed; retrying", "node", n.opt.Node, "partition", o.p, "err", err)
			continue
		}
		meta, err := msg.Metadata()
		if err != nil {
			continue
		}
		b.Reset()
		if err := dec.Decode(msg.Data(), b); err != nil {
			n.met.malformed.Inc()
			o.faults.Log(ctx, n.log, slog.LevelError, "cluster: a message of the stream did not decode; skipped", "node", n.opt.Node, "partition", o.p, "seq", meta.Sequence.Stream, "err", err)
		}
		asm.AddBatch(b)
		o.last = meta.Sequence.Stream
		seqs = append(seqs, seqAt{seq: o.last, at: time.Now().UnixNano()})
		n.met.consumed.Inc()
		hand()
	}
}

// reopen makes a new reader of the partition after the old one closed.
func (o *owner) reopen(ctx context.Context, it *jetstream.MessagesContext) bool {
	(*it).Stop()
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		cons, err := o.n.js.OrderedConsumer(cctx, StreamName, jetstream.OrderedConsumerConfig{FilterSubjects: []string{Subject(o.p)},
			DeliverPolicy: jetstream.DeliverByStartSequencePolicy, OptStartSeq: o.last + 1})
		cancel()
		if err == nil {
			var nit jetstream.MessagesContext
			if nit, err = cons.Messages(jetstream.PullMaxMessages(256)); err == nil {
				*it = nit
				return true
			}
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
		}
	}
}

// safe asks the owner for its safe point (0 when it has stopped).
func (o *owner) safe(ctx context.Context) uint64 {
	reply := make(chan uint64, 1)
	select {
	case o.asks <- reply:
	case <-o.done:
		return 0
	case <-ctx.Done():
		return 0
	}
	select {
	case s := <-reply:
		return s
	case <-ctx.Done():
		return 0
	}
}

// stop ends the owner. With handOn it first hands every trace it holds to
// the sink and returns the last sequence consumed (all of it handed on);
// without, it drops what it holds and returns 0.
func (o *owner) stop(handOn bool) uint64 {
	o.once.Do(func() { o.quit <- handOn })
	<-o.done
	return o.final
}
