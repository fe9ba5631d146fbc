package sharedstate

import (
	"testing"

	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
)

// FuzzKeys: any host or type name makes a valid bucket key that reads
// back as the name; any key and value of the control bucket (another
// node's, or garbage) gives a command or is ignored, never a panic, and a
// sample key's command keeps a rate above 0 and at most 1.
func FuzzKeys(f *testing.F) {
	for _, s := range []string{"shop-1", "kieker.common.record.flow.trace.TraceMetadata", "host with spaces/and:colons", "ü", ".", "a.b.", "\x00"} {
		f.Add(s, "off")
	}
	f.Add("type.", "")
	f.Add("sample.dHlwZQ", "0.5")
	f.Add("sample.dHlwZQ", "NaN")
	f.Add("sample.dHlwZQ", "-1")
	f.Add("host.!!!", "off")
	f.Fuzz(func(t *testing.T, name, val string) {
		if name != "" {
			for _, prefix := range []string{hostPrefix, typePrefix, hostOffKey, samplePrefix, typeNamePrefix} {
				key := nameKey(prefix, name)
				if !validKey(key) {
					t.Fatalf("name %q: key %q is not a valid bucket key", name, key)
				}
				if got, ok := keyName(prefix, key); !ok || got != name {
					t.Fatalf("name %q: key %q reads back as %q, %v", name, key, got, ok)
				}
			}
		}
		req, ok := request(name, val)
		if ok && req.Op == streammsg.OpSample && !(req.Rate > 0 && req.Rate <= 1) {
			t.Fatalf("key %q value %q: sample rate %v", name, val, req.Rate)
		}
	})
}

// validKey is the bucket's rule for keys (nats.go's keyValid): letters,
// digits, - _ / = and dots, not first or last.
func validKey(key string) bool {
	if key == "" || key[0] == '.' || key[len(key)-1] == '.' {
		return false
	}
	for _, c := range []byte(key) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '/', c == '=', c == '.':
		default:
			return false
		}
	}
	return true
}
