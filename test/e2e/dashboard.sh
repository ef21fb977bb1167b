#!/usr/bin/env bash
# dashboard.sh — the dashboard in a real browser: installs Debian's
# chromium when missing, then runs the browser test of internal/dashboard
# (TestBrowser: a daemon on a real store, campaigns reported from the
# generator, every page loaded in headless Chromium, allow and delete
# clicked and seen in the store, requests without login or CSRF token
# refused, hostile samples that must neither run nor break the layout)
# and the browser test of a fleet (TestBrowserFleet: three daemons with
# embedded JetStream servers; the fleet table and its state hashes
# converged, a campaign reported on one node listed on another with the
# hits counted on the third, allowed from that dashboard and allowed on
# the node that took the report), with a missing browser a failure, not a
# skip. The screenshots go to docs/img/dashboard-*.png (the README shows
# them).
#
#   test/e2e/dashboard.sh            # screenshots into docs/img
#   SHOTS=/tmp/x test/e2e/dashboard.sh
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"
cd "$(dirname "$0")/../.."
. test/e2e/lib.sh # die, apt_install
browser=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$browser" ]; then
	apt_install chromium
	browser=$(command -v chromium)
fi
echo "== $("$browser" --version 2>/dev/null || echo "$browser") (load $(cut -d' ' -f1 /proc/loadavg))"
NDDMILTER_CHROMIUM="$browser" NDDMILTER_BROWSER_REQUIRED=1 NDDMILTER_SCREENSHOTS="${SHOTS:-$PWD/docs/img}" \
	go test -count=1 -run '^TestBrowser(Fleet)?$' -v ./internal/dashboard
