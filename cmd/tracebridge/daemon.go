package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// daemonEnv marks the detached child of `serve -d`.
const daemonEnv = "TRACEBRIDGE_DAEMON"

// daemonize starts this program again, detached from the console (a new
// session, stdin from /dev/null, output to logFile), and returns once the
// child has written its PID file (it is then listening) or has failed. Go
// cannot fork, so the child is a fresh process with the same arguments.
func daemonize(args []string, pidFile, logFile string, stdout io.Writer) error {
	exe, err := os.Executable()
	if err != nil {
		return withCode(exitConfig, err)
	}
	out, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return withCode(exitConfig, fmt.Errorf("log file: %w", err))
	}
	defer out.Close()
	devnull, err := os.Open(os.DevNull)
	if err != nil {
		return withCode(exitConfig, err)
	}
	defer devnull.Close()
	// Refuse before starting anything: the PID file is another daemon's
	// while its process runs (and never ours to remove).
	if err := checkPIDFile(pidFile); err != nil {
		return withCode(exitConfig, err)
	}
	cmd := exec.Command(exe, append([]string{"serve"}, args...)...)
	cmd.Env = append(os.Environ(), daemonEnv+"=1")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return withCode(exitConfig, fmt.Errorf("starting the daemon: %w", err))
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.After(30 * time.Second)
	for {
		select {
		case err := <-exited:
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				return withCode(ee.ExitCode(), fmt.Errorf("the daemon exited with code %d; see %s", ee.ExitCode(), logFile))
			}
			return withCode(exitConfig, fmt.Errorf("the daemon exited at once; see %s", logFile))
		case <-deadline:
			return withCode(exitConfig, fmt.Errorf("the daemon did not start within 30 s; see %s", logFile))
		case <-time.After(20 * time.Millisecond):
			if pid, err := readPIDFile(pidFile); err == nil && pid == cmd.Process.Pid {
				fmt.Fprintf(stdout, "tracebridge: daemon started, pid %d (PID file %s, output in %s)\n", pid, pidFile, logFile)
				return cmd.Process.Release()
			}
		}
	}
}

// checkPIDFile returns an error when the PID file at path names a running
// process other than this one. A missing, unreadable or stale file (its
// process is gone, as after kill -9) is no obstacle.
func checkPIDFile(path string) error {
	pid, err := readPIDFile(path)
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

// writePIDFile writes this process's PID to path without ever replacing
// a running process's file: the file is linked into place, which fails
// when it exists; an existing stale file (its process gone) is replaced.
func writePIDFile(path string) error {
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
	if err := checkPIDFile(path); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("PID file: %w", err)
	}
	return nil
}

// removePIDFile removes the PID file at path if it still holds this
// process's PID: a file another process wrote since is not ours.
func removePIDFile(path string) {
	if pid, err := readPIDFile(path); err == nil && pid == os.Getpid() {
		os.Remove(path)
	}
}

func readPIDFile(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}
