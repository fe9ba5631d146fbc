#!/bin/sh
# Pushes the flight recording a JVM keeps anyway (started with
# -XX:StartFlightRecording, or jcmd PID JFR.start) to tracebridge's
# jfr-http receiver, for JVMs that share no disk with the bridge
# (docs/jfr.md, "Recordings pushed over HTTP"). Every INTERVAL seconds it
# dumps the recording with jcmd JFR.dump and posts the dump, gzip-
# compressed, as the jfr part of a multipart form with curl (the form
# Pyroscope's agent posts).
#
# Each dump after the first asks only for the chunks since the previous
# dump (JFR.dump begin=); JFR hands out whole chunks, so a dump repeats
# the chunk the previous dump ended with. The receiver remembers the
# chunks each host sent (duplicates: skip, its default) and hands their
# events on once, so every event arrives once. A refused upload is sent
# again with the next dump (begin= stays where it was).
#
#   receivers:
#     - {name: push, type: jfr-http, listen: "0.0.0.0:4040", tls: {cert: c.pem, key: k.pem}, security: true}
#
# Usage: PID=12345 NAME=shop-1 TRACEBRIDGE=https://bridge:4040 examples/jfr-dump.sh
#
#   PID          the JVM's process id (jcmd -l lists them)            required
#   NAME         the host the events belong to (name=)                 default: this machine's name
#   TRACEBRIDGE  the receiver's base URL                              default: http://127.0.0.1:4040
#   TOKEN_FILE   a file holding the host's secret (security: true),
#                sent as Authorization: Bearer                         default: none
#   RECORDING    the recording's name or id (jcmd PID JFR.check)      default: all recordings
#   INTERVAL     seconds between uploads                               default: 10
#   COUNT        uploads before the script ends (0: until the JVM ends) default: 0
#
# The one-line version, when a whole dump each time is fine (the receiver
# skips the chunks it has, but each upload carries the whole recording):
#
#   while jcmd $PID JFR.dump filename=/tmp/app.jfr >/dev/null; do
#     curl -sS -F jfr=@/tmp/app.jfr "$TRACEBRIDGE/ingest?format=jfr&name=$NAME"; sleep 10; done
set -eu
: "${PID:?PID= the JVM process id}"
NAME=${NAME:-$(hostname)}
TRACEBRIDGE=${TRACEBRIDGE:-http://127.0.0.1:4040}
INTERVAL=${INTERVAL:-10}
COUNT=${COUNT:-0}
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

auth=""
if [ -n "${TOKEN_FILE:-}" ]; then
	auth="Authorization: Bearer $(cat "$TOKEN_FILE")"
fi

post() { # post FILE
	curl -sS -o "$DIR/answer" -w '%{http_code}' -X POST ${auth:+-H "$auth"} \
		-F "jfr=@$1;type=application/octet-stream" \
		"$TRACEBRIDGE/ingest?format=jfr&name=$NAME"
}

since=""
n=0
while :; do
	now=$(date -u +%Y-%m-%dT%H:%M:%SZ) # before the dump: its chunk comes again next time
	file="$DIR/dump.jfr"
	rm -f "$file" "$file.gz"
	if ! jcmd "$PID" JFR.dump ${RECORDING:+name=$RECORDING} ${since:+begin=$since} filename="$file" >"$DIR/jcmd" 2>&1 || [ ! -s "$file" ]; then
		kill -0 "$PID" 2>/dev/null || exit 0 # the JVM is gone
		echo "jfr-dump: no dump: $(tr '\n' ' ' <"$DIR/jcmd")" >&2
	else
		gzip -f "$file"
		code=$(post "$file.gz") || code=000
		if [ "$code" = 429 ]; then
			sleep 1
			code=$(post "$file.gz") || code=000
		fi
		if [ "$code" = 200 ]; then
			echo "jfr-dump: $(cat "$DIR/answer")"
			since=$now
		else
			echo "jfr-dump: upload refused ($code): $(cat "$DIR/answer" 2>/dev/null)" >&2
		fi
	fi
	n=$((n + 1))
	if [ "$COUNT" -gt 0 ] && [ "$n" -ge "$COUNT" ]; then
		exit 0
	fi
	sleep "$INTERVAL"
done
