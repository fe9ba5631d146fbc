// Package mqtt is the bridge's MQTT receiver: it subscribes to a topic of
// an MQTT broker (Mosquitto, the embedded broker's MQTT listener, …) with
// QoS 1 and a persistent session, decodes each message as KDB text or
// binary, and acknowledges (PUBACK) a message only once its records are
// durable in every sink (see internal/source/broker).
//
// Delivery: with a persistent session (clean session off, a fixed client
// id) the broker keeps QoS 1 messages published while the bridge is away and
// delivers them when it reconnects; messages published before the bridge's
// first subscription are not kept (MQTT semantics). MQTT has no negative
// acknowledgement: a message whose records a sink refused stays
// unacknowledged and is delivered again after the next reconnect.
// Mosquitto bounds what it queues for an offline client
// (max_queued_messages, 1000 by default).
//
// Reconnection is paho's, with a capped back-off; state changes are logged
// once each.
package mqtt

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

// Defaults.
const (
	DefaultTopic    = "kieker/tools/bridge"
	DefaultClientID = "tracebridge"
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
	// BackoffMax caps the reconnect delay (default 30 s).
	BackoffMax time.Duration
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
	r.broker = scheme + "://" + u.Hostname() + ":" + port
	if r.cfg.Topic == "" {
		r.cfg.Topic = DefaultTopic
	}
	if r.cfg.ClientID == "" {
		r.cfg.ClientID = DefaultClientID
	}
	if r.cfg.BackoffMax <= 0 {
		r.cfg.BackoffMax = 30 * time.Second
	}
	r.state = &broker.State{Log: r.log, Receiver: cfg.Name, Target: r.broker + " " + r.cfg.Topic}
	return r, nil
}

// Target names the broker and topic, without credentials.
func (r *Receiver) Target() string { return r.state.Target }

// Run consumes until ctx is cancelled.
func (r *Receiver) Run(ctx context.Context, out pipeline.Consumer) error {
	msgs := make(chan paho.Message, 1024)
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
		SetConnectionLostHandler(func(_ paho.Client, err error) { r.state.Down(err) }).
		SetOnConnectHandler(func(c paho.Client) {
			// The session keeps the subscription; subscribing again is
			// harmless and covers a broker that lost its state.
			c.Subscribe(r.cfg.Topic, 1, func(_ paho.Client, m paho.Message) {
				select {
				case msgs <- m:
				case <-ctx.Done():
				}
			})
			r.state.Up()
		})
	if r.cfg.User != "" {
		opts.SetUsername(r.cfg.User).SetPassword(r.cfg.Password)
	}
	client := paho.NewClient(opts)
	tok := client.Connect() // with ConnectRetry it keeps trying in the background
	go func() {
		if tok.Wait() && tok.Error() != nil {
			r.state.Down(tok.Error())
		}
	}()
	defer client.Disconnect(250)

	b := broker.NewBatcher(r.cfg.Batch, r.set, out)
	if r.cfg.DeadLetter != "" {
		b.SetDeadLetter(func(m broker.Message, _ error) error {
			t := client.Publish(r.cfg.DeadLetter, 1, false, m.Body)
			if !t.WaitTimeout(5 * time.Second) {
				return errors.New("dead-letter publish timed out")
			}
			return t.Error()
		})
	}
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	var err error
loop:
	for {
		select {
		case <-ctx.Done():
			break loop
		case m := <-msgs:
			if err = b.Add(ctx, broker.Message{ID: strconv.Itoa(int(m.MessageID())), Body: m.Payload(), Ack: ackFunc(m)}); err != nil {
				break loop
			}
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
	b.WaitSettled(5 * time.Second)
	return err
}

func ackFunc(m paho.Message) func() error {
	return func() error { m.Ack(); return nil }
}
