package cluster

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/zeebo/xxh3"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/lograte"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// PublishTimeout bounds a Flush: the wait for JetStream to store what
// was published (retrying what failed). Past it Flush fails, and the
// sources' acknowledgements fail with it (OTLP answers 503, ZICO an
// error, a broker message is not acknowledged): the client retries. The
// messages not stored are kept, not dropped: the next Flush publishes
// them again, and Consume waits until JetStream has stored them, so
// that sources without acknowledgements (Kieker TCP, KDB, replayed
// logs, JFR files), which cannot send again, back-pressure instead of
// losing records.
const PublishTimeout = 10 * time.Second

// maxPending is the window of publishes JetStream has not acknowledged
// yet; beyond it Consume waits (back-pressure on the receivers).
const maxPending = 4096

// Publisher is the durable sink of a cluster node's engine: it cuts
// every batch into partitions and encodes each part as a section of its
// partition's pending message; Flush publishes the pending messages to
// the stream (one per partition with records since the last flush: the
// batches of many requests travel together, which costs JetStream far
// less than a message per request and partition) and returns once
// JetStream has stored every message published before it (PubAck), so
// the engine acknowledges sources only for stored data. A pending message
// that reaches half of the largest message size is published at once.
// Consume runs on the engine's sink goroutine, Flush on its flusher,
// concurrently.
//
// Nothing handed to the publisher is dropped while the node runs: a
// message JetStream did not store by a flush's deadline (a leader
// election that outlasts it, a lost quorum, a full stream) is kept, the
// next Flush publishes it again before anything newer, and Consume waits
// until JetStream has stored every kept message. The engine cannot send
// a batch again once its sink consumed it, and a message carries the
// sections of acknowledged and unacknowledged batches alike, so this is
// the layer that keeps them; acknowledged sources still hear of the
// failed flush and retry (what is then stored twice is deduplicated by
// section id, docs/CLUSTER.md).
type Publisher struct {
	n   *Node
	js  jetstream.JetStream
	log *slog.Logger

	part  *Partitioner
	rec   []byte  // a section's records (Consume's goroutine)
	sec   []byte  // a section (Consume's goroutine)
	order []int32 // records by partition (Consume's goroutine)
	count []int32

	// send is held while pending messages are changed or published, so
	// that a partition's messages are published in the order of their
	// records; a wait for it is bounded by the caller's context.
	send    chan struct{}
	pending []pendingMsg // by partition (under send)

	abort     chan struct{} // closed by Abort: Consume stops waiting
	abortOnce sync.Once

	mu      sync.Mutex
	futures []future // (under mu)
	// kept holds the messages not stored by a failed flush or not handed
	// to JetStream at all, oldest first (under mu; changed by Flush and,
	// under send too, by publishPending); Flush publishes them again
	// before anything newer. blocked is non-nil from the first kept
	// message until a Flush has had every kept message stored, then
	// closed: Consume waits for it.
	kept    []keptMsg
	blocked chan struct{}
	keptErr error // why the last message was kept

	// Faults that fail every try while they last (a node cut off from
	// the quorum, the stream full): handing messages to JetStream
	// (publishing) and JetStream storing them (storing, counted by
	// flushes). Each is logged once when it starts and once when it
	// ends (or when the publisher closes first); the metrics count every
	// failure.
	publishing, storing lograte.Outage
	closed              atomic.Bool
	// timeout bounds a Flush (PublishTimeout; tests shorten it).
	timeout time.Duration
}

// keptMsg is a message JetStream has not stored yet, with its JetStream
// message id.
type keptMsg struct {
	msg *nats.Msg
	id  string
	pt  int
}

// future is a message handed to JetStream and the outcome to come.
type future struct {
	f  jetstream.PubAckFuture
	km keptMsg
}

// pendingMsg is a partition's message being filled: the header and the
// sections so far, the first section's id and how many there are.
type pendingMsg struct {
	buf      []byte
	first    SectionID
	sections int
}

