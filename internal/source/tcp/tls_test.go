package tcp

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/codec/kdb"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/record"
	"github.com/tracebridge/tracebridge/internal/tlstest"
)

// TestTLSReceiver: a receiver with tls: {cert, key} takes TLS connections.
func TestTLSReceiver(t *testing.T) {
	cert, key := tlstest.Files(t, t.TempDir())
	var f pipeline.ReceiverFactory
	for _, x := range Factories() {
		if x.Type() == TypeServer {
			f = x
		}
	}
	cfg := &KDBServerConfig{Listen: "127.0.0.1:0", Limits: Limits{TLS: pipeline.TLSFiles{Cert: cert, Key: key}}}
	r, err := f.NewReceiver(cfg, pipeline.Settings{Name: "tls", Catalog: record.Builtin()})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	got := 0
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() {
		done <- r.Run(ctx, pipeline.ConsumerFunc(func(_ context.Context, b *record.Batch) error {
			mu.Lock()
			got += b.Len()
			mu.Unlock()
			return nil
		}))
	}()
	addr := r.(*built).Addr().String()
	if w := r.Where(); w != "listening on "+addr+" (TLS)" {
		t.Errorf("Where %q does not say TLS", w)
	}
	pool := x509.NewCertPool()
	pem, _ := os.ReadFile(cert)
	pool.AppendCertsFromPEM(pem)
	conn, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := kdb.DefaultMapping(record.Builtin())
	data := kdbRecords(t, m, 1, 0, 10)
	conn.Write(data)
	conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := got
		mu.Unlock()
		if n == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records over TLS", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A plain connection gets nothing through.
	plain, err := net.Dial("tcp", addr)
	if err == nil {
		plain.Write(data)
		plain.Close()
	}
	time.Sleep(100 * time.Millisecond)
	cancel()
	<-done
	if got != 10 {
		t.Fatalf("%d records after a plain connection", got)
	}
}
