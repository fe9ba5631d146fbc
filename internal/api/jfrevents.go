package api

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/tracebridge/tracebridge/internal/jfrevents"
)

// The event browser's answers are internal/jfrevents'.
type (
	// JFRTypes lists the hosts with JFR events and the event types of one.
	JFRTypes struct {
		Hosts []string              `json:"hosts"`
		Host  string                `json:"host,omitempty"`
		Types []jfrevents.TypeCount `json:"types"`
	}
	JFREvents = jfrevents.Page
)

// eventKeeper is what the profile stage offers the event browser.
type eventKeeper interface {
	Events() *jfrevents.Keeper
}

var jfrEventParams = []param{
	q("host", "string", "the host").req(),
	q("type", "string", "the event type (jdk.ExecutionSample, shop.Order)").req(),
	q("since", "string", "events at or after: RFC 3339 or a duration before now").fmt("time"),
	q("until", "string", "events at or before").fmt("time"),
	q("thread", "string", "events whose thread's name contains this (case-insensitive)"),
	q("filter", "string", "FIELD OP VALUE with OP one of = != ~ (contains) < <= > >= (numbers compare as numbers); repeatable, each must hold").many(),
	q("sort", "string", "a field to sort by (default startTime)"),
	q("order", "string", "desc (default: newest or largest first) or asc").oneOf("desc", "asc"),
	q("limit", "integer", "at most this many events (1 to 1000)").dflt("100"),
	q("cursor", "string", "continue after the page that returned this cursor"),
}

// keeper returns the event browser's window, or a 404.
func (c *call) keeper() (*jfrevents.Keeper, error) {
	if k, ok := c.a.opt.Shared.Profiles().(eventKeeper); ok {
		return k.Events(), nil
	}
	return nil, errorf(http.StatusNotFound, "no JFR events: this bridge keeps none (it needs a JFR receiver and the profile stage)%s", c.jfrWhere())
}

// jfrWhere completes a 404 of the JFR routes on a cluster node: a node
// keeps the JFR data it received, not the cluster's.
func (c *call) jfrWhere() string {
	if c.a.cluster() == nil {
		return ""
	}
	return "; a cluster node shows the JFR data of the hosts whose recordings it received (JFR connections and uploads it took): ask the node that host's JFR reaches (docs/CLUSTER.md, \"JFR on a cluster node\")"
}

func jfrTypes(c *call) error {
	host := c.str("host")
	if err := c.check(); err != nil {
		return err
	}
	k, err := c.keeper()
	if err != nil {
		return err
	}
	out := JFRTypes{Hosts: k.Hosts(), Host: host, Types: []jfrevents.TypeCount{}}
	if host != "" {
		if out.Types = k.Types(c.ctx, host); out.Types == nil {
			return errorf(http.StatusNotFound, "no JFR events of host %s%s", host, c.jfrWhere())
		}
	}
	return c.json(out)
}

func jfrEvents(c *call) error {
	now := c.a.opt.Now()
	q := jfrevents.Query{Host: c.str("host"), Type: c.str("type"), Since: c.when("since", now), Until: c.when("until", now),
		Thread: c.str("thread"), Sort: c.str("sort"), Asc: c.oneOf("order", "desc", "desc", "asc") == "asc",
		Limit: c.int("limit", 100, 1, jfrevents.MaxLimit), Cursor: c.str("cursor")}
	for _, s := range c.strs("filter") {
		f, err := jfrevents.ParseFilter(s)
		if err != nil {
			c.bad("filter", "%v", err)
			continue
		}
		q.Filters = append(q.Filters, f)
	}
	if err := c.check(); err != nil {
		return err
	}
	k, err := c.keeper()
	if err != nil {
		return err
	}
	p, err := k.Events(c.ctx, q)
	if err != nil {
		return eventsError(err)
	}
	return c.json(p)
}

func jfrEvent(c *call) error {
	host := c.str("host")
	id, perr := strconv.ParseInt(c.str("id"), 10, 64)
	if perr != nil || id <= 0 {
		c.bad("id", "want an event id (a positive integer)")
	}
	if err := c.check(); err != nil {
		return err
	}
	k, err := c.keeper()
	if err != nil {
		return err
	}
	p, err := k.Event(c.ctx, host, id)
	if err != nil {
		return eventsError(err)
	}
	return c.json(p)
}

func eventsError(err error) error {
	if errors.Is(err, jfrevents.ErrQuery) {
		return errorf(http.StatusBadRequest, "%v", err)
	}
	return errorf(http.StatusNotFound, "%v", err)
}
