# syntax=docker/dockerfile:1
# Trainer image: python -m trainer.task on the official TensorFlow 2.21 image.
#   CPU: docker build -t tfjob-trainer:0.1.0 .
#   GPU: docker build --build-arg BASE_IMAGE=tensorflow/tensorflow:2.21.0-gpu -t tfjob-trainer:0.1.0-gpu .
# Serving image (the `serve` target): the trainer image plus the [serve] extra's kserve, for
# `launcher serve --runtime-image` (python -m trainer.serve, the same TensorFlow):
#   docker build --target serve -t tfjob-serve:0.1.0 .
# The trainer is installed as the project's own distribution, tfjob-launcher, built by pip
# from pyproject.toml and trainer/: the image's trainer code and version are the package's
# (`python -m pip show tfjob-launcher` in the image), so the two cannot drift apart.
# The build context (.dockerignore) is pyproject.toml, LICENSE and trainer/ only: the
# launcher never runs in the pods (it renders and watches the TFJob from outside), so it is
# not in the image, and neither is the `tfjob` console script, which would need it.
# TFJob pods run the trainer as uid/gid 1000 (runAsNonRoot), also the image's default user.
ARG BASE_IMAGE=tensorflow/tensorflow:2.21.0
# Global: each stage that uses them declares them again (a stage does not inherit another's ARG).
ARG TRAINER_UID=1000
ARG TRAINER_GID=1000

# What pip builds from, named file by file (the same paths as .dockerignore lets in).
FROM scratch AS source
COPY pyproject.toml LICENSE /src/
COPY trainer/ /src/trainer/

FROM ${BASE_IMAGE} AS trainer

ARG TRAINER_UID
ARG TRAINER_GID

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/home/trainer \
    KERAS_HOME=/home/trainer/.keras

# A named user for the uid unless the base image already has one (e.g. "ubuntu").
RUN (getent group "${TRAINER_GID}" >/dev/null || groupadd --gid "${TRAINER_GID}" trainer) \
 && (getent passwd "${TRAINER_UID}" >/dev/null \
     || useradd --uid "${TRAINER_UID}" --gid "${TRAINER_GID}" --no-log-init --no-create-home \
                --home-dir /home/trainer --shell /usr/sbin/nologin trainer) \
 && mkdir -p /app /home/trainer \
 && chown "${TRAINER_UID}:${TRAINER_GID}" /home/trainer

# The sources are mounted for this step only and copied to a scratch directory (setuptools
# writes build/ and *.egg-info next to them); no layer of the image keeps them. No network:
# no build isolation, the base's setuptools builds it (TensorFlow's wheel requires
# setuptools; --check-build-dependencies stops on one older than pyproject's >=77) and
# --no-deps (the base has TensorFlow; the launcher's dependencies serve the launcher only).
# README.md, the package's long description, stays out of the context so that editing the
# docs does not rebuild the image; a one-line stand-in takes its place. Installed as root
# into the base's site-packages: read-only for the trainer user.
RUN --mount=type=bind,from=source,source=/src,target=/run/tfjob-src \
    cp -R /run/tfjob-src /tmp/tfjob-src \
 && echo "Trainer of tfjob-launcher (see its README)." >/tmp/tfjob-src/README.md \
 && python -m pip install --no-deps --no-build-isolation --check-build-dependencies --no-cache-dir \
        --disable-pip-version-check --root-user-action=ignore /tmp/tfjob-src \
 && python -c "import importlib.metadata as m, pathlib; d = m.distribution('tfjob-launcher'); \
[pathlib.Path(d.locate_file(f)).unlink() for f in d.files if f.name == 'tfjob']" \
 && rm -rf /tmp/tfjob-src

# Empty and root-owned: python -m puts the working directory first on sys.path, so nothing
# here can shadow the installed trainer.
WORKDIR /app
USER ${TRAINER_UID}:${TRAINER_GID}
# No CMD: a TFJob with empty args must run the trainer, not print help.
ENTRYPOINT ["python", "-m", "trainer.task"]

# The serving image: kserve 0.21.0 and what it needs beyond the trainer image, every wheel
# pinned by sha256 in serve-requirements.lock (resolved against the trainer image's Python
# and packages: scripts/image/build.sh --lock), installed as root into the same
# site-packages. PyPI is the only network access of any build step; behind a
# TLS-intercepting proxy pass its CA as the optional build secret `pip-ca`
# (docker build --secret id=pip-ca,src=/etc/ssl/certs/ca-certificates.crt): mounted for this
# step only, never in a layer. The server runs as the trainer's uid on KServe's port.
FROM trainer AS serve
ARG TRAINER_UID
ARG TRAINER_GID
USER 0
RUN --mount=type=bind,source=serve-requirements.lock,target=/run/serve-requirements.lock \
    --mount=type=secret,id=pip-ca,target=/run/pip-ca.crt \
    if [ -s /run/pip-ca.crt ]; then export PIP_CERT=/run/pip-ca.crt; fi \
 && python -m pip install --no-deps --require-hashes --only-binary=:all: --no-cache-dir \
        --disable-pip-version-check --root-user-action=ignore -r /run/serve-requirements.lock \
 && python -c "import kserve, trainer.serve.model"
USER ${TRAINER_UID}:${TRAINER_GID}
EXPOSE 8080
ENTRYPOINT ["python", "-m", "trainer.serve", "--host", "0.0.0.0", "--port", "8080"]

# The default target (last): the trainer image.
FROM trainer
