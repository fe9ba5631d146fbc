package forward

import (
	"errors"
	"testing"
)

// FuzzParseURL: no panic; an accepted URL names a port and prints back to
// itself; a rejected one wraps ErrBadURL.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{
		"kieker-tcp://127.0.0.1:10133", "kdb-tcp://[::1]:5678/", "kdb-tcp://host", "tcp://h:1",
		"kieker-tcp://h:99999", "kieker-tcp:h:1", "kieker-tcp://u@h:1", "kieker-tcp://h:1/p?q#f",
		"kieker-tcp://[fe80::1%25eth0]:1", "", "://", "kieker-tcp://%zz:1",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		tg, err := ParseURL(raw)
		if err != nil {
			if !errors.Is(err, ErrBadURL) {
				t.Fatalf("%q: error %v does not wrap ErrBadURL", raw, err)
			}
			return
		}
		if tg.Protocol != Kieker && tg.Protocol != KDB || tg.Addr == "" {
			t.Fatalf("%q: accepted as %+v", raw, tg)
		}
		back, err := ParseURL(tg.String())
		if err != nil || back != tg {
			t.Fatalf("%q: %q parses back as %+v, %v", raw, tg.String(), back, err)
		}
	})
}
