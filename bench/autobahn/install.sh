#!/usr/bin/env bash
# Installs the WebSocket conformance harness from PyPI, into $AUTOBAHN_HOME
# (default ~/.cache/twinhttp-autobahn), never into the repository:
#   tools/  a Python 3 venv: virtualenv (to make the 2.7 environment) and websockets (ws_smoke.py)
#   py27/   a Python 2.7 virtualenv with Autobahn|Testsuite's wstest (requirements-wstest-py27.txt)
# wstest runs only on Python 2.7: this takes pyenv's 2.7.18 ($PY27 to point elsewhere). Where no
# Python 2.7 is to be had, the usual route is the Docker image crossbario/autobahn-testsuite (see
# the README). About a minute the first time; at once when everything is in place.
set -euo pipefail
harness=$(cd "$(dirname "$0")" && pwd)
state=${AUTOBAHN_HOME:-$HOME/.cache/twinhttp-autobahn}
py27=${PY27:-${PYENV_ROOT:-$HOME/.pyenv}/versions/2.7.18/bin/python2.7}
export PIP_CACHE_DIR=$state/pip-cache PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_PYTHON_VERSION_WARNING=1
mkdir -p "$state"

if ! "$state/tools/bin/python" -c 'import virtualenv, websockets' 2>/dev/null; then
  python3 -m venv "$state/tools"
  "$state/tools/bin/pip" install -q -r "$harness/requirements-tools.txt"
fi
if [ ! -x "$state/py27/bin/wstest" ]; then
  [ -x "$py27" ] || { echo "install.sh: no Python 2.7 at $py27 (set PY27, or use the Docker image crossbario/autobahn-testsuite)" >&2; exit 2; }
  # virtualenv keeps its seed wheels under XDG_DATA_HOME: keep them in the state folder too.
  XDG_DATA_HOME=$state/xdg "$state/tools/bin/virtualenv" -q -p "$py27" "$state/py27"
  "$state/py27/bin/pip" install -q -r "$harness/requirements-wstest-py27.txt"
fi
echo "install.sh: $("$state/py27/bin/wstest" -a 2>&1 | grep -i testsuite)," \
  "websockets $("$state/tools/bin/python" -c 'import websockets; print(websockets.__version__)') in $state"
