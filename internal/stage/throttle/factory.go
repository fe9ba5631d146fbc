package throttle

import (
	"fmt"

	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// Type is the stage type this package builds.
const Type = "throttle"

// FactoryConfig is the YAML configuration of a throttle stage.
type FactoryConfig struct {
	// Rate is the most records per second passed on.
	Rate float64 `yaml:"rate"`
}

// Validate checks the configuration.
func (c *FactoryConfig) Validate() error {
	if !(c.Rate > 0) {
		return fmt.Errorf("rate %v: want records per second above 0", c.Rate)
	}
	return nil
}

// Factory returns the factory of throttle stages.
func Factory() pipeline.StageFactory {
	return pipeline.NewStageFactory(Type, func() *FactoryConfig { return &FactoryConfig{} },
		func(c *FactoryConfig, _ pipeline.Settings) (pipeline.Stage, error) {
			return func(next pipeline.Consumer) pipeline.Consumer { return New(c.Rate, next) }, nil
		})
}
