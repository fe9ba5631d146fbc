// Package broker holds what the message-broker receivers (STOMP, NATS,
// MQTT, the embedded broker) share: turning messages into record batches
// (KDB text or binary, one or many records per message), acknowledging a
// message only once its records are durable in every sink, handling
// malformed messages (logged with the message id and reason, at most ten
// lines a second, counted, copied to a dead-letter destination if one is
// configured, and acknowledged so they do not loop), and logging each
// state change of a connection once. The receivers reconnect with the
// back-off of package backoff.
//
// Delivery is at-least-once: a message is acknowledged from the batch's
// Done callback (see record.Batch), which the bridge calls after the sinks
// consumed and flushed its records. When a sink fails the message is
// negatively acknowledged (or left unacknowledged) so the broker delivers
// it again.
//
// A Batcher may outlive a connection: when a session ends with the
// connection lost (or dropped after a refusal), the source calls Discard so
// messages received on different connections never share a batch; the
// broker redelivers what was discarded. A batch whose hand-off fails
// (context cancelled, queue closed) is settled as refused at once.
//
// Concurrency: a Batcher is used by the one goroutine that receives a
// subscription's messages; Ack and Nack functions of messages are called
// later from the bridge's flush goroutine and must be safe for that.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/lograte"
	"github.com/tracebridge/tracebridge/internal/metrics"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

// Format says how message bodies are encoded.
type Format int

// The formats. Auto decides per message: a content type text/* means the
// KDB text dialect, application/octet-stream the binary one; without a
// content type a body whose first byte is an ASCII digit is text (a binary
// body starts with the high byte of an int32 record id, never a digit for
// ids below 0x30000000).
const (
	Auto Format = iota
	Text
	Binary
)

// ParseFormat maps "", "auto", "text" and "binary" to a Format.
func ParseFormat(s string) (Format, error) {
	switch s {
	case "", "auto":
		return Auto, nil
	case "text":
		return Text, nil
	case "binary":
		return Binary, nil
	}
	return Auto, fmt.Errorf("format %q: want auto, text or binary", s)
}

// Message is one broker message.
type Message struct {
	// ID names the message in logs (message-id, stream sequence, packet id).
	ID string
	// Body is the payload; the Batcher does not keep it.
	Body []byte
	// ContentType is the message's content type, if the broker carries one.
	ContentType string
	// Ack acknowledges the message; Nack asks for redelivery (nil: the
	// message is simply not acknowledged and comes again after a
	// reconnect). Both may be called from another goroutine.
	Ack  func() error
	Nack func() error
}

// SettleWait bounds how long a stopping source waits for the
// acknowledgements of what it handed on before it closes its connection
// (the bridge acknowledges after its next flush); what is still
// unacknowledged then is redelivered by the broker later.
const SettleWait = 5 * time.Second

// Config configures a Batcher.
type Config struct {
	// Name is the receiver's name (logs, metrics).
	Name string
	// Peer names the broker and destination in the batches' origin.
	Peer string
	// Mapping gives the record ids of both KDB dialects.
	Mapping *kdb.Mapping
	// Options carries the decoders' limits.
	Options kdb.Options
	// Format of the bodies (Auto by default).
	Format Format
	// MaxRecords: a batch is handed on when it holds this many records
	// (default 1024). MaxDelay: or when its first message waited this long
	// (default 20 ms).
	MaxRecords int
	MaxDelay   time.Duration
	// Window, if positive, hands the batch on when the number of unsettled
	// messages (held in the batch, or handed on and not yet acknowledged or
	// refused) reaches it. A broker that stops delivering at a window of
	// unacknowledged messages (MQTT's max_inflight_messages) sends nothing
	// more until acknowledgements come, so waiting for MaxDelay then would
	// only delay them. Only reaching the window counts: messages beyond it
	// (a broker sending more) are batched as usual, not one by one.
	Window int
	// Transform, if set, is applied to the records each message added:
	// b.Records[from:]. It runs on the receiving goroutine, may change the
	// records' values in place or drop them (b.Truncate), must not touch
	// the records before from and must not keep b.
	Transform func(b *record.Batch, from int)
	// DeadLetter, if set, receives a copy of every malformed message with
	// the reason before the message is acknowledged.
	DeadLetter func(m Message, reason error) error
	// Cumulative: the broker's acknowledgement of a message covers every
	// earlier one of the subscription (STOMP's ack mode "client"), so a
	// durable batch is acknowledged by acking its last message only, and a
	// failed one by calling its last message's Nack, which must make the
	// broker redeliver everything unacknowledged on that message's
	// connection (e.g. by dropping the connection), since later
	// acknowledgements would otherwise cover it. Sources must Discard when
	// a connection ends, so a batch never spans two connections.
	Cumulative bool
}

// Settings are injected.
type Settings struct {
	Logger  *slog.Logger
	Metrics *metrics.Receiver
	// Memory is the process's memory limit: near it the batcher takes no
	// new message (they stay with the broker, unacknowledged) until it
	// takes data again; nil: none.
	Memory pipeline.Memory
}

