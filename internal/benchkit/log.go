package benchkit

import (
	"context"
	"fmt"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/source/kiekerlog"
)

// ReadLog reads the Kieker log in dir into c, for a benchmark's verifier.
func ReadLog(ctx context.Context, dir string, c pipeline.Consumer) error {
	r, err := kiekerlog.Open(dir, kiekerlog.Options{})
	if err != nil {
		return fmt.Errorf("log %s: %w", dir, err)
	}
	if err := r.Run(ctx, c); err != nil {
		return fmt.Errorf("log %s: %w", dir, err)
	}
	return nil
}
