// Package tlstest makes the self-signed certificates of the tests of TLS
// listeners (the receivers, the ZICO server, serve's http listener).
package tlstest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Cert is a self-signed certificate for 127.0.0.1 and localhost (a
// server's, or a client's for mutual TLS),
// valid for an hour either side of its making, and its own CA.
type Cert struct {
	// TLS is the certificate and its key for a tls.Config, Leaf set.
	TLS tls.Certificate
	// Pool trusts the certificate: a client's RootCAs.
	Pool *x509.CertPool
}

// New makes a certificate; a failure fails tb.
func New(tb testing.TB) Cert {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tracebridge test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return Cert{TLS: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, Pool: pool}
}

// WriteFiles writes the certificate and its key as PEM into dir
// (cert.pem, key.pem) and returns their paths; a failure fails tb.
func (c Cert) WriteFiles(tb testing.TB, dir string) (certFile, keyFile string) {
	tb.Helper()
	kb, err := x509.MarshalECPrivateKey(c.TLS.PrivateKey.(*ecdsa.PrivateKey))
	if err != nil {
		tb.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.TLS.Certificate[0]}), 0o600); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		tb.Fatal(err)
	}
	return certFile, keyFile
}

// Files makes a certificate, writes it into dir as WriteFiles does and
// returns the paths of the certificate and key files.
func Files(tb testing.TB, dir string) (certFile, keyFile string) {
	tb.Helper()
	return New(tb).WriteFiles(tb, dir)
}
