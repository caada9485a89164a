#!/usr/bin/env bash
# One run of the speed benchmark: perfmodel beside llm-analysis and genz-llm (docs/speed.md).
#
#   bash bench/run_bench.sh [bench_speed.py options, e.g. --quick]
#
# Makes the peers' virtualenv at bench/.venv-peers if it is missing (with $PEER_PYTHON, default
# python3), installs bench/requirements.txt into it when that file changed since the last install,
# then runs bench/bench_speed.py with the project's Python ($PYTHON, default python) and
# --peer-python pointing at the virtualenv. If the virtualenv cannot be made or installed, the
# benchmark still runs and says why the peers are missing.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
venv="$here/.venv-peers"
project_python="${PYTHON:-python}"
peer_base="${PEER_PYTHON:-python3}"
stamp="$venv/.installed-requirements.txt"

if [ ! -x "$venv/bin/python" ]; then
    echo "making $venv with $peer_base" >&2
    "$peer_base" -m venv "$venv" || echo "could not make $venv; the peers will be skipped" >&2
fi
if [ -x "$venv/bin/python" ] && ! cmp -s "$here/requirements.txt" "$stamp"; then
    echo "installing bench/requirements.txt into $venv" >&2
    if "$venv/bin/python" -m pip install --disable-pip-version-check -q -r "$here/requirements.txt"; then
        cp "$here/requirements.txt" "$stamp"
    else
        echo "pip install failed; bench_speed.py will report what is missing" >&2
    fi
fi

cd "$root" || exit 1
exec "$project_python" bench/bench_speed.py --peer-python "$venv/bin/python" "$@"
