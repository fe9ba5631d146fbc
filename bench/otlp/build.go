package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// goCommand runs the go tool in dir, at a lower priority (nice 10: the
// Collector and Jaeger are large builds on a shared machine), outside any
// workspace, with the local toolchain and -mod=mode.
func goCommand(ctx context.Context, dir, mode string, args ...string) *exec.Cmd {
	name, argv := "go", args
	if nice, err := exec.LookPath("nice"); err == nil {
		name, argv = nice, append([]string{"-n", "10", "go"}, args...)
	}
	cmd := exec.CommandContext(ctx, name, argv...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOTOOLCHAIN=local", "GOFLAGS=-buildvcs=false "+mode)
	return cmd
}

// buildOnce returns the binary given by a flag (path), or the one named name
// in the cache directory, building it there with build when it is
// missing; without a cache directory it builds into the run's temporary
// directory tmp. A build goes to a temporary name first, so an
// interrupted build leaves no binary behind.
func buildOnce(ctx context.Context, path, cache, tmp, name, what string, build func(ctx context.Context, dir, out string) error, logf func(string, ...any)) (string, error) {
	if path != "" {
		return path, nil
	}
	dir := tmp
	if cache != "" {
		dir = cache
		out := filepath.Join(cache, name)
		if _, err := os.Stat(out); err == nil {
			logf("%s: %s (cached)", what, out)
			return out, nil
		}
		if err := os.MkdirAll(cache, 0o755); err != nil {
			return "", err
		}
	}
	out := filepath.Join(dir, name)
	logf("building %s from the module proxy into %s (minutes)", what, out)
	part := out + ".part"
	if err := build(ctx, tmp, part); err != nil {
		os.Remove(part)
		return "", err
	}
	return out, os.Rename(part, out)
}

// Jaeger v2 as the module proxy serves it: the Go module
// github.com/jaegertracing/jaeger at v1.76.0 is the Jaeger v2.13 release,
// whose main is cmd/jaeger (an OpenTelemetry Collector distribution with
// Jaeger's storage extension and exporter).
const (
	jaegerModule  = "github.com/jaegertracing/jaeger"
	jaegerVersion = "v1.76.0"
	jaegerRelease = "v2.13"
	jaegerBinary  = "jaeger-" + jaegerVersion
)

// buildJaeger downloads Jaeger's module and builds its cmd/jaeger with
// the module's own go.mod and go.sum, in the module cache's copy (read
// only: the build writes nothing there).
func buildJaeger(ctx context.Context, dir, out string) error {
	cmd := goCommand(ctx, dir, "-mod=mod", "mod", "download", "-json", jaegerModule+"@"+jaegerVersion)
	b, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go mod download %s@%s: %v: %s", jaegerModule, jaegerVersion, err, b)
	}
	var m struct{ Dir, Error string }
	if err := json.Unmarshal(b, &m); err != nil {
		return fmt.Errorf("go mod download %s@%s: %v", jaegerModule, jaegerVersion, err)
	}
	if m.Error != "" || m.Dir == "" {
		return fmt.Errorf("go mod download %s@%s: %s", jaegerModule, jaegerVersion, m.Error)
	}
	if b, err := goCommand(ctx, m.Dir, "-mod=readonly", "build", "-o", out, "./cmd/jaeger").CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./cmd/jaeger (in %s): %v\n%s", m.Dir, err, strings.TrimSpace(string(b)))
	}
	return nil
}
