package control

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	"github.com/tracebridge/tracebridge/internal/record"
)

var cat = record.Builtin()

func TestCommands(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sub", "control.json")
	c, err := Open(Options{StateFile: file})
	if err != nil {
		t.Fatal(err)
	}
	c.SetKnownTypes(func() []string { return []string{"jdk.ExecutionSample", "x.BeforeOperationEvent"} })
	var changes []string
	c.OnChange(func(old, now streammsg.ControlState) {
		add, rm := now.Diff(&old)
		changes = append(changes, strings.Join(add, ";")+"|"+strings.Join(rm, ";"))
	})
	for _, tc := range []struct {
		req  streammsg.ControlRequest
		want string
	}{
		{streammsg.ControlRequest{Op: "disable", Type: "ExecutionSample"}, ""},
		{streammsg.ControlRequest{Op: "disable", Type: "ExecutionSample"}, ""}, // no change
		{streammsg.ControlRequest{Op: "disable", Type: "BeforeOperationEvent"}, "ambiguous"},
		{streammsg.ControlRequest{Op: "disable", Type: "kieker.common.record.flow.trace.Trace"}, ""}, // a legacy name
		{streammsg.ControlRequest{Op: "disable"}, "needs a record type"},
		{streammsg.ControlRequest{Op: "enable", Type: "T", Host: "h"}, "not both"},
		{streammsg.ControlRequest{Op: "sample", Type: "ExecutionSample", Rate: 0}, "sample rate"},
		{streammsg.ControlRequest{Op: "probe"}, "pattern"},
		{streammsg.ControlRequest{}, "no operation"},
		{streammsg.ControlRequest{Op: "enable", Type: "jdk.ExecutionSample"}, ""},
	} {
		_, err := c.Apply(tc.req)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrCommand)) {
			t.Errorf("%+v: %v", tc.req, err)
		}
	}
	want := []string{"disable jdk.ExecutionSample|", "disable kieker.common.record.flow.trace.TraceMetadata|", "|disable jdk.ExecutionSample"}
	if diff := cmp.Diff(want, changes); diff != "" {
		t.Errorf("changes (-want +got):\n%s", diff)
	}
	again, err := Open(Options{StateFile: file})
	if err != nil {
		t.Fatal(err)
	}
	if st := again.State(); len(st.DisabledTypes) != 1 || st.DisabledTypes[0] != record.TraceMetadata || st.Changes != 3 {
		t.Fatalf("reopened: %+v", st)
	}
}

// TestProbe: a probe command reaches a Kieker TCP controller as a
// remote-control record in Kieker's single-socket format.
func TestProbe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan *record.Record, 2)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			var buf []byte
			tmp := make([]byte, 4096)
			for {
				n, err := conn.Read(tmp)
				buf = append(buf, tmp[:n]...)
				if err != nil {
					break
				}
			}
			conn.Close()
			d := kieker.NewDecoder(kieker.Options{Catalog: cat, Inline: true})
			var b record.Batch
			if _, err := d.Decode(buf, &b); err != nil || b.Len() != 1 {
				t.Errorf("decode: %v, %d records", err, b.Len())
				got <- nil
				continue
			}
			r := b.Records[0].Clone()
			got <- &r
		}
	}()
	c, _ := Open(Options{Probes: []Probe{{Host: "shop", Address: ln.Addr().String()}, {Host: "gone", Address: "127.0.0.1:1"}}, DialTimeout: time.Second})
	msg, err := c.Apply(streammsg.ControlRequest{Op: "probe", Pattern: "public void shop.Cart.*(..)", Active: true})
	if err != nil || !strings.Contains(msg, "not reached") {
		t.Fatalf("%q %v", msg, err)
	}
	r := <-got
	if r == nil || r.Type.Name != record.Prefix+"remotecontrol.ActivationEvent" || r.Values[0].Str() != "public void shop.Cart.*(..)" {
		t.Fatalf("controller got %v", r)
	}
	if _, err := c.Apply(streammsg.ControlRequest{Op: "probe", Host: "shop", Pattern: "*"}); err != nil {
		t.Fatal(err)
	}
	if r := <-got; r == nil || r.Type.ShortName() != "DeactivationEvent" {
		t.Fatalf("controller got %v", r)
	}
	if _, err := c.Apply(streammsg.ControlRequest{Op: "probe", Host: "gone", Pattern: "*"}); err == nil || !strings.Contains(err.Error(), "no probe controller reached") {
		t.Fatalf("unreachable: %v", err)
	}
	if _, err := c.Apply(streammsg.ControlRequest{Op: "probe", Host: "elsewhere", Pattern: "*"}); err == nil {
		t.Fatal("a host without a controller")
	}
	st := c.State()
	if len(st.Probes) != 2 || st.Probes[1].Active || st.Probes[1].Host != "shop" {
		t.Fatalf("probes %+v", st.Probes)
	}
}
