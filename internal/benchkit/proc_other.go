//go:build !linux

package benchkit

import (
	"errors"
	"time"
)

// Memory is only implemented on Linux (/proc/PID/status).
func Memory(pid int) (rss, peak int64, err error) {
	return 0, 0, errors.New("peak RSS is only measured on Linux")
}

// SettleDisk does nothing where there is no sync(2) to call.
func SettleDisk() {}

// SelfCPU is only measured on Linux.
func SelfCPU() time.Duration { return 0 }

// CPU is only measured on Linux (/proc/PID/stat).
func CPU(pid int) (time.Duration, error) {
	return 0, errors.New("a process's CPU time is only measured on Linux")
}

// DiskUsage is only measured on Linux.
func DiskUsage(dir string) (int64, error) {
	return 0, errors.New("disk usage is only measured on Linux")
}
