# Dockerfile: Caddy with the caddywebhook plugin, built the way Caddy's
# official images build plugins: caddy:<version>-builder runs xcaddy, and
# the binary replaces the one in caddy:<version>.
#
#	docker build -t caddy-webhook .
#	docker run -d --name hooks -p 80:80 -p 443:443 -p 443:443/udp \
#		-v caddy-data:/data -v caddy-config:/config \
#		-e WEBHOOK_SITE=hooks.example.com \
#		-e GITHUB_WEBHOOK_SECRET=… -e WEBHOOK_UPSTREAM=http://app:3000/github \
#		caddy-webhook
#	docker exec hooks caddy webhook stats
#
# The configuration is examples/Caddyfile.docker, copied to
# /etc/caddy/Caddyfile; mount your own there to replace it.
#
# Build arguments:
#
#	CADDY_TAG             the official images' tag, default 2.11
#	CADDY_RELEASE         the Caddy version xcaddy builds, default v2.11.9,
#	                      the version go.mod requires (the least that works)
#	CADDYWEBHOOK_VERSION  empty (the default): build the plugin from this
#	                      directory, and `caddy list-modules --versions`
#	                      shows v0.0.0-00010101000000-000000000000 for it.
#	                      A release tag such as v0.1.0: build that release
#	                      from the Go module proxy instead (the source here
#	                      is then unused), and Caddy shows v0.1.0.
#	CADDY_UID, CADDY_GID  the numeric user and group Caddy runs as, default
#	                      65532:65532, an id no host account is likely to have
#
# The queue: SQLite at /data/caddy/webhook/queue.db (the official image sets
# XDG_DATA_HOME=/data and declares /data a volume). Keep /data on a named
# volume or a bind mount, or every event the container accepted and had not
# delivered is lost with it. The plugin creates the directory 0700 and the
# database, with its -wal and -shm files, 0600.
#
# Caddy runs as the unprivileged CADDY_UID, not as root as in the official
# image, so an exec target's programs do not run as root either. Its files
# live in /data and /config, which this image gives to that user: a named
# volume starts with that ownership; a bind-mounted host directory must
# belong to it (`chown -R 65532:65532 ./data`). The chown is kept in the
# image by BuildKit, Docker's builder since 23.0; the legacy builder
# discards changes to a directory its base image declared a volume. Binding
# ports 80 and 443 as that user needs either Docker's default for containers
# (net.ipv4.ip_unprivileged_port_start=0) or the cap_net_bind_service file
# capability xcaddy sets in the builder (XCADDY_SETCAP=1, kept by BuildKit's
# COPY); with neither, listen on ports above 1023.
#
# No container runtime was available where this file was written, so each
# command it runs was checked by running the same command outside a
# container, on Debian 12 with Go 1.26.8 and xcaddy v0.4.5, as root. (That
# was before --with named the module root; the build step's note on the
# module proxy is from then.)
#
#  1. COPY . /src/caddywebhook: the repository copied to a temporary
#     /src/caddywebhook with the patterns of .dockerignore excluded.
#  2. The builder's RUN, both branches of its `if` with a stub xcaddy that
#     prints its arguments (under busybox sh, the builder's /bin/sh), then
#     the source branch for real with xcaddy v0.4.5 and
#     XCADDY_SETCAP=1 GOTOOLCHAIN=auto, writing to a temporary path instead
#     of /usr/bin/caddy. The machine's module proxy refuses (403) the
#     lookup of this plugin's package path as a module, which
#     proxy.golang.org answers with "not found", and it has no checksum
#     database, so that build ran with GOPROXY pointed at the local module
#     cache and GOSUMDB=off; the release branch needs a published tag and
#     was not built.
#  3. The final stage's RUN, under busybox sh (the Alpine image's shell and
#     coreutils) in a chroot with empty /data and /config.
#  4. The image's command, `caddy run --config /etc/caddy/Caddyfile
#     --adapter caddyfile`, with the built binary as uid and gid 65532
#     (setpriv), the image's environment (env -i; XDG_DATA_HOME and
#     XDG_CONFIG_HOME pointing at temporary copies of /data and /config
#     prepared by step 3's RUN) and CADDY_ADMIN and WEBHOOK_SITE set to free
#     ports: a signed GitHub event got 202 and was delivered, a bad
#     signature got 401, the database was created 0600 in a 0700
#     directory, `caddy webhook stats` answered, and `caddy list-modules
#     --versions` and `caddy build-info` showed the plugin.

ARG CADDY_TAG=2.11

FROM caddy:${CADDY_TAG}-builder AS builder
ARG CADDY_RELEASE=v2.11.9
ARG CADDYWEBHOOK_VERSION=
# The builder image's Go may be older than the go line of go.mod; let Go
# fetch the toolchain go.mod asks for instead of refusing.
ENV GOTOOLCHAIN=auto
# Set by the official builder image already; repeated because binding
# ports 80 and 443 as a non-root user may rely on it (above).
ENV XCADDY_SETCAP=1
COPY . /src/caddywebhook
RUN if [ -n "$CADDYWEBHOOK_VERSION" ]; then \
		xcaddy build "$CADDY_RELEASE" --output /usr/bin/caddy \
			--with "github.com/caddywebhook/caddywebhook@$CADDYWEBHOOK_VERSION"; \
	else \
		xcaddy build "$CADDY_RELEASE" --output /usr/bin/caddy \
			--with github.com/caddywebhook/caddywebhook \
			--replace github.com/caddywebhook/caddywebhook=/src/caddywebhook; \
	fi

FROM caddy:${CADDY_TAG}
ARG CADDY_UID=65532
ARG CADDY_GID=65532
COPY --from=builder /usr/bin/caddy /usr/bin/caddy
COPY examples/Caddyfile.docker /etc/caddy/Caddyfile
RUN mkdir -p /data/caddy /config/caddy \
	&& chown -R "$CADDY_UID:$CADDY_GID" /data /config \
	&& chmod 0700 /data /config
USER ${CADDY_UID}:${CADDY_GID}
