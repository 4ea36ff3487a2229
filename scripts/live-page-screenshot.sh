#!/usr/bin/env bash
# Makes docs/img/live_page.png: the scheduler's live page (PS_METRICS_PORT) in headless Chromium
# while ps_lda trains on SOTU (3 servers, 2 workers, SSP(1)) and 10 s after server 1 was
# SIGKILLed. Needs a build, scripts/fetch-lda-data.sh and Debian's chromium. Processes are
# stopped by their PIDs.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-docs/img/live_page.png}
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
log=$(mktemp)
profile=$(mktemp -d)
python3 tracker/ps-launch -s 3 -w 2 --allow-dead-servers 1 --timeout 300 --metrics-port "$port" -- \
  build/apps/lda/ps_lda --train data/sotu/train.txt --test data/sotu/test.txt \
  --vocab data/sotu/vocab.txt --topics 100 --iterations 100000 --eval_every 20 \
  --consistency ssp:1 >"$log" 2>&1 &
launcher=$!
trap 'kill -INT $launcher 2>/dev/null || true; rm -rf "$profile" "$log"' EXIT
sleep 12
victim=$(grep -m1 "started server 1 pid" "$log" | awk '{print $NF}')
kill -9 "$victim"
echo "live-page-screenshot: SIGKILL to server 1 (pid $victim)"
sleep 10
chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$profile" \
  --window-size=1200,900 --virtual-time-budget=3000 --screenshot="$out" \
  "http://127.0.0.1:$port/" >/dev/null 2>&1
echo "live-page-screenshot: $out"
