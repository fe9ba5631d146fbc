package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tracebridge/tracebridge/internal/benchkit"
	"github.com/tracebridge/tracebridge/internal/source/tcp"
)

// The baseline server is this program run again with roleEnv=discard and
// connsEnv=K: a separate process, like the bridge, so that it does not
// share a Go runtime with the clients.
const (
	roleEnv  = "TRACEBRIDGE_BENCH_ROLE"
	connsEnv = "TRACEBRIDGE_BENCH_CONNS"
)

// rawRun measures a raw loopback copy: the same clients send the same
// bytes (counts[i] records of streams[i]) to a server that only reads and
// discards them. The clock runs from the first byte sent until the server
// has read every byte.
func rawRun(ctx context.Context, streams []*stream, counts []int64) (time.Duration, time.Duration, error) {
	cmd, err := benchkit.ChildCommand(ctx, roleEnv, "discard", connsEnv+"="+strconv.Itoa(len(streams)))
	if err != nil {
		return 0, 0, err
	}
	stderr := benchkit.NewTail(16 << 10)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, fmt.Errorf("discard server: %w", err)
	}
	defer cmd.Process.Kill() // after a successful Wait this does nothing
	sc := bufio.NewScanner(out)
	line := func(prefix string) (string, error) {
		if !sc.Scan() {
			return "", fmt.Errorf("discard server: no %q line (%v): %s", prefix, sc.Err(), stderr)
		}
		v, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			return "", fmt.Errorf("discard server: %q where %q was expected", sc.Text(), prefix)
		}
		return v, nil
	}
	addr, err := line("listening ")
	if err != nil {
		return 0, 0, err
	}
	conns, err := dial(addr, len(streams))
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	done := sendAll(conns, streams, counts, time.Time{})
	got, err := line("done ")
	elapsed := time.Since(start)
	if err != nil {
		return 0, 0, err
	}
	res := <-done
	if res.err != nil {
		return 0, 0, res.err
	}
	if err := cmd.Wait(); err != nil {
		return 0, 0, fmt.Errorf("discard server: %v: %s", err, stderr)
	}
	if want := strconv.FormatInt(res.total().bytes, 10); got != want {
		return 0, 0, fmt.Errorf("discard server read %s bytes where %s were sent", got, want)
	}
	cpu, _ := benchkit.Usage(cmd.ProcessState)
	return elapsed, cpu, nil
}

// discardServer is the baseline server's main: it accepts K connections,
// reads each to its end with a buffer the size of the bridge's default
// read buffer, and prints "done BYTES" once all have ended.
func discardServer() error {
	k, err := strconv.Atoi(os.Getenv(connsEnv))
	if err != nil || k < 1 {
		return fmt.Errorf("%s=%q: want a positive number of connections", connsEnv, os.Getenv(connsEnv))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	fmt.Printf("listening %s\n", ln.Addr())
	var total atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, k)
	for i := 0; i < k; i++ {
		c, err := ln.Accept()
		if err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			buf := make([]byte, tcp.DefaultReadBuffer)
			for {
				n, err := c.Read(buf)
				total.Add(int64(n))
				if errors.Is(err, io.EOF) {
					return
				}
				if err != nil {
					errs[i] = fmt.Errorf("connection %d: %w", i, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Printf("done %d\n", total.Load())
	return nil
}
