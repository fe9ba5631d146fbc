package main

import (
	"os"
	"testing"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
)

func TestMain(m *testing.M) {
	code := bridgetest.Run(m)
	jfrRec.Remove()
	os.Exit(code)
}

// result is what one run of the binary produced.
type result struct {
	stdout, stderr string
	code           int
}

// tb runs the tracebridge binary with args.
func tb(t *testing.T, args ...string) result {
	t.Helper()
	return runEnv(t, nil, args...)
}

// ok runs tracebridge and fails the test unless it exits 0.
func ok(t *testing.T, args ...string) result {
	t.Helper()
	r := tb(t, args...)
	if r.code != 0 {
		t.Fatalf("tracebridge %v: exit %d\nstderr:\n%s", args, r.code, r.stderr)
	}
	return r
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}
