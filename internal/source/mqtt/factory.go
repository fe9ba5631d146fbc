package mqtt

import (
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/source/broker"
)

// Type is the receiver type this package builds.
const Type = "mqtt-client"

// FactoryConfig is the YAML configuration of an mqtt-client receiver.
type FactoryConfig struct {
	// URL is mqtt://HOST:PORT or mqtts://HOST:PORT.
	URL string `yaml:"url"`
	// ClientID names the persistent session (default tracebridge).
	ClientID       string `yaml:"client_id"`
	broker.Options `yaml:",inline"`
}

// Validate checks the configuration.
func (c *FactoryConfig) Validate() error {
	return c.Options.ValidateClient(c.URL, "mqtt://HOST:1883")
}

// Factory returns the factory of mqtt-client.
func Factory() pipeline.ReceiverFactory {
	return pipeline.NewReceiverFactory(Type, func() *FactoryConfig { return &FactoryConfig{} }, build)
}

func build(c *FactoryConfig, set pipeline.Settings) (pipeline.Receiver, error) {
	bc, err := c.Batch(set)
	if err != nil {
		return nil, err
	}
	r, err := New(Config{
		Name: set.Name, URL: c.URL, User: c.User, Password: c.Password, Topic: c.Destination,
		ClientID: c.ClientID, DeadLetter: c.DeadLetter, Inflight: c.Prefetch, Batch: bc,
	}, broker.SettingsOf(set))
	if err != nil {
		return nil, pipeline.Classify(pipeline.ErrConfig, err)
	}
	return broker.Consuming(r), nil
}
