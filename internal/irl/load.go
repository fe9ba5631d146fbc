package irl

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/tracebridge/tracebridge/internal/record"
)

// Load loads IRL files with the default limits. Each path is an IRL file
// or a directory, walked recursively for *.irl files in lexical order. All
// files are parsed, then names are resolved across them. Syntax and
// resolution errors come back as an ErrorList of *Error values naming file,
// line and column; I/O errors are returned as they are.
func Load(paths ...string) (*Model, error) { return Config{}.Load(paths...) }

// Load loads IRL files (see the package function Load).
func (c Config) Load(paths ...string) (*Model, error) {
	names, err := c.collect(paths)
	if err != nil {
		return nil, err
	}
	var files []*File
	var errs ErrorList
	for _, name := range names {
		f, err := c.parseFile(name)
		var perr *Error
		switch {
		case errors.As(err, &perr):
			errs = append(errs, perr)
		case err != nil:
			return nil, err
		default:
			files = append(files, f)
		}
	}
	if len(errs) > 0 {
		return nil, errs.sorted()
	}
	return build(files)
}

// LoadInto loads IRL files with the default limits and adds their record
// types to cat (see Model.AddTo). It returns the number of record types
// the files define.
func LoadInto(cat *record.Catalog, paths ...string) (int, error) {
	m, err := Load(paths...)
	if err != nil {
		return 0, err
	}
	return m.AddTo(cat)
}

// collect expands the paths into a list of files without duplicates.
func (c Config) collect(paths []string) ([]string, error) {
	if len(paths) == 0 {
		return nil, errors.New("irl: no files or directories given")
	}
	var names []string
	seen := map[string]bool{}
	add := func(name string) error {
		abs, err := filepath.Abs(name)
		if err != nil {
			return fmt.Errorf("irl: %w", err)
		}
		if seen[abs] {
			return nil
		}
		seen[abs] = true
		if len(names) == c.maxFiles() {
			return fmt.Errorf("irl: more than %d files", c.maxFiles())
		}
		names = append(names, name)
		return nil
	}
	for _, p := range paths {
		fi, err := os.Stat(p)
		if err != nil {
			return nil, fmt.Errorf("irl: %w", err)
		}
		if !fi.IsDir() {
			if err := add(p); err != nil {
				return nil, err
			}
			continue
		}
		found := false
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasSuffix(d.Name(), ".irl") {
				return nil
			}
			found = true
			return add(path)
		})
		if err != nil {
			return nil, fmt.Errorf("irl: %w", err)
		}
		if !found {
			return nil, fmt.Errorf("irl: no .irl files in %s", p)
		}
	}
	return names, nil
}

func (c Config) parseFile(name string) (*File, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("irl: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("irl: %w", err)
	}
	if fi.Size() > c.maxFileSize() {
		return nil, newError(Pos{File: name, Line: 1, Col: 1}, "file size %d over the limit %d", fi.Size(), c.maxFileSize())
	}
	src, err := io.ReadAll(io.LimitReader(f, c.maxFileSize()+1))
	if err != nil {
		return nil, fmt.Errorf("irl: %w", err)
	}
	return c.Parse(name, src)
}
