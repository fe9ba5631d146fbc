package mqtt

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	port int
	dir  string // persistence
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
	m := &mosquitto{t: t, addr: fmt.Sprintf("127.0.0.1:%d", port), port: port, dir: dir, conf: filepath.Join(dir, "m.conf")}
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

// save makes the broker write its persistence file now (SIGUSR1) and
// waits until it has: the file is replaced (it writes a new file and
// renames it), so what the broker held before save was called is in it.
func (m *mosquitto) save(timeout time.Duration) {
	m.t.Helper()
	db := filepath.Join(m.dir, "mosquitto.db")
	type version struct {
		ino  uint64
		time time.Time
		size int64
	}
	current := func() (version, bool) {
		st, err := os.Stat(db)
		if err != nil {
			return version{}, false
		}
		return version{st.Sys().(*syscall.Stat_t).Ino, st.ModTime(), st.Size()}, true
	}
	before, _ := current()
	if err := m.cmd.Process.Signal(syscall.SIGUSR1); err != nil {
		m.t.Fatal(err)
	}
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		if now, ok := current(); ok && now != before {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("mosquitto did not save its state within %v", timeout)
		}
	}
}

// waitConnectionsClosed waits until the broker has closed every client
// connection (Linux: none of its sockets is ESTABLISHED or CLOSE_WAIT in
// /proc/net/tcp). A client's last packets (acknowledgements, then
// DISCONNECT) are read by the broker before it closes the connection, so
// afterwards it has processed them all. Mosquitto reads its connections in
// turn: a new connection of the same session may otherwise take the
// session over before the old one's acknowledgements are read (they are
// then lost, and the messages delivered again), which a slow broker (one
// that saves its state after every change) on a loaded machine shows.
func (m *mosquitto) waitConnectionsClosed(timeout time.Duration) {
	m.t.Helper()
	for deadline := time.Now().Add(timeout); ; time.Sleep(20 * time.Millisecond) {
		n, err := brokerConnections(m.port)
		if err != nil {
			m.t.Fatal(err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("mosquitto still has %d open connections after %v", n, timeout)
		}
	}
}

// brokerConnections counts the sockets of local port port that are
// ESTABLISHED (01) or CLOSE_WAIT (08): connections the broker has not
// closed yet.
func brokerConnections(port int) (int, error) {
	f, err := os.Open("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 4 {
			continue
		}
		_, p, ok := strings.Cut(fields[1], ":")
		if !ok {
			continue
		}
		lp, err := strconv.ParseUint(p, 16, 16)
		if err != nil || int(lp) != port {
			continue
		}
		if fields[3] == "01" || fields[3] == "08" {
			n++
		}
	}
	return n, sc.Err()
}

// persistentSession makes the broker keep a session for id subscribed to
// topic with QoS 1, as the receiver's first connection does: what is
// published from now on waits for the receiver, however long it takes to
// connect and subscribe.
func persistentSession(t testing.TB, addr, id, topic string) {
	t.Helper()
	c := paho.NewClient(paho.NewClientOptions().AddBroker("tcp://" + addr).SetClientID(id).SetCleanSession(false))
	if tok := c.Connect(); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("connect %s: %v", id, tok.Error())
	}
	defer c.Disconnect(250)
	if tok := c.Subscribe(topic, 1, nil); !tok.WaitTimeout(30*time.Second) || tok.Error() != nil {
		t.Fatalf("subscribe %s: %v", id, tok.Error())
	}
}
