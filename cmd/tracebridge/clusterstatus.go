package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tracebridge/tracebridge/internal/apiclient"
	"github.com/tracebridge/tracebridge/internal/clusterstatus"
)

const clusterSynopsis = `cluster status [--url URL] [--json]

Shows a cluster as one of its nodes sees it (GET /api/v1/cluster of the
node at --url, default http://127.0.0.1:16686; a token, where one is
needed, from the environment variable TRACEBRIDGE_TOKEN): the nodes and
whether they are alive, the stream's and the store's health, who owns
which partition and how many of its messages are not yet in blocks, and
what is degraded. Exits 0 when nothing is degraded, 1 when something is,
2 when the node runs alone (no cluster: section), 3 when it does not
answer. docs/CLUSTER.md explains the figures.`

func cmdCluster(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := newFlags("cluster", clusterSynopsis, stderr)
	url := fs.String("url", "http://127.0.0.1:16686", "the HTTP API of any node of the cluster")
	asJSON := fs.Bool("json", false, "print the status as the API answers it (JSON)")
	timeout := fs.Duration("timeout", 10*time.Second, "give up when the node has not answered after this long")
	pos, err := parseArgs(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] != "status" {
		return usagef("cluster: want status")
	}
	c, err := apiclient.New(*url, os.Getenv("TRACEBRIDGE_TOKEN"))
	if err != nil {
		return usagef("cluster: --url: %v", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	st, err := c.ClusterStatus(ctx)
	var ae *apiclient.Error
	switch {
	case errors.As(err, &ae) && ae.Status == http.StatusNotFound:
		return withCode(exitConfig, fmt.Errorf("cluster status: %s: %s", *url, ae.Msg))
	case errors.As(err, &ae) && ae.Status == http.StatusUnauthorized:
		return withCode(exitConfig, fmt.Errorf("cluster status: %s: %s (set TRACEBRIDGE_TOKEN)", *url, ae.Msg))
	case err != nil:
		return withCode(exitComm, fmt.Errorf("cluster status: %s: %w", *url, err))
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(st); err != nil {
			return err
		}
	} else if err := printCluster(stdout, st, time.Now()); err != nil {
		return err
	}
	if len(st.Degraded) > 0 {
		return withCode(exitData, fmt.Errorf("cluster status: degraded: %s", strings.Join(st.Degraded, "; ")))
	}
	return nil
}

// printCluster writes the status as tables for people.
func printCluster(w io.Writer, st clusterstatus.Status, now time.Time) error {
	alive, owned := 0, 0
	var lag uint64
	for _, n := range st.Nodes {
		if n.Alive {
			alive++
		}
	}
	for _, p := range st.Partitions {
		if p.Owner != "" {
			owned++
		}
		lag += p.Lag
	}
	fmt.Fprintf(w, "cluster as %s sees it: %d node%s (%d alive), %d partition%s (%d owned), lag %d message%s\n\n",
		st.Node, len(st.Nodes), plural(len(st.Nodes)), alive, len(st.Partitions), plural(len(st.Partitions)), owned, lag, plural(int(lag)))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tALIVE\tLAST SEEN\tURL")
	for _, n := range st.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n.Name, yesNo(n.Alive), ago(n.LastSeen, now), n.URL)
	}
	fmt.Fprintln(tw)
	s := st.Stream
	size := sizeText(s.Bytes)
	if s.MaxBytes > 0 {
		size += " of " + sizeText(s.MaxBytes)
	}
	if s.Full {
		size += " FULL"
	}
	fmt.Fprintf(tw, "STREAM\t%s\treplicas %d\tleader %s\t%d messages\t%s\t%s\n", s.Name, s.Replicas, orNone(s.Leader), s.Messages, size, health(s.Healthy, s.Error))
	fmt.Fprintf(tw, "STORE\t%s\t%s\n", st.Store.Backend, health(st.Store.Healthy, st.Store.Error))
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "PARTITION\tOWNER\tLAG\tCHECKPOINT")
	for _, p := range st.Partitions {
		fmt.Fprintf(tw, "%d\t%s\t%d\t%d\n", p.ID, orNone(p.Owner), p.Lag, p.Checkpoint)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Degraded) == 0 {
		_, err := fmt.Fprintln(w, "\nnothing degraded")
		return err
	}
	fmt.Fprintln(w, "\nDEGRADED")
	for _, d := range st.Degraded {
		fmt.Fprintf(w, "  %s\n", d)
	}
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "NO"
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}

func health(ok bool, msg string) string {
	switch {
	case ok:
		return "healthy"
	case msg != "":
		return "UNHEALTHY: " + msg
	}
	return "UNHEALTHY"
}

// ago says how long before now t was, to the second ("never" for the
// zero time).
func ago(t, now time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String() + " ago"
}

// sizeText writes bytes in binary units.
func sizeText(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
