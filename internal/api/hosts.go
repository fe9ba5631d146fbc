package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/netip"
	"strings"
	"time"
	"unicode"

	"github.com/tracebridge/tracebridge/internal/hostauth"
	"github.com/tracebridge/tracebridge/internal/hostdb"
	"github.com/tracebridge/tracebridge/internal/pipeline"
	"github.com/tracebridge/tracebridge/internal/store"
)

// HostInfo is a monitored host as the UI shows it (the secret only as
// whether one is set): its record in the host table (internal/hostdb) and
// what the trace store keeps of it (0 without a store, or before its first
// trace).
type HostInfo struct {
	Name        string     `json:"name"`
	Group       string     `json:"group"`
	Addr        string     `json:"addr"`
	Comment     string     `json:"comment"`
	Secret      bool       `json:"secret"`
	Enabled     bool       `json:"enabled"`
	MaxSize     int64      `json:"maxSize"`  // bytes, 0: unbounded
	MaxAgeNs    int64      `json:"maxAgeNs"` // 0: unbounded
	Created     time.Time  `json:"created"`
	LastContact *time.Time `json:"lastContact"`
	// Size is the bytes of the host's segments and its share of traces
	// rooted on other hosts (store.Partition.Shared); TracesPerSecond the
	// traces rooted on the host that started in the last minute, per
	// second (estimated from the newest 1000 when there are more).
	Size            int64   `json:"size"`
	TracesPerSecond float64 `json:"tracesPerSecond"`
}

// HostList is every host, by name, with the groups they use.
type HostList struct {
	Hosts  []HostInfo `json:"hosts"`
	Groups []string   `json:"groups"`
}

// hostView is what the hosts pages read: the host table and the trace
// store (nil without one).
type hostView struct {
	db *hostdb.DB
	st *store.Store
}

// withHosts makes a route's handler of a handler of the host table:
// without one the route answers 503; the trace store is optional.
func withHosts(h func(c *call, v *hostView) error) func(*call) error {
	return func(c *call) error {
		db := c.a.opt.Shared.HostDB()
		if db == nil {
			return errNoHosts
		}
		return h(c, &hostView{db: db, st: c.a.opt.Store()})
	}
}

var errNoHosts = errorf(http.StatusServiceUnavailable, "no host table: this bridge keeps none")

func (v *hostView) info(h hostdb.Host, rate float64) HostInfo {
	hi := HostInfo{Name: h.Name, Group: h.Group, Addr: h.Addr, Comment: h.Comment, Secret: h.Secret != "",
		Enabled: !h.Disabled, MaxSize: h.MaxSize, MaxAgeNs: int64(h.MaxAge), Created: h.Created, TracesPerSecond: rate}
	if v.st != nil {
		hi.Size = v.st.HostSize(h.Name)
	}
	if !h.LastContact.IsZero() {
		lc := h.LastContact
		hi.LastContact = &lc
	}
	return hi
}

// rates are the hosts' traces per second (none without a store).
func (v *hostView) rates(now time.Time) map[string]float64 {
	if v.st == nil {
		return nil
	}
	return hostRates(v.st, now)
}

// hostRates counts the traces that started in the last minute per host
// (the host whose partition holds them: the root span's).
func hostRates(st *store.Store, now time.Time) map[string]float64 {
	const window, sample = time.Minute, 1000
	page, err := st.Search(store.Query{Since: now.Add(-window).UnixNano(), Limit: 100_000, TotalBudget: 500 * time.Millisecond})
	if err != nil {
		return nil
	}
	per := map[string][]int64{}
	for _, t := range page.Traces {
		per[t.Host] = append(per[t.Host], t.Start)
	}
	out := map[string]float64{}
	for h, starts := range per {
		if len(starts) > sample {
			// Newest first: the rate of the newest sample traces.
			span := now.UnixNano() - starts[sample-1]
			if span > 0 {
				out[h] = float64(sample) / (float64(span) / 1e9)
				continue
			}
		}
		out[h] = float64(len(starts)) / window.Seconds()
	}
	return out
}

