package pipeline

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
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

// ClientConfig is a client's TLS configuration (TLS 1.2 at least): it
// trusts the certificates of the PEM file ca ("": the system's roots)
// and presents the certificate cert with its key ("" both: none).
func ClientConfig(ca, cert, key string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca: %s holds no PEM certificate", ca)
		}
		c.RootCAs = pool
	}
	if cert != "" || key != "" {
		if err := (TLSFiles{Cert: cert, Key: key}).Validate(); err != nil {
			return nil, err
		}
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, err
		}
		c.Certificates = []tls.Certificate{pair}
	}
	return c, nil
}
