# syntax=docker/dockerfile:1
# The image `make image` builds without a daemon (tools/imagebuild), for
# people who build with Docker: the build stage packs the plugins and lets
# the same builder write the image's file system (static binary, tiny
# checkpoint and its demos, tokenizer, plugins, /etc/passwd with the
# non-root user 65532, CA bundle, /tmp, HOME) to /rootfs; the final stage is
# that tree on an empty base with the same runtime configuration
# (tools/imagebuild.RuntimeConfig; a test keeps the two in step). The
# builder is the tools module (tools/go.mod, which replaces the server
# module with ../).
#
#   docker build -t gr00tgw . && docker run --rm -p 8080:8080 gr00tgw
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
COPY tools/go.mod tools/go.sum ./tools/
RUN go mod download && cd tools && go mod download
COPY . .
RUN make plugins && cd tools && go run ./cmd/gwimage --rootfs /rootfs

FROM scratch
COPY --from=build /rootfs/ /
# COPY makes files root-owned; HOME is the one tree the user writes.
COPY --from=build --chown=65532:65532 /rootfs/home/gr00tgw /home/gr00tgw
USER 65532:65532
ENV PATH=/opt/gr00tgw/bin HOME=/home/gr00tgw GR00TGW_HOME=/opt/gr00tgw PORT=8080
WORKDIR /home/gr00tgw
EXPOSE 8080/tcp
STOPSIGNAL SIGTERM
ENTRYPOINT ["/opt/gr00tgw/bin/gr00tgw"]
CMD ["serve"]
