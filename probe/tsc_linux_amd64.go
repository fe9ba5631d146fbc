package probe

import (
	"bytes"
	"os"
)

// rdtsc returns the processor's time-stamp counter.
func rdtsc() int64

// tscUsable reports whether the kernel keeps time with the time-stamp
// counter, which it does only when the counter runs at a constant rate in
// every power state and agrees between processors.
func tscUsable() bool {
	cs, err := os.ReadFile("/sys/devices/system/clocksource/clocksource0/current_clocksource")
	if err != nil || string(bytes.TrimSpace(cs)) != "tsc" {
		return false
	}
	info, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return false
	}
	return bytes.Contains(info, []byte(" constant_tsc")) && bytes.Contains(info, []byte(" nonstop_tsc"))
}
