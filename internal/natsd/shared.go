package natsd

import (
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/tracebridge/tracebridge/internal/pipeline"
)

// sharedKey is the key of a bridge's embedded server in pipeline.Shared.
type sharedKey struct{}

// holder keeps the bridge's one embedded server and counts its users.
type holder struct {
	mu   sync.Mutex
	srv  *Server
	refs int
}

// Acquire returns the bridge's embedded server and the function that
// releases it (call it once; the last release shuts the server down).
// The first caller starts the server with cfg; later callers share it
// when cfg agrees with it: the same host (or cfg.Host empty), the same
// port (or cfg.Port 0), and no MQTT listener that it lacks. With anyAddr
// a running server is shared whatever its address (cfg only starts one).
// A disagreement is an error: a bridge has one embedded server.
func Acquire(sh *pipeline.Shared, cfg Config, anyAddr bool) (*Server, func(), error) {
	h := sh.Value(sharedKey{}, func() any { return &holder{} }).(*holder)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.srv == nil {
		srv, err := Start(cfg)
		if err != nil {
			return nil, nil, err
		}
		h.srv, h.refs = srv, 0
	} else if err := h.srv.agrees(cfg, anyAddr); err != nil {
		return nil, nil, err
	}
	h.refs++
	srv := h.srv
	var once sync.Once
	release := func() {
		once.Do(func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.srv != srv {
				return
			}
			h.refs--
			if h.refs == 0 {
				srv.Shutdown()
				h.srv = nil
			}
		})
	}
	return srv, release, nil
}

// agrees reports whether a user asking for cfg can share s.
func (s *Server) agrees(cfg Config, anyAddr bool) error {
	addr := net.JoinHostPort(s.host, strconv.Itoa(s.port))
	if !anyAddr {
		if cfg.Host != "" && cfg.Host != s.host || cfg.Port != 0 && cfg.Port != s.port {
			want := net.JoinHostPort(cfg.Host, strconv.Itoa(cfg.Port))
			return fmt.Errorf("embedded NATS server: asked to listen on %s, but the bridge's one embedded server listens on %s (the broker-embedded receiver and the stream share it: give them the same address)", want, addr)
		}
	}
	if cfg.MQTT {
		if s.mqttPort == 0 {
			return fmt.Errorf("embedded NATS server on %s runs without MQTT; set mqtt_listen on the component that starts it first (the broker-embedded receiver)", addr)
		}
		if cfg.MQTTPort != 0 && cfg.MQTTPort != s.mqttPort {
			return fmt.Errorf("embedded NATS server: MQTT asked on port %d, but it listens on %d", cfg.MQTTPort, s.mqttPort)
		}
	}
	return nil
}
