package cluster

import (
	"context"
	"encoding/binary"
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
// every batch into partitions, encodes each part as a message and
// publishes it to the stream asynchronously; Flush returns once JetStream
// has stored every message published before it (PubAck), so the engine
// acknowledges sources only for stored data. Consume runs on the engine's
// sink goroutine, Flush on its flusher, concurrently.
type Publisher struct {
	n   *Node
	js  jetstream.JetStream
	log *slog.Logger

	part  *Partitioner
	buf   []byte
	order []int32 // records by partition (Consume's goroutine)
	count []int32

	mu      sync.Mutex
	futures []jetstream.PubAckFuture

	faults  lograte.Limiter
	failing atomic.Int64 // flushes failed in a row
	closed  atomic.Bool
	// timeout bounds a Flush (PublishTimeout; tests shorten it).
	timeout time.Duration
}

var _ pipeline.BuiltSink = (*Publisher)(nil)

func newPublisher(n *Node) *Publisher {
	return &Publisher{n: n, js: n.js, log: n.log, part: NewPartitioner(n.opt.Partitions),
		count: make([]int32, n.opt.Partitions+1), faults: lograte.Limiter{PerSecond: 1}, timeout: PublishTimeout}
}

// Where says where the records go.
func (p *Publisher) Where() string {
	return fmt.Sprintf("publishing to JetStream stream %s (%d partitions, R%d) as node %s", StreamName, p.n.opt.Partitions, p.n.opt.Replicas, p.n.opt.Node)
}

// Consume publishes the trace records of b, one message per partition
// (more when a part exceeds MaxMessage). It waits while JetStream has
// maxPending messages unacknowledged.
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
		if err := p.publishPart(ctx, pt, b, idx); err != nil {
			return err
		}
	}
	return nil
}

// publishPart publishes the records idx of b as partition pt's messages.
func (p *Publisher) publishPart(ctx context.Context, pt int, b *record.Batch, idx []int32) error {
	for len(idx) > 0 {
		enc := kieker.NewEncoder(kieker.EncoderOptions{Inline: true})
		p.buf = appendOrigin(p.buf[:0], &b.Origin)
		head := len(p.buf)
		n := 0
		limit := p.limit()
		for _, i := range idx {
			if n > 0 && len(p.buf)-head > limit/2 {
				break
			}
			var err error
			if p.buf, err = enc.Append(p.buf, &b.Records[i]); err != nil {
				p.n.met.publishError(1)
				return fmt.Errorf("cluster: partition %d: %w", pt, err)
			}
			n++
		}
		idx = idx[n:]
		if len(p.buf) > limit {
			// One record larger than the servers take: never stored,
			// however often the client retries.
			p.n.met.publishError(1)
			return fmt.Errorf("cluster: partition %d: a record of %d bytes is larger than the NATS servers' max_payload allows (%d)", pt, len(p.buf)-head, limit)
		}
		if err := p.publish(ctx, pt, p.buf, messageID(&b.Origin, p.buf[head:])); err != nil {
			return err
		}
	}
	return nil
}

// publish hands one message to JetStream, waiting while the window of
// unacknowledged publishes is full.
func (p *Publisher) publish(ctx context.Context, pt int, data []byte, id string) error {
	msg := &nats.Msg{Subject: Subject(pt), Data: append([]byte(nil), data...)}
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

// Flush waits until JetStream has stored every message published before
// the call; a message it refused is published again (the same message
// id: JetStream keeps one) until PublishTimeout. A message is counted
// failed only when JetStream did not acknowledge it by then: one whose
// acknowledgement came first is stored, however late Flush looks at it
// (the futures are waited for one after the other, and retrying one may
// take up the whole timeout). A full stream is not retried: its
// publishers are refused at once (ErrStreamFull).
func (p *Publisher) Flush() error {
	p.mu.Lock()
	fs := p.futures
	p.futures = nil
	p.mu.Unlock()
	if len(fs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), p.timeout)
	defer cancel()
	var failed, full int
	var last error
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
		// Once per outage (a node cut off from the quorum fails every
		// flush), and once when it ends; the metric counts each.
		if p.failing.Add(1) == 1 {
			p.log.Error("cluster: JetStream did not store published records; their sources are not acknowledged (until it stores again)", "node", p.n.opt.Node, "messages", failed, "err", last)
		}
		return fmt.Errorf("cluster: %d messages not stored by JetStream: %w", failed, last)
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

// messageID is a message's JetStream id: a hash of its records and the
// host and service they come from, not of the peer's address or the
// session, so that a client's retry on a new connection, or to another
// node, is the same message (stored once within the stream's duplicate
// window).
func messageID(o *record.Origin, records []byte) string {
	h := xxh3.New()
	for _, s := range [...]string{o.Host, o.Service} {
		var n [binary.MaxVarintLen64]byte
		_, _ = h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		_, _ = h.WriteString(s)
	}
	_, _ = h.Write(records)
	sum := h.Sum128().Bytes()
	return hex.EncodeToString(sum[:])
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
