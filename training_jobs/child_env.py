"""The environment of the programs a gpu job starts (the trainer, a LoRA merge, a model server and its front): what
they need from the worker's, by an allow-list, never the whole of it.

The worker holds SECRET_KEY, DATABASE_URL, the broker's URL with its password and every CLAWGYM_KEY_… (the model
providers' keys); a trainer or a model server needs none of them, and what it runs (a checkpoint's code, a chat
template, a tokenizer's files) should not be able to read them from its own environment. Passed: the system's own
variables (PATH, HOME, locale, temp folder), and those of the libraries training and serving use (CUDA and NCCL,
Hugging Face, torch, accelerate, TRL, vLLM, thread counts). CLAWGYM_CHILD_ENV_ALLOW adds names (or prefixes,
`NAME*`) for a site's own needs.
"""

import os

from django.conf import settings

NAMES = {
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "VIRTUAL_ENV",
    "PYTHONPATH",
    "PYTHONHASHSEED",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "REQUESTS_CA_BUNDLE",
    "CURL_CA_BUNDLE",
    "TOKENIZERS_PARALLELISM",
    "SAFETENSORS_FAST_GPU",
    "WORLD_SIZE",
    "LOCAL_RANK",
}
PREFIXES = (
    "LC_",
    "XDG_",
    "CUDA_",
    "CUDNN_",
    "NVIDIA_",
    "NCCL_",
    "CUBLAS_",
    "HIP_",
    "ROCM_",
    "ROCR_",
    "HSA_",
    "HF_",
    "HUGGINGFACE_",
    "TRANSFORMERS_",
    "TORCH",
    "PYTORCH_",
    "ACCELERATE_",
    "DS_",
    "TRL_",
    "VLLM_",
    "TRITON_",
    "OMP_",
    "MKL_",
    "KMP_",
    "OPENBLAS_",
    "GOMP_",
    "NUMEXPR_",
)
# Never passed, whatever a prefix or the setting says: a key of ours, or the front's own.
NEVER = ("CLAWGYM_KEY_", "CLAWGYM_FRONT_KEY", "CLAWGYM_POLICY_KEY", "SECRET_KEY", "DATABASE_URL", "VLLM_API_KEY")


def _allowed(name: str, extra_names: set, extra_prefixes: tuple) -> bool:
    if name.startswith(NEVER):
        return False
    return name in NAMES or name in extra_names or name.startswith(PREFIXES + extra_prefixes)


def child_env(**extra: str) -> dict:
    """The allow-listed part of this process's environment, then `extra` (what the program is given on purpose)."""
    configured = list(getattr(settings, "CLAWGYM_CHILD_ENV_ALLOW", []))
    extra_names = {name for name in configured if not name.endswith("*")}
    extra_prefixes = tuple(name[:-1] for name in configured if name.endswith("*") and len(name) > 1)
    env = {name: value for name, value in os.environ.items() if _allowed(name, extra_names, extra_prefixes)}
    env.update(extra)
    return env
