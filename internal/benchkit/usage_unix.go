//go:build unix

package benchkit

import (
	"os"
	"runtime"
	"syscall"
	"time"
)

// Usage returns the CPU time (user + system) and peak RSS in bytes of a
// finished child process.
func Usage(ps *os.ProcessState) (cpu time.Duration, peakRSS int64) {
	cpu = ps.UserTime() + ps.SystemTime()
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		peakRSS = int64(ru.Maxrss)
		if runtime.GOOS != "darwin" { // Linux and the BSDs count kilobytes
			peakRSS <<= 10
		}
	}
	return cpu, peakRSS
}
