package zico_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	codec "github.com/tracebridge/tracebridge/internal/codec/zico"
	"github.com/tracebridge/tracebridge/internal/source/zico"
)

// TestProtocol checks every row of ZICO.md §2 against a Server over
// loopback TCP.
func TestProtocol(t *testing.T) {
	data1, p := examplePayload()
	r := exampleRecord()
	data2 := p.Append(nil, &r) // the connection's next packet: no symbols
	truncated := append(append([]byte{}, data1...), data2[:len(data2)-3]...)
	garbage := append(append([]byte{}, data1...), 0xCE)

	for _, tc := range []struct {
		name string
		h    *recorder
		cfg  zico.Config
		run  func(c *client)
		// Afterwards: the hooks' calls, and the fault logged (a substring
		// of err, "" for none).
		hellos  int
		batches []batch
		fault   string
	}{
		{name: "PING with any payload", run: func(c *client) {
			c.send(codec.Ping, []byte("whatever"))
			c.expect(codec.Pong)
			c.open()
		}},
		{name: "HELLO", run: func(c *client) {
			c.send(codec.Hello, helloPayload("h1", "pw"))
			c.expect(codec.OK)
			c.open()
		}, hellos: 1},
		{name: "HELLO with a null hostname", run: func(c *client) {
			c.send(codec.Hello, helloPayload("", "pw"))
			c.expect(codec.BadRequest)
			c.closed()
		}, fault: "refused: HELLO with a null hostname"},
		{name: "HELLO refused", h: &recorder{helloErr: fmt.Errorf("unknown host: %w", zico.ErrAuth)}, run: func(c *client) {
			c.send(codec.Hello, helloPayload("h1", "bad"))
			c.expect(codec.AuthError)
			c.closed()
		}, hellos: 1, fault: `refused: HELLO of "h1": unknown host: zico: not authorized`},
		{name: "HELLO with another first object", run: func(c *client) {
			c.send(codec.Hello, helloPayload("h1", "pw"))
			c.expect(codec.OK)
			c.send(codec.Hello, data1) // a Symbol first
			c.expect(codec.BadRequest)
			c.send(codec.Data, data1) // the login holds
			c.expect(codec.OK)
		}, hellos: 1, batches: []batch{{Host: "h1", Traces: []string{exampleDump}}}},
		{name: "empty HELLO", run: func(c *client) {
			c.send(codec.Hello, nil)
			c.expect(codec.BadRequest)
			c.open()
		}},
		{name: "DATA before HELLO", run: func(c *client) {
			c.send(codec.Data, data1)
			c.expect(codec.AuthError)
			c.send(codec.Hello, helloPayload("h1", "pw"))
			c.expect(codec.OK)
			c.send(codec.Data, data1)
			c.expect(codec.OK)
		}, hellos: 1, batches: []batch{{Host: "h1", Traces: []string{exampleDump}}}},
		{name: "DATA after HELLO, symbols kept across packets", run: func(c *client) {
			c.send(codec.Hello, helloPayload("h1", "pw"))
			c.expect(codec.OK)
			c.send(codec.Data, data1)
			c.expect(codec.OK)
			c.send(codec.Data, data2)
			c.expect(codec.OK)
		}, hellos: 1, batches: []batch{{Host: "h1", Traces: []string{exampleDump}}, {Host: "h1", Traces: []string{exampleDump}}}},
		{name: "a new HELLO empties the symbols", run: func(c *client) {
			c.send(codec.Hello, helloPayload("h1", "pw"))
			c.expect(codec.OK)
			c.send(codec.Data, data1)
			c.expect(codec.OK)
			c.send(codec.Hello, helloPayload("h2", "pw"))
			c.expect(codec.OK)
			c.send(codec.Data, data2)
			c.expect(codec.OK)
		}, hellos: 2, batches: []batch{{Host: "h1", Traces: []string{exampleDump}}, {Host: "h2", Traces: []string{". =200;"}}}},
		{name: "other type", run: func(c *client) {
			c.send(codec.Type(2), nil)
			c.expect(codec.BadRequest)
			c.send(codec.OK, nil)
			c.expect(codec.BadRequest)
			c.open()
		}},
		{name: "wrong magic", run: func(c *client) {
			c.raw([]byte{0x21, 0xC0, 0xBB})
			c.expect(codec.BadReply)
			c.closed()
		}, fault: "offset 2: wrong magic byte 0xbb"},
		{name: "CRC mismatch", run: func(c *client) {
			f := codec.AppendFrame(nil, codec.Ping, []byte("x"))
			f[17] ^= 1
			c.raw(f)
			c.expect(codec.CRCError)
			c.closed()
		}, fault: "offset 10: CRC 0x8cdc1682 in the header"},
		{name: "end inside the payload", run: func(c *client) {
			c.raw(codec.AppendFrame(nil, codec.Ping, []byte("abcdef"))[:20])
			c.conn.CloseWrite()
			c.expect(codec.BadRequest)
			c.closed()
		}, fault: "offset 20: stream ends inside the payload"},
		{name: "end inside the header", run: func(c *client) {
			c.raw(codec.AppendFrame(nil, codec.Ping, nil)[:7])
			c.conn.CloseWrite()
			c.expect(codec.BadRequest)
			c.closed()
		}, fault: "offset 7: stream ends inside the header"},
		{name: "end at a frame start", run: func(c *client) {
			c.open()
			c.conn.CloseWrite()
			c.expect(codec.EOD)
			c.closed()
		}},
		{name: "end inside the magic", run: func(c *client) {
			c.raw([]byte{0x21, 0xC0})
			c.conn.CloseWrite()
			c.expect(codec.EOD)
			c.closed()
		}, fault: "offset 2: stream ends inside the magic"},
		{name: "Fressian stream ends mid-object", run: func(c *client) {
			c.send(codec.Hello, helloPayload("h1", "pw"))
			c.expect(codec.OK)
			c.send(codec.Data, truncated)
			c.expect(codec.OK)
			c.open()
		}, hellos: 1, batches: []batch{{Host: "h1", Traces: []string{exampleDump}}}},
		{name: "Fressian error", run: func(c *client) {
			c.send(codec.Hello, helloPayload("h1", "pw"))
			c.expect(codec.OK)
			c.send(codec.Data, garbage)
			c.closed()
		}, hellos: 1, fault: fmt.Sprintf("offset %d: DATA payload: fressian: offset %d: undefined code 0xCE", 68+18+len(data1), len(data1))},
		{name: "Fressian error in HELLO", run: func(c *client) {
			c.send(codec.Hello, append(helloPayload("h1", "pw"), 0xB6))
			c.closed()
		}, fault: "HELLO payload: fressian: offset 50: undefined code 0xB6"},
		{name: "wrong type", run: func(c *client) {
			c.send(codec.Hello, helloPayload("h1", "pw"))
			c.expect(codec.OK)
			c.send(codec.Data, []byte(strings.Replace(string(data1), "\xF7\xC0", "\xF7\xE4", 1)))
			c.closed()
		}, hellos: 1, fault: "record attributes: expected map, got list"},
		{name: "length 0x7FFFFFFF", run: func(c *client) {
			f := codec.AppendFrame(nil, codec.Data, nil)
			binary.BigEndian.PutUint32(f[6:], 0x7FFFFFFF)
			c.raw(f)
			c.expect(codec.BadRequest)
			c.closed()
		}, fault: "offset 6: payload length 2147483647 over the limit 16777216"},
		{name: "negative length", run: func(c *client) {
			f := codec.AppendFrame(nil, codec.Data, nil)
			binary.BigEndian.PutUint32(f[6:], 0xFFFFFFFF)
			c.raw(f)
			c.closed()
		}, fault: "offset 6: negative payload length -1"},
		{name: "length over a configured limit", cfg: zico.Config{MaxPayload: 10}, run: func(c *client) {
			c.send(codec.Ping, make([]byte, 11))
			c.expect(codec.BadRequest)
			c.closed()
		}, fault: "payload length 11 over the limit 10"},
		{name: "Data says EOD", h: &recorder{dataErr: func(int) error { return fmt.Errorf("host deleted: %w", zico.ErrEOD) }}, run: func(c *client) {
			c.send(codec.Hello, helloPayload("h1", "pw"))
			c.expect(codec.OK)
			c.send(codec.Data, data1)
			c.expect(codec.EOD)
			c.closed()
		}, hellos: 1, batches: []batch{{Host: "h1", Traces: []string{exampleDump}}}, fault: "host deleted"},
		{name: "Data fails", h: &recorder{dataErr: func(int) error { return errors.New("disk full") }}, run: func(c *client) {
			c.send(codec.Hello, helloPayload("h1", "pw"))
			c.expect(codec.OK)
			c.send(codec.Data, data1)
			c.expect(codec.InternalError)
			c.closed()
		}, hellos: 1, batches: []batch{{Host: "h1", Traces: []string{exampleDump}}}, fault: "disk full"},
		// A connection that sends nothing is closed (closed waits 30 s);
		// no PING first: on a loaded machine it could come later than
		// the timeout.
		{name: "idle timeout", cfg: zico.Config{IdleTimeout: 100 * time.Millisecond}, run: func(c *client) {
			c.closed()
		}},
		// The idle timeout is renewed by every read, as Java's socket
		// timeout is: a frame that takes longer than the timeout to
		// arrive, but never pauses that long, is read. The pauses are an
		// eighth of the timeout, so a loaded machine stretching them
		// eightfold would be needed to end the session.
		{name: "slow frame within the idle timeout", cfg: zico.Config{IdleTimeout: 2 * time.Second}, run: func(c *client) {
			const timeout, pieces = 2 * time.Second, 10
			f := codec.AppendFrame(nil, codec.Ping, []byte("slow"))
			t0 := time.Now()
			for i := range pieces {
				c.raw(f[i*len(f)/pieces : (i+1)*len(f)/pieces])
				if i < pieces-1 {
					time.Sleep(timeout / 8)
				}
			}
			if d := time.Since(t0); d <= timeout {
				c.t.Fatalf("the frame took %v to send, not longer than the idle timeout %v", d, timeout)
			}
			c.expect(codec.Pong)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.h
			if h == nil {
				h = &recorder{}
			}
			srv, addr, logs := server(t, h, zico.ServerConfig{Session: tc.cfg})
			c := dial(t, addr)
			tc.run(c)
			c.conn.Close()
			waitFor(t, "the session to end", func() bool { return srv.Stats().Open == 0 })

			hellos, batches := h.snapshot()
			if len(hellos) != tc.hellos {
				t.Errorf("%d HELLOs, want %d", len(hellos), tc.hellos)
			}
			for i := range batches {
				batches[i].Info = zico.Info{}
			}
			if diff := cmp.Diff(tc.batches, batches); diff != "" {
				t.Errorf("Data calls (-want +got):\n%s", diff)
			}
			var faults []string
			for _, l := range logs.lines(t) {
				if l["level"] == "WARN" {
					faults = append(faults, fmt.Sprintf("offset %v: %v", l["offset"], l["err"]))
					if l["peer"] != c.conn.LocalAddr().String() {
						t.Errorf("log line without the peer: %v", l)
					}
				}
			}
			switch {
			case tc.fault == "" && len(faults) > 0:
				t.Errorf("faults logged: %q", faults)
			case tc.fault != "" && (len(faults) != 1 || !strings.Contains(faults[0], tc.fault)):
				t.Errorf("faults logged: %q, want one with %q", faults, tc.fault)
			}
		})
	}
}
