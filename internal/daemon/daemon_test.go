package daemon

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPIDFile: a PID file is written, read back and removed by its own
// process; one naming a running process is refused and kept, a stale one
// replaced.
func TestPIDFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tb.pid")
	if err := WritePIDFile(path); err != nil {
		t.Fatal(err)
	}
	if pid, err := ReadPIDFile(path); err != nil || pid != os.Getpid() {
		t.Fatalf("read %d, %v; want %d", pid, err, os.Getpid())
	}
	if err := WritePIDFile(path); err != nil {
		t.Fatalf("rewriting our own PID file: %v", err)
	}
	RemovePIDFile(path)
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("PID file left: %v", err)
	}

	// Another running process's file.
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Skip(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	other := []byte(strconv.Itoa(sleep.Process.Pid) + "\n")
	os.WriteFile(path, other, 0o644)
	if err := CheckPIDFile(path); err == nil || !strings.Contains(err.Error(), "which is running") {
		t.Errorf("CheckPIDFile: %v", err)
	}
	if err := WritePIDFile(path); err == nil {
		t.Error("WritePIDFile replaced a running process's file")
	}
	RemovePIDFile(path)
	if b, _ := os.ReadFile(path); string(b) != string(other) {
		t.Errorf("PID file now %q", b)
	}

	// A stale one: its process is gone.
	sleep.Process.Kill()
	sleep.Wait()
	if err := WritePIDFile(path); err != nil {
		t.Fatalf("replacing a stale PID file: %v", err)
	}
	if pid, _ := ReadPIDFile(path); pid != os.Getpid() {
		t.Errorf("PID file names %d", pid)
	}
}
