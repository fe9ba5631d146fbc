// Package timeunit is the timeunit stage: it converts the timestamps of
// every batch to nanoseconds, the conversion receivers do with their
// timestamp_unit key, for all receivers at once. The conversion itself
// lives in internal/timeunit, shared with the receivers.
package timeunit

import (
	"context"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	unit "github.com/tracebridge/tracebridge/internal/timeunit"
)

// Type is the stage type this package builds.
const Type = "timeunit"

// FactoryConfig is the YAML configuration of a timeunit stage (the same
// conversion receivers do with their timestamp_unit key, for all
// receivers at once).
type FactoryConfig struct {
	// Unit of the incoming timestamps: us, ms or s (ns: nothing to do).
	Unit string `yaml:"unit"`
}

// Validate checks the configuration.
func (c *FactoryConfig) Validate() error {
	_, err := unit.Factor(c.Unit)
	return err
}

// Factory returns the factory of timeunit stages.
func Factory() pipeline.StageFactory {
	return pipeline.NewStageFactory(Type, func() *FactoryConfig { return &FactoryConfig{} },
		func(c *FactoryConfig, set pipeline.Settings) (pipeline.Stage, error) {
			conv, err := unit.New(c.Unit, set.Catalog)
			if err != nil {
				return nil, pipeline.Classify(pipeline.ErrConfig, err)
			}
			return func(next pipeline.Consumer) pipeline.Consumer {
				return pipeline.ConsumerFunc(func(ctx context.Context, b *record.Batch) error {
					conv.Apply(b, 0)
					return next.Consume(ctx, b)
				})
			}, nil
		})
}
