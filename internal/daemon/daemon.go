// Package daemon detaches a command from the console (`serve -d`) and
// keeps its PID file. Go cannot fork, so Start runs the program again, as
// a fresh process in a session of its own with the same arguments and the
// environment variable Env set; the child knows itself by IsChild, writes
// its PID file with WritePIDFile once it is ready (listening), and removes
// it with RemovePIDFile when it stops. A PID file is never replaced while
// the process it names runs.
package daemon

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Env marks the detached child.
const Env = "TRACEBRIDGE_DAEMON"

// IsChild reports whether this process is a daemon Start started.
func IsChild() bool { return os.Getenv(Env) != "" }

// ExitError says that the daemon exited with Code before it was ready.
type ExitError struct {
	Code    int
	LogFile string
}

func (e *ExitError) Error() string {
	return fmt.Sprintf("the daemon exited with code %d; see %s", e.Code, e.LogFile)
}

// startTimeout is how long Start waits for the daemon's PID file.
const startTimeout = 30 * time.Second

// Start starts this program again with args, detached from the console (a
// new session, stdin from /dev/null, output appended to logFile), and
// returns the child's PID once it has written pidFile (it is then ready).
// It fails at once when pidFile names another running process, and when
// the child exits first (an *ExitError) or is not ready within 30 s.
func Start(args []string, pidFile, logFile string) (int, error) {
	exe, err := os.Executable()
	if err != nil {
		return 0, err
	}
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, fmt.Errorf("log file: %w", err)
	}
	defer out.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer devnull.Close()
	// Refuse before starting anything: the PID file is another daemon's
	// while its process runs (and never ours to remove).
	if err := CheckPIDFile(pidFile); err != nil {
		return 0, err
	}
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), Env+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("starting the daemon: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(startTimeout)
	for {
		select {
		case err := <-exited:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return 0, &ExitError{Code: ee.ExitCode(), LogFile: logFile}
			}
			return 0, fmt.Errorf("the daemon exited at once; see %s", logFile)
		case <-deadline:
			return 0, fmt.Errorf("the daemon did not start within 30 s; see %s", logFile)
		case <-time.After(20 * time.Millisecond):
			if pid, err := ReadPIDFile(pidFile); err == nil && pid == cmd.Process.Pid {
				return pid, cmd.Process.Release()
			}
		}
	}
}

// CheckPIDFile returns an error when the PID file at path names a running
// process other than this one. A missing, unreadable or stale file (its
// process is gone, as after kill -9) is no obstacle.
func CheckPIDFile(path string) error {
	pid, err := ReadPIDFile(path)
	if err != nil || pid <= 0 || pid == os.Getpid() || !processRuns(pid) {
		return nil
	}
	return fmt.Errorf("PID file %s names process %d, which is running: is a tracebridge daemon already running? Stop it first, or give this one its own --pid-file", path, pid)
}

// processRuns reports whether process pid exists (signal 0: EPERM means
// it exists but belongs to another user).
func processRuns(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// WritePIDFile writes this process's PID to path without ever replacing
// a running process's file: the file is linked into place, which fails
// when it exists; an existing stale file (its process gone) is replaced.
func WritePIDFile(path string) error {
	tmp := fmt.Sprintf("%s.%d.tmp", path, os.Getpid())
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("PID file: %w", err)
	}
	defer os.Remove(tmp)
	err := os.Link(tmp, path)
	if err == nil || !errors.Is(err, os.ErrExist) {
		if err != nil {
			return fmt.Errorf("PID file: %w", err)
		}
		return nil
	}
	if err := CheckPIDFile(path); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("PID file: %w", err)
	}
	return nil
}

// RemovePIDFile removes the PID file at path if it still holds this
// process's PID: a file another process wrote since is not ours.
func RemovePIDFile(path string) {
	if pid, err := ReadPIDFile(path); err == nil && pid == os.Getpid() {
		os.Remove(path)
	}
}

// ReadPIDFile returns the PID the file at path holds.
func ReadPIDFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
