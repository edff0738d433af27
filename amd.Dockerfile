# tprimat:amd - AMD MI300X image: Primus + Megatron-LM at MEGATRON_REF (+ tprimat's tran loop) on the Primus container.
# Build: ./shell/build.sh (or docker build -f amd.Dockerfile -t tprimat:amd .)
# The base tag is pinned; nothing of the base's ROCm torch/Primus/Megatron stack is replaced
# (see amd-requirements.txt and shell/install_requirements.sh). No secret enters any layer:
# HF_TOKEN is read at run time from secrets.env or the environment (.dockerignore keeps
# secrets.env, output/ and data out of the build context).
FROM rocm/primus:v25.11

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# TPRIMAT_IN_CONTAINER makes utils/config/load.py default DATA_DIR to the /data/tprimat mount.
# /opt/rocm/bin on PATH puts amd-smi and rocprofv3 (docs/DOCKER.md) in reach.
# HSA_NO_SCRATCH_RECLAIM=1 is AMD's recommended setting for MI300X training throughput.
ENV TPRIMAT_IN_CONTAINER=1 \
    DATA_DIR=/data/tprimat \
    HF_HOME=/root/.cache/huggingface \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/rocm/bin:${PATH} \
    HSA_NO_SCRATCH_RECLAIM=1

WORKDIR /workspace/code

# One Megatron-LM for `mega` on both vendors (docs/CONFORMANCE.md): MEGATRON_REF (config.env, passed by
# ./shell/build.sh as a build argument) is cloned to the same path in both images and its resolved commit
# recorded beside it, where train/rules/versions.py reads it. Nothing is pip-installed from it: the
# image's own megatron-core stays as the vendor shipped it, and pretrain_gpt.py imports the tree's copy.
# Its dataset index helpers are compiled here with Megatron's own compile_helpers (what pretrain_gpt.py runs at
# start-up), so the preflight's dataset probe, which runs before pretrain_gpt.py, finds them (issue 40).
ARG MEGATRON_REF=847781764fe468c90caec16309deded245c1022c
RUN git clone --filter=blob:none --no-checkout https://github.com/NVIDIA/Megatron-LM.git /opt/tprimat/megatron-lm \
    && git -C /opt/tprimat/megatron-lm checkout --quiet --detach "${MEGATRON_REF}" \
    && echo "${MEGATRON_REF} $(git -C /opt/tprimat/megatron-lm rev-parse HEAD)" \
        > /opt/tprimat/megatron-lm/TPRIMAT_MEGATRON_COMMIT \
    && python3 -c "import sys; sys.path.insert(0, '/opt/tprimat/megatron-lm'); \
from megatron.core.datasets.utils import compile_helpers; compile_helpers()"

# Requirements first, so code edits do not re-run the install layer.
COPY amd-requirements.txt shell/install_requirements.sh /tmp/tprimat-build/
RUN bash /tmp/tprimat-build/install_requirements.sh /tmp/tprimat-build/amd-requirements.txt \
    && rm -rf /tmp/tprimat-build

# The code is baked in for a self-contained image; shell/run_<step>.sh mounts the live checkout
# over it, so a rebuild is only needed when requirements change.
COPY . /workspace/code

CMD ["bash"]
