package bridgetest

import (
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

// module is the import path Build's package paths are relative to.
const module = "github.com/tracebridge/tracebridge"

var (
	mu     sync.Mutex
	binDir string                   // where Build writes; Run removes it
	builds = map[string]*compiled{} // by package path
)

type compiled struct {
	path string
	err  error
}

// Build returns the path of the program built from pkg, a package path
// inside this module ("cmd/tracebridge", "probe/example"). The first call
// for a package runs `go build`; later calls, and calls after a failed
// build, return what it gave. Build fails tb when the build failed.
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	mu.Lock()
	defer mu.Unlock()
	c := builds[pkg]
	if c == nil {
		c = &compiled{}
		c.path, c.err = goBuild(pkg, len(builds))
		builds[pkg] = c
	}
	if c.err != nil {
		tb.Fatal(c.err)
	}
	return c.path
}

// Binary returns the path of the tracebridge binary, built on first use.
func Binary(tb testing.TB) string {
	tb.Helper()
	return Build(tb, "cmd/tracebridge")
}

// Run runs the tests of m, removes the programs Build made and returns
// m's exit code.
func Run(m *testing.M) int {
	code := m.Run()
	mu.Lock()
	defer mu.Unlock()
	if binDir != "" {
		os.RemoveAll(binDir)
		binDir = ""
		clear(builds)
	}
	return code
}

// goBuild builds pkg into its own subdirectory n of binDir, so that
// programs keep their names. mu is held.
func goBuild(pkg string, n int) (string, error) {
	if binDir == "" {
		d, err := os.MkdirTemp("", "tracebridge-e2e-")
		if err != nil {
			return "", fmt.Errorf("building %s: %w", pkg, err)
		}
		binDir = d
	}
	out := filepath.Join(binDir, strconv.Itoa(n), filepath.Base(pkg))
	if runtime.GOOS == "windows" {
		out += ".exe"
	}
	cmd := exec.Command(goTool(), "build", "-o", out, module+"/"+pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", pkg, err, b)
	}
	return out, nil
}

// goTool finds the go command: in $GOROOT, on the PATH, else in the GOROOT
// the test was built with.
func goTool() string {
	if root := os.Getenv("GOROOT"); root != "" {
		p := filepath.Join(root, "bin", "go")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(build.Default.GOROOT, "bin", "go")
}
