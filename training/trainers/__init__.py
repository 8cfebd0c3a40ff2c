"""What runs inside the trainer subprocess (`accelerate launch -m training.trainers.sft CONFIG.json`).

No Django here: the trainer reads its config and data from files and reports on stdout, one JSON line per event.
torch, transformers, TRL and peft are imported only in these modules, which the web process never loads.
"""
