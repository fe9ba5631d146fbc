package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTracesParentNeverArrived: `traces` prints a thread trace whose
// parentTraceId never appears in the log as broken, with the reason, as
// text and as JSON.
func TestTracesParentNeverArrived(t *testing.T) {
	in := filepath.Join(t.TempDir(), "in")
	os.MkdirAll(in, 0o755)
	writeFile(t, filepath.Join(in, "kieker.map"), "$0=kieker.common.record.flow.trace.TraceMetadata\n$1=kieker.common.record.flow.trace.operation.BeforeOperationEvent\n$2=kieker.common.record.flow.trace.operation.AfterOperationEvent\n")
	writeFile(t, filepath.Join(in, "kieker-20260101-000000000-UTC-001.dat"),
		"$0;1;200;2;s;h;100;2\n$1;2;10;200;0;void a.Task.run();a.Task\n$2;4;12;200;1;void a.Task.run();a.Task\n")
	for _, args := range [][]string{{in}, {"--json", in}} {
		var stdout, stderr bytes.Buffer
		if err := cmdTraces(context.Background(), args, &stdout, &stderr); err != nil {
			t.Fatalf("traces %v: %v\n%s", args, err, stderr.String())
		}
		if !strings.Contains(stdout.String(), "parent trace 100 never arrived") {
			t.Fatalf("traces %v:\n%s", args, stdout.String())
		}
	}
}
