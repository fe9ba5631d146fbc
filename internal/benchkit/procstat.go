package benchkit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

const userHZ = 100

func parseStat(stat string) (time.Duration, error) {
	// The command name (field 2) is in parentheses and may hold spaces:
	// count the fields after its closing one.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("/proc stat: no command name")
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc stat: %d fields", len(f)+2)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc stat: %w", err)
	}
	return time.Duration(utime+stime) * time.Second / userHZ, nil
}
