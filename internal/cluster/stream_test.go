package cluster

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/logtest"
	"github.com/tracebridge/tracebridge/internal/natsd"
	"github.com/tracebridge/tracebridge/internal/natslogin"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// publisherNode starts a node that only publishes (no sink: it owns no
// partition, nothing empties the stream) on srv, and waits until its
// stream is there.
func publisherNode(t *testing.T, srv *natsd.Server, opt Options) *Node {
	t.Helper()
	creds := srv.Credentials()
	opt.Partitions, opt.Replicas = 4, 1
	opt.URL, opt.Login = "nats://"+srv.Addr(), natslogin.Login{User: creds.User, Password: creds.Password}
	opt.CheckpointInterval = 200 * time.Millisecond
	if opt.Node == "" {
		opt.Node = "p1"
	}
	n, err := New(opt)
	if err != nil {
		t.Fatal(err)
	}
	runUntilEnd(t, n)
	waitFor(t, "the stream", func() bool { return n.Status().Stream.OK })
	return n
}

func startServer(t *testing.T) *natsd.Server {
	t.Helper()
	srv, err := natsd.Start(natsd.Config{StoreDir: filepath.Join(t.TempDir(), "js")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)
	return srv
}

// spanBatch is a batch of k spans of distinct traces (first: the first
// trace number), padded so that each message is about pad bytes.
func spanBatch(first, k, pad int) *record.Batch {
	b := &record.Batch{Origin: record.Origin{Receiver: "test", Host: "h"}}
	for i := range k {
		id := trace.ID{Hi: 9, Lo: uint64(first + i + 1)}
		trace.AppendSpan(b, id, &trace.Span{SpanID: 1, Operation: strings.Repeat("x", pad) + strconv.Itoa(first+i), Start: 1, End: 2})
	}
	return b
}

// streamInfo reads the stream's configuration and state from the server.
func streamInfo(t *testing.T, n *Node) *jetstream.StreamInfo {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := n.JetStream().Stream(ctx, StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info
}

// TestFlushCountsAcknowledged: a Flush whose first message is not
// stored (its retries last until the deadline) counts only that one
// failed: the messages after it, which JetStream acknowledged long
// before, are not (the deadline had made them look failed half of the
// time: a spurious 503 and a client's duplicate retry).
func TestFlushCountsAcknowledged(t *testing.T) {
	srv := startServer(t)
	n := publisherNode(t, srv, Options{})
	pub := n.Publisher()
	pub.timeout = 3 * time.Second

	// A message JetStream never stores: no stream takes its subject.
	f, err := n.JetStream().PublishMsgAsync(&nats.Msg{Subject: "tbc.none", Data: []byte("lost")}, jetstream.WithMsgID("lost-1"))
	if err != nil {
		t.Fatal(err)
	}
	pub.mu.Lock()
	pub.futures = append(pub.futures, future{f: f, km: keptMsg{msg: f.Msg(), id: "lost-1"}})
	pub.mu.Unlock()
	const k = 40
	ctx := context.Background()
	if err := pub.Consume(ctx, spanBatch(0, k, 10)); err != nil {
		t.Fatal(err)
	}
	// Publish the pending messages (one per partition) as Flush would,
	// without waiting for their acknowledgements.
	if err := pub.lock(ctx); err != nil {
		t.Fatal(err)
	}
	for pt := range pub.pending {
		pub.publishPending(ctx, pt)
	}
	pub.unlock()
	pub.mu.Lock()
	published := len(pub.futures) - 1
	pub.mu.Unlock()
	if published < 2 {
		t.Fatalf("%d messages published, want several", published)
	}
	// Every one of them stored (and so acknowledged) before the flush.
	waitFor(t, "the messages stored", func() bool { return streamInfo(t, n).State.Msgs == uint64(published) })

	err = pub.Flush()
	if err == nil || !strings.Contains(err.Error(), "cluster: 1 messages not stored") {
		t.Fatalf("flush: %v, want exactly the 1 message without a stream counted failed (of %d)", err, published+1)
	}
	if c := n.met.publishErrorCount(); c != 1 {
		t.Errorf("publish errors %d, want 1", c)
	}
}

// TestStreamFull: a stream at its stream_max_bytes refuses new messages
// (DiscardNew) at once — Flush fails with ErrStreamFull without retrying
// until its timeout — and the status says the stream is full.
func TestStreamFull(t *testing.T) {
	srv := startServer(t)
	const limit = 64 << 10
	n := publisherNode(t, srv, Options{StreamMaxBytes: limit})
	if mb := streamInfo(t, n).Config.MaxBytes; mb != limit {
		t.Fatalf("stream max bytes %d, want %d", mb, limit)
	}
	pub := n.Publisher()
	pub.timeout = time.Hour // a retried refusal would hang the test
	ctx := context.Background()
	var err error
	for i := 0; i < 1000 && err == nil; i++ {
		if err = pub.Consume(ctx, spanBatch(i*8, 8, 500)); err != nil {
			t.Fatal(err)
		}
		err = pub.Flush()
	}
	if !errors.Is(err, ErrStreamFull) {
		t.Fatalf("flush of a full stream: %v, want ErrStreamFull", err)
	}
	if b := streamInfo(t, n).State.Bytes; b > limit {
		t.Errorf("the stream holds %d bytes, beyond its limit %d", b, limit)
	}
	waitFor(t, "the status saying the stream is full", func() bool {
		st := n.Status()
		for _, d := range st.Degraded {
			if strings.HasPrefix(d, "stream full: ") && st.Stream.Full && st.Stream.MaxBytes == limit && st.Stream.FullRefusals > 0 {
				return true
			}
		}
		return false
	})
}

// TestStreamLimitsUpdated: an existing stream takes a changed
// stream_max_bytes and stream_max_age; a limit sized from the servers'
// storage (no stream_max_bytes) is half of it, and a node whose server
// has more storage keeps the smaller limit another node set.
func TestStreamLimitsUpdated(t *testing.T) {
	srv := startServer(t)
	check := func(opt Options, wantBytes int64, wantAge time.Duration) {
		t.Helper()
		// One node at a time: each stops at the end of its subtest.
		t.Run(opt.Node, func(t *testing.T) {
			n := publisherNode(t, srv, opt)
			info := streamInfo(t, n)
			if info.Config.MaxBytes != wantBytes || info.Config.MaxAge != wantAge {
				t.Fatalf("stream max bytes %d, max age %v; want %d, %v", info.Config.MaxBytes, info.Config.MaxAge, wantBytes, wantAge)
			}
		})
	}
	check(Options{Node: "a", StreamMaxBytes: 1 << 20}, 1<<20, 0)
	check(Options{Node: "b", StreamMaxBytes: 2 << 20, StreamMaxAge: time.Hour}, 2<<20, time.Hour)
	check(Options{Node: "c", StorageMax: 1 << 20}, 1<<19, 0)
	check(Options{Node: "d", StorageMax: 8 << 20}, 1<<19, 0)
	check(Options{Node: "e", StreamMaxBytes: 4 << 20}, 4<<20, 0)
}

// streamTraces returns the low trace ids of every span in the stream.
func streamTraces(t *testing.T, n *Node) map[int64]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := n.JetStream().Stream(ctx, StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]int{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		secs, err := decodeAll(m.Data)
		if err != nil {
			t.Fatalf("message %d: %v", seq, err)
		}
		for _, s := range secs {
			for _, r := range s.records {
				out[r.Values[trace.SpanTraceIDLow].Int()]++
			}
		}
	}
	return out
}

// TestFlushKeepsUnstored: what JetStream does not store (here: a full
// stream refuses it) is kept, not dropped — sources without
// acknowledgements (Kieker TCP) cannot send it again. Flush fails (the
// acknowledged sources retry) and Consume waits meanwhile (back-pressure);
// once the stream has room a Flush stores the kept messages, and Consume
// goes on: every span consumed is in the stream before or after the
// purge that made room, none lost.
func TestFlushKeepsUnstored(t *testing.T) {
	srv := startServer(t)
	const limit = 64 << 10
	var logs logtest.Buffer
	n := publisherNode(t, srv, Options{StreamMaxBytes: limit, Logger: logs.Logger()})
	pub := n.Publisher()
	pub.timeout = 30 * time.Second
	ctx := context.Background()
	const k = 8
	var err error
	batches := 0
	for ; batches < 1000 && err == nil; batches++ {
		if err := pub.Consume(ctx, spanBatch(batches*k, k, 500)); err != nil {
			t.Fatal(err)
		}
		err = pub.Flush()
	}
	if !errors.Is(err, ErrStreamFull) {
		t.Fatalf("flush of a full stream: %v, want ErrStreamFull", err)
	}
	pub.mu.Lock()
	kept := len(pub.kept)
	pub.mu.Unlock()
	if kept == 0 {
		t.Fatal("nothing kept after a flush the full stream refused")
	}

	// Consume waits while the kept messages are not stored.
	consumed := make(chan error, 1)
	next := spanBatch(batches*k, k, 500)
	batches++
	go func() { consumed <- pub.Consume(ctx, next) }()
	if err := pub.Flush(); !errors.Is(err, ErrStreamFull) {
		t.Fatalf("flush of the still full stream: %v, want ErrStreamFull", err)
	}
	select {
	case err := <-consumed:
		t.Fatalf("Consume returned (%v) while JetStream had not stored the kept messages", err)
	default:
	}

	// What the stream holds, then room: the kept messages are stored.
	before := streamTraces(t, n)
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := n.JetStream().Stream(pctx, StreamName)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(pctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "a flush storing the kept messages", func() bool { return pub.Flush() == nil })
	select {
	case err := <-consumed:
		if err != nil {
			t.Fatalf("Consume after the kept messages were stored: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Consume still waits after the kept messages were stored")
	}
	if err := pub.Flush(); err != nil {
		t.Fatal(err)
	}
	after := streamTraces(t, n)
	var lost []int
	for i := 1; i <= batches*k; i++ {
		if before[int64(i)]+after[int64(i)] == 0 {
			lost = append(lost, i)
		}
	}
	if len(lost) > 0 {
		t.Errorf("%d of %d spans lost (traces %v)", len(lost), batches*k, lost)
	}
	if len(after) == 0 {
		t.Error("nothing stored after the purge: the kept messages were not published again")
	}

	// The failed flushes (two at least) logged once when they started
	// and once when JetStream stored again, with their number.
	var started, ended int
	for _, l := range logs.Lines(t) {
		switch msg, _ := l["msg"].(string); {
		case strings.HasPrefix(msg, "cluster: JetStream did not store published records"):
			started++
		case msg == "cluster: JetStream stores published records again":
			ended++
			if f, _ := l["failed_flushes"].(float64); f < 2 {
				t.Errorf("end logged with %v failed flushes, want at least 2: %v", f, l)
			}
		}
	}
	if started != 1 || ended != 1 {
		t.Errorf("the failed flushes logged %d times, their end %d times, want once each:\n%s", started, ended, logs.String())
	}
}
