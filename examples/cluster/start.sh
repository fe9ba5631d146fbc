#!/bin/sh
# Starts a local three-node tracebridge cluster (examples/cluster/node*.yaml)
# with an S3 server for its blocks: the Versity S3 gateway, installed with
#   go install github.com/versity/versitygw/cmd/versitygw@v1.8.0
# Run it from examples/cluster; stop everything with Ctrl-C.
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
for i in 1 2 3; do
  "$TB" serve -c node$i.yaml > data/n$i.log 2>&1 &
  pids="$pids $!"
done
echo "cluster starting: logs in data/n1.log, data/n2.log, data/n3.log"
echo "metrics: curl -s http://127.0.0.1:16686/metrics | grep tracebridge_cluster_"
wait
