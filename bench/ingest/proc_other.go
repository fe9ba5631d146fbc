//go:build !linux

package main

import "errors"

// memory is only implemented on Linux (/proc/PID/status).
func memory(pid int) (rss, peak int64, err error) {
	return 0, 0, errors.New("peak RSS is only measured on Linux")
}

// settleDisk does nothing where there is no sync(2) to call.
func settleDisk() {}
