#!/bin/sh
# record.sh OUTDIR NAME EXIT [ARG...]: the exec target of the end-to-end tests.
#
# It writes the payload it reads on stdin to OUTDIR/NAME.body, its environment
# to OUTDIR/NAME.env and its remaining arguments, one per line, to
# OUTDIR/NAME.args, then exits with status EXIT. Each file is written under a
# temporary name and renamed, so a test that sees NAME.done sees all three
# complete. The line on stderr ends up in the job's last error.
set -eu
out=$1
name=$2
code=$3
shift 3
cat >"$out/$name.body.tmp"
env >"$out/$name.env.tmp"
for arg in "$@"; do
	printf '%s\n' "$arg"
done >"$out/$name.args.tmp"
for f in body env args; do
	mv "$out/$name.$f.tmp" "$out/$name.$f"
done
echo "attempt ${WEBHOOK_ATTEMPT:-?}" >>"$out/$name.runs"
: >"$out/$name.done"
echo "record.sh: exiting $code" >&2
exit "$code"
