package properties

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParse(t *testing.T) {
	src := `# Kieker settings
! another comment
kieker.monitoring.name=KIEKER
kieker.monitoring.hostname =  myhost
kieker.monitoring.writer.filesystem.FileWriter.customStoragePath: /tmp/logs
key\ with\ spaces value with spaces
multi=first \
      second
path=C:\\logs\\kieker
uni=caf\u00e9
empty=
`
	p, err := Parse("t.properties", strings.NewReader(src))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"kieker.monitoring.name":     "KIEKER",
		"kieker.monitoring.hostname": "myhost",
		"kieker.monitoring.writer.filesystem.FileWriter.customStoragePath": "/tmp/logs",
		"key with spaces": "value with spaces",
		"multi":           "first second",
		"path":            `C:\logs\kieker`,
		"uni":             "café",
		"empty":           "",
	}
	if d := cmp.Diff(want, p.Values); d != "" {
		t.Fatalf("values (-want +got):\n%s", d)
	}
	if len(p.Keys) != len(want) || p.Keys[0] != "kieker.monitoring.name" {
		t.Fatalf("keys out of order: %v", p.Keys)
	}
}

func TestParsePropertiesError(t *testing.T) {
	_, err := Parse("bad.properties", strings.NewReader("a=1\nb=\\u12\n"))
	if err == nil || !strings.Contains(err.Error(), "bad.properties:2") {
		t.Fatalf("error %v does not name the line", err)
	}
}
