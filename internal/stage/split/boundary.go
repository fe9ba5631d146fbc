package split

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
)

// Errors callers decide on.
var (
	// ErrSpec: a boundary spec is not well formed (unknown kind, a bad N,
	// a pattern that does not compile). Command lines report it as a usage
	// error.
	ErrSpec = errors.New("bad boundary spec")
	// ErrMapFile: a map: spec's file cannot be read or holds a bad line.
	// Command lines report it as a configuration error.
	ErrMapFile = errors.New("bad boundary map file")
)

// Boundaries assign classes to components. They are built by Parse from
// specs tried in order; the first that matches a class names its component.
// A class no spec matches is in the unnamed component "" (see the package
// documentation: that is a component of its own, so calls between it and a
// named component cross). Boundaries are immutable and safe for concurrent
// use.
type Boundaries struct {
	rules []rule
	specs []string
}

type rule struct {
	segments int            // package:N; 0 for a pattern rule
	re       *regexp.Regexp // pattern rules
	name     string         // the component a pattern rule assigns
}

// Parse compiles boundary specs. Each argument holds one or more specs
// separated by ';':
//
//	package:N           the first N segments of the class's package
//	regex:P1 P2 …       each pattern (whitespace separated) is a component
//	                    named by the pattern; patterns match the whole class
//	map:FILE            lines pattern=component (regular expressions matching
//	                    the whole class name); '#' starts a comment line
//
// A syntax error wraps ErrSpec and names the spec; a map file that cannot
// be read or has a bad line wraps ErrMapFile and names the file and line.
func Parse(specs ...string) (*Boundaries, error) {
	b := &Boundaries{}
	for _, arg := range specs {
		for _, spec := range strings.Split(arg, ";") {
			spec = strings.TrimSpace(spec)
			if spec == "" {
				continue
			}
			if err := b.add(spec); err != nil {
				return nil, err
			}
			b.specs = append(b.specs, spec)
		}
	}
	if len(b.rules) == 0 {
		return nil, fmt.Errorf("boundary spec %q: %w: no boundary given (want package:N, regex:PATTERN… or map:FILE)", strings.Join(specs, ";"), ErrSpec)
	}
	return b, nil
}

// String returns the specs in a canonical form (joined with ';').
func (b *Boundaries) String() string { return strings.Join(b.specs, ";") }

func (b *Boundaries) add(spec string) error {
	kind, arg, ok := strings.Cut(spec, ":")
	if !ok {
		return fmt.Errorf("boundary spec %q: %w: want package:N, regex:PATTERN… or map:FILE", spec, ErrSpec)
	}
	switch strings.TrimSpace(kind) {
	case "package":
		n, err := strconv.Atoi(strings.TrimSpace(arg))
		if err != nil || n < 1 {
			return fmt.Errorf("boundary spec %q: %w: N must be a positive number of package segments", spec, ErrSpec)
		}
		b.rules = append(b.rules, rule{segments: n})
	case "regex":
		pats := strings.Fields(arg)
		if len(pats) == 0 {
			return fmt.Errorf("boundary spec %q: %w: no pattern", spec, ErrSpec)
		}
		for _, p := range pats {
			re, err := compile(p)
			if err != nil {
				return fmt.Errorf("boundary spec %q: %w: pattern %q: %v", spec, ErrSpec, p, err)
			}
			b.rules = append(b.rules, rule{re: re, name: p})
		}
	case "map":
		path := strings.TrimSpace(arg)
		if path == "" {
			return fmt.Errorf("boundary spec %q: %w: no file", spec, ErrSpec)
		}
		rules, err := readMap(path)
		if err != nil {
			return fmt.Errorf("boundary spec %q: %w", spec, err)
		}
		b.rules = append(b.rules, rules...)
	default:
		return fmt.Errorf("boundary spec %q: %w: unknown kind %q (want package, regex or map)", spec, ErrSpec, kind)
	}
	return nil
}

// compile anchors a pattern so that it must match the whole class name.
func compile(p string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + p + `)$`)
}

// maxMapLine bounds a line of a map file.
const maxMapLine = 64 << 10

func readMap(path string) ([]rule, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMapFile, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4096), maxMapLine)
	var rules []rule
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		pat, comp, ok := strings.Cut(text, "=")
		pat, comp = strings.TrimSpace(pat), strings.TrimSpace(comp)
		if !ok || pat == "" || comp == "" {
			return nil, fmt.Errorf("%w: %s: line %d: want pattern=component", ErrMapFile, path, line)
		}
		re, err := compile(pat)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: line %d: pattern %q: %v", ErrMapFile, path, line, pat, err)
		}
		rules = append(rules, rule{re: re, name: comp})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %s: line %d: %v", ErrMapFile, path, line+1, err)
	}
	if len(rules) == 0 {
		return nil, fmt.Errorf("%w: %s: no pattern=component line", ErrMapFile, path)
	}
	return rules, nil
}

// Component returns the component of a class (a fully qualified class
// name such as a.b.c.D), or "" when no spec matches.
func (b *Boundaries) Component(class string) string {
	for i := range b.rules {
		r := &b.rules[i]
		if r.re == nil {
			return packagePrefix(class, r.segments)
		}
		if r.re.MatchString(class) {
			return r.name
		}
	}
	return ""
}

// packagePrefix returns the first n segments of the package of class
// (everything before its last '.'); a package with fewer segments is
// returned whole, the default package as "".
func packagePrefix(class string, n int) string {
	end := strings.LastIndexByte(class, '.')
	if end < 0 {
		return ""
	}
	pkg := class[:end]
	for i := 0; i < len(pkg); i++ {
		if pkg[i] == '.' {
			n--
			if n == 0 {
				return pkg[:i]
			}
		}
	}
	return pkg
}

// ClassOf returns the class of an event: classSignature when it is set,
// else the class part of the operation signature (Kieker's form
// "modifiers returnType a.b.C.method(params)": the qualified name before
// '(' up to its last '.').
func ClassOf(classSignature, operationSignature string) string {
	if classSignature != "" {
		return classSignature
	}
	return classOfOperation(operationSignature)
}

func classOfOperation(op string) string {
	name := op
	if i := strings.IndexByte(name, '('); i >= 0 {
		name = name[:i]
	}
	name = strings.TrimSpace(name)
	if i := strings.LastIndexAny(name, " \t"); i >= 0 {
		name = name[i+1:]
	}
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		return name[:i]
	}
	return ""
}
