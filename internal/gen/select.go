package gen

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tracebridge/tracebridge/internal/irl"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Select returns the types to generate code for, as `tracebridge gen`
// names them: every type of the catalogue with all (the built-in types,
// trace.Types, and those of the IRL files libs); the record types declared
// in each argument that names IRL (a .irl file or a directory), in
// declaration order; and the type each other argument names (see Find).
// libs add IRL for name lookup only. A type from IRL carries its
// declaration.
func Select(args, libs []string, all bool) ([]Type, error) {
	var names, files []string
	for _, p := range args {
		if isIRLPath(p) {
			files = append(files, p)
		} else {
			names = append(names, p)
		}
	}
	var model *irl.Model
	cat := trace.Types()
	if irlPaths := append(append([]string(nil), libs...), files...); len(irlPaths) > 0 {
		var err error
		model, err = irl.Load(irlPaths...)
		if err != nil {
			return nil, fmt.Errorf("record types: %w", err)
		}
		if _, err := model.AddTo(cat); err != nil {
			return nil, fmt.Errorf("record types: %w", err)
		}
	}

	var types []Type
	add := func(t *record.Type) {
		gt := Type{Record: t}
		if model != nil {
			if d := model.Decl(t.Name); d != nil {
				gt.Decl, gt.Model = d, model
			}
		}
		types = append(types, gt)
	}
	if all {
		for _, t := range cat.Types() {
			add(t)
		}
	}
	for _, f := range files {
		n, err := declaredTypes(model, cat, f, add)
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, fmt.Errorf("%s defines no record types (only templates or abstract entities)", f)
		}
	}
	for _, n := range names {
		t, err := Find(cat, n)
		if err != nil {
			return nil, err
		}
		add(t)
	}
	return types, nil
}

// isIRLPath reports whether a gen argument names IRL (a .irl file or a
// directory) rather than a record type.
func isIRLPath(arg string) bool {
	if strings.HasSuffix(arg, ".irl") {
		return true
	}
	fi, err := os.Stat(arg)
	return err == nil && fi.IsDir()
}

// declaredTypes adds the record types declared in the IRL file (or the files
// under the directory) path, in declaration order, and returns how many.
func declaredTypes(m *irl.Model, cat *record.Catalog, path string, add func(*record.Type)) (int, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, d := range m.Decls() {
		if !d.IsRecord() {
			continue
		}
		f, err := filepath.Abs(m.File(d).Name)
		if err != nil {
			return 0, err
		}
		if f != abs && !strings.HasPrefix(f, abs+string(filepath.Separator)) {
			continue
		}
		t := cat.Lookup(d.FullName())
		if t == nil {
			return 0, fmt.Errorf("%s: record type %s is not in the catalogue", d.Pos, d.FullName())
		}
		add(t)
		n++
	}
	return n, nil
}