var (
	_ pipeline.BuiltSink = (*Publisher)(nil)
	_ pipeline.Aborter   = (*Publisher)(nil)
)

func newPublisher(n *Node) *Publisher {
	return &Publisher{n: n, js: n.js, log: n.log, part: NewPartitioner(n.opt.Partitions),
		count: make([]int32, n.opt.Partitions+1), send: make(chan struct{}, 1), pending: make([]pendingMsg, n.opt.Partitions),
		timeout: PublishTimeout, abort: make(chan struct{})}
}

// Where says where the records go.
func (p *Publisher) Where() string {
	return fmt.Sprintf("publishing to JetStream stream %s (%d partitions, R%d) as node %s", StreamName, p.n.opt.Partitions, p.n.opt.Replicas, p.n.opt.Node)
}

// Consume adds the trace records of b to their partitions' pending
// messages, one section per partition (more when a part exceeds half the
// largest message). It waits while JetStream has maxPending messages
// unacknowledged, and while messages a flush could not have stored are
// kept (back-pressure: the engine's queues fill and the receivers stop
// reading or answer busy).
func (p *Publisher) Consume(ctx context.Context, b *record.Batch) error {
	if b.Len() == 0 {
		return nil
	}
	if err := p.waitStored(ctx); err != nil {
		return err
	}
	// A counting sort of the records by partition (-1: not published,
	// counted in slot n).
	np := p.n.opt.Partitions
	clear(p.count)
	if cap(p.order) < 2*b.Len() {
		p.order = make([]int32, 2*b.Len())
	}
	parts := p.order[:b.Len()]
	for i := range b.Records {
		pt := p.part.Partition(&b.Records[i], &b.Origin)
		if pt < 0 {
			pt = np
		}
		parts[i] = int32(pt)
		p.count[pt]++
	}
	if int(p.count[np]) == b.Len() {
		return nil
	}
	start := make([]int32, np+1)
	var sum int32
	for i := range np + 1 {
		start[i] = sum
		sum += p.count[i]
	}
	order := p.order[b.Len() : 2*b.Len()]
	pos := append([]int32(nil), start...)
	for i, pt := range parts {
		order[pos[pt]] = int32(i)
		pos[pt]++
	}
	for pt := range np {
		if p.count[pt] == 0 {
			continue
		}
		idx := order[start[pt] : start[pt]+p.count[pt]]
		if err := p.addPart(ctx, pt, b, idx); err != nil {
			return err
		}
	}
	return nil
}

// addPart adds the records idx of b to partition pt's pending message, as
// sections of at most half the largest message each.
func (p *Publisher) addPart(ctx context.Context, pt int, b *record.Batch, idx []int32) error {
	limit := p.limit()
	for len(idx) > 0 {
		enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
		p.rec = p.rec[:0]
		n := 0
		for _, i := range idx {
			if n > 0 && len(p.rec) > limit/2 {
				break
			}
			var err error
			if p.rec, err = enc.Append(p.rec, &b.Records[i]); err != nil {
				p.n.met.publishError(1)
				return fmt.Errorf("cluster: partition %d: %w", pt, err)
			}
			n++
		}
		idx = idx[n:]
		p.sec = appendSection(p.sec[:0], &b.Origin, p.rec)
		if len(p.sec)+len(magic) > limit {
			// One record larger than the servers take: never stored,
			// however often the client retries.
			p.n.met.publishError(1)
			return fmt.Errorf("cluster: partition %d: a record of %d bytes is larger than the NATS servers' max_payload allows (%d)", pt, len(p.rec), limit)
		}
		if err := p.add(ctx, pt, p.sec, sectionID(b.Origin.Host, b.Origin.Service, p.rec), limit); err != nil {
			return err
		}
	}
	return nil
}

