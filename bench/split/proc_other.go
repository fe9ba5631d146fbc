//go:build !unix

package main

import (
	"os"
	"time"
)

// usage returns the CPU time of a finished child process; peak RSS is only
// measured on Unix.
func usage(ps *os.ProcessState) (cpu time.Duration, peakRSS int64) {
	return ps.UserTime() + ps.SystemTime(), 0
}
