package stream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	natsgo "github.com/nats-io/nats.go"

	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
)

// Remote control (JFR's enable, disable and settings, for a whole
// bridge).
type (
	// ControlRequest is a control command: Op status, enable, disable,
	// sample or probe, with Type or Host, Rate, Pattern and Active.
	ControlRequest = streammsg.ControlRequest
	// ControlReply is the bridge's answer.
	ControlReply = streammsg.ControlReply
)

// ErrRefused is wrapped by the errors of commands the bridge refused or
// rejected.
var ErrRefused = errors.New("control")

// Control sends a command to the bridge, with token when the bridge wants
// one (its stream: {control_token_file}); without one a bridge takes
// control only from loopback clients of its embedded server. What the
// command changes applies to every sink and the stream, is announced in
// the metadata (OnMetadata) and survives a restart of the bridge.
func (s *Stream) Control(ctx context.Context, req ControlRequest, token string) (*ControlReply, error) {
	m := natsgo.NewMsg(s.subj.Control())
	m.Data, _ = json.Marshal(req)
	if token != "" {
		m.Header.Set(streammsg.TokenHeader, token)
	}
	r, err := s.nc.RequestMsgWithContext(ctx, m)
	if errors.Is(err, natsgo.ErrNoResponders) {
		return nil, fmt.Errorf("%w at %s: no bridge answers on %s", ErrNoStream, s.url, s.subj.Control())
	}
	if err != nil {
		return nil, fmt.Errorf("control %s: %w", s.url, err)
	}
	var rep ControlReply
	if err := json.Unmarshal(r.Data, &rep); err != nil {
		return nil, fmt.Errorf("control %s: malformed reply: %w", s.url, err)
	}
	if !rep.OK {
		return &rep, fmt.Errorf("%w: %s", ErrRefused, rep.Error)
	}
	return &rep, nil
}
