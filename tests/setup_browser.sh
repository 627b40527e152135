#!/bin/sh
# Headless Chromium for the browser tests (tests/test_web_browser.py): Debian's `chromium` package.
# Installs it with apt-get where apt exists and it is missing; does nothing otherwise (the tests then
# skip with the reason). Never downloads a browser build (no `playwright install`).
set -eu
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    echo "setup_browser: chromium found at $(command -v chromium || command -v chromium-browser)"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup_browser: no apt-get here; the browser tests will be skipped"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
        echo "setup_browser: not root and no sudo; the browser tests will be skipped"; exit 0; fi
fi
export DEBIAN_FRONTEND=noninteractive
if $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends chromium; then
    echo "setup_browser: installed $(command -v chromium)"
else
    echo "setup_browser: apt-get could not install chromium; the browser tests will be skipped"
fi
