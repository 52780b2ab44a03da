# Skeid in a container, built from source in two stages; no prebuilt file is needed.
#
#   docker build -t skeid .
#   docker run -p 8090:8090 -v /etc/skeid:/etc/skeid:ro --env-file /etc/skeid/skeid.env skeid
#
# Stage one installs the pinned Deno from npm and compiles dist/skeid with scripts/build (the one
# flag list, scripts/flags; `deno compile` downloads Deno's denort runtime, or takes the build
# argument DENORT_BIN, a path inside the build context). Stage two is the binary alone on a slim
# base, run as a non-root user. The config is mounted at /etc/skeid/config.yaml; secrets come only
# from the environment (the variables the config names), never from the image.

FROM node:20-bookworm-slim AS build
ARG DENORT_BIN=
WORKDIR /src
COPY . .
RUN bash -c '. scripts/deno-env && deno install --frozen \
  && if [ -n "$DENORT_BIN" ]; then export DENORT_BIN="/src/$DENORT_BIN"; else unset DENORT_BIN; fi \
  && ./scripts/build'

FROM debian:bookworm-slim
RUN useradd --system --home /var/lib/skeid --create-home --shell /usr/sbin/nologin skeid \
 && mkdir -p /etc/skeid && chown skeid /var/lib/skeid
COPY --from=build /src/dist/skeid /usr/local/bin/skeid
COPY config.example.yaml /etc/skeid/config.example.yaml
USER skeid
WORKDIR /var/lib/skeid
EXPOSE 8090
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/skeid", "health", "--url", "http://127.0.0.1:8090/health"]
ENTRYPOINT ["/usr/local/bin/skeid"]
CMD ["serve", "--config", "/etc/skeid/config.yaml", "--listen", "0.0.0.0:8090"]
