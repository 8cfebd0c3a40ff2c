# ClawGym. `make run` starts the app with its embedded defaults (`make demo`: with the demo models); `make test` runs
# every test.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: run demo test install system-deps harness runtime migrate examples bench clean docker images deploy-test docs docs-serve docs-screenshots reference fuzz

# Reinstalled whenever a requirements file changes (pip skips what is already satisfied). The training stack
# (requirements-training.txt) is in because its tests need it; torch goes in alone before it, so that nothing that
# depends on torch makes pip pick the CUDA build (here the 2.13.0+cpu wheel on disk is chosen). A clean install of
# the training part takes about 5 minutes (torch 2.5, the rest 2.5).
$(VENV)/.installed: requirements.txt requirements-dev.txt requirements-nodeps.txt requirements-training.txt requirements-docs.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet $$(grep -E '^torch==' requirements-training.txt)
	$(PY) -m pip install --quiet -r requirements-training.txt
	$(PY) -m pip install --quiet --no-deps -r requirements-nodeps.txt
	touch $@

install: $(VENV)/.installed

# System packages the tests and sandbox need (Debian): chromium for browser tests, bubblewrap for the sandbox.
system-deps:
	@scripts/system-deps.sh

# The real OpenClaw agent harness (Node 24 + the pinned openclaw npm package) in the git-ignored .harness/.
# Installed once (about 650 MB from npm); afterwards rollouts and their tests work offline.
HARNESS_STAMP := .harness/.installed-node24-openclaw2026.9.6
$(HARNESS_STAMP): scripts/install-harness.sh
	scripts/install-harness.sh

harness: $(HARNESS_STAMP)

# The sandbox runtime (sandbox/runtime/packages.txt): a Debian root folder the sandbox shows instead of the host's
# system, built once into the git-ignored .runtime/<version>/ with debootstrap (needs root; about 2 minutes and
# 500 MB). The script does nothing when this version is built already.
runtime:
	scripts/build-runtime.sh

migrate: install
	$(PY) manage.py migrate --noinput

examples: migrate
	$(PY) manage.py import_tasks examples/tasks

run: migrate harness runtime
	$(PY) manage.py collectstatic --noinput --verbosity 0
	$(PY) manage.py import_tasks examples/tasks
	$(PY) manage.py ensure_admin
	HOST=$(HOST) PORT=$(PORT) PY=$(PY) exec scripts/run.sh

# `make run` with the demo models (manage.py demo_models): two scripted agents, a judge and a generator on a local
# server, registered as the endpoints demo-agent-good, demo-agent-weak, demo-judge and demo-generator (shown as
# "demo" on every page), so that synthesis, evaluation, comparison and training can be tried without a real model.
# Before serving, `demo_models --setup` makes (once) the frozen benchmark "demo" of the example tasks and the demo
# reviewers ann and ben, and prints their logins beside the admin's.
demo: migrate runtime
	$(PY) manage.py import_tasks examples/tasks
	$(PY) manage.py ensure_admin
	$(PY) manage.py demo_models --setup
	$(MAKE) run CLAWGYM_DEMO_MODELS=1

# Runs the whole suite on the database DATABASE_URL names (the embedded SQLite default when unset).
test: install system-deps harness runtime
	$(PY) -m pytest $(PYTEST_ARGS)

# Docker (issue: the Docker sandbox backend and the compose deployment). `make docker` installs the engine where it
# is missing and starts one where none answers (scripts/docker-engine.sh; `scripts/docker-engine.sh stop` stops it);
# `make images` builds the project's images from local packages; `make deploy-test` brings the compose stack up,
# runs the deployment test against it and tears it down (exit 0 only when every step passed).
docker:
	scripts/docker-engine.sh start

images: install harness runtime
	scripts/build-images.sh

deploy-test: images
	scripts/deploy-test.sh

# The API fuzzer (bench/fuzz_api.py, profiles in bench/fuzz.toml): Schemathesis over the OpenAPI schema, every
# operation as every role (anonymous, viewer, reviewer, admin), against the app under uvicorn on a seeded throwaway
# SQLite database, all of it in a network namespace of its own (loopback only). Its last line is
# {"operations": N, "requests": R, "server_errors": S, "schema_violations": V}; it fails unless S and V are 0.
# PROFILE=ci (bounded and deterministic: what CI runs, about 3 minutes here) or PROFILE=long (the bench: more examples
# and the stateful phase).
PROFILE ?= ci
fuzz: install
	$(PY) bench/fuzz_api.py --profile $(PROFILE)

bench: migrate
	$(PY) bench/import_bench.py

# The documentation site (mkdocs.yml, docs/). `make reference` writes the reference pages from the code
# (scripts/gen_reference.py); `make docs` builds the site strictly into site/ (a broken link or a page missing from
# the nav fails it; site/index.html also works opened from disk); `make docs-serve` serves it and rebuilds on change.
DOCS_PORT ?= 8001
reference: install
	$(PY) scripts/gen_reference.py

docs: install
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

docs-serve: install
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs serve --dev-addr $(HOST):$(DOCS_PORT)

# The pictures in docs/images/: the browser test of the pages the docs show saves each, 1280x800, from a database
# filled with the demo models' work (demo/tests/test_browser_docs_screenshots.py).
docs-screenshots: install system-deps runtime
	CLAWGYM_DOCS_SCREENSHOTS=1 $(PY) -m pytest demo/tests/test_browser_docs_screenshots.py -q

clean:
	rm -rf $(VENV) var
