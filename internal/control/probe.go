package control

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kieker"
	"github.com/tracebridge/tracebridge/internal/codec/streammsg"
	"github.com/tracebridge/tracebridge/internal/record"
)

// sendProbe sends a probe (de)activation to the controllers of req.Host
// (every controller when it names none): one Kieker remote-control record
// (kieker.common.record.remotecontrol.ActivationEvent or
// DeactivationEvent with the pattern) over a new connection in Kieker's
// single-socket TCP format, which Kieker's TCPController reads.
func (c *Controller) sendProbe(req streammsg.ControlRequest) (streammsg.Probe, error) {
	p := streammsg.Probe{Host: req.Host, Pattern: req.Pattern, Active: req.Active}
	var targets []Probe
	for _, pc := range c.opt.Probes {
		if req.Host == "" || pc.Host == req.Host {
			targets = append(targets, pc)
		}
	}
	if len(targets) == 0 {
		if len(c.opt.Probes) == 0 {
			return p, fmt.Errorf("%w: no probe controllers are configured (stream: {probe_controllers: [{host: H, address: HOST:PORT}]}, the address of a Kieker TCP controller)", ErrCommand)
		}
		return p, fmt.Errorf("%w: no probe controller for host %q", ErrCommand, req.Host)
	}
	name := record.Prefix + "remotecontrol.DeactivationEvent"
	if req.Active {
		name = record.Prefix + "remotecontrol.ActivationEvent"
	}
	t := record.Builtin().Lookup(name)
	var b record.Batch
	b.Add(t, time.Now().UnixNano()).Values[0] = record.StringValue(req.Pattern)
	frame, err := kieker.NewEncoder(kieker.EncoderOptions{Inline: true}).Append(nil, &b.Records[0])
	if err != nil {
		return p, err
	}
	var errs []string
	for _, pc := range targets {
		if err := send(pc.Address, frame, c.opt.DialTimeout); err != nil {
			errs = append(errs, fmt.Sprintf("%s (%s): %v", pc.Address, pc.Host, err))
			c.opt.Logger.Warn("probe controller unreachable", "host", pc.Host, "address", pc.Address, "err", err)
			continue
		}
		p.Sent++
	}
	if p.Sent == 0 {
		return p, errors.New("no probe controller reached: " + strings.Join(errs, "; "))
	}
	if len(errs) > 0 {
		p.Error = "not reached: " + strings.Join(errs, "; ")
	}
	return p, nil
}

func send(addr string, frame []byte, timeout time.Duration) error {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetWriteDeadline(time.Now().Add(timeout))
	_, err = conn.Write(frame)
	return err
}

func splitAddr(addr string) (string, string, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil || p == "" {
		return "", "", fmt.Errorf("probe controller address %q: want HOST:PORT", addr)
	}
	return h, p, nil
}

// ValidateProbes checks probe controller addresses.
func ValidateProbes(ps []Probe) error {
	for _, p := range ps {
		if _, _, err := splitAddr(p.Address); err != nil {
			return err
		}
	}
	return nil
}
