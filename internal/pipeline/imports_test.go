package pipeline_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/tracebridge/tracebridge/"

// TestImportRules keeps the house: components (sources, stages, sinks)
// never import the engine, serve, the configuration or the public bridge;
// the record model imports neither codecs nor the pipeline; codecs do no
// I/O and know no pipeline; stages import no sinks or sources; sources
// import no sinks; the trace package imports only the record model and
// the JSON string escaper.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	checked := 0
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkg := strings.TrimPrefix(p.ImportPath, module)
		is := func(prefix string) bool { return pkg == prefix || strings.HasPrefix(pkg, prefix+"/") }
		for _, imp := range p.Imports {
			dep := strings.TrimPrefix(imp, module)
			internal := dep != imp
			uses := func(prefix string) bool { return internal && (dep == prefix || strings.HasPrefix(dep, prefix+"/")) }
			bad := func(why string) { t.Errorf("%s imports %s: %s", pkg, dep, why) }
			component := is("internal/source") || is("internal/stage") || is("internal/sink")
			if component && (uses("internal/engine") || uses("internal/serve") || uses("internal/config") || uses("bridge")) {
				bad("components never import the engine, serve, the configuration or the public bridge")
			}
			if is("internal/record") && (uses("internal/codec") || uses("internal/pipeline")) {
				bad("the record model imports neither codecs nor the pipeline")
			}
			testHelper := strings.HasSuffix(pkg, "test") // test support such as codec/zico/zicotest
			if is("internal/codec") && !testHelper && (uses("internal/pipeline") || imp == "os" || imp == "net" || imp == "net/http") {
				bad("codecs do no I/O and know no pipeline")
			}
			if is("internal/stage") && (uses("internal/sink") || uses("internal/source")) {
				bad("stages never import sinks or sources")
			}
			if is("internal/source") && uses("internal/sink") {
				bad("sources never import sinks")
			}
			if is("internal/trace") && internal && !uses("internal/record") && !uses("internal/jsonstr") {
				bad("the trace package imports only the record model and the JSON string escaper")
			}
		}
		checked++
	}
	if checked < 20 {
		t.Fatalf("only %d packages listed", checked)
	}
}
