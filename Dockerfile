# One image per Lethe service: docker build --build-arg SERVICE=intake -t lethe-intake .
FROM golang:1.26 AS build
WORKDIR /src
COPY . .
ARG SERVICE=standalone
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    cd services/${SERVICE} && CGO_ENABLED=0 go build -trimpath -o /out/lethe .

FROM gcr.io/distroless/static-debian12:nonroot
ARG SERVICE=standalone
LABEL org.opencontainers.image.title="lethe-${SERVICE}" \
      org.opencontainers.image.source="https://github.com/lethe-erasure/lethe"
COPY --from=build /out/lethe /lethe
# In a container every service listens on all interfaces: metrics, /healthz and /readyz on
# 9090; the intake's API on 8080.
ENV LETHE_METRICS_ADDR=0.0.0.0:9090 \
    LETHE_HTTP_ADDR=0.0.0.0:8080
EXPOSE 9090 8080
USER nonroot
ENTRYPOINT ["/lethe"]
