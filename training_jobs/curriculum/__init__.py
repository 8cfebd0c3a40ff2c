"""A curriculum a small instruct model can learn through ClawGym: 219 generated file tasks of 8 kinds, by seed.

kinds.py    the eight kinds (write, append, copy, count, extract, sort, replace, folder): instruction, inputs,
            reference solution and the answer the checker checks
checker.py  the one checker every task ships as reward/check.py (its task in reward/expected.json)
build.py    the splits (train, heldout, unseen_kind) drawn by seed, written as ClawGym task folders
importing.py  (Django) importing them and freezing the held-out splits as benchmark versions

`manage.py curriculum build|import` is the way in. Nothing here but importing.py needs Django.
"""
