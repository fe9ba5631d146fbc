package store

import (
	"fmt"
	"strconv"
	"strings"
)

// ByteSize is a size in bytes written as 2GiB, 500MB, 1048576 in YAML.
type ByteSize int64

// UnmarshalText parses a size.
func (b *ByteSize) UnmarshalText(t []byte) error {
	n, err := ParseByteSize(string(t))
	if err != nil {
		return err
	}
	*b = ByteSize(n)
	return nil
}

// ParseByteSize parses a number of bytes with an optional unit: B, KB, MB,
// GB, TB (powers of 1000), KiB, MiB, GiB, TiB (powers of 1024).
func ParseByteSize(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return 0, fmt.Errorf("size %q: want e.g. 500MB or 2GiB", s)
	}
	mult := map[string]float64{"": 1, "B": 1, "KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"K": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MIB": 1 << 20, "G": 1 << 30, "GIB": 1 << 30, "T": 1 << 40, "TIB": 1 << 40}[strings.ToUpper(unit)]
	if mult == 0 {
		return 0, fmt.Errorf("size %q: unknown unit %q (B, KB, MB, GB, KiB, MiB, GiB, …)", s, unit)
	}
	return int64(f * mult), nil
}
