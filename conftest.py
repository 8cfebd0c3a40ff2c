pytest_plugins = [
    "lib.testing",
    "lib.browser_testing",
    "accounts.testing",
    "tasks.testing",
    "jobs.testing",
    "llm.testing",
    "sandbox.testing",
    "training.testing",
    "evaluation.testing",  # after sandbox.testing, which it imports (so that pytest still rewrites its asserts)
]
