#!/bin/sh
# The Debian packages some tests need: bubblewrap (the sandbox's bwrap layer) and chromium (the
# browser tests of the web demos). Installs what is missing with apt-get where apt exists and the
# user may install; does nothing otherwise, and those tests then skip with the reason printed.
# Never downloads a browser build. Usage: sh tests/setup_system.sh
set -u
missing=""
command -v bwrap >/dev/null 2>&1 || missing="$missing bubblewrap"
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing="$missing chromium"
[ -z "$missing" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
    echo "setup_system: no apt-get here; tests needing$missing will be skipped"
    exit 0
fi
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo -n"; else
        echo "setup_system: not root and no sudo; tests needing$missing will be skipped"; exit 0; fi
fi
export DEBIAN_FRONTEND=noninteractive
if $SUDO apt-get update -qq && $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null; then
    echo "setup_system: installed$missing"
else
    echo "setup_system: apt-get could not install$missing; the tests that need them will be skipped"
fi
exit 0