func listHosts(c *call, v *hostView) error {
	hosts := v.db.Hosts()
	rates := v.rates(c.a.opt.Now())
	res := HostList{Hosts: []HostInfo{}, Groups: []string{}}
	groups := map[string]bool{}
	for _, h := range hosts {
		res.Hosts = append(res.Hosts, v.info(h, rates[h.Name]))
		if h.Group != "" && !groups[h.Group] {
			groups[h.Group] = true
			res.Groups = append(res.Groups, h.Group)
		}
	}
	return c.json(res)
}

func getHost(c *call, v *hostView) error {
	h, err := v.db.Host(c.str("name"))
	if err != nil {
		return hostError(err)
	}
	return c.json(v.info(h, v.rates(c.a.opt.Now())[h.Name]))
}

func hostError(err error) error {
	switch {
	case errors.Is(err, hostdb.ErrNoHost):
		return errorf(http.StatusNotFound, "%v", err)
	case errors.Is(err, hostdb.ErrHostExists):
		return errorf(http.StatusConflict, "%v (change it with PATCH)", err)
	case errors.Is(err, hostdb.ErrClosed), errors.Is(err, store.ErrClosed):
		return errClosed
	}
	return err
}

// HostInput is the body of POST and PATCH /api/v1/hosts: absent (or
// null) fields are left as they are. secret "" removes the secret;
// maxSize takes bytes or a size such as "2GiB", maxAge ns or a duration
// such as "7d".
type HostInput struct {
	Name    *string `json:"name"`
	Addr    *string `json:"addr"`
	Secret  *string `json:"secret"`
	Group   *string `json:"group"`
	Comment *string `json:"comment"`
	MaxSize *flex   `json:"maxSize"`
	MaxAge  *flex   `json:"maxAge"`
	Enabled *bool   `json:"enabled"`
}

// flex is a number or a string.
type flex struct{ raw json.RawMessage }

func (f *flex) UnmarshalJSON(b []byte) error { f.raw = append(json.RawMessage(nil), b...); return nil }

func (f *flex) size() (int64, error) {
	var n float64
	if json.Unmarshal(f.raw, &n) == nil {
		if n < 0 || n > math.MaxInt64 || n != math.Trunc(n) {
			return 0, fmt.Errorf("%v: want bytes (a whole number ≥ 0) or a size such as 2GiB", n)
		}
		return int64(n), nil
	}
	var s string
	if err := json.Unmarshal(f.raw, &s); err != nil {
		return 0, fmt.Errorf("want a number or a string such as 2GiB")
	}
	return pipeline.ParseByteSize(s)
}

func (f *flex) duration() (time.Duration, error) {
	var n float64
	if json.Unmarshal(f.raw, &n) == nil {
		if n < 0 || n > math.MaxInt64 || n != math.Trunc(n) {
			return 0, fmt.Errorf("%v: want nanoseconds (a whole number ≥ 0) or a duration such as 7d", n)
		}
		return time.Duration(n), nil
	}
	var s string
	if err := json.Unmarshal(f.raw, &s); err != nil {
		return 0, fmt.Errorf("want a number or a string such as 7d or 12h")
	}
	d, err := pipeline.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q: want a duration such as 7d or 12h", s)
	}
	return d, nil
}

// maxBody bounds request bodies.
const maxBody = 1 << 20

// decodeBody decodes a JSON request body strictly: unknown fields are
// errors.
func (c *call) decodeBody(v any) error {
	if ct := c.r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return errorf(http.StatusUnsupportedMediaType, "Content-Type %q: want application/json", ct)
	}
	b, err := io.ReadAll(io.LimitReader(c.r.Body, maxBody+1))
	if err != nil {
		return errorf(http.StatusBadRequest, "reading the body: %v", err)
	}
	if len(b) > maxBody {
		return errorf(http.StatusRequestEntityTooLarge, "the body is over %d bytes", maxBody)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errorf(http.StatusBadRequest, "body: %v", err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "body: more than one JSON value")
	}
	return nil
}

