package pipeline_test

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/tracebridge/tracebridge/"

// under reports whether a module-relative package path is one of prefixes
// or below one.
func under(pkg string, prefixes ...string) bool {
	for _, p := range prefixes {
		if pkg == p || strings.HasPrefix(pkg, p+"/") {
			return true
		}
	}
	return false
}

// importRule is one rule of the house: no package that from accepts may
// import a package that bans accepts. dep is the import's path relative
// to the module ("" for a package outside it), imp its full path.
type importRule struct {
	name string
	from func(pkg string) bool
	bans func(dep, imp string) bool
}

// uses returns a ban of the module's packages under prefixes.
func uses(prefixes ...string) func(dep, imp string) bool {
	return func(dep, _ string) bool { return dep != "" && under(dep, prefixes...) }
}

// in returns a from of the packages under prefixes.
func in(prefixes ...string) func(pkg string) bool {
	return func(pkg string) bool { return under(pkg, prefixes...) }
}

var importRules = []importRule{
	{"components never import the engine, serve, the configuration or the public bridge",
		in("internal/source", "internal/stage", "internal/sink"),
		uses("internal/engine", "internal/serve", "internal/config", "bridge")},
	{"the record model imports neither codecs nor the pipeline",
		in("internal/record"), uses("internal/codec", "internal/pipeline")},
	{"codecs do no I/O and know no pipeline",
		func(pkg string) bool {
			return under(pkg, "internal/codec") && !strings.HasSuffix(pkg, "test") // test support such as codec/zico/zicotest
		},
		func(dep, imp string) bool {
			return uses("internal/pipeline")(dep, imp) || imp == "os" || imp == "net" || imp == "net/http"
		}},
	{"stages never import sinks or sources",
		in("internal/stage"), uses("internal/sink", "internal/source")},
	{"sources never import sinks",
		in("internal/source"), uses("internal/sink")},
	{"the trace package imports only the record model and the JSON string escaper",
		in("internal/trace"), func(dep, _ string) bool { return dep != "" && !under(dep, "internal/record", "internal/jsonstr") }},
	{"storage knows no pipeline",
		in("internal/store", "internal/objstore"),
		uses("internal/pipeline", "internal/engine", "internal/serve", "internal/config", "internal/source", "internal/sink", "internal/stage")},
	{"the API knows no engine or config",
		in("internal/api"), uses("internal/engine", "internal/serve", "internal/config")},
	{"sinks and sources import no stages",
		in("internal/sink", "internal/source"), uses("internal/stage")},
	// The public bridge package embeds a bridge and hands out sinks
	// (forward, the Kieker log writer), so only stream and probe are held
	// to this.
	{"the public stream and probe packages import no sink",
		in("stream", "probe"), uses("internal/sink")},
}

// checkImports reads `go list -json=ImportPath,Imports` output and returns
// every import that breaks a rule ("pkg imports dep: rule"), and how many
// packages it read.
func checkImports(r io.Reader) (bad []string, packages int, err error) {
	dec := json.NewDecoder(r)
	for {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			return nil, 0, err
		}
		packages++
		pkg, ok := strings.CutPrefix(p.ImportPath, module)
		if !ok {
			continue
		}
		for _, imp := range p.Imports {
			dep, _ := strings.CutPrefix(imp, module)
			if dep == imp {
				dep = ""
			}
			for _, r := range importRules {
				if r.from(pkg) && r.bans(dep, imp) {
					shown := dep
					if shown == "" {
						shown = imp
					}
					bad = append(bad, fmt.Sprintf("%s imports %s: %s", pkg, shown, r.name))
				}
			}
		}
	}
	return bad, packages, nil
}

// listImports runs go list with args in dir ("": here) and returns what
// checkImports reports of its output, and how many packages it listed.
func listImports(t *testing.T, dir string, args ...string) (bad []string, packages int) {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	bad, packages, err = checkImports(strings.NewReader(string(out)))
	if err != nil {
		t.Fatal(err)
	}
	return bad, packages
}

// TestImportRules keeps the house (importRules): components (sources,
// stages, sinks) never import the engine, serve, the configuration or
// the public bridge; the record model imports neither codecs nor the
// pipeline; codecs do no I/O and know no pipeline; stages import no sinks
// or sources; sources import no sinks; the trace package imports only the
// record model and the JSON string escaper; storage knows no pipeline; the API knows no engine or
// config; sinks and sources import no stages; the public stream and probe
// packages import no sink.
func TestImportRules(t *testing.T) {
	bad, checked := listImports(t, "", "-json=ImportPath,Imports", module+"...")
	for _, b := range bad {
		t.Error(b)
	}
	if checked < 20 {
		t.Fatalf("only %d packages listed", checked)
	}
}

// TestImportRulesBite: a file that brings back an edge the rules forbid
// (added through a go list overlay, so the tree is untouched) is
// reported under the rule's name.
func TestImportRulesBite(t *testing.T) {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	violations := []struct{ pkg, name, imports, rule string }{
		{"internal/store", "store", "internal/pipeline", "storage knows no pipeline"},
		{"internal/objstore", "objstore", "internal/sink/store", "storage knows no pipeline"},
		{"internal/source/tcp", "tcp", "internal/stage/timeunit", "sinks and sources import no stages"},
		{"internal/sink/stream", "stream", "internal/stage/control", "sinks and sources import no stages"},
		{"stream", "stream", "internal/sink/kiekerlog", "the public stream and probe packages import no sink"},
		{"internal/api", "api", "internal/engine", "the API knows no engine or config"},
		{"internal/api", "api", "internal/config", "the API knows no engine or config"},
		{"internal/apiclient", "apiclient", "internal/store", ""}, // not a rule: nothing reported
	}
	replace := map[string]string{}
	var pkgs []string
	for i, v := range violations {
		src := filepath.Join(dir, fmt.Sprintf("bite%d.go", i))
		body := fmt.Sprintf("package %s\n\nimport _ %q\n", v.name, module+v.imports)
		if err := os.WriteFile(src, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		replace[filepath.Join(root, v.pkg, fmt.Sprintf("zz_import_rules_bite%d.go", i))] = src
		pkgs = append(pkgs, module+v.pkg)
	}
	overlay, _ := json.Marshal(map[string]any{"Replace": replace})
	ovf := filepath.Join(dir, "overlay.json")
	if err := os.WriteFile(ovf, overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	bad, _ := listImports(t, root, append([]string{"-e", "-overlay", ovf, "-json=ImportPath,Imports"}, pkgs...)...)
	for _, v := range violations {
		want := fmt.Sprintf("%s imports %s: %s", v.pkg, v.imports, v.rule)
		if v.rule == "" {
			if slices.ContainsFunc(bad, func(b string) bool { return strings.HasPrefix(b, v.pkg+" imports "+v.imports+":") }) {
				t.Errorf("reported without a rule: %s → %s in %q", v.pkg, v.imports, bad)
			}
			continue
		}
		if !slices.Contains(bad, want) {
			t.Errorf("not reported: %s\ngot %q", want, bad)
		}
	}
}
