#!/bin/bash
# A bridge maintainer's first hour, timed from a fresh venv and a fresh HOME (BENCHMARKS.md,
# "A bridge's first hour"): the documented install line (a local clone), `hosts install`, a pi
# extension's run with its profile, `baseline update`, the run with the baseline, then
# `palace-conformance run` (the reference bridge, default --jobs).
#
# usage: benchmarks/first_hour.sh CHECKOUT OUTDIR [loaded]
#   loaded: two busy processes (`yes >/dev/null`) run beside every step, and are killed after.
# Each step's wall time, exit status and the load average before and after go to OUTDIR/times.tsv,
# its output to OUTDIR/<step>.out. Needs network (PyPI, npm) and about 1 GB under a temp dir.
set -u
CHECKOUT=$(cd "$1" && pwd)
OUT=$2
MODE=${3:-idle}
rm -rf "$OUT"; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
HOME=$(mktemp -d); export HOME
unset PYTHONPATH XDG_CACHE_HOME PALACE_REAL_PYTHON PALACE_REAL_VENV
cd "$OUT" || exit 2
LOADPIDS=""
if [ "$MODE" = loaded ]; then
  yes >/dev/null & LOADPIDS="$!"
  yes >/dev/null & LOADPIDS="$LOADPIDS $!"
fi
step() {  # NAME COMMAND...
  local name=$1; shift
  local l0 l1 s e
  l0=$(cut -d' ' -f1 /proc/loadavg); s=$(date +%s.%N)
  "$@" >"$OUT/$name.out" 2>&1
  local rc=$?
  e=$(date +%s.%N); l1=$(cut -d' ' -f1 /proc/loadavg)
  printf '%s\t%.1f s\trc=%s\tload %s -> %s\n' "$name" "$(echo "$e - $s" | bc)" "$rc" "$l0" "$l1" \
    | tee -a "$OUT/times.tsv"
}
echo "start $(date -u +%FT%TZ) mode=$MODE load=$(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/times.tsv"
python3 -m venv "$OUT/venv"
. "$OUT/venv/bin/activate"
step install pip install "$CHECKOUT"
step hosts-install palace-conformance hosts install
EXAMPLES=$CHECKOUT/tests/ts/extensions/realworld
cp "$EXAMPLES/knobs.profile.json" "$EXAMPLES/knobs.ts" "$EXAMPLES/mcp-wire.ts" .
step ext-run-first palace-conformance run --profile knobs.profile.json --json first.json
step baseline-update palace-conformance baseline update --from first.json --out knobs.baseline.json
step ext-run-baseline palace-conformance run --profile knobs.profile.json --baseline knobs.baseline.json
step run-default palace-conformance run
echo "end $(date -u +%FT%TZ)" | tee -a "$OUT/times.tsv"
[ -n "$LOADPIDS" ] && kill $LOADPIDS
rm -rf "$HOME"
