package stomp

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

// Type is the receiver type this package builds.
const Type = "stomp-client"

// FactoryConfig is the YAML configuration of a stomp-client receiver.
type FactoryConfig struct {
	// URL is stomp://HOST:PORT or stomp+ssl://HOST:PORT.
	URL string `yaml:"url"`
	// VHost is the STOMP host header (RabbitMQ virtual host, default /).
	VHost string `yaml:"vhost"`
	// TLSCA is a PEM file of the certificate authorities trusted for
	// stomp+ssl:// (default: the system's).
	TLSCA          string `yaml:"tls_ca"`
	broker.Options `yaml:",inline"`
}

// Validate checks the configuration.
func (c *FactoryConfig) Validate() error {
	return c.Options.ValidateClient(c.URL, "stomp://HOST:61613")
}

// Factory returns the factory of stomp-client (alias jms-client, KDB's).
func Factory() pipeline.ReceiverFactory {
	return pipeline.NewReceiverFactory(Type, func() *FactoryConfig { return &FactoryConfig{} }, build, "jms-client")
}

func build(c *FactoryConfig, set pipeline.Settings) (pipeline.Receiver, error) {
	bc, err := c.Batch(set)
	if err != nil {
		return nil, err
	}
	var tc *tls.Config
	if c.TLSCA != "" {
		pem, err := os.ReadFile(c.TLSCA)
		if err != nil {
			return nil, pipeline.Classify(pipeline.ErrConfig, fmt.Errorf("tls_ca: %w", err))
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, pipeline.Classify(pipeline.ErrConfig, fmt.Errorf("tls_ca %s holds no PEM certificate", c.TLSCA))
		}
		tc = &tls.Config{RootCAs: pool}
	}
	r, err := New(Config{
		Name: set.Name, URL: c.URL, User: c.User, Password: c.Password, VHost: c.VHost,
		Destination: c.Destination, DeadLetter: c.DeadLetter, Prefetch: c.Prefetch, TLS: tc, Batch: bc,
	}, broker.SettingsOf(set))
	if err != nil {
		return nil, pipeline.Classify(pipeline.ErrConfig, err)
	}
	return broker.Consuming(r), nil
}
