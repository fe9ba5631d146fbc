package benchkit

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFetch(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/debug/pprof/allocs" {
			http.Error(w, "no such profile", http.StatusNotFound)
			return
		}
		w.Write([]byte("profile bytes"))
	}))
	defer srv.Close()
	dir := t.TempDir()

	file := filepath.Join(dir, "allocs.pb.gz")
	if err := Fetch(context.Background(), srv.URL+"/debug/pprof/allocs", file); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "profile bytes" {
		t.Errorf("fetched %q, %v; want %q", b, err, "profile bytes")
	}

	missing := filepath.Join(dir, "missing.pb.gz")
	err := Fetch(context.Background(), srv.URL+"/debug/pprof/missing", missing)
	if err == nil || !strings.Contains(err.Error(), "404") || !strings.Contains(err.Error(), "no such profile") {
		t.Errorf("Fetch of a missing profile: %v; want the status and the body", err)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Errorf("Fetch of a missing profile created %s (%v)", missing, err)
	}
}
