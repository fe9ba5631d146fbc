package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/jsstall"
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

	// The lease: its revision and the time its last stored renewal (or
	// the take) was sent (under the node's mu).
	rev     uint64
	renewed time.Time
	// deadline is when the owner must have stopped unless renewed again
	// (renewed + LeaseTTL - fenceMargin, as nanoseconds of the monotonic
	// clock since the node started): another node may own the partition
	// soon after. The owner checks it itself before each fetch, each
	// message and each retry of the store (run), and so do the hand-over
	// and the compactor's role (Node.Compactor), so that a renewal that
	// hangs, or a lease goroutine busy elsewhere, fences all the same.
	deadline atomic.Int64

	// purged is the last sequence removed from the stream.
	purged atomic.Uint64
	// read holds the sequences of the messages taken and not yet
	// removed from the stream, in order (under readMu): a checkpoint
	// removes only messages the owner took (Node.unread).
	readMu sync.Mutex
	read   []uint64

	asks  chan chan uint64
	quit  chan stopMode
	done  chan struct{} // closed when run has returned
	final uint64        // the sequence the stream may be purged up to at the end (0: none)
	once  sync.Once
	last  uint64

	faults lograte.Limiter // undecodable messages, loose checkpoints
	// Faults that fail every try while they last (the stream's server
	// away, the store refusing): logged once when they start and once
	// when they end (or when the owner stops first).
	reading, storing lograte.Outage
	// renewing: renewals of the lease failing (renewOne, one at a time),
	// ended by the renewal that works or by the owner's stop (the fence
	// that renewals failing until the deadline lead to).
	renewing lograte.Outage
	// checking: the checks of the partition's messages before their
	// removal failing (Node.purge).
	checking lograte.Outage
	// missed: the last pull missed its heartbeat, outside an outage
	// (run's goroutine only).
	missed bool
	// holdFor is how long the safe point may wait for a cut no trace
	// reaches across (cuts; 0: defaultHoldFor).
	holdFor time.Duration
}

func newOwner(n *Node, p int, value []byte, rev uint64, at time.Time) *owner {
	o := &owner{n: n, p: p, value: value, since: at,
		asks: make(chan chan uint64), quit: make(chan stopMode, 1), done: make(chan struct{}), faults: lograte.Limiter{PerSecond: 1},
		reading: lograte.Outage{Settle: cmp.Or(n.readSettle, readSettle)}}
	o.renewedAt(rev, at)
	return o
}

// renewedAt notes the lease stored at revision rev by a renewal (or take)
// sent at t0, and moves the owner's deadline (under the node's mu, or
// before the owner is shared).
func (o *owner) renewedAt(rev uint64, t0 time.Time) {
	o.rev, o.renewed = rev, t0
	o.deadline.Store(int64(t0.Add(o.n.opt.LeaseTTL - o.n.fenceMargin()).Sub(o.n.started)))
}

// lapsed reports whether the owner's deadline has passed: it must not act
// as the partition's owner any more (another node may, soon).
func (o *owner) lapsed() bool {
	return int64(time.Since(o.n.started)) >= o.deadline.Load()
}

// packedTaker is a TraceSink that reads traces packed
// (pipeline.PackedTraceConsumer: the store sink).
type packedTaker interface {
	PackedTraces() bool
}

