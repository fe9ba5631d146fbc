package jfrtest

import (
	"os"
	"sync"
	"testing"
)

// Shared is a recording of the workload made once per test binary, on
// first use, for the tests that only read it. TestMain calls Remove.
type Shared struct {
	// Options of the recording; it is written into a temporary directory
	// of its own (Filename is not used).
	Options Options

	once      sync.Once
	dir, path string
	err       error
}

// Get returns the JDK's tools and the recording's path, recording it on
// the first call. It skips the test when Java is missing (Require).
func (s *Shared) Get(tb testing.TB) (Tools, string) {
	tb.Helper()
	tools := Require(tb)
	s.once.Do(func() {
		s.dir, s.err = os.MkdirTemp("", "tracebridge-jfr-"+s.Options.RunID+"-")
		if s.err == nil {
			o := s.Options
			o.Filename = ""
			s.path, s.err = tools.Record(s.dir, o)
		}
	})
	if s.err != nil {
		tb.Fatal(s.err)
	}
	return tools, s.path
}

// Remove deletes the recording, if one was made.
func (s *Shared) Remove() {
	if s.dir != "" {
		os.RemoveAll(s.dir)
	}
}
