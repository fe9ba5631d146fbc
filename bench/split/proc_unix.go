//go:build unix

package main

import (
	"os"
	"runtime"
	"syscall"
	"time"
)

// usage returns the CPU time (user + system) and peak RSS in bytes of a
// finished child process.
func usage(ps *os.ProcessState) (cpu time.Duration, peakRSS int64) {
	cpu = ps.UserTime() + ps.SystemTime()
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		peakRSS = int64(ru.Maxrss)
		if runtime.GOOS != "darwin" { // Linux and the BSDs count kilobytes
			peakRSS <<= 10
		}
	}
	return cpu, peakRSS
}
