package store

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/pipeline"
)

var _ pipeline.HostTable = (*Store)(nil)

// Admit decides whether host name, connecting from remote with secret, may
// send (see pipeline.HostTable). With security off an unknown host is
// created with the address it connects from.
func (s *Store) Admit(_ context.Context, name string, remote net.Addr, secret string, security bool) (pipeline.Admission, error) {
	if name == "" {
		return pipeline.Refused, fmt.Errorf("%w: no host name", pipeline.ErrUnauthorized)
	}
	ip := addrIP(remote)
	h, ok := s.hostRecord(name)
	if !ok {
		if security {
			return pipeline.Refused, fmt.Errorf("%w: unknown host %s", pipeline.ErrUnauthorized, name)
		}
		s.wmu.Lock()
		if _, err := s.partitionFor(name); err != nil {
			s.wmu.Unlock()
			return pipeline.Refused, err
		}
		s.wmu.Unlock()
		if _, err := s.UpdateHost(name, func(h *Host) error {
			if h.Addr == "" {
				h.Addr = ip
			}
			return nil
		}); err != nil {
			return pipeline.Refused, err
		}
		s.Touch(name, s.opt.Now())
		return pipeline.Admitted, nil
	}
	if security {
		if h.Addr != "" && ip != h.Addr {
			return pipeline.Refused, fmt.Errorf("%w: host %s connects from %s, not from its address %s", pipeline.ErrUnauthorized, name, ip, h.Addr)
		}
		if !s.secretMatches(h, secret) {
			return pipeline.Refused, fmt.Errorf("%w: host %s: wrong secret", pipeline.ErrUnauthorized, name)
		}
	}
	s.Touch(name, s.opt.Now())
	if h.Disabled {
		return pipeline.Disabled, nil
	}
	return pipeline.Admitted, nil
}

// secretMatches checks a host's secret: zico's rule (the secrets are
// equal; a host without one takes an empty secret), with the stored one a
// hash. Verified secrets are remembered a while, since argon2id is slow on
// purpose.
func (s *Store) secretMatches(h Host, secret string) bool {
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

// HostByToken finds the host whose secret is token (OTLP's bearer token).
func (s *Store) HostByToken(ctx context.Context, token string, remote net.Addr) (string, pipeline.Admission, error) {
	if token == "" {
		return "", pipeline.Refused, fmt.Errorf("%w: no token", pipeline.ErrUnauthorized)
	}
	hosts, err := s.Hosts()
	if err != nil {
		return "", pipeline.Refused, err
	}
	for _, h := range hosts {
		if h.Secret == "" || !s.secretMatches(h, token) {
			continue
		}
		if h.Addr != "" && addrIP(remote) != h.Addr {
			return "", pipeline.Refused, fmt.Errorf("%w: host %s connects from %s, not from its address %s", pipeline.ErrUnauthorized, h.Name, addrIP(remote), h.Addr)
		}
		s.Touch(h.Name, s.opt.Now())
		if h.Disabled {
			return h.Name, pipeline.Disabled, nil
		}
		return h.Name, pipeline.Admitted, nil
	}
	return "", pipeline.Refused, fmt.Errorf("%w: no host has this token", pipeline.ErrUnauthorized)
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

// Status says whether host name is admitted, disabled or gone.
func (s *Store) Status(name string) pipeline.Admission {
	h, ok := s.hostRecord(name)
	switch {
	case !ok:
		return pipeline.Deleted
	case h.Disabled:
		return pipeline.Disabled
	}
	return pipeline.Admitted
}
