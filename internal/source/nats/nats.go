// Package nats is the bridge's NATS receiver and its embedded broker.
//
// A Receiver consumes a subject through JetStream (a stream capturing the
// subject, created if missing, and a durable pull consumer with explicit
// acknowledgement), so records published while the bridge is stopped are
// delivered when it comes back, and a message is acknowledged only once its
// records are durable in every sink (see internal/source/broker). On a NATS
// server without JetStream it falls back to a plain subscription, which is
// at-most-once, and says so in the log.
//
// The embedded broker (KDB's jms-embedded, zero setup) is a NATS server
// with JetStream, file storage under the bridge's data directory, listening
// on loopback by default, optionally with an MQTT listener whose topic
// kieker/tools/bridge is the NATS subject kieker.tools.bridge. The receiver
// consumes from it in-process.
//
// Reconnection is nats.go's, with a capped exponential delay; state changes
// are logged once each.
//
// Concurrency: Run owns one goroutine; acknowledgements come from the
// bridge's flush goroutine (nats.go messages are safe for that).
package nats

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/internal/backoff"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

// Defaults.
const (
	DefaultSubject = "kieker.tools.bridge"
	DefaultStream  = "KIEKER"
	DefaultDurable = "tracebridge"
)

// Config configures a Receiver.
type Config struct {
	Name string
	// URL is nats://HOST:PORT (credentials may be in the URL). Ignored with
	// InProcess.
	URL      string
	User     string
	Password string
	// InProcess connects to an embedded server without a socket.
	InProcess natsgo.InProcessConnProvider
	// Subject to consume (DefaultSubject).
	Subject string
	// Stream and Durable name the JetStream stream and consumer. A missing
	// stream is created capturing Subject (file storage) unless NoCreate.
	Stream   string
	Durable  string
	NoCreate bool
	// MaxAckPending bounds the messages delivered but not yet acknowledged
	// (default 20000); AckWait is how long the server waits for an
	// acknowledgement before redelivering (default 60 s).
	MaxAckPending int
	AckWait       time.Duration
	// DeadLetter, if set, is a subject receiving malformed messages.
	DeadLetter string
	// BackoffMin/Max bound the reconnect delay (100 ms doubling to 30 s).
	BackoffMin, BackoffMax time.Duration
	// Batch: records are handed on in batches (see broker.Config).
	Batch broker.Config
}

// Receiver consumes a NATS subject.
type Receiver struct {
	cfg   Config
	set   broker.Settings
	log   *slog.Logger
	state *broker.State
	url   string
}

