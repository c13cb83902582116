# One image per Lethe service: docker build --build-arg SERVICE=intake -t lethe-intake .
# SERVICE is a directory of services/, or lethectl (cmd/lethectl, for the topics job).
# The Go image is the toolchain go.work asks for; it keeps its module cache in /go/pkg/mod
# (GOPATH=/go) and its build cache in /root/.cache/go-build.
FROM golang:1.27.3 AS build
WORKDIR /src
COPY . .
ARG SERVICE=standalone
# The release and commit stamped into the binary (--version, lethe_build_info); .git is not
# in the build context: docker build --build-arg VERSION=v1.2.3 --build-arg REVISION=$(git rev-parse HEAD)
ARG VERSION=dev
ARG REVISION=unknown
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    dir=services/${SERVICE}; [ -d "$dir" ] || dir=cmd/${SERVICE}; \
    cd "$dir" && CGO_ENABLED=0 go build -trimpath \
      -ldflags "-X github.com/lethe-erasure/lethe/pkg/version.Version=${VERSION} -X github.com/lethe-erasure/lethe/pkg/version.Revision=${REVISION}" \
      -o /out/lethe .

FROM gcr.io/distroless/static-debian12:nonroot
ARG SERVICE=standalone
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="lethe-${SERVICE}" \
      org.opencontainers.image.source="https://github.com/lethe-erasure/lethe" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
COPY --from=build /out/lethe /lethe
# In a container every service listens on all interfaces: metrics, /healthz and /readyz on
# 9090; the intake's API on 8080.
ENV LETHE_METRICS_ADDR=0.0.0.0:9090 \
    LETHE_HTTP_ADDR=0.0.0.0:8080
EXPOSE 9090 8080
USER nonroot
ENTRYPOINT ["/lethe"]
