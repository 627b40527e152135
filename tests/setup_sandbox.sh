#!/usr/bin/env sh
# Install bubblewrap so that CI tests the sandbox's bwrap layer. Where apt-get is missing, or the user
# cannot install packages, nothing happens: the bwrap tests are then skipped with the reason printed.
set -u
if command -v bwrap >/dev/null 2>&1; then
    exit 0
fi
if command -v apt-get >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" != "0" ]; then
        command -v sudo >/dev/null 2>&1 && SUDO="sudo -n" || exit 0
    fi
    ($SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq bubblewrap) \
        >/dev/null 2>&1 || echo "setup_sandbox: could not install bubblewrap; the bwrap tests will be skipped" >&2
fi
exit 0
