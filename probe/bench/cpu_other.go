//go:build !linux

package main

// threadCPU is not available here: only wall-clock figures are reported.
func threadCPU() int64 { return -1 }

// processCPU is not available here.
func processCPU() int64 { return -1 }
