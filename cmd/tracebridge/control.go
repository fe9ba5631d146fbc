package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	streamsink "github.com/tracebridge/tracebridge/internal/sink/stream"
	"github.com/tracebridge/tracebridge/stream"
)

const controlSynopsis = `control nats://HOST:PORT COMMAND [--token-file F] [--json]

commands:
  status                what the bridge records (disabled types and hosts,
                        sampling, probes)
  enable TYPE | host:H  record this type (full or short class name) or host
                        again
  disable TYPE | host:H stop recording it, into every sink and the stream
  sample TYPE RATE      keep RATE of its records (0.1 or 10%; whole traces
                        where records carry a traceId; 1 ends sampling)
  probe activate|deactivate PATTERN [--host H]
                        switch Kieker probes on or off in monitored programs
                        (a Kieker remote-control record to their TCP
                        controllers, stream: {probe_controllers})

Changes apply at once, are announced in the stream's metadata and survive a
restart of the bridge. A bridge with stream: {control_token_file: F} wants
--token-file F; without it, it takes control only from loopback clients.`

func cmdControl(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("control", controlSynopsis, stderr)
	var sf streamFlags
	sf.define(fs, false)
	tokenFile := fs.String("token-file", "", "file holding the bridge's control token (its first line)")
	host := fs.String("host", "", "probe: only the controllers of this host")
	asJSON := fs.Bool("json", false, "print the bridge's reply as JSON")
	timeout := fs.Duration("timeout", 10*time.Second, "how long to wait for the bridge's answer")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) < 2 {
		return usagef("control: want the stream URL and a command (status, enable, disable, sample, probe)")
	}
	req, err := controlRequest(pos[1:], *host)
	if err != nil {
		return err
	}
	token := ""
	if *tokenFile != "" {
		if token, err = streamsink.ReadToken(*tokenFile); err != nil {
			return withCode(exitConfig, fmt.Errorf("control: --token-file: %w", err))
		}
	}
	s, err := openStream(pos[0], &sf)
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rep, err := s.Control(ctx, req, token)
	if err != nil {
		return streamError(err)
	}
	if *asJSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
		return nil
	}
	if rep.Message != "" {
		fmt.Fprintf(stdout, "tracebridge: %s\n", rep.Message)
	}
	if rep.Control != nil {
		words := rep.Control.Words()
		if len(words) == 0 {
			fmt.Fprintln(stdout, "recording everything (no control settings)")
		}
		for _, w := range words {
			fmt.Fprintln(stdout, w)
		}
	}
	return nil
}

// controlRequest reads a command's words.
func controlRequest(words []string, host string) (stream.ControlRequest, error) {
	op := words[0]
	args := words[1:]
	want := func(n int, form string) error {
		if len(args) != n {
			return usagef("control: %s takes %s", op, form)
		}
		return nil
	}
	req := stream.ControlRequest{Op: op}
	switch op {
	case "status":
		return req, want(0, "no arguments")
	case "enable", "disable":
		if err := want(1, "a record type or host:NAME"); err != nil {
			return req, err
		}
		if h, ok := strings.CutPrefix(args[0], "host:"); ok {
			if h == "" {
				return req, usagef("control: %s host: needs a host name", op)
			}
			req.Host = h
		} else {
			req.Type = args[0]
		}
		return req, nil
	case "sample":
		if err := want(2, "a record type and a rate (0.1 or 10%)"); err != nil {
			return req, err
		}
		req.Type = args[0]
		r := args[1]
		scale := 1.0
		if p, ok := strings.CutSuffix(r, "%"); ok {
			r, scale = p, 100
		}
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || !(v > 0) || v/scale > 1 {
			return req, usagef("control: sample rate %q: want a share above 0 and at most 1 (0.1) or a percentage (10%%)", args[1])
		}
		req.Rate = v / scale
		return req, nil
	case "probe":
		if err := want(2, "activate|deactivate and a Kieker probe pattern"); err != nil {
			return req, err
		}
		switch args[0] {
		case "activate":
			req.Active = true
		case "deactivate":
		default:
			return req, usagef("control: probe %q: want activate or deactivate", args[0])
		}
		req.Pattern, req.Host = args[1], host
		return req, nil
	}
	return req, usagef("control: unknown command %q (want status, enable, disable, sample or probe)", op)
}
