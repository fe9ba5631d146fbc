package api

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestGoldenAnswers: the answers of the main endpoints over fixed traces
// are those in testdata/golden (go test ./internal/api -update rewrites
// them): the shapes the web UI is built on, kept stable on purpose.
func TestGoldenAnswers(t *testing.T) {
	base := time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC)
	traces := mixed(base)
	e := newEnv(t, nil, traces...)
	shopID, kieker := traces[9].ID.String(), traces[45].ID.String()
	for _, c := range []struct{ name, path string }{
		{"search", "/api/v1/traces?limit=3&errors"},
		{"view", "/api/v1/traces/" + shopID + "/view?maxSpans=4&reveal=11"},
		{"span", "/api/v1/traces/" + shopID + "/spans/11"},
		{"kieker-span", "/api/v1/traces/" + kieker + "/spans/1"},
		{"find", "/api/v1/traces/" + shopID + "/find?q=svc-2"},
		{"rank", "/api/v1/traces/" + kieker + "/rank"},
		{"flame", "/api/v1/traces/" + kieker + "/flame"},
		{"critical-path", "/api/v1/traces/" + shopID + "/critical-path"},
		{"compare", "/api/v1/compare?a=" + traces[0].ID.String() + "&b=" + shopID},
		{"pivot", "/api/v1/pivot?key=customer"},
		{"names", "/api/v1/names"},
		{"graph", "/api/v1/analysis/graph?kind=assembly-component&host=beta"},
		{"operations", "/api/v1/analysis/operations?host=beta"},
		{"jaeger-trace", "/api/traces/" + jaegerID(traces[45].ID)},
		{"jaeger-operations", "/api/operations?service=svc-1"},
	} {
		var pretty bytes.Buffer
		if err := json.Indent(&pretty, e.get(c.path, nil), "", "  "); err != nil {
			t.Fatal(err)
		}
		file := filepath.Join("testdata", "golden", c.name+".json")
		if *update {
			os.MkdirAll(filepath.Dir(file), 0o755)
			if err := os.WriteFile(file, pretty.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatalf("%v (run go test ./internal/api -update)", err)
		}
		if !bytes.Equal(pretty.Bytes(), want) {
			t.Errorf("GET %s differs from %s (run with -update after a deliberate change):\n%s", c.path, file, pretty.Bytes())
		}
	}
}
