"""Training and serving models, as a plain library: it knows no Django and no ClawGym app.

What runs in the trainer subprocess, beside a model on a gpu worker, or in a converter's subprocess lives here; the
`training_jobs` app beside it holds the records (runs, datasets, checkpoints, servers), the services that change
them, the background jobs that start these processes, and the pages. The app imports this package; nothing here
imports the app (scripts/import_graph.py checks it).

Trainers (training.trainers), each run as `accelerate launch -m training.trainers.KIND CONFIG.json` by the app's
training job, reading their config and data from files and reporting one JSON line per event on stdout:
    - sft: supervised fine-tuning (TRL's SFTTrainer, LoRA or full), with assistant-only loss masks.
    - grpo: RL on sandboxed rollouts (a TRL GRPOTrainer whose rollout_func asks the job for each step's rollouts).
    - merge_lora: a LoRA checkpoint merged into its base model, for servers that take one folder.
RL pieces (training.rl): the live policy server the trainer samples from (policy_server), the trainer side of a
    step's rollouts (rollout_func), groups and rewards (groups), and the named RL presets (presets).
Datasets: assistant loss masks from the chat template's generation markers (masks), ClawGym's tool-calling chat
    template for models whose own has none (chat_template).
Base models: converters from what a registry package ships (converters: `python -m training.converters NAME OUT`),
    and a tiny Qwen3 built in-process for laptops and CI (tiny_model).
Serving, each run behind the front by the app's serving backends (training_jobs.serve_backends):
    - serving_front: the authenticating reverse proxy in front of every model server (`python -m
      training.serving_front`), the only port a served model opens.
    - transformers_serve: `transformers serve` with a tolerant tool-call parser and a Unix socket (run by path).
    - batched_server: ClawGym's own CPU server (`python -m training.batched_server`), its rows sampled together by
      batched_sampling.

torch, transformers, TRL and peft are imported inside functions only (the web process imports masks, presets and
converters, never the training stack: training_jobs/tests/test_imports.py). A new training kind is a trainer module
here plus a kind in training_jobs/kinds/; a new serving backend is a server here (when ClawGym runs its own) plus a
named implementation in training_jobs/serve_backends.py.
"""
