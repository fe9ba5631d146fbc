package probe

import (
	"syscall"
	"unsafe"
)

// threadCPU returns the CPU time of the calling thread in nanoseconds (-1
// when unknown). Benchmarks lock their goroutine to the thread and report
// it beside the wall time, which other load on the machine inflates.
func threadCPU() int64 {
	var ts syscall.Timespec
	if _, _, e := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 3 /* CLOCK_THREAD_CPUTIME_ID */, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		return -1
	}
	return ts.Nano()
}
