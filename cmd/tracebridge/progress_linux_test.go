package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
)

// openPTY opens a pseudo-terminal: the program gets the terminal end, the
// test reads what it shows from the other.
func openPTY(t *testing.T) (ptm, pts *os.File) {
	t.Helper()
	ptm, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptm.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatal(e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, ptm.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatal(e)
	}
	pts, err = os.OpenFile("/dev/pts/"+itoa(n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ptm.Close(); pts.Close() })
	return ptm, pts
}

func itoa(n uint32) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		if n /= 10; n == 0 {
			return string(b)
		}
	}
}

// TestConvertShowsProgress: on a terminal convert shows a progress bar,
// as split does, instead of being silent for a large log; stdout (the new
// log's path) stays clean.
func TestConvertShowsProgress(t *testing.T) {
	ptm, pts := openPTY(t)
	in := bigLog(t, 600_000)
	cmd := exec.Command(bridgetest.Binary(t), "convert", "--to", "ascii", "--compress", "gzip", in, t.TempDir())
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, pts
	var shown bytes.Buffer
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		io.Copy(&shown, ptm) // ends when the terminal closes
	}()
	if err := cmd.Run(); err != nil {
		t.Fatalf("convert: %v\n%s", err, shown.String())
	}
	pts.Close()
	ptm.Close()
	wg.Wait()
	screen := shown.String()
	for _, want := range []string{"\r[", "% ", "MB / ", "left", "tracebridge: converted 600001 records"} {
		if !strings.Contains(screen, want) {
			t.Errorf("the terminal did not show %q:\n%q", want, screen)
		}
	}
	if strings.Contains(stdout.String(), "\r") || strings.Count(stdout.String(), "\n") != 1 {
		t.Errorf("stdout %q, want the new log's path alone", stdout.String())
	}
}