// New validates cfg; Run connects.
func New(cfg Config, set broker.Settings) (*Receiver, error) {
	if set.Logger == nil {
		set.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Receiver{cfg: cfg, set: set, log: set.Logger}
	target := "embedded"
	if cfg.InProcess == nil {
		u, err := url.Parse(cfg.URL)
		if err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Hostname() == "" {
			return nil, fmt.Errorf("nats receiver %s: url must be nats://HOST:PORT", cfg.Name)
		}
		if u.User != nil {
			if r.cfg.User == "" {
				r.cfg.User = u.User.Username()
			}
			if p, ok := u.User.Password(); ok && r.cfg.Password == "" {
				r.cfg.Password = p
			}
			u.User = nil
		}
		if u.Port() == "" {
			u.Host += ":4222"
		}
		r.url = u.String()
		target = r.url
	}
	if r.cfg.Subject == "" {
		r.cfg.Subject = DefaultSubject
	}
	if r.cfg.Stream == "" {
		r.cfg.Stream = DefaultStream
	}
	if r.cfg.Durable == "" {
		r.cfg.Durable = DefaultDurable
	}
	if r.cfg.MaxAckPending <= 0 {
		r.cfg.MaxAckPending = 20000
	}
	if r.cfg.AckWait <= 0 {
		r.cfg.AckWait = 60 * time.Second
	}
	r.state = &broker.State{Log: r.log, Receiver: cfg.Name, Target: target + " " + r.cfg.Subject}
	return r, nil
}

// Target names the server and subject, without credentials.
func (r *Receiver) Target() string { return r.state.Target }

func (r *Receiver) connect() (*natsgo.Conn, error) {
	back := backoff.Exponential{Min: r.cfg.BackoffMin, Max: r.cfg.BackoffMax}
	opts := []natsgo.Option{
		natsgo.Name("tracebridge " + r.cfg.Name),
		natsgo.MaxReconnects(-1),
		natsgo.RetryOnFailedConnect(true),
		natsgo.CustomReconnectDelay(func(int) time.Duration { return back.Next() }),
		natsgo.ConnectHandler(func(*natsgo.Conn) { back.Reset(); r.state.Up() }),
		natsgo.ReconnectHandler(func(*natsgo.Conn) { back.Reset(); r.state.Up() }),
		natsgo.DisconnectErrHandler(func(c *natsgo.Conn, err error) {
			if err == nil && c.IsClosed() {
				return // Run closed it: shutdown, not an outage
			}
			if err == nil {
				err = errors.New("disconnected")
			}
			r.state.Down(err)
		}),
	}
	nc, err := r.dial(opts...)
	if err != nil {
		return nil, err
	}
	if nc.IsConnected() {
		r.state.Up()
	}
	return nc, nil
}

// dial connects with opts and the configured credentials and in-process
// server.
func (r *Receiver) dial(opts ...natsgo.Option) (*natsgo.Conn, error) {
	if r.cfg.User != "" {
		opts = append(opts, natsgo.UserInfo(r.cfg.User, r.cfg.Password))
	}
	if r.cfg.InProcess != nil {
		opts = append(opts, natsgo.InProcessServer(r.cfg.InProcess))
	}
	nc, err := natsgo.Connect(r.url, opts...)
	if err != nil {
		return nil, fmt.Errorf("nats receiver %s: %w", r.cfg.Name, err)
	}
	return nc, nil
}

// Prepare creates the stream and the durable consumer now, so that what is
// published from here on is kept even before Run starts (the embedded
// broker calls it before the bridge reports ready).
func (r *Receiver) Prepare(ctx context.Context) error {
	nc, err := r.dial(natsgo.Name("tracebridge " + r.cfg.Name + " setup"))
	if err != nil {
		return err
	}
	defer nc.Close()
	if _, err := r.setup(ctx, nc); err != nil {
		return fmt.Errorf("nats receiver %s: %w", r.cfg.Name, err)
	}
	return nil
}

// Run consumes until ctx is cancelled, riding out broker outages.
func (r *Receiver) Run(ctx context.Context, out pipeline.Consumer) error {
	nc, err := r.connect()
	if err != nil {
		return err
	}
	defer nc.Close()
	bc := r.cfg.Batch
	bc.Peer = r.state.Target
	b := broker.NewBatcher(bc, r.set, out)
	if r.cfg.DeadLetter != "" {
		b.SetDeadLetter(func(m broker.Message, reason error) error {
			msg := natsgo.NewMsg(r.cfg.DeadLetter)
			msg.Data = m.Body
			msg.Header.Set("X-Tracebridge-Error", reason.Error())
			msg.Header.Set("X-Tracebridge-Message-Id", m.ID)
			return nc.PublishMsg(msg)
		})
	}
	err = r.consume(ctx, nc, b)
	if ferr := b.Flush(context.WithoutCancel(ctx)); err == nil && ferr != nil && !errors.Is(ferr, pipeline.ErrClosed) {
		err = ferr
	}
	// The last batches are acknowledged after the bridge's next flush;
	// keep the connection until then (or redelivery covers them).
	b.WaitSettled(broker.SettleWait)
	nc.Flush()
	return err
}

// consume sets up JetStream (retrying while the server is unreachable) and
// fetches until ctx ends.
func (r *Receiver) consume(ctx context.Context, nc *natsgo.Conn, b *broker.Batcher) error {
	back := backoff.Exponential{Min: r.cfg.BackoffMin, Max: r.cfg.BackoffMax}
	var cons jetstream.Consumer
	for {
		var err error
		cons, err = r.setup(ctx, nc)
		if err == nil {
			break
		}
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) {
			r.log.Warn("JetStream not enabled on the server: consuming without acknowledgements (at-most-once)", "receiver", r.cfg.Name, "broker", r.state.Target)
			return r.consumeCore(ctx, nc, b)
		}
		if ctx.Err() != nil {
			return nil
		}
		r.state.Down(err)
		if !backoff.Sleep(ctx, back.Next()) {
			return nil
		}
	}
	back.Reset()
	for ctx.Err() == nil {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(50*time.Millisecond))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !backoff.Sleep(ctx, back.Next()) {
				return nil
			}
			continue
		}
		for msg := range batch.Messages() {
			if err := b.Add(ctx, message(msg)); err != nil {
				return err
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, natsgo.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			if ctx.Err() != nil {
				return nil
			}
			backoff.Sleep(ctx, back.Next())
		} else {
			back.Reset()
		}
		if b.Due(time.Now()) {
			if err := b.Flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

func (r *Receiver) setup(ctx context.Context, nc *natsgo.Conn) (jetstream.Consumer, error) {
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, err
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if !r.cfg.NoCreate {
		if _, err := js.Stream(sctx, r.cfg.Stream); errors.Is(err, jetstream.ErrStreamNotFound) {
			_, err = js.CreateStream(sctx, jetstream.StreamConfig{
				Name:     r.cfg.Stream,
				Subjects: []string{r.cfg.Subject},
				Storage:  jetstream.FileStorage,
			})
			if err != nil && !errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
				return nil, fmt.Errorf("create stream %s: %w", r.cfg.Stream, err)
			}
		} else if err != nil {
			return nil, err
		}
	}
	return js.CreateOrUpdateConsumer(sctx, r.cfg.Stream, jetstream.ConsumerConfig{
		Durable:       r.cfg.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       r.cfg.AckWait,
		MaxAckPending: r.cfg.MaxAckPending,
		FilterSubject: r.cfg.Subject,
	})
}

func message(msg jetstream.Msg) broker.Message {
	id := ""
	if md, err := msg.Metadata(); err == nil {
		id = strconv.FormatUint(md.Sequence.Stream, 10)
	}
	return broker.Message{
		ID:          id,
		Body:        msg.Data(),
		ContentType: msg.Headers().Get("Content-Type"),
		Ack:         msg.Ack,
		Nack:        msg.Nak,
	}
}

// consumeCore subscribes without JetStream: nothing is acknowledged or
// redelivered.
func (r *Receiver) consumeCore(ctx context.Context, nc *natsgo.Conn, b *broker.Batcher) error {
	ch := make(chan *natsgo.Msg, 4096)
	sub, err := nc.ChanSubscribe(r.cfg.Subject, ch)
	if err != nil {
		return err
	}
	defer sub.Unsubscribe()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var seq uint64
	for {
		select {
		case <-ctx.Done():
			return nil
		case msg := <-ch:
			seq++
			if err := b.Add(ctx, broker.Message{ID: strconv.FormatUint(seq, 10), Body: msg.Data, ContentType: msg.Header.Get("Content-Type")}); err != nil {
				return err
			}
		case now := <-tick.C:
			if b.Due(now) {
				if err := b.Flush(ctx); err != nil {
					return err
				}
			}
		}
	}
}
