// Package stomp is the bridge's STOMP receiver (KDB's jms-client): it
// subscribes to a destination of a STOMP broker (ActiveMQ, Artemis,
// RabbitMQ with its STOMP plugin) and decodes each message as KDB text (text
// messages, as the Perl probes send) or KDB binary (byte messages).
//
// Messages are consumed with cumulative ("client") acknowledgement and a
// prefetch window; a batch of messages is acknowledged, with one ACK of its
// last message, only once its records are durable in every sink. When a
// sink fails the receiver drops the connection the batch came through, so
// the broker redelivers everything unacknowledged (see
// internal/source/broker). When the broker goes away the receiver
// reconnects with capped exponential back-off and resubscribes; messages it
// had not acknowledged are redelivered by the broker. Messages still held
// for a batch when a connection ends are discarded (they come again), so a
// batch never mixes connections: a cumulative ACK on the new connection
// can never cover messages refused on the old one.
//
// Malformed messages are copied to the dead-letter destination, if one is
// configured, over a second connection (see deadLetters): a destination
// the broker refuses is reported once and turns dead-lettering off instead
// of costing the consuming connection.
//
// Concurrency: Run owns one goroutine; acknowledgements come from the
// bridge's flush goroutine (go-stomp's Conn is safe for that).
package stomp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	gostomp "github.com/go-stomp/stomp/v3"
	"github.com/go-stomp/stomp/v3/frame"

	"github.com/tracebridge/tracebridge/internal/backoff"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

// DefaultDestination is KDB's queue.
const DefaultDestination = "/queue/kieker.tools.bridge"

// Config configures a Receiver.
type Config struct {
	Name string
	// URL is stomp://HOST:PORT or stomp+ssl://HOST:PORT (port default
	// 61613, 61614 with ssl). User and password may also be in the URL.
	URL      string
	User     string
	Password string
	// VHost is the STOMP host header (RabbitMQ: the virtual host,
	// default "/").
	VHost string
	// Destination to subscribe to (DefaultDestination).
	Destination string
	// DeadLetter, if set, is a destination receiving malformed messages
	// (/queue/NAME; a destination the broker refuses turns it off).
	DeadLetter string
	// Prefetch is the number of unacknowledged messages the broker may
	// send ahead (default 5000).
	Prefetch int
	// TLS configures stomp+ssl (nil: system roots, host name checked).
	TLS *tls.Config
	// Backoff bounds reconnect waits (default 100 ms doubling to 30 s).
	BackoffMin, BackoffMax time.Duration
	// Batch: records are handed on in batches (see broker.Config).
	Batch broker.Config
}

// Receiver consumes a STOMP destination.
type Receiver struct {
	cfg    Config
	log    *slog.Logger
	set    broker.Settings
	addr   string
	useTLS bool
	state  *broker.State
}

