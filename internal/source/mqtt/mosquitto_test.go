package mqtt

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	paho "github.com/eclipse/paho.mqtt.golang"

	"github.com/tracebridge/tracebridge/internal/servicetest"
)

// mosquitto is a private Mosquitto process.
type mosquitto struct {
	t    testing.TB
	addr string
	conf string
	cmd  *exec.Cmd
}

// startMosquitto runs a private mosquitto on a free loopback port with
// persistence under a temporary directory and the extra configuration
// lines given; it is killed when the test ends.
func startMosquitto(t testing.TB, extra string) *mosquitto {
	servicetest.RequireBinary(t, "/usr/sbin/mosquitto", "mosquitto")
	port := servicetest.FreePort(t)
	dir := t.TempDir()
	m := &mosquitto{t: t, addr: fmt.Sprintf("127.0.0.1:%d", port), conf: filepath.Join(dir, "m.conf")}
	conf := fmt.Sprintf("listener %d 127.0.0.1\nallow_anonymous true\npersistence true\npersistence_location %s/\n%s", port, dir, extra)
	if os.Geteuid() == 0 {
		// Started as root, mosquitto drops to the user mosquitto, which
		// cannot write its persistence file into the test's directory.
		conf += "user root\n"
	}
	if err := os.WriteFile(m.conf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	m.start()
	t.Cleanup(func() {
		if m.cmd != nil {
			m.cmd.Process.Kill()
			m.cmd.Wait()
		}
	})
	return m
}

func (m *mosquitto) start() {
	m.cmd = exec.Command("/usr/sbin/mosquitto", "-c", m.conf)
	if err := m.cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	for range 100 {
		c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + m.addr).SetClientID("probe"))
		if tok := c.Connect(); tok.WaitTimeout(time.Second) && tok.Error() == nil {
			c.Disconnect(10)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	m.t.Fatal("mosquitto did not start")
}

// stop ends the broker: gracefully (SIGTERM: it saves its persistent state,
// sessions and in-flight messages included) or by SIGKILL.
func (m *mosquitto) stop(graceful bool) {
	sig := os.Kill
	if graceful {
		sig = syscall.SIGTERM
	}
	m.cmd.Process.Signal(sig)
	m.cmd.Wait()
	m.cmd = nil
}
