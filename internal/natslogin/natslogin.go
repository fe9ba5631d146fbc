// Package natslogin is how tracebridge's clients log in to a NATS
// server that is not the bridge's own embedded one: a user and password,
// a token or a NATS credentials file (a user JWT and its NKey seed), and
// TLS. The cluster's connection, the cluster's live stream and the
// stream's readers (tail, dump, the web UI's live view, the Go API) take
// the same logins, built here once. It holds no server code, so that the
// public stream package can use it without the NATS server.
package natslogin

import (
	"crypto/tls"

	"github.com/nats-io/nats.go"
)

// Login is a client's login; at most one of User, Token and CredsFile
// is set (the configuration refuses more).
type Login struct {
	User, Password string
	Token          string
	// CredsFile is a NATS credentials file, read at every (re)connection.
	CredsFile string
	// TLS, when set, is the client's TLS configuration (the CA it
	// trusts, a client certificate); the connection then needs TLS.
	TLS *tls.Config
}

// Options are the nats.go options that present l (none for the zero
// Login).
func (l Login) Options() []nats.Option {
	var opts []nats.Option
	switch {
	case l.User != "":
		opts = append(opts, nats.UserInfo(l.User, l.Password))
	case l.Token != "":
		opts = append(opts, nats.Token(l.Token))
	case l.CredsFile != "":
		opts = append(opts, nats.UserCredentials(l.CredsFile))
	}
	if l.TLS != nil {
		opts = append(opts, nats.Secure(l.TLS))
	}
	return opts
}
