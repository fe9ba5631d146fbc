package benchkit

import (
	"bufio"
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// Memory reads a process's resident set size and its peak (VmRSS and
// VmHWM of /proc/PID/status) in bytes.
func Memory(pid int) (rss, peak int64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Bytes()
		var dst *int64
		switch {
		case bytes.HasPrefix(line, []byte("VmRSS:")):
			dst = &rss
		case bytes.HasPrefix(line, []byte("VmHWM:")):
			dst = &peak
		default:
			continue
		}
		f := bytes.Fields(line) // "VmRSS:", "12345", "kB"
		if len(f) != 3 || string(f[2]) != "kB" {
			return 0, 0, fmt.Errorf("/proc/%d/status: unexpected line %q", pid, line)
		}
		kb, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status: %q: %w", pid, line, err)
		}
		*dst = kb << 10
	}
	if peak == 0 {
		return 0, 0, fmt.Errorf("/proc/%d/status: no VmHWM line", pid)
	}
	return rss, peak, nil
}

// SettleDisk writes dirty pages out so that writeback of one run's log
// does not steal CPU from the next run.
func SettleDisk() { syscall.Sync() }

// SelfCPU returns the user and system CPU time this process has used.
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// CPU returns the CPU time (user and system) a running process has used,
// from /proc/PID/stat (clock ticks of 1/100 s, Linux's USER_HZ).
func CPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(string(b))
}

// DiskUsage returns the bytes the files under dir take on disk, as du
// counts them (allocated blocks, so a sparse or preallocated file counts
// what it holds).
func DiskUsage(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += st.Blocks * 512
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("disk usage of %s: %w", dir, err)
	}
	return n, nil
}