// add appends section sec (id) to partition pt's pending message. A
// message it would take past limit is published first; one it takes past
// half of limit is published at once.
func (p *Publisher) add(ctx context.Context, pt int, sec []byte, id SectionID, limit int) error {
	if err := p.lock(ctx); err != nil {
		return err
	}
	defer p.unlock()
	m := &p.pending[pt]
	if m.sections > 0 && len(m.buf)+len(sec) > limit {
		p.publishPending(ctx, pt)
	}
	if m.sections == 0 {
		m.buf = append(make([]byte, 0, max(4<<10, 2*len(sec))), magic...)
		m.first = id
	}
	m.buf = append(m.buf, sec...)
	m.sections++
	if len(m.buf) > limit/2 {
		p.publishPending(ctx, pt)
	}
	return nil
}

// lock takes the send lock, waiting at most until ctx ends.
func (p *Publisher) lock(ctx context.Context) error {
	select {
	case p.send <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("cluster: publishing: %w", context.Cause(ctx))
	}
}

func (p *Publisher) unlock() { <-p.send }

// ErrAborted: the engine aborted the publisher at shutdown while it
// waited for JetStream to store kept messages; the batch was not taken.
var ErrAborted = errors.New("cluster: publisher aborted while JetStream stored nothing")

// waitStored waits while messages are kept (a flush failed), until a
// Flush has had them stored, ctx ends or the publisher is aborted.
func (p *Publisher) waitStored(ctx context.Context) error {
	p.mu.Lock()
	blocked := p.blocked
	p.mu.Unlock()
	if blocked == nil {
		return nil
	}
	select {
	case <-blocked:
		return nil
	case <-p.abort:
		return ErrAborted
	case <-ctx.Done():
		return fmt.Errorf("cluster: waiting for JetStream to store kept messages: %w", context.Cause(ctx))
	}
}

// keep adds messages not stored to the kept ones: first before the
// others (they are older), else after.
func (p *Publisher) keep(ms []keptMsg, first bool, why error) {
	if len(ms) == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if first {
		p.kept = append(ms, p.kept...)
	} else {
		p.kept = append(p.kept, ms...)
	}
	if why != nil {
		p.keptErr = why
	}
	if p.blocked == nil {
		p.blocked = make(chan struct{})
	}
}

// Abort makes a Consume waiting for kept messages to be stored return
// (the engine calls it at shutdown when the sink is stuck).
func (p *Publisher) Abort() { p.abortOnce.Do(func() { close(p.abort) }) }

// publishPending publishes partition pt's pending message (under the
// send lock). Its JetStream message id is its section's id when it holds
// one section (so that a client's retry published alone is stored once),
// else a hash of its bytes (so that Flush's retry of it is). While
// messages are kept it is kept behind them (the next Flush publishes it
// in order), as it is when JetStream does not take it.
func (p *Publisher) publishPending(ctx context.Context, pt int) {
	m := &p.pending[pt]
	if m.sections == 0 {
		return
	}
	id := m.first
	if m.sections > 1 {
		id = xxh3.Hash128(m.buf).Bytes()
	}
	km := keptMsg{msg: &nats.Msg{Subject: Subject(pt), Data: m.buf}, id: hex.EncodeToString(id[:]), pt: pt}
	*m = pendingMsg{}
	p.mu.Lock()
	behind := len(p.kept) > 0
	p.mu.Unlock()
	if behind {
		p.keep([]keptMsg{km}, false, nil)
		return
	}
	if err := p.publish(ctx, km); err != nil {
		p.keep([]keptMsg{km}, false, err)
	}
}

