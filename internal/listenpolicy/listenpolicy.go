// Package listenpolicy holds the one rule every listening socket of the
// bridge follows (the HTTP API, the TCP, OTLP and zico receivers, the
// embedded NATS server of broker-embedded and the stream): on loopback
// (127.0.0.0/8, ::1, localhost) it may speak plain text; off loopback (any
// other host, an empty host, 0.0.0.0, ::) it needs TLS, or `insecure:
// true` in its configuration, and then says so once at start-up.
//
// The functions are pure apart from the logger they are given; safe for
// concurrent use.
package listenpolicy

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
)

// Loopback reports whether host (a listen address's host part) is a
// loopback address: localhost, 127.0.0.0/8 or ::1. An empty host, 0.0.0.0
// and :: listen on every interface and are not.
func Loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// Check applies the rule to the listen address addr of the key key (such
// as "listen"): nil on loopback, with TLS or with insecure; otherwise an
// error naming the key, the address and the fix, tlsKey being the
// configuration that turns TLS on ("tls: {cert, key}"). An address that
// is not HOST:PORT is an error too.
func Check(key, addr string, tls, insecure bool, tlsKey string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%s %q: %v", key, addr, err)
	}
	if tls || insecure || Loopback(host) {
		return nil
	}
	what := host
	if what == "" {
		what = "every interface"
	}
	return fmt.Errorf("%s %s: %s is not a loopback address; configure %s, or set insecure: true to accept plain text from the network", key, addr, what, tlsKey)
}

// Plain reports whether a listener that passed Check speaks plain text
// off loopback (it was allowed by insecure: true).
func Plain(addr string, tls bool) bool {
	if tls {
		return false
	}
	host, _, err := net.SplitHostPort(addr)
	return err == nil && !Loopback(host)
}

// Warn logs the one start-up warning of a listener that speaks plain text
// off loopback ("receiver k listens on 0.0.0.0:10133 in plain text
// (insecure: true)"); nothing for any other. who names the listener
// ("receiver k"), addr is where it listens (the bound address when known).
func Warn(log *slog.Logger, who, addr string, tls bool) {
	if log == nil || !Plain(addr, tls) {
		return
	}
	log.Warn(fmt.Sprintf("%s listens on %s in plain text (insecure: true)", who, addr), "listener", who, "addr", addr)
}
