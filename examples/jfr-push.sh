#!/bin/sh
# Pushes a running JVM's flight recordings to tracebridge's jfr-http
# receiver, for JVMs that share no disk with the bridge (docs/jfr.md,
# "Recordings pushed over HTTP"). Every INTERVAL seconds it stops its own
# recording with jcmd JFR.stop (which writes it to a file), starts the
# next at once, and posts the file gzip-compressed with curl, so every
# event is sent once (the few milliseconds between stop and start are not
# recorded). The bridge needs a receiver such as
#
#   receivers:
#     - {name: push, type: jfr-http, listen: "0.0.0.0:4040", tls: {cert: c.pem, key: k.pem}, security: true}
#
# Usage: PID=12345 NAME=shop-1 TRACEBRIDGE=https://bridge:4040 examples/jfr-push.sh
#
#   PID          the JVM's process id (jcmd -l lists them)            required
#   NAME         the host the events belong to (name=)                 default: this machine's name
#   TRACEBRIDGE  the receiver's base URL                              default: http://127.0.0.1:4040
#   TOKEN_FILE   a file holding the host's secret (security: true),
#                sent as Authorization: Bearer                         default: none
#   INTERVAL     seconds between uploads                               default: 10
#   SETTINGS     the JFR settings (default, profile or a .jfc file)    default: profile
#   COUNT        uploads before the script ends (0: until the JVM ends) default: 0
#
# A refused upload (4xx: the answer names the reason) is reported and the
# loop goes on; 429 (the bridge is busy) is retried once after a second.
set -eu
: "${PID:?PID= the JVM process id}"
NAME=${NAME:-$(hostname)}
TRACEBRIDGE=${TRACEBRIDGE:-http://127.0.0.1:4040}
INTERVAL=${INTERVAL:-10}
SETTINGS=${SETTINGS:-profile}
COUNT=${COUNT:-0}
REC=tracebridge-push
DIR=$(mktemp -d)
trap 'jcmd "$PID" JFR.stop name=$REC >/dev/null 2>&1 || true; rm -rf "$DIR"' EXIT

auth=""
if [ -n "${TOKEN_FILE:-}" ]; then
	auth="Authorization: Bearer $(cat "$TOKEN_FILE")"
fi

post() { # post FILE FROM UNTIL
	curl -sS -o "$DIR/answer" -w '%{http_code}' -X POST \
		-H 'Content-Type: application/octet-stream' -H 'Content-Encoding: gzip' \
		${auth:+-H "$auth"} --data-binary "@$1" \
		"$TRACEBRIDGE/ingest?format=jfr&name=$NAME&from=$2&until=$3"
}

jcmd "$PID" JFR.start name=$REC settings="$SETTINGS" >/dev/null
n=0
while :; do
	from=$(date +%s)
	sleep "$INTERVAL"
	until=$(date +%s)
	file="$DIR/$until.jfr"
	# Stop writes the recording to the file; the next starts at once.
	jcmd "$PID" JFR.stop name=$REC filename="$file" >/dev/null || exit 0 # the JVM is gone
	jcmd "$PID" JFR.start name=$REC settings="$SETTINGS" >/dev/null || true
	gzip -f "$file"
	code=$(post "$file.gz" "$from" "$until") || code=000
	if [ "$code" = 429 ]; then
		sleep 1
		code=$(post "$file.gz" "$from" "$until") || code=000
	fi
	if [ "$code" = 200 ]; then
		echo "jfr-push: $(cat "$DIR/answer")"
	else
		echo "jfr-push: upload refused ($code): $(cat "$DIR/answer" 2>/dev/null)" >&2
	fi
	rm -f "$file.gz"
	n=$((n + 1))
	if [ "$COUNT" -gt 0 ] && [ "$n" -ge "$COUNT" ]; then
		exit 0
	fi
done
