package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/daemon"
	"github.com/tracebridge/tracebridge/internal/servicetest"
)

// startDaemon runs `serve -d` on a tcp-server at port with the PID and
// log files in dir.
func startDaemon(t *testing.T, dir string, port int) result {
	t.Helper()
	return tb(t, "serve", "-d", "-t", "tcp-server", "-p", fmt.Sprint(port), "--data-dir", filepath.Join(dir, "logs"),
		"--pid-file", filepath.Join(dir, "tb.pid"), "--log-file", filepath.Join(dir, "tb.log"))
}

// alive reports whether process pid runs.
func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// stopDaemon ends process pid with SIGTERM and waits until it is gone.
func stopDaemon(t *testing.T, pid int) {
	t.Helper()
	syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 400 && alive(pid); i++ {
		time.Sleep(25 * time.Millisecond)
	}
	if alive(pid) {
		t.Errorf("daemon %d still runs after SIGTERM", pid)
	}
}

// TestSecondDaemonKeepsPIDFile: a second `serve -d` with the PID file of a
// running daemon refuses to start and leaves the file alone; the first
// daemon runs on and removes its PID file when it stops.
func TestSecondDaemonKeepsPIDFile(t *testing.T) {
	dir := t.TempDir()
	port := servicetest.FreePort(t)
	pidFile := filepath.Join(dir, "tb.pid")
	if r := startDaemon(t, dir, port); r.code != 0 {
		t.Fatalf("first daemon: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	pid, err := daemon.ReadPIDFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })

	// The same command again: the port is taken and the PID file names a
	// live process.
	r := startDaemon(t, dir, port)
	if r.code == 0 {
		t.Fatalf("second daemon started:\n%s%s", r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, "tb.pid") || !strings.Contains(r.stderr, fmt.Sprint(pid)) {
		t.Errorf("the refusal does not name the PID file and the running process %d:\n%s", pid, r.stderr)
	}
	if got, err := daemon.ReadPIDFile(pidFile); err != nil || got != pid {
		t.Fatalf("after the second start the PID file holds %d (%v), want %d", got, err, pid)
	}
	if !alive(pid) {
		t.Fatal("the first daemon died")
	}
	// Another port, same PID file: refused as well, nothing started.
	if r := startDaemon(t, dir, servicetest.FreePort(t)); r.code == 0 {
		t.Fatalf("a daemon on another port with the same PID file started:\n%s", r.stdout)
	}
	if got, _ := daemon.ReadPIDFile(pidFile); got != pid {
		t.Fatalf("PID file holds %d, want %d", got, pid)
	}
	stopDaemon(t, pid)
	if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
		t.Errorf("the daemon left its PID file: %v", err)
	}
}

// TestDaemonReplacesStalePIDFile: a PID file naming a process that no
// longer runs (a daemon killed with -9) does not keep a new daemon from
// starting.
func TestDaemonReplacesStalePIDFile(t *testing.T) {
	dir := t.TempDir()
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(dir, "tb.pid")
	writeFile(t, pidFile, fmt.Sprintf("%d\n", gone.Process.Pid))
	if r := startDaemon(t, dir, servicetest.FreePort(t)); r.code != 0 {
		t.Fatalf("exit %d with a stale PID file\n%s%s", r.code, r.stdout, r.stderr)
	}
	pid, err := daemon.ReadPIDFile(pidFile)
	if err != nil || pid == gone.Process.Pid || !alive(pid) {
		t.Fatalf("PID file holds %d (%v), want the new daemon's", pid, err)
	}
	stopDaemon(t, pid)
}
