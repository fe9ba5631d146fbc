package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, method, path string) (*http.Response, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	resp := rec.Result()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestHandler: any page address answers the page (a shared link to a
// trace opens it), files come from /ui/, nothing else of the binary's
// tree is reachable, and every answer carries the security headers.
func TestHandler(t *testing.T) {
	h := Handler()
	for _, p := range []string{"/", "/search?q=x", "/trace/0af7651916cd43dd8448eb211c80319c", "/hosts", "/no/such/page"} {
		resp, body := get(t, h, "GET", p)
		if resp.StatusCode != 200 || !strings.Contains(body, `src="/ui/js/app.js"`) {
			t.Errorf("%s: %d %.80s", p, resp.StatusCode, body)
		}
		if !strings.Contains(resp.Header.Get("Content-Security-Policy"), "script-src 'self'") || resp.Header.Get("X-Frame-Options") != "DENY" {
			t.Errorf("%s: headers %v", p, resp.Header)
		}
		if resp.Header.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: the page may be cached: %q", p, resp.Header.Get("Cache-Control"))
		}
	}
	for _, p := range []string{"/ui/js/app.js", "/ui/js/lib.js", "/ui/css/app.css"} {
		resp, body := get(t, h, "GET", p)
		if resp.StatusCode != 200 || len(body) < 100 {
			t.Errorf("%s: %d, %d bytes", p, resp.StatusCode, len(body))
		}
		ct := resp.Header.Get("Content-Type")
		if strings.HasSuffix(p, ".js") && !strings.Contains(ct, "javascript") || strings.HasSuffix(p, ".css") && !strings.Contains(ct, "css") {
			t.Errorf("%s: Content-Type %q", p, ct)
		}
	}
	// Directories and missing files are 404s; a path that leaves /ui/
	// is cleaned to a page address and answers the page.
	for _, p := range []string{"/ui/nothing.js", "/ui/js/", "/ui/css", "/ui/index.html/x"} {
		if resp, body := get(t, h, "GET", p); resp.StatusCode != 404 {
			t.Errorf("%s: %d %.80s", p, resp.StatusCode, body)
		}
	}
	for _, p := range []string{"/ui/../web.go", "/ui/%2e%2e/web.go"} {
		if resp, body := get(t, h, "GET", p); resp.StatusCode != 200 || !strings.Contains(body, `src="/ui/js/app.js"`) {
			t.Errorf("%s: %d %.80s", p, resp.StatusCode, body)
		}
	}
	// A file is revalidated by its ETag: the same file, 304.
	resp, _ := get(t, h, "GET", "/ui/js/app.js")
	etag := resp.Header.Get("ETag")
	if len(etag) < 10 {
		t.Fatalf("app.js has no ETag: %v", resp.Header)
	}
	req := httptest.NewRequest("GET", "/ui/js/app.js", nil)
	req.Header.Set("If-None-Match", etag)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusNotModified {
		t.Errorf("a revalidation of app.js: %d", rec.Code)
	}
	if resp, _ := get(t, h, "POST", "/search"); resp.StatusCode != 405 || resp.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d %v", resp.StatusCode, resp.Header)
	}
}

// TestNoThirdPartyCode: the UI loads nothing from another origin.
func TestNoThirdPartyCode(t *testing.T) {
	_, body := get(t, Handler(), "GET", "/")
	for _, bad := range []string{"http://", "https://", "//cdn", "<script>", "style="} {
		if strings.Contains(body, bad) {
			t.Errorf("index.html holds %q", bad)
		}
	}
}

// TestModulesStayLocal: every script imports only the UI's own modules.
func TestModulesStayLocal(t *testing.T) {
	entries, err := files.ReadDir("static/js")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := files.ReadFile("static/js/" + e.Name())
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "import ") && !strings.Contains(line, "from './") {
				t.Errorf("%s: %s", e.Name(), line)
			}
			if strings.Contains(line, "import(") && !strings.Contains(line, "import('./") {
				t.Errorf("%s: a dynamic import of elsewhere: %s", e.Name(), line)
			}
		}
	}
}
