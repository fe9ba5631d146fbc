package bridge_test

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/shared"
)

func sharedStream(t *testing.T) string { return shared.Path(t, "kieker-streams", "java-tcp.bin") }
