package bridge_test

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/testcorpus"
)

func sharedStream(t *testing.T) string { return testcorpus.Path(t, "kieker-streams", "java-tcp.bin") }
