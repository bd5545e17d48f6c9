# The lent GPU machine (device tool): run spmdgpt over the machine's own Python 3.12, JAX, PyTorch.
#
# That machine has no package registry. It ships jax/jaxlib + the CUDA plugin, optax,
# orbax-checkpoint, numpy, tiktoken, tqdm, pytest, PyTorch, pyarrow, tokenizers, fsspec and
# grain's own dependencies but grain; spmdgpt needs seven more (hydra-core, omegaconf,
# antlr4-python3-runtime, grain, array-record, portpicker, zstandard), carried as wheels
# (checked 2026-11-23: all have cp312 manylinux wheels but antlr4's), plus the data files
# (../shared does not travel with the working tree). Two steps:
#
#   here, once (network):  bash benchmarks/gpu_env.sh fetch     # -> .gpu/wheels, .gpu/data
#   there, every call:     source benchmarks/gpu_env.sh         # carry [".gpu"]
#
# `.gpu/` is git-ignored through .git/info/exclude (add `/.gpu/` there). Sourcing installs the
# wheels into /tmp/site with --no-deps, puts src/ and /tmp/site on PYTHONPATH (spmdgpt runs as
# `python3 -m spmdgpt`), points SPMDGPT_DATA at .gpu/data and prints every version that matters.

_fetch() {
    set -e
    mkdir -p .gpu/wheels .gpu/data
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .gpu/wheels \
        hydra-core==1.3.8 omegaconf==2.3.1 grain==0.2.18 array-record==0.8.6 portpicker==1.6.0 \
        zstandard==0.25.0
    # tokamax (the `gpu-kernels` extra: benchmarks/attention_kernels.py) and what it imports that the
    # machine lacks; xprof (100 MB, over the carry's 64 MiB) is imported by its benchmarking module
    # only: sourcing this file gives it a stand-in that raises when called
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 -d .gpu/wheels \
        tokamax==0.0.17 einshape==1.0 jaxtyping==0.3.11 wadler-lindig==0.1.8 qwix==0.1.8 flax==0.12.12 \
        treescope==0.1.10 rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2 pygments==2.21.0 \
        immutabledict==4.3.1 tensorboardx==2.6.5 pydantic==2.14.4 pydantic-core==2.50.5 \
        annotated-types==0.8.0 typing-inspection==0.4.5
    # antlr4-python3-runtime 4.9.3 (omegaconf's parser runtime) is published as an sdist only:
    # build its pure-Python wheel here.
    python3 -m pip wheel -q --no-deps -w .gpu/wheels antlr4-python3-runtime==4.9.3
    root=${SPMDGPT_DATA:-../shared/data}
    cp -r "$root/tinyshakespeare" "$root/gpt2-tokenizer" "$root/gutenberg-nltk" .gpu/data/
    du -sh .gpu
}

if [ "${1:-}" = fetch ]; then
    (_fetch)
else
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .gpu/wheels/*.whl || return 1 2>/dev/null || exit 1
    export PYTHONPATH="$PWD/src:/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
    if [ -d /tmp/site/tokamax ] && ! python3 -c "import xprof" 2>/dev/null; then  # (see _fetch)
        mkdir -p /tmp/site/xprof/cli && touch /tmp/site/xprof/__init__.py /tmp/site/xprof/cli/__init__.py
        printf 'def get_kernel_stats_tool(*args, **kwargs):\n    raise ImportError("xprof is not on this machine")\n' \
            > /tmp/site/xprof/cli/tools.py
    fi
    export SPMDGPT_DATA="$PWD/.gpu/data" SPMDGPT_CACHE=/tmp/spmdgpt-cache PYTHONUNBUFFERED=1
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
    python3 - <<'EOF'
import importlib.metadata as md, sys, jax
names = ["jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda13-pjrt", "optax", "orbax-checkpoint",
         "numpy", "tiktoken", "hydra-core", "omegaconf", "grain", "tokenizers", "pyarrow", "torch",
         "triton", "nvidia-cudnn-cu13", "tokamax", "flax"]
def v(n):
    try:
        return md.version(n)
    except md.PackageNotFoundError:
        return "-"
print("python", sys.version.split()[0], "|", " ".join(f"{n}={v(n)}" for n in names))
print("jax devices:", jax.devices())
EOF
fi
