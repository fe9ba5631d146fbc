// Command testreport reads `go test -json` from stdin, prints the output of
// failed tests and a per-package summary, and exits non-zero when a test or
// package failed or when any test was skipped (CI must not pass with an
// integration test silently skipped).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	outputs := map[string]*strings.Builder{}
	var failed, skipped []string
	pkgResult := map[string]string{}
	// Tests that started and never ended: a test binary that exits in the
	// middle of a test (os.Exit, a crash) leaves its output under them.
	unended := map[string]bool{}
	pkgTime := map[string]float64{}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Println(sc.Text()) // build errors and the like
			continue
		}
		key := e.Package + " " + e.Test
		if e.Test != "" {
			switch e.Action {
			case "run":
				unended[key] = true
			case "pass", "fail", "skip":
				delete(unended, key)
			}
		}
		switch e.Action {
		case "output":
			b := outputs[key]
			if b == nil {
				b = &strings.Builder{}
				outputs[key] = b
			}
			b.WriteString(e.Output)
		case "fail":
			if e.Test != "" {
				failed = append(failed, key)
			} else {
				pkgResult[e.Package] = "FAIL"
				pkgTime[e.Package] = e.Elapsed
			}
		case "skip":
			if e.Test != "" {
				skipped = append(skipped, key)
			} else if _, ok := pkgResult[e.Package]; !ok {
				pkgResult[e.Package] = "no tests"
			}
		case "pass":
			if e.Test == "" {
				pkgResult[e.Package] = "ok"
				pkgTime[e.Package] = e.Elapsed
			}
		}
	}
	for _, k := range failed {
		fmt.Printf("--- FAIL: %s\n%s\n", k, outputs[k])
	}
	for _, k := range skipped {
		fmt.Printf("--- SKIP: %s\n%s\n", k, outputs[k])
	}
	pkgs := make([]string, 0, len(pkgResult))
	for p := range pkgResult {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	bad := len(failed) > 0 || len(skipped) > 0
	for _, p := range pkgs {
		if pkgResult[p] == "FAIL" {
			bad = true
			for k := range unended {
				if strings.HasPrefix(k, p+" ") {
					fmt.Printf("--- UNFINISHED (the test binary ended during it): %s\n%s\n", k, outputs[k])
				}
			}
			if b := outputs[p+" "]; b != nil {
				fmt.Print(b.String())
			}
		}
		fmt.Printf("%-8s %s (%.1fs)\n", pkgResult[p], p, pkgTime[p])
	}
	if len(skipped) > 0 {
		fmt.Printf("%d tests were skipped: CI requires every test to run\n", len(skipped))
	}
	if bad {
		os.Exit(1)
	}
}
