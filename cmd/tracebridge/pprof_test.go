package main

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/bridgetest"
)

// TestPprofEnv: with TRACEBRIDGE_PPROF serve answers Go's profiles on the
// loopback address it names (and says where); any other address is
// refused before anything runs.
func TestPprofEnv(t *testing.T) {
	r := runEnv(t, []string{pprofEnv + "=0.0.0.0:0"}, "version")
	if r.code != 2 || !strings.Contains(r.stderr, "loopback address only") {
		t.Fatalf("%s on 0.0.0.0: exit %d, stderr %q; want 2 and a refusal", pprofEnv, r.code, r.stderr)
	}

	dir := t.TempDir()
	cfg := bridgetest.WriteConfig(t, dir, bridgetest.LogConfig(`{name: k, type: kieker-tcp, listen: "127.0.0.1:0"}`))
	cmd := exec.Command(bridgetest.Binary(t), "serve", "-c", cfg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), pprofEnv+"=127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var url string
	deadline := time.After(time.Minute)
	for url == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatal("serve ended without saying where its profiles are")
			}
			if rest, ok := strings.CutPrefix(l, "tracebridge: profiles on "); ok {
				url = rest
			}
		case <-deadline:
			t.Fatal("no profiles address within a minute")
		}
	}
	go func() {
		for range lines { // keep serve's stderr drained
		}
	}()
	resp, err := http.Get(url + "heap?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "heap profile") {
		t.Errorf("GET %sheap?debug=1: %s %.200q", url, resp.Status, body)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Errorf("serve after SIGTERM: %v", err)
	}
}