// validText checks a name, group or comment.
func validText(what, s string, max int) error {
	if len(s) > max {
		return fmt.Errorf("%s: longer than %d bytes", what, max)
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return fmt.Errorf("%s: control characters are not allowed", what)
		}
	}
	return nil
}

// apply changes h as in says; it validates every field.
func (in *HostInput) apply(h *hostdb.Host) error {
	var errs []string
	bad := func(err error) { errs = append(errs, err.Error()) }
	if in.Addr != nil {
		h.Addr = ""
		if *in.Addr != "" {
			ip, err := netip.ParseAddr(*in.Addr)
			if err != nil {
				bad(fmt.Errorf("addr %q: want an IP address (the only one the host may connect from)", *in.Addr))
			} else {
				h.Addr = ip.Unmap().String()
			}
		}
	}
	for _, f := range []struct {
		name string
		in   *string
		out  *string
		max  int
	}{{"group", in.Group, &h.Group, 255}, {"comment", in.Comment, &h.Comment, 4096}} {
		if f.in == nil {
			continue
		}
		if err := validText(f.name, *f.in, f.max); err != nil {
			bad(err)
		}
		*f.out = *f.in
	}
	if in.MaxSize != nil {
		n, err := in.MaxSize.size()
		if err != nil {
			bad(fmt.Errorf("maxSize: %v", err))
		}
		h.MaxSize = n
	}
	if in.MaxAge != nil {
		d, err := in.MaxAge.duration()
		if err != nil {
			bad(fmt.Errorf("maxAge: %v", err))
		}
		h.MaxAge = d
	}
	if in.Enabled != nil {
		h.Disabled = !*in.Enabled
	}
	if in.Secret != nil {
		if len(*in.Secret) > 1024 {
			bad(errors.New("secret: longer than 1024 bytes"))
		}
		h.Secret = ""
		if *in.Secret != "" && len(errs) == 0 {
			h.Secret = hostauth.HashSecret(*in.Secret)
		}
	}
	if len(errs) > 0 {
		return errorf(http.StatusBadRequest, "%s", strings.Join(errs, "; "))
	}
	return nil
}

func addHost(c *call, v *hostView) error {
	var in HostInput
	if err := c.decodeBody(&in); err != nil {
		return err
	}
	if in.Name == nil || *in.Name == "" {
		return errorf(http.StatusBadRequest, "name: required")
	}
	if err := validText("name", *in.Name, 255); err != nil {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	h := hostdb.Host{Name: *in.Name}
	if err := in.apply(&h); err != nil {
		return err
	}
	h, err := v.db.Add(h, "")
	if err != nil {
		return hostError(err)
	}
	c.a.log.Info("http api: host added", "host", h.Name)
	writeJSON(c.w, http.StatusCreated, v.info(h, 0))
	return nil
}

func patchHost(c *call, v *hostView) error {
	name := c.str("name")
	var in HostInput
	if err := c.decodeBody(&in); err != nil {
		return err
	}
	if in.Name != nil && *in.Name != name {
		return errorf(http.StatusBadRequest, "name: a host cannot be renamed (its traces are filed under its name)")
	}
	h, err := v.db.Update(name, in.apply)
	if err != nil {
		return hostError(err)
	}
	c.a.log.Info("http api: host changed", "host", name)
	return c.json(v.info(h, v.rates(c.a.opt.Now())[name]))
}

// Deleted confirms a deletion.
type Deleted struct {
	Deleted string `json:"deleted"`
}

// deleteHost removes the host's record and, with a store, its traces.
func deleteHost(c *call, v *hostView) error {
	name := c.str("name")
	if err := v.db.Delete(name); err != nil {
		return hostError(err)
	}
	if v.st != nil {
		if err := v.st.DeletePartition(name); err != nil && !errors.Is(err, store.ErrNoHost) {
			return hostError(err)
		}
	}
	c.a.log.Info("http api: host deleted", "host", name)
	return c.json(Deleted{name})
}
