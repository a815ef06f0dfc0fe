#!/bin/sh
# Test program for the exec target: prints about 5 MB to stdout and
# stderr, then its last words, and exits 3.
head -c 4000000 /dev/zero | tr '\0' 'o'
head -c 1000000 /dev/zero | tr '\0' 'e' >&2
echo
echo "last words"
exit 3
