package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/tracebridge/tracebridge/internal/backoff"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

// Defaults.
const (
	DefaultTopic    = "kieker/tools/bridge"
	DefaultClientID = "tracebridge"
	// DefaultInflight is Mosquitto's default max_inflight_messages.
	DefaultInflight = 20
)

// Config configures a Receiver.
type Config struct {
	Name string
	// URL is mqtt://HOST:PORT (default port 1883) or mqtts://HOST:PORT.
	URL      string
	User     string
	Password string
	// Topic to subscribe to (DefaultTopic); ClientID identifies the
	// persistent session (DefaultClientID).
	Topic    string
	ClientID string
	// DeadLetter, if set, is a topic receiving malformed messages.
	DeadLetter string
	// Inflight is the number of unacknowledged QoS 1 messages the broker
	// sends the receiver at most: Mosquitto's max_inflight_messages
	// (default 20). When that many are unacknowledged the receiver hands
	// its batch on at once (broker.Config.Window) instead of waiting for
	// Batch.MaxDelay, since nothing more comes until they are
	// acknowledged. Default 20; negative: off (a broker without a limit).
	Inflight int
	// BackoffMin and BackoffMax bound the delay before reconnecting after
	// a sink refused a batch (default 100 ms doubling to 30 s; reset when
	// a message is acknowledged); BackoffMax also caps paho's reconnect
	// delay after a lost connection.
	BackoffMin, BackoffMax time.Duration
	// Batch: records are handed on in batches (see broker.Config).
	Batch broker.Config
}

// Receiver consumes an MQTT topic.
type Receiver struct {
	cfg    Config
	set    broker.Settings
	log    *slog.Logger
	broker string // tcp://host:port for paho
	state  *broker.State
}

// New validates cfg; Run connects.
func New(cfg Config, set broker.Settings) (*Receiver, error) {
	if set.Logger == nil {
		set.Logger = slog.New(slog.DiscardHandler)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || u.Hostname() == "" {
		return nil, fmt.Errorf("mqtt receiver %s: url must be mqtt://HOST:PORT", cfg.Name)
	}
	r := &Receiver{cfg: cfg, set: set, log: set.Logger}
	scheme, port := "tcp", "1883"
	switch u.Scheme {
	case "mqtt", "tcp":
	case "mqtts", "ssl", "tls":
		scheme, port = "ssl", "8883"
	default:
		return nil, fmt.Errorf("mqtt receiver %s: url scheme %q: want mqtt:// or mqtts://", cfg.Name, u.Scheme)
	}
	if u.Port() != "" {
		port = u.Port()
	}
	if u.User != nil {
		if r.cfg.User == "" {
			r.cfg.User = u.User.Username()
		}
		if p, ok := u.User.Password(); ok && r.cfg.Password == "" {
			r.cfg.Password = p
		}
	}
	r.broker = scheme + "://" + net.JoinHostPort(u.Hostname(), port)
	if r.cfg.Topic == "" {
		r.cfg.Topic = DefaultTopic
	}
	if r.cfg.ClientID == "" {
		r.cfg.ClientID = DefaultClientID
	}
	if r.cfg.BackoffMax <= 0 {
		r.cfg.BackoffMax = backoff.DefaultMax
	}
	if r.cfg.BackoffMin <= 0 {
		r.cfg.BackoffMin = backoff.DefaultMin
	}
	if r.cfg.Inflight == 0 {
		r.cfg.Inflight = DefaultInflight
	}
	shown := "mqtt"
	if scheme == "ssl" {
		shown = "mqtts"
	}
	// The user's scheme, not paho's, in what the bridge prints and logs.
	r.state = &broker.State{Log: r.log, Receiver: cfg.Name, Target: shown + "://" + net.JoinHostPort(u.Hostname(), port) + " " + r.cfg.Topic}
	return r, nil
}

// Target names the broker and topic, without credentials.
func (r *Receiver) Target() string { return r.state.Target }

// Run consumes until ctx is cancelled.
func (r *Receiver) Run(ctx context.Context, out pipeline.Consumer) error {
	bc := r.cfg.Batch
	if bc.Window == 0 && r.cfg.Inflight > 0 {
		bc.Window = r.cfg.Inflight
	}
	bc.Peer = r.state.Target
	b := broker.NewBatcher(bc, r.set, out)
	rn := &run{r: r, ctx: ctx, msgs: make(chan delivery, 1024), redo: make(chan struct{}, 1)}
	c := rn.connect()
	defer func() { c.close() }()
	if r.cfg.DeadLetter != "" {
		b.SetDeadLetter(func(m broker.Message, _ error) error {
			t := c.client.Publish(r.cfg.DeadLetter, 1, false, m.Body)
			if !t.WaitTimeout(5 * time.Second) {
				return errors.New("dead-letter publish timed out")
			}
			return t.Error()
		})
	}
	back := backoff.Exponential{Min: r.cfg.BackoffMin, Max: r.cfg.BackoffMax}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var err error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case d := <-rn.msgs:
			if d.gen != c.gen {
				continue // came through an abandoned connection: it comes again
			}
			m := broker.Message{ID: strconv.Itoa(int(d.m.MessageID())), Body: d.m.Payload(), Ack: rn.ackFunc(d.m), Nack: rn.nackFunc(d.gen)}
			if err = b.Add(ctx, m); err != nil {
				break loop
			}
		case <-rn.redo:
			if rn.refused.Load() != c.gen {
				continue // refused on a connection already abandoned
			}
			// MQTT has no negative acknowledgement: a refused message is
			// delivered again only on a new connection of the session,
			// and until then fills the broker's in-flight window. What
			// is held came through this connection too and comes again.
			b.Discard()
			c.close()
			r.state.Down(errRefused)
			if rn.acked.Swap(false) {
				back.Reset()
			}
			if !backoff.Sleep(ctx, back.Next()) {
				break loop
			}
			c = rn.connect()
		case now := <-tick.C:
			if b.Due(now) {
				if err = b.Flush(ctx); err != nil {
					break loop
				}
			}
		}
	}
	if ferr := b.Flush(context.WithoutCancel(ctx)); err == nil && ferr != nil && !errors.Is(ferr, pipeline.ErrClosed) {
		err = ferr
	}
	b.WaitSettled(broker.SettleWait)
	return err
}

