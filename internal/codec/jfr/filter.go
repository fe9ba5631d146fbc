package jfr

import (
	"fmt"
	"path"
	"strings"
)

// NewFilter returns a Filter for Options.Filter that selects the event
// types matching any of the patterns. A pattern is a full name
// (jdk.ExecutionSample), a name without its package (ExecutionSample), or
// a glob with * and ? (jdk.GC*, shop.*, *Sample). Each pattern may also be
// a comma-separated list. No patterns select every type (nil filter).
func NewFilter(patterns ...string) (func(eventType string) bool, error) {
	var exact = map[string]bool{}
	var simple = map[string]bool{}
	var globs []string
	for _, p := range patterns {
		for _, p := range strings.Split(p, ",") {
			p = strings.TrimSpace(p)
			switch {
			case p == "":
			case strings.ContainsAny(p, "*?["):
				if _, err := path.Match(p, ""); err != nil {
					return nil, fmt.Errorf("event type pattern %q: %v", p, err)
				}
				globs = append(globs, p)
			case strings.Contains(p, "."):
				exact[p] = true
			default:
				simple[p] = true
			}
		}
	}
	if len(exact)+len(simple)+len(globs) == 0 {
		return nil, nil
	}
	return func(name string) bool {
		if exact[name] {
			return true
		}
		if len(simple) > 0 {
			short := name
			if i := strings.LastIndexByte(name, '.'); i >= 0 {
				short = name[i+1:]
			}
			if simple[short] {
				return true
			}
		}
		for _, g := range globs {
			if ok, _ := path.Match(g, name); ok {
				return true
			}
		}
		return false
	}, nil
}
