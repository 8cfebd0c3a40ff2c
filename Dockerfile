# The app image (clawgym/app:latest): the web app, the workers and the scheduler, all from one image.
# Built by scripts/images/app.sh (`make images`), which first downloads every wheel on the host into
# deploy/.build/wheels/ (pip wheel): nothing here reaches a package index, so the build works where no registry is
# reachable. FROM the project's Debian base (scripts/images/base.sh); any Debian bookworm with python3-venv would do.
#
# TRAINING=1 (clawgym/app-gpu:latest, for the gpu worker): requirements-training.txt as well, torch first and alone
# (see the Makefile's install), from deploy/.build/wheels-training/.
ARG BASE_IMAGE=clawgym/base:bookworm
FROM ${BASE_IMAGE} AS build
ARG TRAINING=0
COPY requirements.txt requirements-nodeps.txt /src/
COPY deploy/.build/wheels /wheels
RUN python3 -m venv /opt/venv \
 && /opt/venv/bin/pip install --quiet --no-index --find-links /wheels --upgrade pip \
 && /opt/venv/bin/pip install --quiet --no-index --find-links /wheels -r /src/requirements.txt \
 && /opt/venv/bin/pip install --quiet --no-index --find-links /wheels --no-deps -r /src/requirements-nodeps.txt
# Its own layers: a change to the training requirements leaves the app's above as they are.
COPY requirements-training.txt /src/
COPY deploy/.build/wheels-training /wheels-training
RUN if [ "$TRAINING" = 1 ]; then \
      /opt/venv/bin/pip install --quiet --no-index --find-links /wheels-training --find-links /wheels \
        $(grep -E '^torch==' /src/requirements-training.txt) \
   && /opt/venv/bin/pip install --quiet --no-index --find-links /wheels-training --find-links /wheels \
        -r /src/requirements-training.txt; \
    fi \
 && find /opt/venv -name __pycache__ -prune -exec rm -rf {} +
# The sources, less the build folder (the context has to hold the wheels), byte-compiled once here so that no
# process needs to write into /app.
COPY . /app
RUN rm -rf /app/deploy/.build && /opt/venv/bin/python -m compileall -q /app >/dev/null

FROM ${BASE_IMAGE}
# An unprivileged user for the web app, the default worker and the scheduler. The sandbox worker runs as root (see
# docker-compose.yml): it hands each workspace to the sandbox's uid and speaks to the Docker engine. /run/clawgym-web
# holds the web app's socket (a volume shared with the front only).
RUN useradd --system --uid 10001 --home-dir /app --shell /usr/sbin/nologin clawgym \
 && mkdir -p /data /run/clawgym-web && chown clawgym:clawgym /data /run/clawgym-web
# The wheels stay in the build stage: only the installed virtual environment and the sources come over.
COPY --from=build /opt/venv /opt/venv
COPY --from=build /app /app
WORKDIR /app
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    DJANGO_SETTINGS_MODULE=clawgym_site.settings PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 \
    CLAWGYM_VAR_DIR=/data
USER clawgym
EXPOSE 8000
CMD ["uvicorn", "clawgym_site.asgi:application", "--host", "0.0.0.0", "--port", "8000", "--http", "lib.http_timeouts:HttpToolsProtocol", "--timeout-keep-alive", "5"]