// Batcher decodes messages into batches and hands them on.
type Batcher struct {
	cfg   Config
	log   *slog.Logger
	met   *metrics.Receiver
	mem   pipeline.Memory
	out   pipeline.Consumer
	emit  pipeline.Emitter
	text  *kdb.TextDecoder
	bin   *kdb.Decoder
	batch *record.Batch
	first time.Time // arrival of the batch's first message
	acks  []Message
	limit lograte.Limiter // malformed messages: malformedPerSecond lines a second

	unsettled atomic.Int64  // batches handed on whose Done has not run
	unacked   atomic.Int64  // messages held or handed on, not yet settled
	settled   chan struct{} // signalled after each settle

	// Counters for tests and stats.
	Messages, Malformed, Records int64
}

// NewBatcher returns a batcher handing batches to out.
func NewBatcher(cfg Config, set Settings, out pipeline.Consumer) *Batcher {
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = 1024
	}
	if cfg.MaxDelay <= 0 {
		cfg.MaxDelay = 20 * time.Millisecond
	}
	if set.Logger == nil {
		set.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Batcher{
		cfg:     cfg,
		log:     set.Logger,
		met:     set.Metrics,
		mem:     set.Memory,
		out:     out,
		text:    kdb.NewTextDecoder(cfg.Mapping, cfg.Options),
		bin:     kdb.NewDecoder(cfg.Mapping, cfg.Options),
		batch:   &record.Batch{},
		limit:   lograte.Limiter{PerSecond: malformedPerSecond},
		settled: make(chan struct{}, 1),
	}
	b.emit, _ = out.(pipeline.Emitter)
	return b
}

// Add decodes m into the current batch, handing the batch on when it is
// full. A malformed message is logged, counted, dead-lettered and then
// acknowledged together with the messages before it; its good records (the
// ones before the bad one) are kept.
//
// Near the process's memory limit Add first hands the current batch on,
// then waits until the limit takes data again (the broker holds the
// messages after m, unacknowledged, within its window), or returns ctx's
// error without taking m (the broker redelivers it).
func (b *Batcher) Add(ctx context.Context, m Message) error {
	if b.mem != nil && !b.mem.Admit() {
		b.met.MemoryRefused()
		if err := b.Flush(ctx); err != nil {
			return err
		}
		if err := b.mem.Wait(ctx); err != nil {
			return err
		}
	}
	b.Messages++
	b.met.Bytes(len(m.Body))
	if b.batch.Len() == 0 && len(b.acks) == 0 {
		b.first = time.Now()
	}
	before := b.batch.Len()
	if err := b.decode(m); err != nil {
		b.Malformed++
		b.met.DecodeError()
		b.malformed(m, err)
	}
	if b.cfg.Transform != nil && b.batch.Len() > before {
		b.cfg.Transform(b.batch, before)
	}
	b.Records += int64(b.batch.Len() - before)
	b.acks = append(b.acks, m)
	unacked := b.unacked.Add(1)
	if b.batch.Len() >= b.cfg.MaxRecords || b.cfg.Window > 0 && unacked == int64(b.cfg.Window) {
		return b.Flush(ctx)
	}
	return nil
}

func (b *Batcher) decode(m Message) error {
	if b.isText(m) {
		_, err := b.text.DecodeMessage(m.Body, b.batch)
		return err
	}
	b.bin.Reset()
	n, err := b.bin.Decode(m.Body, b.batch)
	if err != nil {
		return err
	}
	if n < len(m.Body) {
		return fmt.Errorf("offset %d: message ends inside a record (%d bytes left over)", n, len(m.Body)-n)
	}
	return nil
}

func (b *Batcher) isText(m Message) bool {
	switch b.cfg.Format {
	case Text:
		return true
	case Binary:
		return false
	}
	switch ct := m.ContentType; {
	case len(ct) >= 5 && ct[:5] == "text/":
		return true
	case ct == "application/octet-stream":
		return false
	}
	return len(m.Body) > 0 && m.Body[0] >= '0' && m.Body[0] <= '9'
}

func (b *Batcher) malformed(m Message, err error) {
	attrs := []any{"receiver", b.cfg.Name, "message_id", m.ID, "err", err}
	if b.cfg.DeadLetter != nil {
		if dlErr := b.cfg.DeadLetter(m, err); dlErr != nil {
			attrs = append(attrs, "dead_letter_err", dlErr)
		} else {
			attrs = append(attrs, "dead_lettered", true)
		}
	}
	b.limit.Log(context.Background(), b.log, slog.LevelWarn, "malformed message acknowledged", attrs...)
}

// malformedPerSecond is how many malformed messages a Batcher logs a
// second.
const malformedPerSecond = 10

