package natslogin

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestOptions: each login sets what nats.go presents, and only that.
func TestOptions(t *testing.T) {
	try := func(l Login) (nats.Options, error) {
		o := nats.GetDefaultOptions()
		for _, f := range l.Options() {
			if err := f(&o); err != nil {
				return o, err
			}
		}
		return o, nil
	}
	apply := func(l Login) nats.Options {
		o, err := try(l)
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	if o := apply(Login{}); o.User != "" || o.Token != "" || o.UserJWT != nil || o.Secure {
		t.Errorf("the zero login: %+v", o)
	}
	if o := apply(Login{User: "tb", Password: "s3cret"}); o.User != "tb" || o.Password != "s3cret" || o.Token != "" {
		t.Errorf("user and password: %q %q %q", o.User, o.Password, o.Token)
	}
	if o := apply(Login{Token: "t0ken"}); o.Token != "t0ken" || o.User != "" {
		t.Errorf("token: %q %q", o.Token, o.User)
	}
	// (nats.go reads the credentials file as the option is applied.)
	if _, err := try(Login{CredsFile: "/nonexistent/x.creds"}); err == nil || !strings.Contains(err.Error(), "x.creds") {
		t.Errorf("a credentials file that is not there: %v", err)
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if o := apply(Login{Token: "t", TLS: c}); !o.Secure || o.TLSConfig != c {
		t.Errorf("TLS: secure %v, config %p want %p", o.Secure, o.TLSConfig, c)
	}
}
