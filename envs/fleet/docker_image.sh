#!/usr/bin/env bash
# Builds the desktop image of the docker backend (envs/fleet/Dockerfile) from Debian's and PyPI's packages alone,
# for engines that reach no image registry. The base is Debian 12 made by debootstrap and `docker import`ed
# once, tagged by how it was made (suite, variant, mirror), so later builds reuse it; docker build's own
# cache then reuses every layer whose inputs did not change. With a registry, plain `docker build` works too.
#
#   envs/fleet/docker_image.sh                          # computerrl-desktop:latest, every app
#   envs/fleet/docker_image.sh --slim computerrl-desktop:slim    # Calc only (what the tests run)
#
# Needs root (debootstrap) and a Docker engine ($DOCKER_HOST, else the local socket). DEBIAN_MIRROR
# overrides the mirror (default: this machine's apt mirror, else deb.debian.org).
set -euo pipefail
cd "$(dirname "$0")/../.."  # the repo root: the build context

tag=computerrl-desktop:latest apps=()
for arg in "$@"; do
  case $arg in
    --slim) apps=(--build-arg "APPS=") ;;
    -*) echo "docker_image.sh: unknown option $arg" >&2; exit 2 ;;
    *) tag=$arg ;;
  esac
done

base=debian:bookworm-slim
if ! docker image inspect "$base" >/dev/null 2>&1; then
  mirror=${DEBIAN_MIRROR:-$(sed -n 's|^URIs: *\(http[^ ]*/debian\)$|\1|p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -1)}
  mirror=${mirror:-http://deb.debian.org/debian}
  base=computerrl-base:bookworm-$(printf 'bookworm minbase %s' "$mirror" | sha256sum | cut -c1-12)
  if ! docker image inspect "$base" >/dev/null 2>&1; then
    command -v debootstrap >/dev/null || apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
    rootfs=$(mktemp -d)
    trap 'rm -rf "$rootfs"' EXIT
    echo "docker_image.sh: making the base $base with debootstrap from $mirror"
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >/dev/null
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import - "$base" >/dev/null
  fi
fi
# The host's own certificate authorities (a TLS-inspecting proxy's), so pip inside the build trusts what
# pip here trusts; the host's network, so the build reaches what the host reaches without NAT rules.
extra_ca=$(cat /usr/local/share/ca-certificates/*.crt 2>/dev/null || true)
echo "docker_image.sh: building $tag on $base"
docker build --network host -f envs/fleet/Dockerfile --build-arg "BASE=$base" --build-arg "EXTRA_CA=$extra_ca" \
  "${apps[@]}" -t "$tag" .