// readSettle is how long a partition must be read again before the end
// of its failed reads is logged; a failure before goes on with the same
// outage. A server that restarts serves a pull or two before its
// consumers fail once more, and a loaded machine misses a pull's
// heartbeat every ten seconds or so while a fault lasts (the store away):
// one event each, not one per failed pull.
const readSettle = 30 * time.Second

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
	// So is its bound of the Kieker events waiting (each partition's
	// owner holds those of its traces).
	if opts.MaxHeldEvents <= 0 {
		opts.MaxHeldEvents = trace.DefaultMaxHeldEvents
	}
	opts.MaxHeldEvents = max(1<<14, opts.MaxHeldEvents/max(1, n.share()))
	opts.Emit = func(t *trace.Trace) { out = append(out, t) }
	// The store reads traces packed (trace.Options.Packed): their spans
	// are not made of Spans here, the store encodes from their bytes.
	if p, ok := n.opt.Sink.(packedTaker); ok && p.PackedTraces() {
		opts.Packed = true
	}
	asm := trace.NewAssembler(opts)
	dec := NewDecoder(n.opt.Catalog)
	cut := cuts{holdFor: o.holdFor}
	if cut.holdFor <= 0 {
		cut.holdFor = defaultHoldFor
	}
	// add assembles a message's section unless its id was seen within
	// the stream's duplicate window (a client's retry of a batch that
	// travelled in another message).
	// (Times on the monotonic clock since the owner started: a wall
	// clock stepped back would keep ids past the window, or drop them.)
	var seen dedupe
	began := time.Now()
	add := func(id SectionID, b *record.Batch) {
		if !seen.add(id, int64(time.Since(began))) {
			n.met.duplicates.Inc()
			return
		}
		asm.AddBatch(b)
	}
	b := &record.Batch{}
	// lapsed: past the deadline (no renewal stored in time, whether the
	// lease goroutine noticed or not) the owner stops as a fenced one
	// does, and drops what it holds: the node forgets it as an owner and
	// keeps its lease for reclaim.
	lapsed := func() bool {
		if !o.lapsed() {
			return false
		}
		n.drop(o, "its lease was not renewed by its deadline", fmt.Errorf("its deadline passed %v ago", (time.Since(n.started)-time.Duration(o.deadline.Load())).Round(time.Millisecond)), true)
		return true
	}
	// quitting is set when a stop arrived while hand was retrying: the
	// owner then stops without handing on (the traces' messages stay in
	// the stream for the next owner), so that a store that refuses never
	// holds up the lease goroutine waiting in stop.
	quitting := false
	// hand gives the completed traces to the store; false when it could
	// not (ctx ended or a stop came while the store refused them).
	hand := func() bool {
		if len(out) == 0 {
			return true
		}
		for {
			err := n.opt.Sink.ConsumeTraces(ctx, out)
			if err == nil {
				break
			}
			// The store refuses (closed, disk full): the traces are not
			// lost, their messages stay in the stream; try again.
			if o.storing.Fail() {
				n.log.Error("cluster: the store did not take a partition's traces; retrying until it does", "node", n.opt.Node, "partition", o.p, "err", err)
			}
			select {
			case <-ctx.Done():
				return false
			case <-o.quit:
				quitting = true
				return false
			case <-time.After(time.Second):
			}
			if lapsed() {
				quitting = true
				return false
			}
		}
		if f := o.storing.Recover(); f > 0 {
			n.log.Info("cluster: the store takes a partition's traces again", "node", n.opt.Node, "partition", o.p, "failures", f)
		}
		clear(out)
		out = out[:0]
		return true
	}
	// safe: the last sequence all of whose records are in traces handed
	// on, and after which no trace goes on (cuts).
	safe := func() uint64 {
		oldest, open := asm.OldestOpen()
		s, loose := cut.cut(o.purged.Load(), o.last, oldest, open, time.Now())
		if loose {
			o.faults.Log(ctx, n.log, slog.LevelWarn, "cluster: no checkpoint outside the partition's traces for a while; checkpointing where only open traces count (a takeover may part a trace emitted already)", "node", n.opt.Node, "partition", o.p, "seq", s, "waited", cut.holdFor)
		}
		return s
	}
	finish := func(mode stopMode) {
		switch {
		case quitting:
		case mode == stopAll:
			asm.Flush()
			if hand() {
				// Everything consumed is in the store: the last
				// checkpoint may purge up to here. Otherwise final stays
				// 0 and the stream keeps it for the next owner.
				o.final = o.last
			}
		case mode == stopSafe:
			// The traces still open are dropped, not emitted: the next
			// owner reads their messages again from the safe point and
			// assembles them whole, as this owner would have.
			if hand() {
				o.final = safe()
			}
		}
		o.faultsEnd()
		close(o.done)
	}

	var cons jetstream.Consumer
	// The consumer's stall watch: one that delivers nothing while the
	// stream's leader holds a message of the partition after the highest
	// one taken is replaced (the stream package's readers do the same).
	// (Not after o.last: a consumer was seen to deliver an earlier
	// message after later ones, and what followed o.last then was taken
	// already.) The leader is given 500 ms, so that the loop answers the
	// checkpoint's asks (safe waits 2 s) also while it does not answer.
	var stall jsstall.Watch
	high := o.last // the highest sequence taken
	nextSeq := func(ctx context.Context) uint64 {
		ctx, cancel := context.WithTimeout(ctx, nextSeqWait)
		defer cancel()
		return jsstall.NextSeq(ctx, n.nc, StreamName, Subject(o.p), high+1)
	}
	lastTick := time.Now()
	for {
		select {
		case mode := <-o.quit:
			finish(mode)
			return
		case <-ctx.Done():
			finish(stopAll)
			return
		case reply := <-o.asks:
			reply <- safe()
			continue
		default:
		}
		if quitting || lapsed() {
			finish(stopDrop)
			return
		}
		if time.Since(lastTick) >= tickEvery {
			asm.Tick()
			hand()
			lastTick = time.Now()
		}
		if quitting {
			finish(stopDrop)
			return
		}
		if cons == nil {
			var err error
			if cons, err = o.reader(ctx); err != nil {
				n.met.readErrors.Inc()
				if o.reading.Fail() {
					n.log.Warn("cluster: cannot read a partition yet; retrying until it can", "node", n.opt.Node, "partition", o.p, "err", err)
				}
				select {
				case <-ctx.Done():
				case <-time.After(500 * time.Millisecond):
				}
				continue
			}
			stall.Start(time.Now())
		}
		batch, err := cons.Fetch(fetchBatch, jetstream.FetchMaxWait(fetchWait), jetstream.FetchHeartbeat(fetchWait/4))
		if err != nil {
			// The consumer is gone (its stream's leader changed, the
			// server restarted): a new one goes on after the last
			// message taken.
			o.readFailed(err)
			cons = nil
			continue
		}
		got := false
		for msg := range batch.Messages() {
			got = true
			if lapsed() {
				// Delivered after the deadline (the fetch began before
				// it): not this owner's to read.
				quitting = true
				break
			}
			meta, err := msg.Metadata()
			if err != nil || n.lose != nil && n.lose(o.p, meta.Sequence.Stream) {
				continue
			}
			b.Reset()
			asm.Reach() // (what Tick touched: nothing of this message)
			asm.SetPosition(meta.Sequence.Stream)
			if err := dec.Decode(msg.Data(), b, add); err != nil {
				n.met.malformed.Inc()
				o.faults.Log(ctx, n.log, slog.LevelError, "cluster: a message of the stream did not decode; skipped", "node", n.opt.Node, "partition", o.p, "seq", meta.Sequence.Stream, "err", err)
				asm.AddBatch(b) // what the broken section held before the error
			}
			o.last = meta.Sequence.Stream
			high = max(high, o.last)
			o.took(o.last)
			cut.add(o.last, asm.Reach())
			n.met.consumed.Inc()
			if !hand() && quitting {
				break
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
			o.readFailed(err)
			cons = nil
			continue
		}
		o.readWorked()
		if got {
			stall.Read(time.Now())
		} else if stall.Stalled(ctx, time.Now(), nextSeq) {
			n.log.Warn("cluster: a partition's consumer delivers nothing while the stream holds a message for it; reading on through a new one", "node", n.opt.Node, "partition", o.p, "after", o.last)
			n.met.readErrors.Inc()
			jsstall.Drop(ctx, n.js, StreamName, cons)
			cons = nil
		}
	}
}

