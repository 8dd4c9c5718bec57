# syntax=docker/dockerfile:1
# switchboard: a static binary on a distroless base (no shell, no libc, runs
# as nonroot). SQLite is pure Go (modernc), so CGO stays off.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath \
      -ldflags "-s -w -X github.com/switchboard-mcp/switchboard/internal/cli.Version=${VERSION}" \
      -o /out/switchboard ./cmd/switchboard

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/switchboard /usr/local/bin/switchboard
# The config (/etc/switchboard/switchboard.yaml) must have an auth: section,
# and either settings.listen_tls (certificates) or, behind a TLS-terminating
# proxy, settings.allow_plain_http: true (or SWITCHBOARD_ALLOW_PLAIN_HTTP=true):
# the gateway refuses to listen on a non-loopback address otherwise.
WORKDIR /var/lib/switchboard
EXPOSE 8080
ENV SWITCHBOARD_LISTEN=0.0.0.0:8080
ENTRYPOINT ["/usr/local/bin/switchboard"]
CMD ["serve", "--config", "/etc/switchboard/switchboard.yaml"]
