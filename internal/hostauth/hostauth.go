// Package hostauth decides which monitored hosts may send: the contract
// receivers that know who is sending (a ZICO HELLO, an OTLP bearer token)
// ask (Table), the answers (Admission, ErrUnauthorized), the rules
// (Checker: zico's host table rules over host records kept elsewhere) and
// the argon2id hashing of host secrets.
//
// The host records themselves live in the host table (internal/hostdb,
// <data_dir>/hosts); this package reads and creates them through Rows, so
// their storage knows nothing of receivers or the pipeline.
//
// Concurrency: a Checker is safe for concurrent use when its Rows are.
package hostauth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// Table decides which monitored hosts may send (zico's host table):
// receivers that know who is sending (a ZICO HELLO, an OTLP bearer token)
// ask it.
type Table interface {
	// Admit checks host name connecting from remote with secret. With
	// security off an unknown host is created and admitted; with it on,
	// the host must exist, its address must match when it has one, and
	// its secret must match.
	Admit(ctx context.Context, name string, remote net.Addr, secret string, security bool) (Admission, error)
	// HostByToken finds the host whose secret is token (a bearer token),
	// and checks its address; ErrUnauthorized when none.
	HostByToken(ctx context.Context, token string, remote net.Addr) (string, Admission, error)
	// Status says what the table says of an admitted host now: Admitted,
	// Disabled, or Deleted when it is gone.
	Status(name string) Admission
}

// Admission is what a host table says of a host.
type Admission uint8

const (
	// Admitted: the host's data is taken.
	Admitted Admission = iota
	// Disabled: the host is known but disabled: its data is dropped (and
	// answered as if taken).
	Disabled
	// Refused: unknown host, wrong address or wrong secret.
	Refused
	// Deleted: the host was deleted while connected.
	Deleted
)

// ErrUnauthorized is wrapped by refusals of a host table.
var ErrUnauthorized = errors.New("unauthorized")

// Host is what authentication reads of a host record.
type Host struct {
	Name string
	// Addr, when set, is the only address the host may connect from
	// (with security on).
	Addr string
	// Secret is the argon2id hash of the host's secret ("" when none).
	Secret   string
	Disabled bool
}

// Rows are the host records (internal/hostdb keeps them).
type Rows interface {
	// Host returns the named host's record; false when there is none.
	Host(name string) (Host, bool)
	// Hosts returns every host's record.
	Hosts() ([]Host, error)
	// Create makes a record for an unknown host admitted with security
	// off, with addr as its address unless it has one already.
	Create(name, addr string) error
	// Touch records a host's last contact (best effort).
	Touch(name string, at time.Time)
}

// Checker is a Table over host records: zico's rules.
type Checker struct {
	rows Rows
	now  func() time.Time
}

var _ Table = (*Checker)(nil)

// New returns a Checker over rows; now is the clock of last contacts (nil:
// time.Now).
func New(rows Rows, now func() time.Time) *Checker {
	if now == nil {
		now = time.Now
	}
	return &Checker{rows: rows, now: now}
}

// Admit decides whether host name, connecting from remote with secret, may
// send (see Table). With security off an unknown host is created with the
// address it connects from.
func (c *Checker) Admit(_ context.Context, name string, remote net.Addr, secret string, security bool) (Admission, error) {
	if name == "" {
		return Refused, fmt.Errorf("%w: no host name", ErrUnauthorized)
	}
	ip := addrIP(remote)
	h, ok := c.rows.Host(name)
	if !ok {
		if security {
			return Refused, fmt.Errorf("%w: unknown host %s", ErrUnauthorized, name)
		}
		if err := c.rows.Create(name, ip); err != nil {
			return Refused, err
		}
		c.rows.Touch(name, c.now())
		return Admitted, nil
	}
	if security {
		if h.Addr != "" && ip != h.Addr {
			return Refused, fmt.Errorf("%w: host %s connects from %s, not from its address %s", ErrUnauthorized, name, ip, h.Addr)
		}
		if !secretMatches(h, secret) {
			return Refused, fmt.Errorf("%w: host %s: wrong secret", ErrUnauthorized, name)
		}
	}
	c.rows.Touch(name, c.now())
	if h.Disabled {
		return Disabled, nil
	}
	return Admitted, nil
}

// HostByToken finds the host whose secret is token (OTLP's bearer token).
func (c *Checker) HostByToken(_ context.Context, token string, remote net.Addr) (string, Admission, error) {
	if token == "" {
		return "", Refused, fmt.Errorf("%w: no token", ErrUnauthorized)
	}
	hosts, err := c.rows.Hosts()
	if err != nil {
		return "", Refused, err
	}
	for _, h := range hosts {
		if h.Secret == "" || !secretMatches(h, token) {
			continue
		}
		if h.Addr != "" && addrIP(remote) != h.Addr {
			return "", Refused, fmt.Errorf("%w: host %s connects from %s, not from its address %s", ErrUnauthorized, h.Name, addrIP(remote), h.Addr)
		}
		c.rows.Touch(h.Name, c.now())
		if h.Disabled {
			return h.Name, Disabled, nil
		}
		return h.Name, Admitted, nil
	}
	return "", Refused, fmt.Errorf("%w: no host has this token", ErrUnauthorized)
}

// Status says whether host name is admitted, disabled or gone.
func (c *Checker) Status(name string) Admission {
	h, ok := c.rows.Host(name)
	switch {
	case !ok:
		return Deleted
	case h.Disabled:
		return Disabled
	}
	return Admitted
}

// secretMatches checks a host's secret: zico's rule (the secrets are
// equal; a host without one takes an empty secret), with the stored one a
// hash. Verified secrets are remembered a while, since argon2id is slow on
// purpose.
func secretMatches(h Host, secret string) bool {
	if h.Secret == "" {
		return secret == ""
	}
	key := sha256.Sum256([]byte(h.Name + "\x00" + h.Secret + "\x00" + secret))
	if verified.has(key) {
		return true
	}
	if !CheckSecret(h.Secret, secret) {
		return false
	}
	verified.add(key)
	return true
}

func addrIP(a net.Addr) string {
	if a == nil {
		return ""
	}
	switch v := a.(type) {
	case *net.TCPAddr:
		return v.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// verified remembers recently verified (host, hash, secret) triples for
// five minutes, by their SHA-256 (never the secret itself).
var verified = &verifiedSet{m: map[[32]byte]time.Time{}}

type verifiedSet struct {
	mu sync.Mutex
	m  map[[32]byte]time.Time
}

func (v *verifiedSet) has(k [32]byte) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	t, ok := v.m[k]
	return ok && time.Since(t) < 5*time.Minute
}

func (v *verifiedSet) add(k [32]byte) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.m) > 4096 {
		clear(v.m)
	}
	v.m[k] = time.Now()
}
