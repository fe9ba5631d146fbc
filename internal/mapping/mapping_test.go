package mapping

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
)

func TestLoad(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kdb.map")
	text := "1=kieker.common.record.flow.trace.operation.BeforeOperationEvent\n2=kieker.common.record.flow.trace.operation.AfterOperationEvent\n3=kieker.common.record.flow.trace.TraceMetadata\n"
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := Load(path, record.Builtin())
	if err != nil {
		t.Fatal(err)
	}
	if m.Len() != 3 || m.Type(3).Name != record.TraceMetadata {
		t.Fatalf("loaded %v", m)
	}
	if m, err := Load("", record.Builtin()); err != nil || m.Type(1).Name != record.BeforeOperationEvent {
		t.Fatalf("default mapping: %v %v", m, err)
	}
	_, err = Load(filepath.Join(t.TempDir(), "missing.map"), record.Builtin())
	if err == nil || !strings.Contains(err.Error(), "missing.map") || !errors.Is(err, pipeline.ErrMapping) {
		t.Fatalf("missing file: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad.map")
	if err := os.WriteFile(bad, []byte("1=no.Such"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = Load(bad, record.Builtin())
	if err == nil || err.Error() != "mapping "+bad+": line 1: unknown record class no.Such" || !errors.Is(err, pipeline.ErrMapping) {
		t.Fatalf("bad file: %v", err)
	}
}
