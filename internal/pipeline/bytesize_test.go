package pipeline

import "testing"

// TestByteSizeString: a size a user gave prints as it was given, and
// every printed size parses back to the same number of bytes.
func TestByteSizeString(t *testing.T) {
	for _, tt := range []struct {
		in, want string
	}{
		{"2GiB", "2GiB"}, {"500MB", "500MB"}, {"1536KiB", "1536KiB"}, {"1.5MiB", "1536KiB"},
		{"100", "100B"}, {"0", "0B"}, {"1TiB", "1TiB"}, {"3TB", "3TB"}, {"1000", "1KB"}, {"1024", "1KiB"},
		{"2147483648", "2GiB"},
	} {
		n, err := ParseByteSize(tt.in)
		if err != nil {
			t.Fatalf("%s: %v", tt.in, err)
		}
		got := ByteSize(n).String()
		if got != tt.want {
			t.Errorf("%s: %q, want %q", tt.in, got, tt.want)
		}
		if back, err := ParseByteSize(got); err != nil || back != n {
			t.Errorf("%s: %q parses back as %d (%v), want %d", tt.in, got, back, err, n)
		}
	}
}
