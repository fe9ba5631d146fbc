package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	gostomp "github.com/go-stomp/stomp/v3"
	"github.com/go-stomp/stomp/v3/frame"
	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tracebridge/tracebridge/stream"
)

// natsSubject is the subject the embedded broker's stream captures.
const natsSubject = "kieker.tools.bridge"

// jsMaxPending bounds the JetStream publishes awaiting their ack per
// publisher (the window of the ack'ed variant).
const jsMaxPending = 4096

// sender sends one load over a connection opened beforehand, so that the
// clock does not include connecting. send returns once the peer has what
// was sent, as far as the protocol can tell: the last STOMP SEND carries
// a receipt, NATS is flushed (a PING/PONG round trip), JetStream publishes
// are all acknowledged; a TCP connection is closed after the last write.
type sender interface {
	send(l *load) error
	close()
}

// dialSenders opens one sender per load for path; dest is the STOMP
// destination, addr the NATS or TCP address, dataDir the data directory
// of the bridge whose embedded NATS server addr is ("" for a server
// without a login).
func dialSenders(path string, o *options, addr, dest, dataDir string, n int) ([]sender, error) {
	ss := make([]sender, 0, n)
	for i := 0; i < n; i++ {
		s, err := dialSender(path, o, addr, dest, dataDir)
		if err != nil {
			for _, s := range ss {
				s.close()
			}
			return nil, fmt.Errorf("publisher %d: %w", i, err)
		}
		ss = append(ss, s)
	}
	return ss, nil
}

func dialSender(path string, o *options, addr, dest, dataDir string) (sender, error) {
	switch path {
	case pathSTOMP:
		return dialSTOMP(o, dest)
	case pathEmbedded, pathEmbeddedJS:
		opts := []natsgo.Option{natsgo.Name("tracebridge bench")}
		if dataDir != "" { // the bridge's embedded server: its credential
			user, password, err := stream.ReadCredentials(stream.CredentialsFile(dataDir))
			if err != nil {
				return nil, err
			}
			opts = append(opts, natsgo.UserInfo(user, password))
		}
		nc, err := natsgo.Connect("nats://"+addr, opts...)
		if err != nil {
			return nil, err
		}
		if path == pathEmbedded {
			return &natsSender{nc: nc}, nil
		}
		s := &jsSender{nc: nc}
		s.js, err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(jsMaxPending),
			jetstream.WithPublishAsyncErrHandler(func(_ jetstream.JetStream, _ *natsgo.Msg, err error) {
				s.failed.Add(1)
				s.mu.Lock()
				s.first = errors.Join(s.first, err)
				s.mu.Unlock()
			}))
		if err != nil {
			nc.Close()
			return nil, err
		}
		return s, nil
	}
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	return &tcpSender{c: c}, nil
}

// sendAll runs every sender on its load in its own goroutine and delivers,
// once all are done, the time the last one finished and the first error.
func sendAll(ss []sender, loads []*load) <-chan sendResult {
	errs := make([]error, len(ss))
	var wg sync.WaitGroup
	for i, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.send(loads[i]); err != nil {
				errs[i] = fmt.Errorf("publisher %d: %w", i, err)
			}
		}()
	}
	done := make(chan sendResult, 1)
	go func() {
		wg.Wait()
		done <- sendResult{end: time.Now(), err: errors.Join(errs...)}
	}()
	return done
}

type sendResult struct {
	end time.Time
	err error
}

// tcpSender writes the load's KDB binary stream and closes the connection.
type tcpSender struct{ c net.Conn }

func (s *tcpSender) send(l *load) error {
	if _, err := s.c.Write(l.bin); err != nil {
		return err
	}
	return s.c.Close()
}

func (s *tcpSender) close() { s.c.Close() }

// stompSender sends KDB text messages (content-type text/plain), the last
// one with a receipt.
type stompSender struct {
	c    *gostomp.Conn
	dest string
}

func dialSTOMP(o *options, dest string) (*stompSender, error) {
	u, err := url.Parse(o.stompURL)
	if err != nil || u.Scheme != "stomp" || u.Host == "" {
		return nil, fmt.Errorf("-stomp %q: want stomp://HOST:PORT", o.stompURL)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "61613")
	}
	nc, err := net.DialTimeout("tcp", host, 5*time.Second)
	if err != nil {
		return nil, err
	}
	c, err := gostomp.Connect(nc,
		gostomp.ConnOpt.Host(o.vhost),
		gostomp.ConnOpt.Login(o.stompUser, o.stompPassword),
		gostomp.ConnOpt.HeartBeat(0, 0),
		// RabbitMQ may hold the last receipt back long after the last
		// write while it works through the frames buffered before it.
		gostomp.ConnOpt.RcvReceiptTimeout(2*time.Minute),
		gostomp.ConnOpt.Logger(quietLogger{}))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("stomp %s: %w", host, err)
	}
	return &stompSender{c: c, dest: dest}, nil
}

func (s *stompSender) send(l *load) error {
	n := l.messages()
	for k := 0; k < n; k++ {
		var opts []func(*frame.Frame) error
		if k == n-1 {
			opts = append(opts, gostomp.SendOpt.Receipt)
		}
		if err := s.c.Send(s.dest, "text/plain", l.message(k), opts...); err != nil {
			return fmt.Errorf("message %d: %w", k, err)
		}
	}
	return s.c.Disconnect()
}

func (s *stompSender) close() { s.c.MustDisconnect() }

// natsSender publishes with core NATS (no acknowledgement) and flushes.
type natsSender struct{ nc *natsgo.Conn }

func (s *natsSender) send(l *load) error {
	for k := 0; k < l.messages(); k++ {
		if err := s.nc.Publish(natsSubject, l.message(k)); err != nil {
			return fmt.Errorf("message %d: %w", k, err)
		}
	}
	if err := s.nc.FlushTimeout(time.Minute); err != nil {
		return err
	}
	s.nc.Close()
	return nil
}

func (s *natsSender) close() { s.nc.Close() }

// jsSender publishes through JetStream, asynchronously with a window of
// jsMaxPending, and waits for every acknowledgement.
type jsSender struct {
	nc     *natsgo.Conn
	js     jetstream.JetStream
	failed atomic.Int64
	mu     sync.Mutex
	first  error
}

func (s *jsSender) send(l *load) error {
	for k := 0; k < l.messages(); k++ {
		if _, err := s.js.PublishAsync(natsSubject, l.message(k)); err != nil {
			return fmt.Errorf("message %d: %w", k, err)
		}
	}
	select {
	case <-s.js.PublishAsyncComplete():
	case <-time.After(time.Minute):
		return fmt.Errorf("%d acknowledgements still pending after a minute", s.js.PublishAsyncPending())
	}
	s.nc.Close()
	if n := s.failed.Load(); n > 0 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return fmt.Errorf("%d publishes failed: %w", n, s.first)
	}
	return nil
}

func (s *jsSender) close() { s.nc.Close() }

// quietLogger silences go-stomp's own logging.
type quietLogger struct{}

func (quietLogger) Debugf(string, ...any)   {}
func (quietLogger) Debug(string)            {}
func (quietLogger) Infof(string, ...any)    {}
func (quietLogger) Info(string)             {}
func (quietLogger) Warningf(string, ...any) {}
func (quietLogger) Warning(string)          {}
func (quietLogger) Errorf(string, ...any)   {}
func (quietLogger) Error(string)            {}

// streamMessages asks how many messages the embedded broker's stream
// holds.
func streamMessages(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	st, err := js.Stream(ctx, "KIEKER")
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx)
	if err != nil {
		return 0, err
	}
	return info.State.Msgs, nil
}
