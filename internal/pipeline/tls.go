package pipeline

import (
	"crypto/tls"
	"errors"
	"fmt"
)

// TLSFiles is the `tls: {cert, key}` of a component's YAML: a PEM
// certificate (chain) and its key; a receiver with both speaks TLS.
type TLSFiles struct {
	Cert string `yaml:"cert"`
	Key  string `yaml:"key"`
}

// Enabled reports whether a certificate is configured.
func (t TLSFiles) Enabled() bool { return t.Cert != "" || t.Key != "" }

// Validate checks that cert and key go together.
func (t TLSFiles) Validate() error {
	if (t.Cert == "") != (t.Key == "") {
		return errors.New("tls: cert and key go together")
	}
	return nil
}

// ServerConfig loads the certificate for a server (TLS 1.2 at least); nil
// without one.
func (t TLSFiles) ServerConfig() (*tls.Config, error) {
	if !t.Enabled() {
		return nil, nil
	}
	if err := t.Validate(); err != nil {
		return nil, Classify(ErrConfig, err)
	}
	cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
	if err != nil {
		return nil, Classify(ErrConfig, fmt.Errorf("tls: %w", err))
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}
