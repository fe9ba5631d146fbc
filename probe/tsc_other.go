//go:build !(linux && amd64)

package probe

// The time-stamp counter is used on linux/amd64 only.
func rdtsc() int64    { return 0 }
func tscUsable() bool { return false }
