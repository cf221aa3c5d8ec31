#!/bin/sh
# Runs the Windows build's test suite (make windows) under wine: tests/run.sh with wine as the
# runner. The wine prefix lives inside the build folder, so nothing outside it is touched.
# test_cli drives brasa through a POSIX shell (quotes, 2>/dev/null) and cannot run under
# cmd.exe; it is listed as not run.
set -u
build=${1:-build-win}
command -v wine >/dev/null 2>&1 || { echo "wine is not installed (apt-get install wine wine64)"; exit 1; }
WINEPREFIX=${WINEPREFIX:-$(cd "$build" && pwd)/wineprefix}
WINEDEBUG=${WINEDEBUG:--all}
# no Mono/Gecko installers and no desktop integration in a fresh prefix
WINEDLLOVERRIDES=${WINEDLLOVERRIDES:-mscoree,mshtml,winemenubuilder.exe=}
export WINEPREFIX WINEDEBUG WINEDLLOVERRIDES
# The first start creates the prefix (slow); later ones reuse the running wineserver.
if [ ! -f "$WINEPREFIX/system.reg" ]; then
  echo "creating the wine prefix in $WINEPREFIX (once)"
  wineboot -i >/dev/null 2>&1
fi
wineserver -p 60 2>/dev/null
# backslashes: cmd.exe reads a/b.exe as the command a with a switch /b.exe
win_bin=$(printf '%s/brasa.exe' "$build" | sed 's|/|\\|g')
BRASA_BIN=${BRASA_BIN:-$win_bin} BRASA_RUNNER=wine \
  BRASA_TEST_SKIP=${BRASA_TEST_SKIP:-test_cli.exe} sh tests/run.sh "$build"
rc=$?
wineserver -k 2>/dev/null
exit $rc
