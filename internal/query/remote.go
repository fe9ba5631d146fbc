package query

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tracebridge/tracebridge/internal/api"
	"github.com/tracebridge/tracebridge/internal/apiclient"
	"github.com/tracebridge/tracebridge/internal/store"
	"github.com/tracebridge/tracebridge/internal/trace"
)

// Remote asks a running bridge over its HTTP API.
type Remote struct {
	Client *apiclient.Client
	// Params are the search's filters as the API's parameters (Search and
	// Pivot send them; their times absolute, so that "15m" means the same
	// as against a store).
	Params url.Values
}

var _ Source = (*Remote)(nil)

// BadRequestError is the bridge's refusal of a request it finds
// malformed; Msg says why.
type BadRequestError struct{ Msg string }

func (e *BadRequestError) Error() string { return e.Msg }

var (
	// ErrUnauthorized: the bridge wants a token, or another one.
	ErrUnauthorized = errors.New(http.StatusText(http.StatusUnauthorized))
	// ErrUnreachable: the bridge could not be asked, or failed to answer.
	ErrUnreachable = errors.New("bridge unreachable")
)

// unreachable keeps err's message and is ErrUnreachable.
type unreachable struct{ error }

func (e unreachable) Unwrap() []error { return []error{e.error, ErrUnreachable} }

// remoteError turns the API's refusals into the errors of a store.
func remoteError(err error, id string) error {
	var ce *apiclient.Error
	if !errors.As(err, &ce) {
		return unreachable{err}
	}
	switch {
	case ce.Status == http.StatusNotFound && id != "":
		return fmt.Errorf("trace %s: %w", id, store.ErrNotFound)
	case ce.Status == http.StatusBadRequest && strings.HasPrefix(ce.Msg, "cursor:"):
		return fmt.Errorf("%s: %w", ce.Msg, store.ErrBadCursor)
	case ce.Status == http.StatusBadRequest:
		return &BadRequestError{ce.Msg}
	case ce.Status == http.StatusUnauthorized:
		return fmt.Errorf("%s: %w", ce.Msg, ErrUnauthorized)
	}
	return unreachable{err}
}

func (r *Remote) Search(ctx context.Context, q store.Query) (api.SearchResult, error) {
	p := maps.Clone(r.Params)
	if q.Oldest {
		p.Set("oldest", "true")
	}
	p.Set("limit", strconv.Itoa(q.Limit))
	if q.Cursor != "" {
		p.Set("cursor", q.Cursor)
	}
	res, err := r.Client.Search(ctx, p)
	if err != nil {
		return res, remoteError(err, "")
	}
	return res, nil
}

func (r *Remote) Pivot(ctx context.Context, _ store.Query, key string) ([]store.PivotRow, bool, error) {
	p := maps.Clone(r.Params)
	p.Set("key", key)
	res, err := r.Client.Pivot(ctx, p)
	if err != nil {
		return nil, false, remoteError(err, "")
	}
	return res.Rows, res.Partial, nil
}

func (r *Remote) Trace(ctx context.Context, id string, asJSON bool) ([]byte, error) {
	b, err := r.Client.Trace(ctx, id, map[bool]string{true: "json", false: "text"}[asJSON])
	if err != nil {
		return nil, remoteError(err, id)
	}
	return b, nil
}

func (r *Remote) Rank(ctx context.Context, id string) ([]trace.MethodStat, error) {
	res, err := r.Client.Rank(ctx, id)
	if err != nil {
		return nil, remoteError(err, id)
	}
	return res.Rows, nil
}

func (r *Remote) Find(ctx context.Context, id, text string, _ trace.Fields, fields string, ignoreCase bool) ([]api.Hit, error) {
	p := url.Values{"q": {text}, "fields": {fields}, "limit": {"1000000"}}
	if ignoreCase {
		p.Set("ignoreCase", "true")
	}
	res, err := r.Client.Find(ctx, id, p)
	if err != nil {
		return nil, remoteError(err, id)
	}
	return res.Hits, nil
}
