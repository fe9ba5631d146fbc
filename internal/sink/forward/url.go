package forward

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
)

// Protocol is the wire protocol of a forward target.
type Protocol uint8

// The protocols, named by the schemes of the target URL.
const (
	Kieker Protocol = iota + 1 // kieker-tcp: Kieker's single-socket TCP protocol
	KDB                        // kdb-tcp: the KDB binary dialect
)

// URL schemes.
const (
	SchemeKieker = "kieker-tcp"
	SchemeKDB    = "kdb-tcp"
)

// String returns the protocol's URL scheme.
func (p Protocol) String() string {
	switch p {
	case Kieker:
		return SchemeKieker
	case KDB:
		return SchemeKDB
	}
	return fmt.Sprintf("protocol(%d)", uint8(p))
}

// ErrBadURL is wrapped by every error of ParseURL (and of New for a bad
// Config.URL).
var ErrBadURL = errors.New("bad forward URL")

// Target is a parsed forward URL.
type Target struct {
	Protocol Protocol
	Addr     string // host:port, as net.Dial takes it
}

// String returns the target as a URL ("kieker-tcp://127.0.0.1:10133"), an
// IPv6 zone escaped.
func (t Target) String() string {
	return (&url.URL{Scheme: t.Protocol.String(), Host: t.Addr}).String()
}

// ParseURL parses kieker-tcp://HOST:PORT or kdb-tcp://HOST:PORT (an IPv6
// host in brackets). The host and a port from 1 to 65535 are required; a
// path other than "/", a query, a fragment or user information are errors.
func ParseURL(raw string) (Target, error) {
	bad := func(format string, a ...any) (Target, error) {
		return Target{}, fmt.Errorf("forward URL %q: %s: %w", raw, fmt.Sprintf(format, a...), ErrBadURL)
	}
	u, err := url.Parse(raw)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return bad("%v", err)
	}
	var t Target
	switch u.Scheme {
	case SchemeKieker:
		t.Protocol = Kieker
	case SchemeKDB:
		t.Protocol = KDB
	case "":
		return bad("missing scheme (want %s:// or %s://)", SchemeKieker, SchemeKDB)
	default:
		return bad("unknown scheme %q (want %s or %s)", u.Scheme, SchemeKieker, SchemeKDB)
	}
	switch {
	case u.Opaque != "":
		return bad("missing // after the scheme")
	case u.User != nil:
		return bad("user information is not supported")
	case u.Path != "" && u.Path != "/":
		return bad("unexpected path %q", u.Path)
	case u.RawQuery != "" || u.ForceQuery:
		return bad("unexpected query")
	case u.Fragment != "":
		return bad("unexpected fragment")
	}
	if u.Host == "" {
		return bad("missing host")
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		var ae *net.AddrError
		if errors.As(err, &ae) {
			if ae.Err == "missing port in address" {
				return bad("missing port")
			}
			err = errors.New(ae.Err)
		}
		return bad("host %q: %v", u.Host, err)
	}
	if host == "" {
		return bad("missing host")
	}
	for i := 0; i < len(host); i++ {
		if c := host[i]; !hostByte(c) {
			return bad("host %q: invalid character %q", host, c)
		}
	}
	if port == "" {
		return bad("missing port")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return bad("port %q is not a number from 1 to 65535", port)
	}
	t.Addr = net.JoinHostPort(host, port)
	return t, nil
}

// hostByte reports whether c may appear in a host name, an IP address or an
// IPv6 zone (an interface name).
func hostByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '.' || c == '-' || c == '_' || c == ':' || c == '%'
}
