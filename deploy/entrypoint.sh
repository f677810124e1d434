#!/bin/sh
# Start `s3skills mcp` over HTTP in a container (deploy/Dockerfile's entry point).
#
# The tokens file arrives as a mounted secret: owned by root, often a symlink (Kubernetes),
# which the server refuses (a file another user can rewrite could make any token stand for
# any user). It is copied into a private file of this user first (mode 600, under $TMPDIR).
# Every other setting comes from the environment (S3SKILLS_BUCKET, S3SKILLS_ENDPOINT_URL,
# S3SKILLS_WORKERS, S3SKILLS_METRICS, S3SKILLS_DRAIN_SECONDS, S3SKILLS_UNREADY_SECONDS, AWS_*)
# or from the arguments, which are passed on.
set -eu
source_file="${S3SKILLS_TOKENS_FILE:-/run/secrets/s3skills-tokens}"
private_dir="${TMPDIR:-/tmp}/s3skills"
umask 077
mkdir -p "$private_dir"
cp -L "$source_file" "$private_dir/tokens.json"
# Inside the container the server binds every interface of the container's own network
# (the balancer or the Service reaches it there); publish the balancer, not the replicas.
exec s3skills mcp --transport http --host 0.0.0.0 --port "${S3SKILLS_PORT:-8000}" \
    --tokens "$private_dir/tokens.json" "$@"
