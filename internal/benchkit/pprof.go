package benchkit

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
)

// Fetch GETs url (a profile of a /debug/pprof/ endpoint) into file.
func Fetch(ctx context.Context, url, file string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, b)
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return f.Close()
}

// Pprof runs `go tool pprof` with args and returns what it printed.
func Pprof(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", append([]string{"tool", "pprof"}, args...)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go tool pprof %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
