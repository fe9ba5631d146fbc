package kieker

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/google/go-cmp/cmp"
)

func tableOf(s *Strings) map[int32]string {
	m := map[int32]string{}
	for id, v := range s.All() {
		m[id] = v
	}
	return m
}

func TestReadMap(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[int32]string
		err  string
		kind error
	}{
		{"kieker", "$0=kieker.common.record.misc.KiekerMetadataRecord\n$1=<no-session-id>\n",
			map[int32]string{0: "kieker.common.record.misc.KiekerMetadataRecord", 1: "<no-session-id>"}, "", nil},
		{"no dollar, CRLF, empty lines, no final newline", "0=a\r\n\r\n\n2=b=c\r\n+3=d",
			map[int32]string{0: "a", 2: "b=c", 3: "d"}, "", nil},
		{"BOM", "\xEF\xBB\xBF$0=a\n", map[int32]string{0: "a"}, "", nil},
		{"escapes as ≤1.12 wrote them and 2.0 reads them", `$0=C:\\dir\nnext\rx\t\\` + "\n" + `$1=trailing\` + "\n",
			map[int32]string{0: "C:\\dir\nnext\rx\\t\\", 1: `trailing\`}, "", nil},
		{"empty value", "$5=\n", map[int32]string{5: ""}, "", nil},
		{"negative and sparse ids", "$-7=neg\n$2000000000=big\n", map[int32]string{-7: "neg", 2000000000: "big"}, "", nil},
		{"same entry twice", "$1=a\n$1=a\n", map[int32]string{1: "a"}, "", nil},

		{"no equals", "$0=a\nkieker.Foo\n", map[int32]string{0: "a"}, `line 2: no '=' in "kieker.Foo"`, ErrMalformed},
		{"id not a number", "$0=a\n$x=b\n", map[int32]string{0: "a"}, `line 2: id "$x" is not a number`, ErrMalformed},
		{"id out of range", "$2147483648=b\n", map[int32]string{}, `line 1: id "$2147483648" is not a number`, ErrMalformed},
		{"duplicate id", "$0=a\n$0=b\n", map[int32]string{0: "a"}, `line 2: string id 0 already registered as "a", not "b"`, ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, oneByte := range []bool{false, true} {
				s := NewStrings(0)
				r := iotestReader(tt.in, oneByte)
				err := ReadMap(r, s, 0)
				if tt.err != "" {
					if err == nil || !strings.HasPrefix(err.Error(), tt.err) || !errors.Is(err, tt.kind) {
						t.Errorf("error %v, want %s (%v)", err, tt.err, tt.kind)
					}
				} else if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, tableOf(s)); diff != "" {
					t.Errorf("table (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func iotestReader(s string, oneByte bool) io.Reader {
	if oneByte {
		return iotest.OneByteReader(strings.NewReader(s))
	}
	return strings.NewReader(s)
}

func TestReadMapOneByteReader(t *testing.T) {
	in := "$0=a\r\n$1=bb\\\\\n\n$2=" + strings.Repeat("y", 100000) + "\n"
	s := NewStrings(0)
	if err := ReadMap(iotest.OneByteReader(strings.NewReader(in)), s, 0); err != nil {
		t.Fatal(err)
	}
	if v, _ := s.Get(2); len(v) != 100000 || s.Len() != 3 {
		t.Errorf("%d entries, id 2 of %d bytes", s.Len(), len(v))
	}
	if v, _ := s.Get(1); v != `bb\` {
		t.Errorf("id 1 = %q", v)
	}
}

func TestReadMapLimits(t *testing.T) {
	s := NewStrings(0)
	err := ReadMap(strings.NewReader("$0=a\n$1="+strings.Repeat("x", 200000)+"\n"), s, 100000)
	if err == nil || !errors.Is(err, ErrLimit) || !strings.HasPrefix(err.Error(), "line 2: longer than the limit 100000 bytes") {
		t.Errorf("error %v", err)
	}
	s = NewStrings(2)
	err = ReadMap(strings.NewReader("$0=a\n$1=b\n$2=c\n"), s, 0)
	if err == nil || !errors.Is(err, ErrLimit) || !strings.HasPrefix(err.Error(), "line 3: ") {
		t.Errorf("error %v", err)
	}
	err = ReadMap(iotest.ErrReader(errors.New("disk on fire")), NewStrings(0), 0)
	if err == nil || !strings.Contains(err.Error(), "disk on fire") {
		t.Errorf("error %v", err)
	}
}

func TestAppendMapEntry(t *testing.T) {
	tests := []struct {
		id   int32
		s    string
		want string
	}{
		{0, "kieker.common.record.misc.KiekerMetadataRecord", "$0=kieker.common.record.misc.KiekerMetadataRecord\n"},
		{12, `C:\dir`, `$12=C:\\dir` + "\n"},
		{3, "two\nlines\r", `$3=two\nlines\r` + "\n"},
		{-1, "a=b;c", "$-1=a=b;c\n"},
		{4, "", "$4=\n"},
	}
	var all []byte
	want := map[int32]string{}
	for _, tt := range tests {
		got := AppendMapEntry(nil, tt.id, tt.s)
		if string(got) != tt.want {
			t.Errorf("AppendMapEntry(%d, %q) = %q, want %q", tt.id, tt.s, got, tt.want)
		}
		all = append(all, got...)
		want[tt.id] = tt.s
	}
	s := NewStrings(0)
	if err := ReadMap(strings.NewReader(string(all)), s, 0); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, tableOf(s)); diff != "" {
		t.Errorf("read back (-want +got):\n%s", diff)
	}
}
