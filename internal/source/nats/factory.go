package nats

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/tracebridge/tracebridge/internal/listenpolicy"
	"github.com/tracebridge/tracebridge/internal/natsd"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

// The receiver types this package builds.
const (
	TypeClient   = "nats-client"     // a NATS server (JetStream when available)
	TypeEmbedded = "broker-embedded" // the embedded NATS/JetStream (+MQTT) broker (alias jms-embedded)
)

// ClientConfig is the YAML configuration of a nats-client receiver.
type ClientConfig struct {
	// URL is nats://HOST:PORT.
	URL string `yaml:"url"`
	// Stream and Durable name the JetStream stream the receiver consumes
	// (KIEKER) and its durable consumer (tracebridge).
	Stream         string `yaml:"stream"`
	Durable        string `yaml:"durable"`
	broker.Options `yaml:",inline"`
}

// Validate checks the configuration.
func (c *ClientConfig) Validate() error {
	return c.Options.ValidateClient(c.URL, "nats://HOST:4222")
}

// EmbeddedConfig is the YAML configuration of a broker-embedded receiver:
// the broker's addresses and what its consumer takes.
type EmbeddedConfig struct {
	// Listen is host:port for NATS clients; MQTTListen, if set, for MQTT
	// clients (same host).
	Listen     string `yaml:"listen"`
	MQTTListen string `yaml:"mqtt_listen"`
	// TLS: a certificate and key make NATS and MQTT clients speak TLS;
	// Insecure lets plain text off loopback (internal/listenpolicy).
	// Clients authenticate either way (natsd.Credentials).
	TLS            pipeline.TLSFiles `yaml:"tls"`
	Insecure       bool              `yaml:"insecure"`
	Stream         string            `yaml:"stream"`
	Durable        string            `yaml:"durable"`
	broker.Options `yaml:",inline"`
}

// Validate checks the configuration.
func (c *EmbeddedConfig) Validate() error {
	if c.Listen == "" {
		return errors.New("listen address missing")
	}
	if _, _, err := natsd.SplitListen(c.Listen); err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	if err := c.TLS.Validate(); err != nil {
		return err
	}
	if err := listenpolicy.Check("listen", c.Listen, c.TLS.Enabled(), c.Insecure, "tls: {cert, key}"); err != nil {
		return err
	}
	if c.MQTTListen != "" {
		mh, _, err := natsd.SplitListen(c.MQTTListen)
		if err != nil {
			return fmt.Errorf("mqtt_listen: %w", err)
		}
		if h, _, _ := natsd.SplitListen(c.Listen); mh != h {
			return fmt.Errorf("mqtt_listen must use the host of listen (%s)", h)
		}
	}
	return c.Options.Validate()
}

// Factories returns the factories of nats-client and broker-embedded.
func Factories() []pipeline.ReceiverFactory {
	return []pipeline.ReceiverFactory{
		pipeline.NewReceiverFactory(TypeClient, func() *ClientConfig { return &ClientConfig{} }, buildClient),
		pipeline.NewReceiverFactory(TypeEmbedded, func() *EmbeddedConfig { return &EmbeddedConfig{} }, buildEmbedded, "jms-embedded"),
	}
}

func buildClient(c *ClientConfig, set pipeline.Settings) (pipeline.Receiver, error) {
	bc, err := c.Batch(set)
	if err != nil {
		return nil, err
	}
	r, err := New(Config{
		Name: set.Name, URL: c.URL, User: c.User, Password: c.Password, Subject: c.Destination,
		Stream: c.Stream, Durable: c.Durable, MaxAckPending: c.Prefetch, DeadLetter: c.DeadLetter, Batch: bc,
	}, broker.SettingsOf(set))
	if err != nil {
		return nil, pipeline.Classify(pipeline.ErrConfig, err)
	}
	return &built{Receiver: r, where: "consuming from " + r.Target()}, nil
}

// built is a NATS receiver as a component; with the embedded broker it
// holds the bridge's embedded server and releases it when Run ends or on
// Close (the server stops with its last user).
type built struct {
	*Receiver
	where   string
	release func() // nil without the embedded broker
}

func (b *built) Where() string { return b.where }

func (b *built) Run(ctx context.Context, out pipeline.Consumer) error {
	err := b.Receiver.Run(ctx, out)
	b.Close()
	return err
}

func (b *built) Close() error {
	if b.release != nil {
		b.release()
	}
	return nil
}

func buildEmbedded(c *EmbeddedConfig, set pipeline.Settings) (pipeline.Receiver, error) {
	bc, err := c.Batch(set)
	if err != nil {
		return nil, err
	}
	tc, err := c.TLS.ServerConfig()
	if err != nil {
		return nil, err
	}
	host, port, _ := natsd.SplitListen(c.Listen)
	sc := ServerConfig{Host: host, Port: port, StoreDir: filepath.Join(set.DataDir, "broker"), CredentialsFile: natsd.CredentialsFile(set.DataDir), TLS: tc, Logger: set.Logger}
	if c.MQTTListen != "" {
		_, mp, _ := natsd.SplitListen(c.MQTTListen)
		sc.MQTT, sc.MQTTPort = true, mp
	}
	srv, release, err := natsd.Acquire(set.Shared, sc, false)
	if err != nil {
		return nil, pipeline.Classify(pipeline.ErrComm, err)
	}
	creds := srv.Credentials() // the embedded server's one user
	r, err := New(Config{
		Name: set.Name, User: creds.User, Password: creds.Password, Subject: c.Destination, InProcess: srv.InProcess(),
		Stream: c.Stream, Durable: c.Durable, MaxAckPending: c.Prefetch, DeadLetter: c.DeadLetter, Batch: bc,
	}, broker.SettingsOf(set))
	if err != nil {
		release()
		return nil, pipeline.Classify(pipeline.ErrConfig, err)
	}
	where := "listening on nats://" + srv.Addr()
	if a := srv.MQTTAddr(); a != "" {
		where += " and mqtt://" + a
	}
	b := &built{Receiver: r, where: where, release: release}
	// The stream and its durable consumer exist before the bridge reports
	// ready, so what is published from then on is kept.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := r.Prepare(ctx); err != nil {
		b.Close()
		return nil, pipeline.Classify(pipeline.ErrComm, err)
	}
	return b, nil
}
