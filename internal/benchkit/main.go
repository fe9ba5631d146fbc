package benchkit

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// Main is the body of a benchmark program's main, which passes its result
// to os.Exit: it parses args with parse (which reports bad flags itself)
// and runs run with a context cancelled by SIGINT or SIGTERM, writing to
// the process's standard output and error. It returns 0 after -help, 2
// when the flags are wrong, else what run returns.
func Main[O any](args []string, parse func(args []string, stderr io.Writer) (O, error), run func(ctx context.Context, o O, stdout, stderr io.Writer) int) int {
	o, err := parse(args, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return run(ctx, o, os.Stdout, os.Stderr)
}

// Child runs f when this process is a benchmark's child process in role,
// that is when the environment variable env is role: a benchmark starts
// itself again (os.Executable) to run a server that must not share the
// measuring process's Go runtime. It reports whether it ran f and the
// exit status: 1 after printing f's error, prefixed with what, on
// standard error.
func Child(env, role, what string, f func() error) (code int, ran bool) {
	if os.Getenv(env) != role {
		return 0, false
	}
	if err := f(); err != nil {
		fmt.Fprintln(os.Stderr, what+":", err)
		return 1, true
	}
	return 0, true
}

// ChildCommand returns the command that starts this program again as a
// child process in role (Child then runs it): with the environment
// variable env set to role, then the variables of extra ("NAME=value").
func ChildCommand(ctx context.Context, env, role string, extra ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(append(os.Environ(), env+"="+role), extra...)
	return cmd, nil
}

// WorkDir makes a new temporary directory for a run (pattern as in
// os.MkdirTemp). The run defers done, which removes the directory or, with
// keep, logs "kept DIR" instead.
func WorkDir(pattern string, keep bool, logf func(format string, args ...any)) (dir string, done func(), err error) {
	dir, err = os.MkdirTemp("", pattern)
	if err != nil {
		return "", nil, err
	}
	if keep {
		return dir, func() { logf("kept %s", dir) }, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// Tracebridge returns bin, the tracebridge binary the user gave, or when
// it is "" builds ./cmd/tracebridge into dir (Build), logging that it does.
func Tracebridge(ctx context.Context, bin, dir string, logf func(format string, args ...any)) (string, error) {
	if bin != "" {
		return bin, nil
	}
	logf("building ./cmd/tracebridge")
	return Build(ctx, dir)
}

// Logf returns a benchmark's progress logger: lines on w prefixed with
// the benchmark's name.
func Logf(w io.Writer, name string) func(format string, args ...any) {
	return func(format string, args ...any) { fmt.Fprintf(w, name+": "+format+"\n", args...) }
}

// Setup makes a benchmark's work directory (WorkDir) and finds or builds
// the tracebridge binary in it (Tracebridge); done removes or keeps the
// directory.
func Setup(ctx context.Context, pattern, bin string, keep bool, logf func(format string, args ...any)) (dir, tracebridge string, done func(), err error) {
	dir, done, err = WorkDir(pattern, keep, logf)
	if err != nil {
		return "", "", nil, err
	}
	tracebridge, err = Tracebridge(ctx, bin, dir, logf)
	if err != nil {
		done()
		return "", "", nil, err
	}
	return dir, tracebridge, done, nil
}
