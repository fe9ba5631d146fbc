package zico_test

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"testing"
	"testing/iotest"

	"github.com/tracebridge/tracebridge/internal/codec/zico"
)

// frameRead is one result of FrameReader.Next.
type frameRead struct {
	Type    zico.Type
	Payload string
	Offset  int64
	Err     string
}

func readFrames(r io.Reader, max int) []frameRead {
	fr := zico.NewFrameReader(r, max)
	var out []frameRead
	for {
		f, err := fr.Next()
		if err != nil {
			out = append(out, frameRead{Err: err.Error()})
			return out
		}
		out = append(out, frameRead{Type: f.Type, Payload: string(f.Payload), Offset: f.Offset})
	}
}

// splitReader returns the bytes in pieces cut at the given offsets.
type splitReader struct {
	b    []byte
	cuts []int
	off  int
}

func (s *splitReader) Read(p []byte) (int, error) {
	if len(s.b) == 0 {
		return 0, io.EOF
	}
	n := len(s.b)
	for _, c := range s.cuts {
		if c > s.off {
			n = min(n, c-s.off)
			break
		}
	}
	n = copy(p, s.b[:n])
	s.b, s.off = s.b[n:], s.off+n
	return n, nil
}

func TestFrameReader(t *testing.T) {
	frame := func(typ zico.Type, payload string) []byte { return zico.AppendFrame(nil, typ, []byte(payload)) }
	two := append(frame(zico.Ping, ""), frame(zico.Data, "payload")...)
	badCRC := frame(zico.Data, "payload")
	badCRC[17] ^= 1
	highCRC := frame(zico.Data, "payload")
	highCRC[10] = 1 // the upper half of the CRC field must be 0
	negative := frame(zico.Data, "")
	binary.BigEndian.PutUint32(negative[6:], 0x80000000)
	huge := frame(zico.Data, "")
	binary.BigEndian.PutUint32(huge[6:], 0x7FFFFFFF)
	for _, tc := range []struct {
		name  string
		in    []byte
		want  []frameRead
		reply string // the reply to the last error
	}{
		{"two frames", two, []frameRead{{Type: zico.Ping}, {Type: zico.Data, Payload: "payload", Offset: 18}, {Err: "EOF"}}, "EOD"},
		{"empty", nil, []frameRead{{Err: "EOF"}}, "EOD"},
		{"end inside the magic", []byte{0x21, 0xC0}, []frameRead{{Err: "zico frame: offset 2: stream ends inside the magic"}}, "EOD"},
		{"wrong magic", []byte{0x21, 0xC1, 0, 0}, []frameRead{{Err: "zico frame: offset 1: wrong magic byte 0xc1"}}, "BAD_REPLY"},
		{"end inside the header", two[:25], []frameRead{{Type: zico.Ping}, {Err: "zico frame: offset 25: stream ends inside the header"}}, "BAD_REQUEST"},
		{"end inside the payload", two[:40], []frameRead{{Type: zico.Ping}, {Err: "zico frame: offset 40: stream ends inside the payload"}}, "BAD_REQUEST"},
		{"CRC mismatch", badCRC, []frameRead{{Err: "zico frame: offset 10: CRC 0x422c6a14 in the header, 0x422c6a15 computed"}}, "CRC_ERROR"},
		{"CRC upper half", highCRC, []frameRead{{Err: "zico frame: offset 10: CRC 0x1000000422c6a15 in the header, 0x422c6a15 computed"}}, "CRC_ERROR"},
		{"negative length", negative, []frameRead{{Err: "zico frame: offset 6: negative payload length -2147483648"}}, "none"},
		{"length over the limit", huge, []frameRead{{Err: "zico frame: offset 6: payload length 2147483647 over the limit 1000"}}, "BAD_REQUEST"},
		{"length at the limit", frame(zico.Data, string(make([]byte, 1000))), []frameRead{{Type: zico.Data, Payload: string(make([]byte, 1000))}, {Err: "EOF"}}, "EOD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := readFrames(bytes.NewReader(tc.in), 1000)
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Fatalf("got  %v\nwant %v", got, tc.want)
			}
			// The same, however the bytes arrive.
			for name, r := range map[string]io.Reader{
				"one byte at a time": iotest.OneByteReader(bytes.NewReader(tc.in)),
				"halves":             iotest.HalfReader(bytes.NewReader(tc.in)),
				"cut in the header":  &splitReader{b: tc.in, cuts: []int{3, 7, 19, 25}},
			} {
				if got := readFrames(r, 1000); fmt.Sprint(got) != fmt.Sprint(tc.want) {
					t.Fatalf("%s: got %v", name, got)
				}
			}
			var last error
			fr := zico.NewFrameReader(bytes.NewReader(tc.in), 1000)
			for last == nil {
				_, last = fr.Next()
			}
			reply := "none"
			if r, ok := zico.ReplyTo(last); ok {
				reply = r.String()
			}
			if reply != tc.reply {
				t.Fatalf("reply %s, want %s", reply, tc.reply)
			}
		})
	}
}

// loopReader repeats b forever.
type loopReader struct {
	b   []byte
	off int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.b[l.off:])
	l.off = (l.off + n) % len(l.b)
	return n, nil
}
