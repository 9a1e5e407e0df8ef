#!/usr/bin/env bash
# Makes sure Debian's headless Chromium is present for the explorer's browser tests.
# As root (CI, this machine) it installs the package; otherwise it only says what is missing.
set -u
if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing Debian's chromium for the browser tests..."
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "warning: could not install chromium; browser tests will fail in CI" >&2
else
  echo "note: /usr/bin/chromium is missing; run 'apt-get install chromium' as root for the browser tests" >&2
fi
exit 0
