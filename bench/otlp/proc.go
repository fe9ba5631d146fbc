package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
)

// server is a process under measurement.
type server struct {
	name    string
	cmd     *exec.Cmd
	stderr  *benchkit.Tail
	exited  chan struct{}
	waitErr error
	lines   chan string // its standard output, line by line
}

// startServer starts bin with args; its standard output goes to lines.
func startServer(ctx context.Context, name, bin string, args ...string) (*server, error) {
	return startServerEnv(ctx, name, bin, nil, args...)
}

// startServerEnv is startServer with more environment variables.
func startServerEnv(ctx context.Context, name, bin string, env []string, args ...string) (*server, error) {
	s := &server{name: name, stderr: benchkit.NewTail(64 << 10), exited: make(chan struct{}), lines: make(chan string, 64)}
	s.cmd = exec.CommandContext(ctx, bin, args...)
	if env != nil {
		s.cmd.Env = append(os.Environ(), env...)
	}
	s.cmd.Stderr = s.stderr
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case s.lines <- sc.Text():
			default: // nobody listens after start-up
			}
		}
		io.Copy(io.Discard, out)
	}()
	go func() {
		s.waitErr = s.cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

func (s *server) pid() int { return s.cmd.Process.Pid }

// stop ends the process with SIGTERM (SIGKILL after 30 s).
func (s *server) stop() error {
	select {
	case <-s.exited:
		return s.waitErr
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
		return s.waitErr
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
		return fmt.Errorf("%s did not stop within 30s of SIGTERM", s.name)
	}
}

// freeAddr returns a loopback address with a free port.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// serviceAddrs returns three free loopback addresses: a server's OTLP
// gRPC, OTLP HTTP and metrics endpoints.
func serviceAddrs() ([3]string, error) {
	var addrs [3]string
	for i := range addrs {
		a, err := freeAddr()
		if err != nil {
			return addrs, err
		}
		addrs[i] = a
	}
	return addrs, nil
}

// waitListening waits until every address takes connections.
func waitListening(s *server, timeout time.Duration, addrs ...string) error {
	deadline := time.Now().Add(timeout)
	for _, a := range addrs {
		for {
			c, err := net.DialTimeout("tcp", a, time.Second)
			if err == nil {
				c.Close()
				break
			}
			select {
			case <-s.exited:
				return fmt.Errorf("%s exited at start (%v): %s", s.name, s.waitErr, s.stderr)
			default:
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: %s not listening within %v: %s", s.name, a, timeout, s.stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return nil
}
