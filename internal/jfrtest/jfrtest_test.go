package jfrtest

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDecodeEvents(t *testing.T) {
	in := `{
  "recording": {
    "events": [{
      "type": "shop.Tick",
      "values": {"seq": 3, "run": "x\/y"}
    }, {
      "type": "jdk.CPULoad",
      "values": {"machineTotal": 0.25}
    }]
  }
}`
	var got []Event
	if err := decodeEvents(strings.NewReader(in), func(e Event) error { got = append(got, e); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Type != "shop.Tick" || got[0].Values["seq"] != json.Number("3") || got[0].Values["run"] != "x/y" {
		t.Fatalf("%+v", got)
	}
	if err := decodeEvents(strings.NewReader(`{"other":1}`), func(Event) error { return nil }); err == nil {
		t.Fatal("unexpected document accepted")
	}
}
