//go:build !linux

package probe

func threadCPU() int64 { return -1 }
