# syntax=docker/dockerfile:1
# kvserve's container image: `kvserve serve` on port 8080, the model mounted at /models.
#
#   scripts/image.sh build                 # builds it (docker or podman) and answers a completion
#   docker run --rm -p 8080:8080 -v "$PWD/models:/models:ro" kvserve:latest \
#       -m /models/stories260K.gguf --host 0.0.0.0 --port 8080
#
# Pinned: the base image by a dated bookworm tag and its digest (the multi-platform index digest
# docker-library's repo-info records for that tag), and every package's version: the versions the
# tests of this commit ran with (`scripts/image.sh pins` prints them from dpkg). Debian replaces
# superseded versions in its archive: when a pin no longer installs, take the new pins and retest.
# The runtime stage holds the binary and the packages of its shared libraries, nothing else;
# `scripts/image.sh check` checks that list against `ldd build/kvserve` and runs the binary in a
# root made of exactly those files.
ARG DEBIAN_IMAGE=debian:bookworm-20260918-slim@sha256:3783cc01769c7b2b1b83a5c5ad96c815348e28ed7da68e2e3687004faa906251

FROM ${DEBIAN_IMAGE} AS build
# build packages (pins)
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      g++=4:12.2.0-3 \
      cmake=3.25.1-1 \
      ninja-build=1.11.1-2~deb12u1 \
      pkg-config=1.8.1-1 \
      libpcre2-dev=10.42-1+deb12u2 \
      libicu-dev=72.1-3+deb12u1 \
      nlohmann-json3-dev=3.11.2-2 \
      libcpp-httplib-dev=0.11.4+ds-1+deb12u1 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY CMakeLists.txt ./
COPY src ./src
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DKVSERVE_BUILD_TESTS=OFF \
 && cmake --build build --target kvserve \
 && strip build/kvserve

FROM ${DEBIAN_IMAGE} AS runtime
ARG KVSERVE_REVISION=unknown
LABEL org.opencontainers.image.title="kvserve" \
      org.opencontainers.image.description="kvserve serve: an OpenAI-compatible LLM server" \
      org.opencontainers.image.revision="${KVSERVE_REVISION}"
# runtime packages (pins): the packages of kvserve's shared libraries (libc6 is the base image's)
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      libcpp-httplib0.11=0.11.4+ds-1+deb12u1 \
      libpcre2-8-0=10.42-1+deb12u2 \
      libicu72=72.1-3+deb12u1 \
      libstdc++6=12.2.0-14+deb12u1 \
      libgcc-s1=12.2.0-14+deb12u1 \
      libssl3=3.0.19-1~deb12u2 \
      zlib1g=1:1.2.13.dfsg-1 \
      libbrotli1=1.0.9-2+b6 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 kvserve \
 && useradd --system --uid 10001 --gid kvserve --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin kvserve
COPY --from=build /src/build/kvserve /usr/local/bin/kvserve
USER 10001:10001
VOLUME ["/models"]
EXPOSE 8080
# /health: 200 when serving, 503 while loading or draining. bash's /dev/tcp: no HTTP client needed.
HEALTHCHECK --interval=10s --timeout=3s --start-period=300s --retries=3 \
  CMD ["bash", "-c", "exec 3<>/dev/tcp/127.0.0.1/8080 && printf 'GET /health HTTP/1.0\\r\\n\\r\\n' >&3 && head -n 1 <&3 | grep -q ' 200 '"]
ENTRYPOINT ["kvserve", "serve"]
CMD ["-m", "/models/model.gguf", "--host", "0.0.0.0", "--port", "8080"]
