package flame

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/record"
)

// ThreadOf names a JFR sample's thread: its name and Java thread id (the
// sampledThread or eventThread field), "" for a record without one. It
// suits Aggregator.Group.
func ThreadOf(r *record.Record) string {
	for _, f := range []string{"sampledThread", "eventThread"} {
		name, ok := r.Field(f)
		if !ok {
			continue
		}
		id, _ := r.Field(f + ".javaThreadId")
		return name.Str() + " #" + strconv.FormatInt(id.Int(), 10)
	}
	return ""
}

// WriteFiles writes what a has aggregated from inputs as folded stacks and
// SVG flame graphs: PREFIX.folded and PREFIX.svg of all samples and, when
// a groups or has windows, a pair per profile, PREFIX-GROUP-START.folded
// and .svg (GROUP made safe for file names). written is told each pair's
// name (without the extension) once both files are written.
func (a *Aggregator) WriteFiles(prefix string, inputs []string, written func(name string)) error {
	merged := a.Merged()
	title, unit := "CPU samples", "samples"
	switch {
	case a.Kind != nil:
		title, unit = a.Kind.Title, a.Kind.Unit
	case len(a.Types) != 1 || a.Types[0] != "jdk.ExecutionSample":
		title = strings.Join(a.Types, ", ")
	}
	write := func(name string, s *Stacks, subtitle string) error {
		if err := writeFile(name+".folded", s.WriteFolded); err != nil {
			return err
		}
		if err := writeFile(name+".svg", func(w io.Writer) error {
			return s.WriteSVG(w, SVGOptions{Title: title, Subtitle: subtitle, Unit: unit})
		}); err != nil {
			return err
		}
		written(name)
		return nil
	}
	if err := write(prefix, merged, fmt.Sprintf("%d %s of %s", merged.Total(), unit, strings.Join(inputs, ", "))); err != nil {
		return err
	}
	if a.Group == nil && a.Window <= 0 {
		return nil
	}
	for _, p := range a.Profiles() {
		name := prefix
		sub := fmt.Sprintf("%d %s", p.Stacks.Total(), unit)
		if a.Group != nil {
			name += "-" + fileSafe(p.Group)
			sub += " of " + p.Group
		}
		if a.Window > 0 {
			start := time.Unix(0, p.Start).UTC()
			name += "-" + start.Format("20060102T150405.000Z")
			sub += fmt.Sprintf(", %s + %v", start.Format(time.RFC3339Nano), a.Window)
		}
		if err := write(name, p.Stacks, sub); err != nil {
			return err
		}
	}
	return nil
}

// fileSafe makes a group name usable in a file name.
func fileSafe(s string) string {
	if s == "" {
		return "none"
	}
	s = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, s)
	if len(s) > 80 {
		s = s[:80]
	}
	return s
}

// writeFile creates name (and its directory) and fills it with write.
func writeFile(name string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