// New validates cfg. It does not connect: Run does, and keeps trying.
func New(cfg Config, set broker.Settings) (*Receiver, error) {
	u, err := url.Parse(cfg.URL)
	if err != nil {
		// "127.0.0.1:61613" (no scheme) fails here, with a reason that
		// does not say what is wrong.
		return nil, fmt.Errorf("stomp receiver %s: url: want stomp://HOST:PORT or stomp+ssl://HOST:PORT (%v)", cfg.Name, redactErr(err, cfg.URL))
	}
	r := &Receiver{cfg: cfg, set: set}
	port := "61613"
	switch u.Scheme {
	case "stomp", "tcp":
	case "stomp+ssl", "stomp+tls", "ssl":
		r.useTLS = true
		port = "61614"
	default:
		return nil, fmt.Errorf("stomp receiver %s: url scheme %q: want stomp://HOST:PORT or stomp+ssl://HOST:PORT", cfg.Name, u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("stomp receiver %s: url %s has no host", cfg.Name, u.Redacted())
	}
	if u.Port() != "" {
		port = u.Port()
	}
	r.addr = net.JoinHostPort(u.Hostname(), port)
	if u.User != nil {
		if r.cfg.User == "" {
			r.cfg.User = u.User.Username()
		}
		if p, ok := u.User.Password(); ok && r.cfg.Password == "" {
			r.cfg.Password = p
		}
	}
	if r.cfg.Destination == "" {
		r.cfg.Destination = DefaultDestination
	}
	if r.cfg.VHost == "" {
		r.cfg.VHost = "/"
	}
	if r.cfg.Prefetch <= 0 {
		r.cfg.Prefetch = 5000
	}
	if set.Logger == nil {
		set.Logger = slog.New(slog.DiscardHandler)
	}
	r.log = set.Logger
	r.set = set
	scheme := "stomp"
	if r.useTLS {
		scheme = "stomp+ssl"
	}
	r.state = &broker.State{Log: r.log, Receiver: cfg.Name, Target: scheme + "://" + r.addr + r.cfg.Destination}
	return r, nil
}

// Target names the broker and destination, without credentials.
func (r *Receiver) Target() string { return r.state.Target }

// Run consumes until ctx is cancelled, reconnecting whenever the broker goes
// away. It returns nil after ctx is done.
func (r *Receiver) Run(ctx context.Context, out pipeline.Consumer) error {
	bc := r.cfg.Batch
	bc.Cumulative = true
	bc.Peer = r.state.Target
	b := broker.NewBatcher(bc, r.set, out)
	if r.cfg.DeadLetter != "" {
		dl := &deadLetters{r: r, off: func() { b.SetDeadLetter(nil) }}
		defer dl.close()
		b.SetDeadLetter(func(m broker.Message, reason error) error { return dl.send(ctx, m, reason) })
	}
	back := backoff.Exponential{Min: r.cfg.BackoffMin, Max: r.cfg.BackoffMax}
	for ctx.Err() == nil {
		err := r.session(ctx, b, &back)
		if ctx.Err() != nil {
			break
		}
		if errors.Is(err, pipeline.ErrClosed) {
			return err
		}
		r.state.Down(err)
		if !backoff.Sleep(ctx, back.Next()) {
			break
		}
	}
	// Hand on what was received; its acknowledgements follow the flush.
	if err := b.Flush(context.WithoutCancel(ctx)); err != nil && !errors.Is(err, pipeline.ErrClosed) {
		return err
	}
	return nil
}

func (r *Receiver) dial(ctx context.Context, extra ...func(*gostomp.Conn) error) (*gostomp.Conn, net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	nc, err := d.DialContext(ctx, "tcp", r.addr)
	if err != nil {
		return nil, nil, err
	}
	if r.useTLS {
		host, _, _ := net.SplitHostPort(r.addr)
		tc := &tls.Config{ServerName: host}
		if r.cfg.TLS != nil {
			tc = r.cfg.TLS.Clone()
			if tc.ServerName == "" {
				tc.ServerName = host
			}
		}
		tconn := tls.Client(nc, tc)
		if err := tconn.HandshakeContext(ctx); err != nil {
			nc.Close()
			return nil, nil, err
		}
		nc = tconn
	}
	opts := []func(*gostomp.Conn) error{
		gostomp.ConnOpt.Host(r.cfg.VHost),
		gostomp.ConnOpt.HeartBeat(10*time.Second, 10*time.Second),
		gostomp.ConnOpt.ReadChannelCapacity(1024),
		gostomp.ConnOpt.Logger(quietLogger{}),
	}
	opts = append(opts, extra...)
	if r.cfg.User != "" {
		opts = append(opts, gostomp.ConnOpt.Login(r.cfg.User, r.cfg.Password))
	}
	c, err := gostomp.ConnectWithContext(ctx, nc, opts...)
	if err != nil {
		nc.Close()
		return nil, nil, brokerReason(err, r.cfg.User, r.cfg.Password)
	}
	return c, nc, nil
}

// brokerReason adds to a refused CONNECT the reason the broker gave in its
// ERROR frame's body (RabbitMQ: "Bad CONNECT" with the body "Access
// refused for user 'guest'"), one line, at most 200 bytes, with the
// credentials blanked out: they never reach a log.
func brokerReason(err error, secrets ...string) error {
	var se gostomp.Error
	if !errors.As(err, &se) || se.Frame == nil {
		return err
	}
	body := strings.Join(strings.Fields(string(se.Frame.Body)), " ")
	if body == "" {
		return err
	}
	for _, c := range secrets {
		if c != "" {
			body = strings.ReplaceAll(body, c, "***")
		}
	}
	if len(body) > 200 {
		body = strings.ToValidUTF8(body[:200], "") + "…"
	}
	return fmt.Errorf("%w: %s", err, body)
}

// session connects, subscribes and consumes until the connection fails or
// ctx ends.
func (r *Receiver) session(ctx context.Context, b *broker.Batcher, back *backoff.Exponential) error {
	conn, nc, err := r.dial(ctx)
	if err != nil {
		return err
	}
	defer func() {
		if ctx.Err() != nil {
			// Stopping: hand on what was received and keep the
			// connection until its acknowledgements are sent.
			b.Flush(context.WithoutCancel(ctx))
			b.WaitSettled(broker.SettleWait)
		} else {
			// The connection is gone (or was dropped after a refusal):
			// what it delivered and is still held is redelivered on the
			// next one, and must not share a batch with it.
			b.Discard()
		}
		conn.MustDisconnect()
	}()
	pf := strconv.Itoa(r.cfg.Prefetch)
	// Ack mode "client": an acknowledgement covers every earlier message,
	// so a batch costs one ACK frame (see broker.Config.Cumulative).
	sub, err := conn.Subscribe(r.cfg.Destination, gostomp.AckClient,
		gostomp.SubscribeOpt.Header("prefetch-count", pf),        // RabbitMQ
		gostomp.SubscribeOpt.Header("activemq.prefetchSize", pf), // ActiveMQ
	)
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", r.cfg.Destination, err)
	}
	r.state.Up()
	back.Reset()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case msg, ok := <-sub.C:
			if !ok {
				return errors.New("subscription closed")
			}
			if msg.Err != nil {
				return msg.Err
			}
			m := msg
			bm := broker.Message{
				ID:          msg.Header.Get(frame.MessageId),
				Body:        msg.Body,
				ContentType: msg.ContentType,
				Ack:         func() error { return m.Conn.Ack(m) },
				// A sink failed: drop the connection, so the broker
				// redelivers everything unacknowledged; an ACK of a later
				// batch would otherwise cover this one.
				Nack: func() error { return nc.Close() },
			}
			if err := b.Add(ctx, bm); err != nil {
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

// deadLetters copies malformed messages to the dead-letter destination
// over a connection of its own, opened on the first malformed message: a
// destination the broker refuses (RabbitMQ answers one it does not know
// with an ERROR frame and closes the connection) must not take the
// consuming connection with it, which would have the broker redeliver the
// same messages forever. Every copy is sent with a receipt, so a malformed
// message is acknowledged only after its copy is stored (a round trip per
// malformed message, none per good one).
//
// A refusal is logged once and turns dead-lettering off for the rest of
// the run; a lost connection is only reported with the message and
// reopened for the next one.
//
// Concurrency: used by the receiving goroutine only (the Batcher calls the
// dead-letter function from Add).
type deadLetters struct {
	r    *Receiver
	off  func() // tells the Batcher to stop dead-lettering
	conn *gostomp.Conn
}

// deadLetterReceiptTimeout bounds the wait for the broker's receipt of a
// dead letter.
const deadLetterReceiptTimeout = 10 * time.Second

// errDeadLetterRefused is what the message that met the refusal reports.
var errDeadLetterRefused = errors.New("refused by the broker; dead-lettering is now off")

func (d *deadLetters) send(ctx context.Context, m broker.Message, reason error) error {
	if d.conn == nil {
		c, _, err := d.r.dial(ctx, gostomp.ConnOpt.RcvReceiptTimeout(deadLetterReceiptTimeout))
		if err != nil {
			return fmt.Errorf("dead-letter connection: %w", err)
		}
		d.conn = c
	}
	err := d.conn.Send(d.r.cfg.DeadLetter, m.ContentType, m.Body,
		gostomp.SendOpt.Header("x-tracebridge-error", truncate(reason.Error(), 512)),
		gostomp.SendOpt.Header("x-tracebridge-message-id", m.ID),
		gostomp.SendOpt.Receipt)
	if err == nil {
		return nil
	}
	d.close()
	why, refused := brokerRefusal(err)
	if !refused {
		return fmt.Errorf("dead letter to %s: %w", d.r.cfg.DeadLetter, err)
	}
	d.off()
	d.r.log.Error("dead-letter destination refused by the broker; dead-lettering is off: malformed messages are logged, counted and acknowledged without a copy",
		"receiver", d.r.cfg.Name, "dead_letter", d.r.cfg.DeadLetter, "err", why,
		"hint", "a dead-letter destination is a broker destination such as /queue/kieker.dead-letters (RabbitMQ also /topic/…, /exchange/…), not a file path")
	return errDeadLetterRefused
}

func (d *deadLetters) close() {
	if d.conn != nil {
		d.conn.MustDisconnect()
		d.conn = nil
	}
}

// brokerRefusal reports whether err is the broker's ERROR frame answering
// a SEND, and its reason (the message header and the first line of the
// body). go-stomp also reports its own failures (connection closed, write
// errors) as ERROR frames, but those carry only a message header; a
// broker's has a body or more headers (content-type, receipt-id).
func brokerRefusal(err error) (string, bool) {
	var se gostomp.Error
	if !errors.As(err, &se) || se.Frame == nil || se.Frame.Command != frame.ERROR {
		return "", false
	}
	if len(se.Frame.Body) == 0 && se.Frame.Header.Len() <= 1 {
		return "", false
	}
	why := se.Message
	if line, _, _ := strings.Cut(strings.TrimSpace(string(se.Frame.Body)), "\n"); line != "" {
		why += ": " + truncate(line, 200)
	}
	return why, true
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// redactErr keeps a URL's password out of an error message.
func redactErr(err error, raw string) error {
	if u, perr := url.Parse(raw); perr == nil && u.User != nil {
		return errors.New(u.Redacted())
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// quietLogger silences go-stomp's own logging: the receiver logs state
// changes itself, once.
type quietLogger struct{}

func (quietLogger) Debugf(string, ...interface{})   {}
func (quietLogger) Infof(string, ...interface{})    {}
func (quietLogger) Warningf(string, ...interface{}) {}
func (quietLogger) Errorf(string, ...interface{})   {}
func (quietLogger) Debug(string)                    {}
func (quietLogger) Info(string)                     {}
func (quietLogger) Warning(string)                  {}
func (quietLogger) Error(string)                    {}
