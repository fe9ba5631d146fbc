package jfrtest

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"strings"
)

// Weigh says how an event type weighs in a flame graph, for TopWeights:
// Weight is a number or Duration field ("" counts 1), Label a class field
// that stands above the stack ("" none).
type Weigh struct {
	Type, Weight, Label string
}

// TopWeights sums, with jfr print --json, the weights of the events of
// the given types per top frame: the label's class name when the event
// has one (arrays as Java source writes them: "byte[]"), else the top
// stack frame's "package.Class.method" (no parameters, no line). Events
// with a weight that is not positive are left out, as a flame graph
// leaves them out; so are events jfr print shows without a stack trace,
// whose weights noStack sums per label instead (a long event that began
// before a chunk rotation refers to a stack trace of the previous chunk,
// which jfr print does not resolve and tracebridge does: docs/jfr.md).
func (t Tools) TopWeights(ctx context.Context, path string, weighs []Weigh) (tops, noStack map[string]int64, err error) {
	byType := map[string]Weigh{}
	var types []string
	for _, w := range weighs {
		byType[w.Type] = w
		types = append(types, w.Type)
	}
	out, noStack := map[string]int64{}, map[string]int64{}
	err = t.PrintJSON(ctx, path, types, func(ev Event) error {
		w, ok := byType[ev.Type]
		if !ok {
			return nil
		}
		st, _ := ev.Values["stackTrace"].(map[string]any)
		frames, _ := st["frames"].([]any)
		n := int64(1)
		if w.Weight != "" {
			var err error
			if n, err = weightOf(ev.Values[w.Weight]); err != nil {
				return fmt.Errorf("%s.%s: %v", ev.Type, w.Weight, err)
			}
			if n <= 0 {
				return nil
			}
		}
		key := ""
		if w.Label != "" {
			if c, ok := ev.Values[w.Label].(map[string]any); ok {
				key = javaName(className(c))
			}
		}
		if st == nil || frames == nil {
			noStack[key] += n
			return nil
		}
		if key == "" && len(frames) > 0 {
			f, _ := frames[0].(map[string]any)
			m, _ := f["method"].(map[string]any)
			typ, _ := m["type"].(map[string]any)
			name, _ := m["name"].(string)
			key = className(typ) + "." + name
		}
		out[key] += n
		return nil
	})
	return out, noStack, err
}

// javaName writes an array class name ("[B", "[Lp.C;") as Java source
// does ("byte[]", "p.C[]").
func javaName(s string) string {
	n := len(s) - len(strings.TrimLeft(s, "["))
	if n == 0 {
		return s
	}
	elem := s[n:]
	prim := map[string]string{"Z": "boolean", "B": "byte", "C": "char", "S": "short", "I": "int", "J": "long", "F": "float", "D": "double"}
	if p, ok := prim[elem]; ok {
		elem = p
	} else {
		elem = strings.TrimSuffix(strings.TrimPrefix(elem, "L"), ";")
	}
	return elem + strings.Repeat("[]", n)
}

func className(c map[string]any) string {
	s, _ := c["name"].(string)
	return strings.ReplaceAll(s, "/", ".")
}

// weightOf reads a number or a Java Duration text as an int64.
func weightOf(x any) (int64, error) {
	switch v := x.(type) {
	case json.Number:
		return v.Int64()
	case string:
		return ParseDuration(v)
	case nil:
		return 0, nil
	}
	return 0, fmt.Errorf("weight %v (%T)", x, x)
}

// ParseDuration parses Java's Duration text (PT1H2M3.5S, PT-0.5S) into
// nanoseconds, saturated to the int64 range.
func ParseDuration(s string) (int64, error) {
	rest, ok := strings.CutPrefix(s, "PT")
	if !ok {
		return 0, fmt.Errorf("duration %q", s)
	}
	total := new(big.Rat)
	for rest != "" {
		i := strings.IndexAny(rest, "HMS")
		if i <= 0 {
			return 0, fmt.Errorf("duration %q", s)
		}
		v, ok := new(big.Rat).SetString(rest[:i])
		if !ok {
			return 0, fmt.Errorf("duration %q", s)
		}
		mul := map[byte]int64{'H': 3600e9, 'M': 60e9, 'S': 1e9}[rest[i]]
		total.Add(total, v.Mul(v, new(big.Rat).SetInt64(mul)))
		rest = rest[i+1:]
	}
	n := new(big.Int).Quo(total.Num(), total.Denom())
	if !n.IsInt64() {
		if n.Sign() < 0 {
			return math.MinInt64, nil
		}
		return math.MaxInt64, nil
	}
	return n.Int64(), nil
}
