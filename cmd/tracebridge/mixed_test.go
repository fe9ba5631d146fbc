package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"path/filepath"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"
	gostomp "github.com/go-stomp/stomp/v3"
	natsgo "github.com/nats-io/nats.go"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
	"github.com/tracebridge/tracebridge/internal/servicetest"
)

// tlsProxy terminates TLS with a self-signed certificate for 127.0.0.1 and
// forwards to target; it returns its address and the CA file.
func tlsProxy(t *testing.T, target string) (addr, caFile string) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tracebridge test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	writeFile(t, caFile, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	if err != nil {
		t.Fatal(err)
	}
	acceptEach(t, ln, func(c net.Conn) {
		up, err := net.Dial("tcp", target)
		if err != nil {
			c.Close()
			return
		}
		go func() { io.Copy(up, c); up.Close() }()
		io.Copy(c, up)
		c.Close()
	})
	return ln.Addr().String(), caFile
}

// TestSeveralBrokerAndTCPReceivers runs one serve with a STOMP receiver over
// TLS (stomp+ssl://), a NATS receiver, an MQTT receiver and a KDB TCP
// receiver at once.
func TestSeveralBrokerAndTCPReceivers(t *testing.T) {
	servicetest.Require(t, servicetest.RabbitSTOMP, "RabbitMQ STOMP")
	servicetest.Require(t, servicetest.NATS, "NATS")
	servicetest.Require(t, servicetest.Mosquitto, "Mosquitto")
	n := mrand.Int64()
	queue := fmt.Sprintf("/queue/tracebridge-mixed-%d", n)
	servicetest.DeleteQueueAfter(t, queue)
	subject := fmt.Sprintf("tbmixed.%d", n)
	topic := fmt.Sprintf("tracebridge/mixed/%d", n)
	tlsAddr, ca := tlsProxy(t, servicetest.RabbitSTOMP)
	dir := t.TempDir()
	p := bridgetest.Start(t, dir, "-c", bridgetest.WriteConfig(t, dir, fmt.Sprintf(`
receivers:
  - {name: stomp, type: stomp-client, url: "stomp+ssl://%s", user: guest, password: guest, destination: %q, tls_ca: %q}
  - {name: nats, type: nats-client, url: "nats://%s", destination: %q, stream: "TBMIXED%d"}
  - {name: mqtt, type: mqtt-client, url: "mqtt://%s", destination: %q, client_id: "tb-mixed-%d"}
  - {name: kdb, type: tcp-server, listen: "127.0.0.1:0"}
sinks: [{type: kieker-log, path: logs}]
`, tlsAddr, queue, ca, servicetest.NATS, subject, n, servicetest.Mosquitto, topic, n)), "-v", "400")
	time.Sleep(time.Second) // subscriptions in place
	ev := func(tr, i int) []byte { return fmt.Appendf(nil, "1;%d;%d;%d;op();a.B", i, tr, i) }

	sc, err := gostomp.Dial("tcp", servicetest.RabbitSTOMP, gostomp.ConnOpt.Login("guest", "guest"), gostomp.ConnOpt.Host("/"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		sc.Send(queue, "text/plain", ev(1, i))
	}
	sc.Disconnect()
	nc, err := natsgo.Connect("nats://" + servicetest.NATS)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		nc.Publish(subject, ev(2, i))
	}
	nc.Flush()
	nc.Close()
	mc := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + servicetest.Mosquitto).SetClientID(fmt.Sprintf("pub-%d", n)))
	if tok := mc.Connect(); !tok.WaitTimeout(10*time.Second) || tok.Error() != nil {
		t.Fatal(tok.Error())
	}
	for i := 0; i < 100; i++ {
		mc.Publish(topic, 1, false, ev(3, i)).WaitTimeout(5 * time.Second)
	}
	mc.Disconnect(100)
	send(t, p.Receivers["kdb"], kdbEvents(t, 4, 0, 100))
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if regexpFind(p.Stdout(), `received 400 records`) != nil {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.Stop()
	traces := map[int64]int{}
	for _, r := range bridgetest.ReadLogSkipBad(t, p.LogDir) {
		if r.Type.ShortName() == "BeforeOperationEvent" {
			traces[r.Values[1].Int()]++
		}
	}
	for tr := int64(1); tr <= 4; tr++ {
		if traces[tr] != 100 {
			t.Errorf("receiver %d delivered %d of 100 records (%v)", tr, traces[tr], traces)
		}
	}
	deleteNATSStream(fmt.Sprintf("TBMIXED%d", n))
}

func deleteNATSStream(name string) {
	nc, err := natsgo.Connect("nats://" + servicetest.NATS)
	if err != nil {
		return
	}
	defer nc.Close()
	nc.Request("$JS.API.STREAM.DELETE."+name, nil, 2*time.Second)
}
