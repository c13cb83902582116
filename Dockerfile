# One image per Lethe service: docker build --build-arg SERVICE=intake -t lethe-intake .
FROM golang:1.26 AS build
WORKDIR /src
COPY . .
ARG SERVICE=standalone
RUN --mount=type=cache,target=/root/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    cd services/${SERVICE} && CGO_ENABLED=0 go build -trimpath -o /out/lethe .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/lethe /lethe
USER nonroot
ENTRYPOINT ["/lethe"]
