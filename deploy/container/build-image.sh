#!/bin/sh
# Builds chainwatch's container image without an image registry or a Dockerfile base: a Debian bookworm root
# filesystem made from Debian packages by mmdebstrap (libevent, OpenSSL, ca-certificates and the openssl command that
# `chainwatch selftest` uses), the release binary and the Swift runtime libraries it links (from the toolchain, found
# with ldd), imported into podman as IMAGE. Runs as user 65532, alerts on stdout, the policy from /etc/chainwatch.
#
#   deploy/container/build-image.sh            # needs: mmdebstrap podman (apt-get install mmdebstrap podman)
#   IMAGE=localhost/chainwatch:dev CHAINWATCH_BIN=path/to/chainwatch deploy/container/build-image.sh
#
# The tarball is kept as .build/image/rootfs.tar (podman load is not needed: `podman import` made the image).
set -eu
cd "$(dirname "$0")/../.."
BIN=${CHAINWATCH_BIN:-.build/release/chainwatch}
[ -x "$BIN" ] || { echo "build-image.sh: no $BIN (make build first)" >&2; exit 2; }
VERSION=$("$BIN" --version | cut -d" " -f1)
IMAGE=${IMAGE:-localhost/chainwatch:$VERSION}
for tool in mmdebstrap podman; do
  command -v "$tool" >/dev/null || { echo "build-image.sh: $tool is not installed (apt-get install $tool)" >&2; exit 2; }
done
OUT=.build/image
rm -rf "$OUT"
mkdir -p "$OUT/swift-libs"
# The libraries the binary links that no Debian package of the image provides: the Swift runtime.
ldd "$BIN" | awk '$3 ~ /\/swift\// { print $3 }' | while read -r lib; do cp -L "$lib" "$OUT/swift-libs/"; done
[ -n "$(ls "$OUT/swift-libs")" ] || echo "build-image.sh: no Swift runtime library linked (a static build?)" >&2
mmdebstrap --variant=minbase \
  --include=libevent-2.1-7,libevent-core-2.1-7,libevent-extra-2.1-7,libevent-openssl-2.1-7,libevent-pthreads-2.1-7,libssl3,libbrotli1,libzstd1,zlib1g,ca-certificates,openssl,libstdc++6 \
  --customize-hook='mkdir -p "$1/usr/local/lib/chainwatch" "$1/etc/chainwatch"' \
  --customize-hook="copy-in $BIN /usr/local/bin" \
  --customize-hook="sync-in $OUT/swift-libs /usr/local/lib/chainwatch" \
  --customize-hook='echo /usr/local/lib/chainwatch > "$1/etc/ld.so.conf.d/chainwatch.conf" && chroot "$1" ldconfig' \
  --customize-hook="copy-in policies/default.yaml /etc/chainwatch" \
  --customize-hook='mv "$1/etc/chainwatch/default.yaml" "$1/etc/chainwatch/policy.yaml"' \
  bookworm "$OUT/rootfs.tar"
podman import \
  --change 'ENTRYPOINT ["/usr/local/bin/chainwatch"]' \
  --change 'CMD ["run", "--listen=0.0.0.0:3128", "--allow-client=127.0.0.0/8", "--allow-client=10.0.0.0/8", "--allow-client=172.16.0.0/12", "--allow-client=192.168.0.0/16", "--admin=127.0.0.1:9128", "--alert-log=-", "--policy=/etc/chainwatch/policy.yaml"]' \
  --change 'USER 65532:65532' \
  --change 'WORKDIR /tmp' \
  --change 'EXPOSE 3128' --change 'EXPOSE 9128' \
  --change "LABEL org.opencontainers.image.version=$VERSION" \
  "$OUT/rootfs.tar" "$IMAGE"
echo "built $IMAGE ($(du -h "$OUT/rootfs.tar" | cut -f1) root filesystem)"
