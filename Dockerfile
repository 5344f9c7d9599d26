# syntax=docker/dockerfile:1
# Multi-stage build: compile the binary and the embodiment plugins with the
# stock Go toolchain, then ship them with the embedded-default assets (the tiny
# checkpoint, the vendored tokenizer) in a small runtime image.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN make build

FROM debian:bookworm-slim
RUN useradd --system --home /var/lib/gr00tgw gr00tgw
COPY --from=build /src/bin/gr00tgw /opt/gr00tgw/bin/gr00tgw
COPY --from=build /src/build/plugins /opt/gr00tgw/build/plugins
COPY --from=build /src/testdata/n17-tiny /opt/gr00tgw/testdata/n17-tiny
COPY --from=build /src/testdata/tokenizer /opt/gr00tgw/testdata/tokenizer
USER gr00tgw
ENV GR00TGW_ADDR=0.0.0.0:20000
EXPOSE 20000
ENTRYPOINT ["/opt/gr00tgw/bin/gr00tgw"]
CMD ["serve"]