var errRefused = errors.New("a sink refused a batch; reconnecting so the broker delivers it again")

// run is the state of one Run: the current connection's generation, and
// what acknowledgements from the bridge's flush goroutine tell the loop.
type run struct {
	r       *Receiver
	ctx     context.Context
	msgs    chan delivery
	gen     uint64        // generation of the last connection made (Run's goroutine only)
	refused atomic.Uint64 // the newest generation a batch of which was refused
	redo    chan struct{} // signalled after refused is raised
	acked   atomic.Bool   // a message was acknowledged since the last forced reconnect
}

// delivery is a message with the generation of the connection (paho
// client) it came through.
type delivery struct {
	m   paho.Message
	gen uint64
}

// conn is one paho client: a connection of the persistent session, which
// paho re-establishes by itself after a network failure.
type conn struct {
	client paho.Client
	gen    uint64
	drop   chan struct{} // closed when the connection is abandoned
	once   sync.Once
}

// close abandons the connection: messages it still delivers are dropped
// (the broker redelivers them), then it disconnects, keeping the session.
func (c *conn) close() {
	c.once.Do(func() {
		close(c.drop)
		c.client.Disconnect(2000) // at most 2 s for the acknowledgements still queued (a busy machine)
	})
}

// connect starts a new client of the session; paho keeps trying in the
// background until it is connected.
func (rn *run) connect() *conn {
	r := rn.r
	rn.gen++
	c := &conn{gen: rn.gen, drop: make(chan struct{})}
	handler := func(_ paho.Client, m paho.Message) {
		select {
		case rn.msgs <- delivery{m: m, gen: c.gen}:
		case <-c.drop:
		case <-rn.ctx.Done():
		}
	}
	opts := paho.NewClientOptions().
		AddBroker(r.broker).
		SetClientID(r.cfg.ClientID).
		SetCleanSession(false).
		SetAutoAckDisabled(true).
		SetOrderMatters(true).
		SetAutoReconnect(true).
		SetConnectRetry(true).
		SetConnectRetryInterval(time.Second).
		SetMaxReconnectInterval(r.cfg.BackoffMax).
		SetKeepAlive(15 * time.Second).
		// Bounds paho's blocking sends; a Subscribe racing a disconnect of
		// an abandoned client would otherwise hold its goroutine 30 s.
		SetWriteTimeout(2 * time.Second).
		SetConnectionLostHandler(func(_ paho.Client, err error) { r.state.Down(err) }).
		SetOnConnectHandler(func(pc paho.Client) {
			// The session keeps the subscription; subscribing again is
			// harmless and covers a broker that lost its state.
			pc.Subscribe(r.cfg.Topic, 1, handler)
			r.state.Up()
		})
	if r.cfg.User != "" {
		opts.SetUsername(r.cfg.User).SetPassword(r.cfg.Password)
	}
	c.client = paho.NewClient(opts)
	// The session's messages may arrive right after CONNACK, before the
	// OnConnect handler subscribed: route them from the start.
	c.client.AddRoute(r.cfg.Topic, handler)
	tok := c.client.Connect() // with ConnectRetry it keeps trying in the background
	go func() {
		if tok.Wait() && tok.Error() != nil {
			r.state.Down(tok.Error())
		}
	}()
	return c
}

// ackFunc acknowledges m (paho drops the PUBACK if m's connection is gone;
// the broker then delivers m again on the next one).
func (rn *run) ackFunc(m paho.Message) func() error {
	return func() error {
		m.Ack()
		rn.acked.Store(true)
		return nil
	}
}

// nackFunc makes the loop reconnect if gen is still the current connection.
func (rn *run) nackFunc(gen uint64) func() error {
	return func() error {
		for {
			old := rn.refused.Load()
			if old >= gen || rn.refused.CompareAndSwap(old, gen) {
				break
			}
		}
		select {
		case rn.redo <- struct{}{}:
		default:
		}
		return nil
	}
}
