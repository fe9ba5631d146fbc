package nats

import "github.com/tracebridge/tracebridge/internal/natsd"

// The embedded broker lives in internal/natsd (one per bridge, shared with
// the stream); these names keep this package's callers working.
type (
	// Server is the embedded broker: a NATS server with JetStream.
	Server = natsd.Server
	// ServerConfig configures the embedded broker.
	ServerConfig = natsd.Config
)

// StartServer starts an embedded broker of its own (a bridge shares one
// through natsd.Acquire).
func StartServer(cfg ServerConfig) (*Server, error) { return natsd.Start(cfg) }
