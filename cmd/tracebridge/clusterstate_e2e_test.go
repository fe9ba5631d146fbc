package main

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/clusterstatus"
	"github.com/tracebridge/tracebridge/internal/codec/zico/zicotest"
	"github.com/tracebridge/tracebridge/internal/objstore/objstoretest"
)

func TestClusterStateEndToEnd(t *testing.T) {
	srv := objstoretest.Start(t)
	c := srv.Bucket(t, "traces", "cs/")
	const partitions = 8
	nodes := embeddedCluster(t, c, 3, partitions)
	for _, nd := range nodes {
		nd.start(t)
	}
	waitOwned(t, nodes, partitions, 120*time.Second)
	r := runEnv(t, nil, "cluster", "status", "--url", nodes[1].base, "--json")
	var st clusterstatus.Status
	if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
		t.Fatalf("exit %d: %v\n%s\n%s", r.code, err, r.stdout, r.stderr)
	}
	t.Logf("exit %d, status %+v", r.code, st)
	t.Logf("table:\n%s", runEnv(t, nil, "cluster", "status", "--url", nodes[2].base).stdout)
	if len(st.Nodes) != 3 || len(st.Partitions) != partitions {
		t.Errorf("status: %+v", st)
	}
	// A HELLO on node 1 makes a host known on node 3.
	a := zicotest.NewAgent(nodes[0].p.Addr("zico"), "replicated-host", "")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	a.Close()
	t0 := time.Now()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var hl struct {
			Hosts []struct{ Name string } `json:"hosts"`
		}
		resp, err := http.Get(nodes[2].base + "/api/v1/hosts")
		if err == nil {
			json.NewDecoder(resp.Body).Decode(&hl)
			resp.Body.Close()
		}
		if slices.ContainsFunc(hl.Hosts, func(h struct{ Name string }) bool { return h.Name == "replicated-host" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host not on node 3: %+v", hl)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("host on node 3 %v after the HELLO", time.Since(t0))
	for _, nd := range nodes {
		for _, l := range strings.Split(nd.p.Stderr(), "\n") {
			if strings.Contains(l, "shared state") {
				t.Logf("%s: %s", nd.name, l)
			}
		}
	}
}
