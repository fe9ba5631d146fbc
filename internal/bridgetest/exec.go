package bridgetest

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// ExecTimeout is how long Exec lets a program run before it kills it.
const ExecTimeout = 60 * time.Second

// Result is what a program run by Exec printed and how it ended.
type Result struct {
	Stdout, Stderr string
	// Code is the exit code; -1 when a signal ended the program (as when
	// Exec killed it after ExecTimeout).
	Code    int
	Elapsed time.Duration
}

// Exec runs cmd to its end, keeping its output, and kills it after
// ExecTimeout. It fails tb when the program cannot be run; a program that
// fails is reported in Result.Code.
func Exec(tb testing.TB, cmd *exec.Cmd) Result {
	tb.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		tb.Fatalf("running %s: %v", cmd.Path, err)
	}
	timer := time.AfterFunc(ExecTimeout, func() { cmd.Process.Kill() })
	err := cmd.Wait()
	timer.Stop()
	r := Result{Stdout: out.String(), Stderr: errb.String(), Code: cmd.ProcessState.ExitCode(), Elapsed: time.Since(start)}
	if err != nil && r.Code == 0 {
		tb.Fatalf("running %s: %v", cmd.Path, err)
	}
	return r
}

// CleanEnv returns the environment of the test without the TRACEBRIDGE_
// and KIEKER_ variables that configure the clients, followed by env.
func CleanEnv(env ...string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TRACEBRIDGE_") && !strings.HasPrefix(kv, "KIEKER_") {
			out = append(out, kv)
		}
	}
	return append(out, env...)
}
