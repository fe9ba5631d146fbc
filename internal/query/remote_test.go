package query

import (
	"errors"
	"net/http"
	"testing"

	"github.com/tracebridge/tracebridge/internal/apiclient"
	"github.com/tracebridge/tracebridge/internal/store"
)

// TestRemoteError: the API's refusals become the store's errors, or
// Remote's own, keeping their messages.
func TestRemoteError(t *testing.T) {
	other := errors.New("connection refused")
	for _, c := range []struct {
		err  error
		id   string
		is   error
		msg  string
		want func(error) bool
	}{
		{&apiclient.Error{Status: http.StatusNotFound, Msg: "no such trace"}, "ab", store.ErrNotFound, "trace ab: " + store.ErrNotFound.Error(), nil},
		{&apiclient.Error{Status: http.StatusBadRequest, Msg: "cursor: bad"}, "", store.ErrBadCursor, "", nil},
		{&apiclient.Error{Status: http.StatusUnauthorized, Msg: "token"}, "", ErrUnauthorized, "token: Unauthorized", nil},
		{&apiclient.Error{Status: http.StatusInternalServerError, Msg: "boom"}, "", ErrUnreachable, "", nil},
		{other, "", ErrUnreachable, "connection refused", nil},
		{&apiclient.Error{Status: http.StatusBadRequest, Msg: "limit: too big"}, "", nil, "limit: too big", func(err error) bool {
			var bad *BadRequestError
			return errors.As(err, &bad) && bad.Msg == "limit: too big"
		}},
	} {
		err := remoteError(c.err, c.id)
		if c.is != nil && !errors.Is(err, c.is) || c.want != nil && !c.want(err) || c.msg != "" && err.Error() != c.msg {
			t.Errorf("%v: got %v", c.err, err)
		}
	}
	if !errors.Is(remoteError(other, ""), other) {
		t.Error("the cause is lost")
	}
}
