# The kube-fstack operator image: the static fstack-operator on an empty base, run as a non-root
# user (the chart's Deployment asks for 65532). Build from the repository root:
#   docker build -t <registry>/kube-fstack/operator:<tag> .
# `make image-operator` builds this file with buildah on a locally made Go image, with no network
# (hack/image-operator.sh); the local cluster and e2e run that image.
ARG GO_IMAGE=golang:1.26
ARG BASE_IMAGE=scratch

# The builder runs on the build machine and cross-compiles for the target (--platform linux/arm64):
# the binary is static and the base empty, so no emulator and no arm64 base image are needed.
FROM --platform=$BUILDPLATFORM ${GO_IMAGE} AS build
ARG TARGETOS
ARG TARGETARCH
# Passed through to go: the local build sets GOPROXY=off and mounts the host's module cache.
ARG GOPROXY
ARG GOFLAGS
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# The image ships its license and the license of every module the binary links
# (/usr/share/doc/kube-fstack; hack/tools/notices reads them from the binary's build information).
RUN CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH go build -trimpath -ldflags='-s -w' -o /out/ ./operator/cmd/fstack-operator \
    && mkdir -p /out/doc && cp LICENSE NOTICE /out/doc/ \
    && go run ./hack/tools/notices -o /out/doc/THIRD_PARTY_NOTICES /out/fstack-operator \
    && mkdir -p /out/etc \
    && echo 'nonroot:x:65532:65532:nonroot:/:/sbin/nologin' >/out/etc/passwd \
    && echo 'nonroot:x:65532:' >/out/etc/group

FROM ${BASE_IMAGE}
COPY --from=build /out/etc/passwd /out/etc/group /etc/
COPY --from=build /out/fstack-operator /fstack-operator
COPY --from=build /out/doc/ /usr/share/doc/kube-fstack/
USER 65532:65532
ENTRYPOINT ["/fstack-operator"]
