package store

import (
	"time"

	"github.com/tracebridge/tracebridge/internal/hostauth"
)

// Auth returns host authentication (zico's host table, OTLP's bearer
// tokens) over the store's host records.
func (s *Store) Auth() *hostauth.Checker { return hostauth.New(authRows{s}, s.opt.Now) }

// authRows are the store's host records as host authentication reads and
// creates them.
type authRows struct{ s *Store }

var _ hostauth.Rows = authRows{}

func authHost(h Host) hostauth.Host {
	return hostauth.Host{Name: h.Name, Addr: h.Addr, Secret: h.Secret, Disabled: h.Disabled}
}

func (r authRows) Host(name string) (hostauth.Host, bool) {
	h, ok := r.s.hostRecord(name)
	return authHost(h), ok
}

func (r authRows) Hosts() ([]hostauth.Host, error) {
	hosts, err := r.s.Hosts()
	out := make([]hostauth.Host, 0, len(hosts))
	for _, h := range hosts {
		out = append(out, authHost(h))
	}
	return out, err
}

// Create makes the host's record and partition, with addr as its address
// unless it has one.
func (r authRows) Create(name, addr string) error {
	s := r.s
	s.wmu.Lock()
	if _, err := s.partitionFor(name); err != nil {
		s.wmu.Unlock()
		return err
	}
	s.wmu.Unlock()
	_, err := s.UpdateHost(name, func(h *Host) error {
		if h.Addr == "" {
			h.Addr = addr
		}
		return nil
	})
	return err
}

func (r authRows) Touch(name string, at time.Time) { r.s.Touch(name, at) }