// took notes message seq taken. (A consumer resuming after a stall was
// seen to deliver an earlier message after later ones: read stays in
// order, once each.)
func (o *owner) took(seq uint64) {
	o.readMu.Lock()
	defer o.readMu.Unlock()
	if k := len(o.read); k == 0 || o.read[k-1] < seq {
		o.read = append(o.read, seq)
		return
	}
	if i, found := slices.BinarySearch(o.read, seq); !found {
		o.read = slices.Insert(o.read, i, seq)
	}
}

// readUpTo returns the sequences taken up to s (and not yet removed).
func (o *owner) readUpTo(s uint64) []uint64 {
	o.readMu.Lock()
	defer o.readMu.Unlock()
	n, _ := slices.BinarySearch(o.read, s+1)
	return slices.Clone(o.read[:n])
}

// purgedTo notes the messages up to s removed from the stream.
func (o *owner) purgedTo(s uint64) {
	o.purged.Store(s)
	o.readMu.Lock()
	n, _ := slices.BinarySearch(o.read, s+1)
	o.read = append(o.read[:0], o.read[n:]...)
	o.readMu.Unlock()
}

// readFailed notes a failed read of the partition: logged when the
// failures start. A pull that missed its heartbeat once, between good
// ones, is only counted: a loaded machine stalls a process past the
// heartbeat's tolerance now and then, all its partitions at once; a
// consumer really lost misses the next pull's too, and that starts the
// outage.
func (o *owner) readFailed(err error) {
	o.n.met.readErrors.Inc()
	if errors.Is(err, jetstream.ErrNoHeartbeat) && !o.missed && o.reading.Failures() == 0 {
		o.missed = true
		return
	}
	if o.reading.Fail() {
		o.n.log.Warn("cluster: reading a partition failed; reading again from where it was until it works", "node", o.n.opt.Node, "partition", o.p, "err", err)
	}
}

