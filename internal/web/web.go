// Package web is the web UI: pages, scripts and styles built into the
// binary with embed, served by the HTTP listener outside /api. The UI is
// a single page that reads only the REST API of package api (and its
// WebSocket /api/live); nothing is fetched from elsewhere and nothing is
// built before `go build`.
//
// Every path that is not a file of the UI answers with the page itself
// (index.html), so /trace/{id} and /search?… can be shared as links; the
// page's script routes them.
package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed static
var files embed.FS

// csp allows the page's own scripts, styles and connections only: no
// inline script, no other origin.
const csp = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'"

// Handler serves the UI.
func Handler() http.Handler {
	static, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	index, err := fs.ReadFile(static, "index.html")
	if err != nil {
		panic(err)
	}
	etags, err := hashes(static)
	if err != nil {
		panic(err)
	}
	fileServer := http.FileServer(http.FS(static))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", csp)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the web UI only answers GET", http.StatusMethodNotAllowed)
			return
		}
		p := path.Clean("/" + r.URL.Path)
		if strings.HasPrefix(p, "/ui/") {
			name := strings.TrimPrefix(p, "/ui/")
			etag, ok := etags[name]
			if !ok { // not a file (a directory, or nothing)
				http.NotFound(w, r)
				return
			}
			// Browsers ask again each time and get 304 while the file
			// is the same: a new binary's files are used at once.
			h.Set("Cache-Control", "no-cache")
			h.Set("ETag", etag)
			r2 := r.Clone(r.Context())
			r2.URL.Path = "/" + name
			fileServer.ServeHTTP(w, r2)
			return
		}
		h.Set("Content-Type", "text/html; charset=utf-8")
		h.Set("Cache-Control", "no-store")
		w.Write(index)
	})
}

// hashes returns an ETag for every file of the UI, by its path.
func hashes(static fs.FS) (map[string]string, error) {
	out := map[string]string{}
	err := fs.WalkDir(static, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(static, name)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		out[name] = `"` + hex.EncodeToString(sum[:12]) + `"`
		return nil
	})
	return out, err
}
