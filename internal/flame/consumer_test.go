package flame_test

import (
	"github.com/tracebridge/tracebridge/internal/flame"
	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// An Aggregator is a pipeline consumer. The assertion lives in a test so
// that flame needs no pipeline (the pipeline's Shared names flame.Stacks).
var _ pipeline.Consumer = (*flame.Aggregator)(nil)
