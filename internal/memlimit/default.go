package memlimit

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultCap is the most Default derives: larger installations say
// memory_limit themselves.
const DefaultCap = 16 << 30

// Default is the limit when the configuration sets none: three quarters
// of the smaller of the cgroup's memory limit and the machine's memory,
// at least DefaultFloor (or all of a smaller one), at most DefaultCap; from says where it comes from ("cgroup v2
// memory.max 1GiB", "MemTotal 24GiB"). Without either figure (not Linux)
// it is DefaultCap/4 (4 GiB).
func Default() (limit int64, from string) { return defaultAt("/") }

// defaultAt is Default with the files read under root (tests).
func defaultAt(root string) (int64, string) {
	ram, _ := memTotal(filepath.Join(root, "proc/meminfo"))
	cg, cgFrom := cgroupLimit(root)
	base, from := ram, fmt.Sprintf("MemTotal %d bytes", ram)
	if cg > 0 && (ram <= 0 || cg < ram) {
		base, from = cg, cgFrom
	}
	if base <= 0 {
		return DefaultCap / 4, "no cgroup limit or MemTotal found"
	}
	return min(max(base/4*3, min(DefaultFloor, base)), DefaultCap), from
}

// DefaultFloor is the least Default derives where the cgroup or the
// machine has that much: the bridge's fixed part needs about half of it.
const DefaultFloor = 128 << 20

// FileRSS returns the process's file-backed resident memory (RssFile of
// /proc/self/status: the binary's pages), 0 where it cannot be read.
func FileRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "RssFile:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

// memTotal reads MemTotal (kB) from a meminfo file.
func memTotal(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%s: MemTotal %q: %w", path, f[1], err)
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("%s: no MemTotal", path)
}

// cgroupLimit returns the memory limit of the process's cgroup (0 when
// there is none): cgroup v2's memory.max ("max": none), else v1's
// memory.limit_in_bytes (a huge value: none), in the process's own cgroup
// directory (from /proc/self/cgroup) or, where that is not mounted (a
// container sees its own cgroup at the root), at the hierarchy's root.
func cgroupLimit(root string) (int64, string) {
	var v2, v1 string // the process's cgroup paths
	if b, err := os.ReadFile(filepath.Join(root, "proc/self/cgroup")); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "":
				v2 = parts[2]
			case strings.Contains(","+parts[1]+",", ",memory,"):
				v1 = parts[2]
			}
		}
	}
	try := func(dirs []string, file string) (int64, string, bool) {
		for _, d := range dirs {
			p := filepath.Join(root, d, file)
			b, err := os.ReadFile(p)
			if err != nil {
				continue
			}
			s := strings.TrimSpace(string(b))
			if s == "max" {
				return 0, "", true
			}
			n, err := strconv.ParseInt(s, 10, 64)
			if err != nil || n <= 0 || n >= 1<<60 { // v1 writes ~2^63 for none
				return 0, "", true
			}
			return n, fmt.Sprintf("cgroup %s %d bytes", filepath.Join("/", d, file), n), true
		}
		return 0, "", false
	}
	if n, from, ok := try([]string{filepath.Join("sys/fs/cgroup", v2), "sys/fs/cgroup"}, "memory.max"); ok && v2 != "" {
		return n, from
	}
	if n, from, ok := try([]string{filepath.Join("sys/fs/cgroup/memory", v1), "sys/fs/cgroup/memory"}, "memory.limit_in_bytes"); ok {
		return n, from
	}
	return 0, ""
}