// readWorked notes a pull that worked: the end of the failed reads is
// logged once they have worked for the Outage's Settle.
func (o *owner) readWorked() {
	o.missed = false
	if f := o.reading.Recover(); f > 0 {
		o.n.log.Info("cluster: reading a partition again", "node", o.n.opt.Node, "partition", o.p, "failures", f)
	}
}

// faultsEnd logs the end of the faults still going on when the owner
// stops (the partition lost or handed over before they ended).
func (o *owner) faultsEnd() {
	if f := o.reading.End(); f > 0 {
		o.n.log.Info("cluster: stopped reading a partition whose reads were failing", "node", o.n.opt.Node, "partition", o.p, "failures", f)
	}
	if f := o.storing.End(); f > 0 {
		o.n.log.Info("cluster: stopped handing a partition's traces to a store that refused them", "node", o.n.opt.Node, "partition", o.p, "failures", f)
	}
	if f := o.checking.End(); f > 0 {
		o.n.log.Info("cluster: stopped owning a partition whose messages could not be checked for removal", "node", o.n.opt.Node, "partition", o.p, "failures", f)
	}
	if f := o.renewing.End(); f > 0 {
		o.n.log.Info("cluster: stopped owning a partition whose lease renewals were failing", "node", o.n.opt.Node, "partition", o.p, "failures", f)
	}
}

// Reading a partition: pulls of up to fetchBatch messages, each waiting
// at most fetchWait (the assembler's tick and the checkpoints' questions
// are served between them), with heartbeats so that a consumer lost with
// its server is noticed within a pull.
const (
	fetchBatch = 256
	fetchWait  = 500 * time.Millisecond
	// nextSeqWait bounds the stall watch's question to the stream's
	// leader (jsstall.NextSeq).
	nextSeqWait = 500 * time.Millisecond
)

// reader makes the partition's consumer: ephemeral, in memory, without
// acknowledgements (progress is the stream's own: checkpointed messages
// are removed), starting after the last message taken.
func (o *owner) reader(ctx context.Context) (jetstream.Consumer, error) {
	cfg := jetstream.ConsumerConfig{
		FilterSubject:     Subject(o.p),
		AckPolicy:         jetstream.AckNonePolicy,
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		InactiveThreshold: 30 * time.Second,
		MemoryStorage:     true,
		Replicas:          1,
	}
	if o.last > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, o.last+1
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return o.n.js.CreateConsumer(cctx, StreamName, cfg)
}

// safe asks the owner for its safe point (0 when it has stopped). An
// owner busy making a new reader (its stream's leader changed) is not
// waited for long: its safe point is then where it was.
func (o *owner) safe(ctx context.Context) uint64 {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
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

// stopMode says what an owner that stops does with what it assembled.
type stopMode int

const (
	// stopDrop drops it (a fenced owner: its messages stay in the stream
	// for the next owner).
	stopDrop stopMode = iota
	// stopSafe hands on the completed traces and drops the open ones;
	// the stream may be purged up to the safe point (cuts), so that the
	// next owner, reading on from there while the receivers go on,
	// assembles the open traces whole (a partition handed over).
	stopSafe
	// stopAll hands on every trace, open ones too; the stream may be
	// purged up to the last message taken (the node stops).
	stopAll
)

// stop ends the owner and returns the sequence up to which the stream
// may be purged once the sink has made what it was handed durable (0:
// none), as mode says.
func (o *owner) stop(mode stopMode) uint64 {
	o.once.Do(func() { o.quit <- mode })
	<-o.done
	return o.final
}
