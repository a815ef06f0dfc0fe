#!/bin/sh
# Test program for the exec target: starts a background sleep (a grandchild
# of the test), writes its pid to the file $1 (atomically), then either
# waits for a long time or, with $2 = "exit", exits 0 at once leaving the
# sleep behind. With $2 = "setsid" the sleep escapes as a daemon does: a
# session and process group of its own, no inherited descriptors, and its
# parent (this program) gone at once, so it no longer descends from it;
# the program waits for the pid file first, so the sleep has left the
# group by the time the program exits.
if [ "$2" = setsid ]; then
	setsid sh -c 'echo $$ > "$1.tmp" && mv "$1.tmp" "$1" && exec sleep 300' sh "$1" </dev/null >/dev/null 2>&1 &
	while [ ! -f "$1" ]; do
		sleep 0.01
	done
	exit 0
fi
sleep 300 &
echo $! > "$1.tmp"
mv "$1.tmp" "$1"
if [ "$2" = exit ]; then
	exit 0
fi
sleep 300