// publish hands one message to JetStream (its data is the message's own
// from now on), waiting while the window of unacknowledged publishes is
// full.
func (p *Publisher) publish(ctx context.Context, km keptMsg) error {
	msg, id, pt := km.msg, km.id, km.pt
	for {
		f, err := p.js.PublishMsgAsync(msg, jetstream.WithMsgID(id), jetstream.WithExpectStream(StreamName), jetstream.WithStallWait(250*time.Millisecond))
		if err == nil {
			p.mu.Lock()
			p.futures = append(p.futures, future{f: f, km: km})
			p.mu.Unlock()
			p.n.met.published.Inc()
			p.published()
			return nil
		}
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			p.n.met.publishError(1)
			p.publishFailed(pt, err)
			return fmt.Errorf("cluster: publish to partition %d: %w", pt, err)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("cluster: publish to partition %d: JetStream is behind: %w", pt, context.Cause(ctx))
		}
		select {
		case <-p.abort:
			return fmt.Errorf("cluster: publish to partition %d: JetStream is behind: %w", pt, ErrAborted)
		default:
		}
	}
}

// publishFailed notes a message JetStream did not take (to partition
// pt): logged when the failures start.
func (p *Publisher) publishFailed(pt int, err error) {
	if p.publishing.Fail() {
		p.log.Warn("cluster: publishing failed", "node", p.n.opt.Node, "partition", pt, "err", err)
	}
}

// published notes a message JetStream took: the end of the failures is
// logged with their number.
func (p *Publisher) published() {
	if f := p.publishing.Recover(); f > 0 {
		p.log.Info("cluster: publishing works again", "node", p.n.opt.Node, "failures", f)
	}
}

// Flush publishes the kept and the pending messages and waits until
// JetStream has stored every message published before the call; a
// message it refused is published again (the same message id: JetStream
// keeps one) until PublishTimeout. A message is counted failed only when
// JetStream did not acknowledge it by then: one whose acknowledgement
// came first is stored, however late Flush looks at it (the futures are
// waited for one after the other, and retrying one may take up the
// whole timeout). A full stream is not retried within a flush: its
// publishers are refused at once (ErrStreamFull).
//
// A message not stored is kept (not dropped): the next Flush first
// publishes the oldest kept one alone, synchronously, until it is stored
// or the flush's deadline (so that an outage costs a message a flush,
// not all of them), then the others in order, then the pending ones.
// Consume waits until a Flush ends with nothing kept.
func (p *Publisher) Flush() error {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	var failed, full int
	var last error
	var notStored []keptMsg
	probeFailed := false
	if err := p.lock(ctx); err != nil {
		failed, last = 1, err
	} else {
		p.mu.Lock()
		kept := p.kept
		p.mu.Unlock()
		if len(kept) > 0 {
			if err := p.retry(ctx, kept[0]); err != nil {
				// (One message tried, one counted failed; the error
				// says how many are kept.)
				failed, last, probeFailed = 1, err, true
				if errors.Is(err, ErrStreamFull) {
					full = 1
				}
			} else {
				// (Only Flush takes kept messages off, and publishPending,
				// which adds them, waits for the send lock.)
				p.mu.Lock()
				p.kept = nil
				p.mu.Unlock()
				for i, km := range kept[1:] {
					if err := p.publish(ctx, km); err != nil {
						p.keep(kept[1+i:], false, err)
						break
					}
				}
			}
		}
		// The pending messages: what was consumed before the call (kept
		// behind the others while some are).
		for pt := range p.pending {
			p.publishPending(ctx, pt)
		}
		p.mu.Lock()
		if failed == 0 && len(p.kept) > 0 {
			failed, last = len(p.kept), p.keptErr
		}
		p.mu.Unlock()
		p.unlock()
	}
	p.mu.Lock()
	fs := p.futures
	p.futures = nil
	p.mu.Unlock()
	for _, f := range fs {
		err := ackOf(ctx, f.f)
		switch {
		case err == nil:
			continue
		case errors.Is(err, ErrStreamFull):
		case ctx.Err() == nil:
			err = p.retry(ctx, f.km)
			if err == nil {
				continue
			}
		}
		notStored = append(notStored, f.km)
		last = err
		if errors.Is(err, ErrStreamFull) {
			full++
		}
	}
	failed += len(notStored)
	// Keep what was not stored: before what was kept meanwhile (newer),
	// or, when the kept messages were not published again, after them
	// (older). With nothing kept, Consume goes on.
	p.keep(notStored, !probeFailed, last)
	p.mu.Lock()
	if len(p.kept) == 0 && p.blocked != nil {
		close(p.blocked)
		p.blocked = nil
	}
	kept := len(p.kept)
	p.mu.Unlock()
	if full > 0 {
		p.n.met.refused(full)
	}
	if failed > 0 {
		p.n.met.publishError(failed)
	}
	if failed > 0 || kept > 0 {
		// Once per outage (a node cut off from the quorum fails every
		// flush), and once when it ends; the metric counts each.
		if p.storing.Fail() {
			p.log.Error("cluster: JetStream did not store published records; they are kept and published again, their sources are not acknowledged and receivers wait (until it stores again)", "node", p.n.opt.Node, "messages", max(failed, kept), "err", last)
		}
		return fmt.Errorf("cluster: %d messages not stored by JetStream (kept: %d): %w", max(failed, kept), kept, last)
	}
	if n := p.storing.Recover(); n > 0 {
		p.log.Info("cluster: JetStream stores published records again", "node", p.n.opt.Node, "failed_flushes", n)
	}
	return nil
}

