# syntax=docker/dockerfile:1
# Trainer image: python -m trainer.task on the official TensorFlow 2.21 image.
#   CPU: docker build -t tfjob-trainer:0.1.0 .
#   GPU: docker build --build-arg BASE_IMAGE=tensorflow/tensorflow:2.21.0-gpu -t tfjob-trainer:0.1.0-gpu .
# Only trainer/ goes in (the launcher never runs in the pods). TFJob pods run it as
# uid/gid 1000 (runAsNonRoot), which is also the image's default user.
ARG BASE_IMAGE=tensorflow/tensorflow:2.21.0
FROM ${BASE_IMAGE}

ARG TRAINER_UID=1000
ARG TRAINER_GID=1000

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONPATH=/app \
    HOME=/home/trainer \
    KERAS_HOME=/home/trainer/.keras

# A named user for the uid unless the base image already has one (e.g. "ubuntu").
RUN (getent group "${TRAINER_GID}" >/dev/null || groupadd --gid "${TRAINER_GID}" trainer) \
 && (getent passwd "${TRAINER_UID}" >/dev/null \
     || useradd --uid "${TRAINER_UID}" --gid "${TRAINER_GID}" --no-log-init --no-create-home \
                --home-dir /home/trainer --shell /usr/sbin/nologin trainer) \
 && mkdir -p /app /home/trainer \
 && chown "${TRAINER_UID}:${TRAINER_GID}" /home/trainer

WORKDIR /app
# Root-owned and read-only for the trainer user: the code cannot be changed at run time.
COPY trainer/ /app/trainer/

USER ${TRAINER_UID}:${TRAINER_GID}
# No CMD: a TFJob with empty args must run the trainer, not print help.
ENTRYPOINT ["python", "-m", "trainer.task"]
