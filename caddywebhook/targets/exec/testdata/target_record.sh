#!/bin/sh
# Test program for the exec target: records its standard input, its
# arguments (NUL-terminated) and its environment (NUL-terminated) in
# $RECORD_DIR, then exits with $RECORD_EXIT (default 0).
cat > "$RECORD_DIR/stdin"
printf '%s\0' "$@" > "$RECORD_DIR/args"
env -0 > "$RECORD_DIR/env"
exit "${RECORD_EXIT:-0}"
