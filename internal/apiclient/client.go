// Package apiclient is the client of a running bridge's HTTP API
// (internal/api) that `tracebridge query --url` uses: GET requests with
// an optional bearer token, answers decoded into the API's own types.
// A Client may be used by several goroutines at once.
package apiclient

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/api"
	"github.com/tracebridge/tracebridge/internal/clusterstatus"
)

// Client calls the API of a running bridge (tracebridge query --url).
type Client struct {
	base  *url.URL
	token string
	http  *http.Client
}

// Error is an answer other than 200.
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Msg)
}

// New returns a client of the bridge at base (http://host:port); token,
// when not empty, goes in the Authorization header.
func New(base, token string) (*Client, error) {
	u, err := url.Parse(base)
	if err != nil || u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("url %q: want http://HOST:PORT or https://HOST:PORT", base)
	}
	if u.User != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("url %q: no user or query in the URL (a token goes in TRACEBRIDGE_TOKEN)", u.Redacted())
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	return &Client{base: u, token: token, http: &http.Client{Timeout: 2 * time.Minute}}, nil
}

// Get calls GET path with the query q and returns the body of a 200.
func (c *Client) Get(ctx context.Context, path string, q url.Values) ([]byte, error) {
	u := *c.base
	u.Path += path
	u.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<30))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		return nil, &Error{resp.StatusCode, e.Error}
	}
	return b, nil
}

func (c *Client) getJSON(ctx context.Context, path string, q url.Values, v any) error {
	b, err := c.Get(ctx, path, q)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// Search runs a search (the parameters of GET /api/v1/traces).
func (c *Client) Search(ctx context.Context, q url.Values) (api.SearchResult, error) {
	var r api.SearchResult
	return r, c.getJSON(ctx, "/api/v1/traces", q, &r)
}

// Trace returns a trace as JSON or text (format "json" or "text").
func (c *Client) Trace(ctx context.Context, id, format string) ([]byte, error) {
	return c.Get(ctx, "/api/v1/traces/"+url.PathEscape(id), url.Values{"format": {format}})
}

// Find searches inside a trace.
func (c *Client) Find(ctx context.Context, id string, q url.Values) (api.FindResult, error) {
	var r api.FindResult
	return r, c.getJSON(ctx, "/api/v1/traces/"+url.PathEscape(id)+"/find", q, &r)
}

// Rank returns a trace's method ranking.
func (c *Client) Rank(ctx context.Context, id string) (api.Ranking, error) {
	var r api.Ranking
	return r, c.getJSON(ctx, "/api/v1/traces/"+url.PathEscape(id)+"/rank", nil, &r)
}

// Pivot groups the selected traces by a root attribute.
func (c *Client) Pivot(ctx context.Context, q url.Values) (api.PivotResult, error) {
	var r api.PivotResult
	return r, c.getJSON(ctx, "/api/v1/pivot", q, &r)
}

// ClusterStatus returns the cluster as the node sees it (GET
// /api/v1/cluster; an *Error with Status 404 on a bridge that runs
// alone).
func (c *Client) ClusterStatus(ctx context.Context) (clusterstatus.Status, error) {
	var s clusterstatus.Status
	return s, c.getJSON(ctx, "/api/v1/cluster", nil, &s)
}
