#!/bin/sh
# demo-handler.sh SOURCE EVENT_TYPE: the exec target of Caddyfile.example.
#
# Caddy runs this program directly, without a shell in between: the event's
# payload arrives on standard input and its metadata in environment
# variables (WEBHOOK_DELIVERY_ID, WEBHOOK_SOURCE, WEBHOOK_EVENT_TYPE,
# WEBHOOK_ATTEMPT, WEBHOOK_JOB_ID, WEBHOOK_TARGET, WEBHOOK_CONTENT_TYPE).
# Exit status 0 marks the job done; any other status is retried.
#
# It appends one line and the payload per event to
# /tmp/caddywebhook-demo-events.log (in $TMPDIR if Caddy has one), and prints
# the line. Watch it with
#
#	tail -f /tmp/caddywebhook-demo-events.log
#
# A real handler must be idempotent: a delivery can run more than once (a
# retry after a timeout, a crash between its work and its answer).
set -eu

out=${TMPDIR:-/tmp}/caddywebhook-demo-events.log
payload=$(cat)
line="$(date -u +%Y-%m-%dT%H:%M:%SZ) source=$1 event=$2 delivery=$WEBHOOK_DELIVERY_ID attempt=$WEBHOOK_ATTEMPT job=$WEBHOOK_JOB_ID"
printf '%s\n%s\n\n' "$line" "$payload" >>"$out"
echo "demo-handler: $line"
