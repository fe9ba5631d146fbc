#!/bin/sh
# Starts a local three-node tracebridge cluster (examples/cluster/node*.yaml)
# with an S3 server for its blocks: the Versity S3 gateway, installed with
#   go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
# It writes its data (data/, s3-access, s3-secret) beside itself: copy
# the directory somewhere else first to keep the checkout clean. Stop
# everything with Ctrl-C, and wait for the nodes' last checkpoint before
# starting it again (a node still stopping holds data/nN: "host table in
# use by another process").
#
# Ports: 127.0.0.1-3 with 16686 (HTTP), 4317/4318 (OTLP), 8640 (zorka),
# 10133 (Kieker TCP), 9000 (S3), 4223 (NATS clients: not 4222, where a
# nats-server of the machine may listen) and 6221-6223 (routes). Where
# one is taken, the node says which key moves it in data/nN.log: edit
# the node files.
#
#   TRACEBRIDGE=path/to/tracebridge ./start.sh
#
# Then send OTLP to 127.0.0.1:4318, 127.0.0.2:4318 or 127.0.0.3:4318 and
# open http://127.0.0.1:16686/ (or .2, .3): every node sees every trace.
set -eu
cd "$(dirname "$0")"
TB=${TRACEBRIDGE:-tracebridge}
GW=${VERSITYGW:-versitygw}
mkdir -p data/s3/traces
printf 'tracebridge-example' > s3-access
printf 'tracebridge-example-secret' > s3-secret
chmod 600 s3-access s3-secret
pids=""
trap 'kill $pids 2>/dev/null; wait' INT TERM EXIT
"$GW" --access "$(cat s3-access)" --secret "$(cat s3-secret)" --port 127.0.0.1:9000 --quiet posix data/s3 &
pids="$pids $!"
sleep 1
nodes=""
for i in 1 2 3; do
  "$TB" serve -c node$i.yaml > data/n$i.log 2>&1 &
  pids="$pids $!"
  nodes="$nodes $i:$!"
done
sleep 3
# A node that could not start (a port in use, say) has exited by now.
for n in $nodes; do
  if ! kill -0 "${n#*:}" 2>/dev/null; then
    echo "node n${n%%:*} did not start (data/n${n%%:*}.log):" >&2
    tail -n 3 "data/n${n%%:*}.log" >&2
  fi
done
echo "cluster starting: logs in data/n1.log, data/n2.log, data/n3.log"
echo "status:  $TB cluster status --url http://127.0.0.2:16686"
echo "metrics: curl -s http://127.0.0.1:16686/metrics | grep tracebridge_cluster_"
wait
