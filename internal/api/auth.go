package api

import (
	"bufio"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/tracebridge/tracebridge/internal/hostauth"
	"github.com/tracebridge/tracebridge/internal/listenpolicy"
)

// Tokens are the argon2id hashes of the API tokens that may write. A
// token verified once is remembered (by its SHA-256) for verifiedFor, as
// argon2id takes 64 MiB and a good part of a second on purpose; at most
// two verifications run at once, so wrong tokens cannot exhaust memory.
type Tokens struct {
	hashes []string

	mu       sync.Mutex
	verified map[[32]byte]time.Time
	refused  map[[32]byte]time.Time
	sem      chan struct{}
	now      func() time.Time
}

const (
	verifiedFor = 5 * time.Minute
	refusedFor  = time.Minute
	maxRemember = 1024
	tokenPrefix = "tbt_"
)

// NewTokens checks that every hash is an argon2id hash (a plain token in
// the configuration is an error: tokens are stored hashed).
func NewTokens(hashes []string) (*Tokens, error) {
	t := &Tokens{verified: map[[32]byte]time.Time{}, refused: map[[32]byte]time.Time{}, sem: make(chan struct{}, 2), now: time.Now}
	for i, h := range hashes {
		h = strings.TrimSpace(h)
		if !strings.HasPrefix(h, "$argon2id$") || strings.Count(h, "$") != 5 {
			return nil, fmt.Errorf("api token %d: not an argon2id hash ($argon2id$v=19$m=…): store the hash `tracebridge token` prints, not the token", i+1)
		}
		t.hashes = append(t.hashes, h)
	}
	return t, nil
}

// LoadTokens reads the hashes given inline and those of a file (one per
// line; empty lines and lines starting with # are skipped).
func LoadTokens(inline []string, file string) (*Tokens, error) {
	hashes := append([]string(nil), inline...)
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("api_tokens_file: %w", err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == "" || line[0] == '#' {
				continue
			}
			hashes = append(hashes, line)
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("api_tokens_file %s: %w", file, err)
		}
	}
	t, err := NewTokens(hashes)
	if err != nil && file != "" {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return t, err
}

// Len returns the number of tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.hashes)
}

// errBusy: verifications are queued up (a flood of wrong tokens).
var errBusy = errors.New("busy")

// Check reports whether token is one of the tokens.
func (t *Tokens) Check(token string) (bool, error) {
	if t == nil || len(t.hashes) == 0 || token == "" || len(token) > 1024 {
		return false, nil
	}
	key := sha256.Sum256([]byte(token))
	now := t.now()
	t.mu.Lock()
	if at, ok := t.verified[key]; ok && now.Sub(at) < verifiedFor {
		t.mu.Unlock()
		return true, nil
	}
	if at, ok := t.refused[key]; ok && now.Sub(at) < refusedFor {
		t.mu.Unlock()
		return false, nil
	}
	t.mu.Unlock()
	select {
	case t.sem <- struct{}{}:
	case <-time.After(5 * time.Second):
		return false, errBusy
	}
	ok := false
	for _, h := range t.hashes {
		if hostauth.CheckSecret(h, token) {
			ok = true
			break
		}
	}
	<-t.sem
	t.mu.Lock()
	defer t.mu.Unlock()
	m := t.refused
	if ok {
		m = t.verified
	}
	if len(m) >= maxRemember {
		clear(m)
	}
	m[key] = now
	return ok, nil
}

// NewToken returns a new random token and its argon2id hash (what
// api_tokens and api_tokens_file hold).
func NewToken() (token, hash string) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	token = tokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	return token, hostauth.HashSecret(token)
}

// bearer returns the token of an Authorization header ("" when none),
// or of a WebSocket handshake's subprotocols.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	if h == "" {
		return wsBearer(r)
	}
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// WSBearerProtocol is the WebSocket subprotocol that carries a token: a
// browser cannot set headers on a WebSocket, and a token must not be in
// a URL, so the page opens new WebSocket(url, ["tracebridge.bearer",
// TOKEN]) and the server answers with this protocol alone.
const WSBearerProtocol = "tracebridge.bearer"

// wsBearer returns the token offered after WSBearerProtocol in the
// Sec-WebSocket-Protocol header of a WebSocket handshake ("" when none).
func wsBearer(r *http.Request) string {
	if !strings.EqualFold(r.Header.Get("Upgrade"), "websocket") {
		return ""
	}
	var protos []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for p := range strings.SplitSeq(h, ",") {
			protos = append(protos, strings.TrimSpace(p))
		}
	}
	for i, p := range protos {
		if p == WSBearerProtocol && i+1 < len(protos) {
			return protos[i+1]
		}
	}
	return ""
}

// loopback reports whether the request comes from this machine.
func loopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// authorize decides whether the request may call the route; writer says
// it presented a valid token.
func (a *API) authorize(rt *route, r *http.Request) (writer bool, err error) {
	tok := bearer(r)
	if tok == "" && r.Header.Get("Authorization") != "" {
		return false, errorf(http.StatusUnauthorized, "Authorization: want `Bearer TOKEN`")
	}
	if tok != "" {
		ok, err := a.opt.Tokens.Check(tok)
		if err != nil {
			return false, errorf(http.StatusServiceUnavailable, "too many token checks at once; try again")
		}
		if !ok {
			return false, errorf(http.StatusUnauthorized, "invalid API token")
		}
		writer = true
	}
	switch rt.auth {
	case authNone:
		return writer, nil
	case authRead:
		if writer || loopback(r) && !a.opt.ReadTokenRequired {
			return writer, nil
		}
		return false, errorf(http.StatusUnauthorized, "an API token is required (Authorization: Bearer TOKEN)")
	}
	if writer {
		return true, nil
	}
	if a.opt.Tokens.Len() == 0 {
		return false, errorf(http.StatusForbidden, "no API tokens are configured, so nobody may write: add a hash of `tracebridge token` to http: {api_tokens_file} (or api_tokens)")
	}
	return false, errorf(http.StatusUnauthorized, "an API token is required (Authorization: Bearer TOKEN)")
}

// CheckListen refuses a listener that would send tokens in clear text
// over a network: an address other than loopback needs TLS, or insecure.
func CheckListen(addr string, tls, insecure bool) error {
	if err := listenpolicy.Check("listen", addr, tls, insecure, "tls: {cert, key}"); err != nil {
		return fmt.Errorf("http: %w", err)
	}
	return nil
}
