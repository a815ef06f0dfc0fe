#!/bin/sh
# Test program for the exec target: starts a background sleep (a grandchild
# of the test), writes its pid to the file $1 (atomically), then either
# waits for a long time or, with $2 = "exit", exits 0 at once leaving the
# sleep behind.
sleep 300 &
echo $! > "$1.tmp"
mv "$1.tmp" "$1"
if [ "$2" = exit ]; then
	exit 0
fi
sleep 300
