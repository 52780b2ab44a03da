# Skeid in a container: the compiled single binary on a slim base.
# Build dist/skeid first (scripts/build, needs DENORT_BIN), then: docker build -t skeid .
FROM debian:bookworm-slim
RUN useradd --system --home /var/lib/skeid --create-home skeid \
 && mkdir -p /etc/skeid /var/lib/skeid && chown skeid /var/lib/skeid
COPY dist/skeid /usr/local/bin/skeid
COPY config.example.yaml /etc/skeid/config.example.yaml
USER skeid
WORKDIR /var/lib/skeid
EXPOSE 8090
ENTRYPOINT ["/usr/local/bin/skeid"]
CMD ["serve", "--config", "/etc/skeid/config.yaml", "--listen", "0.0.0.0:8090"]
