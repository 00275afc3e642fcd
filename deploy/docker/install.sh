#!/bin/sh
# The install steps of the streamgate image, in one script for both places that run them:
# deploy/Dockerfile (one step in each of its two stages) and tests/deploy/test_image.py (on the
# host, into a clean virtualenv: no container engine can build the image there). Change them here.
#
#   install.sh wheel SRC OUT                    build the wheel of the project in SRC into OUT
#   install.sh venv WHEELS CONSTRAINTS PREFIX   a virtualenv at PREFIX holding that wheel and its
#                                               dependencies, pinned by CONSTRAINTS; pip and
#                                               setuptools are removed from it afterwards
#
# PYTHON names the interpreter (default python3). The wheel step builds inside SRC (setuptools
# writes build/ and *.egg-info there), so give it a copy, as the image's build stage does.
set -eu

python=${PYTHON:-python3}

usage() {
    echo "usage: install.sh wheel SRC OUT | install.sh venv WHEELS CONSTRAINTS PREFIX" >&2
    exit 2
}

case ${1:-} in
wheel)
    [ $# -eq 3 ] || usage
    "$python" -m pip wheel --no-cache-dir --disable-pip-version-check --no-input \
        --no-deps --wheel-dir "$3" "$2"
    ;;
venv)
    [ $# -eq 4 ] || usage
    wheels=$2 constraints=$3 prefix=$4
    # Exactly one wheel of the project: with a stale second one the choice would be arbitrary.
    count=$(find "$wheels" -maxdepth 1 -name 'streamgate-*.whl' | wc -l)
    if [ "$count" -ne 1 ]; then
        echo "install.sh: expected one streamgate wheel in $wheels, found $count" >&2
        exit 1
    fi
    "$python" -m venv "$prefix"
    "$prefix/bin/python" -m pip install --no-cache-dir --disable-pip-version-check --no-input \
        --constraint "$constraints" "$wheels"/streamgate-*.whl
    # Nothing needs them at run time, and they are what image scanners flag most.
    "$prefix/bin/python" -m pip uninstall --disable-pip-version-check --no-input --yes \
        pip setuptools
    "$prefix/bin/streamgate" --version
    ;;
*)
    usage
    ;;
esac
