package record

import (
	"fmt"
	"slices"
	"sync"
)

// Catalog maps fully qualified record class names to types. Besides the
// canonical names it knows aliases: legacy names under which older Kieker
// versions wrote the same record.
type Catalog struct {
	mu      sync.RWMutex
	types   map[string]*Type
	aliases map[string]string
}

// NewCatalog returns an empty catalogue.
func NewCatalog() *Catalog {
	return &Catalog{types: map[string]*Type{}, aliases: map[string]string{}}
}

// Builtin returns a new catalogue holding Kieker's record types and their
// legacy names. Each call returns an independent catalogue that shares the
// (immutable) built-in types, so callers may Add their own.
func Builtin() *Catalog {
	builtinOnce.Do(buildBuiltin)
	c := NewCatalog()
	for _, t := range builtinTypes {
		c.types[t.Name] = t
	}
	for old, canonical := range builtinAliases {
		c.aliases[old] = canonical
	}
	return c
}

// Add registers t. Adding a type whose name is already registered is
// allowed only when the fields agree (so loading Kieker's own IRL files over
// the built-in catalogue is harmless); otherwise it is an error naming both
// layouts.
func (c *Catalog) Add(t *Type) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.types[t.Name]; ok {
		if old.SameFields(t) {
			return nil
		}
		return fmt.Errorf("record type %s: fields %s conflict with the known type %s", t.Name, t, old)
	}
	if canonical, ok := c.aliases[t.Name]; ok {
		return fmt.Errorf("record type %s: name is a legacy alias of %s", t.Name, canonical)
	}
	c.types[t.Name] = t
	return nil
}

// AddAlias makes old another name of the registered type canonical.
func (c *Catalog) AddAlias(old, canonical string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.types[canonical]; !ok {
		return fmt.Errorf("record alias %s: unknown type %s", old, canonical)
	}
	if _, ok := c.types[old]; ok {
		return fmt.Errorf("record alias %s: name is already a type", old)
	}
	c.aliases[old] = canonical
	return nil
}

// Lookup returns the type registered under name or one of its aliases, or
// nil when the name is unknown.
func (c *Catalog) Lookup(name string) *Type {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if t, ok := c.types[name]; ok {
		return t
	}
	if canonical, ok := c.aliases[name]; ok {
		return c.types[canonical]
	}
	return nil
}

// Types returns all registered types sorted by name.
func (c *Catalog) Types() []*Type {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make([]*Type, 0, len(c.types))
	for _, t := range c.types {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b *Type) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// Aliases returns a copy of the legacy-name table (old name → canonical).
func (c *Catalog) Aliases() map[string]string {
	c.mu.RLock()
	defer c.mu.RUnlock()
	out := make(map[string]string, len(c.aliases))
	for k, v := range c.aliases {
		out[k] = v
	}
	return out
}
