package cluster

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
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
// error, a broker message is not acknowledged): the client retries.
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
	// unsent counts pending messages whose publishing failed since the
	// last Flush (under send): their records' sources were consumed
	// earlier, so that Flush fails for them.
	unsent  int
	lastErr error

	mu      sync.Mutex
	futures []jetstream.PubAckFuture

	faults  lograte.Limiter
	failing atomic.Int64 // flushes failed in a row
	closed  atomic.Bool
	// timeout bounds a Flush (PublishTimeout; tests shorten it).
	timeout time.Duration
}

// pendingMsg is a partition's message being filled: the header and the
// sections so far, the first section's id and how many there are.
type pendingMsg struct {
	buf      []byte
	first    SectionID
	sections int
}

var _ pipeline.BuiltSink = (*Publisher)(nil)

func newPublisher(n *Node) *Publisher {
	return &Publisher{n: n, js: n.js, log: n.log, part: NewPartitioner(n.opt.Partitions),
		count: make([]int32, n.opt.Partitions+1), send: make(chan struct{}, 1), pending: make([]pendingMsg, n.opt.Partitions),
		faults: lograte.Limiter{PerSecond: 1}, timeout: PublishTimeout}
}

// Where says where the records go.
func (p *Publisher) Where() string {
	return fmt.Sprintf("publishing to JetStream stream %s (%d partitions, R%d) as node %s", StreamName, p.n.opt.Partitions, p.n.opt.Replicas, p.n.opt.Node)
}

// Consume adds the trace records of b to their partitions' pending
// messages, one section per partition (more when a part exceeds half the
// largest message). It waits while JetStream has maxPending messages
// unacknowledged.
func (p *Publisher) Consume(ctx context.Context, b *record.Batch) error {
	if b.Len() == 0 {
		return nil
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
		if err := p.publishPending(ctx, pt); err != nil {
			return err
		}
	}
	if m.sections == 0 {
		m.buf = append(make([]byte, 0, max(4<<10, 2*len(sec))), magic...)
		m.first = id
	}
	m.buf = append(m.buf, sec...)
	m.sections++
	if len(m.buf) > limit/2 {
		return p.publishPending(ctx, pt)
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

// publishPending publishes partition pt's pending message (under the
// send lock). Its JetStream message id is its section's id when it holds
// one section (so that a client's retry published alone is stored once),
// else a hash of its bytes (so that Flush's retry of it is).
func (p *Publisher) publishPending(ctx context.Context, pt int) error {
	m := &p.pending[pt]
	if m.sections == 0 {
		return nil
	}
	id := m.first
	if m.sections > 1 {
		id = xxh3.Hash128(m.buf).Bytes()
	}
	data := m.buf
	*m = pendingMsg{}
	err := p.publish(ctx, pt, data, hex.EncodeToString(id[:]))
	if err != nil {
		p.unsent++
		p.lastErr = err
	}
	return err
}

// publish hands one message to JetStream (data is the message's own from
// now on), waiting while the window of unacknowledged publishes is full.
func (p *Publisher) publish(ctx context.Context, pt int, data []byte, id string) error {
	msg := &nats.Msg{Subject: Subject(pt), Data: data}
	for {
		f, err := p.js.PublishMsgAsync(msg, jetstream.WithMsgID(id), jetstream.WithExpectStream(StreamName), jetstream.WithStallWait(250*time.Millisecond))
		if err == nil {
			p.mu.Lock()
			p.futures = append(p.futures, f)
			p.mu.Unlock()
			p.n.met.published.Inc()
			return nil
		}
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			p.n.met.publishError(1)
			p.faults.Log(ctx, p.log, slog.LevelWarn, "cluster: publishing failed", "node", p.n.opt.Node, "partition", pt, "err", err)
			return fmt.Errorf("cluster: publish to partition %d: %w", pt, err)
		}
		if ctx.Err() != nil || p.closed.Load() {
			return fmt.Errorf("cluster: publish to partition %d: JetStream is behind: %w", pt, context.Cause(ctx))
		}
	}
}

// Flush publishes the pending messages and waits until JetStream has
// stored every message published before the call; a message it refused
// is published again (the same message id: JetStream keeps one) until
// PublishTimeout. A message is counted failed only when JetStream did
// not acknowledge it by then: one whose acknowledgement came first is
// stored, however late Flush looks at it (the futures are waited for one
// after the other, and retrying one may take up the whole timeout). A
// full stream is not retried: its publishers are refused at once
// (ErrStreamFull).
func (p *Publisher) Flush() error {
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	var failed, full, unsent int
	var last error
	// The pending messages: what was consumed before the call. (Those
	// that failed to publish were counted as publish errors.)
	if err := p.lock(ctx); err != nil {
		unsent, last = 1, err
	} else {
		for pt := range p.pending {
			_ = p.publishPending(ctx, pt)
		}
		unsent, last = p.unsent, p.lastErr
		p.unsent, p.lastErr = 0, nil
		p.unlock()
	}
	p.mu.Lock()
	fs := p.futures
	p.futures = nil
	p.mu.Unlock()
	if len(fs) == 0 && unsent == 0 {
		return nil
	}
	for _, f := range fs {
		err := ackOf(ctx, f)
		switch {
		case err == nil:
			continue
		case errors.Is(err, ErrStreamFull):
		case ctx.Err() == nil:
			err = p.retry(ctx, f.Msg())
			if err == nil {
				continue
			}
		}
		failed++
		last = err
		if errors.Is(err, ErrStreamFull) {
			full++
		}
	}
	if full > 0 {
		p.n.met.refused(full)
	}
	if failed > 0 {
		p.n.met.publishError(failed)
	}
	if failed+unsent > 0 {
		// Once per outage (a node cut off from the quorum fails every
		// flush), and once when it ends; the metric counts each.
		if p.failing.Add(1) == 1 {
			p.log.Error("cluster: JetStream did not store published records; their sources are not acknowledged (until it stores again)", "node", p.n.opt.Node, "messages", failed+unsent, "err", last)
		}
		return fmt.Errorf("cluster: %d messages not stored by JetStream: %w", failed+unsent, last)
	}
	if n := p.failing.Swap(0); n > 0 {
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

// retry publishes msg again, synchronously, until ctx ends.
func (p *Publisher) retry(ctx context.Context, msg *nats.Msg) error {
	id := msg.Header.Get(jetstream.MsgIDHeader)
	msg.Header.Del(jetstream.MsgIDHeader)
	msg.Header.Del(jetstream.ExpectedStreamHeader)
	wait := 50 * time.Millisecond
	for {
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := p.js.PublishMsg(actx, msg, jetstream.WithMsgID(id), jetstream.WithExpectStream(StreamName))
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
func (p *Publisher) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	return p.Flush()
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
