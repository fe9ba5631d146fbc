//go:build !unix

package benchkit

import (
	"os"
	"time"
)

// Usage returns the CPU time of a finished child process; peak RSS is only
// measured on Unix.
func Usage(ps *os.ProcessState) (cpu time.Duration, peakRSS int64) {
	return ps.UserTime() + ps.SystemTime(), 0
}
