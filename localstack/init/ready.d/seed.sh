#!/bin/bash
# LocalStack "ready" hook: create the s3skills bucket and seed it with the bundled example
# library, with the project's own seeding code (`python -m s3skills.seed`).
#
# docker-compose.yml mounts the project read-only at /opt/s3skills. This hook copies what a
# build needs to a scratch folder, installs it in a private virtualenv (from PyPI: the
# container needs network access on its first start) and runs the seeder against LocalStack.
# Seeding again is harmless: unchanged files are not uploaded twice.
#
# Settings (environment variables):
#   S3SKILLS_BUCKET        the bucket to create and seed       (default: s3skills)
#   S3SKILLS_USER          the user whose library is seeded    (default: ana)
#   S3SKILLS_ENDPOINT_URL  the S3 endpoint                     (default: http://localhost:4566)
#   S3SKILLS_SOURCE        the mounted project                 (default: /opt/s3skills)
#   S3SKILLS_PYTHON        an interpreter that already has s3skills: skip the install
#                          (the test suite runs this hook that way, against moto)
set -euo pipefail

bucket="${S3SKILLS_BUCKET:-s3skills}"
user="${S3SKILLS_USER:-ana}"
layout="${S3SKILLS_LAYOUT:-users}"
endpoint="${S3SKILLS_ENDPOINT_URL:-http://localhost:4566}"
source_dir="${S3SKILLS_SOURCE:-/opt/s3skills}"
python="${S3SKILLS_PYTHON:-}"

# LocalStack accepts any credentials. Exported to the seeder only (this script's children).
export AWS_ACCESS_KEY_ID="${AWS_ACCESS_KEY_ID:-test}"
export AWS_SECRET_ACCESS_KEY="${AWS_SECRET_ACCESS_KEY:-test}"
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"

log() { echo "s3skills seed: $*" >&2; }

if [[ -z "$python" ]]; then
    if [[ ! -f "$source_dir/pyproject.toml" ]]; then
        log "no project at $source_dir: mount it (see docker-compose.yml) or set S3SKILLS_SOURCE"
        exit 1
    fi
    work="$(mktemp -d /tmp/s3skills-seed.XXXXXX)"
    trap 'rm -rf "$work"' EXIT
    # The mount is read-only and pip builds in the source tree: copy the project, without
    # version control, virtualenvs and caches.
    mkdir "$work/src"
    tar -C "$source_dir" -cf - \
        --exclude=.git --exclude=.venv --exclude=venv --exclude=node_modules --exclude=build \
        --exclude=dist --exclude='*.egg-info' --exclude=__pycache__ --exclude=.mypy_cache \
        --exclude=.pytest_cache --exclude=.ruff_cache --exclude=.hypothesis --exclude=bench/results . |
        tar -C "$work/src" -xf -
    log "installing s3skills from $source_dir into a private virtualenv (about a minute)"
    python3 -m venv "$work/venv"
    "$work/venv/bin/pip" install --quiet --disable-pip-version-check "$work/src"
    python="$work/venv/bin/python"
fi

log "seeding the library of user $user in s3://$bucket ($layout layout) at $endpoint"
"$python" -m s3skills.seed --endpoint-url "$endpoint" --bucket "$bucket" --user "$user" --layout "$layout"
