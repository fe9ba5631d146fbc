package stream_test

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	sink "github.com/tracebridge/tracebridge/internal/sink/stream"
	"github.com/tracebridge/tracebridge/stream"
)

// jfrEvent is a record type as the JFR source makes them: a custom event
// whose string fields may be null (issue 21 item 8).
var jfrEvent = record.MustType("jdk.test.Custom",
	record.Field{Name: "startTime", Kind: record.Long},
	record.Field{Name: "nullText", Kind: record.String},
	record.Field{Name: "emptyText", Kind: record.String},
	record.Field{Name: "text", Kind: record.String},
	record.Field{Name: "names", Kind: record.String, Array: true},
)

// TestNullStringsInTheStream: a null string (JFR's null) reaches a
// subscriber of the live stream as null, apart from "", in both
// encodings of the repository: the Go API's Event says IsNull, and the
// WebSocket's JSON (tail --json's shape) says null.
func TestNullStringsInTheStream(t *testing.T) {
	for _, enc := range []string{"binary", "json"} {
		t.Run(enc, func(t *testing.T) {
			b, err := sink.New(&sink.Config{Listen: "127.0.0.1:0", Encoding: enc}, pipeline.Settings{DataDir: t.TempDir(), Shared: &pipeline.Shared{}})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			in := &record.Batch{Origin: record.Origin{Receiver: "jfr", Host: "jvm-1"}}
			r := in.Add(jfrEvent, 1)
			r.Values[0] = record.IntValue(1795312704163886691)
			r.Values[1] = record.NullString()
			r.Values[2] = record.StringValue("")
			r.Values[3] = record.StringValue("Grüße, 世界")
			r.Values[4] = in.NewList(record.String, 3)
			items := r.Values[4].List().Items
			items[0], items[1], items[2] = record.NullString(), record.StringValue(""), record.StringValue("x")
			if err := b.Consume(context.Background(), in); err != nil {
				t.Fatal(err)
			}

			// The Go API.
			s, err := stream.Open(authURL(b), stream.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			s.SetStartSequence(1)
			got := make(chan record.Record, 1)
			s.OnEvent(jfrEvent.Name, func(e *stream.Event) {
				select {
				case got <- e.Record.Clone():
				default:
				}
			})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			s.StartAsync(ctx)
			select {
			case e := <-got:
				v := e.Values
				if !v[1].IsNull() || v[2].IsNull() || v[2].Str() != "" || v[3].Str() != "Grüße, 世界" {
					t.Errorf("fields: null %v, empty %v %q, text %q", v[1].IsNull(), v[2].IsNull(), v[2].Str(), v[3].Str())
				}
				if it := v[4].List().Items; !it[0].IsNull() || it[1].IsNull() || it[2].Str() != "x" {
					t.Errorf("array items %v", it)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no event within 30 s")
			}

			// The WebSocket (the web UI's live view, tail --json's shape).
			h := stream.NewHandler(authURL(b), stream.HandlerOptions{})
			defer h.Close()
			srv := httptest.NewServer(h)
			defer srv.Close()
			c, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"?from_seq=1", nil)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(30 * time.Second))
			for {
				_, msg, err := c.ReadMessage()
				if err != nil {
					t.Fatal(err)
				}
				var m struct {
					Kind    string
					Records []struct {
						Record struct {
							Type   string
							Fields map[string]json.RawMessage
						}
					}
				}
				if err := json.Unmarshal(msg, &m); err != nil {
					t.Fatalf("%v: %s", err, msg)
				}
				if m.Kind != "records" {
					continue
				}
				f := m.Records[0].Record.Fields
				if string(f["nullText"]) != "null" || string(f["emptyText"]) != `""` || string(f["names"]) != `[null,"","x"]` ||
					string(f["text"]) != `"Grüße, 世界"` {
					t.Errorf("JSON fields %s", msg)
				}
				return
			}
		})
	}
}
