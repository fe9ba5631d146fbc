package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/source/broker"
	natssrc "github.com/tracebridge/tracebridge/internal/source/nats"
)

// The publish-only run of the embedded broker needs the broker without the
// bridge: this program run again with roleEnv=embedded-broker and dirEnv
// set to its storage directory, a separate process like the bridge.
const (
	roleEnv      = "TRACEBRIDGE_BENCH_ROLE"
	dirEnv       = "TRACEBRIDGE_BENCH_DIR"
	roleEmbedded = "embedded-broker"
)

// embeddedBroker is the broker's main: it starts the embedded broker as
// serve does (natssrc.StartServer, then the receiver's Prepare creates the
// KIEKER stream and the durable consumer), prints "listening
// USER:PASSWORD@ADDR" (the server's credential), and
// stops when its standard input ends.
func embeddedBroker() error {
	dir := os.Getenv(dirEnv)
	if dir == "" {
		return fmt.Errorf("%s is not set", dirEnv)
	}
	srv, err := natssrc.StartServer(natssrc.ServerConfig{Host: "127.0.0.1", StoreDir: dir})
	if err != nil {
		return err
	}
	defer srv.Shutdown()
	c := srv.Credentials()
	r, err := natssrc.New(natssrc.Config{Name: "bench", InProcess: srv.InProcess(), User: c.User, Password: c.Password}, broker.Settings{})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := r.Prepare(ctx); err != nil {
		return err
	}
	// USER:PASSWORD@HOST:PORT: the publishers present the credential.
	fmt.Printf("listening %s@%s\n", url.UserPassword(c.User, c.Password), srv.Addr())
	io.Copy(io.Discard, os.Stdin)
	return nil
}

// brokerProc is a running embedded broker process.
type brokerProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	addr   string
	stderr *benchkit.Tail
}

// startBroker starts the embedded broker process with its storage in dir.
func startBroker(ctx context.Context, dir string) (*brokerProc, error) {
	cmd, err := benchkit.ChildCommand(ctx, roleEnv, roleEmbedded, dirEnv+"="+dir)
	if err != nil {
		return nil, err
	}
	p := &brokerProc{cmd: cmd, stderr: benchkit.NewTail(16 << 10)}
	p.cmd.Stderr = p.stderr
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("embedded broker: %w", err)
	}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		io.Copy(io.Discard, out)
	}()
	select {
	case l, ok := <-line:
		addr, found := strings.CutPrefix(l, "listening ")
		if !ok || !found {
			p.stop()
			return nil, fmt.Errorf("embedded broker: %q where its address was expected: %s", l, p.stderr)
		}
		p.addr = addr
	case <-time.After(startTimeout):
		p.stop()
		return nil, fmt.Errorf("embedded broker did not start within %v: %s", startTimeout, p.stderr)
	}
	return p, nil
}

// stop ends the broker (closing its standard input, killing it if it does
// not exit within 10 s).
func (p *brokerProc) stop() error {
	p.stdin.Close()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("embedded broker: %v: %s", err, p.stderr)
		}
		return nil
	case <-time.After(10 * time.Second):
		p.cmd.Process.Kill()
		<-done
		return fmt.Errorf("embedded broker did not stop within 10 s: %s", p.stderr)
	}
}
