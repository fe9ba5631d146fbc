package main

import (
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tracebridge/tracebridge/internal/objstore"
	"github.com/tracebridge/tracebridge/internal/objstore/objstoretest"
)

// TestClusterJFR: a cluster node keeps the JFR data of the recordings it
// receives. A recording of a real JVM uploaded to node 1's jfr-http
// receiver (which implies the profile stage, without samples on spans)
// gives node 1's flame graph every execution sample of the recording,
// its event browser every event and its views JMC's; node 2 (a profile
// stage configured, no JFR of that host) and node 3 (no profile stage)
// answer 404 saying that a node shows the JFR it received.
func TestClusterJFR(t *testing.T) {
	tools, rec := jfrRec.Get(t)
	want, _ := summaryEvents(t, tools, rec)
	if want["jdk.ExecutionSample"] == 0 {
		t.Fatalf("the recording holds no execution samples: %v", want)
	}
	srv := objstoretest.Start(t)
	c := srv.Bucket(t, "traces", "jfr/")
	const partitions = 4
	nodes := embeddedClusterWith(t, c, 3, partitions, func(host string, c objstore.S3Config, cluster string) string {
		y := clusterYAML(host, c, cluster)
		switch host {
		case "127.0.0.1":
			y = strings.Replace(y, "receivers:\n", "receivers:\n  - {name: push, type: jfr-http, listen: \""+host+":0\"}\n", 1)
		case "127.0.0.2":
			y += "stages: [{name: samples, type: profile}]\n"
		}
		return y
	})
	for _, nd := range nodes {
		nd.start(t)
	}
	waitOwned(t, nodes, partitions, 120*time.Second)

	const host = "jvm-upload"
	f, err := os.Open(rec)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post("http://"+nodes[0].p.Addr("push")+"/ingest?format=jfr&name="+host, "application/octet-stream", f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("upload to node 1: %s", resp.Status)
	}

	flame := "/api/v1/profiles/flame?host=" + host + "&since=3h&format=folded&kind=cpu"
	var cpu int64
	waitUntil(t, 60*time.Second, "node 1's cpu flame graph with every sample of the recording", func() bool {
		cpu = 0
		if code, b := apiGet(t, "GET", nodes[0].base+flame, "", ""); code == 200 {
			for _, n := range foldedTops(t, string(b)) {
				cpu += n
			}
		}
		return cpu >= want["jdk.ExecutionSample"]
	})
	if cpu != want["jdk.ExecutionSample"] {
		t.Fatalf("node 1: cpu flame graph of %d samples, jfr summary %d", cpu, want["jdk.ExecutionSample"])
	}
	waitTypeCounts(t, nodes[0].base, host, want)
	t.Run("views", func(t *testing.T) { checkViews(t, tools, rec, nodes[0].base, host, want) })

	for _, nd := range nodes[1:] {
		for _, route := range []string{flame, "/api/v1/profiles/views?host=" + host + "&since=3h", "/api/v1/jfr/types?host=" + host} {
			code, b := apiGet(t, "GET", nd.base+route, "", "")
			if code != http.StatusNotFound || !strings.Contains(string(b), "a cluster node shows the JFR data of the hosts whose recordings it received") {
				t.Errorf("node %s %s: %d %.300s", nd.name, route, code, b)
			}
		}
	}
	// Node 2's configured stage keeps its own: none of the host's.
	if code, b := apiGet(t, "GET", nodes[1].base+flame, "", ""); !strings.Contains(string(b), "no samples of host "+host) {
		t.Errorf("node 2: %d %.300s, want no samples of the host", code, b)
	}
	t.Logf("%d execution samples on node 1", cpu)
	for _, nd := range nodes {
		nd.p.Stop()
	}
}