// Due reports whether the current batch has waited MaxDelay.
func (b *Batcher) Due(now time.Time) bool {
	return (b.batch.Len() > 0 || len(b.acks) > 0) && now.Sub(b.first) >= b.cfg.MaxDelay
}

// Pending reports whether messages wait in the current batch.
func (b *Batcher) Pending() bool { return len(b.acks) > 0 }

// Unacked returns the number of messages held in the current batch or
// handed on whose batch has not been settled yet.
func (b *Batcher) Unacked() int { return int(b.unacked.Load()) }

// Discard drops the current batch and the messages held for it without
// acknowledging or refusing them. Sources call it when the connection the
// messages came through is gone: the broker redelivers them on the next
// one, and a batch mixing both connections could otherwise be acknowledged
// (cumulatively) or refused through the wrong one.
func (b *Batcher) Discard() {
	b.unacked.Add(-int64(len(b.acks)))
	clear(b.acks)
	b.acks = b.acks[:0]
	b.batch.Reset()
}

// Flush hands the current batch on, with a Done callback that acknowledges
// its messages once their records are durable (or asks for redelivery when
// a sink failed). When the hand-off itself fails (ctx done, queue closed)
// the messages are refused at once and the error is returned.
func (b *Batcher) Flush(ctx context.Context) error {
	if len(b.acks) == 0 {
		return nil
	}
	msgs := b.acks
	b.acks = nil
	b.met.Records(b.batch)
	b.unsettled.Add(1)
	cumulative := b.cfg.Cumulative
	var fired atomic.Bool
	done := func(err error) {
		if !fired.CompareAndSwap(false, true) {
			return // a consumer that failed may have called it already
		}
		if cumulative {
			settleCumulative(msgs, err)
		} else {
			settle(msgs, err)
		}
		b.unacked.Add(-int64(len(msgs)))
		b.unsettled.Add(-1)
		select {
		case b.settled <- struct{}{}:
		default:
		}
	}
	b.batch.Done = append(b.batch.Done, done)
	b.batch.Origin = record.Origin{Receiver: b.cfg.Name, Peer: b.cfg.Peer}
	var err error
	if b.emit != nil {
		var nb *record.Batch
		nb, err = b.emit.Emit(ctx, b.batch)
		if nb != nil {
			b.batch = nb
		}
	} else {
		err = b.out.Consume(ctx, b.batch)
	}
	if err != nil {
		// Not taken: nobody else will call done, and WaitSettled must not
		// wait for it.
		done(err)
	}
	b.batch.Reset()
	return err
}

// WaitSettled waits until every batch handed on has been settled
// (acknowledged or refused), or timeout passes; sources call it before
// closing their connection so the last acknowledgements can still be sent.
// It reports whether everything was settled.
func (b *Batcher) WaitSettled(timeout time.Duration) bool {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for b.unsettled.Load() > 0 {
		select {
		case <-b.settled:
		case <-deadline.C:
			return b.unsettled.Load() == 0
		}
	}
	return true
}

// settle acknowledges msgs, or asks for their redelivery.
func settle(msgs []Message, err error) {
	for _, m := range msgs {
		switch {
		case err == nil && m.Ack != nil:
			m.Ack()
		case err != nil && m.Nack != nil:
			m.Nack()
		}
	}
}

// settleCumulative acknowledges msgs with one acknowledgement of the last,
// or asks for redelivery through the last: that message's connection is the
// one whose later acknowledgements would cover the refused messages.
func settleCumulative(msgs []Message, err error) {
	if len(msgs) == 0 {
		return
	}
	last := msgs[len(msgs)-1]
	switch {
	case err == nil && last.Ack != nil:
		last.Ack()
	case err != nil && last.Nack != nil:
		last.Nack()
	}
}

// State logs a connection's state changes once each: Up after a successful
// connect, Down with the reason when it fails or is lost. Repeated failures
// while down are not logged again.
type State struct {
	Log      *slog.Logger
	Receiver string
	Target   string // redacted: never a password

	mu   sync.Mutex
	up   bool
	seen bool
}

// Up records a successful connect.
func (s *State) Up() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.up {
		msg := "connected"
		if s.seen {
			msg = "reconnected"
		}
		s.Log.Info(msg, "receiver", s.Receiver, "broker", s.Target)
	}
	s.up, s.seen = true, true
}

// Down records a failure; it logs only the first one after being up.
func (s *State) Down(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.up || !s.seen {
		msg := "connection lost; reconnecting with back-off"
		if !s.seen {
			msg = "cannot connect; retrying with back-off"
		}
		s.Log.Warn(msg, "receiver", s.Receiver, "broker", s.Target, "err", err)
	}
	s.up, s.seen = false, true
}

// ErrStopped is returned by sources whose context ended.
var ErrStopped = errors.New("stopped")

// SetDeadLetter replaces the dead-letter function (sources set it per
// connection, since it sends through the current connection).
func (b *Batcher) SetDeadLetter(f func(m Message, reason error) error) { b.cfg.DeadLetter = f }
