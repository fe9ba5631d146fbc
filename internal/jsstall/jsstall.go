// Package jsstall tells when a JetStream consumer has stalled: it
// delivered nothing for a while although its stream's leader holds a
// message for it. On a loaded machine one replica of a replicated stream
// was seen to stop delivering to the consumer it served while the other
// replicas had every message (docs/STREAM.md, "Consumers that stall"); a
// reader that waits for its consumer then waits for ever. The readers of
// the stream package (tail, dump, the web UI's live view) and the
// cluster's partition owners keep a Watch beside their consumer and,
// when it says so, read on through a new consumer from their last
// message.
package jsstall

import (
	"context"
	"encoding/json"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The watch's times: a consumer that delivered nothing for After is
// checked (its stream's leader asked for the first message it has yet to
// deliver); between checks the wait doubles up to MaxWait while nothing
// is found.
const (
	After   = 5 * time.Second
	MaxWait = time.Minute
)

// Watch is one consumer's stall watch; the reader's goroutine owns it.
// Read stamps each message read (a batch's message, not each record);
// Stalled is asked when a wait for a message timed out.
type Watch struct {
	lastRead time.Time
	read     bool // messages were read since the last check
	checkAt  time.Time
	every    time.Duration
	undeliv  uint64 // the message the last check found undelivered (0: none)
}

// Start begins the watch as a consumer begins (now: nothing read yet).
func (w *Watch) Start(now time.Time) {
	*w = Watch{lastRead: now, checkAt: now.Add(After), every: After}
}

// Read notes that a message was read.
func (w *Watch) Read(now time.Time) { w.lastRead, w.read = now, true }

// Stalled reports whether the consumer has stalled: it delivered nothing
// for After or more while its stream's leader held a message for it, and
// next found the same message at the check before (so the consumer had
// a whole wait between the checks to deliver it). next returns the
// sequence of the first message the reader has yet to read, from the
// stream's leader (NextSeq), or 0 when there is none or no answer; it
// is called only when a check is due. After true the watch begins again
// as for a new consumer.
func (w *Watch) Stalled(ctx context.Context, now time.Time, next func(context.Context) uint64) bool {
	if now.Sub(w.lastRead) < After {
		return false
	}
	if w.read {
		// Read since the last check: the checks start over.
		w.read, w.undeliv, w.every = false, 0, After
		w.checkAt = w.lastRead.Add(After)
	}
	if now.Before(w.checkAt) {
		return false
	}
	seq := next(ctx)
	switch {
	case seq == 0:
		w.undeliv = 0
		w.every = min(2*w.every, MaxWait)
	case seq == w.undeliv:
		w.Start(now) // the new consumer's first wait
		return true
	default:
		w.undeliv, w.every = seq, After
	}
	w.checkAt = now.Add(w.every)
	return false
}

// NextSeq returns the sequence of the first message of stream on subject
// (a filter, wildcards allowed) at or after seq, as the stream's leader
// has it; 0: none, or no answer within 2 s. It asks the leader
// ($JS.API.STREAM.MSG.GET with next_by_subj), not a direct get, which
// any replica may answer, the stalled one too; a NATS user needs
// permission to publish to $JS.API.STREAM.MSG.GET.<stream>.
func NextSeq(ctx context.Context, nc *nats.Conn, stream, subject string, seq uint64) uint64 {
	req, err := json.Marshal(struct {
		Seq     uint64 `json:"seq"`
		NextFor string `json:"next_by_subj"`
	}{seq, subject})
	if err != nil {
		return 0
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+stream, req)
	if err != nil {
		return 0
	}
	var resp struct {
		Message *struct {
			Seq uint64 `json:"seq"`
		} `json:"message"`
	}
	if json.Unmarshal(msg.Data, &resp) != nil || resp.Message == nil {
		return 0
	}
	return resp.Message.Seq
}

// Drop deletes a consumer of stream that its reader no longer reads (a
// stalled one it replaced, or its own as it stops) at once rather than
// at its inactive threshold, waiting at most 2 s; a failure is left to
// that threshold.
func Drop(ctx context.Context, js jetstream.JetStream, stream string, c jetstream.Consumer) {
	ci := c.CachedInfo()
	if ci == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_ = js.DeleteConsumer(ctx, stream, ci.Name)
}
