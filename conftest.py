pytest_plugins = [
    "clawgym_site.testing",
    "clawgym_site.browser_testing",
    "jobs.testing",
    "llm.testing",
    "sandbox.testing",
    "evaluation.testing",  # after sandbox.testing, which it imports (so that pytest still rewrites its asserts)
]
