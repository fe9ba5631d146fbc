package api

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLayer: the API routes and knows the bridge through interfaces: it
// imports neither the engine, serve nor the configuration.
func TestLayer(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{join .Imports "\n"}}`, ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for imp := range strings.Lines(string(out)) {
		imp = strings.TrimSpace(imp)
		for _, no := range []string{"/internal/engine", "/internal/serve", "/internal/config"} {
			if strings.HasSuffix(imp, no) || strings.Contains(imp, no+"/") {
				t.Errorf("internal/api imports %s: it gets interfaces (Console, Counters) instead", imp)
			}
		}
	}
}