// ackOf waits for a future's outcome until ctx ends: nil when JetStream
// stored the message (an acknowledgement there at the deadline counts),
// ErrStreamFull when the stream refused it for its limits, else why not.
func ackOf(ctx context.Context, f jetstream.PubAckFuture) error {
	select {
	case <-f.Ok():
		return nil
	default:
	}
	select {
	case <-f.Ok():
		return nil
	case err := <-f.Err():
		return refusal(err)
	case <-ctx.Done():
	}
	select {
	case <-f.Ok():
		return nil
	case err := <-f.Err():
		return refusal(err)
	default:
		return fmt.Errorf("no acknowledgement before the flush's deadline: %w", ctx.Err())
	}
}

// retry publishes km again, synchronously, until ctx ends or the stream
// refuses it for its limits.
func (p *Publisher) retry(ctx context.Context, km keptMsg) error {
	// A copy with headers of its own: nats.go may still hold the kept
	// message (its asynchronous publish retries a "no responders"),
	// and the options below set these two again.
	msg := &nats.Msg{Subject: km.msg.Subject, Data: km.msg.Data, Header: nats.Header{}}
	for k, v := range km.msg.Header {
		if k != jetstream.MsgIDHeader && k != jetstream.ExpectedStreamHeader {
			msg.Header[k] = slices.Clone(v)
		}
	}
	wait := 50 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := p.js.PublishMsg(actx, msg, jetstream.WithMsgID(km.id), jetstream.WithExpectStream(StreamName))
		cancel()
		if err == nil {
			return nil
		}
		if err := refusal(err); errors.Is(err, ErrStreamFull) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// Close waits for what is in flight (Flush); it is safe to call twice.
// What JetStream has not stored by then (kept messages) is lost, and
// the error says how much.
func (p *Publisher) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	err := p.Flush()
	if f := p.publishing.End(); f > 0 {
		p.log.Info("cluster: publisher closed while publishing failed", "node", p.n.opt.Node, "failures", f)
	}
	if f := p.storing.End(); f > 0 {
		p.log.Info("cluster: publisher closed while JetStream did not store published records", "node", p.n.opt.Node, "failed_flushes", f)
	}
	return err
}

// limit is the largest message this node publishes: MaxMessage, or less
// when the NATS servers' max_payload is smaller (a stock nats-server
// takes 1 MiB), with room for the headers.
func (p *Publisher) limit() int {
	mp := int(p.n.nc.MaxPayload())
	if mp <= 0 {
		return MaxMessage
	}
	return min(MaxMessage, mp-4<<10)
}
