package api

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tracebridge/tracebridge/internal/analysis"
	"github.com/tracebridge/tracebridge/internal/flame"
)

// Flame graphs are internal/analysis's.
type (
	Flame     = analysis.Flame
	FlameNode = analysis.FlameNode
)

// writeFolded writes the tree as folded stacks weighted by self values.
func writeFolded(w *bufio.Writer, n *FlameNode, path []string) {
	if n.Self > 0 && len(path) > 0 {
		w.WriteString(strings.Join(path, ";"))
		w.WriteByte(' ')
		w.WriteString(strconv.FormatInt(n.Self, 10))
		w.WriteByte('\n')
	}
	for _, c := range n.Children {
		writeFolded(w, c, append(path, foldedFrame(c.Name)))
	}
}

// foldedFrame keeps the separators of the folded format out of a name.
func foldedFrame(s string) string {
	return strings.NewReplacer(";", ":", "\n", " ", "\r", " ").Replace(s)
}

func traceFlame(c *call) error {
	format := c.oneOf("format", "json", "json", "folded", "svg")
	t, err := c.trace()
	if err != nil {
		return err
	}
	return c.flame(analysis.NewTree(t).Flame(), format, "trace "+t.ID.String())
}

// flame answers a flame graph as JSON, folded stacks or SVG.
func (c *call) flame(f Flame, format, title string) error {
	switch format {
	case "json":
		return c.json(f)
	}
	var folded bytes.Buffer
	w := bufio.NewWriter(&folded)
	writeFolded(w, f.Root, nil)
	w.Flush()
	if format == "folded" {
		return c.raw("text/plain; charset=utf-8", folded.Bytes())
	}
	st, err := flame.ReadFolded(&folded)
	if err != nil {
		return err
	}
	var svg bytes.Buffer
	if err := st.WriteSVG(&svg, flame.SVGOptions{Title: title, Unit: f.Unit}); err != nil {
		return err
	}
	// The SVG is an image: no script runs in it (flame writes none).
	c.w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	return c.raw("image/svg+xml", svg.Bytes())
}

func profileFlame(c *call) error {
	host, since, until := profileWindow(c)
	format := c.oneOf("format", "json", "json", "folded", "svg")
	kind, _ := flame.KindOf(c.oneOf("kind", "cpu", flame.KindNames()...))
	if err := c.check(); err != nil {
		return err
	}
	p := c.a.opt.Shared.Profiles()
	if p == nil {
		return errorf(http.StatusNotFound, "no profiles: this bridge keeps no JFR samples (it needs a JFR receiver and the profile stage)%s", c.jfrWhere())
	}
	st, err := p.Stacks(c.ctx, kind.Name, host, since, until)
	if err != nil {
		return err
	}
	if st == nil || st.Total() == 0 {
		what := "samples"
		if kind.Name != "cpu" {
			what = kind.Name + " events (" + strings.Join(kind.Types(), ", ") + ")"
		}
		return errorf(http.StatusNotFound, "no %s of host %s between %s and %s%s", what, host,
			time.Unix(0, since).UTC().Format(time.RFC3339), time.Unix(0, until).UTC().Format(time.RFC3339), c.jfrWhere())
	}
	var folded strings.Builder
	if err := st.WriteFolded(&folded); err != nil {
		return err
	}
	f := analysis.FoldedFlame(folded.String())
	f.Unit = kind.Unit
	return c.flame(f, format, fmt.Sprintf("%s: %s, %s to %s", kind.Title, host,
		time.Unix(0, since).UTC().Format(time.RFC3339), time.Unix(0, until).UTC().Format(time.RFC3339)))
}

// profileWindow reads host, since and until of the profile routes.
func profileWindow(c *call) (host string, since, until int64) {
	now := c.a.opt.Now()
	host = c.str("host")
	if host == "" {
		c.bad("host", "required")
	}
	since, until = c.when("since", now), c.when("until", now)
	if since == 0 {
		since = now.Add(-15 * time.Minute).UnixNano()
	}
	if until == 0 {
		until = now.UnixNano()
	}
	if since > until {
		c.bad("since", "after until")
	}
	return host, since, until
}

func profileViews(c *call) error {
	host, since, until := profileWindow(c)
	if err := c.check(); err != nil {
		return err
	}
	p := c.a.opt.Shared.Profiles()
	if p == nil {
		return errorf(http.StatusNotFound, "no profiles: this bridge keeps no JFR events (it needs a JFR receiver and the profile stage)%s", c.jfrWhere())
	}
	v, err := p.Views(c.ctx, host, since, until)
	if err != nil {
		return err
	}
	if v == nil {
		return errorf(http.StatusNotFound, "no JFR events of host %s between %s and %s%s", host,
			time.Unix(0, since).UTC().Format(time.RFC3339), time.Unix(0, until).UTC().Format(time.RFC3339), c.jfrWhere())
	}
	return c.json(v)
}
