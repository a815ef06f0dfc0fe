#!/bin/sh
# Test program for the exec target: ignores its standard input, writes a
# line to stdout and one to stderr, and exits with the status in $1.
echo "to stdout"
echo "to stderr" >&2
exit "$1"
